"""The history writer process: folds a partition's history records into batches and writes them to the database.

It runs as a process of its own (``python -m exporters.history.writer FD``), one per exporting partition, so that
folding records into rows and talking to the database never compete with the partition's event loop for the
interpreter lock. The broker side (`exporters.history.exporter`) talks to it over a Unix socket pair ``FD`` with
msgpack messages, each an array whose first item names it:

broker to writer
  ``["open", settings]``        first message: where to write and how (see `Settings`)
  ``["records", now_ms, [record, ...]]``  committed records in position order, in `codec.record_to_list` form, with
                                the broker's clock at sending (retention measures age against it)
  ``["close"]``                 write what was received, then answer ``closed`` and exit
  ``["rewound"]``               after ``replaced``: the records that follow start again after the new position

writer to broker
  ``["ready", position]``       opened and migrated; records up to ``position`` are already written
  ``["failed", message]``       could not open the database (the writer exits; the broker retries)
  ``["ack", position]``         every record up to ``position`` is committed to the database
  ``["log", level, message]``   a log line, logged by the broker with its own context
  ``["write_failure"]``, ``["skipped", table]``  metric increments, counted by the broker
  ``["replaced", position]``    the SQLite file was deleted or replaced under the writer: it made a new one holding
                                records up to ``position``, dropped what it held, and waits for ``rewound``
  ``["disk_full", 0 or 1]``     writing is held (1) because the database's disk is below the watermark, or resumed (0)
  ``["closed"]``                the last message

If the broker goes away without ``close`` (killed), the writer exits at once without writing more: the broker
offers the unacknowledged records again after its restart, and two writers must not write one partition at a time.
"""

from __future__ import annotations

import functools
import logging
import selectors
import shutil
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import msgpack

from broker.protocol.codec import record_from_list
from exporters.history.backends import Backend, file_identity, open_backend, sqlite_path
from exporters.history.rows import Batch

_DAY_MS = 86_400_000
# How long the writer lets records gather between two helpings while it fills a batch.
_GATHER_S = 0.05
_READ_SIZE = 1 << 20
# While the disk is below the watermark, free space is looked at this often.
_DISK_POLL_S = 0.5
_IDLE_CHECK_S = 1.0


class Settings(NamedTuple):
    """What the ``open`` message carries."""

    url: str
    partition_id: int
    batch_size: int
    flush_delay_s: float
    retention_days: float
    retention_interval_s: float
    retry_max_s: float
    now_ms: int
    # Below this much free space on the SQLite file's disk the writer holds its batches (0: never).
    min_free_disk_bytes: int = 0


class BrokerGone(Exception):
    """The broker closed the socket without saying ``close``: it was killed."""


class Channel:
    """The writer's end of the socket: sends messages and collects the broker's, waiting at most as long as told."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(sock, selectors.EVENT_READ)
        self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        self.inbox: deque[list[Any]] = deque()
        self.eof = False

    def send(self, *message: Any) -> None:
        data = msgpack.packb(list(message), use_bin_type=True)
        self.sock.setblocking(True)
        try:
            self.sock.sendall(data)
        except OSError:
            pass  # the broker is gone; reading says so
        finally:
            self.sock.setblocking(False)

    def receive(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the broker to send something, then take everything it has sent so far."""
        if self.eof or not self._selector.select(max(0.0, timeout_s)):
            return
        while True:
            try:
                data = self.sock.recv(_READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.eof = True
                return
            self._unpacker.feed(data)
            self.inbox.extend(self._unpacker)


class ChannelLogHandler(logging.Handler):
    """Hands the writer's log lines to the broker, which logs them with the partition's context."""

    def __init__(self, channel: Channel) -> None:
        super().__init__()
        self.channel = channel

    def emit(self, record: logging.LogRecord) -> None:
        self.channel.send("log", record.levelno, record.getMessage())


class Writer:
    """The write loop: gather records into a batch, write it with its position, acknowledge, repeat."""

    def __init__(self, channel: Channel, settings: Settings) -> None:
        self.channel = channel
        self.s = settings
        self.log = logging.getLogger("weir.history.writer")
        self.records: deque[list[Any]] = deque()  # received, not yet folded into a batch
        self.stored_position = 0  # the database's position at open: records up to it are written already
        self.written_position = 0  # the last position written
        self.closing = False
        self._now_ms = settings.now_ms
        self._now_at = time.monotonic()
        self._path = sqlite_path(settings.url)
        self._identity: tuple[int, int] | None = None  # the SQLite file the connection has open
        self._discarding = False  # after `replaced`: records sent before the broker heard of it are dropped

    def run(self) -> None:
        backend = open_backend(self.s.url)
        try:
            backend.connect()
            applied = backend.migrate(self.now_ms())
            position = self.stored_position = self.written_position = backend.exported_position(self.s.partition_id)
            self._identity = file_identity(self._path) if self._path is not None else None
        except Exception as e:
            self.channel.send("failed", f"{type(e).__name__}: {e}")
            backend.close()
            return
        if applied:
            self.log.info("history schema migrated to version %d", applied[-1])
        self.channel.send("ready", position)
        try:
            self._loop(backend)
            self.channel.send("closed")
        except BrokerGone:
            pass
        finally:
            backend.close()

    def now_ms(self) -> int:
        """The broker's clock, as of its last message plus the time since."""
        return self._now_ms + int((time.monotonic() - self._now_at) * 1000)

    def _loop(self, backend: Backend) -> None:
        next_purge = time.monotonic()
        while True:
            if self.s.retention_days > 0 and time.monotonic() >= next_purge:
                if not self._retry(backend, functools.partial(self._purge, backend)):
                    return
                next_purge = time.monotonic() + self.s.retention_interval_s
            # Idle, the writer still looks at its database file about once a second (deleted or replaced?).
            idle_s = (
                min(_IDLE_CHECK_S, max(0.0, next_purge - time.monotonic()))
                if self.s.retention_days > 0
                else _IDLE_CHECK_S
            )
            batch = self._collect(idle_s)
            if self._database_replaced():
                if not self._rebuild(backend):
                    return
                continue  # the batch is dropped: its records come again, in order, after the rewind
            if len(batch):
                if not self._wait_for_disk_space():
                    return  # closing while the disk was full: the records are offered again next time
                if not self._retry(backend, functools.partial(self._write, backend, batch)):
                    return  # closing while the database was down: the records are offered again next time
                self.written_position = batch.last_position
                self.channel.send("ack", batch.last_position)
            elif self.closing and not self.records:
                return

    # -- receiving ---------------------------------------------------------------------------------------------

    def _receive(self, timeout_s: float) -> None:
        channel = self.channel
        channel.receive(timeout_s)
        inbox = channel.inbox
        while inbox:
            message = inbox.popleft()
            kind = message[0]
            if kind == "records":
                self._now_ms, self._now_at = message[1], time.monotonic()
                if not self._discarding:
                    self.records.extend(message[2])
            elif kind == "rewound":
                self._discarding = False
            elif kind == "close":
                self.closing = True
        if channel.eof and not self.closing:
            raise BrokerGone

    def _collect(self, idle_timeout_s: float) -> Batch:
        """The next batch: waits up to ``idle_timeout_s`` for a first record, then up to ``flushDelay`` for more."""
        batch = Batch()
        if not self.records and not self.closing:
            self._receive(idle_timeout_s)
        if not self.records:
            return batch
        deadline = time.monotonic() + self.s.flush_delay_s
        records = self.records
        stored = self.stored_position
        while True:
            while records and len(batch) < self.s.batch_size:
                item = records.popleft()
                if item[0] > stored:  # a replaced writer's records come again: those written already are skipped
                    batch.add(record_from_list(item))
            remaining = deadline - time.monotonic()
            if len(batch) >= self.s.batch_size or remaining <= 0 or self.closing:
                return batch
            # Let records gather rather than waking for each message: the writer takes them in a few large helpings.
            time.sleep(min(remaining, _GATHER_S))
            self._receive(0.0)

    # -- the database file going away --------------------------------------------------------------------------

    def _database_replaced(self) -> bool:
        """Whether the SQLite file the connection writes is no longer the one at its path (deleted or replaced)."""
        return self._path is not None and self._identity is not None and file_identity(self._path) != self._identity

    def _rebuild(self, backend: Backend) -> bool:
        """Open a new database at the path and have the broker export again what it lacks (from its log).

        False when the broker closed the writer before the new database could be opened.
        """
        self.log.error(
            "history database %s was deleted or replaced while in use (it held records up to position %d); "
            "writing a new one and exporting again from the broker's log",
            self._path,
            self.written_position,
        )
        if not self._retry(backend, functools.partial(self._reopen, backend)):
            return False
        self.records.clear()
        self._discarding = True
        self.channel.send("replaced", self.stored_position)
        return True

    def _reopen(self, backend: Backend) -> None:
        backend.close()
        backend.connect()
        backend.migrate(self.now_ms())
        self.stored_position = self.written_position = backend.exported_position(self.s.partition_id)
        self._identity = file_identity(self._path) if self._path is not None else None

    # -- writing -----------------------------------------------------------------------------------------------

    def _free_disk_bytes(self) -> int | None:
        """Free space where the SQLite file lives (None for PostgreSQL, or when it cannot be read)."""
        path = sqlite_path(self.s.url)
        if path is None:
            return None
        try:
            return shutil.disk_usage(path.parent).free
        except OSError:
            return None

    def _wait_for_disk_space(self) -> bool:
        """Hold the batch while its disk is below the watermark (True once there is room, False when closing).

        Nothing is acknowledged meanwhile, so the exporter's position waits, the broker keeps the records, and its
        queue fills up until ``export`` waits for room: the writer never fills the disk the broker needs.
        """
        watermark = self.s.min_free_disk_bytes
        if watermark <= 0:
            return True
        held = False
        while (free := self._free_disk_bytes()) is not None and free < watermark:
            if not held:
                held = True
                self.channel.send("disk_full", 1)
                self.log.warning(
                    "history writer holds its writes: %d bytes free for %s, below the watermark of %d bytes; "
                    "it resumes when space returns (nothing is lost: the records wait unacknowledged)",
                    free,
                    self.s.url,
                    watermark,
                )
            if self.closing:
                return False
            self._receive(_DISK_POLL_S)
        if held:
            self.channel.send("disk_full", 0)
            self.log.info("history writer resumes: disk space is back for %s", self.s.url)
        return True

    def _write(self, backend: Backend, batch: Batch) -> None:
        """Write the batch; when the database rejects a value in it, write it row by row without the rejected rows."""
        try:
            backend.write(batch, self.s.partition_id)
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
        for row in backend.write_row_by_row(batch, self.s.partition_id):
            self.channel.send("skipped", row.table)
            self.log.error(
                "history row skipped: partition %d, position %d, key %s, table %s: the database rejected it: %s",
                self.s.partition_id,
                row.position,
                row.key,
                row.table,
                row.message,
            )

    def _retry(self, backend: Backend, step: Callable[[], None]) -> bool:
        """Run ``step`` until it succeeds (True) or the broker closes the writer (False), reconnecting between tries."""
        delay = 0.05
        while True:
            try:
                step()
                return True
            except Exception as e:
                if self.closing:
                    self.log.warning("history database unavailable while closing (%s); records are kept", e)
                    return False
                self.channel.send("write_failure")
                self.log.warning("history database write failed: %s; retrying in %.2fs", e, delay)
            until = time.monotonic() + delay
            while not self.closing and (remaining := until - time.monotonic()) > 0:
                self._receive(remaining)  # the broker may close meanwhile
            if self.closing:
                self.log.warning("history database unavailable while closing; records are kept")
                return False
            delay = min(self.s.retry_max_s, delay * 2)
            backend.close()
            try:
                backend.connect()
            except Exception as e:
                self.log.warning("history database unreachable: %s", e)

    def _purge(self, backend: Backend) -> None:
        cutoff = self.now_ms() - int(self.s.retention_days * _DAY_MS)
        removed = backend.purge(cutoff)
        if removed:
            days = self.s.retention_days
            self.log.info("history retention removed %d instances and decisions older than %s days", removed, days)


def main(argv: list[str]) -> int:
    # The broker starts this writer in a process group of its own, so a terminal's Ctrl-C does not reach it; should a
    # SIGINT come anyway, the broker still shuts down first and closes this writer (which writes what it holds).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=int(argv[1]))
    channel = Channel(sock)
    log = logging.getLogger("weir.history.writer")
    log.addHandler(ChannelLogHandler(channel))
    log.setLevel(logging.INFO)
    log.propagate = False
    while not channel.inbox:
        channel.receive(60.0)
        if channel.eof:
            return 1
    message = channel.inbox.popleft()
    if message[0] != "open":
        channel.send("failed", f"expected an open message, got {message[0]!r}")
        return 1
    Writer(channel, Settings(**message[1])).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
