"""Which requests the monitoring port and the REST API take from browsers (broker.http_guard), and how deep REST
bodies may nest (gateway.rest.routes)."""

from __future__ import annotations

import socket

import pytest

from broker.http_guard import host_name, host_refusal, is_loopback, origin_refusal
from gateway.rest.routes import MAX_JSON_DEPTH, _nests_deeper


@pytest.mark.parametrize(
    ("header", "name"),
    [("127.0.0.1:8080", "127.0.0.1"), ("LocalHost", "localhost"), ("[::1]:8080", "::1"), ("::1", "::1")],
)
def test_host_name_drops_the_port(header: str, name: str) -> None:
    assert host_name(header) == name


@pytest.mark.parametrize("header", ["127.0.0.1:8080", "localhost:8080", "[::1]:8080", "127.0.0.2"])
def test_loopback_hosts_name_a_loopback_bound_server(header: str) -> None:
    assert host_refusal(header, "127.0.0.1") is None


@pytest.mark.parametrize("header", ["evil.example:8080", "attacker.test", "10.0.0.5:8080", "", None])
def test_other_hosts_are_refused_on_loopback(header: str | None) -> None:
    """DNS rebinding: the page's own name resolved to 127.0.0.1, but its Host header still names it."""
    assert host_refusal(header, "127.0.0.1") is not None


def test_configured_and_bound_names_are_served() -> None:
    assert host_refusal("weir.internal:8080", "127.0.0.1", ["weir.internal"]) is None
    assert host_refusal("10.0.0.5:8080", "10.0.0.5") is None
    assert host_refusal("anything.test", "127.0.0.1", ["*"]) is None


def test_a_wildcard_bind_serves_address_literals_and_the_machine_name_only() -> None:
    assert host_refusal("10.1.2.3:8080", "0.0.0.0") is None
    assert host_refusal("[fe80::1]:8080", "::") is None
    assert host_refusal(f"{socket.gethostname()}:8080", "0.0.0.0") is None
    assert host_refusal("rebound.attacker.test:8080", "0.0.0.0") is not None


def test_requests_without_an_origin_are_not_a_browser_page_s() -> None:
    assert origin_refusal({}) is None
    assert origin_refusal({"Host": "127.0.0.1:8080"}, same_origin_ok=True) is None


def test_foreign_origins_are_refused_unless_allowed() -> None:
    headers = {"origin": "https://evil.example", "host": "127.0.0.1:8080"}
    assert origin_refusal(headers) is not None
    assert origin_refusal(headers, same_origin_ok=True) is not None
    assert origin_refusal(headers, ["https://evil.example"]) is None
    assert origin_refusal(headers, ["*"]) is None
    assert origin_refusal({"origin": "null", "host": "null"}, same_origin_ok=True) is not None


def test_the_server_s_own_pages_are_served_when_same_origin_is() -> None:
    headers = {"origin": "http://127.0.0.1:8080", "host": "127.0.0.1:8080"}
    assert origin_refusal(headers, same_origin_ok=True) is None
    assert origin_refusal(headers) is not None, "the monitoring port takes no browser POST at all"
    assert origin_refusal({"origin": "http://127.0.0.1:9999", "host": "127.0.0.1:8080"}, same_origin_ok=True)


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")


def test_json_nesting_counts_brackets_outside_strings() -> None:
    assert not _nests_deeper(b'{"a": [1, {"b": "[[[[\\"[["}]}', 3)
    assert _nests_deeper(b'{"a": [1, {"b": []}]}', 3)
    deepest_allowed = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert not _nests_deeper(deepest_allowed, MAX_JSON_DEPTH)
    assert _nests_deeper(b"[" + deepest_allowed + b"]", MAX_JSON_DEPTH)
    assert not _nests_deeper(b'"just text"', 0)
