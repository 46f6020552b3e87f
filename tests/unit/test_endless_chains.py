"""Loops the per-instance step budget cannot see, in a running partition: a signal start event whose instances
broadcast the same signal, and a process that calls itself.

Other instances on the partition keep being served while such a chain runs; the chain of signal broadcasts stops at
its bound with an incident (counted, logged, stoppable by the operator); the call depth is configurable; a process
calling itself twice in parallel (which doubles at each level, long before any depth limit) stops at the bound on
recursive instances per chain; and replay rebuilds the live state."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from broker import monitoring
from broker.config import ConfigError, load
from broker.protocol.codec import decode_block
from broker.protocol.enums import ProcessInstanceIntent, RecordType, SignalIntent, ValueType
from broker.stream.partition import Partition, PartitionConfig
from broker.tools.inspect import iter_records
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live, check_restart_recovers


async def broadcast(d: Driver, name: str) -> None:
    accepted(await d.send(ValueType.SIGNAL, SignalIntent.BROADCAST, {"signalName": name, "variables": {}}))


def started(directory: Path, process_id: str) -> int:
    """How many instances of ``process_id`` the log shows activating."""
    return sum(
        1
        for r in iter_records(directory)
        if r.record_type == RecordType.EVENT
        and r.value_type == ValueType.PROCESS_INSTANCE
        and r.intent == ProcessInstanceIntent.ELEMENT_ACTIVATING
        and r.value.get("bpmnElementType") == "PROCESS"
        and r.value.get("bpmnProcessId") == process_id
    )


async def incidents(d: Driver, expected: int) -> list[tuple[int, dict]]:
    """The open incidents once there are ``expected`` of them (the last round's commit may still be on its way when
    the backlog is empty), or as they are after 10 s."""
    for _ in range(1000):
        found = d.incidents()
        if len(found) == expected:
            return found
        await asyncio.sleep(0.01)
    return d.incidents()


def stopped_chains() -> float:
    return monitoring.SIGNAL_CHAINS_STOPPED.labels("1")._value.get()


async def complete_canary(d: Driver) -> float:
    """Run a one-task instance from start to end; the seconds it took."""
    began = time.monotonic()
    canary = accepted(await d.create("one-task", {"x": 1})).value["processInstanceKey"]
    jobs: list[int] = []
    while not jobs:
        jobs = await d.activate("test")
    accepted(await d.complete(jobs[0]))
    while d.read(lambda s: s.elements.get(canary)) is not None:
        await asyncio.sleep(0.01)
    return time.monotonic() - began


async def cancel_and_check_nothing_is_left(d: Driver, instance: int, tmp_path: Path) -> None:
    """Cancel the chain's instance: no incident and no element instance is left, and replay and a restart from
    scratch rebuild the live state."""
    accepted(await d.cancel(instance))
    await d.settle()
    assert await incidents(d, 0) == []
    assert not d.read(lambda s: list(s.iter_all("element_instances")))
    await d.close()
    live = check_replay_equals_live(d.directory, tmp_path)
    await check_restart_recovers(d, live, from_scratch=True)


async def test_a_signal_storm_does_not_keep_other_instances_from_completing(tmp_path: Path) -> None:
    """With the chain bound off, the storm never ends; a one-task instance still runs to its end meanwhile."""
    directory = tmp_path / "p" / "1"
    d = Driver(directory, PartitionConfig(checker_interval_s=0.005, max_instances_per_signal_chain=0))
    d.open()
    accepted(await d.deploy("start-events/signal-storm.bpmn", "one-task.bpmn"))
    await broadcast(d, "storm")
    await asyncio.sleep(0.3)  # the storm is under way
    assert d.partition is not None and d.partition.backlog > 0
    took = await asyncio.wait_for(complete_canary(d), 20)
    assert took < 20
    assert d.partition.backlog > 0, "the storm still runs: nothing stopped it"
    await d.close()
    assert started(directory, "signal-storm") > 10
    live = check_replay_equals_live(directory, tmp_path)
    await check_restart_recovers(d, live, from_scratch=True)


async def test_a_chain_of_signal_broadcasts_stops_at_its_bound_and_the_operator_can_stop_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "p" / "1"
    d = Driver(directory, PartitionConfig(checker_interval_s=0.005, max_instances_per_signal_chain=20))
    d.open()
    accepted(await d.deploy("start-events/signal-storm.bpmn"))
    before = stopped_chains()
    with caplog.at_level(logging.WARNING, logger="weir.partition"):
        await broadcast(d, "storm")
        await d.settle()
    ((incident_key, incident),) = await incidents(d, 1)
    assert "broker.maxInstancesPerSignalChain = 20" in incident["errorMessage"]
    assert incident["elementId"] == "signal-storm", "the process itself stops, ACTIVATING"
    stopped = incident["processInstanceKey"]
    assert d.read(lambda s: s.elements.get(stopped)).state == ProcessInstanceIntent.ELEMENT_ACTIVATING
    assert started(directory, "signal-storm") == 21, "twenty ran, the next one stopped"
    assert stopped_chains() == before + 1
    (warning,) = [r.getMessage() for r in caplog.records if "chain of signal broadcasts" in r.getMessage()]
    assert "partition 1" in warning and str(stopped) in warning

    # resolving lets the chain go on (a new chain, a new count): it stops again at the bound
    accepted(await d.resolve(incident_key))
    await d.settle()
    ((_, again),) = await incidents(d, 1)
    assert started(directory, "signal-storm") == 41
    assert stopped_chains() == before + 2

    # cancelling the stopped instance ends the storm for good
    await cancel_and_check_nothing_is_left(d, again["processInstanceKey"], tmp_path)


async def test_the_process_depth_is_configurable_and_its_incident_says_how_to_go_on(tmp_path: Path) -> None:
    directory = tmp_path / "p" / "1"
    d = Driver(directory, PartitionConfig(checker_interval_s=0.005, max_process_depth=3))
    d.open()
    accepted(await d.deploy("call-recursive.bpmn", "one-task.bpmn"))
    accepted(await d.create("call-recursive", {"depth": 1}))
    await d.settle()
    ((_, incident),) = await incidents(d, 1)
    assert incident["errorType"] == "CALLED_ELEMENT_ERROR"
    assert incident["errorMessage"].startswith("The call activity has reached the maximum depth of 3.")
    assert "broker.maxProcessDepth" in incident["errorMessage"]
    assert started(directory, "call-recursive") == 3, "the root is depth 1"
    await d.close()
    live = check_replay_equals_live(directory, tmp_path)
    await check_restart_recovers(d, live, from_scratch=True)


async def test_a_process_calling_itself_without_end_does_not_keep_other_instances_from_completing(
    tmp_path: Path,
) -> None:
    """With the depth limit off, the recursion never ends; a one-task instance still runs to its end meanwhile."""
    directory = tmp_path / "p" / "1"
    d = Driver(
        directory,
        PartitionConfig(checker_interval_s=0.005, max_process_depth=0, max_recursive_instances_per_chain=0),
    )
    d.open()
    accepted(await d.deploy("call-recursive.bpmn", "one-task.bpmn"))
    accepted(await d.create("call-recursive", {"depth": 1}))
    await asyncio.sleep(0.3)
    assert d.partition is not None and d.partition.backlog > 0
    await asyncio.wait_for(complete_canary(d), 20)
    assert d.partition.backlog > 0, "the recursion still runs"
    await d.close()
    assert started(directory, "call-recursive") > 10
    check_replay_equals_live(directory, tmp_path)


async def test_a_process_calling_itself_twice_stops_at_the_recursion_bound_and_the_partition_drains(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two parallel self-calls double the instances at each level: the depth limit (1000) would let 2^1000 start.
    The chain's recursive instances are bounded instead: the ones beyond stop ACTIVATING with incidents, the
    partition's backlog drains, a one-task instance completes, and cancelling the root ends the whole tree."""
    directory = tmp_path / "p" / "1"
    d = Driver(directory, PartitionConfig(checker_interval_s=0.005, max_recursive_instances_per_chain=30))
    d.open()
    accepted(await d.deploy("call-recursive-twice.bpmn", "one-task.bpmn"))
    before = monitoring.RECURSIVE_CHAINS_STOPPED.labels("1")._value.get()
    with caplog.at_level(logging.WARNING, logger="weir.partition"):
        root = accepted(await d.create("call-recursive-twice", {})).value["processInstanceKey"]
        await d.settle()
    found = await incidents(d, 32)  # the children the last running level asked for
    assert all("broker.maxRecursiveInstancesPerChain = 30" in i["errorMessage"] for _, i in found), found
    assert all(i["elementId"] == "call-recursive-twice" for _, i in found), "the called process stops, ACTIVATING"
    # the root and 30 recursive instances ran, the 32 called next stopped: the tree did not keep growing
    assert len(found) == 32 and started(directory, "call-recursive-twice") == 31 + 32
    assert d.partition is not None and d.partition.backlog == 0
    assert monitoring.RECURSIVE_CHAINS_STOPPED.labels("1")._value.get() == before + 1
    assert [r for r in caplog.records if "calling itself without end" in r.getMessage()]
    assert await asyncio.wait_for(complete_canary(d), 20) < 20
    await cancel_and_check_nothing_is_left(d, root, tmp_path)


@pytest.mark.parametrize(
    "key", ["MAX_PROCESS_DEPTH", "MAX_INSTANCES_PER_SIGNAL_CHAIN", "MAX_RECURSIVE_INSTANCES_PER_CHAIN"]
)
def test_the_loop_limits_must_be_integers_of_at_least_zero(key: str) -> None:
    with pytest.raises(ConfigError, match="at least 0"):
        load(env={f"WEIR_BROKER_{key}": "-1"})
    assert load(env={f"WEIR_BROKER_{key}": "0"})


async def test_a_client_command_admitted_before_a_restart_answers_no_request_of_the_next_run(tmp_path: Path) -> None:
    """A client command that waited in the log behind follow-ups when the partition stopped is processed after the
    restart, and its response goes to nobody: the next run's requests reuse the same request ids."""
    directory = tmp_path / "p" / "1"
    d = Driver(directory, PartitionConfig(checker_interval_s=0.005, max_commands_per_round=1))
    partition = d.open()
    accepted(await d.deploy("mi-parallel.bpmn", "one-task.bpmn"))  # request 1
    accepted(await d.create("mi-parallel", {"items": list(range(1000))}))  # request 2: a long backlog of follow-ups
    while partition.backlog < 500:
        await asyncio.sleep(0.001)
    waiting = asyncio.ensure_future(d.create("one-task", {"x": 1}))  # request 3: admitted behind the backlog
    while not _one_task_creation_committed(partition):  # (out of the inbox is not enough: its round must commit)
        await asyncio.sleep(0.001)
    assert not waiting.done(), "still behind the backlog"
    await d.close(snapshot=False)
    with pytest.raises(Exception, match="shutting down"):
        await waiting

    d.config = PartitionConfig(checker_interval_s=0.005)
    d.open()
    answers = await asyncio.gather(
        *(d.send(ValueType.SIGNAL, SignalIntent.BROADCAST, {"signalName": f"s{i}"}) for i in range(1, 4))
    )
    assert [(a.value_type, a.value.get("signalName")) for a in answers] == [
        (ValueType.SIGNAL, f"s{i}") for i in range(1, 4)
    ]
    await d.settle()
    assert len(await d.activate("test")) == 1, "the one-task instance was created after the restart"
    await d.close()
    check_replay_equals_live(directory, tmp_path)


def _one_task_creation_committed(partition: Partition) -> bool:
    """Whether the committed log holds the command that creates a one-task instance."""
    storage = partition.log_storage
    if storage is None:
        return False
    committed = storage.commit_position
    return any(
        record.record_type == RecordType.COMMAND
        and record.value_type == ValueType.PROCESS_INSTANCE_CREATION
        and record.value.get("bpmnProcessId") == "one-task"
        for block in storage.read(storage.first_position)
        if block.last_position <= committed
        for record in decode_block(block.payload)[1]
    )
