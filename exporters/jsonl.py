"""The JSON-lines file exporter: every record as one line of Zeebe's record JSON, one file per partition.

Configured by id like any exporter (``weir start`` exports to the SQL history by default); handy to watch the raw
records without running any server (``tail -f data/exports/partition-1.jsonl``).

- The active file is ``<directory>/partition-<id>.jsonl``; when it passes ``maxFileSize`` bytes it is
  rotated to ``partition-<id>.jsonl.1`` (older files shift to ``.2``, ``.3``…); ``maxFiles`` files are kept.
- Lines are written through a buffer, flushed to the operating system every ``flushDelay`` seconds and at
  close; the position is acknowledged after each flush (``fsync: true`` also forces them to disk first).
- Re-export after a restart does not duplicate lines: at open the exporter reads the last position written and
  skips records up to it. A line torn by a crash is cut off.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from broker.protocol.enums import ValueType
from broker.protocol.record import Record
from exporters.api import (
    Context,
    Controller,
    Exporter,
    ExporterConfigurationError,
    RecordFilter,
    ScheduledTask,
    reject_unknown_keys,
    value_type_arg_name,
)
from exporters.record_json import dumps, record_document

_DEFAULTS: dict[str, Any] = {
    "directory": "data/exports",
    "maxFileSize": 64 * 1024 * 1024,
    "maxFiles": 5,
    "flushDelay": 1.0,
    "fsync": False,
}
_RECORD_TYPE_DEFAULTS = {"event": True, "command": True, "rejection": True}


class JsonLinesExporter(Exporter):
    """Appends records to rotated JSON-lines files (see the module docstring)."""

    def configure(self, context: Context) -> None:
        args = context.configuration
        value_type_args = [value_type_arg_name(vt) for vt in ValueType]
        reject_unknown_keys(args, [*_DEFAULTS, *_RECORD_TYPE_DEFAULTS, *value_type_args])
        a = {**_DEFAULTS, **args}
        if not isinstance(a["directory"], str) or not a["directory"]:
            raise ExporterConfigurationError(f"directory: expected a path, got {a['directory']!r}")
        self.directory = Path(a["directory"])
        self.max_file_size = _positive_int(a, "maxFileSize", 1024)
        self.max_files = _positive_int(a, "maxFiles", 1)
        delay = a["flushDelay"]
        if not isinstance(delay, int | float) or isinstance(delay, bool) or delay <= 0:
            raise ExporterConfigurationError(f"flushDelay: expected a positive number of seconds, got {delay!r}")
        self.flush_delay_s = float(delay)
        if not isinstance(a["fsync"], bool):
            raise ExporterConfigurationError(f"fsync: expected true or false, got {a['fsync']!r}")
        self.fsync = a["fsync"]
        context.set_filter(
            RecordFilter.from_switches(args, record_type_defaults=_RECORD_TYPE_DEFAULTS, value_types=ValueType)
        )
        self.path = self.directory / f"partition-{context.partition_id}.jsonl"
        self._version = context.broker_version
        self._file: IO[str] | None = None
        self._size = 0
        self._written_through = 0  # the last position in the files
        self._unflushed_through = 0  # the last position written since the last flush
        self._timer: ScheduledTask | None = None

    def open(self, controller: Controller) -> None:
        self.controller = controller
        self.directory.mkdir(parents=True, exist_ok=True)
        self._written_through = max(controller.last_exported_position, self._recover_last_position())
        self._file = self.path.open("a", encoding="utf-8")
        self._size = self.path.stat().st_size
        self._timer = controller.schedule_task(self.flush_delay_s, self._flush_on_timer)

    def export(self, record: Record) -> None:
        assert self._file is not None
        if record.position > self._written_through:
            line = dumps(record_document(record, self._version)) + "\n"
            self._file.write(line)
            self._size += len(line.encode("utf-8")) if not line.isascii() else len(line)
            self._written_through = record.position
        self._unflushed_through = record.position
        if self._size >= self.max_file_size:
            self._rotate()

    def flush(self) -> None:
        """Hand buffered lines to the OS (and the disk, with fsync), then acknowledge them."""
        if self._file is None or self._unflushed_through == 0:
            return
        self._file.flush()
        if self.fsync:
            os.fsync(self._file.fileno())
        position, self._unflushed_through = self._unflushed_through, 0
        self.controller.update_last_exported_position(position)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._file is not None:
            self.flush()
            self._file.close()
            self._file = None

    # -- internals -------------------------------------------------------------------------------------

    def _flush_on_timer(self) -> None:
        try:
            self.flush()
        finally:
            self._timer = self.controller.schedule_task(self.flush_delay_s, self._flush_on_timer)

    def rotated_path(self, n: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{n}")

    def _rotate(self) -> None:
        assert self._file is not None
        self.flush()
        self._file.close()
        oldest = self.max_files - 1
        if oldest == 0:
            self.path.unlink()
        else:
            self.rotated_path(oldest).unlink(missing_ok=True)
            for n in range(oldest - 1, 0, -1):
                if self.rotated_path(n).exists():
                    self.rotated_path(n).rename(self.rotated_path(n + 1))
            self.path.rename(self.rotated_path(1))
        self._file = self.path.open("a", encoding="utf-8")
        self._size = 0

    def _recover_last_position(self) -> int:
        """The position of the newest file's last complete line (0: none); a torn last line is cut off."""
        for path in (self.path, self.rotated_path(1)):
            if not path.exists() or path.stat().st_size == 0:
                continue
            with path.open("rb+") as f:
                data = _tail(f)
                if not data.endswith(b"\n"):
                    cut = data.rfind(b"\n") + 1
                    f.truncate(f.seek(0, os.SEEK_END) - (len(data) - cut))
                    data = data[:cut]
            lines = data.rstrip(b"\n").rsplit(b"\n", 1)
            if lines and lines[-1]:
                return _position_of(lines[-1])
        return 0


def _tail(f: IO[bytes], size: int = 1 << 20) -> bytes:
    end = f.seek(0, os.SEEK_END)
    f.seek(max(0, end - size))
    return f.read()


def _position_of(line: bytes) -> int:
    try:
        return int(json.loads(line)["position"])
    except (ValueError, KeyError, TypeError):
        return 0


def _positive_int(a: Mapping[str, Any], key: str, minimum: int) -> int:
    value = a[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ExporterConfigurationError(f"{key}: expected an integer of at least {minimum}, got {value!r}")
    return value
