"""Replay equals processing: the state a partition built while processing is exactly the state its log replays to.

Partitions run in-process (no gRPC); commands go through ``Partition.execute`` as the gateway sends them. After each
scenario the partition stops, and the live state is compared with a replay of the whole log into an empty state
(broker.tools.inspect.replay, the same replay function recovery uses) and with the state a restart recovers.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker.engine.behaviors import TENANT
from broker.engine.job_processors import activation_request
from broker.protocol.enums import (
    ClockIntent,
    DeploymentIntent,
    IncidentIntent,
    JobBatchIntent,
    JobIntent,
    MessageCorrelationIntent,
    MessageIntent,
    ProcessInstanceCreationIntent,
    ProcessInstanceIntent,
    RecordType,
    SignalIntent,
    UserTaskIntent,
    ValueType,
    VariableDocumentIntent,
)
from broker.protocol.keys import encode_key
from broker.protocol.record import Record
from broker.state.db import unpack
from broker.state.element_instance import ElementInstance
from broker.state.repositories import PartitionState
from broker.stream.partition import Partition, PartitionConfig
from broker.tools.inspect import StateDump, diff_dumps, dump_state, iter_records, replay, replay_log
from tests.harness import BPMN

FIXTURES = [
    "one-task.bpmn",
    "error-boundary.bpmn",
    "error-end-event.bpmn",
    "exclusive-gateway.bpmn",
    "io-mapping.bpmn",
    "parallel-gateway.bpmn",
    "pass-through.bpmn",
    "ten-tasks.bpmn",
    "timer-catch.bpmn",
    "timer-reminder.bpmn",
    "order-payment.bpmn",
    "message-catch.bpmn",
    "terminate-end.bpmn",
    "escalation.bpmn",
    "escalation-interrupting.bpmn",
    "event-gateway.bpmn",
    "signal-catch.bpmn",
    "signal-boundary.bpmn",
    "signal-throw.bpmn",
    "event-subprocess.bpmn",
    "error-event-subprocess.bpmn",
    "esp-signal-escalation.bpmn",
    "link-events.bpmn",
    "link-loop.bpmn",
    "link-terminate.bpmn",
    "script-task.bpmn",
    "script-task-failure.bpmn",
    "message-throw.bpmn",
    "user-task-feel.bpmn",
    "call-activity.bpmn",
    "call-activity-mappings.bpmn",
    "call-activity-feel.bpmn",
    "call-chain.bpmn",
    "call-binding.bpmn",
    "call-missing.bpmn",
    "call-message.bpmn",
    "business-rule-task.bpmn",
    "inclusive-gateway.bpmn",
    "inclusive-reachability.bpmn",
    "inclusive-no-default.bpmn",
    "mi-parallel.bpmn",
    "mi-sequential.bpmn",
    "mi-completion.bpmn",
    "mi-boundary.bpmn",
    "mi-subprocess.bpmn",
    "mi-call.bpmn",
    "ad-hoc.bpmn",
    "ad-hoc-condition.bpmn",
    "compensation-booking.bpmn",
    "compensation-end-event.bpmn",
    "compensation-activity-ref.bpmn",
    "compensation-subprocess.bpmn",
    "compensation-multi-instance.bpmn",
    "compensation-multi-instance-subprocess.bpmn",
    "compensation-event-subprocess.bpmn",
    "execution-listeners.bpmn",
    "execution-listeners-scopes.bpmn",
    "user-task-native.bpmn",
    "user-task-listeners.bpmn",
    "user-task-listener-feel.bpmn",
]
# Processes that only start through events (deployed too, never created directly).
EVENT_STARTED = ["events/signal-start.bpmn"]
# Decisions the business rule tasks call and forms user tasks link (deployed with the processes).
DECISIONS = ["../dmn/discount.dmn", "../dmn/greeting.dmn", "../forms/approval-form.form"]
# Deployed in the middle of a run: a process a call activity was missing, and newer versions of a called process.
DEPLOYED_LATER = ["call-missing-child.bpmn", "call-binding-child-v1b.bpmn", "call-binding-child-v2.bpmn"]

# Variables each process needs to run its happy path (others run with these too: extra variables are harmless).
START_VARIABLES: dict[str, dict[str, Any]] = {
    "exclusive-gateway": {"amount": 150},
    "io-mapping": {"order": {"items": ["a", "b"], "customer": {"id": "c-1"}}, "maxRetries": 2},
    "timer-catch": {"delay": "PT1S"},
    "order-payment": {"orderId": "o-1", "paymentTimeout": "PT2S"},
    "message-catch": {"requestId": "r-1"},
    "escalation-interrupting": {"upCode": "UP"},
    "event-gateway": {"requestId": "r-1", "timeout": "PT2S"},
    "event-subprocess": {"orderId": "o-1", "remindEvery": "R3/PT1S"},
    "signal-throw": {"note": "thrown"},
    "error-event-subprocess": {"ok": False},
    "link-loop": {"round": 0, "rounds": 2},
    "business-rule-task": {"decisionToCall": "discount", "orders": 12, "total": 10, "name": "Ada"},
    "inclusive-gateway": {"amount": 150, "express": True},
    "inclusive-reachability": {"toJoin": False},
    "inclusive-no-default": {"x": "a"},
    "mi-parallel": {"items": [1, 2, 3]},
    "mi-sequential": {"items": ["a", "b"]},
    "mi-completion": {"items": [1, 2, 3, 4]},
    "mi-boundary": {"items": ["x", "y"]},
    "mi-subprocess": {"orders": [{"id": 1}, {"id": 2}]},
    "mi-call": {"orders": ["a", "b"]},
    "ad-hoc": {"chosen": ["tool-a", "tool-c"]},
    "ad-hoc-condition": {"enough": False},
    "script-task": {"a": 1, "b": 2, "name": "n"},
    "script-task-failure": {"divisor": 0},
    "user-task-feel": {"owner": "o", "groups": ["g"], "due": "2031-01-01T00:00:00Z", "kind": "k"},
    "call-activity-mappings": {"order": {"customer": {"id": "c-1"}}},
    "call-activity-feel": {"childId": "call-activity-child"},
    "call-chain": {"escalate": False},
    "call-message": {"orderId": "o-1"},
    "compensation-booking": {"guest": "Ada"},
    "compensation-end-event": {"skipB": False},
    "compensation-subprocess": {"tripNo": 1},
    "compensation-multi-instance": {"items": ["x", "y"]},
    "compensation-multi-instance-subprocess": {"items": ["a", "rejected"]},
    "execution-listeners": {"order": {"id": 1}, "retries": 2, "stage": "two", "path": "sub"},
    "user-task-native": {"reviewers": ["ann"], "due": "2031-01-01T00:00:00Z"},
    "user-task-listeners": {"owner": "zoe"},
    "user-task-listener-feel": {"formId": "approval-form", "creatingType": "tl-creating", "assigningType": None},
}
JOB_TYPES = [
    "test",
    "tl-creating",
    "tl-assigning",
    "tl-updating",
    "tl-completing",
    "tl-completing-audit",
    "tl-canceling",
    "ah-a",
    "ah-b",
    "ah-c",
    "ah-c-check",
    "ah-after",
    "ahc-search",
    "ahc-ask",
    "ahc-after",
    "charge",
    "send-invoice",
    "handle-error",
    "check-order",
    "approve-large",
    "approve-small",
    "reserve-stock",
    "ship",
    "bill",
    *(f"task-{i}" for i in range(1, 11)),
    "after-wait",
    "long-work",
    "send-reminder",
    "cancel-order",
    "approved",
    "handle-order",
    "slow-branch",
    "fast-branch",
    "inner-work",
    "notify-late",
    "after-work",
    "parallel-work",
    "check-escalate",
    "escalated",
    "on-answer",
    "on-timeout",
    "on-recall",
    "after-signal",
    "guarded-work",
    "aborted",
    "pinged",
    "main-work",
    "handle-cancel",
    "send-reminder-esp",
    "validate",
    "handle-invalid",
    "accepted",
    "do-work",
    "clean-up",
    "help",
    "signalled-work",
    "link-a",
    "link-b",
    "link-loop",
    "check",
    "send-notice",
    "send-farewell",
    "io.camunda.zeebe:userTask",
    "check-discount",
    "inc-a",
    "inc-b",
    "inc-c",
    "inc-after",
    "reach-a",
    "reach-b",
    "reach-after",
    "nd-a",
    "nd-b",
    "mi-work",
    "mi-after",
    "seq-work",
    "seq-after",
    "cc-work",
    "cc-after",
    "bd-work",
    "bd-handle",
    "bd-after",
    "sp-pack",
    "sp-after",
    "mc-ship",
    "child-work",
    "after-call",
    "payment-failure",
    "mapped-work",
    "after-mapped",
    "chain-work",
    "chain-escalated",
    "bind-work",
    "late-work",
    "level3-work",
    "withdrawn",
    "book",
    "pay",
    "cancel-booking",
    "notify",
    "ce-a",
    "ce-b",
    "ce-undo-a",
    "ce-undo-b",
    "ref-a",
    "ref-b",
    "ref-undo-a",
    "ref-undo-b",
    "ref-after",
    "sub-flight",
    "sub-hotel",
    "sub-review",
    "sub-cancel-flight",
    "sub-cancel-hotel",
    "mi-charge",
    "mi-refund",
    "mi-notify",
    "mi-retract",
    "mis-reserve",
    "mis-release",
    "mis-review",
    "esp-reserve",
    "esp-ship",
    "esp-release",
    "el-process-start",
    "el-process-end",
    "el-started",
    "el-task-start",
    "el-two",
    "el-work",
    "el-task-end",
    "el-too-late",
    "el-route",
    "el-sub-start",
    "el-sub-end-event",
    "el-sub-end",
    "els-call-start",
    "els-call-end",
    "els-callee-start",
    "els-callee-work",
    "els-callee-end",
    "els-tools-start",
    "els-tool",
    "els-tool-end",
    "els-tools-end",
]
SIGNALS = ["wake-up", "ping", "abort", "go", "recall"]
ERROR_CODES = ["PAYMENT_FAILED", "ORDER_REJECTED", "OOPS", "UNKNOWN", "payment-failed", "abort"]


class FakeClock:
    """Processing time under the test's control, so job timeouts happen when the test says so."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


class Driver:
    """Runs one partition in a directory across restarts and sends it commands like the gateway does."""

    def __init__(self, directory: Path, config: PartitionConfig | None = None) -> None:
        self.directory = directory
        self.config = config or PartitionConfig(checker_interval_s=0.005)
        self.clock = FakeClock()
        self.partition: Partition | None = None
        # commands whose answer comes later (user task commands waiting for their task listeners)
        self.pending: list[asyncio.Future[Record]] = []

    def open(self) -> Partition:
        self.partition = Partition(self.directory, self.config, clock=self.clock)
        self.partition.open()
        self.partition.start()
        return self.partition

    async def close(self, *, snapshot: bool = True) -> None:
        assert self.partition is not None
        await self.partition.close(snapshot=snapshot)
        for waiting in self.pending:  # never answered: the partition stopped first
            waiting.cancel()
        await asyncio.gather(*self.pending, return_exceptions=True)
        self.pending.clear()
        self.partition = None

    async def send(self, value_type: ValueType, intent: int, value: dict, key: int = -1) -> Record:
        assert self.partition is not None
        return await asyncio.wait_for(self.partition.execute(value_type, intent, value, key), 10)

    async def settle(self) -> None:
        """Wait until every queued command and follow-up is processed and its round committed (a round waiting for
        its fsync leaves no backlog, but its state change is not visible yet)."""
        partition = self.partition
        assert partition is not None

        def idle() -> bool:
            return partition.backlog == 0 and not (partition.core is not None and partition.core.round_open)

        for _ in range(2000):
            if idle():
                await asyncio.sleep(0.002)
                if idle():
                    return
            await asyncio.sleep(0.001)
        raise AssertionError(f"partition still has {self.partition.backlog} commands waiting")

    def read(self, fn: Callable[[PartitionState], Any]) -> Any:
        """Read live state through a view of its own (never the processor's bound repositories)."""
        assert self.partition is not None and self.partition.db is not None
        view = PartitionState(self.partition.db)
        with self.partition.db.begin() as txn:
            view.bind(txn)
            return fn(view)

    # -- commands, shaped like the gateway's ---------------------------------------------------------------

    async def deploy(self, *names: str) -> Record:
        resources = [{"resourceName": n, "resource": (BPMN / n).read_bytes()} for n in names]
        return await self.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources})

    async def create(self, process_id: str, variables: dict | None = None) -> Record:
        value = {
            "bpmnProcessId": process_id,
            "version": -1,
            "processDefinitionKey": -1,
            "variables": variables if variables is not None else START_VARIABLES.get(process_id, {}),
            "fetchVariables": [],
            "tenantId": TENANT,
        }
        return await self.send(ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, value)

    async def activate(self, job_type: str, max_jobs: int = 10, timeout: int = 60_000) -> list[int]:
        value = activation_request(job_type, "replay-test", timeout, max_jobs)
        rec = await self.send(ValueType.JOB_BATCH, JobBatchIntent.ACTIVATE, value)
        assert rec.record_type == RecordType.EVENT, rec.rejection_reason
        return list(rec.value["jobKeys"])

    async def complete(self, job_key: int, variables: dict | None = None) -> Record:
        return await self.send(ValueType.JOB, JobIntent.COMPLETE, {"variables": variables or {}}, job_key)

    async def fail(self, job_key: int, retries: int, backoff: int = 0) -> Record:
        value = {"retries": retries, "errorMessage": "boom", "retryBackoff": backoff, "variables": {"tried": True}}
        return await self.send(ValueType.JOB, JobIntent.FAIL, value, job_key)

    async def throw_error(self, job_key: int, code: str) -> Record:
        value = {"errorCode": code, "errorMessage": "declined", "variables": {"reason": code}}
        return await self.send(ValueType.JOB, JobIntent.THROW_ERROR, value, job_key)

    async def complete_listener(self, job_key: int, rng: random.Random) -> Record:
        """Complete a task listener's job: approve, correct or deny (some of these are not allowed, by design)."""
        result = rng.choice(
            [
                {},
                {"denied": True, "deniedReason": "no"},
                {"correctedAttributes": ["assignee", "priority"], "corrections": {"assignee": "max", "priority": 5}},
            ]
        )
        return await self.send(ValueType.JOB, JobIntent.COMPLETE, {"variables": {}, "result": result}, job_key)

    async def update_retries(self, job_key: int, retries: int) -> Record:
        return await self.send(ValueType.JOB, JobIntent.UPDATE_RETRIES, {"retries": retries}, job_key)

    async def cancel(self, instance_key: int) -> Record:
        return await self.send(ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.CANCEL, {}, instance_key)

    async def set_variables(self, scope_key: int, variables: dict, *, local: bool = False) -> Record:
        value = {
            "scopeKey": scope_key,
            "variables": variables,
            "updateSemantics": "LOCAL" if local else "PROPAGATE",
            "tenantId": TENANT,
        }
        return await self.send(ValueType.VARIABLE_DOCUMENT, VariableDocumentIntent.UPDATE, value, scope_key)

    async def resolve(self, incident_key: int) -> Record:
        return await self.send(ValueType.INCIDENT, IncidentIntent.RESOLVE, {}, incident_key)

    def incidents(self) -> list[tuple[int, dict]]:
        from broker.state.db import read_u64, unpack

        return self.read(lambda s: [(read_u64(k), unpack(v)) for k, v in s.iter_all("incidents")])


def accepted(rec: Record) -> Record:
    assert rec.record_type == RecordType.EVENT, f"{rec.describe()}: {rec.rejection_reason}"
    return rec


def assert_same(expected: StateDump, actual: StateDump, what: str) -> None:
    differences = diff_dumps(expected, actual, limit=15)
    assert not differences, f"{what} differs from the live state:\n" + "\n".join(differences)


def check_replay_equals_live(directory: Path, scratch: Path) -> StateDump:
    """With the partition stopped: the live state equals a full replay and the newest snapshot."""
    live = dump_state(directory / "runtime")
    assert sum(len(v) for v in live.values()) > 0
    target = scratch / f"replay-{len(list(scratch.glob('replay-*')))}"
    assert_same(live, replay(directory, target), "the state replayed from an empty database")
    return live


async def check_restart_recovers(driver: Driver, live: StateDump, *, from_scratch: bool) -> None:
    """A restart (from the snapshot, or with snapshots removed: from the log alone) recovers the live state."""
    if from_scratch:
        shutil.rmtree(driver.directory / "snapshots", ignore_errors=True)
    driver.open()
    await driver.close(snapshot=False)
    assert_same(live, dump_state(driver.directory / "runtime"), "the state recovered by a restart")


def check_called_instances_are_linked(driver: Driver) -> None:
    """With nothing left to process: a call activity that waits (or terminates) has its called instance, a called
    instance has the call activity that points to it, and a call activity still activating has an incident or waits
    for its start execution listener's job."""
    instances = driver.read(
        lambda s: [ElementInstance.from_dict(unpack(v)) for _, v in s.iter_all("element_instances")]
    )
    by_key = {i.key: i for i in instances}
    with_incident = {incident["elementInstanceKey"] for _, incident in driver.incidents()}
    for inst in instances:
        v = inst.value
        if v.bpmn_element_type == "CALL_ACTIVITY":
            if inst.state in (ProcessInstanceIntent.ELEMENT_ACTIVATED, ProcessInstanceIntent.ELEMENT_TERMINATING):
                assert inst.called_child_key in by_key, f"call activity {inst.key} waits for no instance"
            elif inst.state == ProcessInstanceIntent.ELEMENT_ACTIVATING:
                waits = inst.key in with_incident or inst.job_key > 0
                assert waits, f"call activity {inst.key} is stuck activating"
        if v.bpmn_element_type == "PROCESS" and v.parent_element_instance_key > 0:
            caller = by_key.get(v.parent_element_instance_key)
            assert caller is not None and caller.called_child_key == inst.key, f"called instance {inst.key} orphaned"


# -- scripted scenarios --------------------------------------------------------------------------------------


async def test_every_command_kind_replays_to_the_live_state(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    deployed = accepted(await d.deploy(*FIXTURES))
    assert len(deployed.value["processesMetadata"]) >= len(FIXTURES)
    # happy paths
    for pid in ("one-task", "exclusive-gateway", "parallel-gateway", "pass-through", "io-mapping"):
        accepted(await d.create(pid))
    accepted(await d.create("exclusive-gateway", {"amount": 5}))
    await d.settle()
    for job in await d.activate("test"):
        accepted(await d.complete(job, {"done": 1}))
    for job_type in ("approve-large", "approve-small", "ship", "bill"):
        for job in await d.activate(job_type):
            accepted(await d.complete(job))
    for job in await d.activate("reserve-stock"):
        accepted(await d.complete(job, {"reservation": {"id": "r-1", "items": [1, 2]}}))
    # errors: caught by a boundary event, and unhandled (an incident)
    first = accepted(await d.create("error-boundary"))
    await d.create("error-end-event", {})
    await d.settle()
    charge = await d.activate("charge", 1)
    accepted(await d.throw_error(charge[0], "PAYMENT_FAILED"))
    for job in await d.activate("check-order"):
        accepted(await d.complete(job, {"valid": False}))
    accepted(await d.create("error-boundary"))
    await d.settle()
    unhandled = await d.activate("charge", 1)
    accepted(await d.throw_error(unhandled[0], "NOT_MODELED"))
    # failures: retry, then no retries left (incident), then fix and resolve
    accepted(await d.create("one-task", {"n": 1}))
    await d.settle()
    job = (await d.activate("test"))[0]
    accepted(await d.fail(job, retries=1))
    job = (await d.activate("test"))[0]
    accepted(await d.fail(job, retries=0))
    await d.settle()
    incidents = d.incidents()
    assert any(inc["jobKey"] == job for _, inc in incidents)
    accepted(await d.update_retries(job, 2))
    for key, inc in incidents:
        if inc["jobKey"] == job:
            accepted(await d.resolve(key))
    await d.settle()
    accepted(await d.complete((await d.activate("test"))[0]))
    # variables, timeouts and cancellation
    running = accepted(await d.create("ten-tasks", {"count": 0}))
    key = running.value["processInstanceKey"]
    await d.settle()
    accepted(await d.set_variables(key, {"count": 1, "nested": {"a": [1, 2]}}))
    accepted(await d.set_variables(key, {"local": "yes"}, local=True))
    await d.activate("task-1", timeout=1000)
    d.clock.now += 5_000
    await asyncio.sleep(0.05)  # the deadline checker writes TIME_OUT
    retaken = await d.activate("task-1")
    assert retaken, "the timed-out job should be activatable again"
    accepted(await d.cancel(key))
    accepted(await d.cancel(first.value["processInstanceKey"]))  # still waiting in its error path
    assert (await d.cancel(key)).record_type == RecordType.COMMAND_REJECTION
    await d.settle()
    await d.close()

    live = check_replay_equals_live(d.directory, tmp_path)
    kinds = {(r.value_type, r.intent) for r in iter_records(d.directory) if r.record_type == RecordType.EVENT}
    for expected in [
        (ValueType.JOB, JobIntent.COMPLETED),
        (ValueType.JOB, JobIntent.FAILED),
        (ValueType.JOB, JobIntent.ERROR_THROWN),
        (ValueType.JOB, JobIntent.TIMED_OUT),
        (ValueType.JOB, JobIntent.CANCELED),
        (ValueType.JOB, JobIntent.RETRIES_UPDATED),
        (ValueType.INCIDENT, IncidentIntent.CREATED),
        (ValueType.INCIDENT, IncidentIntent.RESOLVED),
        (ValueType.VARIABLE_DOCUMENT, VariableDocumentIntent.UPDATED),
        (ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.ELEMENT_TERMINATED),
    ]:
        assert expected in kinds, f"the scenario never produced {expected}"
    await check_restart_recovers(d, live, from_scratch=False)
    await check_restart_recovers(d, live, from_scratch=True)


async def test_follow_ups_queued_at_shutdown_are_processed_after_restart(tmp_path: Path) -> None:
    """A graceful stop may leave written but unprocessed follow-ups; the restart must process them."""
    d = Driver(tmp_path / "p" / "1", PartitionConfig(max_commands_per_round=1, checker_interval_s=0.005))
    d.open()
    accepted(await d.deploy("one-task.bpmn"))
    created = [accepted(await d.create("one-task", {"i": i})) for i in range(3)]
    assert d.partition is not None and d.partition.backlog > 0, "expected follow-ups still queued"
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)

    d.open()
    await d.settle()
    jobs = await d.activate("test")
    assert len(jobs) == len(created), "every instance created before the stop should have reached its task"
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_a_command_naming_a_key_never_issued_does_not_raise_the_key_counter_on_replay(tmp_path: Path) -> None:
    """A client may name any key of this partition; its rejection must not make replay's key counter differ from
    the live one (replay raises the counter only past keys the partition wrote itself)."""
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("one-task.bpmn"))
    never_issued = encode_key(1, 10**9)
    rejected = await d.send(ValueType.JOB, JobIntent.COMPLETE, {"variables": {}}, never_issued)
    assert rejected.record_type == RecordType.COMMAND_REJECTION
    accepted(await d.create("one-task"))
    await d.settle()
    await d.close(snapshot=False)
    check_replay_equals_live(d.directory, tmp_path)


async def test_restart_after_stop_without_snapshot_recovers_and_continues(tmp_path: Path) -> None:
    """Like a crash: no snapshot at stop, so recovery replays the log tail over the older snapshot."""
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("one-task.bpmn"))
    accepted(await d.create("one-task"))
    await d.settle()
    await d.close()  # snapshot 1
    d.open()
    keys = [accepted(await d.create("one-task")).value["processInstanceKey"] for _ in range(5)]
    await d.settle()
    await d.close(snapshot=False)
    live = check_replay_equals_live(d.directory, tmp_path)
    await check_restart_recovers(d, live, from_scratch=False)
    d.open()
    new = accepted(await d.create("one-task")).value["processInstanceKey"]
    assert new > max(keys), "a restart must never issue a key again"
    await d.settle()
    assert len(await d.activate("test")) == 7
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_call_activities_replay_to_the_live_state(tmp_path: Path) -> None:
    """Every way a called instance starts and ends: completion, a caught error and escalation, cancellation of the
    root, an interrupting timer, a missing process deployed later and each binding type."""
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy(*(f for f in FIXTURES if f.startswith("call-"))))
    # completion, and an error thrown in the child caught on the call activity
    accepted(await d.create("call-activity", {"n": 1}))
    accepted(await d.create("call-activity", {"n": 2}))
    accepted(await d.create("call-activity-mappings"))
    await d.settle()
    first, second = await d.activate("child-work")
    accepted(await d.complete(first, {"paid": True}))
    accepted(await d.throw_error(second, "PAYMENT_FAILED"))
    accepted(await d.complete((await d.activate("mapped-work"))[0], {"verdict": "ok"}))
    await d.settle()
    assert len(await d.activate("after-call")) == 1
    assert len(await d.activate("payment-failure")) == 1
    assert len(await d.activate("after-mapped")) == 1
    # an escalation two levels down, then cancelling the root of a chain
    accepted(await d.create("call-chain", {"escalate": True}))
    await d.settle()
    accepted(await d.complete((await d.activate("chain-work"))[0]))
    await d.settle()
    assert len(await d.activate("chain-escalated")) == 1
    root = accepted(await d.create("call-chain", {"escalate": False})).value["processInstanceKey"]
    await d.settle()
    leaf_job = (await d.activate("chain-work"))[0]
    leaf = d.read(lambda s: s.jobs.get(leaf_job))["value"]["processInstanceKey"]
    assert (await d.cancel(leaf)).rejection_reason.endswith(f"Cancel the root process instance '{root}' instead.")
    accepted(await d.cancel(root))
    await d.settle()
    assert (await d.complete(leaf_job)).record_type == RecordType.COMMAND_REJECTION
    # an interrupting timer on the call activity
    accepted(await d.create("call-activity"))
    await d.settle()
    d.clock.now += 31_000
    await asyncio.sleep(0.05)
    await d.settle()
    assert not await d.activate("child-work")
    # a missing process: an incident until it is deployed
    accepted(await d.create("call-missing"))
    await d.settle()
    (incident_key, incident), *_ = d.incidents()
    assert incident["errorType"] == "CALLED_ELEMENT_ERROR"
    accepted(await d.deploy("call-missing-child.bpmn"))
    accepted(await d.resolve(incident_key))
    await d.settle()
    accepted(await d.complete((await d.activate("late-work"))[0]))
    # binding types: latest, the same deployment, the latest with a version tag
    accepted(await d.deploy("call-binding-child-v1b.bpmn"))
    accepted(await d.deploy("call-binding-child-v2.bpmn"))
    accepted(await d.create("call-binding"))
    await d.settle()
    jobs = await d.activate("bind-work")
    versions = d.read(lambda s: sorted(s.jobs.get(j)["value"]["processDefinitionVersion"] for j in jobs))
    assert versions == [1, 2, 3]
    for job in jobs:
        accepted(await d.complete(job))
    await d.settle()
    assert not d.incidents()
    check_called_instances_are_linked(d)
    await d.close()

    live = check_replay_equals_live(d.directory, tmp_path)
    await check_restart_recovers(d, live, from_scratch=True)


async def test_compensation_replays_to_the_live_state(tmp_path: Path) -> None:
    """Handlers started by throw and end events (for a whole scope, an activityRef, inside and around a
    sub-process, per multi-instance instance, from an event sub-process), and subscriptions dropped by completion
    and cancellation; no subscription outlives its instance."""
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy(*(f for f in FIXTURES if f.startswith("compensation-"))))
    accepted(await d.create("compensation-booking", {"guest": "Ada"}))
    accepted(await d.create("compensation-end-event", {"skipB": False}))
    accepted(await d.create("compensation-activity-ref"))
    accepted(await d.create("compensation-subprocess", {"tripNo": 1}))
    accepted(await d.create("compensation-multi-instance", {"items": ["x", "y", "z"]}))
    accepted(await d.create("compensation-event-subprocess"))
    accepted(await d.create("compensation-multi-instance-subprocess", {"items": ["a", "rejected", "c"]}))
    cancelled = accepted(await d.create("compensation-end-event", {"skipB": True})).value["processInstanceKey"]
    await d.settle()
    for job_type in ("book", "ce-a", "ref-a", "sub-flight", "mi-charge", "esp-reserve", "mis-reserve"):
        for job in await d.activate(job_type):
            accepted(await d.complete(job, {"done": job_type}))
    await d.settle()
    accepted(await d.cancel(cancelled))  # its completed activity's subscription goes with it
    accepted(await d.throw_error((await d.activate("pay"))[0], "payment-failed"))
    accepted(await d.throw_error((await d.activate("esp-ship"))[0], "abort"))
    for job_type in ("ce-b", "ref-b", "sub-cancel-flight", "mis-release"):  # the rejected order's own release
        for job in await d.activate(job_type):
            accepted(await d.complete(job))
    for _ in range(3):  # a sequential loop: one instance after the other
        await d.settle()
        accepted(await d.complete((await d.activate("mi-notify"))[0]))
    await d.settle()
    for job_type in ("sub-hotel", "sub-review", "mis-review"):
        for job in await d.activate(job_type):
            accepted(await d.complete(job))
        await d.settle()
    for job_type in (
        "cancel-booking",
        "ce-undo-a",
        "ce-undo-b",
        "ref-undo-a",
        "sub-cancel-hotel",
        "mi-refund",
        "mi-retract",
        "mis-release",  # once per order that was not released from inside
    ):
        jobs = await d.activate(job_type)
        assert jobs, f"no {job_type} handler job"
        for job in jobs:
            accepted(await d.complete(job))
    await d.settle()
    accepted(await d.complete((await d.activate("esp-release"))[0]))
    for job_type in ("notify", "ref-after"):
        accepted(await d.complete((await d.activate(job_type))[0]))
    await d.settle()
    assert not await d.activate("ref-undo-b")
    # cancelled while a handler inside a sub-process runs: the sub-process's subscriptions go with it
    trip = accepted(await d.create("compensation-subprocess", {"tripNo": 2})).value["processInstanceKey"]
    await d.settle()
    accepted(await d.complete((await d.activate("sub-flight"))[0]))
    await d.settle()
    assert d.read(lambda s: len(s.compensation_subscriptions.of_instance(trip))) == 1
    assert await d.activate("sub-cancel-flight")
    accepted(await d.cancel(trip))
    await d.settle()
    assert not d.incidents()
    assert d.read(lambda s: list(s.iter_all("compensation_subscriptions"))) == []
    assert d.read(lambda s: list(s.iter_all("element_instances"))) == []
    await d.close()

    live = check_replay_equals_live(d.directory, tmp_path)
    await check_restart_recovers(d, live, from_scratch=True)


async def test_execution_listeners_replay_to_the_live_state(tmp_path: Path) -> None:
    """Start and end listeners run to the end, a listener out of retries and a bad listener type raise incidents
    that resolve, a boundary timer interrupts the task, an instance is cancelled while a listener runs, and a stray
    COMPLETE_EXECUTION_LISTENER is refused; nothing is left behind."""
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("execution-listeners.bpmn"))

    async def run(job_type: str, variables: dict | None = None) -> None:
        await d.settle()
        (job,) = await d.activate(job_type)
        accepted(await d.complete(job, variables))

    happy = {"order": {"id": 1}, "retries": 1, "stage": "two", "path": "sub"}
    accepted(await d.create("execution-listeners", happy))
    for job_type in ("el-process-start", "el-started", "el-task-start", "el-two", "el-work", "el-task-end"):
        await run(job_type, {"result": 1, "seen": job_type})
    for job_type in ("el-route", "el-sub-start", "el-sub-end-event", "el-sub-end", "el-process-end"):
        await run(job_type)

    troubled = accepted(await d.create("execution-listeners", {**happy, "stage": None}))
    troubled_key = troubled.value["processInstanceKey"]
    await run("el-process-start")
    await run("el-started")
    await d.settle()
    (listener,) = await d.activate("el-task-start")
    task_key = d.read(lambda s: s.jobs.get(listener)["value"]["elementInstanceKey"])
    stray = await d.send(ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.COMPLETE_EXECUTION_LISTENER, {}, task_key)
    assert stray.record_type == RecordType.COMMAND_REJECTION
    assert "to have completed" in stray.rejection_reason, "its listener job still runs"
    accepted(await d.fail(listener, retries=0))
    await d.settle()
    ((incident_key, incident),) = d.incidents()
    assert incident["errorType"] == "EXECUTION_LISTENER_NO_RETRIES"
    accepted(await d.update_retries(listener, 1))
    accepted(await d.resolve(incident_key))
    await run("el-task-start")
    await d.settle()
    ((incident_key, incident),) = d.incidents()
    assert incident["errorType"] == "EXTRACT_VALUE_ERROR"  # the second listener's type is null
    accepted(await d.set_variables(troubled_key, {"stage": "two"}))
    accepted(await d.resolve(incident_key))
    await run("el-task-start")  # every start listener runs again
    await run("el-two")
    await d.settle()
    assert await d.activate("el-work")
    d.clock.now += 70_000  # the boundary timer (opened after the start listeners) interrupts the task
    for _ in range(500):  # the due-timer checker writes the trigger on its own
        await d.settle()
        too_late = await d.activate("el-too-late")
        if too_late:
            break
        await asyncio.sleep(0.01)
    accepted(await d.complete(too_late[0]))
    await run("el-process-end")

    cancelled = accepted(await d.create("execution-listeners", happy)).value["processInstanceKey"]
    await run("el-process-start")
    await d.settle()
    assert await d.activate("el-started")
    accepted(await d.cancel(cancelled))
    await d.settle()

    assert not d.incidents()
    assert d.read(lambda s: list(s.iter_all("element_instances"))) == []
    assert d.read(lambda s: list(s.iter_all("jobs"))) == []
    await d.close()

    live = check_replay_equals_live(d.directory, tmp_path)
    await check_restart_recovers(d, live, from_scratch=True)


class _Route:
    """Delivers what a partition sends to the other partition (a two-partition cluster without a network)."""

    def __init__(self, target: Driver) -> None:
        self.target = target

    async def execute(
        self, partition_id: int, value_type: ValueType, intent: int, value: dict, key: int = -1, **_options: Any
    ) -> Record:
        return await self.target.send(value_type, intent, value, key)


def routed_partitions(tmp_path: Path) -> tuple[Driver, Driver]:
    """Partitions 1 and 2 of two, opened; what partition 1 distributes goes straight to partition 2."""
    second = Driver(tmp_path / "p" / "2", PartitionConfig(partition_id=2, partitions_count=2, checker_interval_s=0.005))
    second.open()
    first = Driver(tmp_path / "p" / "1", PartitionConfig(partitions_count=2, checker_interval_s=0.005))
    first.open()
    assert first.partition is not None
    first.partition.inter_partition = _Route(second)
    return first, second


async def distributed(driver: Driver) -> None:
    """Until ``driver``'s partition has no distribution left pending (or 5 s passed)."""
    for _ in range(500):
        if not driver.read(lambda s: list(s.iter_all("distributions"))):
            return
        await asyncio.sleep(0.01)


async def test_binding_types_resolve_on_a_partition_the_deployments_were_distributed_to(tmp_path: Path) -> None:
    first, second = routed_partitions(tmp_path)
    for fixture in ("call-binding.bpmn", "call-binding-child-v1b.bpmn", "call-binding-child-v2.bpmn"):
        accepted(await first.deploy(fixture))
    await distributed(first)
    await second.settle()
    accepted(await second.create("call-binding"))
    await second.settle()
    jobs = await second.activate("bind-work")
    # latest: version 3; deployed together with the caller: version 1; the latest tagged v1: version 2
    versions = second.read(lambda s: sorted(s.jobs.get(j)["value"]["processDefinitionVersion"] for j in jobs))
    assert versions == [1, 2, 3]
    assert not second.incidents()
    await first.close()
    await second.close()
    check_replay_equals_live(second.directory, tmp_path)


async def test_a_process_calling_itself_stops_at_the_depth_limit_with_an_incident(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1", PartitionConfig(checker_interval_s=0.005, max_process_depth=5))
    d.open()
    accepted(await d.deploy("call-recursive.bpmn"))
    root = accepted(await d.create("call-recursive", {"depth": 1})).value["processInstanceKey"]
    await d.settle()
    ((_, incident),) = d.incidents()
    assert incident["errorType"] == "CALLED_ELEMENT_ERROR"
    assert incident["errorMessage"].startswith("The call activity has reached the maximum depth of 5.")
    depth = d.read(lambda s: s.variables.get_local(incident["elementInstanceKey"], "depth"))
    assert depth is not None and depth[1] == 6, "five instances run; the fifth one's call activity cannot go on"
    check_called_instances_are_linked(d)
    accepted(await d.cancel(root))
    await d.settle()
    assert not d.read(lambda s: list(s.iter_all("element_instances"))), "cancelling the root ends every level"
    assert not d.incidents()
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


# -- randomized ----------------------------------------------------------------------------------------------

STEPS = int(os.environ.get("WEIR_REPLAY_STEPS", "240"))
BATCH = 40


async def _user_task_command(d: Driver, rng: random.Random) -> None:
    """A user task command on a task that exists (or on none), with arguments good and bad."""
    from broker.state.db import unpack

    keys = d.read(lambda s: [unpack(v)["value"]["userTaskKey"] for _, v in s.iter_all("user_tasks")])
    if len(keys) < 3 and rng.random() < 0.5:
        pid = rng.choice(["user-task-native", "user-task-listeners"])
        await d.create(pid, START_VARIABLES[pid])
        return
    if rng.random() < 0.4:  # a task listener's turn
        for job in await d.activate(rng.choice([t for t in JOB_TYPES if t.startswith("tl-")]), 1):
            await d.complete_listener(job, rng)
        return
    key = rng.choice(keys) if keys and rng.random() < 0.9 else rng.randint(1, 1 << 40)
    intent, value = rng.choice(
        [
            (UserTaskIntent.ASSIGN, {"assignee": rng.choice(["ann", "bob", ""]), "action": ""}),
            (UserTaskIntent.CLAIM, {"assignee": rng.choice(["ann", "bob", ""])}),
            (
                UserTaskIntent.UPDATE,
                {"changedAttributes": ["priority", "dueDate"], "priority": rng.choice([10, 99, 200]), "dueDate": ""},
            ),
            (UserTaskIntent.COMPLETE, {"variables": {"decision": rng.choice(["yes", "no"])}}),
        ]
    )
    task = asyncio.ensure_future(d.send(ValueType.USER_TASK, intent, value, key))
    await asyncio.wait([task], timeout=0.05)  # with listeners, the answer waits for them: do not wait here
    d.pending.append(task)


async def _random_step(d: Driver, rng: random.Random, known: dict[str, set[int]]) -> None:
    action = rng.choices(
        [
            "create",
            "activate",
            "complete",
            "fail",
            "throw",
            "cancel",
            "variables",
            "resolve",
            "time",
            "publish",
            "signal",
            "deploy",
            "bogus",
            "user-task",
        ],
        weights=[6, 5, 6, 2, 2, 1, 2, 2, 2, 2, 2, 1, 1, 3],
    )[0]
    if action in ("complete", "fail", "throw") and not known["jobs"]:
        action = "activate"
    if action == "create" or not known["instances"]:
        pid = rng.choice([f.removesuffix(".bpmn") for f in FIXTURES])
        variables = dict(START_VARIABLES.get(pid, {}))
        if pid in ("exclusive-gateway", "inclusive-gateway"):
            variables["amount"] = rng.choice([5, 150, 100])
        if pid == "inclusive-gateway":
            variables["express"] = rng.choice([True, False])
        if pid == "inclusive-reachability":
            variables["toJoin"] = rng.choice([True, False])
        if pid in ("mi-parallel", "mi-sequential"):
            variables["items"] = rng.choice([[], [1], [1, 2, 3], "not a list"])
        if pid == "ad-hoc":
            variables["chosen"] = rng.choice([["tool-a", "tool-c"], ["tool-b"], [], "tool-a", ["nope"]])
        if pid == "ad-hoc-condition":
            variables["enough"] = rng.choice([True, False])
        if pid == "business-rule-task":
            variables["total"] = rng.choice([10, 120])  # 120 with 12 orders matches no rule of the unique table: fails
        if pid == "inclusive-no-default":
            variables["x"] = rng.choice(["a", "b", "none"])
        if pid == "script-task-failure":
            variables["divisor"] = rng.choice([0, 3])
        if pid in ("order-payment", "message-catch", "event-gateway", "event-subprocess", "call-message"):
            variables["orderId"] = variables["requestId"] = rng.choice(["o-1", "o-2"])
        if pid == "call-chain":
            variables["escalate"] = rng.choice([True, False])
        if pid == "compensation-end-event":
            variables["skipB"] = rng.choice([True, False])
        if pid == "compensation-multi-instance":
            variables["items"] = rng.choice([[], ["x"], ["x", "y", "z"]])
        if pid == "compensation-multi-instance-subprocess":
            variables["items"] = rng.choice([[], ["a", "b"], ["a", "rejected", "c"]])
        if pid == "execution-listeners":
            variables["stage"] = rng.choice(["two", "two", None])  # None: the listener's FEEL type fails
            variables["path"] = rng.choice(["sub", "direct"])
        if pid == "call-activity-feel":
            variables["childId"] = rng.choice(["call-activity-child", "call-chain-leaf", "call-missing-child", 7])
        rec = await d.create(pid, variables)
        if rec.record_type == RecordType.EVENT:
            known["instances"].add(rec.value["processInstanceKey"])
    elif action == "activate":
        job_type = rng.choice(JOB_TYPES)
        activated = await d.activate(job_type, rng.randint(1, 3), rng.choice([1000, 60_000]))
        known["jobs"].update(activated)
        if job_type.startswith("tl-"):
            known["listener_jobs"].update(activated)
    elif action in ("complete", "fail", "throw"):
        job = rng.choice(sorted(known["jobs"]))
        if action == "complete" and job in known["listener_jobs"]:
            rec = await d.complete_listener(job, rng)
        elif action == "complete":
            rec = await d.complete(job, {"reservation": {"id": "r", "items": [1]}, "step": rng.randint(0, 9)})
        elif action == "fail":
            rec = await d.fail(job, retries=rng.choice([0, 1, 2]), backoff=rng.choice([0, 0, 500]))
        else:
            rec = await d.throw_error(job, rng.choice(ERROR_CODES))
        if rec.record_type == RecordType.COMMAND_REJECTION or action == "complete":
            known["jobs"].discard(job)
    elif action == "cancel":
        await d.cancel(rng.choice(sorted(known["instances"])))
    elif action == "variables":
        await d.set_variables(rng.choice(sorted(known["instances"])), {"v": rng.random(), "s": "x" * rng.randint(0, 9)})
    elif action == "resolve":
        for key, incident in d.incidents()[:2]:
            if incident.get("jobKey", -1) > 0:
                await d.update_retries(incident["jobKey"], 1)
            await d.resolve(key)
    elif action == "time":
        roll = rng.random()
        if roll < 0.2:  # pin processing time (ahead of the partition's clock, or at it): a CLOCK PINNED event
            await d.send(ValueType.CLOCK, ClockIntent.PIN, {"time": d.clock.now + rng.choice([0, 2_000, 70_000])})
        elif roll < 0.3:
            await d.send(ValueType.CLOCK, ClockIntent.RESET, {})
        else:
            d.clock.now += rng.choice([600, 1_000, 2_000, 70_000])
        await asyncio.sleep(0.02)
    elif action == "publish":
        value = {
            "name": rng.choice(["payment", "approved", "order-placed", "answer", "cancel-order", "withdraw"]),
            "correlationKey": rng.choice(["o-1", "o-2"]),
            "timeToLive": rng.choice([0, 1_000, 60_000]),
            "messageId": rng.choice(["", "", "m-1"]),
            "variables": {"paid": rng.randint(1, 9)},
            "tenantId": TENANT,
        }
        if rng.random() < 0.3:  # correlate at once instead: answered when the instance took it (or nothing did)
            correlation = {k: value[k] for k in ("name", "correlationKey", "variables", "tenantId")}
            task = asyncio.ensure_future(
                d.send(ValueType.MESSAGE_CORRELATION, MessageCorrelationIntent.CORRELATE, correlation)
            )
            await asyncio.wait([task], timeout=0.05)
            d.pending.append(task)
        else:
            await d.send(ValueType.MESSAGE, MessageIntent.PUBLISH, value)
    elif action == "signal":
        value = {"signalName": rng.choice(SIGNALS), "variables": {"signalled": rng.randint(1, 9)}, "tenantId": TENANT}
        await d.send(ValueType.SIGNAL, SignalIntent.BROADCAST, value)
    elif action == "deploy":
        await d.deploy(rng.choice(DEPLOYED_LATER))
    elif action == "user-task":
        await _user_task_command(d, rng)
    else:
        await d.complete(rng.randint(1, 1 << 40))


@pytest.mark.timeout(60)
async def test_random_command_sequences_replay_to_the_live_state(tmp_path: Path) -> None:
    seed = int(os.environ.get("WEIR_REPLAY_SEED", random.SystemRandom().randrange(1 << 32)))
    print(f"WEIR_REPLAY_SEED={seed}")
    rng = random.Random(seed)
    config = PartitionConfig(checker_interval_s=0.005, max_commands_per_round=rng.choice([1, 3, 500]))
    d = Driver(tmp_path / "p" / "1", config)
    d.open()
    accepted(await d.deploy(*FIXTURES, *EVENT_STARTED, *DECISIONS))
    known: dict[str, set[int]] = {"instances": set(), "jobs": set(), "listener_jobs": set()}
    for step in range(STEPS):
        await _random_step(d, rng, known)
        if (step + 1) % BATCH == 0:
            if rng.random() < 0.5:
                await d.settle()
            await d.close(snapshot=rng.random() < 0.7)
            live = check_replay_equals_live(d.directory, tmp_path)
            if rng.random() < 0.3:
                await check_restart_recovers(d, live, from_scratch=rng.random() < 0.5)
            d.open()
    await d.settle()
    check_called_instances_are_linked(d)
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)
    report = replay_log(d.directory, tmp_path / "final")
    assert report.result.records_read == report.result.applied_position


def test_the_random_scenario_deploys_every_element_kind_the_engine_runs() -> None:
    """A new element kind joins the random scenario with a fixture (job-worker send and business rule tasks are the
    service task's processor, which the scenario runs)."""
    from broker.engine.bpmn import parse_bpmn
    from broker.engine.elements.registry import SUPPORTED_KINDS

    kinds = set()
    for fixture in FIXTURES + EVENT_STARTED:
        for process in parse_bpmn((BPMN / fixture).read_bytes(), fixture):
            for element in process.elements.values():
                kinds.add(element.kind)
                if element.multi_instance is not None:
                    kinds.add("MULTI_INSTANCE_BODY")
                if element.script is not None:
                    kinds.add("SCRIPT_TASK:ENGINE")
                if element.called_decision is not None:
                    kinds.add("BUSINESS_RULE_TASK:ENGINE")
                if element.user_task is not None and element.user_task.native:
                    kinds.add("USER_TASK:ENGINE")
    assert SUPPORTED_KINDS - kinds <= {"SEND_TASK", "BUSINESS_RULE_TASK"}


async def test_a_redelivered_distributed_deployment_is_answered_without_a_second_created_event(tmp_path: Path) -> None:
    """The sending partition resends a distribution whose acknowledgement it lost: the receiver answers again, but
    writes DEPLOYMENT CREATED (and the processes) only once."""
    origin = Driver(tmp_path / "p" / "1")
    origin.open()
    deployed = accepted(await origin.deploy("one-task.bpmn"))
    key = deployed.value["processesMetadata"][0]["processDefinitionKey"]
    stored = origin.read(lambda s: s.processes.get(key))
    await origin.close()

    d = Driver(tmp_path / "p" / "2")
    d.open()
    command = {"distributedFrom": 1, "deploymentKey": deployed.key, "processes": [stored]}
    first = accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, command))
    again = accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, command))
    assert first.key == again.key == deployed.key
    await d.settle()
    await d.close()
    created = [
        r
        for r in iter_records(d.directory)
        if r.record_type == RecordType.EVENT and r.value_type in (ValueType.DEPLOYMENT, ValueType.PROCESS)
    ]
    assert [(r.value_type, r.key) for r in created] == [(ValueType.PROCESS, key), (ValueType.DEPLOYMENT, deployed.key)]
    check_replay_equals_live(d.directory, tmp_path)


async def _jobs_of(d: Driver, job_type: str, expected: int) -> list[int]:
    """Activate until ``expected`` jobs of ``job_type`` are there (timers fire through the partition's checker)."""
    found: list[int] = []
    for _ in range(500):
        found += await d.activate(job_type)
        if len(found) >= expected:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"only {len(found)} of {expected} '{job_type}' jobs")


async def test_a_pinned_clock_fires_timers_at_the_pinned_time_and_replays(tmp_path: Path) -> None:
    """CLOCK PIN stands processing time still at a later time: a timer due by then fires, stamped with it, and
    later commands are too. The pin is state (a PINNED event): replay and a restart from the log alone find the
    clock pinned; CLOCK RESET lets it follow the partition's clock again."""
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("timer-catch.bpmn"))
    accepted(await d.create("timer-catch", {"delay": "PT1H"}))
    await d.settle()
    assert await d.activate("after-wait") == [], "not due yet by the partition's clock"
    rejected = await d.send(ValueType.CLOCK, ClockIntent.PIN, {"time": -1})
    assert rejected.record_type == RecordType.COMMAND_REJECTION
    assert rejected.rejection_reason == "Expected pin time to be not negative but it was -1"
    beyond = await d.send(ValueType.CLOCK, ClockIntent.PIN, {"time": 2**63})
    assert beyond.rejection_reason == f"Expected pin time to be at most {2**63 - 1} but it was {2**63}"
    pinned_at = d.clock.now + 2 * 3600_000
    pinned = accepted(await d.send(ValueType.CLOCK, ClockIntent.PIN, {"time": pinned_at}))
    assert pinned.intent == ClockIntent.PINNED and pinned.value == {"time": pinned_at}
    [job] = await _jobs_of(d, "after-wait", 1)
    assert d.read(lambda s: s.meta.pinned_clock()) == pinned_at
    assert d.read(lambda s: s.jobs.get(job)["value"]["deadline"]) == pinned_at + 60_000, "activated at the pin"
    await d.close(snapshot=False)
    triggered = [r for r in iter_records(d.directory) if r.value_type == ValueType.TIMER and r.is_event]
    assert [(r.intent_enum.name, r.timestamp) for r in triggered][-1] == ("TRIGGERED", pinned_at)
    live = check_replay_equals_live(d.directory, tmp_path)
    await check_restart_recovers(d, live, from_scratch=True)

    d.open()
    assert d.read(lambda s: s.meta.pinned_clock()) == pinned_at, "a restart keeps the clock pinned"
    reset = accepted(await d.send(ValueType.CLOCK, ClockIntent.RESET, {}))
    assert reset.intent == ClockIntent.RESETTED
    created = accepted(await d.create("timer-catch", {"delay": "PT1H"}))
    assert created.timestamp == d.clock.now, "processing follows the partition's clock again"
    assert d.read(lambda s: s.meta.pinned_clock()) is None
    await d.settle()
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_a_clock_pin_is_distributed_to_every_partition(tmp_path: Path) -> None:
    first, second = routed_partitions(tmp_path)
    accepted(await first.send(ValueType.CLOCK, ClockIntent.PIN, {"time": 1_800_000_000_000}))
    await distributed(first)
    assert second.read(lambda s: s.meta.pinned_clock()) == 1_800_000_000_000
    accepted(await first.send(ValueType.CLOCK, ClockIntent.RESET, {}))
    for _ in range(500):
        if second.read(lambda s: s.meta.pinned_clock()) is None:
            break
        await asyncio.sleep(0.01)
    assert second.read(lambda s: s.meta.pinned_clock()) is None
    await first.close()
    await second.close()
    check_replay_equals_live(first.directory, tmp_path)
    check_replay_equals_live(second.directory, tmp_path)
