"""What the REST port of a real `weir start` refuses and bounds: requests web pages could send (foreign Origin, a
Host that does not name the server, text/plain bodies), the clock without its setting, input that used to end in a
traceback, header/body/idle timeouts, the size of whole-value variable searches, and a flood of idle connections
that must not take the monitoring and gRPC ports down with it."""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import json
import resource
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.harness import BPMN, WeirProcess, eventually
from tests.integration.clients import Stub
from tests.integration.clients import pb as gateway_pb

ALLOWED_ORIGIN = "http://allowed.test:3000"
SHORT = 2.0  # the header, body and idle timeouts of the guarded Weir, in seconds
MAX_RESPONSE_BYTES = 40_000


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    """A Weir with one allowed origin, short timeouts and a small response bound (the clock stays off)."""
    env = {
        "WEIR_GATEWAY_REST_ALLOWED_ORIGINS": ALLOWED_ORIGIN,
        "WEIR_GATEWAY_REST_HEADER_TIMEOUT": str(SHORT),
        "WEIR_GATEWAY_REST_BODY_TIMEOUT": str(SHORT),
        "WEIR_GATEWAY_REST_IDLE_TIMEOUT": str(SHORT),
        "WEIR_GATEWAY_REST_MAX_RESPONSE_BYTES": str(MAX_RESPONSE_BYTES),
    }
    w = WeirProcess(tmp_path_factory.mktemp("guarded") / "data", env=env)
    w.start()
    try:
        yield w
    finally:
        w.stop()


def request(
    w: WeirProcess,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    *,
    raw: bytes | None = None,
) -> tuple[int, dict[str, str], Any]:
    """One request over a fresh connection: (status, headers with lower-cased names, JSON body or text)."""
    conn = http.client.HTTPConnection("127.0.0.1", w.rest_port, timeout=30)
    try:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        sent = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=data, headers={**sent, **(headers or {})})
        response = conn.getresponse()
        text = response.read().decode(errors="replace")
        answer_headers = {k.lower(): v for k, v in response.getheaders()}
        try:
            value = json.loads(text) if text else None
        except ValueError:
            value = text
        return response.status, answer_headers, value
    finally:
        conn.close()


def problem(answer: tuple[int, dict[str, str], Any], status: int, *fragments: str) -> dict[str, Any]:
    code, headers, body = answer
    assert code == status, body
    assert headers["content-type"].startswith("application/problem+json"), headers
    for fragment in fragments:
        assert fragment in body["detail"], body
    return body


def deploy_form(origin: str | None) -> tuple[bytes, dict[str, str]]:
    boundary = uuid.uuid4().hex
    xml = (BPMN / "user-task-native.bpmn").read_bytes()
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="resources"; filename="task.bpmn"\r\n'
            "Content-Type: application/xml\r\n\r\n"
        ).encode()
        + xml
        + f"\r\n--{boundary}--\r\n".encode()
    )
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    if origin is not None:
        headers["Origin"] = origin
    return body, headers


# -- browsers --------------------------------------------------------------------------------------------------


def test_a_foreign_page_can_neither_change_nor_read_anything(guarded: WeirProcess) -> None:
    evil = {"Origin": "https://evil.example"}
    create = {"processDefinitionId": "user-task-native"}
    problem(request(guarded, "POST", "/v2/process-instances", create, evil), 403, "https://evil.example")
    problem(request(guarded, "POST", "/v2/process-instances/search", {}, evil), 403, "allowedOrigins")
    problem(request(guarded, "GET", "/v2/topology", headers=evil), 403)
    raw, headers = deploy_form("https://evil.example")
    problem(request(guarded, "POST", "/v2/deployments", raw=raw, headers=headers), 403)
    # a preflight from a foreign page gets no CORS answer either
    preflight = {**evil, "Access-Control-Request-Method": "POST"}
    status, headers, _ = request(guarded, "OPTIONS", "/v2/process-instances", headers=preflight)
    assert status == 403 and "access-control-allow-origin" not in headers


def test_a_text_plain_body_is_refused_before_it_is_read_as_json(guarded: WeirProcess) -> None:
    """A page may send text/plain to any site without a preflight; JSON endpoints take only JSON."""
    body = json.dumps({"processDefinitionId": "user-task-native"}).encode()
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        answer = request(guarded, "POST", "/v2/process-instances", raw=body, headers={"Content-Type": ctype})
        problem(answer, 415, "application/json")
    problem(request(guarded, "POST", "/v2/process-instances/search", raw=b"{}", headers={}), 415)
    # the JSON content types and an empty body still work
    status, _, _ = request(
        guarded, "POST", "/v2/process-instances/search", raw=b"{}", headers={"Content-Type": "application/json"}
    )
    assert status == 200
    assert request(guarded, "POST", "/v2/process-instances/search", raw=b"")[0] == 200


def test_a_host_that_does_not_name_the_server_is_refused(guarded: WeirProcess) -> None:
    """DNS rebinding: attacker.test resolves to 127.0.0.1, the browser sends Host: attacker.test."""
    for host in ("attacker.test", f"attacker.test:{guarded.rest_port}"):
        problem(request(guarded, "GET", "/v2/topology", headers={"Host": host}), 421, "allowedHosts")
        assert request(guarded, "GET", "/", headers={"Host": host})[0] == 421
    for host in (f"127.0.0.1:{guarded.rest_port}", f"localhost:{guarded.rest_port}", "localhost"):
        assert request(guarded, "GET", "/v2/topology", headers={"Host": host})[0] == 200


def test_the_web_view_s_own_requests_and_allowed_origins_are_served(guarded: WeirProcess) -> None:
    own = {"Origin": f"http://127.0.0.1:{guarded.rest_port}"}
    assert request(guarded, "POST", "/v2/process-instances/search", {}, own)[0] == 200
    raw, headers = deploy_form(own["Origin"])
    assert request(guarded, "POST", "/v2/deployments", raw=raw, headers=headers)[0] == 200

    allowed = {"Origin": ALLOWED_ORIGIN}
    preflight = {**allowed, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    status, headers, _ = request(guarded, "OPTIONS", "/v2/process-instances/search", headers=preflight)
    assert status == 204
    assert headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert "POST" in headers["access-control-allow-methods"]
    assert "content-type" in headers["access-control-allow-headers"].lower()
    status, headers, _ = request(guarded, "POST", "/v2/process-instances/search", {}, allowed)
    assert status == 200 and headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert headers["access-control-allow-credentials"] == "true"
    assert "origin" in headers["vary"].lower()


def test_the_web_view_is_sent_with_security_headers(guarded: WeirProcess) -> None:
    for path in ("/", "/app.js", "/no-such-file.js"):
        _, headers, _ = request(guarded, "GET", path)
        csp = headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp, csp
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
    _, headers, _ = request(guarded, "GET", "/v2/topology")
    assert headers["x-content-type-options"] == "nosniff"


# -- the clock ---------------------------------------------------------------------------------------------------


def test_the_clock_is_off_unless_enabled(guarded: WeirProcess) -> None:
    problem(request(guarded, "PUT", "/v2/clock", {"timestamp": 0}), 403, "clock.controlled", "WEIR_CLOCK_CONTROLLED")
    problem(request(guarded, "POST", "/v2/clock/reset"), 403, "clock.controlled")


# -- input that used to end in a traceback ---------------------------------------------------------------------


def test_bad_input_gets_a_client_error_not_a_traceback(guarded: WeirProcess) -> None:
    assert request(guarded, "GET", "/%00")[0] == 404
    assert request(guarded, "GET", "/a%00b.js")[0] == 404
    search = "/v2/process-instances/search"
    deep = "[" * 100_000 + "]" * 100_000
    problem(request(guarded, "POST", search, raw=deep.encode(), headers={"Content-Type": "application/json"}), 400)
    nested = {"filter": {"processInstanceKey": {"$in": [[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]}}}
    for _ in range(70):
        nested = {"filter": nested}
    problem(request(guarded, "POST", search, nested), 400, "nest at most")
    big = 10**30
    problem(request(guarded, "POST", search, {"filter": {"processInstanceKey": big}}), 400, "64 bits")
    problem(request(guarded, "POST", search, {"filter": {"processDefinitionVersion": {"$gt": -big}}}), 400, "64 bits")
    problem(request(guarded, "POST", search, {"page": {"from": big}}), 400, "page.from")
    cursor = "eyJvZmZzZXQiOjk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5fQ"  # {"offset": 99999999999999999999999}
    problem(request(guarded, "POST", search, {"page": {"after": cursor}}), 400, "page.after")
    lone = b'{"filter": {"processDefinitionName": "\\ud800"}}'
    problem(request(guarded, "POST", search, raw=lone, headers={"Content-Type": "application/json"}), 400, "surrogate")
    for malformed in (b"Content-Length: -1\r\n", b"Content-Length: 2\r\nContent-Length: 3\r\n", b"X: \x01\r\n"):
        with socket.create_connection(("127.0.0.1", guarded.rest_port), timeout=30) as sock:
            sock.sendall(b"POST /v2/process-instances/search HTTP/1.1\r\nHost: 127.0.0.1\r\n" + malformed + b"\r\n{}")
            assert sock.recv(4096).split(b" ")[1] == b"400"
    assert "Traceback" not in guarded.log()


# -- connections -------------------------------------------------------------------------------------------------


def _closed_after(sock: socket.socket, limit: float) -> float:
    """Seconds until the server closes ``sock`` (reading what it sends); fails after ``limit``."""
    started = time.monotonic()
    sock.settimeout(limit)
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - started
        if not chunk:
            return time.monotonic() - started


def test_an_idle_connection_is_closed_after_the_idle_timeout(guarded: WeirProcess) -> None:
    with socket.create_connection(("127.0.0.1", guarded.rest_port), timeout=30) as sock:
        assert SHORT * 0.5 <= _closed_after(sock, 30) < 30
    with socket.create_connection(("127.0.0.1", guarded.rest_port), timeout=30) as sock:  # between requests too
        sock.sendall(f"GET /v2/topology HTTP/1.1\r\nHost: 127.0.0.1:{guarded.rest_port}\r\n\r\n".encode())
        assert _closed_after(sock, 30) < 30


def test_a_trickling_request_head_is_cut_off(guarded: WeirProcess) -> None:
    """Slowloris: a byte of the head every half second; the connection closes once the header timeout is up."""
    head = f"GET /v2/topology HTTP/1.1\r\nHost: 127.0.0.1:{guarded.rest_port}\r\nX-Slow: {'a' * 200}".encode()
    with socket.create_connection(("127.0.0.1", guarded.rest_port), timeout=30) as sock:
        started = time.monotonic()
        try:
            for byte in head:
                sock.sendall(bytes([byte]))
                time.sleep(0.25)
                if time.monotonic() - started > 30:
                    break
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert time.monotonic() - started + _closed_after(sock, 30) < 30


def test_a_body_that_does_not_arrive_is_a_408(guarded: WeirProcess) -> None:
    with socket.create_connection(("127.0.0.1", guarded.rest_port), timeout=30) as sock:
        sock.sendall(
            f"POST /v2/process-instances/search HTTP/1.1\r\nHost: 127.0.0.1:{guarded.rest_port}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{".encode()
        )
        answer = b""
        sock.settimeout(30)
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            assert chunk, answer
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408"), answer


def test_a_flood_of_idle_connections_leaves_every_port_serving(tmp_path: Path) -> None:
    """1,200 idle sockets against a Weir started with the usual 1,024 file descriptors: the REST port keeps at most
    gateway.rest.maxConnections (closing the longest idle for newcomers), so the monitoring port, a gRPC call and a
    REST call all still answer."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2600:
        pytest.skip(f"the test needs 2,600 file descriptors (hard limit {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))  # what Weir inherits
    w = WeirProcess(tmp_path / "data")
    try:
        w.start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2600), hard))
    sockets: list[socket.socket] = []
    try:
        for _ in range(1200):
            with contextlib.suppress(OSError):  # the listen backlog overflowed for a moment; the flood goes on
                sockets.append(socket.create_connection(("127.0.0.1", w.rest_port), timeout=10))
        assert len(sockets) >= 1000, len(sockets)
        started = time.monotonic()
        status, _ = w.probe("/health")
        assert status == 200
        with grpc.insecure_channel(w.address) as channel:
            topology = Stub(channel).Topology(gateway_pb.TopologyRequest(), timeout=30)
            assert topology.brokers
        status, _, body = request(w, "GET", "/v2/topology")
        assert status == 200 and body["brokers"], body
        assert time.monotonic() - started < 30
        # the REST port closed the connections beyond its cap (the longest idle first)
        closed = 0
        for sock in sockets:
            sock.settimeout(0)
            try:
                closed += sock.recv(1) == b""
            except BlockingIOError:
                pass
            except ConnectionResetError:
                closed += 1
        assert closed >= len(sockets) - 512, closed
        assert "Traceback" not in w.log()
        assert "maxConnections" in w.log()
    finally:
        for sock in sockets:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        w.stop()


# -- whole-value variable searches -----------------------------------------------------------------------------


def test_whole_value_searches_page_within_the_response_bound(guarded: WeirProcess) -> None:
    """Five 15,000-character values, a bound of 40,000 bytes: pages of two, two and one, each continuing where the
    last ended; previews (truncateValues=true) still come as one page."""
    raw, headers = deploy_form(None)
    assert request(guarded, "POST", "/v2/deployments", raw=raw, headers=headers)[0] == 200
    values = {f"v{i}": str(i) * 15_000 for i in range(5)}
    status, _, created = request(
        guarded, "POST", "/v2/process-instances", {"processDefinitionId": "user-task-native", "variables": values}
    )
    assert status == 200, created
    query = {"filter": {"processInstanceKey": created["processInstanceKey"]}, "sort": [{"field": "name"}]}
    path = "/v2/variables/search"

    def previews() -> Any:
        status, _, found = request(guarded, "POST", path, query)
        return found if status == 200 and len(found["items"]) == 5 else None

    assert all(item["isTruncated"] for item in eventually(previews, 30, what="the variables in the history")["items"])
    pages: list[list[str]] = []
    after: dict[str, Any] = {}
    while True:
        status, _, page = request(guarded, "POST", f"{path}?truncateValues=false", {**query, "page": after})
        assert status == 200, page
        if not page["items"]:
            break
        assert page["page"]["totalItems"] == 5
        for item in page["items"]:
            assert item["isTruncated"] is False and item["value"] == json.dumps(values[item["name"]])
        pages.append([item["name"] for item in page["items"]])
        after = {"after": page["page"]["endCursor"]}
    assert pages == [["v0", "v1"], ["v2", "v3"], ["v4"]]

    # concurrent whole-value searches wait for their turn (maxConcurrentLargeResponses) and all answer
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda _: request(guarded, "POST", f"{path}?truncateValues=false", query), range(6)))
    assert [a[0] for a in answers] == [200] * 6
