"""Upkeep of a partition: its exporters, the disk watermark, snapshots and log compaction.

None of it decides what a command does; all of it decides whether the partition keeps running for long: exporters
bound compaction, the watermark refuses commands before the disk is full, snapshots bound recovery.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from broker import monitoring
from broker.log import LogStorage
from broker.protocol.codec import decode_block
from broker.protocol.record import Record
from broker.state.db import StateDb
from broker.state.repositories import PartitionState
from broker.stream import snapshots
from broker.stream.config import PartitionConfig
from broker.stream.replay import replay_start
from broker.stream.supervision import TaskSupervisor
from exporters import ExporterDirector

# While the disk is full, snapshots that record exporter progress (and so compact the log) come at most this often.
_DISK_FULL_SNAPSHOT_INTERVAL_S = 1.0
# A snapshot that failed or had no room is tried again after this long at the earliest.
_SNAPSHOT_RETRY_S = 5.0


class Upkeep:
    """Exporters, disk space and snapshots (a part of :class:`~broker.stream.partition.Partition`)."""

    config: PartitionConfig
    partition_id: int
    directory: Path
    db: StateDb | None
    state: PartitionState
    log_storage: LogStorage | None
    exporters: ExporterDirector | None
    clock: Callable[[], int]
    monotonic: Callable[[], float]
    disk_full: bool
    _exporter_positions: dict[str, int]
    _records_since_snapshot: int
    _last_snapshot_time: float
    _snapshot_not_before: float
    _free_disk: Callable[[Path], int]
    _tasks: list[asyncio.Task[Any]]
    _supervisor: TaskSupervisor
    _wake: asyncio.Event
    _log: logging.LoggerAdapter[Any]

    # -- exporters and disk space ----------------------------------------------------------------------------

    def _start_exporters(self) -> None:
        if not self.config.exporters:
            return
        self.exporters = ExporterDirector(
            self.partition_id,
            self.config.exporters,
            read_records=self._read_committed_records,
            positions=self._exporter_positions,
            clock=self.clock,
            spawn=self._supervisor.spawn,
            min_free_disk_bytes=self.config.min_free_disk_bytes,
        )
        self._tasks.append(self._supervisor.spawn("exporters", self._run_exporters))

    async def _run_exporters(self) -> None:
        if self.exporters is None or self.log_storage is None:
            return  # no longer leading (restarted after leadership moved on)
        await self.exporters.start()
        self.exporters.notify_committed(self.log_storage.commit_position)

    def _read_committed_records(self, from_position: int) -> Iterator[Record]:
        """Committed records from ``from_position`` on (the block holding it may start earlier)."""
        assert self.log_storage is not None
        start = max(from_position, self.log_storage.first_position)
        for block in self.log_storage.read(start):
            yield from decode_block(block.payload)[1]

    def _changed_exporter_positions(self) -> dict[str, int] | None:
        """Exporter positions acknowledged since the state last recorded them (None: unchanged), for the next round.

        The round writes them in its transaction, so they go with every snapshot, and in its block, so they reach
        the replicas: any of them, once leader, resumes exporting (and bounds compaction) from where this leader's
        exporters were.
        """
        if self.exporters is None:
            return None
        positions = self.exporters.positions()
        return None if positions == self._exporter_positions else positions

    def _persist_exporter_positions(self) -> None:
        """Write the acknowledged positions outside a round (processor task or shutdown: no round is open)."""
        if self.exporters is None or self.db is None:
            return
        positions = self.exporters.positions()
        with self.db.begin(write=True) as txn:
            self.state.meta.txn = txn
            try:
                self.state.meta.set_exporter_positions(positions)
            finally:
                self.state.meta.txn = None  # type: ignore[assignment]
        self._exporter_positions = positions

    def _exporters_advanced(self) -> bool:
        """Exporters acknowledged more than the state (and so the next snapshot, which compaction reads) holds."""
        return self.exporters is not None and self.exporters.positions() != self._exporter_positions

    def _check_disk(self) -> None:
        """The processing watermark: refuse new commands before the disk is full, take them again after."""
        try:
            free = self._free_disk(self.directory)
        except OSError:
            return
        low = free < self.config.min_free_disk_bytes
        was_full, self.disk_full = self.disk_full, low
        monitoring.DISK_FULL.labels(str(self.partition_id)).set(1 if low else 0)
        if low and not was_full:
            self._log.warning(
                "partition %d: only %d bytes free under %s (watermark %d): rejecting new commands",
                self.partition_id,
                free,
                self.directory,
                self.config.min_free_disk_bytes,
            )
            if self._records_since_snapshot:
                self._snapshot_safely()  # compaction may give space back right away
        elif not low and was_full:
            self._log.info(
                "partition %d: disk space is back (%d bytes free): accepting commands", self.partition_id, free
            )
        if low and self._exporters_advanced():
            # No rounds run while commands are refused, so the processor must be woken to record the exporters'
            # progress and snapshot: otherwise the log is never compacted and the partition refuses for good.
            self._wake.set()

    # -- snapshots -------------------------------------------------------------------------------------------

    def _maybe_snapshot(self) -> None:
        if self.disk_full and self._exporters_advanced():
            if self.monotonic() - self._last_snapshot_time >= _DISK_FULL_SNAPSHOT_INTERVAL_S:
                self._persist_exporter_positions()
                self._snapshot_safely()  # compacts up to what the exporters acknowledged: space comes back
            return
        if self._records_since_snapshot == 0:
            return
        elapsed = self.monotonic() - self._last_snapshot_time
        if self._records_since_snapshot >= self.config.snapshot_min_records or elapsed >= self.config.snapshot_period_s:
            self._snapshot_safely()

    def _snapshot_safely(self) -> None:
        """Snapshot unless there is no room for the copy; a failure (a full disk) is logged, counted and tried again
        later: it never stops processing, and `snapshots.take` leaves nothing half-written behind."""
        assert self.db is not None
        if self.monotonic() < self._snapshot_not_before:
            return
        label = str(self.partition_id)
        try:
            needed = snapshots.size_needed(self.db.env)
            free = self._free_disk(self.directory)
            if free < needed:
                monitoring.SNAPSHOT_FAILURES.labels(label).inc()
                self._snapshot_not_before = self.monotonic() + _SNAPSHOT_RETRY_S
                self._log.warning(
                    "partition %d: snapshot put off: it needs up to %d bytes but only %d are free under %s; "
                    "retrying in %.0fs",
                    self.partition_id,
                    needed,
                    free,
                    self.directory,
                    _SNAPSHOT_RETRY_S,
                )
                return
            self.take_snapshot()
        except OSError as e:
            monitoring.SNAPSHOT_FAILURES.labels(label).inc()
            self._snapshot_not_before = self.monotonic() + _SNAPSHOT_RETRY_S
            self._log.error(
                "partition %d: snapshot failed (%s); processing goes on, retrying in %.0fs",
                self.partition_id,
                e,
                _SNAPSHOT_RETRY_S,
            )

    def take_snapshot(self) -> snapshots.Snapshot:
        """Snapshot the state and compact the log below the oldest snapshot still kept."""
        assert self.db is not None and self.log_storage is not None
        snap = snapshots.take(self.db.env, self.directory / "snapshots")
        self._records_since_snapshot = 0
        self._last_snapshot_time = self.monotonic()
        kept = snapshots.list_snapshots(self.directory / "snapshots")
        if len(kept) >= snapshots.KEEP or self.disk_full:
            # Recovery from any kept snapshot reads from its processed position on (unprocessed follow-ups), and
            # exporters resume after what they acknowledged: the log keeps both (see _snapshot_bound).
            bound = min(self._snapshot_bound(s, snap) for s in kept)
            freed = self.log_storage.delete_before(bound)
            if freed:
                self._log.info("partition %d: compacted log below %d (%d bytes freed)", self.partition_id, bound, freed)
        self._log.info("partition %d: snapshot at position %d", self.partition_id, snap.applied_position)
        return snap

    def _snapshot_bound(self, snap: snapshots.Snapshot, newest: snapshots.Snapshot) -> int:
        """What recovery from ``snap`` needs of the log: its replay and the exporters' unacknowledged records.

        Acknowledged positions only move forward and ``newest`` holds the latest durable ones: a record it counts
        as exported was exported, even if recovery falls back to an older snapshot (exporting then resumes at the
        log's first position). Taking an older snapshot's positions instead would pin the log at them until a
        second snapshot with new applied positions exists, which never comes while a full disk refuses commands.
        """
        bound = replay_start(snap.applied_position, snap.processed_position)
        for exporter_id in self.config.exporters:
            bound = min(bound, newest.exporter_positions.get(exporter_id, 0) + 1)
        return bound


def free_disk_bytes(directory: Path) -> int:
    return shutil.disk_usage(directory).free
