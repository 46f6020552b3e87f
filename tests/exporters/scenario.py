"""Real Weir records for exporter tests: an in-process partition runs BPMN processes and its log is read back.

The records are whatever the engine writes (deployments with resources, element lifecycles, jobs, variables,
incidents, rejections), so exporter tests check Weir's actual shapes, not hand-written guesses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from broker.engine.behaviors import TENANT
from broker.engine.job_processors import activation_request
from broker.log import FileLog
from broker.protocol.codec import decode_block
from broker.protocol.enums import (
    DecisionEvaluationIntent,
    DeploymentIntent,
    IncidentIntent,
    JobBatchIntent,
    JobIntent,
    ProcessInstanceCreationIntent,
    ProcessInstanceIntent,
    RecordType,
    UserTaskIntent,
    ValueType,
    VariableDocumentIntent,
)
from broker.protocol.record import Record
from broker.state.db import unpack
from broker.state.repositories import PartitionState
from broker.stream.partition import Partition, PartitionConfig
from tests.harness import BPMN


class FixedClock:
    """Processing time under the test's control (a fixed day, so the index date is known)."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class PartitionDriver:
    """Sends commands to an in-process partition the way the gateway does."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition

    async def send(self, value_type: ValueType, intent: int, value: dict[str, Any], key: int = -1) -> Record:
        return await asyncio.wait_for(self.partition.execute(value_type, intent, value, key), 10)

    async def settle(self) -> None:
        """Wait until every queued command and follow-up is processed."""
        for _ in range(2000):
            if self.partition.backlog == 0:
                await asyncio.sleep(0.002)
                if self.partition.backlog == 0:
                    return
            await asyncio.sleep(0.001)
        raise AssertionError(f"partition still has {self.partition.backlog} commands waiting")

    def user_task_key(self, process_instance_key: int) -> int:
        """The key of the process instance's user task, read from the partition's state."""
        assert self.partition.db is not None
        view = PartitionState(self.partition.db)
        with self.partition.db.begin() as txn:
            view.bind(txn)
            for _, raw in view.iter_all("user_tasks"):
                task = unpack(raw)["value"]
                if task["processInstanceKey"] == process_instance_key:
                    return int(task["userTaskKey"])
        raise AssertionError(f"no user task for instance {process_instance_key}")

    async def deploy(self, *names: str) -> Record:
        resources = [{"resourceName": n, "resource": (BPMN / n).read_bytes()} for n in names]
        return await self.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources})

    async def create(
        self, process_id: str, variables: dict[str, Any] | None = None, labels: dict[str, Any] | None = None
    ) -> Record:
        """``labels``: the instance's businessId and tags, if any."""
        value = {
            "bpmnProcessId": process_id,
            "version": -1,
            "processDefinitionKey": -1,
            "variables": variables or {},
            "fetchVariables": [],
            "tenantId": TENANT,
            **(labels or {}),
        }
        return await self.send(ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, value)

    async def activate(self, job_type: str, max_jobs: int = 100) -> list[int]:
        value = activation_request(job_type, "exporter-test", 60_000, max_jobs)
        rec = await self.send(ValueType.JOB_BATCH, JobBatchIntent.ACTIVATE, value)
        assert rec.record_type == RecordType.EVENT, rec.rejection_reason
        return list(rec.value["jobKeys"])

    async def complete(self, job_key: int, variables: dict[str, Any] | None = None) -> Record:
        return await self.send(ValueType.JOB, JobIntent.COMPLETE, {"variables": variables or {}}, job_key)

    async def fail(self, job_key: int, retries: int) -> Record:
        value = {"retries": retries, "errorMessage": "boom", "retryBackoff": 0, "variables": {}}
        return await self.send(ValueType.JOB, JobIntent.FAIL, value, job_key)


async def logged_run(directory: Path, drive: Callable[[PartitionDriver], Awaitable[None]]) -> list[Record]:
    """Run ``drive`` against a new partition in ``directory`` on a fixed clock; returns every record of its log,
    in position order."""
    partition = Partition(directory, PartitionConfig(checker_interval_s=0.01), clock=FixedClock())
    partition.open()
    partition.start()
    try:
        await drive(PartitionDriver(partition))
    finally:
        await partition.close(snapshot=False)
    return list(read_log(directory / "log"))


async def run_scenario(directory: Path, *, instances: int = 3) -> list[Record]:
    """Deploy, create instances, complete their jobs, fail one into an incident, reject a command.

    Returns every record of the partition's log, in position order.
    """

    async def drive(d: PartitionDriver) -> None:
        await d.deploy("one-task.bpmn")
        for i in range(instances):
            labels = {"businessId": f"o-{i}", "tags": ["shop:eu"]} if i == 0 else None
            await d.create("one-task", {"i": i, "order": {"id": f"o-{i}", "lines": [1, 2]}}, labels)
        await d.settle()
        jobs = await d.activate("test")
        for job in jobs[:-1]:
            await d.complete(job, {"done": True})
        await d.fail(jobs[-1], retries=0)  # no retries left: an incident
        await d.settle()
        first = await d.create("one-task", {"late": "yes"})
        await d.send(
            ValueType.VARIABLE_DOCUMENT,
            VariableDocumentIntent.UPDATE,
            {"scopeKey": first.value["processInstanceKey"], "variables": {"x": 1}, "updateSemantics": "PROPAGATE"},
            first.value["processInstanceKey"],
        )
        await d.send(ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.CANCEL, {}, first.value["processInstanceKey"])
        await d.send(ValueType.INCIDENT, IncidentIntent.RESOLVE, {}, 12345)  # rejected: not found
        # decisions and forms: deployed, evaluated, failed
        form = b'{"id": "exported-form", "components": []}'
        resources = [
            {"resourceName": "discount.dmn", "resource": (BPMN.parent / "dmn" / "discount.dmn").read_bytes()},
            {"resourceName": "exported.form", "resource": form},
        ]
        await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources})
        for variables in ({"orders": 12, "total": 1}, {"orders": 4, "total": 120}):
            value = {"decisionId": "discount", "decisionKey": -1, "variables": variables, "tenantId": TENANT}
            await d.send(ValueType.DECISION_EVALUATION, DecisionEvaluationIntent.EVALUATE, value)
        await d.settle()
        await _user_tasks(d)

    return await logged_run(directory, drive)


async def _user_tasks(d: PartitionDriver) -> None:
    """Native user tasks: created, assigned, updated, completed; task listeners approving, correcting, denying."""
    await d.deploy("user-task-native.bpmn", "user-task-listeners.bpmn")
    labels = {"businessId": "review-1", "tags": ["review"]}
    native = await d.create("user-task-native", {"reviewers": ["ann"], "due": "2030-01-01T00:00:00Z"}, labels)
    await d.settle()
    key = d.user_task_key(native.value["processInstanceKey"])
    await d.send(ValueType.USER_TASK, UserTaskIntent.ASSIGN, {"assignee": "ann", "action": ""}, key)
    update = {"changedAttributes": ["priority"], "priority": 10, "action": ""}
    await d.send(ValueType.USER_TASK, UserTaskIntent.UPDATE, update, key)
    await d.send(ValueType.USER_TASK, UserTaskIntent.COMPLETE, {"variables": {"ok": True}, "action": ""}, key)
    listened = await d.create("user-task-listeners", {"owner": "zoe"})
    await d.settle()
    for job_type, result in (
        ("tl-creating", {}),
        ("tl-assigning", {"correctedAttributes": ["assignee"], "corrections": {"assignee": "max"}}),
    ):
        for job in await d.activate(job_type):
            await d.send(ValueType.JOB, JobIntent.COMPLETE, {"variables": {}, "result": result}, job)
        await d.settle()
    key = d.user_task_key(listened.value["processInstanceKey"])
    completion = asyncio.ensure_future(
        d.send(ValueType.USER_TASK, UserTaskIntent.COMPLETE, {"variables": {}, "action": ""}, key)
    )
    await d.settle()
    for job in await d.activate("tl-completing"):
        await d.send(ValueType.JOB, JobIntent.COMPLETE, {"variables": {}, "result": {"denied": True}}, job)
    await completion
    await d.send(ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.CANCEL, {}, listened.value["processInstanceKey"])
    await d.settle()


def read_log(log_directory: Path, from_position: int = 1) -> Iterator[Record]:
    """Committed records of a partition log from ``from_position`` on (the way the broker reads them)."""
    log = FileLog(log_directory)
    try:
        for block in log.read(from_position):
            _processed, records = decode_block(block.payload)
            for record in records:
                if record.position >= from_position:
                    yield record
    finally:
        log.close()
