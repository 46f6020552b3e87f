"""The Raft port's defences against strangers: bounded bytes and time before a connection proves the password.

pysyncobj's TCP server buffers whatever a connection sends until a whole message (4-byte length prefix, then the
message) has arrived, and only then tries to decrypt it. A stranger announcing a 2^31-byte message made a member
buffer up to 2 GiB per connection; one that connects and stays silent (or trickles a byte now and then) was never
closed, because pysyncobj checks a connection's read timeout only when the connection has an event.

Here, a connection accepted on the Raft port is *unproven* until the transport has associated it with a partner:
that takes the encryptor's key exchange (the peer's first message must decrypt with the cluster password) and the
peer's address sent with the key this member chose, so replaying a captured handshake does not pass. Until then:

- `RaftConfig.handshake_max_bytes` caps the bytes buffered for it, and a message announced larger than that
  closes it at once (pysyncobj's handshake messages are a few hundred bytes);
- `RaftConfig.handshake_timeout_seconds` after accepting it, it is closed if still unproven (checked every tick);
- at most `RaftConfig.max_handshaking_connections` are unproven at a time; further ones are closed at accept.

Once proven, the connection is pysyncobj's unchanged. Connections this member opens to its partners are not
limited (the peer it reaches is the listener it configured).

The private pysyncobj members touched here are checked by `test_pysyncobj_seams_we_override_still_exist`.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import pysyncobj.tcp_server
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection
from pysyncobj.transport import TCPTransport

logger = logging.getLogger(__name__)

_LENGTH = struct.Struct("i")  # pysyncobj's length prefix: native signed 32-bit
_base_process_read: Callable[..., bool] = TcpConnection._TcpConnection__processRead  # type: ignore[attr-defined]
_base_parse_message: Callable[..., Any] = TcpConnection._TcpConnection__processParseMessage  # type: ignore[attr-defined]


class GuardedConnection(TcpConnection):  # type: ignore[misc]
    """A TCP connection whose reads are capped while `handshake_limit` is set (by the transport, at accept)."""

    handshake_limit: int | None = None
    # pysyncobj's private attributes used here (set by TcpConnection.__init__), typed for the checker.
    _TcpConnection__readBuffer: bytes
    _TcpConnection__recvBufferSize: int
    _TcpConnection__socket: Any

    def _TcpConnection__processRead(self) -> bool:
        limit = self.handshake_limit
        if limit is None:
            return _base_process_read(self)
        room = limit - len(self._TcpConnection__readBuffer)
        if room <= 0:
            # Stop reading; the parse step either consumes a whole message (each fits the limit) or closes.
            return False
        configured = self._TcpConnection__recvBufferSize
        self._TcpConnection__recvBufferSize = min(configured, room)
        try:
            return _base_process_read(self)
        finally:
            self._TcpConnection__recvBufferSize = configured

    def _TcpConnection__processParseMessage(self) -> Any:
        limit = self.handshake_limit
        if limit is not None:
            buffered = self._TcpConnection__readBuffer
            if len(buffered) >= _LENGTH.size:
                (announced,) = _LENGTH.unpack_from(buffered)
                if not 0 < announced <= limit - _LENGTH.size:
                    self.refuse(
                        "oversized", f"it announced a {announced}-byte message (limit {limit} before the handshake)"
                    )
                    return None
        return _base_parse_message(self)

    def peer(self) -> str:
        """The other end as host:port, or "?" once closed (for log lines)."""
        sock = self._TcpConnection__socket
        try:
            host, port = sock.getpeername()[:2]
        except (AttributeError, OSError):
            return "?"
        return f"{host}:{port}"

    def refuse(self, kind: str, why: str) -> None:
        """Close the connection, logging why (at most once per second per kind: strangers must not fill the disk)."""
        suppressed = _refusals.due(kind)
        if suppressed is not None:
            more = f" ({suppressed} more like it in the last interval)" if suppressed else ""
            logger.warning("closing unauthenticated Raft connection from %s: %s%s", self.peer(), why, more)
        self.handshake_limit = None
        self.disconnect()


class _RefusalLog:
    """Per kind of refusal: whether to log now, and how many were left unlogged since the last line."""

    def __init__(self, interval_seconds: float) -> None:
        self._interval = interval_seconds
        self._lock = threading.Lock()  # every Raft group's thread refuses through the same instance
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def due(self, kind: str) -> int | None:
        """None: do not log; otherwise log, mentioning this many suppressed refusals."""
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(kind, -self._interval) < self._interval:
                self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
                return None
            self._last[kind] = now
            return self._suppressed.pop(kind, 0)


_refusals = _RefusalLog(interval_seconds=1.0)


# pysyncobj's TcpServer builds accepted connections from this module-level name; every Raft group in the process
# is a RaftMember whose transport sets the limit, and a connection without a limit behaves exactly as before.
pysyncobj.tcp_server.TcpConnection = GuardedConnection  # type: ignore[attr-defined]


class GuardedTransport(TCPTransport):  # type: ignore[misc]
    """pysyncobj's TCP transport plus a byte cap, a deadline and a count limit on unproven incoming connections.

    The limits come from the owning member's `RaftConfig` (`syncObj._weir_config`)."""

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:
        self._weir_unproven: dict[GuardedConnection, float] = {}
        super().__init__(syncObj, selfNode, otherNodes)

    def _onNewIncomingConnection(self, conn: GuardedConnection) -> None:
        config = self._syncObj._weir_config
        super()._onNewIncomingConnection(conn)
        if len(self._weir_unproven) >= config.max_handshaking_connections:
            conn.refuse("crowded", f"{len(self._weir_unproven)} connections are already handshaking")
            return
        conn.handshake_limit = config.handshake_max_bytes
        self._weir_unproven[conn] = time.monotonic() + config.handshake_timeout_seconds

    def _onIncomingMessageReceived(self, conn: GuardedConnection, message: Any) -> None:
        super()._onIncomingMessageReceived(conn, message)
        proven = conn.state != CONNECTION_STATE.DISCONNECTED and conn not in self._unknownConnections
        if proven and self._weir_unproven.pop(conn, None) is not None:
            conn.handshake_limit = None

    def _onDisconnected(self, conn: Any) -> None:
        self._weir_unproven.pop(conn, None)
        super()._onDisconnected(conn)

    def _onTick(self) -> None:
        super()._onTick()
        if not self._weir_unproven:
            return
        now = time.monotonic()
        for conn, deadline in list(self._weir_unproven.items()):
            if now >= deadline:
                self._weir_unproven.pop(conn, None)
                timeout = self._syncObj._weir_config.handshake_timeout_seconds
                conn.refuse("silent", f"no handshake within {timeout:g}s")

    def destroy(self) -> None:
        for conn in list(self._weir_unproven):
            conn.disconnect()
        self._weir_unproven.clear()
        super().destroy()
