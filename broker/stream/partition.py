"""One partition on its leader: recovery, the processing loop, and post-commit work.

The pipeline of one round (one LMDB write transaction, one log block, one fsync)::

    take queued follow-ups, then new client commands (each stamped with the leader's clock once per round)
      └─ process each command in a nested transaction (an unexpected error rolls back only that command)
    encode every record of the round into one block ──▶ append ──▶ fsync (worker thread; the loop keeps serving)
      └─ store applied/processed positions in the same transaction ──▶ commit LMDB
         └─ only now: send responses, notify waiting workers, push jobs to streams

State is never ahead of the durable log: LMDB commits after the fsync, and recovery rebuilds state from a snapshot
plus replay of the log, so a crash at any point loses nothing that was acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import shutil
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgpack

from broker import monitoring
from broker.engine.behaviors import DEFAULT_MAX_PROCESS_DEPTH
from broker.engine.context import ProcessingContext
from broker.engine.engine import Engine
from broker.engine.job_streams import JobStreams
from broker.feel import DEFAULT_LIMITS, Limits
from broker.log import FileLog, LogBlock, LogStorage
from broker.logs import PartitionLog
from broker.protocol.codec import decode_block, encode_block, record_to_list
from broker.protocol.documents import InvalidDocumentError, check_command_value
from broker.protocol.enums import (
    INTENTS,
    CommandDistributionIntent,
    JobIntent,
    MessageIntent,
    RecordType,
    RejectionType,
    TimerIntent,
    ValueType,
)
from broker.protocol.keys import KeyGenerator
from broker.protocol.record import Record, RequestMetadata
from broker.raft import (
    RaftConfig,
    RaftRole,
    ReplicatedLog,
    ReplicationError,
)
from broker.state.db import StateDb
from broker.state.repositories import MetaState, PartitionState
from broker.stream import commit_marker, snapshots
from broker.stream.backpressure import BackpressureConfig
from broker.stream.replay import replay_blocks, replay_start
from broker.stream.scheduling import FairTake
from broker.stream.step_budget import DEFAULT_MAX_CHAIN_INSTANCES, DEFAULT_MAX_STEPS_PER_INSTANCE, StepBudget
from exporters import ExporterDirector

log = logging.getLogger("weir.partition")

Clock = Callable[[], int]

# While the disk is full, snapshots that record exporter progress (and so compact the log) come at most this often.
_DISK_FULL_SNAPSHOT_INTERVAL_S = 1.0

# Every (value type, intent) pair a command may have: what :meth:`Partition.execute` accepts.
_KNOWN_COMMANDS: Final = frozenset((value_type, int(intent)) for value_type, enum in INTENTS.items() for intent in enum)


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


# Commands that finish work already admitted (as Zeebe's limiter lets job completions and failures through): refusing
# them under load would only leave jobs to time out and be worked again, adding load instead of shedding it.
_FINISHING_WORK: frozenset[tuple[ValueType, int]] = frozenset(
    (ValueType.JOB, int(intent)) for intent in (JobIntent.COMPLETE, JobIntent.FAIL, JobIntent.THROW_ERROR)
)


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


class Partition:
    """A partition's log, state and stream processor on this broker."""

    def __init__(
        self,
        directory: Path,
        config: PartitionConfig | None = None,
        *,
        clock: Clock = wall_clock_ms,
        free_disk: Callable[[Path], int] | None = None,
    ) -> None:
        self.config = config or PartitionConfig()
        self.partition_id = self.config.partition_id
        self.directory = directory
        self.clock = clock
        self._log = PartitionLog(log, self.config.partition_id)
        self.job_streams = JobStreams()
        self.healthy = False
        self.failure: str | None = None
        self._inbox: deque[tuple[Record, asyncio.Future[Record] | None]] = deque()
        self._queue: deque[Record] = deque()
        self._futures: dict[int, asyncio.Future[Record]] = {}
        self._next_request_id = 1
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._closing = False
        self._scheduled: set[tuple[int, int]] = set()
        self.jobs_available_listeners: list[Callable[[set[str]], None]] = []
        self.job_stream_sinks: dict[int, Callable[[Record], bool]] = {}
        self.records_processed = 0
        self._records_since_snapshot = 0
        self._last_snapshot_time = time.monotonic()
        self.db: StateDb | None = None
        self.log_storage: LogStorage | None = None
        self._marker: commit_marker.CommitMarker | None = None
        self.exporters: ExporterDirector | None = None
        self._exporter_positions: dict[str, int] = {}
        self._free_disk = free_disk or _free_disk_bytes
        self._limiter = self.config.backpressure.build() if self.config.backpressure else None
        self._admitted: dict[int, float] = {}
        self.disk_full = False
        # Replication: None runs the partition alone (fsync = commit); a Raft group replicates every block.
        self.raft: ReplicatedLog | None = None
        self.role = "INACTIVE"
        self._processing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._round_block: tuple[int, int] | None = None
        self._durable = asyncio.Condition()
        self._flushing = False
        self._barriers: dict[int, asyncio.Future[None]] = {}
        self._next_barrier = 1
        self._leadership: asyncio.Task[None] | None = None
        # Reaches other partitions' leaders (deployment distribution); set by the node in a cluster.
        self.inter_partition: Any = None
        self._distributing: set[tuple[int, int]] = set()
        # After a round whose block could not be encoded: check each command's records before it commits.
        self._careful = False
        self._step_budget = StepBudget(self.config.max_steps_per_instance, self.config.max_instances_per_signal_chain)
        self._scheduler = FairTake(self.config.max_commands_per_round)
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
        # The checkers read the pinned clock through a view of their own: the processor's repositories stay bound
        # to its round's transaction while the round awaits its block's commit.
        self._clock_view = MetaState(self.db)
        self.engine = Engine(
            self.state,
            self.job_streams,
            partitions_count=self.config.partitions_count,
            max_message_size=self.config.max_message_size,
            expression_limits=self.config.expression_limits,
            max_process_depth=self.config.max_process_depth,
        )
        with self.db.begin() as txn:
            self.state.bind(txn)
            applied = self.state.meta.last_applied_position()
            processed = self.state.meta.last_processed_position()
            counter = self.state.meta.key_counter()
            self._exporter_positions = self.state.meta.exporter_positions()
            self.state.bind(None)
        self.keys = KeyGenerator(self.partition_id, counter)
        self._committed_key_counter = counter
        # The marker knows the commit position after the snapshot, so damage in the last blocks is never taken
        # for a torn write (which would silently drop acknowledged records).
        committed = max(applied, commit_marker.read(self.directory))
        self.log_storage = FileLog(
            self.directory / "log", segment_size=self.config.segment_size, committed_position_hint=committed
        )
        self._marker = commit_marker.CommitMarker(self.directory)
        started = time.monotonic()
        applied, processed, replayed = self._replay(applied, processed)
        self._committed_key_counter = self.keys.counter
        self.applied_position = applied
        self.processed_position = processed
        self._log.info(
            "partition %d recovered: snapshot=%s applied=%d processed=%d replayed=%d records in %.2fs pending=%d",
            self.partition_id,
            snap.applied_position if snap else "none",
            applied,
            processed,
            replayed,
            time.monotonic() - started,
            len(self._queue),
        )
        self.healthy = True

    def _replay(self, applied: int, processed: int) -> tuple[int, int, int]:
        """Apply the events after ``applied``; commands after ``processed`` are queued to be processed again."""
        assert self.db is not None and self.log_storage is not None
        storage = self.log_storage
        start = replay_start(applied, processed)
        if storage.last_position < start:
            return applied, processed, 0
        if storage.first_position > start:
            raise RuntimeError(
                f"partition {self.partition_id}: state is at position {applied} (processed {processed}) but the "
                f"log starts at {storage.first_position}; records in between are missing (restore from a replica "
                "or backup)"
            )
        result = replay_blocks(
            storage.read(start),
            self.db,
            self.state,
            self.engine,
            self.keys,
            applied=applied,
            processed=processed,
        )
        self._queue.extend(result.pending)
        self.records_processed = result.records_read
        return result.applied_position, result.processed_position, result.records_read

    def start(self, raft_config: RaftConfig | None = None) -> None:
        """Begin serving (inside the event loop): alone, this replica leads at once; with Raft, when elected."""
        self._loop = asyncio.get_running_loop()
        self._tasks.append(asyncio.create_task(self._run(), name=f"partition-{self.partition_id}-processor"))
        self._tasks.append(asyncio.create_task(self._check_due(), name=f"partition-{self.partition_id}-checker"))
        if raft_config is None:
            self._lead()
            return
        self.role = "FOLLOWER"
        self.raft = ReplicatedLog(
            raft_config,
            on_commit=self._raft_committed,
            snapshot_provider=self._raft_snapshot,
            snapshot_installer=self._raft_install,
            on_role_change=self._raft_role_changed,
        )

    def _lead(self) -> None:
        """Take commands: the state holds every committed block, so processing may continue from it."""
        self.role = "LEADER"
        self._processing = True
        self._start_exporters()
        self._log.info("partition %d: leader, processing from position %d", self.partition_id, self.processed_position)
        if self._queue:
            self._wake.set()

    async def _follow(self) -> None:
        """Stop taking commands; committed blocks keep arriving through Raft and are applied as they come."""
        if self._processing:
            self._log.info("partition %d: no longer the leader", self.partition_id)
        self._processing = False
        self.role = "FOLLOWER"
        self._step_budget.clear()
        self._fail_inbox(NotLeaderError(f"this broker no longer leads partition {self.partition_id}"))
        # The failed inbox held due commands (timer triggers, job time-outs) the checker counts as written: forget
        # them, or a later term of this replica would never write them again.
        self._scheduled.clear()
        if self.exporters is not None:
            exporters, self.exporters = self.exporters, None
            await exporters.close()

    async def close(self, *, snapshot: bool = True) -> None:
        """Stop after the round in flight (its clients get their answers), snapshot, release files."""
        self._closing = True
        self._wake.set()
        if self._leadership is not None:
            self._leadership.cancel()
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
        if self.raft is not None:
            raft, self.raft = self.raft, None
            await asyncio.get_running_loop().run_in_executor(None, raft.close)
        async with self._durable:
            pass
        while self._flushing:
            await asyncio.sleep(0.01)
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
        if not self.healthy or self._closing:
            raise PartitionUnavailableError(self.failure or f"partition {self.partition_id} is not available")
        if not self._processing:
            raise NotLeaderError(f"this broker does not lead partition {self.partition_id} (role {self.role})")
        if self.disk_full:
            raise BackpressureError(
                f"partition {self.partition_id} is not accepting new commands: free disk space under "
                f"{self.directory} is below {self.config.min_free_disk_bytes} bytes; it resumes once exporters catch "
                "up and the log is compacted, or space is freed"
            )
        if len(self._inbox) >= self.config.max_inbox:
            raise BackpressureError(
                f"partition {self.partition_id} is overloaded: {len(self._inbox)} commands are waiting"
            )
        request_id = self._next_request_id
        if not internal and self._limiter is not None and (value_type, intent) not in _FINISHING_WORK:
            if not self._limiter.try_acquire():
                monitoring.BACKPRESSURE_DROPPED.labels(str(self.partition_id)).inc()
                raise BackpressureError(
                    f"partition {self.partition_id} is overloaded: {self._limiter.in_flight} commands in flight "
                    f"(limit {self._limiter.limit}); retry with back-off"
                )
            self._admitted[request_id] = time.monotonic()
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
        self._inbox.append((cmd, fut))
        self._wake.set()
        return fut

    def _forget_request(self, request_id: int, future: asyncio.Future[Record]) -> None:
        self._futures.pop(request_id, None)
        self._release(request_id, dropped=future.cancelled() or future.exception() is not None)

    def _release(self, request_id: int, *, dropped: bool = False) -> None:
        """A command leaves admission control once processed and committed (or when it failed)."""
        admitted = self._admitted.pop(request_id, None)
        if admitted is not None and self._limiter is not None:
            self._limiter.release(time.monotonic() - admitted, dropped=dropped)

    def write_internal(self, value_type: ValueType, intent: int, value: dict, key: int) -> None:
        """Queue a command that expects no response (checkers, yielded pushes)."""
        if not self.healthy or self._closing or not self._processing:
            return
        cmd = Record(-1, key, RecordType.COMMAND, value_type, int(intent), 0, value, partition_id=self.partition_id)
        self._inbox.append((cmd, None))
        self._wake.set()

    @property
    def last_snapshot_time(self) -> float:
        """Monotonic time of the last snapshot (or of the start, before the first one)."""
        return self._last_snapshot_time

    @property
    def processing(self) -> bool:
        """True while this replica leads and takes commands."""
        return self._processing

    @property
    def backlog(self) -> int:
        return len(self._inbox) + len(self._queue)

    # -- processing ------------------------------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            while (self._queue or self._inbox) and self._processing and not self._closing:
                try:
                    await self._round(loop)
                except _RoundNotCommitted as e:
                    self._log.warning("partition %d: round not committed (%s); stepping back", self.partition_id, e)
                    self._fail_inbox(NotLeaderError(str(e)))
                    await self._follow()
                    if self.raft is not None and self.raft.is_leader:
                        self._raft_role_changed(RaftRole.LEADER, self.raft.term, None)
                    break
                except Exception as e:
                    self._fail_stop(f"processing failed: {e!r}")
                    self._log.exception("partition %d stopped after a failure", self.partition_id)
                    return
                await asyncio.sleep(0)
            if not self._closing:
                self._maybe_snapshot()

    async def _round(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self.db is not None and self.log_storage is not None
        storage = self.log_storage
        txn = self.db.begin(write=True)
        self.state.bind(txn)
        ctx = ProcessingContext(
            state=self.state,
            keys=self.keys,
            partition_id=self.partition_id,
            apply_event=self.engine.appliers.apply,  # what engine.apply_event calls, without the hop per event
            next_position=storage.last_position + 1,
        )
        now = self._stream_time(self.state.meta)
        round_started = time.monotonic()
        processed = self.processed_position
        commands = 0
        stopped: list[Record] = []  # element activations the step budget stopped
        taken_from_inbox: list[tuple[Record, asyncio.Future[Record] | None]] = []
        queue_before = list(self._queue)
        exporter_positions_before = self._exporter_positions
        scheduler = self._scheduler

        def admit() -> None:
            """Give the next client command its position in the log, behind the commands already queued."""
            taken = self._inbox.popleft()
            taken_from_inbox.append(taken)
            cmd = taken[0]
            if self._careful and not self._encodable(cmd, taken[1]):
                return
            cmd.timestamp = now
            ctx.append_client_command(cmd)
            self._queue.append(cmd)
            scheduler.admitted(cmd)

        try:
            scheduler.forget_until(processed)
            for _ in range(scheduler.admissions(len(self._queue), len(self._inbox))):
                admit()
            while (
                len(ctx.records) < self.config.max_records_per_round and commands < self.config.max_commands_per_round
            ):
                if not self._queue:
                    if not self._inbox:
                        break
                    admit()
                    continue
                cmd = scheduler.taken(self._queue.popleft())
                ctx.over_step_budget = self._step_budget.charge(cmd)
                written = len(ctx.records)
                self._process_one(ctx, txn, cmd)
                if ctx.over_step_budget is not None:
                    ctx.over_step_budget = None
                    if any(r.value_type == ValueType.INCIDENT for r in ctx.records[written:]):
                        stopped.append(cmd)
                processed = cmd.position
                commands += 1
                self._queue.extend(ctx.followups)
                ctx.followups.clear()
            if not ctx.records:
                txn.abort()
                return
            first = ctx.records[0].position
            last = ctx.records[-1].position
            exporter_positions = self._store_exporter_positions()
            try:
                payload = encode_block(processed, ctx.records, exporter_positions)
            except _UNENCODABLE as e:
                if self._careful:
                    raise
                raise _RetryCarefully(repr(e)) from e
            await self._commit_block(LogBlock(first, last, payload), loop)
            self.state.meta.set_positions(last, processed, self.keys.counter)
            self.state.flush()
            txn.commit()
        except BaseException as e:
            self.state.discard()
            txn.abort()
            self.engine.models.clear()
            self.keys.reset(self._committed_key_counter)
            self._step_budget.clear()
            if isinstance(e, _RoundNotCommitted):
                # The block may still commit under the next leader: the outcome is unknown, so clients are told so
                # (and retry idempotently) instead of waiting for a response that will never come from here.
                unknown = PartitionUnavailableError(f"outcome unknown: {e}")
                for rec in ctx.records:
                    if rec.request is not None:
                        fut = self._futures.pop(rec.request.request_id, None)
                        if fut is not None and not fut.done():
                            fut.set_exception(unknown)
            # Queued commands go back; follow-ups of the rolled-back round were never committed.
            self._queue = deque(queue_before)
            if not isinstance(e, _RetryCarefully):
                raise
            # One command produced a record that cannot be encoded: run the same commands again, each checked on
            # its own, so only that command is rejected and the round goes on (instead of stopping the partition).
            self._log.error(
                "partition %d: a record of this round cannot be encoded (%s); processing its commands again one by one",
                self.partition_id,
                e,
            )
            self._inbox.extendleft(reversed(taken_from_inbox))
            self._exporter_positions = exporter_positions_before
            self._careful = True
            return
        finally:
            self.state.bind(None)
        self._careful = False
        self._committed_key_counter = self.keys.counter
        self.applied_position = last
        self.processed_position = processed
        self.records_processed += len(ctx.records)
        label = str(self.partition_id)
        monitoring.RECORDS_PROCESSED.labels(label).inc(len(ctx.records))
        monitoring.COMMANDS_PROCESSED.labels(label).inc(commands)
        monitoring.ROUND_LATENCY.labels(label).observe(time.monotonic() - round_started)
        monitoring.LOG_POSITION.labels(label).set(last)
        self._records_since_snapshot += len(ctx.records)
        self._step_budget.forget_processed(self._queue)
        if stopped:
            self.instances_stopped_by_budget += len(stopped)
            self._step_budget.report(stopped, self.partition_id, self._log)
        if self._admitted:
            for rec in ctx.records:
                if rec.request is not None:
                    self._release(rec.request.request_id)
        if self._limiter is not None:
            monitoring.BACKPRESSURE_LIMIT.labels(label).set(self._limiter.limit)
            monitoring.BACKPRESSURE_IN_FLIGHT.labels(label).set(self._limiter.in_flight)
        if self.exporters is not None:
            self.exporters.notify_committed(last, ctx.records)
        self._after_commit(ctx)

    async def _commit_block(self, block: LogBlock, loop: asyncio.AbstractEventLoop) -> None:
        """Make the round's block committed: durable here alone, or on a Raft majority and then here."""
        assert self.log_storage is not None
        if self.raft is None:
            self.log_storage.append(block)
            await loop.run_in_executor(None, self._flush)
            return
        self._round_block = (block.first_position, block.last_position)
        try:
            try:
                future = self.raft.replicate(_frame(block))
            except ReplicationError as e:
                raise _RoundNotCommitted(f"replication refused: {e}") from e
            try:
                await asyncio.wrap_future(future)
            except ReplicationError as e:
                raise _RoundNotCommitted(f"replication failed: {e}") from e
            await self._wait_durable(block.last_position)
        finally:
            self._round_block = None

    async def _wait_durable(self, position: int) -> None:
        """Until the log here holds ``position`` durably (committed blocks arrive through _on_committed)."""
        assert self.log_storage is not None
        async with self._durable:
            await self._durable.wait_for(lambda: self.log_storage.commit_position >= position or self._closing)

    def _flush(self) -> None:
        """Make the round durable (worker thread), then remember the commit position for recovery."""
        assert self.log_storage is not None
        position = self.log_storage.flush()
        if self._marker is not None:
            self._marker.record(position)

    def _encodable(self, cmd: Record, future: asyncio.Future[Record] | None) -> bool:
        """Whether a command can be written to the log; one that cannot is answered with the reason and dropped."""
        try:
            msgpack.packb(record_to_list(cmd), use_bin_type=True)
        except _UNENCODABLE as e:
            self._log.error("partition %d: dropped a command that cannot be logged: %r", self.partition_id, e)
            if future is not None and not future.done():
                future.set_exception(InvalidDocumentError(f"Expected a command that can be stored, but {e!r}"))
            return False
        return True

    def _process_one(self, ctx: ProcessingContext, txn: Any, cmd: Record) -> None:
        """Process one command in a nested transaction; an unexpected error rolls back only this command."""
        mark = ctx.mark()
        child = self.db.begin(write=True, parent=txn)  # type: ignore[union-attr]
        self.state.bind(child)
        try:
            self.engine.process(ctx, cmd)
            if self._careful:
                # msgpack refuses what it cannot encode (lone surrogates, huge integers, deep nesting)
                msgpack.packb([record_to_list(r) for r in ctx.records[mark[0] :]], use_bin_type=True)
            self.state.flush()
            child.commit()
        except Exception as e:
            self.state.discard()
            child.abort()
            ctx.rollback(mark)
            self.engine.models.clear()
            self._log.exception(
                "partition %d: unexpected error processing %s (key %d, position %d)",
                self.partition_id,
                cmd.describe(),
                cmd.key,
                cmd.position,
                extra={"key": cmd.key, "position": cmd.position},
            )
            self.state.bind(txn)
            ctx.command = cmd
            ctx.reject(RejectionType.PROCESSING_ERROR, f"Unexpected error while processing the command: {e!r}")
        finally:
            self.state.bind(txn)

    def _after_commit(self, ctx: ProcessingContext) -> None:
        for response in ctx.responses:
            fut = self._futures.pop(response.request.request_id, None)
            if fut is not None and not fut.done():
                fut.set_result(response.record)
        effects = ctx.side_effects
        for stream_id, record in effects.job_pushes:
            sink = self.job_stream_sinks.get(stream_id)
            delivered = False
            if sink is not None:
                try:
                    delivered = sink(record)
                except Exception:
                    delivered = False
            if not delivered:
                for key, job in zip(record.value["jobKeys"], record.value["jobs"], strict=True):
                    self.write_internal(ValueType.JOB, JobIntent.YIELD, job, key)
        if effects.jobs_available:
            for listener in self.jobs_available_listeners:
                listener(effects.jobs_available)
        for task in effects.tasks:
            task()

    # -- leader-side checkers (wall clock lives here, never in processors) -----------------------------------

    def _stream_time(self, meta: MetaState) -> int:
        """Processing time now: where a CLOCK PINNED event pinned the clock (the state says), else the leader's
        clock. ``meta`` is bound to a transaction of the state."""
        pinned = meta.pinned_clock()
        return self.clock() if pinned is None else pinned

    async def _check_due(self) -> None:
        self._outbox_sent: dict[tuple[bytes, str], float] = {}
        self._outbox_refused: dict[tuple[bytes, str], int] = {}  # consecutive refusals by the receiving partition
        self._sends: set[asyncio.Task[None]] = set()
        self.engine.services.sender = self._send_command
        while not self._closing:
            await asyncio.sleep(self.config.checker_interval_s)
            if not self.healthy or self.db is None or not self._processing:
                continue
            with self.db.begin() as txn:
                self._clock_view.txn = txn
                try:
                    now = self._stream_time(self._clock_view)
                finally:
                    self._clock_view.txn = None  # type: ignore[assignment]
                self.state.jobs.txn = txn
                self.state.timers.txn = txn
                self.state.messages.txn = txn
                try:
                    timeouts = self.state.jobs.deadlines_before(now, 1000)
                    backoffs = self.state.jobs.backoffs_before(now, 1000)
                    timers = self.state.timers.due_before(now, 1000)
                    expired = self.state.messages.deadlines_before(now, 1000)
                finally:
                    self.state.jobs.txn = None  # type: ignore[assignment]
                    self.state.timers.txn = None  # type: ignore[assignment]
                    self.state.messages.txn = None  # type: ignore[assignment]
            # keys are unique across entities, so (intent, key) names one due command
            due: dict[tuple[int, int], ValueType] = {(int(JobIntent.TIME_OUT), k): ValueType.JOB for _, k in timeouts}
            due.update({(int(JobIntent.RECUR_AFTER_BACKOFF), k): ValueType.JOB for _, k in backoffs})
            due.update({(int(TimerIntent.TRIGGER), k): ValueType.TIMER for _, k in timers})
            due.update({(int(MessageIntent.EXPIRE), k): ValueType.MESSAGE for _, k in expired})
            self._scheduled &= due.keys()
            for intent, key in due.keys() - self._scheduled:
                self.write_internal(due[(intent, key)], intent, {}, key)
            self._scheduled |= due.keys()
            self._check_disk()
            self._distribute_pending()
            self._deliver_outbox()

    # -- commands between partitions for message subscriptions -----------------------------------------------

    _OUTBOX_RESEND_S = 1.0
    # A command the receiving partition refuses (a processing error there) is resent ever less often, up to this.
    _OUTBOX_MAX_RESEND_S = 300.0

    def _deliver_outbox(self) -> None:
        """Send every pending subscription command not sent within the last second (they wait for an answer)."""
        assert self.db is not None
        with self.db.begin() as txn:
            self.state.outbox.txn = txn
            try:
                pending = self.state.outbox.pending()
            finally:
                self.state.outbox.txn = None  # type: ignore[assignment]
        moment = time.monotonic()
        live = set()
        for outbox_key, entry in pending:
            key = (outbox_key, entry["intent"])
            live.add(key)
            refused = self._outbox_refused.get(key, 0)
            interval = min(self._OUTBOX_RESEND_S * 2**refused, self._OUTBOX_MAX_RESEND_S)
            if moment - self._outbox_sent.get(key, -1e9) < interval:
                continue
            self._outbox_sent[key] = moment
            value_type = ValueType[entry["valueType"]]
            intent = INTENTS[value_type][entry["intent"]]
            self._send_command(entry["partitionId"], value_type, intent, entry["value"], -1, outbox=key)
        for key in list(self._outbox_sent):
            if key not in live:
                del self._outbox_sent[key]
                self._outbox_refused.pop(key, None)

    def _send_command(
        self,
        partition_id: int,
        value_type: ValueType,
        intent: int,
        value: dict,
        key: int,
        outbox: tuple[bytes, str] | None = None,
    ) -> None:
        """At most once: to this partition's own inbox, or to another partition's leader (losses are resent).

        ``outbox``: the pending entry this sends, whose resends back off while the receiver refuses it.
        """
        if partition_id == self.partition_id:
            self.write_internal(value_type, intent, dict(value), key)
            return
        if self.inter_partition is None:
            self._log.warning(
                "partition %d: no route to partition %d for %s", self.partition_id, partition_id, value_type
            )
            return
        task = asyncio.get_running_loop().create_task(
            self._send_remote(partition_id, value_type, intent, value, key, outbox)
        )
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send_remote(
        self,
        partition_id: int,
        value_type: ValueType,
        intent: int,
        value: dict,
        key: int,
        outbox: tuple[bytes, str] | None = None,
    ) -> None:
        try:
            reply = await asyncio.wait_for(
                self.inter_partition.execute(partition_id, value_type, intent, value, key, internal=True), 10
            )
        except Exception as e:  # unreachable, no leader, rejected: the sender's outbox resends what matters
            self._log.debug("partition %d: command to partition %d failed: %r", self.partition_id, partition_id, e)
            return
        if outbox is None:
            return
        if reply.record_type == RecordType.COMMAND_REJECTION and reply.rejection_type in (
            RejectionType.PROCESSING_ERROR,
            RejectionType.INVALID_ARGUMENT,
        ):
            refused = self._outbox_refused.get(outbox, 0) + 1
            self._outbox_refused[outbox] = refused
            if refused == 1 or refused % 10 == 0:
                self._log.error(
                    "partition %d: partition %d refused %s.%s (%d times; resent ever less often): %s",
                    self.partition_id,
                    partition_id,
                    value_type.name,
                    reply.intent_enum.name,
                    refused,
                    reply.rejection_reason,
                )
        else:
            self._outbox_refused.pop(outbox, None)

    # -- command distribution to other partitions ------------------------------------------------------------

    def _distribute_pending(self) -> None:
        """Deliver every pending distribution not already on its way; acknowledged ones leave the state."""
        if self.inter_partition is None or self.db is None:
            return
        with self.db.begin() as txn:
            self.state.distributions.txn = txn
            try:
                pending = self.state.distributions.pending()
            finally:
                self.state.distributions.txn = None  # type: ignore[assignment]
        # a deletion follows the deployments made before it to each partition: delivered first, it would find
        # nothing to delete there, and the deployment arriving next would bring the resource back
        oldest_deployment: dict[int, int] = {}
        for key, partition_id, value in pending:
            if value["valueType"] == ValueType.DEPLOYMENT.name:
                oldest_deployment[partition_id] = min(key, oldest_deployment.get(partition_id, key))
        for key, partition_id, value in pending:
            if value["valueType"] == ValueType.RESOURCE_DELETION.name and key > oldest_deployment.get(
                partition_id, key
            ):
                continue
            if (key, partition_id) not in self._distributing:
                self._distributing.add((key, partition_id))
                task = asyncio.get_running_loop().create_task(self._distribute(key, partition_id, value))
                task.add_done_callback(lambda _t, k=(key, partition_id): self._distributing.discard(k))

    async def _distribute(self, key: int, partition_id: int, value: dict) -> None:
        value_type = ValueType[value["valueType"]]
        intent = INTENTS[value_type][value["intent"]]
        try:
            reply = await asyncio.wait_for(
                self.inter_partition.execute(partition_id, value_type, intent, value["commandValue"], internal=True),
                10,
            )
        except Exception as e:  # unreachable, no leader, overloaded: the checker tries again
            self._log.debug(
                "partition %d: distribution %d to partition %d failed: %r", self.partition_id, key, partition_id, e
            )
            await asyncio.sleep(0.5)
            return
        if reply.record_type == RecordType.COMMAND_REJECTION and reply.rejection_type == RejectionType.INVALID_STATE:
            # the target cannot take it yet (a process definition to delete still has instances running there):
            # delivered again until it can
            self._log.debug(
                "partition %d: partition %d cannot take distribution %d yet: %s",
                self.partition_id,
                partition_id,
                key,
                reply.rejection_reason,
            )
            await asyncio.sleep(1.0)
            return
        if reply.record_type == RecordType.COMMAND_REJECTION:
            self._log.error(
                "partition %d: partition %d rejected distribution %d: %s",
                self.partition_id,
                partition_id,
                key,
                reply.rejection_reason,
            )
        self.write_internal(
            ValueType.COMMAND_DISTRIBUTION, CommandDistributionIntent.ACKNOWLEDGE, {"partitionId": partition_id}, key
        )

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
        )
        self._tasks.append(asyncio.create_task(self._run_exporters(), name=f"partition-{self.partition_id}-exporters"))

    async def _run_exporters(self) -> None:
        assert self.exporters is not None and self.log_storage is not None
        await self.exporters.start()
        self.exporters.notify_committed(self.log_storage.commit_position)

    def _read_committed_records(self, from_position: int) -> Iterator[Record]:
        """Committed records from ``from_position`` on (the block holding it may start earlier)."""
        assert self.log_storage is not None
        start = max(from_position, self.log_storage.first_position)
        for block in self.log_storage.read(start):
            yield from decode_block(block.payload)[1]

    def _store_exporter_positions(self) -> dict[str, int] | None:
        """Write changed exporter positions in the round's transaction; returned to travel in the block too.

        In the state they go with every snapshot; in the block they reach the replicas, so any of them, once
        leader, resumes exporting (and bounds compaction) from where this leader's exporters were.
        """
        if self.exporters is None:
            return None
        positions = self.exporters.positions()
        if positions == self._exporter_positions:
            return None
        self.state.meta.set_exporter_positions(positions)
        self._exporter_positions = positions
        return positions

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
        if low and not was_full:
            self._log.warning(
                "partition %d: only %d bytes free under %s (watermark %d): rejecting new commands",
                self.partition_id,
                free,
                self.directory,
                self.config.min_free_disk_bytes,
            )
            if self._records_since_snapshot:
                self.take_snapshot()  # compaction may give space back right away
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
            if time.monotonic() - self._last_snapshot_time >= _DISK_FULL_SNAPSHOT_INTERVAL_S:
                self._persist_exporter_positions()
                self.take_snapshot()  # compacts up to what the exporters acknowledged: space comes back
            return
        if self._records_since_snapshot == 0:
            return
        elapsed = time.monotonic() - self._last_snapshot_time
        if self._records_since_snapshot >= self.config.snapshot_min_records or elapsed >= self.config.snapshot_period_s:
            self.take_snapshot()

    def take_snapshot(self) -> snapshots.Snapshot:
        """Snapshot the state and compact the log below the oldest snapshot still kept."""
        assert self.db is not None and self.log_storage is not None
        snap = snapshots.take(self.db.env, self.directory / "snapshots")
        self._records_since_snapshot = 0
        self._last_snapshot_time = time.monotonic()
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

    # -- Raft: committed blocks, roles and snapshots ---------------------------------------------------------

    def _raft_committed(self, index: int, payload: bytes) -> None:
        """Raft thread: a committed block (every replica, in order); handled on the event loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._on_committed, payload)

    def _on_committed(self, payload: bytes) -> None:
        """Append a committed block to the log here; a follower also applies its events at once."""
        if self._closing or self.log_storage is None or self.db is None:
            return
        first, last, body = _unframe(payload)
        if first == 0:
            waiter = self._barriers.pop(last, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
            return
        storage = self.log_storage
        if last <= storage.last_position:
            return  # already held: Raft re-delivers from its snapshot after a restart
        if first != storage.last_position + 1:
            self._fail_stop(f"committed block {first}..{last} does not follow the log's end {storage.last_position}")
            return
        block = LogBlock(first, last, body)
        storage.append(block)
        self._schedule_flush()
        if self._round_block == (first, last):
            return  # the leader's own round: its transaction holds the effects and commits once this is durable
        if self._round_block is not None:
            self._fail_stop(f"a foreign block {first}..{last} was committed while this leader's round was open")
            return
        result = replay_blocks(
            [block],
            self.db,
            self.state,
            self.engine,
            self.keys,
            applied=self.applied_position,
            processed=self.processed_position,
        )
        self.applied_position, self.processed_position = result.applied_position, result.processed_position
        if result.exporter_positions is not None:
            self._exporter_positions = result.exporter_positions
        self._queue = deque(r for r in (*self._queue, *result.pending) if r.position > self.processed_position)
        self._committed_key_counter = self.keys.counter
        self._records_since_snapshot += result.records_read
        label = str(self.partition_id)
        monitoring.RECORDS_PROCESSED.labels(label).inc(result.records_read)
        monitoring.LOG_POSITION.labels(label).set(last)
        if not self._processing:
            self._maybe_snapshot()

    def _schedule_flush(self) -> None:
        """Group-commit the log here: one fsync covers every block that arrived while the previous one ran."""
        if self._flushing or self._loop is None:
            return
        self._flushing = True

        async def flush() -> None:
            assert self.log_storage is not None
            try:
                while self.log_storage.commit_position < self.log_storage.last_position and not self._closing:
                    await asyncio.get_running_loop().run_in_executor(None, self._flush)
                    async with self._durable:
                        self._durable.notify_all()
            except Exception as e:
                self._fail_stop(f"flushing the log failed: {e!r}")
            finally:
                self._flushing = False

        self._loop.create_task(flush())

    def _raft_role_changed(self, role: RaftRole, term: int, leader: str | None) -> None:
        """Raft thread (or the loop after a failed round): follow the role on the event loop."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def change() -> None:
            if self._closing:
                return
            if self._leadership is not None:
                self._leadership.cancel()
                self._leadership = None
            monitoring.PARTITION_ROLE.labels(str(self.partition_id)).set(0 if role == RaftRole.LEADER else 1)
            if role == RaftRole.LEADER:
                self._leadership = loop.create_task(self._take_leadership(term))
            else:
                loop.create_task(self._follow())

        loop.call_soon_threadsafe(change)

    async def _take_leadership(self, term: int) -> None:
        """Lead only once every block committed before this term is applied here: a barrier proves it."""
        self._log.info("partition %d: elected leader in term %d; catching up", self.partition_id, term)
        while not self._closing and self.raft is not None and self.raft.is_leader:
            barrier = self._next_barrier
            self._next_barrier += 1
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._barriers[barrier] = waiter
            try:
                await asyncio.wrap_future(self.raft.replicate(_BARRIER.pack(0, barrier)))
                await asyncio.wait_for(waiter, 10)
            except (ReplicationError, TimeoutError) as e:
                self._log.info("partition %d: barrier not committed (%s); retrying", self.partition_id, e)
                await asyncio.sleep(0.05)
                continue
            finally:
                self._barriers.pop(barrier, None)
            if self.raft is not None and self.raft.is_leader and not self._closing:
                self._lead()
            return

    def _raft_snapshot(self, index: int) -> bytes:
        """Raft thread, at compaction: what this replica holds durably (its own snapshots and log keep the data)."""
        position = self.log_storage.commit_position if self.log_storage is not None else 0
        return json.dumps({"partition": self.partition_id, "position": position}).encode()

    def _raft_install(self, index: int, data: bytes) -> None:
        """Raft thread: a snapshot from the leader (or our own at restart); ours covers it, or we cannot go on."""
        try:
            position = int(json.loads(data)["position"])
        except (ValueError, KeyError, TypeError):
            position = -1
        held = self.log_storage.last_position if self.log_storage is not None else 0
        if 0 <= position <= held:
            return
        reason = (
            f"this replica holds positions up to {held} but the leader compacted its Raft log past position "
            f"{position}; restore this partition directory from a healthy replica"
        )
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._fail_stop, reason)

    # -- failure ---------------------------------------------------------------------------------------------

    def _fail_stop(self, reason: str) -> None:
        self.healthy = False
        self.failure = f"partition {self.partition_id} stopped: {reason}"
        self._fail_all(PartitionUnavailableError(self.failure))

    def _fail_inbox(self, error: Exception) -> None:
        """Commands not yet written anywhere: failing them is safe, the client may retry on the new leader."""
        while self._inbox:
            _cmd, fut = self._inbox.popleft()
            if fut is not None and not fut.done():
                fut.set_exception(error)

    def _fail_all(self, error: Exception) -> None:
        self._fail_inbox(error)
        for fut in list(self._futures.values()):
            if not fut.done():
                fut.set_exception(error)
        self._futures.clear()


class _RetryCarefully(Exception):
    """A record of the round could not be encoded: the round is rolled back and its commands processed again."""


# What msgpack raises for a value it cannot encode.
_UNENCODABLE = (ValueError, TypeError, OverflowError)


class _RoundNotCommitted(Exception):
    """Raft did not commit the round's block (lost leadership, timeout): its transaction is rolled back."""


# A replicated block is framed with its positions; a barrier (first position 0) carries only a sequence number.
_BARRIER = struct.Struct(">QQ")


def _frame(block: LogBlock) -> bytes:
    return _BARRIER.pack(block.first_position, block.last_position) + block.payload


def _unframe(payload: bytes) -> tuple[int, int, bytes]:
    first, last = _BARRIER.unpack_from(payload)
    return first, last, payload[_BARRIER.size :]


def _free_disk_bytes(directory: Path) -> int:
    return shutil.disk_usage(directory).free


def wipe_runtime(directory: Path) -> None:
    shutil.rmtree(directory / "runtime", ignore_errors=True)
