"""Batch operations on in-process partitions: chunks, item outcomes, suspend/resume/cancel, distribution to other
partitions and the coordinator's completion; every scenario ends by checking that replay rebuilds the live state."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from broker.engine import batch_operations as bo
from broker.protocol.enums import (
    BatchOperationCreationIntent,
    BatchOperationExecutionIntent,
    BatchOperationLifecycleManagementIntent,
    BatchOperationPartitionLifecycleIntent,
    IncidentIntent,
    ProcessInstanceIntent,
    RecordType,
    RejectionType,
    ValueType,
)
from broker.protocol.keys import encode_key
from broker.protocol.record import Record
from broker.protocol.values import TENANT
from broker.stream.partition import PartitionConfig
from broker.tools.inspect import iter_records
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live

BOC = BatchOperationCreationIntent
BOL = BatchOperationLifecycleManagementIntent
BOP = BatchOperationPartitionLifecycleIntent
LIFECYCLE = ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT


@pytest.fixture
async def driver(tmp_path: Path) -> AsyncIterator[Driver]:
    d = Driver(tmp_path / "p" / "1", PartitionConfig(checker_interval_s=0.005, max_commands_per_round=8))
    d.open()
    yield d
    if d.partition is not None:
        await d.settle()
        await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def instances(d: Driver, count: int, process_id: str = "one-task") -> list[int]:
    keys = []
    for _ in range(count):
        keys.append(accepted(await d.create(process_id, {})).value["processInstanceKey"])
    await d.settle()
    return keys


def items_of(partition_id: int, pairs: list[tuple[int, int]]) -> list[dict[str, Any]]:
    return [{"partitionId": partition_id, "items": [{"itemKey": i, "processInstanceKey": p} for i, p in pairs]}]


async def create_batch(d: Driver, batch_type: str, groups: list[dict[str, Any]], **extra: Any) -> Record:
    value = {"batchOperationType": batch_type, "filter": {"processDefinitionId": "one-task"}, "partitionItems": groups}
    return await d.send(ValueType.BATCH_OPERATION_CREATION, BOC.CREATE, {**value, **extra})


def batch(d: Driver, key: int) -> dict[str, Any]:
    return d.read(lambda s: s.batch_operations.get(key))


async def settled(d: Driver, key: int, state: str) -> dict[str, Any]:
    """The batch's entry once it reached ``state`` here (its chunks are follow-ups, worked over a few rounds)."""
    for _ in range(500):
        await d.settle()
        entry = batch(d, key)
        if entry is not None and entry["state"] == state:
            return entry
        await asyncio.sleep(0.01)
    raise AssertionError(f"batch {key} is {batch(d, key)}, expected {state}")


async def gone_all(d: Driver, keys: list[int]) -> None:
    """Every one of these instances ended (the cancellations are follow-ups of the last chunk)."""
    for _ in range(500):
        await d.settle()
        if not d.read(lambda s: [k for k in keys if s.elements.get(k) is not None]):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("instances still running")


async def logged(d: Driver) -> list[Record]:
    await d.settle()
    await d.close()
    return list(iter_records(d.directory))


async def test_a_cancel_batch_works_its_items_in_chunks_and_records_each_outcome(driver: Driver) -> None:
    accepted(await driver.deploy("one-task.bpmn"))
    keys = await instances(driver, 120)
    gone = keys[0] + 10_000_000  # never issued: fails with the reason a cancel command would give
    rec = accepted(await create_batch(driver, bo.CANCEL_PROCESS_INSTANCE, items_of(1, [(k, k) for k in [*keys, gone]])))
    key = rec.value["batchOperationKey"]
    assert rec.value["batchOperationType"] == bo.CANCEL_PROCESS_INSTANCE
    entry = await settled(driver, key, bo.COMPLETED)
    assert entry["partitionDone"]
    assert (entry["completedCount"], entry["failedCount"]) == (120, 1)
    await gone_all(driver, keys)
    records = await logged(driver)
    executes = [r for r in records if r.value_type == ValueType.BATCH_OPERATION_EXECUTION and r.intent == 0]
    assert len(executes) == 3, "121 items in chunks of 50"
    executed = [
        item
        for r in records
        if r.value_type == ValueType.BATCH_OPERATION_EXECUTION and r.intent == BatchOperationExecutionIntent.EXECUTED
        for item in r.value["items"]
    ]
    assert [i["itemKey"] for i in executed] == [*keys, gone]
    assert executed[-1]["state"] == "FAILED"
    assert executed[-1]["errorMessage"] == (
        f"Expected to cancel a process instance with key '{gone}', but no such process was found"
    )
    cancels = [
        r
        for r in records
        if r.record_type == RecordType.COMMAND
        and r.value_type == ValueType.PROCESS_INSTANCE
        and r.intent == ProcessInstanceIntent.CANCEL
    ]
    assert sorted(r.key for r in cancels) == sorted(keys), "each item gets the command a client would send"
    assert [r.intent for r in records if r.value_type == LIFECYCLE] == [BOL.COMPLETED]


async def test_incidents_are_resolved_as_a_batch(driver: Driver) -> None:
    accepted(await driver.deploy("script-task-failure.bpmn"))
    keys = await instances(driver, 3, "script-task-failure")
    incidents = _incident_keys(driver)
    assert len(incidents) == 3
    rec = accepted(await create_batch(driver, bo.RESOLVE_INCIDENT, items_of(1, incidents)))
    entry = await settled(driver, rec.key, bo.COMPLETED)
    assert (entry["completedCount"], entry["failedCount"]) == (3, 0)
    records = await logged(driver)
    resolves = [
        r.key
        for r in records
        if r.record_type == RecordType.COMMAND
        and r.value_type == ValueType.INCIDENT
        and r.intent == IncidentIntent.RESOLVE
    ]
    assert sorted(resolves) == sorted(i for i, _ in incidents)
    assert {p for _, p in incidents} == set(keys)


def _incident_keys(d: Driver) -> list[tuple[int, int]]:
    from broker.state.db import read_u64, unpack

    rows = d.read(lambda s: [(read_u64(k), unpack(v)) for k, v in s.iter_all("incidents")])
    return [(k, v["processInstanceKey"]) for k, v in rows]


async def test_suspend_stops_taking_chunks_resume_continues_and_cancel_drops_the_rest(driver: Driver) -> None:
    accepted(await driver.deploy("one-task.bpmn"))
    keys = await instances(driver, 400)
    pairs = [(k, k) for k in keys]
    # the suspension arrives together with the creation (the key it will get is the next one): it is served between
    # the first chunks, since a round admits waiting client commands behind the follow-ups it has queued
    key = encode_key(1, driver.read(lambda s: s.meta.key_counter()) + 1)
    created, suspended = await asyncio.gather(
        create_batch(driver, bo.CANCEL_PROCESS_INSTANCE, items_of(1, pairs)),
        driver.send(LIFECYCLE, BOL.SUSPEND, {}, key),
    )
    assert accepted(created).key == key
    accepted(suspended)
    await driver.settle()
    entry = batch(driver, key)
    assert entry["state"] == bo.SUSPENDED
    worked = entry["completedCount"]
    assert 0 < worked < 400, "a suspended partition takes no further chunk"
    again = await driver.send(LIFECYCLE, BOL.SUSPEND, {}, key)
    assert again.rejection_type == RejectionType.INVALID_STATE
    assert "is SUSPENDED" in again.rejection_reason
    # a restart (a new leader) finds the batch where it stopped: it is all on the log
    await driver.close(snapshot=False)
    driver.open()
    assert batch(driver, key) == entry
    accepted(await driver.send(LIFECYCLE, BOL.RESUME, {}, key))
    accepted(await driver.send(LIFECYCLE, BOL.CANCEL, {}, key))
    await driver.settle()
    entry = batch(driver, key)
    assert entry["state"] == bo.CANCELED
    assert worked < entry["completedCount"] < 400, "resumed, then canceled before the end"
    assert driver.read(lambda s: s.batch_operations.chunk(key, entry["nextChunk"])) is None, "the rest is dropped"
    records = await logged(driver)
    assert BOL.COMPLETED not in [r.intent for r in records if r.value_type == LIFECYCLE]


async def test_unknown_batches_and_types_are_rejected(driver: Driver) -> None:
    rec = await driver.send(LIFECYCLE, BOL.RESUME, {}, 2251799813685249 + 99)
    assert rec.rejection_type == RejectionType.NOT_FOUND
    assert "no such batch operation was found" in rec.rejection_reason
    rec = await create_batch(driver, "DELETE_EVERYTHING", [])
    assert rec.rejection_type == RejectionType.INVALID_ARGUMENT
    rec = await create_batch(driver, bo.MIGRATE_PROCESS_INSTANCE, [])
    assert "migrationPlan" in rec.rejection_reason
    accepted(await create_batch(driver, bo.CANCEL_PROCESS_INSTANCE, []))  # nothing matched: completed at once


class _Route:
    """Stands in for the route to other partitions' leaders."""

    def __init__(self, targets: dict[int, Driver]) -> None:
        self.targets = targets
        self.received: list[tuple[int, ValueType, int]] = []

    async def execute(
        self, partition_id: int, value_type: ValueType, intent: int, value: dict, key: int = -1, **_options: Any
    ) -> Record:
        self.received.append((partition_id, value_type, intent))
        return await self.targets[partition_id].send(value_type, intent, value, key)


async def test_each_partition_works_its_own_items_and_the_coordinator_completes(tmp_path: Path) -> None:
    first = Driver(tmp_path / "p" / "1", PartitionConfig(partitions_count=2, checker_interval_s=0.005))
    other = Driver(tmp_path / "p" / "2", PartitionConfig(partition_id=2, partitions_count=2, checker_interval_s=0.005))
    first.open()
    other.open()
    assert first.partition is not None and other.partition is not None
    first.partition.inter_partition = _Route({2: other})
    other.partition.inter_partition = _Route({1: first})
    for d in (first, other):
        accepted(await d.deploy("one-task.bpmn"))
    mine = await instances(first, 3)
    theirs = await instances(other, 60)
    groups = [*items_of(1, [(k, k) for k in mine]), *items_of(2, [(k, k) for k in theirs])]
    key = accepted(await create_batch(first, bo.CANCEL_PROCESS_INSTANCE, groups)).key
    for _ in range(500):
        if batch(first, key)["state"] == bo.COMPLETED:
            break
        await asyncio.sleep(0.01)
    assert batch(first, key)["state"] == bo.COMPLETED
    assert batch(first, key)["pendingPartitions"] == []
    there = batch(other, key)
    assert there["partitionDone"] and there["completedCount"] == 60 and there["coordinatorPartitionId"] == 1
    await gone_all(other, theirs)
    for _ in range(200):  # acknowledged deliveries are forgotten on both sides
        if not any(d.read(lambda s: list(s.iter_all("distributions"))) for d in (first, other)):
            break
        await asyncio.sleep(0.01)
    assert not any(d.read(lambda s: list(s.iter_all("distributions"))) for d in (first, other))
    # a lifecycle command is distributed too; on a partition done with its items it changes nothing there
    rec = await first.send(LIFECYCLE, BOL.SUSPEND, {}, key)
    assert rec.rejection_type == RejectionType.INVALID_STATE
    for d in (first, other):
        await d.settle()
        await d.close()
        check_replay_equals_live(d.directory, tmp_path)


async def test_a_lifecycle_command_reaching_a_partition_before_the_batch_is_refused_for_now(driver: Driver) -> None:
    rec = await driver.send(LIFECYCLE, BOL.SUSPEND, {"batchOperationKey": 2 << 51 | 7, "distributedFrom": 2})
    assert rec.rejection_type == RejectionType.INVALID_STATE, "delivered again until the creation arrived"


async def test_modification_and_migration_batches_write_each_instance_its_command(driver: Driver) -> None:
    accepted(await driver.deploy("two-tasks.bpmn"))
    keys = await instances(driver, 3, "two-tasks")
    plan = {"modificationPlan": {"moveInstructions": [{"sourceElementId": "prepare", "targetElementId": "ship"}]}}
    rec = accepted(await create_batch(driver, bo.MODIFY_PROCESS_INSTANCE, items_of(1, [(k, k) for k in keys]), **plan))
    await settled(driver, rec.key, bo.COMPLETED)
    assert len(await driver.activate("ship")) == 3 and await driver.activate("prepare") == []
    # the same definition as target, every element mapped to itself: a migration each instance takes
    definition = driver.read(lambda s: s.processes.latest(TENANT, "two-tasks"))["processDefinitionKey"]
    mapping = [{"sourceElementId": e, "targetElementId": e} for e in ("prepare", "ship")]
    plan = {"migrationPlan": {"targetProcessDefinitionKey": definition, "mappingInstructions": mapping}}
    rec = accepted(await create_batch(driver, bo.MIGRATE_PROCESS_INSTANCE, items_of(1, [(k, k) for k in keys]), **plan))
    entry = await settled(driver, rec.key, bo.COMPLETED)
    assert (entry["completedCount"], entry["failedCount"]) == (3, 0)
    records = await logged(driver)
    commands = [
        (r.value_type, r.key)
        for r in records
        if r.record_type == RecordType.COMMAND
        and r.value_type in (ValueType.PROCESS_INSTANCE_MODIFICATION, ValueType.PROCESS_INSTANCE_MIGRATION)
    ]
    assert sorted(commands) == sorted(
        [(ValueType.PROCESS_INSTANCE_MODIFICATION, k) for k in keys]
        + [(ValueType.PROCESS_INSTANCE_MIGRATION, k) for k in keys]
    )
    rejected = [
        r.rejection_reason
        for r in records
        if r.record_type == RecordType.COMMAND_REJECTION
        and r.value_type in (ValueType.PROCESS_INSTANCE_MODIFICATION, ValueType.PROCESS_INSTANCE_MIGRATION)
    ]
    assert rejected == []


async def test_an_item_its_instance_would_refuse_fails_with_the_reason_and_writes_no_command(driver: Driver) -> None:
    accepted(await driver.deploy("two-tasks.bpmn"))
    keys = await instances(driver, 2, "two-tasks")
    definition = driver.read(lambda s: s.processes.latest(TENANT, "two-tasks"))["processDefinitionKey"]
    unmapped = [{"sourceElementId": "ship", "targetElementId": "ship"}]  # the active task 'prepare' is not mapped
    plan = {"migrationPlan": {"targetProcessDefinitionKey": definition, "mappingInstructions": unmapped}}
    rec = accepted(await create_batch(driver, bo.MIGRATE_PROCESS_INSTANCE, items_of(1, [(k, k) for k in keys]), **plan))
    entry = await settled(driver, rec.key, bo.COMPLETED)
    assert (entry["completedCount"], entry["failedCount"]) == (0, 2)
    nowhere = {"modificationPlan": {"moveInstructions": [{"sourceElementId": "nope", "targetElementId": "ship"}]}}
    rec = accepted(
        await create_batch(driver, bo.MODIFY_PROCESS_INSTANCE, items_of(1, [(k, k) for k in keys]), **nowhere)
    )
    entry = await settled(driver, rec.key, bo.COMPLETED)
    assert (entry["completedCount"], entry["failedCount"]) == (0, 2)
    records = await logged(driver)
    failed = [
        item["errorMessage"]
        for r in records
        if r.record_type == RecordType.EVENT and r.value_type == ValueType.BATCH_OPERATION_EXECUTION
        for item in r.value.get("items", [])
        if item["state"] == "FAILED"
    ]
    assert len(failed) == 4
    assert all("prepare" in reason for reason in failed[:2]), failed  # the unmapped active element is named
    assert all("nope" in reason for reason in failed[2:]), failed
    written = [
        r
        for r in records
        if r.record_type == RecordType.COMMAND
        and r.value_type in (ValueType.PROCESS_INSTANCE_MODIFICATION, ValueType.PROCESS_INSTANCE_MIGRATION)
    ]
    assert written == []


async def test_a_redelivered_creation_is_answered_again_and_written_once(driver: Driver) -> None:
    key, gone = encode_key(2, 5), encode_key(1, 999)
    value = {
        "batchOperationKey": key,
        "batchOperationType": bo.CANCEL_PROCESS_INSTANCE,
        "filter": {},
        "partitionIds": [1, 2],
        "coordinatorPartitionId": 2,
        "items": [{"itemKey": gone, "processInstanceKey": gone}],
        "distributedFrom": 2,
    }
    first = accepted(await driver.send(ValueType.BATCH_OPERATION_CREATION, BOC.CREATE, value))
    again = accepted(await driver.send(ValueType.BATCH_OPERATION_CREATION, BOC.CREATE, value))
    assert first.key == again.key == key
    entry = await settled(driver, key, bo.ACTIVE)
    assert entry["partitionDone"] and entry["failedCount"] == 1, "worked once; the coordinator is told"
    assert driver.read(lambda s: [v["partitionId"] for _, _, v in s.distributions.pending()]) == [2]
    records = await logged(driver)
    written = [(r.value_type, r.intent) for r in records if r.record_type == RecordType.EVENT and r.key == key]
    assert written.count((ValueType.BATCH_OPERATION_CREATION, BOC.CREATED)) == 1
    assert written.count((ValueType.BATCH_OPERATION_CHUNK, 1)) == 1
