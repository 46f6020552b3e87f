"""No task of a partition dies silently, and a snapshot that fails (a full disk) never stops processing.

A failing task is logged, counted, reported in the partition's health and restarted with back-off; a snapshot that
fails is logged, counted, retried later and leaves no half-written copy behind.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import os
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from broker.stream import snapshots
from broker.stream import upkeep as upkeep_module
from broker.stream.commit import LocalCommit
from broker.stream.partition import BackpressureError, Partition, PartitionConfig, PartitionUnavailableError
from broker.stream.supervision import TaskSupervisor
from tests.unit.test_replay import Driver, accepted

MiB = 1 << 20


class DiskDriver(Driver):
    """A driven partition whose free disk space the test decides."""

    def __init__(self, directory: Path, config: PartitionConfig, free_disk: object) -> None:
        super().__init__(directory, config)
        self.free_disk = free_disk

    def open(self) -> Partition:
        self.partition = Partition(self.directory, self.config, clock=self.clock, free_disk=self.free_disk)  # type: ignore[arg-type]
        self.partition.open()
        self.partition._supervisor._stable_s = 0.3  # healthy again soon after a restart (5 s in production)
        self.partition.start()
        return self.partition


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def until(check: object, what: str, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def create_instances(d: Driver, count: int) -> None:
    for n in range(count):
        accepted(await d.create("one-task", {"n": n}))


async def test_a_failing_checker_is_reported_restarted_and_commands_go_on(tmp_path: Path) -> None:
    calls = {"n": 0}

    def broken_then_fine(directory: Path) -> int:
        calls["n"] += 1
        if calls["n"] <= 3:
            raise RuntimeError("statvfs exploded")
        return 10**12

    before = sample("weir_partition_task_failures_total", partition="1", task="checker")
    d = DiskDriver(tmp_path / "p", PartitionConfig(checker_interval_s=0.005), broken_then_fine)
    partition = d.open()
    try:
        accepted(await d.deploy("one-task.bpmn"))
        await until(lambda: partition.problem is not None, "the checker's failure to be reported")
        assert "checker" in partition.problem and "statvfs exploded" in partition.problem
        await create_instances(d, 3)  # the processor is not held up by the checker
        await until(lambda: calls["n"] > 4, "the checker to be restarted (with back-off) and run again")
        assert sample("weir_partition_task_failures_total", partition="1", task="checker") - before == 3
        await until(lambda: partition.problem is None, "the partition to be healthy again once the checker runs")
        assert partition.healthy
    finally:
        await d.close()


async def test_a_snapshot_failing_for_lack_of_space_never_stops_processing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upkeep_module, "_SNAPSHOT_RETRY_S", 0.05)
    real_take = snapshots.take
    failing = {"on": True}

    def take(env: object, directory: Path) -> snapshots.Snapshot:
        if failing["on"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_take(env, directory)  # type: ignore[arg-type]

    monkeypatch.setattr(snapshots, "take", take)
    before = sample("weir_snapshot_failures_total", partition="1")
    config = PartitionConfig(checker_interval_s=0.005, snapshot_min_records=1)
    d = DiskDriver(tmp_path / "p", config, lambda _directory: 10**12)
    partition = d.open()
    try:
        accepted(await d.deploy("one-task.bpmn"))
        await create_instances(d, 5)
        await until(lambda: sample("weir_snapshot_failures_total", partition="1") > before, "a counted failure")
        await create_instances(d, 5)
        assert partition.healthy and partition.problem is None, partition.problem
        assert not snapshots.list_snapshots(tmp_path / "p" / "snapshots")
        failing["on"] = False
        await asyncio.sleep(0.1)  # past the retry delay: the next round's snapshot step tries again
        await create_instances(d, 1)
        await until(lambda: snapshots.list_snapshots(tmp_path / "p" / "snapshots"), "a snapshot once space is back")
    finally:
        await d.close()


async def test_a_snapshot_without_room_for_its_copy_is_put_off(tmp_path: Path) -> None:
    free = {"bytes": 10**12}
    config = PartitionConfig(checker_interval_s=0.005, min_free_disk_bytes=MiB)
    d = DiskDriver(tmp_path / "p", config, lambda _directory: free["bytes"])
    partition = d.open()
    try:
        accepted(await d.deploy("one-task.bpmn"))
        before = sample("weir_snapshot_failures_total", partition="1")
        # Below the watermark the partition snapshots to compact, but the state's pages would not fit in 4 KiB.
        free["bytes"] = 4096
        await until(lambda: partition.disk_full, "the watermark to refuse commands")
        with pytest.raises(BackpressureError, match="free disk space"):
            await d.create("one-task")
        await until(lambda: sample("weir_snapshot_failures_total", partition="1") > before, "the snapshot put off")
        assert not list((tmp_path / "p" / "snapshots").glob(".pending"))
        assert partition.healthy and partition.problem is None
        assert sample("weir_partition_disk_full", partition="1") == 1
        free["bytes"] = 10**12
        await until(lambda: not partition.disk_full, "commands to be taken again")
        await create_instances(d, 2)
    finally:
        await d.close()


async def test_an_unexpected_error_in_the_snapshot_step_restarts_the_processor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = {"times": 2}
    real = Partition._snapshot_safely

    def snapshot_safely(self: Partition) -> None:
        if broken["times"]:
            broken["times"] -= 1
            raise RuntimeError("a bug in the snapshot step")
        real(self)

    monkeypatch.setattr(Partition, "_snapshot_safely", snapshot_safely)
    before = sample("weir_partition_task_failures_total", partition="1", task="processor")
    config = PartitionConfig(checker_interval_s=0.005, snapshot_min_records=1)
    d = DiskDriver(tmp_path / "p", config, lambda _directory: 10**12)
    partition = d.open()
    try:
        accepted(await d.deploy("one-task.bpmn"))  # its round is followed by the failing snapshot step
        await until(lambda: partition.problem is not None, "the processor's failure to be reported")
        assert "processor" in partition.problem
        await create_instances(d, 3)  # answered by the restarted processor
        assert sample("weir_partition_task_failures_total", partition="1", task="processor") - before == 2
        await until(lambda: partition.problem is None, "the partition to be healthy again")
    finally:
        await d.close()


def test_a_snapshot_that_runs_out_of_space_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = Driver(tmp_path / "p", PartitionConfig())
    partition = Partition(d.directory, d.config)
    partition.open()
    try:

        def no_space(path: Path) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(snapshots, "_crc_file", no_space)
        assert partition.db is not None
        with pytest.raises(OSError, match="No space left"):
            snapshots.take(partition.db.env, tmp_path / "p" / "snapshots")
        assert list((tmp_path / "p" / "snapshots").iterdir()) == []
    finally:
        assert partition.db is not None
        partition.db.close()
        partition.log_storage.close()  # type: ignore[union-attr]


async def test_a_failed_round_still_stops_the_partition_and_is_not_restarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = DiskDriver(tmp_path / "p", PartitionConfig(checker_interval_s=0.005), lambda _directory: 10**12)
    partition = d.open()
    try:
        accepted(await d.deploy("one-task.bpmn"))
        before = sample("weir_partition_task_failures_total", partition="1", task="processor")

        async def broken_commit(self: LocalCommit, block: object) -> None:
            raise OSError(errno.EIO, "the log could not be written")

        monkeypatch.setattr(LocalCommit, "commit", broken_commit)
        with pytest.raises(PartitionUnavailableError, match="processing failed"):
            await d.create("one-task")
        await until(lambda: partition._tasks[0].done(), "the processor to end")
        assert not partition.healthy and "could not be written" in (partition.failure or "")
        assert sample("weir_partition_task_failures_total", partition="1", task="processor") == before
    finally:
        await d.close(snapshot=False)


async def test_the_supervisor_restarts_with_growing_back_off_and_stops_waiting_when_stopped() -> None:
    supervisor = TaskSupervisor(7, logging.getLogger("test"), initial_backoff_s=0.05, max_backoff_s=60.0, stable_s=60)
    runs: list[float] = []
    loop = asyncio.get_running_loop()

    async def always_failing() -> None:
        runs.append(loop.time())
        raise ValueError("broken")

    task = supervisor.spawn("worker", always_failing)
    await until(lambda: len(runs) >= 4, "four runs")
    gaps = [b - a for a, b in itertools.pairwise(runs)]
    assert gaps[1] > gaps[0] and gaps[2] > gaps[1], gaps  # 0.05, 0.1, 0.2 s
    assert "worker" in (supervisor.problem or "") and "broken" in (supervisor.problem or "")
    assert sample("weir_partition_task_failures_total", partition="7", task="worker") >= 4
    stopped_at = loop.time()
    supervisor.stop()
    await asyncio.wait_for(task, 5)
    assert loop.time() - stopped_at < 1.0, "the back-off was cut short"


async def test_a_task_that_ends_is_not_restarted() -> None:
    supervisor = TaskSupervisor(8, logging.getLogger("test"))
    runs = []

    async def ends() -> None:
        runs.append(1)

    await asyncio.wait_for(supervisor.spawn("once", ends), 5)
    await asyncio.sleep(0.05)
    assert runs == [1] and supervisor.problem is None
