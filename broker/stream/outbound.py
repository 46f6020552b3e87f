"""Scheduled work on the leader: due commands written here, commands sent to other partitions' leaders.

Which work is due and when to resend is the engine's question (:class:`~broker.engine.scheduled.ScheduledWork`); this
part of the partition only asks on a timer, writes what is due, sends what must go elsewhere and hands the outcome
back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from broker.engine.engine import Engine
from broker.engine.scheduled import Command, ScheduledWork, Send, SendOutcome
from broker.protocol.enums import ValueType
from broker.state.db import StateDb
from broker.state.repositories import PartitionState
from broker.stream.config import PartitionConfig
from broker.stream.core import StreamCore

T = TypeVar("T")


class Outbound:
    """The partition's scheduled work (a part of :class:`~broker.stream.partition.Partition`)."""

    config: PartitionConfig
    partition_id: int
    engine: Engine
    db: StateDb | None
    core: StreamCore | None
    healthy: bool
    closing: bool
    clock: Callable[[], int]
    monotonic: Callable[[], float]
    scheduled: ScheduledWork
    inter_partition: Any
    _view: PartitionState
    _processing: bool
    _sends: set[asyncio.Task[None]]
    _log: logging.LoggerAdapter[Any]

    if TYPE_CHECKING:  # provided by the partition's other parts

        def write_internal(self, value_type: ValueType, intent: int, value: dict, key: int) -> None: ...

        def _write_commands(self, commands: list[Command]) -> None: ...

        def _check_disk(self) -> None: ...

    # -- scheduled work: due commands and commands for other partitions ---------------------------------------

    async def _check_due(self) -> None:
        self.engine.services.sender = self._send_command
        while not self.closing:
            await asyncio.sleep(self.config.checker_interval_s)
            if not self.healthy or self.db is None or not self._processing or self.core is None:
                continue
            due, sends = self._at_leader_time(
                lambda view, now: (
                    self.scheduled.due(view, now),
                    self.scheduled.sends(view, int(self.monotonic() * 1000)),
                )
            )
            self._write_commands(due)
            self._check_disk()
            for send in sends:
                self._dispatch(send)
            for alert in self.scheduled.take_alerts():
                self._log.error("partition %d: %s", self.partition_id, alert)

    def idle_for(self, span_ms: int) -> bool:
        """Whether this leader has nothing to send now and no scheduled work falls due within ``span_ms`` of its
        clock: with no client calls either, it appends nothing in that span (a simulation's test for quiet)."""
        if self._sends or self.db is None:
            return not self._sends
        return self._at_leader_time(lambda view, now: self.scheduled.idle_until(view, now + span_ms))

    def overdue_by(self, ms: int) -> bool:
        """Whether scheduled work fell due more than ``ms`` ago and is still waiting (a simulation's liveness check:
        a working leader writes due work within a checker interval)."""
        return self.db is not None and self._at_leader_time(lambda view, now: self.scheduled.overdue(view, now - ms))

    def _at_leader_time(self, ask: Callable[[PartitionState, int], T]) -> T:
        """``ask`` on a read of the state, at this leader's time (the pinned clock, or its own)."""
        assert self.db is not None
        view = self._view
        with self.db.begin() as txn:
            view.bind(txn)
            try:
                pinned = view.meta.pinned_clock()
                return ask(view, self.clock() if pinned is None else pinned)
            finally:
                view.bind(None)

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
