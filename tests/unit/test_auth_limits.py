"""Basic credentials under guessing (cache, dummy hash, per-address limit) and error messages that echo input."""

from __future__ import annotations

import asyncio
import base64

import pytest

from broker.error_messages import MAX_WIRE_BYTES, _wire_size, bounded_message, shown
from gateway import auth
from gateway.auth import BasicCredentials, FailureLimiter, Unauthenticated, client_address, hash_password


def _pair(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def test_shown_keeps_short_values_and_summarises_long_ones() -> None:
    assert shown("abc") == "abc"
    assert shown("x" * 150) == "x" * 100 + "… (150 characters)"
    assert shown(12345, limit=3) == "123… (5 characters)"


@pytest.mark.parametrize(
    "message",
    [
        "Expected to find process definition with process id '" + "p" * 3_000_000 + "', but none found",
        "word " * 1_000_000,
        "é" * 1_000_000,
        "😀 " * 100_000,
        "lone \udc80 surrogate " + "z" * 500,
    ],
)
def test_bounded_messages_fit_the_metadata_limit(message: str) -> None:
    bounded = bounded_message(message)
    assert _wire_size(bounded) <= MAX_WIRE_BYTES + 100
    bounded.encode()  # gRPC can send it


def test_bounded_messages_keep_their_sentence() -> None:
    reason = "Expected to find process definition with process id '" + "p" * 3_000_000 + "', but none found"
    assert bounded_message(reason) == (
        "Expected to find process definition with process id '" + "p" * 100 + "… (3000000 characters)', but none found"
    )
    ordinary = "Command 'CREATE' rejected with code 'NOT_FOUND': Expected to find process definition 'order'"
    assert bounded_message(ordinary) == ordinary


def test_client_address_drops_the_port() -> None:
    assert client_address("ipv4:10.0.0.7:51234") == "10.0.0.7"
    assert client_address("ipv6:[::1]:51234") == "::1"
    assert client_address("unix:/tmp/s") == "unix:/tmp/s"
    assert client_address("") == ""


def test_the_failure_limiter_allows_a_burst_then_refills(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(auth.time, "monotonic", lambda: now[0])
    limiter = FailureLimiter(per_minute=3)
    assert [limiter.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("a") == pytest.approx(20.0)  # one token per 20 s
    assert limiter.take("b") == 0.0  # other addresses are not affected
    now[0] += 20
    assert limiter.take("a") == 0.0
    limiter.give_back("a")  # a success returns its token
    assert limiter.take("a") == 0.0
    assert limiter.take("a") > 0
    assert limiter.take("") == 0.0  # an unknown address is not limited
    small = FailureLimiter(per_minute=1, size=2)
    assert small.take("x") == 0.0 and small.take("x") > 0
    small.take("y"), small.take("z")  # the table holds two addresses: "x", quiet longest, is forgotten …
    assert small.take("x") == 0.0  # … and starts again with a full burst
    assert FailureLimiter(per_minute=0).take("a") == 0.0


def test_basic_credentials_cache_limit_and_check_unknown_users_with_scrypt(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    real = auth.verify_password

    def counting(password: str, stored: str) -> bool:
        checked.append(stored)
        return real(password, stored)

    monkeypatch.setattr(auth, "verify_password", counting)
    stored = hash_password("right")
    basic = BasicCredentials({"alice": stored}, ttl_s=60, failures_per_minute=2)

    async def scenario() -> None:
        assert await basic.check(_pair("alice", "right"), "10.0.0.1") == "alice"
        assert await basic.check(_pair("alice", "right"), "10.0.0.1") == "alice"
        assert len(checked) == 1  # the second call was remembered
        with pytest.raises(Unauthenticated, match="wrong user name or password for 'bob'"):
            await basic.check(_pair("bob", "x"), "10.0.0.1")
        assert len(checked) == 2 and checked[-1] not in (stored,)  # an unknown user pays scrypt too (a dummy hash)
        with pytest.raises(Unauthenticated, match="wrong user name or password for 'alice'"):
            await basic.check(_pair("alice", "x"), "10.0.0.1")
        with pytest.raises(Unauthenticated, match=r"too many failed sign-ins from 10\.0\.0\.1"):
            await basic.check(_pair("alice", "y"), "10.0.0.1")
        assert len(checked) == 3  # refused without a check
        assert await basic.check(_pair("alice", "right"), "10.0.0.1") == "alice"  # remembered: still in
        with pytest.raises(Unauthenticated, match="wrong user name or password"):
            await basic.check(_pair("alice", "z"), "10.0.0.2")  # another address has its own count
        with pytest.raises(Unauthenticated, match=r"must be base64\('user:password'\)"):
            await basic.check("%%%", "10.0.0.3")

    asyncio.run(scenario())


def test_remembered_credentials_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(auth.time, "monotonic", lambda: now[0])
    basic = BasicCredentials({"alice": hash_password("right")}, ttl_s=60, failures_per_minute=0)
    pair = _pair("alice", "right")
    asyncio.run(basic.check(pair, "a"))
    assert basic.remembered(basic.digest(pair)) == "alice"
    now[0] += 61
    assert basic.remembered(basic.digest(pair)) is None
