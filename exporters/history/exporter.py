"""The history exporter: keeps a queryable history (instances, elements, variables, incidents, jobs, user tasks,
decisions, identity) in SQLite or PostgreSQL, for the REST API's searches and the web view.

The partition's event loop only hands records on: ``export`` keeps the ones that change the history in compact list
form and sends them, a few hundred at a time, to a writer process of its own (`exporters.history.writer`). The
writer folds them into batches (`rows.Batch`), writes each batch and the partition's position in one transaction,
and only then acknowledges the position, which this side passes to the director. A process rather than a thread:
folding and the database driver then never take the interpreter lock from the partition's event loop. So:
- a killed broker loses nothing: unacknowledged records are offered again and the ones the database already holds
  (up to its stored position) are skipped, so nothing is written twice; the writer exits with its broker;
- a killed or crashed writer loses nothing either: the records it had not acknowledged are kept here (at most
  ``queueSize``) and sent to the writer started in its place;
- a database outage stalls the writer, which retries with capped back-off; unacknowledged records reach
  ``queueSize`` and ``export`` then waits for room (back-pressure on this exporter only, memory stays bounded) and
  the log is not compacted past the acknowledged position;
- bad input never stops the partition: a value the database rejects (not a connection error) makes the writer write
  that batch again row by row; the rejected rows are left out, logged as errors and counted
  (``weir_history_rows_skipped_total``), everything else is written and the position acknowledged;
- retention: instances that ended more than ``retentionDays`` ago are removed by the writer, checked every
  ``retentionCheckInterval`` seconds against the broker's clock (exporters may read the clock; the engine may not).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
import subprocess
import sys
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgpack
from prometheus_client import Counter, Gauge

from broker.protocol.codec import record_to_list
from broker.protocol.enums import RecordType
from broker.protocol.record import Record, without_password_hashes
from exporters.api import Context, Controller, Exporter, ExporterConfigurationError, RecordFilter, reject_unknown_keys
from exporters.history.backends import HistoryUrlError, check_url
from exporters.history.rows import HISTORY_VALUE_TYPES, changes_history

_DEFAULTS: dict[str, Any] = {
    "url": None,
    "batchSize": 10_000,
    # One transaction a second: hot pages (index leaves, the tables' last pages) are written once per transaction,
    # so fewer, larger transactions write far less (and give the broker's own log fsyncs less to wait behind).
    "flushDelay": 1.0,
    "queueSize": 20_000,
    "retentionDays": 30,
    "retentionCheckInterval": 3600.0,
    "retryMaxDelay": 5.0,
    # Below this much free disk where the SQLite file lives, writing waits; None: the broker's own watermark.
    "minFreeDiskBytes": None,
}
WRITE_FAILURES = Counter(
    "weir_history_write_failures_total",
    "Failed history database writes and connections (each is retried; the exporter's position waits)",
    ["partition"],
)
DISK_FULL = Gauge(
    "weir_history_disk_full",
    "1 while the history writer holds its writes because the database's disk is below the watermark",
    ["partition"],
)
DATABASE_REPLACED = Counter(
    "weir_history_database_replaced_total",
    "Times the history database file was deleted or replaced while in use (rebuilt from the log)",
    ["partition"],
)
ROWS_SKIPPED = Counter(
    "weir_history_rows_skipped_total",
    "History rows the database rejected as data and that were left out (see the ERROR log for each)",
    ["partition", "table"],
)
# Records go to the writer in messages of up to this many, or after this long when fewer are waiting: one send (a
# system call) per helping instead of one per record.
_SEND_RECORDS = 500
_SEND_DELAY_S = 0.02
_RECORDS_HEADER = b"\x93" + msgpack.packb("records")  # a msgpack array of 3, then its first item
# The writer's own code lives beside this package; the writer process must import the same code.
_CODE_ROOT = str(Path(__file__).resolve().parents[2])


class HistoryWriterError(Exception):
    """The writer process could not open the database, or exited."""


class _WriterProcess(asyncio.Protocol):
    """The broker's end of one writer process: its socket, its messages and its exit."""

    def __init__(self, exporter: HistoryExporter, process: subprocess.Popen[bytes]) -> None:
        self.exporter = exporter
        self.process = process
        self.transport: asyncio.Transport | None = None
        self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[int] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self.failure: HistoryWriterError | None = None

    def send(self, *message: Any) -> None:
        self._write(msgpack.packb(list(message), use_bin_type=True))

    def send_records(self, now_ms: int, packed_records: bytes) -> None:
        """Send ``["records", now_ms, records]`` with the records already packed (a msgpack array of 3 items)."""
        self._write(_RECORDS_HEADER + msgpack.packb(now_ms) + packed_records)

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        self._unpacker.feed(data)
        for message in self._unpacker:
            kind = message[0]
            if kind == "ack":
                self.exporter._acknowledge(message[1], self)
            elif kind == "log":
                self.exporter.log.log(message[1], "%s", message[2])
            elif kind == "write_failure":
                WRITE_FAILURES.labels(str(self.exporter.partition_id)).inc()
            elif kind == "replaced":
                self.exporter._database_replaced(message[1], self)
            elif kind == "disk_full":
                DISK_FULL.labels(str(self.exporter.partition_id)).set(message[1])
            elif kind == "skipped":
                ROWS_SKIPPED.labels(str(self.exporter.partition_id), message[1]).inc()
            elif kind == "ready":
                if not self.ready.done():
                    self.ready.set_result(message[1])
            elif kind == "failed":
                self._fail(f"the history database could not be opened: {message[1]}")
            elif kind == "closed" and not self.closed.done():
                self.closed.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail("the history writer process exited")
        if not self.closed.done():
            self.closed.set_result(None)
        self.exporter._writer_lost(self)

    def _fail(self, message: str) -> None:
        if self.failure is None:
            self.failure = HistoryWriterError(message)
        if not self.ready.done():
            self.ready.set_exception(self.failure)

    async def stop(self, timeout_s: float) -> None:
        """Ask the writer to write what it has and exit; kill it if it has not after ``timeout_s``."""
        self.send("close")
        try:
            await asyncio.wait_for(asyncio.shield(self.closed), timeout_s)
        except TimeoutError:
            self.exporter.log.warning("history writer still busy after %.0fs at close; killing it", timeout_s)
        finally:
            if self.process.poll() is None and not self.closed.done():
                self.process.kill()
            if self.transport is not None:
                self.transport.close()
            await asyncio.get_running_loop().run_in_executor(None, self.process.wait)


class HistoryExporter(Exporter):
    """Sends history records to a writer process (see the module docstring)."""

    def configure(self, context: Context) -> None:
        args = context.configuration
        reject_unknown_keys(args, _DEFAULTS)
        a = {**_DEFAULTS, **args}
        url = a["url"]
        if not isinstance(url, str) or not url:
            raise ExporterConfigurationError("url: required, e.g. sqlite:///var/weir/history.db or postgresql://…")
        try:
            check_url(url)
        except HistoryUrlError as e:
            raise ExporterConfigurationError(f"url: {e}") from None
        self.url = url
        self.batch_size = _number(a, "batchSize", int, 1)
        self.flush_delay_s = _number(a, "flushDelay", float, 0)
        self.queue_size = _number(a, "queueSize", int, 1)
        self.retention_days = _number(a, "retentionDays", float, 0)
        self.retention_interval_s = _number(a, "retentionCheckInterval", float, 0.01)
        self.retry_max_s = _number(a, "retryMaxDelay", float, 0.01)
        watermark = a["minFreeDiskBytes"]
        self.min_free_disk_bytes = (
            context.min_free_disk_bytes if watermark is None else _number(a, "minFreeDiskBytes", int, 0)
        )
        self.partition_id = context.partition_id
        self.log = context.logger
        self._clock = context.clock
        context.set_filter(RecordFilter(frozenset({RecordType.EVENT}), HISTORY_VALUE_TYPES))
        self._writer: _WriterProcess | None = None
        self._closed = False
        self._room = asyncio.Event()
        # Records handed on and not yet acknowledged by the writer: the ones still to send, as lists, and the ones
        # sent, kept as the packed helpings they went in (last position, records, bytes) to send again to a writer
        # started in a dead one's place. Bytes, not the records' values: the garbage collector never walks them.
        self._outbox: list[list[Any]] = []
        self._sent: deque[tuple[int, int, bytes]] = deque()
        self._in_flight = 0
        self._send_handle: asyncio.TimerHandle | None = None
        self._send_delay_s = min(_SEND_DELAY_S, self.flush_delay_s)
        self._stored_position = 0  # the database's position at open: records up to it are already written
        self._last_seen = 0  # the last position offered to export
        self._last_enqueued = 0  # the last position handed to the writer
        self._acknowledged = 0  # the last position acknowledged to the director
        self._generation = 0  # counts database rebuilds: a record waiting for room across one is offered again

    @property
    def in_flight(self) -> int:
        """Records handed to the writer and not yet acknowledged (at most ``queueSize``)."""
        return self._in_flight

    async def open(self, controller: Controller) -> None:
        self.controller = controller
        self._closed = False
        self._room = asyncio.Event()
        self._outbox.clear()
        self._sent.clear()
        self._in_flight = 0
        await self._start_writer()
        self._last_seen = self._last_enqueued = self._acknowledged = self._stored_position
        exported = controller.last_exported_position
        if self._stored_position == 0 < exported:
            # A new, empty database where records were exported: it was deleted or replaced while the broker was down.
            DATABASE_REPLACED.labels(str(self.partition_id)).inc()
            self.log.error(
                "the history database %s is empty, but records up to position %d were exported to it (deleted or "
                "replaced?); exporting again from the start of the log",
                self.url,
                exported,
            )
            controller.export_again_from(self._stored_position)

    def export(self, record: Record) -> Any:
        position = record.position
        if position <= self._stored_position:
            self.controller.update_last_exported_position(position)  # written before the last restart
            return None
        self._last_seen = position
        if not changes_history(record):
            # Nothing to write: acknowledged at once when nothing is in flight, else with the batch before it.
            if self._acknowledged >= self._last_enqueued:
                self._acknowledged = position
                self.controller.update_last_exported_position(position)
            return None
        writer = self._writer
        if writer is None or writer.failure is not None:
            return self._restart_writer(record)
        if self._in_flight >= self.queue_size:
            return self._wait_for_room(record)
        self._enqueue(record)
        return None

    async def close(self) -> None:
        self._closed = True
        writer, self._writer = self._writer, None
        if writer is None:
            return
        self._send(writer)
        # Acknowledgements that arrive while the writer drains still count.
        await writer.stop(timeout_s=8.0)  # within the director's close timeout (10 s)

    # -- handing records on --------------------------------------------------------------------------------------

    def _enqueue(self, record: Record) -> None:
        self._last_enqueued = record.position
        self._in_flight += 1
        outbox = self._outbox
        item = record_to_list(record)
        # a password hash never leaves the broker: the history has no use for it
        item[7] = without_password_hashes(record.value_type, record.value)
        outbox.append(item)
        if len(outbox) >= _SEND_RECORDS:
            self._send(self._writer)
        elif self._send_handle is None:
            self._send_handle = asyncio.get_running_loop().call_later(self._send_delay_s, self._send_due)

    def _send_due(self) -> None:
        self._send_handle = None
        self._send(self._writer)

    def _send(self, writer: _WriterProcess | None) -> None:
        if self._send_handle is not None:
            self._send_handle.cancel()
            self._send_handle = None
        outbox = self._outbox
        if outbox and writer is not None:
            packed = msgpack.packb(outbox, use_bin_type=True)
            self._sent.append((outbox[-1][0], len(outbox), packed))
            self._outbox = []
            writer.send_records(self._clock(), packed)

    async def _wait_for_room(self, record: Record) -> None:
        generation = self._generation
        while self._in_flight >= self.queue_size:
            writer = self._writer
            if writer is None or writer.failure is not None:
                return await self._restart_writer(record)
            self._room.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room.wait(), 0.1)
            if generation != self._generation:
                return None  # the database was rebuilt meanwhile: this record is offered again in order
        self._enqueue(record)

    def _acknowledge(self, position: int, writer: _WriterProcess) -> None:
        if writer is not self._writer and self._writer is not None:
            return  # a replaced writer's last word
        sent = self._sent
        while sent and sent[0][0] <= position:
            self._in_flight -= sent.popleft()[1]
        if self._in_flight < self.queue_size:
            self._room.set()
        if position >= self._last_enqueued:
            position = self._last_seen  # records after the batch's last one that needed no writing
        if position > self._acknowledged:
            self._acknowledged = position
            self.controller.update_last_exported_position(position)

    def _database_replaced(self, position: int, writer: _WriterProcess) -> None:
        """The writer found its SQLite file deleted or replaced and made a new one holding records up to
        ``position``: drop what is in flight and have the director offer every record after it again."""
        if writer is not self._writer:
            return
        DATABASE_REPLACED.labels(str(self.partition_id)).inc()
        self.log.warning(
            "rebuilding the history database %s from position %d of the log (the writer found it deleted or replaced)",
            self.url,
            position + 1,
        )
        if self._send_handle is not None:
            self._send_handle.cancel()
            self._send_handle = None
        self._generation += 1
        self._outbox = []
        self._sent.clear()
        self._in_flight = 0
        self._stored_position = position
        self._last_seen = self._last_enqueued = position
        self._room.set()
        writer.send("rewound")
        self.controller.export_again_from(position)

    # -- the writer process --------------------------------------------------------------------------------------

    async def _start_writer(self) -> None:
        """Start a writer process and wait until it has opened the database; sets the stored position."""
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_CODE_ROOT, env.get("PYTHONPATH")) if p)
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "exporters.history.writer", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
                # A process group of its own: Ctrl-C in a terminal (SIGINT to the foreground group) must not reach
                # it while it is still starting, before it can ignore the signal; the broker closes it at shutdown,
                # and it exits by itself when the broker's end of the socket closes (also after a kill -9).
                process_group=0,
            )
        finally:
            theirs.close()
        writer = _WriterProcess(self, process)
        try:
            await loop.create_unix_connection(lambda: writer, sock=ours)
            writer.send(
                "open",
                {
                    "url": self.url,
                    "partition_id": self.partition_id,
                    "batch_size": self.batch_size,
                    "flush_delay_s": self.flush_delay_s,
                    "retention_days": self.retention_days,
                    "retention_interval_s": self.retention_interval_s,
                    "retry_max_s": self.retry_max_s,
                    "now_ms": self._clock(),
                    "min_free_disk_bytes": self.min_free_disk_bytes,
                },
            )
            self._stored_position = await writer.ready
        except BaseException:
            await writer.stop(timeout_s=5.0)
            raise
        self._writer = writer

    def _writer_lost(self, writer: _WriterProcess) -> None:
        self._room.set()
        if writer is self._writer:
            # Replace it even if no more records come to export: the ones it held must still be written.
            self.controller.schedule_task(0.0, self._replace_lost_writer)

    async def _replace_lost_writer(self, delay_s: float = 0.05) -> None:
        writer = self._writer
        if self._closed or (writer is not None and writer.failure is None):
            return  # closed, or replaced meanwhile by an export
        try:
            await self._restart_writer(None)
        except Exception:
            retry = min(self.retry_max_s, delay_s * 2)
            self.controller.schedule_task(delay_s, functools.partial(self._replace_lost_writer, retry))
            raise

    async def _restart_writer(self, record: Record | None) -> None:
        """Replace a writer that exited: send it what the old one had not acknowledged, then export ``record``."""
        old, self._writer = self._writer, None
        if old is not None:
            pending = self._in_flight
            self.log.warning("%s; starting another, with the %d records it had not written", old.failure, pending)
            await old.stop(timeout_s=1.0)
        await self._start_writer()
        writer = self._writer
        assert writer is not None
        sent = self._sent
        while sent and sent[0][0] <= self._stored_position:
            self._in_flight -= sent.popleft()[1]
        for _, _, packed in sent:  # in order; the writer skips what its database already holds
            writer.send_records(self._clock(), packed)
        self._send(writer)
        if record is not None:
            result = self.export(record)
            if result is not None:
                await result


def _number(a: Mapping[str, Any], key: str, kind: type, minimum: float) -> Any:
    value = a[key]
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        ok = ok and isinstance(value, int)
    if not ok or value < minimum:
        raise ExporterConfigurationError(f"{key}: expected a number of at least {minimum}, got {value!r}")
    return kind(value)
