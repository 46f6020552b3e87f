"""Test doubles for the exporter SPI: a MemoryLog-backed record source and an in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from broker.log import LogBlock, MemoryLog
from broker.protocol.codec import decode_block, encode_block
from broker.protocol.enums import JobIntent, ProcessInstanceIntent, RecordType, ValueType
from broker.protocol.record import Record
from exporters.api import Context, Controller, Exporter, RecordFilter


def make_record(
    position: int, value_type: ValueType = ValueType.JOB, record_type: RecordType = RecordType.EVENT
) -> Record:
    intent = JobIntent.CREATED if value_type == ValueType.JOB else ProcessInstanceIntent.ELEMENT_ACTIVATED
    return Record(
        position=position,
        key=(1 << 51) + position,
        record_type=record_type,
        value_type=value_type,
        intent=int(intent),
        timestamp=1_700_000_000_000 + position,
        value={"processInstanceKey": (1 << 51) + 1, "elementId": f"e{position}"},
    )


class RecordLog:
    """A MemoryLog holding records in blocks, and the reader function the director gets."""

    def __init__(self) -> None:
        self.log = MemoryLog()
        self.reads: list[int] = []

    def append(self, records: list[Record]) -> int:
        """Append one block and commit it; returns the commit position."""
        self.log.append(LogBlock(records[0].position, records[-1].position, encode_block(0, records)))
        return self.log.flush()

    def append_uncommitted(self, records: list[Record]) -> None:
        self.log.append(LogBlock(records[0].position, records[-1].position, encode_block(0, records)))

    def read_records(self, from_position: int) -> Iterator[Record]:
        self.reads.append(from_position)
        for block in self.log.read(from_position):
            yield from decode_block(block.payload)[1]


class MemoryExporter(Exporter):
    """Keeps what it is given; behaviour set by args.

    - ``failAt``: position whose export raises ``failTimes`` times before it succeeds.
    - ``ackEach``: acknowledge every record immediately (default true); otherwise only ``flush()`` acknowledges.
    - ``flushEvery``: seconds between scheduled flushes (which acknowledge everything exported).
    - ``valueTypes``/``recordTypes``: names for a filter.
    """

    def configure(self, context: Context) -> None:
        args = context.configuration
        if "bad" in args:
            raise ValueError("the 'bad' argument is not allowed")
        self.fail_at = args.get("failAt", -1)
        self.fail_times = args.get("failTimes", 0)
        self.ack_each = args.get("ackEach", True)
        self.flush_every = args.get("flushEvery")
        self.exported: list[int] = []
        self.attempts: list[tuple[int, float]] = []
        self.flush_times: list[float] = []
        self.opened = False
        self.closed = False
        if "valueTypes" in args or "recordTypes" in args:
            context.set_filter(
                RecordFilter(
                    frozenset(RecordType[n] for n in args.get("recordTypes", [t.name for t in RecordType])),
                    frozenset(ValueType[n] for n in args.get("valueTypes", [t.name for t in ValueType])),
                )
            )

    async def open(self, controller: Controller) -> None:
        self.controller = controller
        self.opened = True
        if self.flush_every:
            controller.schedule_task(self.flush_every, self.flush)

    def export(self, record: Record) -> None:
        import time

        self.attempts.append((record.position, time.monotonic()))
        if record.position == self.fail_at and self.fail_times > 0:
            self.fail_times -= 1
            raise ConnectionError(f"target unavailable at position {record.position}")
        self.exported.append(record.position)
        if self.ack_each:
            self.controller.update_last_exported_position(record.position)

    def flush(self) -> None:
        import time

        self.flush_times.append(time.monotonic())
        if self.exported:
            self.controller.update_last_exported_position(self.exported[-1])
        if self.flush_every:
            self.controller.schedule_task(self.flush_every, self.flush)

    def close(self) -> None:
        self.closed = True


MEMORY = f"{MemoryExporter.__module__}.MemoryExporter"


def config(**args: Any) -> dict[str, Any]:
    return {"className": MEMORY, "args": args}
