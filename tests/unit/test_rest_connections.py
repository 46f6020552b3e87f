"""The REST port's connection cap (gateway.rest.connections): who makes room for a newcomer, and the head deadline."""

from __future__ import annotations

import asyncio

from gateway.rest.connections import ConnectionLimiter, GuardedConnection


class FakeTransport:
    def __init__(self) -> None:
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


class FakeProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.made = False
        self.received = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made = True

    def data_received(self, data: bytes) -> None:
        self.received += data


def connect(limiter: ConnectionLimiter) -> tuple[GuardedConnection, FakeTransport]:
    conn = limiter()
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def test_a_newcomer_over_the_cap_closes_the_longest_idle_connection() -> None:
    limiter = ConnectionLimiter(FakeProtocol, max_connections=2, header_timeout=10)
    first, first_transport = connect(limiter)
    _, second_transport = connect(limiter)
    limiter.request_started(first.inner)  # the first is inside a request: not to be closed
    third, third_transport = connect(limiter)
    assert second_transport.aborted and not first_transport.aborted and not third_transport.aborted
    assert limiter.open_connections == 2 and limiter.evicted == 1
    assert isinstance(third.inner, FakeProtocol) and third.inner.made


def test_a_newcomer_is_refused_when_every_connection_is_inside_a_request() -> None:
    limiter = ConnectionLimiter(FakeProtocol, max_connections=1, header_timeout=10)
    busy, busy_transport = connect(limiter)
    limiter.request_started(busy.inner)
    refused, refused_transport = connect(limiter)
    assert refused_transport.aborted and not busy_transport.aborted and limiter.refused == 1
    assert isinstance(refused.inner, FakeProtocol) and not refused.inner.made
    limiter.request_finished(busy.inner)  # idle again: the next newcomer may take its place
    _, late_transport = connect(limiter)
    assert busy_transport.aborted and not late_transport.aborted


def test_a_closed_connection_frees_its_place() -> None:
    limiter = ConnectionLimiter(FakeProtocol, max_connections=1, header_timeout=10)
    conn, _ = connect(limiter)
    conn.connection_lost(None)
    assert limiter.open_connections == 0
    _, transport = connect(limiter)
    assert not transport.aborted and limiter.evicted == 0


async def test_a_request_head_must_be_complete_within_the_header_timeout() -> None:
    limiter = ConnectionLimiter(FakeProtocol, max_connections=10, header_timeout=0.05)
    slow, slow_transport = connect(limiter)
    prompt, prompt_transport = connect(limiter)
    _, silent_transport = connect(limiter)
    slow.data_received(b"GET / HT")
    prompt.data_received(b"GET / HTTP/1.1\r\n")
    limiter.request_started(prompt.inner)  # its head was complete: the handler runs
    await asyncio.sleep(0.2)
    assert slow_transport.aborted, "a head still incomplete after the header timeout"
    assert not prompt_transport.aborted
    assert not silent_transport.aborted, "no byte yet: the idle timeout (aiohttp's keep-alive) applies, not this one"
