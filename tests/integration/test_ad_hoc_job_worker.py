"""Job-worker ad-hoc sub-processes against a real ``weir start``, as an AI agent drives one: its job (kind
AD_HOC_SUB_PROCESS) completed with a result that activates tools with variables of their own, the job created anew
each time a tool's path ends, then the completion condition fulfilled; refused results answer with the right status;
a pyzeebe worker runs the tools."""

import asyncio
from collections.abc import Iterator

import grpc
import pytest
from pyzeebe import ZeebeWorker, create_insecure_channel

from tests.harness import WeirProcess
from tests.integration.clients import (
    Stub,
    activate,
    activate_now,
    complete,
    complete_with_result,
    create_with_result,
    deploy,
    job_kind,
    variables_of,
)


@pytest.fixture(scope="module")
def channel(weir: WeirProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(weir.address) as c:
        yield c


def _tool(element_id: str, **variables: object) -> dict:
    return {"elementId": element_id, "variables": {"tool": element_id, **variables}}


def test_an_agent_activates_tools_decides_again_after_each_and_then_completes(stub: Stub, channel) -> None:
    d = deploy(stub, "ad-hoc-agent.bpmn")
    result = create_with_result(stub, d.pid(), {"question": "why?"})
    (job,) = activate(stub, d.type("agent-loop"))
    assert job_kind(job) == "AD_HOC_SUB_PROCESS" and job.elementId == "agent"
    assert variables_of(job) == {"question": "why?", "toolResults": []}
    decision = {"type": "adHocSubProcess", "activateElements": [_tool("search", q="why"), _tool("fetch")]}
    complete_with_result(channel, job.key, decision, thinking="step 1")
    (search,) = activate(stub, d.type("agent-search"))
    assert job_kind(search) == "BPMN_ELEMENT"
    assert variables_of(search)["q"] == "why" and variables_of(search)["thinking"] == "step 1"
    complete(stub, search.key, {"out": "found"})
    (again,) = activate(stub, d.type("agent-loop"))  # the search path ended: the agent decides again
    assert variables_of(again)["toolResults"] == [{"tool": "search", "out": "found"}]
    (fetch,) = activate(stub, d.type("agent-fetch"))
    complete(stub, fetch.key, {"out": "page"})
    (check,) = activate(stub, d.type("agent-fetch-check"))
    complete(stub, check.key, {"out": "checked"})
    (last,) = activate(stub, d.type("agent-loop"))  # the waiting job was replaced
    assert variables_of(last)["toolResults"][-1] == {"tool": "fetch", "out": "checked"}
    complete_with_result(channel, last.key, {"type": "adHocSubProcess", "isCompletionConditionFulfilled": True})
    (after,) = activate(stub, d.type("agent-after"))
    assert [r["tool"] for r in variables_of(after)["toolResults"]] == ["search", "fetch"]
    complete(stub, after.key)
    result.result(timeout=10)


def test_refused_results_and_cancelling_the_remaining_tools(stub: Stub, channel) -> None:
    d = deploy(stub, "ad-hoc-agent.bpmn")
    result = create_with_result(stub, d.pid(), {})
    (job,) = activate(stub, d.type("agent-loop"))
    cases = [
        ({"type": "adHocSubProcess", "activateElements": [_tool("unknown")]}, grpc.StatusCode.NOT_FOUND),
        (
            {"type": "adHocSubProcess", "activateElements": [_tool("search")], "isCompletionConditionFulfilled": True},
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        ({"type": "robot"}, grpc.StatusCode.INVALID_ARGUMENT),
    ]
    for decision, code in cases:
        with pytest.raises(grpc.RpcError) as refused:
            complete_with_result(channel, job.key, decision)
        assert refused.value.code() == code, refused.value.details()
    complete_with_result(
        channel, job.key, {"type": "adHocSubProcess", "activateElements": [_tool("search"), _tool("fetch")]}
    )
    (search,) = activate(stub, d.type("agent-search"))
    (fetch,) = activate(stub, d.type("agent-fetch"))
    complete(stub, search.key, {"out": 1})
    (again,) = activate(stub, d.type("agent-loop"))
    decision = {"type": "adHocSubProcess", "isCompletionConditionFulfilled": True, "isCancelRemainingInstances": True}
    complete_with_result(channel, again.key, decision)
    (after,) = activate(stub, d.type("agent-after"))
    assert variables_of(after)["toolResults"] == [{"tool": "search", "out": 1}]
    with pytest.raises(grpc.RpcError) as gone:  # fetch was terminated with the sub-process
        complete(stub, fetch.key)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    complete(stub, after.key)
    result.result(timeout=10)


def test_a_pyzeebe_worker_runs_the_tools_the_agent_chose(weir: WeirProcess, stub: Stub, channel) -> None:
    d = deploy(stub, "ad-hoc-agent.bpmn")
    result = create_with_result(stub, d.pid(), {})
    (job,) = activate(stub, d.type("agent-loop"))
    complete_with_result(channel, job.key, {"type": "adHocSubProcess", "activateElements": [_tool("search", q="x")]})

    async def run_worker() -> object:
        worker = ZeebeWorker(create_insecure_channel(grpc_address=weir.address))

        @worker.task(task_type=d.type("agent-search"))
        async def search(q: str) -> dict:
            return {"out": q * 2}

        task = asyncio.create_task(worker.work())
        try:
            for _ in range(200):  # the tool's path ends when the worker completes it: the agent's job is back
                jobs = activate_now(stub, d.type("agent-loop"))
                if jobs:
                    return jobs[0]
                await asyncio.sleep(0.05)
            raise AssertionError("the agent's job was not created again after the tool ran")
        finally:
            await worker.stop()
            await asyncio.gather(task, return_exceptions=True)

    again = asyncio.run(run_worker())
    assert variables_of(again)["toolResults"] == [{"tool": "search", "out": "xx"}]  # type: ignore[arg-type]
    complete_with_result(channel, again.key, {"type": "adHocSubProcess", "isCompletionConditionFulfilled": True})  # type: ignore[attr-defined]
    (after,) = activate(stub, d.type("agent-after"))
    complete(stub, after.key)
    assert result.result(timeout=10).processInstanceKey > 0
