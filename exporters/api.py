"""The exporter SPI: how a plugin receives a partition's committed records and reports its progress.

An exporter lives on a partition's leader and goes through a fixed lifecycle:

- ``configure(context)`` once, at load time: read ``context.configuration``, raise
  `ExporterConfigurationError` with a message an operator can act on, and optionally narrow what it
  receives with ``context.set_filter(...)``. Nothing is opened yet, so a bad configuration stops the broker
  at start-up.
- ``open(controller)`` when exporting starts: open connections and files, schedule timed work.
- ``export(record)`` for every accepted record, in position order. Raising means "not exported": the same
  record is offered again after a back-off, never skipped. A record may also be offered again after a restart
  or a leader change (delivery is at least once), so exporters must be idempotent.
- ``close()`` when the partition stops leading or the broker stops.

``open``, ``export``, ``close`` and scheduled tasks may be plain functions or coroutine functions; the
director awaits what they return. They all run on the broker's event loop, one call at a time per exporter,
so an exporter needs no locks but must not block: slow I/O belongs in a thread (``loop.run_in_executor``) or
an async client.

Progress is acknowledged with ``controller.update_last_exported_position(position)``: the log is never
compacted past the lowest acknowledged position, and after a restart exporting resumes right after it.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker.protocol.enums import RecordType, ValueType
from broker.protocol.record import Record

ScheduledCallable = Callable[[], Awaitable[None] | None]
Clock = Callable[[], int]


class ExporterConfigurationError(ValueError):
    """An exporter's configuration is invalid; the message names the exporter id and the offending key."""


def broker_version() -> str:
    """The version in every exported record's ``brokerVersion`` (and in Elasticsearch index names)."""
    try:
        return importlib.metadata.version("weir")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


def value_type_arg_name(value_type: ValueType) -> str:
    """A value type's configuration switch, camelCase as in Zeebe (``processInstance``)."""
    head, *rest = value_type.name.lower().split("_")
    return head + "".join(part.capitalize() for part in rest)


RECORD_TYPE_ARGS: Mapping[str, RecordType] = {
    "event": RecordType.EVENT,
    "command": RecordType.COMMAND,
    "rejection": RecordType.COMMAND_REJECTION,
}


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """Which records an exporter receives, decided by the director before the exporter sees them.

    Records that are filtered out cost the exporter nothing and still count as handled, so an exporter that
    only wants a few value types does not hold back log compaction.
    """

    record_types: frozenset[RecordType] = frozenset(RecordType)
    value_types: frozenset[ValueType] = frozenset(ValueType)

    def accepts(self, record: Record) -> bool:
        return record.record_type in self.record_types and record.value_type in self.value_types

    @classmethod
    def from_switches(
        cls,
        args: Mapping[str, Any],
        *,
        record_type_defaults: Mapping[str, bool],
        value_types: Iterable[ValueType],
        value_type_default: bool = True,
    ) -> RecordFilter:
        """Build a filter from boolean switches: ``event``/``command``/``rejection`` and one per value type.

        Switches missing from ``args`` take their defaults; a switch that is not a boolean raises
        `ExporterConfigurationError`.
        """
        defaults = record_type_defaults.items()
        record_types = {RECORD_TYPE_ARGS[name] for name, default in defaults if _switch(args, name, default)}
        selected = {vt for vt in value_types if _switch(args, value_type_arg_name(vt), value_type_default)}
        return cls(frozenset(record_types), frozenset(selected))


def _switch(args: Mapping[str, Any], name: str, default: bool) -> bool:
    value = args.get(name, default)
    if not isinstance(value, bool):
        raise ExporterConfigurationError(f"{name}: expected true or false, got {value!r}")
    return value


class ScheduledTask(Protocol):
    """A handle on work scheduled with `Controller.schedule_task`."""

    def cancel(self) -> None:
        """Do not run the task (no effect once it ran)."""
        ...


class Controller(Protocol):
    """What an exporter may ask of the director that runs it."""

    @property
    def last_exported_position(self) -> int:
        """The position acknowledged so far (0: nothing yet); exporting resumed right after it."""
        ...

    def update_last_exported_position(self, position: int) -> None:
        """Acknowledge every record up to ``position`` as exported (durably, as far as the exporter can tell).

        - Lower positions than the current one are ignored (acknowledgement never goes back).
        - A position beyond the last record offered to the exporter raises ValueError.
        """
        ...

    def export_again_from(self, position: int) -> None:
        """Offer again every record after ``position`` still in the log (the exporter's store lost them), in order.

        The acknowledged position does not go back; records the log no longer holds are reported as lost.
        """
        ...

    def schedule_task(self, delay_s: float, task: ScheduledCallable) -> ScheduledTask:
        """Run ``task`` once after ``delay_s`` seconds, between exports (never concurrently with one).

        An exception from the task is logged and counted as a failure; for periodic work, reschedule inside
        the task. Tasks do not run while exporting is paused.
        """
        ...


@dataclass(slots=True)
class Context:
    """What an exporter learns at configure time."""

    exporter_id: str
    partition_id: int
    configuration: Mapping[str, Any]
    logger: logging.Logger
    clock: Clock
    # The broker's disk watermark: an exporter writing to local disk stops writing below this much free space.
    min_free_disk_bytes: int = 0
    broker_version: str = field(default_factory=broker_version)
    record_filter: RecordFilter = field(default_factory=RecordFilter)

    def set_filter(self, record_filter: RecordFilter) -> None:
        """Receive only the records ``record_filter`` accepts (default: every record)."""
        self.record_filter = record_filter


class Exporter:
    """Base class of exporters; subclasses implement `export` and usually `open` and `close`.

    Loaded by import path (``broker.exporters.<id>.className``), constructed without arguments.
    """

    controller: Controller

    def configure(self, context: Context) -> None:
        """Validate ``context.configuration``; raise `ExporterConfigurationError` on anything wrong."""

    def open(self, controller: Controller) -> Awaitable[None] | None:
        """Start exporting; keep the controller to acknowledge positions and schedule tasks."""
        self.controller = controller
        return None

    def export(self, record: Record) -> Awaitable[None] | None:
        """Export one record; raise to have it offered again later."""
        raise NotImplementedError

    def close(self) -> Awaitable[None] | None:
        """Release connections and files; records not yet acknowledged will be offered again after restart."""
        return None


def reject_unknown_keys(args: Mapping[str, Any], known: Iterable[str]) -> None:
    """Fail fast on misspelt configuration keys instead of silently using defaults."""
    allowed = set(known)
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise ExporterConfigurationError(
            f"unknown configuration key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(allowed))}"
        )
