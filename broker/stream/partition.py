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
import functools
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from broker import monitoring
from broker.engine.behaviors import DEFAULT_MAX_PROCESS_DEPTH
from broker.engine.deployment_limits import DeploymentLimits
from broker.engine.engine import Engine
from broker.engine.job_streams import JobStreams
from broker.engine.scheduled import FINISHING_WORK, Command, ScheduledWork, Send, SendOutcome
from broker.feel import DEFAULT_LIMITS, Limits
from broker.log import FileLog, LogBlock, LogStorage
from broker.logs import PartitionLog
from broker.protocol.codec import decode_block
from broker.protocol.documents import InvalidDocumentError, check_command_value
from broker.protocol.enums import INTENTS, RecordType, ValueType
from broker.protocol.keys import KeyGenerator
from broker.protocol.record import Record, RequestMetadata
from broker.raft import RaftConfig, ReplicatedLog
from broker.state.db import StateDb
from broker.state.repositories import PartitionState
from broker.stream import commit_marker, snapshots
from broker.stream.backpressure import BackpressureConfig
from broker.stream.commit import CommitSeam, LocalCommit, RaftCommit, RoundNotCommitted
from broker.stream.core import CoreConfig, Idle, Round, StreamCore, UnencodableRound
from broker.stream.replay import replay_start
from broker.stream.step_budget import DEFAULT_MAX_CHAIN_INSTANCES, DEFAULT_MAX_STEPS_PER_INSTANCE
from broker.stream.supervision import TaskFactory, TaskSupervisor
from exporters import ExporterDirector

log = logging.getLogger("weir.partition")

Clock = Callable[[], int]

# While the disk is full, snapshots that record exporter progress (and so compact the log) come at most this often.
_DISK_FULL_SNAPSHOT_INTERVAL_S = 1.0
# A snapshot that failed or had no room is tried again after this long at the earliest.
_SNAPSHOT_RETRY_S = 5.0

# Every (value type, intent) pair a command may have: what :meth:`Partition.execute` accepts.
_KNOWN_COMMANDS: Final = frozenset((value_type, int(intent)) for value_type, enum in INTENTS.items() for intent in enum)


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class PartitionUnavailableError(Exception):
    """The partition cannot take commands now (starting, stopped, or failed and stopped to protect data)."""


class NotLeaderError(PartitionUnavailableError):
    """This replica does not lead the partition (now); the command was not taken, so it is safe to retry."""


class BackpressureError(Exception):
    """The partition has more commands waiting than it accepts; the client should back off and retry."""


@dataclass(slots=True)
class PartitionConfig:
    partition_id: int = 1
    max_records_per_round: int = 4000
    max_commands_per_round: int = 500
    max_inbox: int = 10_000
    snapshot_period_s: float = 300.0
    snapshot_min_records: int = 100_000
    checker_interval_s: float = 0.1
    segment_size: int = 64 << 20
    close_timeout_s: float = 10.0
    # Exporters by id: {"className": "pkg.mod.Class", "args": {...}} (see exporters/).
    exporters: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Admission control of user commands (see broker/stream/backpressure.py); None admits everything.
    backpressure: BackpressureConfig | None = field(default_factory=BackpressureConfig)
    # All partitions of the cluster: deployments made here are distributed to the others.
    partitions_count: int = 1
    # Below this much free disk the partition rejects new commands (RESOURCE_EXHAUSTED) until space is back.
    min_free_disk_bytes: int = 256 << 20
    # The largest gRPC message: no variables document may be larger, or no worker could ever be sent it.
    max_message_size: int = 4 << 20
    # Element activations one process instance may make in one chain of follow-ups before it is stopped with an
    # incident (see broker/stream/step_budget.py); 0 turns the budget off.
    max_steps_per_instance: int = DEFAULT_MAX_STEPS_PER_INSTANCE
    # Process instances one chain of signal broadcasts may start before the next one stops with an incident (see
    # broker/stream/step_budget.py); 0 turns the bound off.
    max_instances_per_signal_chain: int = DEFAULT_MAX_CHAIN_INSTANCES
    # Process instances in one chain of call activities (the root is 1): a deeper call raises an incident.
    max_process_depth: int = DEFAULT_MAX_PROCESS_DEPTH
    # What one FEEL evaluation may spend (steps and produced size); its result may be at most max_message_size.
    expression_limits: Limits = DEFAULT_LIMITS
    # What checking one deployment may spend (resources, XML elements, invalid resources checked).
    deployment_limits: DeploymentLimits = field(default_factory=DeploymentLimits)
    # Reject a creation whose business id an active root instance of the same process (and tenant) already has.
    business_id_uniqueness: bool = False

    def core(self) -> CoreConfig:
        return CoreConfig(
            partition_id=self.partition_id,
            max_records_per_round=self.max_records_per_round,
            max_commands_per_round=self.max_commands_per_round,
            max_steps_per_instance=self.max_steps_per_instance,
            max_instances_per_signal_chain=self.max_instances_per_signal_chain,
        )


class Partition:
    """A partition's log, state and stream processor on this broker."""

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
        self._free_disk = free_disk or _free_disk_bytes
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

    # -- command intake --------------------------------------------------------------------------------------

    def execute(
        self, value_type: ValueType, intent: int, value: dict, key: int = -1, *, internal: bool = False
    ) -> asyncio.Future[Record]:
        """Queue a command; the future resolves with the response record once it is durable.

        User commands pass admission control; ``internal`` ones (from other partitions) never are refused by it.
        A value that could not be logged or shown as JSON raises :class:`InvalidDocumentError` before it is queued:
        caught later, while the round's block is encoded, it would fail every command of the round.
        """
        try:
            known = (value_type, int(intent)) in _KNOWN_COMMANDS
        except (ValueError, TypeError):
            known = False
        if not known:  # would fail the round (and so the partition) where it is described
            raise InvalidDocumentError(
                f"Expected a command of a known value type and intent, but got value type {value_type!r}, "
                f"intent {intent!r}"
            ) from None
        check_command_value(value, self.config.max_message_size)
        if not self.healthy or self.closing or self.core is None:
            raise PartitionUnavailableError(self.failure or f"partition {self.partition_id} is not available")
        if not self._processing:
            raise NotLeaderError(f"this broker does not lead partition {self.partition_id} (role {self.role})")
        if self.disk_full:
            raise BackpressureError(
                f"partition {self.partition_id} is not accepting new commands: {self.disk_full_reason}"
            )
        if len(self.core.inbox) >= self.config.max_inbox:
            raise BackpressureError(
                f"partition {self.partition_id} is overloaded: {len(self.core.inbox)} commands are waiting"
            )
        request_id = self._next_request_id
        if not internal and self._limiter is not None and (value_type, intent) not in FINISHING_WORK:
            if not self._limiter.try_acquire():
                monitoring.BACKPRESSURE_DROPPED.labels(str(self.partition_id)).inc()
                raise BackpressureError(
                    f"partition {self.partition_id} is overloaded: {self._limiter.in_flight} commands in flight "
                    f"(limit {self._limiter.limit}); retry with back-off"
                )
            self._admitted[request_id] = self.monotonic()
        self._next_request_id += 1
        loop = self._loop if self._loop is not None else asyncio.get_running_loop()
        fut: asyncio.Future[Record] = loop.create_future()
        self._futures[request_id] = fut
        fut.add_done_callback(functools.partial(self._forget_request, request_id))
        cmd = Record(
            position=-1,
            key=key,
            record_type=RecordType.COMMAND,
            value_type=value_type,
            intent=int(intent),
            timestamp=0,
            value=value,
            request=RequestMetadata(0, request_id),
            partition_id=self.partition_id,
        )
        self.core.inbox.append(cmd)
        self._wake.set()
        return fut

    def _forget_request(self, request_id: int, future: asyncio.Future[Record]) -> None:
        self._futures.pop(request_id, None)
        self._release(request_id, dropped=future.cancelled() or future.exception() is not None)

    def _release(self, request_id: int, *, dropped: bool = False) -> None:
        """A command leaves admission control once processed and committed (or when it failed)."""
        admitted = self._admitted.pop(request_id, None)
        if admitted is not None and self._limiter is not None:
            self._limiter.release(self.monotonic() - admitted, dropped=dropped)

    def write_internal(self, value_type: ValueType, intent: int, value: dict, key: int) -> None:
        """Queue a command that expects no response (checkers, yielded pushes)."""
        if not self.healthy or self.closing or not self._processing or self.core is None:
            return
        cmd = Record(-1, key, RecordType.COMMAND, value_type, int(intent), 0, value, partition_id=self.partition_id)
        self.core.inbox.append(cmd)
        self._wake.set()

    def _write_commands(self, commands: list[Command]) -> None:
        for command in commands:
            self.write_internal(command.value_type, command.intent, command.value, command.key)

    @property
    def last_snapshot_time(self) -> float:
        """Monotonic time of the last snapshot (or of the start, before the first one)."""
        return self._last_snapshot_time

    @property
    def disk_full_reason(self) -> str:
        """Why commands are refused while the disk is full, and what ends it."""
        return (
            f"free disk space under {self.directory} is below {self.config.min_free_disk_bytes} bytes; it resumes once "
            "exporters catch up and the log is compacted, or space is freed"
        )

    @property
    def problem(self) -> str | None:
        """Why a running partition is not healthy (a task failed and is being restarted), or None."""
        return self._supervisor.problem

    @property
    def processing(self) -> bool:
        """True while this replica leads and takes commands."""
        return self._processing

    @property
    def backlog(self) -> int:
        return len(self.core.inbox) + len(self.core.queue) if self.core is not None else 0

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
        label = str(self.partition_id)
        last = done.block.last_position
        self.records_processed += len(done.records)
        monitoring.RECORDS_PROCESSED.labels(label).inc(len(done.records))
        monitoring.COMMANDS_PROCESSED.labels(label).inc(done.commands)
        monitoring.ROUND_LATENCY.labels(label).observe(self.monotonic() - round_started)
        monitoring.LOG_POSITION.labels(label).set(last)
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
            monitoring.BACKPRESSURE_LIMIT.labels(label).set(self._limiter.limit)
            monitoring.BACKPRESSURE_IN_FLIGHT.labels(label).set(self._limiter.in_flight)
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
        label = str(self.partition_id)
        monitoring.RECORDS_PROCESSED.labels(label).inc(result.records_read)
        monitoring.LOG_POSITION.labels(label).set(block.last_position)
        if not self._processing:
            self._maybe_snapshot()

    # -- scheduled work: due commands and commands for other partitions ---------------------------------------

    async def _check_due(self) -> None:
        self.engine.services.sender = self._send_command
        while not self.closing:
            await asyncio.sleep(self.config.checker_interval_s)
            if not self.healthy or self.db is None or not self._processing or self.core is None:
                continue
            view = self._view
            with self.db.begin() as txn:
                view.bind(txn)
                try:
                    pinned = view.meta.pinned_clock()
                    now = self.clock() if pinned is None else pinned
                    due = self.scheduled.due(view, now)
                    sends = self.scheduled.sends(view, int(self.monotonic() * 1000))
                finally:
                    view.bind(None)
            self._write_commands(due)
            self._check_disk()
            for send in sends:
                self._dispatch(send)
            for alert in self.scheduled.take_alerts():
                self._log.error("partition %d: %s", self.partition_id, alert)

    def _dispatch(self, send: Send) -> None:
        """Send to another partition's leader (or this one's inbox); the outcome goes back to the scheduled work."""
        command = send.command
        if send.partition_id == self.partition_id:
            self.write_internal(command.value_type, command.intent, dict(command.value), command.key)
            return
        if self.inter_partition is None:
            self._log.warning(
                "partition %d: no route to partition %d for %s",
                self.partition_id,
                send.partition_id,
                command.value_type.name,
            )
            self.scheduled.replied(send, SendOutcome(None, "no route"), int(self.monotonic() * 1000))
            return
        task = asyncio.get_running_loop().create_task(self._send_remote(send))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send_remote(self, send: Send) -> None:
        command = send.command
        try:
            reply = await asyncio.wait_for(
                self.inter_partition.execute(
                    send.partition_id, command.value_type, command.intent, command.value, command.key, internal=True
                ),
                10,
            )
            outcome = SendOutcome(reply)
        except Exception as e:  # unreachable, no leader, overloaded: the scheduled work sends it again
            self._log.debug("partition %d: command to partition %d failed: %r", self.partition_id, send.partition_id, e)
            outcome = SendOutcome(None, repr(e))
        if not self.closing:
            self._write_commands(self.scheduled.replied(send, outcome, int(self.monotonic() * 1000)))

    def _send_command(self, partition_id: int, value_type: ValueType, intent: int, value: dict, key: int) -> None:
        """The engine's immediate sends (after commit, at most once): the outbox resends what must arrive."""
        self._dispatch(Send("once", (), partition_id, Command(value_type, int(intent), key, value)))

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


def _free_disk_bytes(directory: Path) -> int:
    return shutil.disk_usage(directory).free


def wipe_runtime(directory: Path) -> None:
    shutil.rmtree(directory / "runtime", ignore_errors=True)
