"""What a processor works with: the command at hand, the state, and writers for its results.

The result of processing is a value — the records appended to the round, the responses and the post-commit side
effects — collected here, not callbacks fired midway. Events are applied to state the moment they are written, through
the same appliers replay uses, so the next step of processing sees its own effects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from broker.protocol.enums import ProcessInstanceIntent, RecordType, RejectionType, ValueType
from broker.protocol.keys import KeyGenerator
from broker.protocol.record import Record, RequestMetadata
from broker.protocol.values import ProcessInstanceValue
from broker.state.repositories import PartitionState


@dataclass(slots=True)
class Response:
    """A reply to a client request, sent only after the records behind it are durable."""

    request: RequestMetadata
    record: Record


@dataclass(slots=True)
class SideEffects:
    """Post-commit work, named so the stream processor can route it (notifications, pushes, awaited results)."""

    jobs_available: set[str] = field(default_factory=set)
    job_pushes: list[tuple[int, Record]] = field(default_factory=list)
    tasks: list[Callable[[], None]] = field(default_factory=list)


EventApplier = Callable[[PartitionState, Record], None]

_NO_REJECTION: Final = RejectionType.NULL_VAL

DEFAULT_MAX_BATCH_BYTES = 4 * 1024 * 1024 - 64 * 1024
"""What the jobs of one activation may take, rendered: the default max message size less the response's framing."""


class CommandRefused(Exception):
    """Raised by a processor that finds, part-way through writing, that its command must be rejected (Zeebe's
    expected processing errors): the stream processor undoes everything the command wrote and rejects it with this
    type and reason, without logging it as a failure."""

    def __init__(self, rejection_type: RejectionType, reason: str) -> None:
        super().__init__(reason)
        self.rejection_type = rejection_type
        self.reason = reason


class ProcessingContext:
    """Collects one round's records; hands out positions, keys and the command's timestamp as "now"."""

    def __init__(
        self,
        *,
        state: PartitionState,
        keys: KeyGenerator,
        partition_id: int,
        apply_event: EventApplier,
        next_position: int,
    ) -> None:
        self.state = state
        self.keys = keys
        self.partition_id = partition_id
        self._apply_event = apply_event
        self.next_position = next_position
        self.records: list[Record] = []
        self.followups: list[Record] = []
        self.responses: list[Response] = []
        self.side_effects = SideEffects()
        self.command: Record | None = None
        # The command's caller and what it may do, resolved once per command (behaviors.caller_access).
        self.caller_access: tuple[Record | None, Any] | None = None
        self.services: Any = None  # engine services (models, expressions, job streams), set by the engine
        # Values derived from state that processors may reuse within the round (e.g. a multi-instance body's input
        # collection); cleared on rollback, since they may describe state the rollback undid.
        self.memo: dict[Any, Any] = {}
        # What one job activation may carry to a worker (set by the engine from the max message size).
        self.max_batch_bytes = DEFAULT_MAX_BATCH_BYTES
        # Set by the stream processor for one command: the element activation at hand exceeds the step budget of its
        # process instance and must stop with an incident carrying this message instead of running.
        self.over_step_budget: str | None = None
        # The dict form of each process-instance value written this round: an element's lifecycle events all carry
        # the same value, so they share one dict (record values are never changed once written).
        self._value_dicts: dict[ProcessInstanceValue, dict] = {}

    # -- the command at hand ---------------------------------------------------------------------------------

    @property
    def now(self) -> int:
        """Processing time: the current command's timestamp, never the wall clock."""
        assert self.command is not None
        return self.command.timestamp

    def _make(self, record_type: RecordType, value_type: ValueType, intent: int, key: int, value: dict) -> Record:
        cmd = self.command
        assert cmd is not None
        # positional: a record is made for every event and command written, and keywords cost more to match
        rec = Record(
            self.next_position,
            key,
            record_type,
            value_type,
            int(intent),
            cmd.timestamp,
            value,
            cmd.position,
            _NO_REJECTION,
            "",
            None,
            self.partition_id,
        )
        self.next_position += 1
        self.records.append(rec)
        return rec

    # -- writers ---------------------------------------------------------------------------------------------

    def append_client_command(self, command: Record) -> Record:
        """Give an incoming command its position in this round."""
        command.position = self.next_position
        self.next_position += 1
        self.records.append(command)
        return command

    def event(self, value_type: ValueType, intent: int, key: int, value: dict) -> Record:
        """Write an event and apply it to state at once."""
        rec = self._make(RecordType.EVENT, value_type, intent, key, value)
        self._apply_event(self.state, rec)
        return rec

    def follow_up(self, value_type: ValueType, intent: int, key: int, value: dict) -> Record:
        """Write a command this partition processes next (in this round when the budget allows)."""
        rec = self._make(RecordType.COMMAND, value_type, intent, key, value)
        self.followups.append(rec)
        return rec

    def instance_event(
        self, intent: ProcessInstanceIntent, key: int, value: ProcessInstanceValue, as_dict: dict | None = None
    ) -> Record:
        """Write a PROCESS_INSTANCE event from its typed value (its applier reads that instead of decoding);
        ``as_dict``: the value as a dict when the caller has it already (the command's)."""
        rec = self._make(RecordType.EVENT, ValueType.PROCESS_INSTANCE, intent, key, self._dict_of(value, as_dict))
        rec.typed = value
        self._apply_event(self.state, rec)
        return rec

    def instance_command(self, intent: ProcessInstanceIntent, key: int, value: ProcessInstanceValue) -> Record:
        """Write a PROCESS_INSTANCE follow-up command from its typed value (its processor reads that instead of
        decoding)."""
        rec = self._make(RecordType.COMMAND, ValueType.PROCESS_INSTANCE, intent, key, self._dict_of(value))
        rec.typed = value
        self.followups.append(rec)
        return rec

    def typed_event(self, value_type: ValueType, intent: int, key: int, value: Any) -> Record:
        """Write an event from a typed record value of ``broker.protocol.entity_values`` (a JobValue…): the record
        carries its ``to_dict()``, and its applier reads the typed value instead of decoding."""
        rec = self._make(RecordType.EVENT, value_type, intent, key, value.to_dict())
        rec.typed = value
        self._apply_event(self.state, rec)
        return rec

    def _dict_of(self, value: ProcessInstanceValue, as_dict: dict | None = None) -> dict:
        if as_dict is None:
            as_dict = self._value_dicts.get(value)
            if as_dict is None:
                as_dict = self._value_dicts[value] = value.to_dict()
        return as_dict

    def reject(self, rejection_type: RejectionType, reason: str) -> Record:
        """Reject the current command; its requester (if any) gets the rejection as response."""
        cmd = self.command
        assert cmd is not None
        rec = self._make(RecordType.COMMAND_REJECTION, cmd.value_type, cmd.intent, cmd.key, cmd.value)
        rec.rejection_type = rejection_type
        rec.rejection_reason = reason
        if cmd.request is not None:
            self.responses.append(Response(cmd.request, rec))
        return rec

    def respond(self, record: Record, request: RequestMetadata | None = None) -> None:
        """Answer the current command's requester (or an earlier request, e.g. an awaited result)."""
        req = request if request is not None else (self.command.request if self.command else None)
        if req is not None:
            self.responses.append(Response(req, record))

    # -- rollback of one command's effects -------------------------------------------------------------------

    def mark(self) -> tuple[int, int, int, int, int, int, int]:
        se = self.side_effects
        return (
            len(self.records),
            len(self.followups),
            len(self.responses),
            self.next_position,
            self.keys.counter,
            len(se.job_pushes),
            len(se.tasks),
        )

    def rollback(self, mark: tuple[int, int, int, int, int, int, int]) -> None:
        n_rec, n_fu, n_resp, pos, keys, n_push, n_tasks = mark
        self.memo.clear()
        del self.records[n_rec:]
        del self.followups[n_fu:]
        del self.responses[n_resp:]
        self.next_position = pos
        self.keys.reset(keys)
        del self.side_effects.job_pushes[n_push:]
        del self.side_effects.tasks[n_tasks:]
