"""Batch operations in the history (SQLite and PostgreSQL): the coordinating partition's records make the batch,
every partition's records its items; counts follow the items or, when a partition's items are not exported yet,
its report to the coordinator; a completed batch with failed items is PARTIALLY_COMPLETED and the items a canceled
batch never reached are CANCELED."""

from __future__ import annotations

from typing import Any

from broker.protocol.enums import (
    BatchOperationChunkIntent,
    BatchOperationCreationIntent,
    BatchOperationExecutionIntent,
    BatchOperationLifecycleManagementIntent,
    BatchOperationPartitionLifecycleIntent,
    RecordType,
    ValueType,
)
from broker.protocol.keys import encode_key
from broker.protocol.record import Record
from exporters.history.backends import open_backend
from exporters.history.reader import open_reader
from exporters.history.rows import Batch

T0 = 1_700_000_000_000


class _Log:
    """Events of several partitions, each written as the exporter of its partition would."""

    def __init__(self) -> None:
        self.by_partition: dict[int, list[Record]] = {}

    def event(self, partition_id: int, value_type: ValueType, intent: Any, key: int, value: dict[str, Any]) -> None:
        records = self.by_partition.setdefault(partition_id, [])
        position = len(records) + 1
        records.append(
            Record(
                position,
                key,
                RecordType.EVENT,
                value_type,
                int(intent),
                T0 + position,
                value,
                -1,
                partition_id=partition_id,
            )
        )

    def write(self, url: str, *partitions: int) -> None:
        backend = open_backend(url)
        backend.connect()
        try:
            backend.migrate(0)
            for partition_id in partitions:
                batch = Batch()
                for record in self.by_partition.get(partition_id, []):
                    batch.add(record)
                backend.write(batch, partition_id)
        finally:
            backend.close()


def _batch(log: _Log, key: int, items: dict[int, list[int]]) -> None:
    """A cancel batch coordinated by partition 1 over ``items`` (instance keys by partition)."""
    created = {
        "batchOperationKey": key,
        "batchOperationType": "CANCEL_PROCESS_INSTANCE",
        "filter": {},
        "partitionIds": [1, 2],
        "coordinatorPartitionId": 1,
        "itemsCount": sum(len(i) for i in items.values()),
    }
    for partition_id, keys in items.items():
        log.event(partition_id, ValueType.BATCH_OPERATION_CREATION, BatchOperationCreationIntent.CREATED, key, created)
        chunk = {
            "batchOperationKey": key,
            "chunkIndex": 0,
            "items": [{"itemKey": k, "processInstanceKey": k} for k in keys],
        }
        log.event(partition_id, ValueType.BATCH_OPERATION_CHUNK, BatchOperationChunkIntent.CREATED, key, chunk)


def _executed(log: _Log, partition_id: int, key: int, outcomes: list[tuple[int, str, str]]) -> None:
    items = [{"itemKey": k, "processInstanceKey": k, "state": s, "errorMessage": e} for k, s, e in outcomes]
    value = {"batchOperationKey": key, "chunkIndex": 0, "batchOperationType": "CANCEL_PROCESS_INSTANCE", "items": items}
    log.event(partition_id, ValueType.BATCH_OPERATION_EXECUTION, BatchOperationExecutionIntent.EXECUTED, key, value)


def _reported(log: _Log, key: int, partition_id: int, completed: int, failed: int) -> None:
    value = {"batchOperationKey": key, "partitionId": partition_id, "completedCount": completed, "failedCount": failed}
    intent = BatchOperationPartitionLifecycleIntent.PARTITION_COMPLETED
    log.event(1, ValueType.BATCH_OPERATION_PARTITION_LIFECYCLE, intent, key, value)
    if partition_id != 1:
        log.event(partition_id, ValueType.BATCH_OPERATION_PARTITION_LIFECYCLE, intent, key, value)


def _lifecycle(log: _Log, key: int, intent: BatchOperationLifecycleManagementIntent, *partitions: int) -> None:
    value = {"batchOperationKey": key, "batchOperationType": "CANCEL_PROCESS_INSTANCE"}
    for partition_id in partitions:
        log.event(partition_id, ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT, intent, key, value)


async def test_a_batch_with_failed_items_is_partially_completed(history_url: str) -> None:
    key = encode_key(1, 100)
    mine, theirs = [encode_key(1, 1), encode_key(1, 2)], [encode_key(2, 1), encode_key(2, 2), encode_key(2, 3)]
    log = _Log()
    _batch(log, key, {1: mine, 2: theirs})
    _executed(log, 1, key, [(mine[0], "COMPLETED", ""), (mine[1], "FAILED", "Expected to cancel …")])
    _reported(log, key, 1, 1, 1)
    _executed(log, 2, key, [(k, "COMPLETED", "") for k in theirs])
    _reported(log, key, 2, 3, 0)
    _lifecycle(log, key, BatchOperationLifecycleManagementIntent.COMPLETED, 1)
    log.write(history_url, 1)  # partition 2's own records are not exported yet
    reader = open_reader(history_url)
    try:
        got = await reader.get("batch-operations", str(key))
        assert got is not None
        assert got["state"] == "PARTIALLY_COMPLETED" and got["batchOperationType"] == "CANCEL_PROCESS_INSTANCE"
        counts = (got["operationsTotalCount"], got["operationsCompletedCount"], got["operationsFailedCount"])
        assert counts == (5, 4, 1), "partition 2's report stands for its items until they arrive"
        assert got["endDate"] is not None and got["errors"] == []
        log.write(history_url, 2)
        items = await reader.search("batch-operation-items", {"filter": {"batchOperationKey": str(key)}})
        assert items["page"]["totalItems"] == 5
        failed = (await reader.search("batch-operation-items", {"filter": {"state": "FAILED"}}))["items"]
        assert [(i["itemKey"], i["errorMessage"]) for i in failed] == [(str(mine[1]), "Expected to cancel …")]
        got = await reader.get("batch-operations", str(key))
        assert got is not None and got["operationsCompletedCount"] == 4
        found = await reader.search("batch-operations", {"filter": {"state": "PARTIALLY_COMPLETED"}})
        assert [b["batchOperationKey"] for b in found["items"]] == [str(key)]
    finally:
        await reader.close()


async def test_the_items_a_canceled_batch_never_reached_are_canceled(history_url: str) -> None:
    key = encode_key(1, 200)
    mine = [encode_key(1, 11), encode_key(1, 12)]
    log = _Log()
    _batch(log, key, {1: mine})
    _executed(log, 1, key, [(mine[0], "COMPLETED", "")])
    _lifecycle(log, key, BatchOperationLifecycleManagementIntent.SUSPENDED, 1, 2)
    log.write(history_url, 1)
    reader = open_reader(history_url)
    try:
        got = await reader.get("batch-operations", str(key))
        assert got is not None and got["state"] == "SUSPENDED" and got["endDate"] is None
        log.by_partition.clear()
        _lifecycle(log, key, BatchOperationLifecycleManagementIntent.CANCELED, 2, 1)
        log.write(history_url, 2, 1)
        got = await reader.get("batch-operations", str(key))
        assert got is not None and got["state"] == "CANCELED" and got["endDate"] is not None
        items = await reader.search("batch-operation-items", {"filter": {"batchOperationKey": str(key)}})
        assert sorted((i["itemKey"], i["state"]) for i in items["items"]) == [
            (str(mine[0]), "COMPLETED"),
            (str(mine[1]), "CANCELED"),
        ]
    finally:
        await reader.close()
