"""The stream processor as a step: synchronous, deterministic, and ignorant of sockets, asyncio and replication.

Given the commands waiting (follow-ups already in the log, then client commands) and the time, :meth:`StreamCore.
process_round` processes one round inside one LMDB write transaction and returns a :class:`Round`: the block of
records to append, the responses, and the side effects to run after commit. The caller makes the block durable (a
file log, Raft, or a simulated replica set — the core does not know which) and then calls :meth:`StreamCore.
complete` (the transaction commits; responses may be sent) or :meth:`StreamCore.abort` (everything the round did is
undone, as if it never ran).

Same state + same commands + same time → same records, responses and effects: processors read time only from the
command's timestamp, which is stamped here from the ``now`` the caller passes (or the pinned clock in the state).

The pipeline of one round::

    take queued follow-ups and client commands (fairly: see FairTake), stamp client commands with ``now``
      └─ process each in a nested transaction (an unexpected error rolls back and rejects only that command)
    encode the round's records into one block            ─▶ caller: append + make durable (commit seam)
      └─ complete(): positions into the same transaction ─▶ commit LMDB ─▶ caller: responses, side effects
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import msgpack

from broker.engine.context import CommandRefused, ProcessingContext, Response, SideEffects
from broker.engine.engine import Engine
from broker.log import LogBlock
from broker.logs import PartitionLog
from broker.protocol.codec import encode_block, record_to_list
from broker.protocol.documents import InvalidDocumentError
from broker.protocol.enums import RejectionType, ValueType
from broker.protocol.keys import KeyGenerator
from broker.protocol.record import Record
from broker.state.db import StateDb
from broker.state.repositories import PartitionState
from broker.stream.replay import ReplayResult, replay_blocks
from broker.stream.scheduling import FairTake
from broker.stream.step_budget import DEFAULT_MAX_CHAIN_INSTANCES, DEFAULT_MAX_STEPS_PER_INSTANCE, StepBudget

log = logging.getLogger("weir.partition")

# What msgpack raises for a value it cannot encode.
_UNENCODABLE: Final = (ValueError, TypeError, OverflowError)


@dataclass(slots=True)
class CoreConfig:
    partition_id: int = 1
    max_records_per_round: int = 4000
    max_commands_per_round: int = 500
    # Element activations one process instance may make in one chain of follow-ups (see step_budget.py).
    max_steps_per_instance: int = DEFAULT_MAX_STEPS_PER_INSTANCE
    # Process instances one chain of signal broadcasts may start (see step_budget.py).
    max_instances_per_signal_chain: int = DEFAULT_MAX_CHAIN_INSTANCES
    # Process instances one chain may start by recursion (see step_budget.py).
    max_recursive_instances_per_chain: int = DEFAULT_MAX_CHAIN_INSTANCES


@dataclass(slots=True)
class Refusal:
    """A client command dropped before processing (it cannot be written to the log), with the reason."""

    request_id: int
    error: Exception


@dataclass(slots=True)
class Round:
    """A processed round whose block is not durable yet; hand it to complete() or abort() exactly once."""

    block: LogBlock
    records: list[Record]
    responses: list[Response]
    side_effects: SideEffects
    commands: int
    # Client commands dropped before processing, to be answered with their error (not part of the block).
    refusals: list[Refusal]
    # Element activations the step budget stopped with an incident (to be logged and counted).
    stopped: list[Record]
    _processed: int
    _txn: Any
    _queue_before: list[Record]
    _inbox_taken: list[Record]


@dataclass(slots=True)
class Idle:
    """Nothing to append this round: only refusals (if any) to answer."""

    refusals: list[Refusal] = field(default_factory=list)


class UnencodableRound(Exception):
    """A record of the round could not be encoded: the round was undone and is processed again, command by command,
    so only the command at fault is rejected."""


class StreamCore:
    """Processes rounds of one partition's commands over its state; see the module docstring."""

    def __init__(
        self,
        db: StateDb,
        state: PartitionState,
        engine: Engine,
        keys: KeyGenerator,
        *,
        config: CoreConfig,
        applied_position: int,
        processed_position: int,
    ) -> None:
        self.db = db
        self.state = state
        self.engine = engine
        self.keys = keys
        self.config = config
        self.partition_id = config.partition_id
        self._log = PartitionLog(log, config.partition_id)
        # Follow-up commands already in the log, not processed yet (in log order).
        self.queue: deque[Record] = deque()
        # Client and internal commands not yet in the log (in arrival order); a command with a request id expects
        # a response.
        self.inbox: deque[Record] = deque()
        self.applied_position = applied_position
        self.processed_position = processed_position
        self._committed_key_counter = keys.counter
        self._careful = False
        self.step_budget = StepBudget(
            config.max_steps_per_instance,
            config.max_instances_per_signal_chain,
            config.max_recursive_instances_per_chain,
            step=engine.STEP_COMMAND,
        )
        self._fair = FairTake(config.max_commands_per_round)
        # The round processed but neither completed nor aborted yet (its transaction is open).
        self._open: Round | None = None

    # -- processing ------------------------------------------------------------------------------------------

    @property
    def has_work(self) -> bool:
        return bool(self.queue or self.inbox)

    @property
    def round_open(self) -> bool:
        """Whether a round was processed and waits for its block to commit (its state change is not visible yet)."""
        return self._open is not None

    def stream_time(self, clock_now: int) -> int:
        """Processing time: where a CLOCK PINNED event pinned the clock (state bound to a transaction), else the
        caller's clock."""
        pinned = self.state.meta.pinned_clock()
        return clock_now if pinned is None else pinned

    def process_round(
        self, clock_now: int, next_position: int, exporter_positions: dict[str, int] | None = None
    ) -> Round | Idle:
        """Process one round of waiting commands; ``next_position`` is the log position its first record takes.

        ``exporter_positions``: changed exporter progress to record in this round's transaction and block (replicas
        learn it from the block). Raises :class:`UnencodableRound` after undoing the round when a record cannot be
        encoded (call again: the next round checks each command on its own).
        """
        txn = self.db.begin(write=True)
        self.state.bind(txn)
        ctx = ProcessingContext(
            state=self.state,
            keys=self.keys,
            partition_id=self.partition_id,
            apply_event=self.engine.appliers.apply,  # what engine.apply_event calls, without the hop per event
            next_position=next_position,
        )
        processed = self.processed_position
        commands = 0
        stopped: list[Record] = []
        refusals: list[Refusal] = []
        inbox_taken: list[Record] = []
        queue_before = list(self.queue)
        queue, inbox = self.queue, self.inbox
        max_records, max_commands = self.config.max_records_per_round, self.config.max_commands_per_round
        fair = self._fair

        def admit(now: int) -> Record | None:
            """Give the next client command its position in the log, behind the commands already queued (None: it
            cannot be logged and was refused)."""
            cmd = inbox.popleft()
            inbox_taken.append(cmd)
            if self._careful and not self._encodable(cmd, refusals):
                return None
            cmd.timestamp = now
            ctx.append_client_command(cmd)
            return cmd

        try:
            now = self.stream_time(clock_now)
            fair.forget_until(processed)
            for _ in range(fair.admissions(len(queue), len(inbox))):
                if (admitted := admit(now)) is not None:
                    queue.append(admitted)
                    fair.admitted(admitted)
            while len(ctx.records) < max_records and commands < max_commands:
                if queue:
                    cmd = queue.popleft()
                    if cmd.request is not None:  # a client command: is its requester waiting here?
                        fair.taken(cmd)
                elif inbox:
                    # Nothing queued: the next client command is next in the log too, so it is processed at once.
                    admitted = admit(now)
                    if admitted is None:
                        continue
                    cmd = admitted
                else:
                    break
                ctx.over_step_budget = self.step_budget.charge(cmd)
                written = len(ctx.records)
                self._process_one(ctx, txn, cmd)
                if ctx.over_step_budget is not None:
                    ctx.over_step_budget = None
                    if any(r.value_type == ValueType.INCIDENT for r in ctx.records[written:]):
                        stopped.append(cmd)
                processed = cmd.position
                commands += 1
                queue.extend(ctx.followups)
                ctx.followups.clear()
            if not ctx.records:
                self.state.bind(None)
                txn.abort()
                return Idle(refusals)
            if exporter_positions is not None:
                self.state.meta.set_exporter_positions(exporter_positions)
            try:
                payload = encode_block(processed, ctx.records, exporter_positions)
            except _UNENCODABLE as e:
                if self._careful:
                    raise
                raise UnencodableRound(repr(e)) from e
        except BaseException as e:
            self._undo(txn, queue_before)
            if isinstance(e, UnencodableRound):
                self._log.error(
                    "partition %d: a record of this round cannot be encoded (%s); processing its commands again one "
                    "by one",
                    self.partition_id,
                    e,
                )
                self.inbox.extendleft(reversed(inbox_taken))
                self._careful = True
            raise
        self.state.bind(None)
        block = LogBlock(ctx.records[0].position, ctx.records[-1].position, payload)
        self._open = Round(
            block,
            ctx.records,
            ctx.responses,
            ctx.side_effects,
            commands,
            refusals,
            stopped,
            processed,
            txn,
            queue_before,
            inbox_taken,
        )
        return self._open

    def complete(self, done: Round) -> None:
        """The round's block is durable (committed): commit its state change with the positions it reached."""
        self._open = None
        # Only the positions are left to write (process_round flushed every command's changes): binding the meta
        # repository alone spares rebinding all of them, once per round.
        meta = self.state.meta
        meta.txn = done._txn
        try:
            meta.set_positions(done.block.last_position, done._processed, self.keys.counter)
            done._txn.commit()
        except BaseException:
            self._undo(done._txn, done._queue_before)
            raise
        finally:
            meta.txn = None  # type: ignore[assignment]
        self._careful = False
        self._committed_key_counter = self.keys.counter
        self.applied_position = done.block.last_position
        self.processed_position = done._processed
        self.step_budget.forget_processed(self.queue)

    def abort(self, done: Round) -> None:
        """The round's block did not commit: undo it (the caller answers its requests; its follow-ups never were)."""
        self._open = None
        self.state.bind(done._txn)
        try:
            self._undo(done._txn, done._queue_before)
        finally:
            self.state.bind(None)

    def _undo(self, txn: Any, queue_before: list[Record]) -> None:
        self.state.discard()
        txn.abort()
        self.engine.models.clear()
        self.keys.reset(self._committed_key_counter)
        self.step_budget.clear()
        self.queue = deque(queue_before)
        self.state.bind(None)

    def _process_one(self, ctx: ProcessingContext, txn: Any, cmd: Record) -> None:
        """Process one command in a nested transaction; an unexpected error rolls back only this command."""
        mark = ctx.mark()
        child = self.db.begin(write=True, parent=txn)
        self.state.bind(child)
        try:
            self.engine.process(ctx, cmd)
            if self._careful:
                # msgpack refuses what it cannot encode (lone surrogates, huge integers, deep nesting)
                msgpack.packb([record_to_list(r) for r in ctx.records[mark[0] :]], use_bin_type=True)
            self.state.flush()
            child.commit()
        except CommandRefused as refused:
            self._reject_undone(ctx, txn, child, mark, cmd, refused.rejection_type, refused.reason)
        except Exception as e:
            self._log.exception(
                "partition %d: unexpected error processing %s (key %d, position %d)",
                self.partition_id,
                cmd.describe(),
                cmd.key,
                cmd.position,
                extra={"key": cmd.key, "position": cmd.position},
            )
            reason = f"Unexpected error while processing the command: {e!r}"
            self._reject_undone(ctx, txn, child, mark, cmd, RejectionType.PROCESSING_ERROR, reason)
        finally:
            self.state.bind(txn)

    def _reject_undone(
        self,
        ctx: ProcessingContext,
        txn: Any,
        child: Any,
        mark: Any,
        cmd: Record,
        rejection: RejectionType,
        reason: str,
    ) -> None:
        """Undo everything ``cmd`` wrote (state, records, cached models), then reject it alone with ``reason``."""
        self.state.discard()
        child.abort()
        ctx.rollback(mark)
        self.engine.models.clear()
        self.state.bind(txn)
        ctx.command = cmd
        ctx.reject(rejection, reason)

    def _encodable(self, cmd: Record, refusals: list[Refusal]) -> bool:
        """Whether a command can be written to the log; one that cannot is refused with the reason."""
        try:
            msgpack.packb(record_to_list(cmd), use_bin_type=True)
        except _UNENCODABLE as e:
            self._log.error("partition %d: dropped a command that cannot be logged: %r", self.partition_id, e)
            if cmd.request is not None:
                error = InvalidDocumentError(f"Expected a command that can be stored, but {e!r}")
                refusals.append(Refusal(cmd.request.request_id, error))
            return False
        return True

    # -- applying what others processed ----------------------------------------------------------------------

    def replay(self, blocks: Iterable[LogBlock]) -> ReplayResult:
        """Apply the events of committed blocks (recovery, or a follower); unprocessed commands become the queue."""
        result = replay_blocks(
            blocks,
            self.db,
            self.state,
            self.engine,
            self.keys,
            applied=self.applied_position,
            processed=self.processed_position,
        )
        self.applied_position, self.processed_position = result.applied_position, result.processed_position
        self.queue = deque(r for r in (*self.queue, *result.pending) if r.position > self.processed_position)
        self._committed_key_counter = self.keys.counter
        return result

    def drop_open_round(self) -> None:
        """The process is going away mid-round (a simulated crash): release the round's transaction unwritten."""
        if self._open is not None:
            done, self._open = self._open, None
            self.state.discard()
            done._txn.abort()
            self.state.bind(None)

    def forget_chains(self) -> None:
        """Leadership changed: step-budget chains begun under this term are not tracked further."""
        self.step_budget.clear()

    def take_inbox(self) -> list[Record]:
        """Empty the inbox (leadership lost): its commands were never written anywhere."""
        taken = list(self.inbox)
        self.inbox.clear()
        return taken
