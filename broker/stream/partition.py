"""One partition replica: the async service around the deterministic core.

The service owns what the core must not: sockets and futures, the event loop, the wall clock, the disk and the
replication. Per round it hands the core the time, gets back a :class:`~broker.stream.core.Round` (the block to
append, the responses, the side effects), makes the block committed through its :mod:`commit seam
<broker.stream.commit>` (file log alone, or Raft), and only then completes the round and answers::

    execute() ─▶ core.inbox ─▶ core.process_round(now) ─▶ seam.commit(block) ─▶ core.complete() ─▶ responses,
                                       ▲                                                           side effects
      ScheduledWork.due(now) ──────────┘ (timers, job deadlines, TTLs)      ScheduledWork.sends(now) ─▶ other partitions

State is never ahead of the durable log: LMDB commits after the block is durable, and recovery rebuilds state from a
snapshot plus replay of the log, so a crash at any point loses nothing that was acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from broker import monitoring
from broker.engine.engine import Engine
from broker.engine.job_streams import JobStreams
from broker.engine.scheduled import ScheduledWork
from broker.log import FileLog, LogBlock, LogStorage
from broker.logs import PartitionLog
from broker.protocol.keys import KeyGenerator
from broker.protocol.record import Record
from broker.raft import RaftConfig, ReplicatedLog
from broker.state.db import StateDb
from broker.state.repositories import PartitionState
from broker.stream import commit_marker, snapshots
from broker.stream.commit import CommitSeam, LocalCommit, RaftCommit, RoundNotCommitted
from broker.stream.config import PartitionConfig
from broker.stream.core import Idle, Round, StreamCore, UnencodableRound
from broker.stream.errors import BackpressureError, NotLeaderError, PartitionUnavailableError
from broker.stream.intake import CommandIntake
from broker.stream.outbound import Outbound
from broker.stream.replay import replay_start
from broker.stream.supervision import TaskFactory, TaskSupervisor
from broker.stream.upkeep import Upkeep, free_disk_bytes
from exporters import ExporterDirector

__all__ = [
    "BackpressureError",
    "NotLeaderError",
    "Partition",
    "PartitionConfig",
    "PartitionUnavailableError",
    "wall_clock_ms",
    "wipe_runtime",
]

log = logging.getLogger("weir.partition")

Clock = Callable[[], int]
T = TypeVar("T")


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class Partition(CommandIntake, Outbound, Upkeep):
    """A partition's log, state and stream processor on this broker (intake, scheduled work and upkeep live in
    their own modules)."""

    def __init__(
        self,
        directory: Path,
        config: PartitionConfig | None = None,
        *,
        clock: Clock = wall_clock_ms,
        free_disk: Callable[[Path], int] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        log_storage: Callable[[Path, int], LogStorage] | None = None,
    ) -> None:
        """``clock``: the leader's time for new commands (epoch ms); ``monotonic``: seconds for intervals (admission
        control, snapshots, resends); ``log_storage``: opens the log (directory, committed position hint) — a file
        log unless the simulation swaps the disk."""
        self.config = config or PartitionConfig()
        self.partition_id = self.config.partition_id
        self.directory = directory
        self.clock = clock
        self.monotonic = monotonic
        self._open_log = log_storage or self._open_file_log
        self._log = PartitionLog(log, self.config.partition_id)
        self.job_streams = JobStreams()
        self.healthy = False
        self.failure: str | None = None
        self.closing = False
        self._futures: dict[int, asyncio.Future[Record]] = {}
        self._next_request_id = 1
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._supervisor = TaskSupervisor(self.config.partition_id, self._log)
        self._snapshot_not_before = 0.0
        self.jobs_available_listeners: list[Callable[[set[str]], None]] = []
        # Called (on the event loop) each time this replica becomes the leader and starts processing.
        self.lead_listeners: list[Callable[[], None]] = []
        self.job_stream_sinks: dict[int, Callable[[Record], bool]] = {}
        self.records_processed = 0
        self._records_since_snapshot = 0
        self._last_snapshot_time = self.monotonic()
        self.db: StateDb | None = None
        self.log_storage: LogStorage | None = None
        self._marker: commit_marker.CommitMarker | None = None
        self.core: StreamCore | None = None
        self.seam: CommitSeam | None = None
        self.exporters: ExporterDirector | None = None
        self._exporter_positions: dict[str, int] = {}
        self._free_disk = free_disk or free_disk_bytes
        self._limiter = self.config.backpressure.build() if self.config.backpressure else None
        self._admitted: dict[int, float] = {}
        self.disk_full = False
        self._processing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # Reaches other partitions' leaders (deployment distribution, subscriptions); set by the node in a cluster.
        self.inter_partition: Any = None
        self.scheduled = ScheduledWork(self.config.partition_id)
        self._sends: set[asyncio.Task[None]] = set()
        # Process instances stopped by the step budget since this replica started (also a metric).
        self.instances_stopped_by_budget = 0
        self._metrics = monitoring.PartitionRoundMetrics(self.partition_id)

    # -- lifecycle -------------------------------------------------------------------------------------------

    def open(self) -> None:
        """Recover: newest valid snapshot (or empty state), then replay every durable record after it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        runtime = self.directory / "runtime"
        snap = snapshots.restore_latest(self.directory / "snapshots", runtime)
        self.db = StateDb(runtime)
        self.state = PartitionState(self.db)
        # The checkers read through a view of their own: the processor's repositories stay bound to its round's
        # transaction while the round awaits its block's commit.
        self._view = PartitionState(self.db)
        self.engine = Engine(
            self.state,
            self.job_streams,
            partitions_count=self.config.partitions_count,
            max_message_size=self.config.max_message_size,
            expression_limits=self.config.expression_limits,
            deployment_limits=self.config.deployment_limits,
            max_process_depth=self.config.max_process_depth,
            business_id_uniqueness=self.config.business_id_uniqueness,
            authorizations=self.config.authorizations,
        )
        with self.db.begin() as txn:
            self.state.bind(txn)
            applied = self.state.meta.last_applied_position()
            processed = self.state.meta.last_processed_position()
            counter = self.state.meta.key_counter()
            self._exporter_positions = self.state.meta.exporter_positions()
            self.state.bind(None)
        self.keys = KeyGenerator(self.partition_id, counter)
        # The marker knows the commit position after the snapshot, so damage in the last blocks is never taken
        # for a torn write (which would silently drop acknowledged records).
        committed = max(applied, commit_marker.read(self.directory))
        self.log_storage = self._open_log(self.directory / "log", committed)
        self._marker = commit_marker.CommitMarker(self.directory)
        self.core = StreamCore(
            self.db,
            self.state,
            self.engine,
            self.keys,
            config=self.config.core(),
            applied_position=applied,
            processed_position=processed,
        )
        started = self.monotonic()
        replayed = self._recover(applied, processed)
        self._log.info(
            "partition %d recovered: snapshot=%s applied=%d processed=%d replayed=%d records in %.2fs pending=%d",
            self.partition_id,
            snap.applied_position if snap else "none",
            self.core.applied_position,
            self.core.processed_position,
            replayed,
            self.monotonic() - started,
            len(self.core.queue),
        )
        self.healthy = True

    def _recover(self, applied: int, processed: int) -> int:
        """Apply the events after ``applied``; commands after ``processed`` are queued to be processed again."""
        assert self.core is not None and self.log_storage is not None
        storage = self.log_storage
        start = replay_start(applied, processed)
        if storage.last_position < start:
            return 0
        if storage.first_position > start:
            raise RuntimeError(
                f"partition {self.partition_id}: state is at position {applied} (processed {processed}) but the "
                f"log starts at {storage.first_position}; records in between are missing (restore from a replica "
                "or backup)"
            )
        result = self.core.replay(storage.read(start))
        self.records_processed = result.records_read
        return result.records_read

    def read(self, ask: Callable[[PartitionState], T]) -> T:
        """``ask`` on a read-only view of the state as of the last committed round, for readers outside processing
        (the command API's lookups): it takes no part in rounds, so it neither waits for one nor holds one up.

        ``ask`` must not keep what it reads past its return (the view is unbound then). Any replica can answer; a
        follower's view trails its leader by the blocks not yet applied."""
        if self.db is None or not self.healthy:
            raise PartitionUnavailableError(self.failure or f"partition {self.partition_id} is not available")
        view = self._view
        with self.db.begin() as txn:
            view.bind(txn)
            try:
                return ask(view)
            finally:
                view.bind(None)

    def _open_file_log(self, directory: Path, committed: int) -> LogStorage:
        return FileLog(directory, segment_size=self.config.segment_size, committed_position_hint=committed)

    @property
    def applied_position(self) -> int:
        return self.core.applied_position if self.core is not None else 0

    @property
    def processed_position(self) -> int:
        return self.core.processed_position if self.core is not None else 0

    @property
    def role(self) -> str:
        return self.seam.role if self.seam is not None else "INACTIVE"

    @property
    def term(self) -> int:
        return self.seam.term if self.seam is not None else 0

    def start(
        self, raft_config: RaftConfig | None = None, *, replicated_log: Callable[..., ReplicatedLog] = ReplicatedLog
    ) -> None:
        """Begin serving (inside the event loop): alone, this replica leads at once; with Raft, when elected.

        ``replicated_log`` builds the Raft member (see :class:`RaftCommit`); the simulation passes its own."""
        assert self.log_storage is not None and self._marker is not None
        self._loop = asyncio.get_running_loop()
        self._tasks.append(self._supervisor.spawn("processor", self._run))
        self._tasks.append(self._supervisor.spawn("checker", self._check_due))
        if raft_config is None:
            self.seam = LocalCommit(self.log_storage, self._marker)
        else:
            self.seam = RaftCommit(self.partition_id, self.log_storage, self._marker, raft_config, replicated_log)
        self.seam.start(self)

    def lead(self) -> None:
        """Take commands: the state holds every committed block, so processing may continue from it."""
        assert self.core is not None
        self._processing = True
        self._start_exporters()
        self._log.info("partition %d: leader, processing from position %d", self.partition_id, self.processed_position)
        if self.core.queue:
            self._wake.set()
        for listener in self.lead_listeners:
            try:
                listener()
            except Exception:
                self._log.exception("partition %d: a leadership listener failed", self.partition_id)

    async def follow(self) -> None:
        """Stop taking commands; committed blocks keep arriving through the seam and are applied as they come."""
        if self._processing:
            self._log.info("partition %d: no longer the leader", self.partition_id)
        self._processing = False
        if self.core is not None:
            self.core.forget_chains()
        self._fail_inbox(NotLeaderError(f"this broker no longer leads partition {self.partition_id}"))
        # The failed inbox held due commands (timer triggers, job time-outs) handed out as written: forget them,
        # or a later term of this replica would never write them again.
        self.scheduled.reset()
        if self.exporters is not None:
            exporters, self.exporters = self.exporters, None
            await exporters.close()

    def spawn(self, name: str, factory: TaskFactory) -> asyncio.Task[None]:
        """Run a task of this partition under supervision: restarted with back-off if it fails (see supervision)."""
        return self._supervisor.spawn(name, factory)

    async def close(self, *, snapshot: bool = True) -> None:
        """Stop after the round in flight (its clients get their answers), snapshot, release files."""
        self.closing = True
        self._supervisor.stop()
        self._wake.set()
        processor, others = self._tasks[:1], self._tasks[1:]
        for t in others:
            t.cancel()
        if processor:
            # Cancelling a round mid-fsync would leave a durable block whose requests never got an answer.
            done, _ = await asyncio.wait(processor, timeout=self.config.close_timeout_s)
            if not done:
                self._log.warning("partition %d: round still running at shutdown, cancelling it", self.partition_id)
                processor[0].cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        self._fail_all(PartitionUnavailableError("partition is shutting down"))
        if self.seam is not None:
            await self.seam.close()
        if self.exporters is not None:
            await self.exporters.close()
            self._persist_exporter_positions()
        if snapshot and self.healthy and self.db is not None:
            try:
                self.take_snapshot()
            except Exception:
                self._log.exception("partition %d: snapshot at shutdown failed", self.partition_id)
        self.healthy = False
        if self.log_storage is not None:
            self.log_storage.close()
        if self._marker is not None:
            self._marker.close()
        if self.db is not None:
            self.db.close()
            self.db = None

    async def abandon(self) -> None:
        """Stop at once, as kill -9 would: no round is finished, nothing more is flushed, no snapshot is taken.

        For the simulation, which crashes replicas inside one process: tasks are cancelled, waiting requests fail,
        and files are released. What survives is what the disk held (the simulated disk drops unflushed blocks).
        """
        self.closing = True
        self._supervisor.stop()
        self.healthy = False
        self._processing = False
        for task in [*self._tasks, *self._sends]:
            task.cancel()
        self._tasks.clear()
        self._fail_all(PartitionUnavailableError(f"partition {self.partition_id}: the broker is gone"))
        if self.seam is not None:
            await self.seam.close()
        if self.exporters is not None:
            exporters, self.exporters = self.exporters, None
            await exporters.close()
        if self.db is not None:
            if self.core is not None:
                self.core.drop_open_round()
            self.db.close()
            self.db = None

    # -- processing ------------------------------------------------------------------------------------------

    async def _run(self) -> None:
        self._wake.set()  # (re)started: look at what is waiting
        while not self.closing:
            await self._wake.wait()
            self._wake.clear()
            while self.core is not None and self.core.has_work and self._processing and not self.closing:
                try:
                    await self._round()
                except RoundNotCommitted as e:
                    self._log.warning("partition %d: round not committed (%s); stepping back", self.partition_id, e)
                    self._fail_inbox(NotLeaderError(str(e)))
                    await self.follow()
                    if self.seam is not None:
                        self.seam.step_down()
                    break
                except Exception as e:
                    self.fail_stop(f"processing failed: {e!r}")
                    self._log.exception("partition %d stopped after a failure", self.partition_id)
                    return
                await asyncio.sleep(0)
            if not self.closing:
                self._maybe_snapshot()

    async def _round(self) -> None:
        """One round: the core processes, the seam commits, then the round completes and its answers go out."""
        core, seam, storage = self.core, self.seam, self.log_storage
        assert core is not None and seam is not None and storage is not None
        round_started = self.monotonic()
        positions = self._changed_exporter_positions()
        try:
            result = core.process_round(self.clock(), storage.last_position + 1, positions)
        except UnencodableRound:
            return  # undone; the next round processes its commands one by one
        for refusal in result.refusals:
            fut = self._futures.pop(refusal.request_id, None)
            if fut is not None and not fut.done():
                fut.set_exception(refusal.error)
        if isinstance(result, Idle):
            return
        try:
            await seam.commit(result.block)
        except BaseException as e:
            core.abort(result)
            if isinstance(e, RoundNotCommitted):
                # The block may still commit under the next leader: the outcome is unknown, so clients are told so
                # (and retry idempotently) instead of waiting for a response that will never come from here.
                self._fail_requests(result.records, PartitionUnavailableError(f"outcome unknown: {e}"))
            raise
        core.complete(result)
        if positions is not None:
            self._exporter_positions = positions
        self._account(result, round_started)
        self._after_commit(result)

    def _account(self, done: Round, round_started: float) -> None:
        """Metrics, logs and admission control of a committed round."""
        metrics = self._metrics
        last = done.block.last_position
        self.records_processed += len(done.records)
        metrics.records.inc(len(done.records))
        metrics.commands.inc(done.commands)
        metrics.round_seconds.observe(self.monotonic() - round_started)
        metrics.position.set(last)
        self._records_since_snapshot += len(done.records)
        if done.stopped:
            assert self.core is not None
            self.instances_stopped_by_budget += len(done.stopped)
            self.core.step_budget.report(done.stopped, self.partition_id, self._log)
        if self._admitted:
            for rec in done.records:
                if rec.request is not None:
                    self._release(rec.request.request_id)
        if self._limiter is not None:
            metrics.limit.set(self._limiter.limit)
            metrics.in_flight.set(self._limiter.in_flight)
        if self.exporters is not None:
            self.exporters.notify_committed(last, done.records)

    def _after_commit(self, done: Round) -> None:
        for response in done.responses:
            fut = self._futures.pop(response.request.request_id, None)
            if fut is not None and not fut.done():
                fut.set_result(response.record)
        effects = done.side_effects
        for stream_id, record in effects.job_pushes:
            sink = self.job_stream_sinks.get(stream_id)
            delivered = False
            if sink is not None:
                try:
                    delivered = sink(record)
                except Exception:
                    delivered = False
            if not delivered:
                self._write_commands(self.scheduled.undelivered(record))
        if effects.jobs_available:
            for listener in self.jobs_available_listeners:
                listener(effects.jobs_available)
        for task in effects.tasks:
            task()

    # -- applying blocks committed by another leader (the seam calls this) ------------------------------------

    def apply_committed(self, block: LogBlock) -> None:
        """A follower applies a committed block's events at once, so a new leader continues within moments."""
        assert self.core is not None
        result = self.core.replay([block])
        if result.exporter_positions is not None:
            self._exporter_positions = result.exporter_positions
        self._records_since_snapshot += result.records_read
        self._metrics.records.inc(result.records_read)
        self._metrics.position.set(block.last_position)
        if not self._processing:
            self._maybe_snapshot()

    # -- failure ---------------------------------------------------------------------------------------------

    def fail_stop(self, reason: str) -> None:
        self.healthy = False
        self.failure = f"partition {self.partition_id} stopped: {reason}"
        self._fail_all(PartitionUnavailableError(self.failure))

    def _fail_requests(self, records: list[Record], error: Exception) -> None:
        for rec in records:
            if rec.request is not None:
                fut = self._futures.pop(rec.request.request_id, None)
                if fut is not None and not fut.done():
                    fut.set_exception(error)

    def _fail_inbox(self, error: Exception) -> None:
        """Commands not yet written anywhere: failing them is safe, the client may retry on the new leader."""
        if self.core is not None:
            self._fail_requests(self.core.take_inbox(), error)

    def _fail_all(self, error: Exception) -> None:
        self._fail_inbox(error)
        for fut in list(self._futures.values()):
            if not fut.done():
                fut.set_exception(error)
        self._futures.clear()


def wipe_runtime(directory: Path) -> None:
    shutil.rmtree(directory / "runtime", ignore_errors=True)
