"""The REST port's connections: a cap on how many are open and a deadline for each request head.

aiohttp closes a connection that stays idle (no request at its start or between keep-alive requests) after its
keep-alive timeout, but would wait forever for a request head that trickles in, and accepts connections until the
process runs out of file descriptors, after which the monitoring and gRPC ports cannot accept either. Each connection
here is wrapped in a :class:`GuardedConnection` that

- counts against ``max_connections``: a new connection over the cap takes the place of the connection idle the
  longest (one not inside a request: waiting for one or reading its head), or is closed at once when every connection
  is serving a request. Closing is an ``abort`` (no handshake, no handler task), so a flood costs little loop time;
- closes the connection when a request head is still incomplete ``header_timeout`` seconds after its first byte.

The server's middleware reports when a request's handler starts and ends (:meth:`ConnectionLimiter.request_started`,
:meth:`ConnectionLimiter.request_finished`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, cast

log = logging.getLogger("weir.gateway.rest")

#: Seconds between two warnings about refused or evicted connections.
WARN_INTERVAL = 30.0


class GuardedConnection(asyncio.Protocol):
    """Forwards a connection's events to aiohttp's protocol, under the limiter's cap and head deadline."""

    def __init__(self, limiter: ConnectionLimiter, inner: asyncio.Protocol) -> None:
        self.limiter = limiter
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.in_request = False
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        if not self.limiter.admit(self):
            transport.abort()
            return
        self.transport = transport
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.transport is None:
            return
        if not self.in_request and self._head_deadline is None:
            loop = asyncio.get_running_loop()
            self._head_deadline = loop.call_later(self.limiter.header_timeout, self._head_too_slow)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.transport is not None else None

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is None:
            return
        self._cancel_deadline()
        self.limiter.release(self)
        self.transport = None
        self.inner.connection_lost(exc)

    def request_started(self) -> None:
        self.in_request = True
        self._cancel_deadline()
        self.limiter.mark_busy(self)

    def request_finished(self) -> None:
        self.in_request = False
        self.limiter.mark_idle(self)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if not self.in_request and self.transport is not None:
            log.debug("closing a REST connection whose request head took over %ss", self.limiter.header_timeout)
            self.transport.abort()

    def _cancel_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None


class ConnectionLimiter:
    """The protocol factory for the REST port's listening socket (wraps aiohttp's ``runner.server``)."""

    def __init__(self, factory: Callable[[], asyncio.Protocol], *, max_connections: int, header_timeout: float) -> None:
        self._factory = factory
        self.max_connections = max_connections
        self.header_timeout = header_timeout
        #: aiohttp's protocol → its guard, for every open connection
        self._open: dict[Any, GuardedConnection] = {}
        #: connections outside a request, the longest idle first
        self._idle: OrderedDict[GuardedConnection, None] = OrderedDict()
        self.evicted = 0
        self.refused = 0
        self._warned_at = 0.0

    def __call__(self) -> GuardedConnection:
        return GuardedConnection(self, self._factory())

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def admit(self, conn: GuardedConnection) -> bool:
        """Make room for ``conn`` (closing the longest idle connection when at the cap); False: refuse it."""
        if len(self._open) >= self.max_connections:
            if not self._idle:
                self.refused += 1
                self._warn()
                return False
            oldest, _ = self._idle.popitem(last=False)
            self._open.pop(oldest.inner, None)
            oldest.close()
            self.evicted += 1
            self._warn()
        self._open[conn.inner] = conn
        self._idle[conn] = None
        return True

    def release(self, conn: GuardedConnection) -> None:
        self._open.pop(conn.inner, None)
        self._idle.pop(conn, None)

    def mark_busy(self, conn: GuardedConnection) -> None:
        self._idle.pop(conn, None)

    def mark_idle(self, conn: GuardedConnection) -> None:
        if conn.inner in self._open:
            self._idle[conn] = None
            self._idle.move_to_end(conn)

    def request_started(self, protocol: Any) -> None:
        conn = self._open.get(protocol)
        if conn is not None:
            conn.request_started()

    def request_finished(self, protocol: Any) -> None:
        conn = self._open.get(protocol)
        if conn is not None:
            conn.request_finished()

    def _warn(self) -> None:
        now = time.monotonic()
        if now - self._warned_at >= WARN_INTERVAL:
            self._warned_at = now
            log.warning(
                "the REST port is at gateway.rest.maxConnections (%d open): %d idle connections closed to make room "
                "and %d new ones refused so far",
                self.max_connections,
                self.evicted,
                self.refused,
            )
