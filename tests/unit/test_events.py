"""Terminate and escalation events, event-based gateways, signals and event sub-processes, on one in-process partition.

Each scenario drives the engine the way the gateway does and checks what happened through the partition's state and
log; every test ends by checking that a replay of the log rebuilds exactly the live state.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from broker.engine.behaviors import TENANT
from broker.protocol.enums import (
    DeploymentIntent,
    EscalationIntent,
    MessageIntent,
    ProcessInstanceIntent,
    RecordType,
    SignalIntent,
    ValueType,
)
from broker.protocol.record import Record
from broker.state.repositories import PartitionState
from broker.tools.inspect import iter_records
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live

PI = ProcessInstanceIntent


@pytest.fixture
async def driver(tmp_path: Path) -> AsyncIterator[Driver]:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    yield d
    if d.partition is not None:
        await d.settle()
        await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def broadcast(d: Driver, name: str, variables: dict | None = None, **extra: Any) -> Record:
    value = {"signalName": name, "variables": variables or {}, "tenantId": TENANT, **extra}
    rec = await d.send(ValueType.SIGNAL, SignalIntent.BROADCAST, value)
    await d.settle()
    return rec


async def publish(d: Driver, name: str, key: str, variables: dict | None = None) -> None:
    value = {
        "name": name,
        "correlationKey": key,
        "timeToLive": 60_000,
        "messageId": "",
        "variables": variables or {},
        "tenantId": TENANT,
    }
    accepted(await d.send(ValueType.MESSAGE, MessageIntent.PUBLISH, value))
    await d.settle()


async def started(d: Driver, process_id: str, variables: dict | None = None) -> int:
    rec = accepted(await d.create(process_id, variables or {}))
    await d.settle()
    return rec.value["processInstanceKey"]


async def jobs(d: Driver, job_type: str) -> list[int]:
    await d.settle()
    return await d.activate(job_type)


async def arrived(d: Driver, job_type: str, expected: int = 1) -> list[int]:
    """Jobs that appear once the leader's checker has run (timers, the outbox of message subscriptions)."""
    found: list[int] = []
    for _ in range(500):
        found += await jobs(d, job_type)
        if len(found) >= expected:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"expected {expected} job(s) of type {job_type}, got {found}")


async def complete(d: Driver, job_key: int, variables: dict | None = None) -> None:
    accepted(await d.complete(job_key, variables))
    await d.settle()


def alive(d: Driver, key: int) -> bool:
    return d.read(lambda s: s.elements.get(key) is not None)


def job_exists(d: Driver, key: int) -> bool:
    return d.read(lambda s: s.jobs.get(key) is not None)


def variables_of(d: Driver, scope_key: int) -> dict[str, Any]:
    return d.read(lambda s: s.variables.local(scope_key))


def count(d: Driver, read: Any) -> int:
    return d.read(lambda s: len(read(s)))


def signal_subscriptions(s: PartitionState) -> list[tuple[bytes, bytes]]:
    return list(s.iter_all("signal_subscriptions"))


async def logged(d: Driver) -> list[Record]:
    await d.settle()
    await d.close()
    return [r for r in iter_records(d.directory) if r.record_type == RecordType.EVENT]


# -- terminate end events -------------------------------------------------------------------------------------


async def test_terminate_end_event_ends_the_other_branch_and_completes_the_process(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("terminate-end.bpmn"))
    pi = await started(d, "terminate-end")
    (slow,) = await jobs(d, "slow-branch")
    (fast,) = await jobs(d, "fast-branch")
    await complete(d, fast)
    assert not alive(d, pi)
    assert not job_exists(d, slow)
    assert (await d.complete(slow)).record_type == RecordType.COMMAND_REJECTION
    records = await logged(d)
    process_ends = [r for r in records if r.key == pi and r.intent in (PI.ELEMENT_COMPLETED, PI.ELEMENT_TERMINATED)]
    assert [r.intent for r in process_ends] == [PI.ELEMENT_COMPLETED]
    terminated = {r.value["elementId"] for r in records if r.intent == PI.ELEMENT_TERMINATED}
    assert terminated == {"slow-branch"}


# -- escalations -----------------------------------------------------------------------------------------------


async def test_non_interrupting_escalation_boundary_runs_alongside_and_uncaught_ones_continue(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("escalation.bpmn"))
    pi = await started(d, "escalation")
    (notify,) = await jobs(d, "notify-late")
    (inner,) = await jobs(d, "inner-work")  # UNHEARD was not caught: the flow went on
    await complete(d, inner)
    (after,) = await jobs(d, "after-work")
    await complete(d, after)
    assert alive(d, pi), "the boundary's branch still runs"
    await complete(d, notify)
    assert not alive(d, pi)
    records = await logged(d)
    outcomes = {
        (r.value["escalationCode"], r.intent, r.value["catchElementId"])
        for r in records
        if r.value_type == ValueType.ESCALATION
    }
    assert outcomes == {
        ("LATE", EscalationIntent.ESCALATED, "on-late"),
        ("UNHEARD", EscalationIntent.NOT_ESCALATED, ""),
    }


async def test_interrupting_escalation_end_event_terminates_the_sub_process(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("escalation-interrupting.bpmn"))
    pi = await started(d, "escalation-interrupting", {"upCode": "ANY"})
    (parallel,) = await jobs(d, "parallel-work")
    (check,) = await jobs(d, "check-escalate")
    await complete(d, check)
    (escalated,) = await jobs(d, "escalated")
    assert not job_exists(d, parallel)
    await complete(d, escalated)
    assert not alive(d, pi)


# -- event-based gateways --------------------------------------------------------------------------------------


async def test_event_based_gateway_message_wins_and_closes_the_others(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("event-gateway.bpmn"))
    pi = await started(d, "event-gateway", {"requestId": "r-1", "timeout": "PT10S"})
    assert count(d, lambda s: list(s.iter_all("timers"))) == 1
    assert count(d, signal_subscriptions) == 1
    await publish(d, "answer", "r-1", {"answer": 42})
    (answer,) = await arrived(d, "on-answer")
    assert count(d, lambda s: list(s.iter_all("timers"))) == 0
    assert count(d, signal_subscriptions) == 0
    assert variables_of(d, pi)["answer"] == 42
    d.clock.now += 20_000
    await broadcast(d, "recall")
    assert await jobs(d, "on-timeout") == [] and await jobs(d, "on-recall") == []
    await complete(d, answer)
    assert not alive(d, pi)


async def test_event_based_gateway_timer_and_signal_targets(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("event-gateway.bpmn"))
    timed_out = await started(d, "event-gateway", {"requestId": "r-2", "timeout": "PT1S"})
    recalled = await started(d, "event-gateway", {"requestId": "r-3", "timeout": "PT1M"})
    d.clock.now += 1_500
    await arrived(d, "on-timeout")
    await broadcast(d, "recall", {"why": "late"})
    (recall,) = await jobs(d, "on-recall")
    assert variables_of(d, recalled)["why"] == "late"
    await publish(d, "answer", "r-2")
    await publish(d, "answer", "r-3")
    await asyncio.sleep(0.1)  # time for the outbox to deliver, were anything still waiting
    assert await jobs(d, "on-answer") == []
    assert alive(d, timed_out) and alive(d, recalled)
    await complete(d, recall)
    assert not alive(d, recalled)


# -- signals ---------------------------------------------------------------------------------------------------


async def test_signal_broadcast_starts_instances_and_wakes_catch_and_boundary_events(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("signal-catch.bpmn", "signal-boundary.bpmn", "events/signal-start.bpmn"))
    waiting = await started(d, "signal-catch")
    guarded = await started(d, "signal-boundary")
    (work,) = await jobs(d, "guarded-work")
    reply = accepted(await broadcast(d, "wake-up", {"reason": "morning"}))
    assert reply.intent == SignalIntent.BROADCASTED and reply.key > 0
    (after,) = await jobs(d, "after-signal")
    assert variables_of(d, waiting)["reason"] == "morning"
    await broadcast(d, "ping")
    await broadcast(d, "ping")
    assert len(await jobs(d, "pinged")) == 2, "a non-interrupting boundary fires every time"
    assert job_exists(d, work)
    await broadcast(d, "abort")
    (aborted,) = await jobs(d, "aborted")
    assert not job_exists(d, work)
    await complete(d, aborted)
    await complete(d, after)
    assert not alive(d, waiting)
    await broadcast(d, "go", {"n": 1})
    await broadcast(d, "go", {"n": 2})
    assert len(await jobs(d, "signalled-work")) == 2
    assert alive(d, guarded)  # the two pinged branches still run


async def test_signal_start_listens_on_the_newest_version_only(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("events/signal-start.bpmn"))
    changed = (Path(__file__).parent.parent / "fixtures/bpmn/events/signal-start.bpmn").read_bytes()
    changed = changed.replace(b'name="Started by a signal"', b'name="Version two"')
    resources = [{"resourceName": "signal-start.bpmn", "resource": changed}]
    accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources}))
    assert count(d, signal_subscriptions) == 1
    await broadcast(d, "go")
    assert len(await jobs(d, "signalled-work")) == 1


async def test_signal_throw_and_end_events_broadcast_with_their_variables(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("signal-catch.bpmn", "signal-boundary.bpmn", "signal-throw.bpmn"))
    waiting = await started(d, "signal-catch")
    await started(d, "signal-boundary")
    thrower = await started(d, "signal-throw", {"note": "from a throw event"})
    assert not alive(d, thrower)
    assert len(await jobs(d, "after-signal")) == 1
    assert variables_of(d, waiting)["note"] == "from a throw event"
    assert len(await jobs(d, "pinged")) == 1


async def test_distributed_signal_is_triggered_once_however_often_it_arrives(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("events/signal-start.bpmn"))
    first = accepted(await broadcast(d, "go", {}, distributedFrom=2, signalKey=(2 << 51) + 7))
    again = accepted(await broadcast(d, "go", {}, distributedFrom=2, signalKey=(2 << 51) + 7))
    assert first.key == again.key == (2 << 51) + 7
    assert len(await jobs(d, "signalled-work")) == 1
    records = await logged(d)
    assert len([r for r in records if r.value_type == ValueType.SIGNAL]) == 1


async def test_broadcast_without_a_name_is_rejected(driver: Driver) -> None:
    rec = await broadcast(driver, "")
    assert rec.record_type == RecordType.COMMAND_REJECTION


# -- event sub-processes ---------------------------------------------------------------------------------------


async def test_event_sub_processes_interrupt_and_run_alongside(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("event-subprocess.bpmn"))
    pi = await started(d, "event-subprocess", {"orderId": "o-9", "remindEvery": "R2/PT1S"})
    (main,) = await jobs(d, "main-work")
    reminders: list[int] = []
    for _ in range(2):
        d.clock.now += 1_100
        reminders += await arrived(d, "send-reminder-esp")
    assert len(reminders) == 2, "the non-interrupting timer event sub-process runs once per cycle"
    assert job_exists(d, main)
    await publish(d, "cancel-order", "o-9", {"cancelledBy": "customer"})
    (cancel,) = await arrived(d, "handle-cancel")
    assert not job_exists(d, main)
    assert all(not job_exists(d, r) for r in reminders)
    assert variables_of(d, pi)["cancelledBy"] == "customer"
    assert count(d, lambda s: list(s.iter_all("timers"))) == 0
    await complete(d, cancel)
    assert not alive(d, pi)


async def test_error_end_event_is_caught_two_scopes_up_by_an_error_event_sub_process(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("error-event-subprocess.bpmn"))
    failing = await started(d, "error-event-subprocess")
    passing = await started(d, "error-event-subprocess")
    first, second = await jobs(d, "validate")
    await complete(d, first, {"ok": False})
    await complete(d, second, {"ok": True})
    (handle,) = await jobs(d, "handle-invalid")
    (accept,) = await jobs(d, "accepted")
    await complete(d, handle)
    await complete(d, accept)
    assert not alive(d, failing) and not alive(d, passing)
    assert d.incidents() == []


async def test_signal_and_escalation_event_sub_processes(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("esp-signal-escalation.bpmn"))
    pi = await started(d, "esp-signal-escalation")
    (help_job,) = await jobs(d, "help")
    (work,) = await jobs(d, "do-work")
    await broadcast(d, "abort")
    (clean,) = await jobs(d, "clean-up")
    assert not job_exists(d, work)
    await complete(d, clean)
    assert alive(d, pi), "the non-interrupting escalation branch still runs"
    await complete(d, help_job)
    assert not alive(d, pi)


# -- link events -----------------------------------------------------------------------------------------------


def lifecycle(records: list[Record], element_id: str) -> list[tuple[int, str, str]]:
    return [
        (r.intent, r.value["bpmnElementType"], r.value["bpmnEventType"])
        for r in records
        if r.value_type == ValueType.PROCESS_INSTANCE and r.value.get("elementId") == element_id
    ]


async def test_link_throw_continues_at_the_catch_of_the_same_name(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("link-events.bpmn"))
    pi = await started(d, "link-events")
    (a,) = await jobs(d, "link-a")
    await complete(d, a, {"fromA": 1})
    (b,) = await jobs(d, "link-b")
    await complete(d, b)
    assert not alive(d, pi)
    await d.settle()
    await d.close()
    records = list(iter_records(d.directory))
    assert not [r for r in records if r.record_type == RecordType.COMMAND_REJECTION]
    events = [r for r in records if r.record_type == RecordType.EVENT]
    throw = ("INTERMEDIATE_THROW_EVENT", "LINK")
    catch = ("INTERMEDIATE_CATCH_EVENT", "LINK")
    states = [PI.ELEMENT_ACTIVATING, PI.ELEMENT_ACTIVATED, PI.ELEMENT_COMPLETING, PI.ELEMENT_COMPLETED]
    assert lifecycle(events, "to-b") == [(i, *throw) for i in states]
    assert lifecycle(events, "from-a") == [(i, *catch) for i in states]
    # the catch event is activated by a command of its own, right after the throw event completed
    jump = [
        (r.value["elementId"], r.record_type, r.intent)
        for r in records
        if r.value_type == ValueType.PROCESS_INSTANCE and r.value.get("elementId") in ("to-b", "from-a")
    ]
    completed = jump.index(("to-b", RecordType.EVENT, PI.ELEMENT_COMPLETED))
    assert jump[completed + 1 : completed + 3] == [
        ("from-a", RecordType.COMMAND, PI.ACTIVATE_ELEMENT),
        ("from-a", RecordType.EVENT, PI.ELEMENT_ACTIVATING),
    ]
    catch_record = next(r for r in events if r.value.get("elementId") == "from-a")
    throw_record = next(r for r in events if r.value.get("elementId") == "to-b")
    assert catch_record.value["flowScopeKey"] == throw_record.value["flowScopeKey"] == pi
    taken = [
        r.value["elementId"]
        for r in events
        if r.value_type == ValueType.PROCESS_INSTANCE and r.intent == PI.SEQUENCE_FLOW_TAKEN
    ]
    assert taken == [
        "flow-start-a",
        "flow-a-throw",
        "flow-catch-b",
        "flow-b-inner",
        "flow-inner-fork",
        "flow-fork-jump",
        "flow-fork-end",
        "flow-land-end",
        "flow-inner-end",
    ], "no sequence flow between a throw and its catch event"
    # inside the sub-process the fork's other branch ended while the token was between throw and catch: the
    # sub-process still waited for the catch event's branch
    ends = [
        r.value["elementId"]
        for r in events
        if r.value_type == ValueType.PROCESS_INSTANCE and r.intent == PI.ELEMENT_COMPLETED
    ]
    assert ends.index("inner-jump") < ends.index("inner-end-early") < ends.index("inner-land")
    assert ends.index("inner-land") < ends.index("inner-end") < ends.index("inner") < ends.index("end")
    assert ends[-1] == "link-events"


async def test_a_link_loops_back_until_the_counter_says_stop(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("link-loop.bpmn"))
    pi = await started(d, "link-loop", {"round": 0, "rounds": 3})
    for expected_round in (1, 2, 3):
        (work,) = await jobs(d, "link-loop")
        assert alive(d, pi)
        await complete(d, work)
        if expected_round < 3:
            assert variables_of(d, pi)["round"] == expected_round
    assert not alive(d, pi)
    assert await jobs(d, "link-loop") == []
    records = await logged(d)
    completed = [
        r.value["elementId"]
        for r in records
        if r.value_type == ValueType.PROCESS_INSTANCE and r.intent == PI.ELEMENT_COMPLETED
    ]
    assert completed.count("work") == 3
    assert completed.count("again") == completed.count("back") == 2
    rounds = [r.value["value"] for r in records if r.value_type == ValueType.VARIABLE and r.value["name"] == "round"]
    assert rounds == [0, 1, 2, 3]


async def test_a_terminate_end_event_ends_a_token_between_link_throw_and_catch(driver: Driver) -> None:
    d = driver
    accepted(await d.deploy("link-terminate.bpmn"))
    pi = await started(d, "link-terminate")
    assert not alive(d, pi)
    records = await logged(d)
    assert [i for i, *_ in lifecycle(records, "land")] == [
        PI.ELEMENT_ACTIVATING,
        PI.ELEMENT_TERMINATING,
        PI.ELEMENT_TERMINATED,
    ]
    assert [i for i, *_ in lifecycle(records, "link-terminate")][-1] == PI.ELEMENT_COMPLETED
    assert lifecycle(records, "end") == []


class _OtherPartitions:
    """Stands in for the route to other partitions' leaders: records what arrives, delivering it to ``target``."""

    def __init__(self, target: Driver | None = None) -> None:
        self.target = target
        self.received: list[tuple[int, ValueType, dict]] = []

    async def execute(
        self, partition_id: int, value_type: ValueType, intent: int, value: dict, key: int = -1, **_options: Any
    ) -> Record:
        self.received.append((partition_id, value_type, value))
        assert self.target is not None
        return await self.target.send(value_type, intent, value, key)


async def test_a_broadcast_reaches_the_other_partitions_until_they_acknowledge(tmp_path: Path) -> None:
    from broker.stream.partition import PartitionConfig

    other = Driver(tmp_path / "p" / "2", PartitionConfig(partition_id=2, partitions_count=2, checker_interval_s=0.005))
    other.open()
    accepted(await other.deploy("events/signal-start.bpmn"))
    first = Driver(tmp_path / "p" / "1", PartitionConfig(partitions_count=2, checker_interval_s=0.005))
    first.open()
    assert first.partition is not None
    route = _OtherPartitions(other)
    first.partition.inter_partition = route
    rec = accepted(await broadcast(first, "go", {"from": "partition 1"}))
    for _ in range(200):
        if route.received and not first.read(lambda s: list(s.iter_all("distributions"))):
            break
        await asyncio.sleep(0.01)
    # delivery is at least once: a slow acknowledgement lets the checker send it again, always the same signal
    assert route.received
    assert {(p, t, v["signalKey"]) for p, t, v in route.received} == {(2, ValueType.SIGNAL, rec.key)}
    assert first.read(lambda s: list(s.iter_all("distributions"))) == [], "acknowledged deliveries are forgotten"
    (work,) = await jobs(other, "signalled-work")  # however often it arrived, the signal started one instance
    assert work > 0
    for d in (first, other):
        await d.settle()
        await d.close()
        check_replay_equals_live(d.directory, tmp_path)
