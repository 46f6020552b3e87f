"""The simulation's exporter: every record a partition's leader exports lands in an in-memory sink.

Exporters run exactly as on a broker (the director loads this class by name, filters, acknowledges); the sink keeps
what each partition exported, so the checkers can hold it against the committed log: each committed record exported,
in order, none skipped (a record may be offered again after a leader change: delivery is at least once).
"""

from __future__ import annotations

from collections import defaultdict

from broker.protocol.record import Record
from exporters.api import Context, Controller, Exporter

# Exported records by sink name and partition: (position, record), in the order they were offered.
SINKS: dict[str, dict[int, list[tuple[int, Record]]]] = defaultdict(lambda: defaultdict(list))


class MemoryExporter(Exporter):
    """Appends each record to ``SINKS[args.sink][partition]`` and acknowledges it at once."""

    def configure(self, context: Context) -> None:
        self.sink = str(context.configuration.get("sink", "default"))
        self.partition_id = context.partition_id

    def open(self, controller: Controller) -> None:
        self.controller = controller

    def export(self, record: Record) -> None:
        SINKS[self.sink][self.partition_id].append((record.position, record))
        self.controller.update_last_exported_position(record.position)

    def close(self) -> None:
        return
