"""The history exporter: keeps a queryable history (instances, elements, variables, incidents, jobs, user tasks,
decisions) in SQLite or PostgreSQL, for the REST API's searches and the web view.

The partition's event loop only enqueues: ``export`` puts the record on a bounded queue and returns. A writer
thread of its own folds queued records into batches (`rows.Batch`), writes each batch and the partition's position
in one transaction, and only then acknowledges the position to the director. So:
- a killed broker loses nothing: unacknowledged records are offered again and the ones the database already holds
  (up to its stored position) are skipped, so nothing is written twice;
- a database outage stalls the writer, which retries with capped back-off; the queue fills up and ``export`` then
  waits for room (back-pressure on this exporter only, memory stays bounded) and the log is not compacted past the
  acknowledged position;
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
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter

from broker.protocol.enums import RecordType
from broker.protocol.record import Record
from exporters.api import Context, Controller, Exporter, ExporterConfigurationError, RecordFilter, reject_unknown_keys
from exporters.history.backends import Backend, HistoryUrlError, check_url, open_backend
from exporters.history.rows import HISTORY_VALUE_TYPES, Batch, changes_history

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
}
_DAY_MS = 86_400_000
WRITE_FAILURES = Counter(
    "weir_history_write_failures_total",
    "Failed history database writes and connections (each is retried; the exporter's position waits)",
    ["partition"],
)
ROWS_SKIPPED = Counter(
    "weir_history_rows_skipped_total",
    "History rows the database rejected as data and that were left out (see the ERROR log for each)",
    ["partition", "table"],
)
# How long the writer lets records gather between two helpings while it fills a batch.
_GATHER_S = 0.05


class _Handoff:
    """The bounded hand-off from the event loop to the writer thread.

    One producer, one consumer: deque appends and pops are atomic, so a put costs the event loop an append (no
    lock); the writer sleeps on an event when there is nothing to take.
    """

    def __init__(self, capacity: int) -> None:
        self.items: deque[Record] = deque()
        self.capacity = capacity
        self.ready = threading.Event()
        self.closed = False

    def full(self) -> bool:
        return len(self.items) >= self.capacity

    def put(self, record: Record) -> None:
        self.items.append(record)
        if not self.ready.is_set():
            self.ready.set()

    def close(self) -> None:
        """Wake the writer for good: from now on ``take`` never waits."""
        self.closed = True
        self.ready.set()

    def take(self, at_most: int, timeout_s: float) -> list[Record]:
        """Up to ``at_most`` records, waiting up to ``timeout_s`` for the first one."""
        items = self.items
        if not items:
            self.ready.clear()
            if not items and not self.closed:
                self.ready.wait(max(0.0, timeout_s))
        taken = []
        while items and len(taken) < at_most:
            taken.append(items.popleft())
        return taken


class HistoryExporter(Exporter):
    """Writes the history tables from a writer thread (see the module docstring)."""

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
        self.partition_id = context.partition_id
        self.log = context.logger
        self._clock = context.clock
        context.set_filter(RecordFilter(frozenset({RecordType.EVENT}), HISTORY_VALUE_TYPES))
        self._backend: Backend | None = None
        self._handoff = _Handoff(self.queue_size)
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._room = asyncio.Event()
        self._stored_position = 0  # the database's position at open: records up to it are already written
        self._last_seen = 0  # the last position offered to export
        self._last_enqueued = 0  # the last position handed to the writer
        self._acknowledged = 0  # the last position acknowledged to the director
        self.written_position = 0  # the last position the writer committed
        self._generation = 0

    async def open(self, controller: Controller) -> None:
        self.controller = controller
        self._loop = asyncio.get_running_loop()
        backend = open_backend(self.url)
        try:
            self._stored_position = await self._loop.run_in_executor(None, self._prepare, backend)
        except Exception:
            backend.close()
            raise
        self._backend = backend
        self.written_position = self._stored_position
        self._last_seen = self._last_enqueued = self._acknowledged = self._stored_position
        self._generation += 1
        self._stopping.clear()
        self._handoff = _Handoff(self.queue_size)
        self._room = asyncio.Event()
        self._thread = threading.Thread(
            target=self._write_loop,
            args=(backend, self._generation),
            name=f"history-writer-{self.partition_id}",
            daemon=True,
        )
        self._thread.start()

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
        self._last_enqueued = position
        if self._handoff.full():
            return self._wait_for_room(record)
        self._handoff.put(record)
        return None

    async def close(self) -> None:
        thread, self._thread = self._thread, None
        self._stopping.set()
        if thread is not None:
            self._handoff.close()
            await asyncio.get_running_loop().run_in_executor(None, thread.join, 30)
        self._generation += 1  # acknowledgements still on their way belong to a closed run
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    # -- the event loop's side -----------------------------------------------------------------------------------

    def _prepare(self, backend: Backend) -> int:
        """Connect, migrate and read the partition's stored position (in a thread: it may wait on the network)."""
        backend.connect()
        applied = backend.migrate(self._clock())
        if applied:
            self.log.info("history schema migrated to version %d", applied[-1])
        return backend.exported_position(self.partition_id)

    async def _wait_for_room(self, record: Record) -> None:
        while self._handoff.full():
            self._room.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room.wait(), 0.1)
        self._handoff.put(record)

    def _acknowledge(self, position: int, generation: int) -> None:
        if generation != self._generation:
            return
        if position >= self._last_enqueued:
            position = self._last_seen  # records after the batch's last one that needed no writing
        if position > self._acknowledged:
            self._acknowledged = position
            self.controller.update_last_exported_position(position)

    # -- the writer thread ---------------------------------------------------------------------------------------

    def _write_loop(self, backend: Backend, generation: int) -> None:
        next_purge = time.monotonic()
        stopping = False
        while not stopping:
            purge_due = self.retention_days > 0 and time.monotonic() >= next_purge
            if purge_due and self._retry(backend, functools.partial(self._purge, backend)):
                next_purge = time.monotonic() + self.retention_interval_s
            batch, stopping = self._collect(max(0.0, next_purge - time.monotonic()) if self.retention_days else 1.0)
            if not len(batch):
                continue
            if not self._retry(backend, functools.partial(self._write, backend, batch)):
                return  # closing while the database was down: the records are offered again next time
            self.written_position = batch.last_position
            assert self._loop is not None
            with contextlib.suppress(RuntimeError):  # the loop is closed: the broker is gone
                self._loop.call_soon_threadsafe(self._acknowledge, batch.last_position, generation)

    def _collect(self, idle_timeout_s: float) -> tuple[Batch, bool]:
        """The next batch: waits up to ``idle_timeout_s`` for a first record, then up to ``flushDelay`` for more."""
        batch = Batch()
        records = self._handoff.take(self.batch_size, idle_timeout_s)
        if not records:
            return batch, self._stopping.is_set()
        deadline = time.monotonic() + self.flush_delay_s
        while True:
            for record in records:
                batch.add(record)
            remaining = deadline - time.monotonic()
            if len(batch) >= self.batch_size or remaining <= 0 or self._stopping.is_set():
                break
            # Let records gather rather than waking for each one as it comes: the event loop's put then stays a bare
            # append, and the writer takes them in a few large helpings (earlier when a full batch is waiting).
            if len(self._handoff.items) < self.batch_size - len(batch):
                self._stopping.wait(min(remaining, _GATHER_S))
            records = self._handoff.take(self.batch_size - len(batch), 0.0)
        self._signal_room()
        return batch, False

    def _write(self, backend: Backend, batch: Batch) -> None:
        """Write the batch; when the database rejects a value in it, write it row by row without the rejected rows."""
        try:
            backend.write(batch, self.partition_id)
            return
        except Exception as e:
            if not backend.rejects_data(e):
                raise
            self.log.warning(
                "history database rejected a value in the records at positions %d..%d (%s); writing them row by row",
                batch.first_position,
                batch.last_position,
                e,
            )
        for row in backend.write_row_by_row(batch, self.partition_id):
            ROWS_SKIPPED.labels(str(self.partition_id), row.table).inc()
            self.log.error(
                "history row skipped: partition %d, position %d, key %s, table %s: the database rejected it: %s",
                self.partition_id,
                row.position,
                row.key,
                row.table,
                row.message,
            )

    def _signal_room(self) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._room.set)

    def _retry(self, backend: Backend, step: Any) -> bool:
        """Run ``step`` until it succeeds (True) or the exporter closes (False), reconnecting between tries."""
        delay = 0.05
        while True:
            try:
                step()
                return True
            except Exception as e:
                if self._stopping.is_set():
                    self.log.warning("history database unavailable while closing (%s); records are kept", e)
                    return False
                WRITE_FAILURES.labels(str(self.partition_id)).inc()
                self.log.warning("history database write failed: %s; retrying in %.2fs", e, delay)
            if self._stopping.wait(delay):
                return False
            delay = min(self.retry_max_s, delay * 2)
            backend.close()
            try:
                backend.connect()
            except Exception as e:
                self.log.warning("history database unreachable: %s", e)

    def _purge(self, backend: Backend) -> None:
        cutoff = self._clock() - int(self.retention_days * _DAY_MS)
        removed = backend.purge(cutoff)
        if removed:
            self.log.info(
                "history retention removed %d instances and decisions older than %s days", removed, self.retention_days
            )


def _number(a: Mapping[str, Any], key: str, kind: type, minimum: float) -> Any:
    value = a[key]
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        ok = ok and isinstance(value, int)
    if not ok or value < minimum:
        raise ExporterConfigurationError(f"{key}: expected a number of at least {minimum}, got {value!r}")
    return kind(value)
