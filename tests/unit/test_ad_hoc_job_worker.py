"""Job-worker ad-hoc sub-processes on an in-process partition: the AD_HOC_SUB_PROCESS job, a worker's result
activating inner elements with local variables, the job created anew when a path ends (a waiting one cancelled),
the completion condition fulfilled with and without cancelling what runs, refused results, and replay."""

from __future__ import annotations

from pathlib import Path

from broker.protocol.enums import JobIntent, ProcessInstanceIntent, RecordType, RejectionType, ValueType
from broker.protocol.record import Record
from broker.tools.inspect import iter_records
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live

PI = ProcessInstanceIntent


def _result(*activate: tuple[str, dict], fulfilled: bool = False, cancel: bool = False) -> dict:
    return {
        "type": "AD_HOC_SUB_PROCESS",
        "activateElements": [{"elementId": e, "variables": v} for e, v in activate],
        "isCompletionConditionFulfilled": fulfilled,
        "isCancelRemainingInstances": cancel,
    }


async def _decide(d: Driver, job_key: int, result: dict, variables: dict | None = None) -> Record:
    value = {"variables": variables or {}, "result": result}
    return await d.send(ValueType.JOB, JobIntent.COMPLETE, value, job_key)


async def _one(d: Driver, job_type: str) -> int:
    await d.settle()
    (key,) = await d.activate(job_type)
    return key


def _job(d: Driver, key: int) -> dict:
    return d.read(lambda s: s.jobs.get(key))["value"]


def _events(d: Driver, value_type: ValueType) -> list[Record]:
    return [r for r in iter_records(d.directory) if r.value_type == value_type and r.record_type == RecordType.EVENT]


async def test_a_worker_activates_tools_and_completes_the_sub_process(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("ad-hoc-agent.bpmn"))
    pi = accepted(await d.create("ad-hoc-agent", {"question": "why?"}))
    first = await _one(d, "agent-loop")
    job = _job(d, first)
    assert (job["jobKind"], job["elementId"], job["retries"]) == ("AD_HOC_SUB_PROCESS", "agent", 3)
    assert job["customHeaders"] == {"model": "small"}
    agent_key = job["elementInstanceKey"]
    assert d.read(lambda s: s.variables.get_local(agent_key, "toolResults"))[1] == []

    # refused results change nothing
    unknown = await _decide(d, first, _result(("search", {}), ("nope", {}), ("fetch-check", {})))
    assert unknown.rejection_type == RejectionType.NOT_FOUND
    assert unknown.rejection_reason == (
        f"Expected to activate activities for ad-hoc sub-process with key '{agent_key}', but the given elements "
        "[nope, fetch-check] do not exist."
    )
    both = await _decide(d, first, _result(("search", {}), fulfilled=True))
    assert both.rejection_type == RejectionType.INVALID_ARGUMENT
    assert "contains elements to be activated while the completion condition is fulfilled" in both.rejection_reason

    accepted(await _decide(d, first, _result(("search", {"tool": "search"}), ("fetch", {"tool": "fetch"})), {"n": 1}))
    search, fetch = await _one(d, "agent-search"), await _one(d, "agent-fetch")
    inner = {_job(d, k)["elementId"]: _job(d, k)["elementInstanceKey"] for k in (search, fetch)}
    # the activation's variables are local to the inner instance around each tool
    scope_of_search = d.read(lambda s: s.elements.get(inner["search"]).value.flow_scope_key)
    assert d.read(lambda s: s.variables.get_local(scope_of_search, "tool"))[1] == "search"
    assert d.read(lambda s: s.variables.get_local(pi.key, "n"))[1] == 1  # job variables merged up
    assert await d.activate("agent-loop") == []  # no job while the worker's tools run

    accepted(await d.complete(search, {"out": "found"}))
    second = await _one(d, "agent-loop")  # a path ended: the worker decides again
    assert d.read(lambda s: s.variables.get_local(agent_key, "toolResults"))[1] == [{"tool": "search", "out": "found"}]
    accepted(await d.complete(fetch, {"out": "page"}))
    await d.settle()
    # fetch's path goes on to fetch-check; the job waiting for a worker is still the second one
    check = await _one(d, "agent-fetch-check")
    assert d.read(lambda s: s.jobs.get(second)) is not None
    accepted(await d.complete(check, {"out": "checked"}))
    await d.settle()
    assert d.read(lambda s: s.jobs.get(second)) is None  # cancelled: a new one replaced it
    third = await _one(d, "agent-loop")
    canceled = [r.key for r in _events(d, ValueType.JOB) if r.intent == JobIntent.CANCELED]
    assert canceled == [second]

    accepted(await _decide(d, third, _result(fulfilled=True), {"answer": 42}))
    after = await _one(d, "agent-after")
    assert d.read(lambda s: s.variables.get_local(pi.key, "toolResults"))[1] == [
        {"tool": "search", "out": "found"},
        {"tool": "fetch", "out": "checked"},
    ]
    assert d.read(lambda s: s.variables.get_local(pi.key, "answer"))[1] == 42
    accepted(await d.complete(after))
    await d.settle()
    assert d.read(lambda s: s.elements.get(pi.key)) is None
    await d.close()
    check_replay_equals_live(tmp_path / "p" / "1", tmp_path)


async def test_a_fulfilled_condition_waits_for_what_runs_or_cancels_it(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("ad-hoc-agent.bpmn"))
    # waiting: the sub-process is COMPLETING until the running tool is done
    waiting = accepted(await d.create("ad-hoc-agent", {}))
    job = await _one(d, "agent-loop")
    accepted(await _decide(d, job, _result(("search", {"tool": "search"}), ("fetch", {"tool": "fetch"}))))
    search, fetch = await _one(d, "agent-search"), await _one(d, "agent-fetch")
    accepted(await d.complete(search, {"out": 1}))
    job = await _one(d, "agent-loop")
    accepted(await _decide(d, job, _result(fulfilled=True)))
    await d.settle()
    inner_key = d.read(lambda s: s.elements.get(_job(d, fetch)["elementInstanceKey"]).value.flow_scope_key)
    agent = d.read(lambda s: s.elements.get(s.elements.get(inner_key).value.flow_scope_key))
    assert agent.value.element_id == "agent"
    assert agent.state == PI.ELEMENT_COMPLETING
    assert await d.activate("agent-after") == []
    accepted(await d.complete(fetch, {"out": 2}))
    check = await _one(d, "agent-fetch-check")
    accepted(await d.complete(check, {"out": 3}))
    await _one(d, "agent-after")
    assert await d.activate("agent-loop") == []  # no new decision once fulfilled
    assert d.read(lambda s: s.variables.get_local(waiting.key, "toolResults"))[1] == [
        {"tool": "search", "out": 1},
        {"tool": "fetch", "out": 3},
    ]

    # cancelling: what still runs is terminated at once
    cancelled = accepted(await d.create("ad-hoc-agent", {}))
    job = await _one(d, "agent-loop")
    accepted(await _decide(d, job, _result(("search", {"tool": "search"}), ("fetch", {"tool": "fetch"}))))
    search, fetch = await _one(d, "agent-search"), await _one(d, "agent-fetch")
    accepted(await d.complete(search, {"out": "s"}))
    job = await _one(d, "agent-loop")
    accepted(await _decide(d, job, _result(fulfilled=True, cancel=True)))
    await _one(d, "agent-after")
    assert d.read(lambda s: s.jobs.get(fetch)) is None
    terminated = [
        r.value["elementId"]
        for r in _events(d, ValueType.PROCESS_INSTANCE)
        if r.intent == PI.ELEMENT_TERMINATED and r.value["processInstanceKey"] == cancelled.key
    ]
    assert terminated == ["fetch", "agent#innerInstance"]
    # an instance cancelled while the worker decides: its job goes with it
    gone = accepted(await d.create("ad-hoc-agent", {}))
    job = await _one(d, "agent-loop")
    accepted(await d.cancel(gone.key))
    await d.settle()
    late = await _decide(d, job, _result(fulfilled=True))
    assert late.rejection_type == RejectionType.NOT_FOUND
    await d.close()
    check_replay_equals_live(tmp_path / "p" / "1", tmp_path)
