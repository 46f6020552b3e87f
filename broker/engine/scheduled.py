"""The engine's scheduled work: what falls due at a time, and what must reach other partitions until answered.

The stream layer knows records and rounds, never BPMN. It asks the engine, at a time of its choosing:

- :meth:`ScheduledWork.due` — the commands due now for this partition: timers to trigger, job deadlines and
  back-offs that ran out, messages whose time to live ended. Each is handed out once while it stays due; the stream
  layer writes it as a command and the processor decides, from state and the command's timestamp, what happens.
- :meth:`ScheduledWork.sends` — the commands that must reach other partitions until they are acknowledged: command
  distributions (deployments, deletions, clock pins) and the message-subscription outbox. Each :class:`Send` is sent
  by the stream layer and its outcome handed back through :meth:`ScheduledWork.replied`, which returns the command
  (if any) this partition writes about it, and schedules the retry.
- :meth:`ScheduledWork.undelivered` — the commands that give back jobs pushed to a stream that could not take them.

Nothing here reads a clock: ``now`` comes from the caller (the leader's clock, or a simulated one), so a simulation
replays the same schedule from the same inputs. What is held in memory (what was handed out, when to retry) is the
leader's bookkeeping only; durable truth is the state, so a new leader rebuilds it by asking again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

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
from broker.protocol.record import Record
from broker.state.repositories import PartitionState

# How many due entries of each kind one call hands out (the rest come at the next call).
DUE_BATCH: Final = 1000

# Commands that finish work already admitted (as Zeebe's limiter lets job completions and failures through): refusing
# them under load would only leave jobs to time out and be worked again, adding load instead of shedding it.
FINISHING_WORK: Final[frozenset[tuple[ValueType, int]]] = frozenset(
    (ValueType.JOB, int(intent)) for intent in (JobIntent.COMPLETE, JobIntent.FAIL, JobIntent.THROW_ERROR)
)


@dataclass(frozen=True, slots=True)
class Command:
    """A command the engine wants written (no response is expected)."""

    value_type: ValueType
    intent: int
    key: int
    value: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Send:
    """A command for another partition's leader; ``ident`` names the pending entry it delivers ("once": a send
    whose outcome does not matter, as the outbox resends what must arrive)."""

    kind: Literal["outbox", "distribution", "once"]
    ident: tuple[Any, ...]
    partition_id: int
    command: Command


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """What became of a :class:`Send`: the receiver's answer, or None when none came (unreachable, no leader)."""

    reply: Record | None
    error: str = ""


# Outbox entries (message subscription commands) are resent every second until answered; one the receiver refuses
# (a processing error there) is resent ever less often, up to five minutes.
OUTBOX_RESEND_MS: Final = 1_000
OUTBOX_MAX_RESEND_MS: Final = 300_000
# A distribution that found no leader waits half a second; one the target cannot take yet (INVALID_STATE) a second.
DISTRIBUTION_RETRY_MS: Final = 500
DISTRIBUTION_NOT_YET_MS: Final = 1_000
_IDENTITY_TYPES: Final = frozenset(
    t.name
    for t in (
        ValueType.USER,
        ValueType.GROUP,
        ValueType.ROLE,
        ValueType.TENANT,
        ValueType.MAPPING_RULE,
        ValueType.AUTHORIZATION,
    )
)


class ScheduledWork:
    """The leader's view of scheduled work of one partition (see the module docstring)."""

    def __init__(self, partition_id: int) -> None:
        self.partition_id = partition_id
        self._handed_out: set[tuple[int, int]] = set()
        self._outbox_sent: dict[tuple[Any, ...], int] = {}
        self._outbox_refused: dict[tuple[Any, ...], int] = {}
        self._in_flight: set[tuple[Any, ...]] = set()
        self._retry_at: dict[tuple[Any, ...], int] = {}
        # Refusals worth an operator's attention, since the last call of take_alerts().
        self._alerts: list[str] = []

    def reset(self) -> None:
        """Forget the bookkeeping (leadership lost): a later term asks the state again and resends everything."""
        self._handed_out.clear()
        self._outbox_sent.clear()
        self._outbox_refused.clear()
        self._in_flight.clear()
        self._retry_at.clear()

    # -- due commands for this partition ---------------------------------------------------------------------

    def due(self, state: PartitionState, now: int) -> list[Command]:
        """Commands due at ``now`` not handed out yet (``state`` bound to a read transaction)."""
        due: dict[tuple[int, int], ValueType] = {}
        for _, key in state.jobs.deadlines_before(now, DUE_BATCH):
            due[(int(JobIntent.TIME_OUT), key)] = ValueType.JOB
        for _, key in state.jobs.backoffs_before(now, DUE_BATCH):
            due[(int(JobIntent.RECUR_AFTER_BACKOFF), key)] = ValueType.JOB
        for _, key in state.timers.due_before(now, DUE_BATCH):
            due[(int(TimerIntent.TRIGGER), key)] = ValueType.TIMER
        for _, key in state.messages.deadlines_before(now, DUE_BATCH):
            due[(int(MessageIntent.EXPIRE), key)] = ValueType.MESSAGE
        # keys are unique across entities, so (intent, key) names one due command; one no longer due is forgotten,
        # so it is handed out again if it falls due again (a job timed out twice)
        self._handed_out &= due.keys()
        fresh = [Command(due[entry], entry[0], entry[1]) for entry in due if entry not in self._handed_out]
        self._handed_out |= due.keys()
        return fresh

    def overdue(self, state: PartitionState, before: int) -> bool:
        """Whether some timer, job deadline or back-off, or message time to live fell due before ``before`` and is
        still waiting (a pure read, as :meth:`idle_until`)."""
        return bool(
            state.jobs.deadlines_before(before, 1)
            or state.jobs.backoffs_before(before, 1)
            or state.timers.due_before(before, 1)
            or state.messages.deadlines_before(before, 1)
        )

    def idle_until(self, state: PartitionState, horizon: int) -> bool:
        """Whether nothing falls due before ``horizon`` and nothing waits to reach another partition.

        A pure read (no bookkeeping changes): it lets a simulation tell a partition that will stay quiet from one
        that only waits for its next timer, deadline or resend.
        """
        return not (self.overdue(state, horizon) or state.outbox.pending(1) or state.distributions.pending(1))

    # -- commands for other partitions -----------------------------------------------------------------------

    def sends(self, state: PartitionState, now: int) -> list[Send]:
        """What to send at ``now`` (``state`` bound to a read transaction); each send's outcome goes to replied()."""
        return self._outbox_sends(state, now) + self._distribution_sends(state, now)

    def _outbox_sends(self, state: PartitionState, now: int) -> list[Send]:
        out: list[Send] = []
        live: set[tuple[Any, ...]] = set()
        for outbox_key, entry in state.outbox.pending():
            ident = ("outbox", outbox_key, entry["intent"])
            live.add(ident)
            refused = self._outbox_refused.get(ident, 0)
            interval = min(OUTBOX_RESEND_MS * 2**refused, OUTBOX_MAX_RESEND_MS)
            sent = self._outbox_sent.get(ident)
            if sent is not None and now - sent < interval:
                continue
            self._outbox_sent[ident] = now
            value_type = ValueType[entry["valueType"]]
            intent = INTENTS[value_type][entry["intent"]]
            out.append(
                Send("outbox", ident, entry["partitionId"], Command(value_type, int(intent), -1, entry["value"]))
            )
        for ident in [i for i in self._outbox_sent if i not in live]:
            del self._outbox_sent[ident]
            self._outbox_refused.pop(ident, None)
        return out

    def _distribution_sends(self, state: PartitionState, now: int) -> list[Send]:
        pending = state.distributions.pending()
        # a deletion follows the deployments made before it to each partition: delivered first, it would find
        # nothing to delete there, and the deployment arriving next would bring the resource back
        oldest_deployment: dict[int, int] = {}
        for key, partition_id, value in pending:
            if value["valueType"] == ValueType.DEPLOYMENT.name:
                oldest_deployment[partition_id] = min(key, oldest_deployment.get(partition_id, key))
        # identity changes reach each partition one at a time, in the order they were made: a revocation must never
        # arrive before the grant it revokes
        oldest_identity: dict[int, int] = {}
        for key, partition_id, value in pending:
            if value["valueType"] in _IDENTITY_TYPES:
                oldest_identity[partition_id] = min(key, oldest_identity.get(partition_id, key))
        out: list[Send] = []
        for key, partition_id, value in pending:
            if value["valueType"] == ValueType.RESOURCE_DELETION.name and key > oldest_deployment.get(
                partition_id, key
            ):
                continue
            if value["valueType"] in _IDENTITY_TYPES and key > oldest_identity[partition_id]:
                continue
            ident = ("distribution", key, partition_id)
            if ident in self._in_flight or now < self._retry_at.get(ident, now):
                continue
            self._in_flight.add(ident)
            self._retry_at.pop(ident, None)
            value_type = ValueType[value["valueType"]]
            intent = INTENTS[value_type][value["intent"]]
            out.append(
                Send("distribution", ident, partition_id, Command(value_type, int(intent), -1, value["commandValue"]))
            )
        return out

    def replied(self, send: Send, outcome: SendOutcome, now: int) -> list[Command]:
        """Take the outcome of ``send``; returns the commands this partition writes about it (acknowledgements)."""
        reply = outcome.reply
        if send.kind == "once":
            return []
        rejection = (
            reply.rejection_type if reply is not None and reply.record_type == RecordType.COMMAND_REJECTION else None
        )
        if send.kind == "outbox":
            if rejection in (RejectionType.PROCESSING_ERROR, RejectionType.INVALID_ARGUMENT):
                refused = self._outbox_refused.get(send.ident, 0) + 1
                self._outbox_refused[send.ident] = refused
                if refused == 1 or refused % 10 == 0:
                    assert reply is not None
                    self._alerts.append(
                        f"partition {send.partition_id} refused {send.command.value_type.name}."
                        f"{reply.intent_enum.name} ({refused} times; resent ever less often): {reply.rejection_reason}"
                    )
            elif reply is not None:
                self._outbox_refused.pop(send.ident, None)
            return []
        self._in_flight.discard(send.ident)
        if reply is None:  # unreachable, no leader, overloaded: sent again after a pause
            self._retry_at[send.ident] = now + DISTRIBUTION_RETRY_MS
            return []
        if rejection == RejectionType.INVALID_STATE:
            # the target cannot take it yet (a process definition to delete still has instances running there):
            # delivered again until it can
            self._retry_at[send.ident] = now + DISTRIBUTION_NOT_YET_MS
            return []
        if rejection is not None:
            self._alerts.append(
                f"partition {send.partition_id} rejected distribution {send.ident[1]}: {reply.rejection_reason}"
            )
        key = send.ident[1]
        ack = {"partitionId": send.partition_id}
        return [Command(ValueType.COMMAND_DISTRIBUTION, int(CommandDistributionIntent.ACKNOWLEDGE), key, ack)]

    def take_alerts(self) -> list[str]:
        """Refusals by other partitions since the last call, for the leader's log."""
        alerts, self._alerts = self._alerts, []
        return alerts

    # -- jobs pushed to streams ------------------------------------------------------------------------------

    @staticmethod
    def undelivered(push: Record) -> list[Command]:
        """The commands that make the jobs of an undeliverable push activatable again (yielded)."""
        return [
            Command(ValueType.JOB, int(JobIntent.YIELD), key, job)
            for key, job in zip(push.value["jobKeys"], push.value["jobs"], strict=True)
        ]
