"""Command intake: what a partition's leader checks before a command may wait for a round.

Known command, a value that can be logged, a healthy leader, disk space, room in the inbox, and (for user commands)
admission control; then the command waits in the core's inbox and its future in the partition's table of requests.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from broker import monitoring
from broker.engine.scheduled import FINISHING_WORK, Command
from broker.protocol.documents import InvalidDocumentError, check_command_value
from broker.protocol.enums import INTENTS, RecordType, ValueType
from broker.protocol.record import Record, RequestMetadata
from broker.stream.config import PartitionConfig
from broker.stream.core import StreamCore
from broker.stream.errors import BackpressureError, NotLeaderError, PartitionUnavailableError
from broker.stream.supervision import TaskSupervisor

# Every (value type, intent) pair a command may have: what :meth:`CommandIntake.execute` accepts.
_KNOWN_COMMANDS: Final = frozenset((value_type, int(intent)) for value_type, enum in INTENTS.items() for intent in enum)


class CommandIntake:
    """The partition's door for commands (a part of :class:`~broker.stream.partition.Partition`)."""

    config: PartitionConfig
    partition_id: int
    directory: Path
    core: StreamCore | None
    healthy: bool
    closing: bool
    failure: str | None
    disk_full: bool
    monotonic: Callable[[], float]
    _processing: bool
    _loop: asyncio.AbstractEventLoop | None
    _limiter: Any
    _admitted: dict[int, float]
    _futures: dict[int, asyncio.Future[Record]]
    _next_request_id: int
    _wake: asyncio.Event
    _last_snapshot_time: float
    _supervisor: TaskSupervisor

    if TYPE_CHECKING:  # provided by the partition

        @property
        def role(self) -> str: ...

    # -- command intake --------------------------------------------------------------------------------------

    def execute(
        self,
        value_type: ValueType,
        intent: int,
        value: dict,
        key: int = -1,
        *,
        internal: bool = False,
        authorization: dict[str, Any] | None = None,
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
            authorization=authorization,
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
