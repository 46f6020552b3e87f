"""A command whose records cannot be encoded is refused alone; the rest of its round commits and processing goes on.

Entry checks (``check_command_value``) keep such values out, so this drives the last line of defence directly: a
command put in the partition's inbox without the entry check, as a future bug in an entry path would.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.protocol.documents import InvalidDocumentError
from broker.protocol.enums import ProcessInstanceCreationIntent, RecordType, ValueType
from broker.protocol.record import Record, RequestMetadata
from tests.unit.test_replay import Driver, accepted


async def test_an_unencodable_command_fails_alone_and_the_partition_keeps_going(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p")
    partition = d.open()
    try:
        accepted(await d.deploy("one-task.bpmn"))
        good_before = partition.execute(*_creation({"n": 1}))
        bad_future: asyncio.Future[Record] = asyncio.get_running_loop().create_future()
        value_type, intent, value = _creation({"huge": 2**70, "text": "\ud800"})
        bad = Record(-1, -1, RecordType.COMMAND, value_type, int(intent), 0, value, request=RequestMetadata(0, 10**9))
        assert partition.core is not None
        partition._futures[10**9] = bad_future
        partition.core.inbox.append(bad)  # past the entry check, on purpose
        good_after = partition.execute(*_creation({"n": 2}))
        results = await asyncio.wait_for(asyncio.gather(good_before, good_after), 10)
        assert [r.record_type for r in results] == [RecordType.EVENT, RecordType.EVENT]
        with pytest.raises(InvalidDocumentError):
            await asyncio.wait_for(bad_future, 10)
        assert partition.healthy, partition.failure
        jobs = await d.activate("test")
        assert len(jobs) == 2
        for key in jobs:
            accepted(await d.complete(key))
    finally:
        await d.close()


def _creation(variables: dict) -> tuple[ValueType, ProcessInstanceCreationIntent, dict]:
    value = {"bpmnProcessId": "one-task", "version": -1, "processDefinitionKey": -1, "variables": variables}
    return ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, value
