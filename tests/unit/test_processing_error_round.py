"""A command whose processing fails unexpectedly is rejected alone: what it wrote is undone, and the commands after it
in the same round read and write the state as usual (each command runs in a nested transaction of the round)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from broker.engine.context import ProcessingContext
from broker.protocol.enums import ProcessInstanceCreationIntent, RecordType, RejectionType, ValueType
from broker.protocol.record import Record
from broker.stream.core import Idle, Round
from tests.unit.test_replay import Driver, accepted


async def test_a_failing_command_is_undone_alone_and_the_rest_of_its_round_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = Driver(tmp_path / "p")
    partition = d.open()
    try:
        accepted(await d.deploy("one-task.bpmn"))
        process = partition.engine.process

        def failing(ctx: ProcessingContext, command: Record) -> None:
            process(ctx, command)  # writes its state first, so the failure has something to undo
            creation = command.value_type == ValueType.PROCESS_INSTANCE_CREATION
            if creation and command.value["variables"].get("fail"):
                raise RuntimeError("a bug in a processor")

        monkeypatch.setattr(partition.engine, "process", failing)
        assert partition.core is not None
        core = partition.core
        process_round = core.process_round
        rounds: list[Round | Idle] = []

        def counted(*args: Any) -> Round | Idle:
            rounds.append(process_round(*args))
            return rounds[-1]

        monkeypatch.setattr(core, "process_round", counted)
        # queued together, so one round processes all three (the failing one in the middle)
        futures = [partition.execute(*_creation({"n": n, "fail": n == 2})) for n in (1, 2, 3)]
        first, bad, third = await asyncio.wait_for(asyncio.gather(*futures), 10)
        accepted(first)
        accepted(third)
        assert bad.record_type == RecordType.COMMAND_REJECTION
        assert bad.rejection_type == RejectionType.PROCESSING_ERROR
        assert "a bug in a processor" in bad.rejection_reason
        assert isinstance(rounds[0], Round) and len(rounds[0].responses) == 3, "the three commands shared a round"
        assert partition.healthy, partition.failure
        jobs = await d.activate("test")
        assert len(jobs) == 2, "the failed creation's instance and job were undone, the others kept"
        for key in jobs:
            accepted(await d.complete(key))
    finally:
        await d.close()
    # what the round committed is what its log replays to
    partition = d.open()
    try:
        assert partition.healthy
        assert await d.activate("test") == []
    finally:
        await d.close()


def _creation(variables: dict) -> tuple[ValueType, ProcessInstanceCreationIntent, dict]:
    value = {"bpmnProcessId": "one-task", "version": -1, "processDefinitionKey": -1, "variables": variables}
    return ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, value
