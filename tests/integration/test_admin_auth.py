"""The monitoring port's admin POSTs against real `weir start` processes: token, loopback rule, browsers.

GET /metrics, /health, /ready and /admin/partitions stay open (Prometheus and the kubelet call them without
credentials); snapshot and pause/resume exporting need `broker.adminToken` when one is configured, a loopback-bound
port when none is, and never come from a browser. A workflow still completes afterwards.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.harness import REPO, WeirProcess
from tests.integration.clients import Stub, activate, complete, create_with_result, deploy

TOKEN = "a-token-the-operator-made"
POSTS = ("/admin/snapshot", "/admin/exporting/pause", "/admin/exporting/resume")
OPEN = ("/metrics", "/health", "/ready", "/startup", "/admin/partitions")


def request(weir: WeirProcess, method: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    """One raw HTTP request to the monitoring port: (status, response headers + JSON body or text)."""
    conn = http.client.HTTPConnection("127.0.0.1", weir.monitoring_port, timeout=10)
    try:
        conn.request(method, path, body=b"" if method == "POST" else None, headers=headers or {})
        response = conn.getresponse()
        raw = response.read()
        body = json.loads(raw) if response.getheader("Content-Type") == "application/json" else {"text": raw}
        return response.status, {"headers": dict(response.getheaders()), **body}
    finally:
        conn.close()


def weir_admin(
    weir: WeirProcess, command: str, *flags: str, env_token: str | None = None
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "WEIR_BROKER_ADMIN_TOKEN"}
    if env_token is not None:
        env["WEIR_BROKER_ADMIN_TOKEN"] = env_token
    monitoring = f"127.0.0.1:{weir.monitoring_port}"
    return subprocess.run(
        [sys.executable, "-m", "client.cli", "admin", command, "--monitoring", monitoring, *flags],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def run_one_task_workflow(weir: WeirProcess) -> None:
    """Deploy, create with result, activate and complete the job: the instance completes with its variables."""
    channel = grpc.insecure_channel(weir.address)
    try:
        stub = Stub(channel)
        deployed = deploy(stub, "one-task.bpmn")
        pending = create_with_result(stub, deployed.pid(), {"orderId": 7})
        (job,) = activate(stub, deployed.type("test"), 1)
        complete(stub, job.key, {"shipped": True})
        assert json.loads(pending.result(timeout=15).variables) == {"orderId": 7, "shipped": True}
    finally:
        channel.close()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    """A Weir whose broker.adminToken is set (through the environment, as the Kubernetes Secret would)."""
    w = WeirProcess(tmp_path_factory.mktemp("guarded") / "data", env={"WEIR_BROKER_ADMIN_TOKEN": TOKEN})
    w.start()
    try:
        yield w
    finally:
        w.stop()


def test_with_a_token_admin_posts_without_it_are_refused(guarded: WeirProcess) -> None:
    for path in POSTS:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"X-Token": TOKEN}):
            status, body = request(guarded, "POST", path, headers)
            assert status == 401, (path, headers, status)
            assert body["headers"]["WWW-Authenticate"].startswith("Bearer")
            assert "broker.adminToken" in body["error"]
    assert "refused admin POST /admin/snapshot" in guarded.log()
    # Nothing was paused by the refused requests.
    status, body = request(guarded, "GET", "/admin/partitions")
    assert status == 200 and body["partitions"]["1"]["exportingPaused"] is False


def test_with_a_token_probes_and_metrics_stay_open(guarded: WeirProcess) -> None:
    for path in OPEN:
        assert request(guarded, "GET", path)[0] == 200, path


def test_weir_admin_sends_the_token_from_the_flag_or_the_environment(guarded: WeirProcess) -> None:
    refused = weir_admin(guarded, "snapshot")
    assert refused.returncode == 1
    assert "refused snapshot (401)" in refused.stderr and "broker.adminToken" in refused.stderr
    assert weir_admin(guarded, "snapshot", "--token", "wrong").returncode == 1

    out = weir_admin(guarded, "snapshot", "--token", TOKEN)
    assert out.returncode == 0, out.stderr
    assert "1" in json.loads(out.stdout)["snapshots"]
    out = weir_admin(guarded, "pause-exporting", env_token=TOKEN)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["exporting"] == "paused"
    out = weir_admin(guarded, "partitions")  # GET: no token needed
    assert json.loads(out.stdout)["partitions"]["1"]["exportingPaused"] is True
    out = weir_admin(guarded, "resume-exporting", env_token=TOKEN)
    assert json.loads(out.stdout)["exporting"] == "resumed"
    run_one_task_workflow(guarded)


def test_a_browser_request_is_refused_even_with_the_token(guarded: WeirProcess) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"}
    status, body = request(guarded, "POST", "/admin/exporting/pause", headers)
    assert status == 403 and "Origin" in body["error"]
    assert request(guarded, "GET", "/admin/partitions")[1]["partitions"]["1"]["exportingPaused"] is False


def test_without_a_token_loopback_admin_works_but_not_from_a_browser(weir: WeirProcess) -> None:
    """`weir start` binds 127.0.0.1 by default: local operators need no setup; a web page still gets nothing."""
    out = weir_admin(weir, "snapshot")
    assert out.returncode == 0, out.stderr
    status, body = request(weir, "POST", "/admin/exporting/pause", {"Origin": "http://localhost:8080"})
    assert status == 403 and "Origin" in body["error"]
    run_one_task_workflow(weir)


def test_without_a_token_admin_posts_are_refused_on_a_port_bound_beyond_loopback(tmp_path: Path) -> None:
    """Bound to 0.0.0.0 (as in a pod) with no token configured, every admin POST is refused; GETs still work."""
    w = WeirProcess(tmp_path / "data", extra_args=["--host", "0.0.0.0"])
    w.start()
    try:
        for path in POSTS:
            status, body = request(w, "POST", path)
            assert status == 403, (path, status)
            assert "not loopback" in body["error"] and "WEIR_BROKER_ADMIN_TOKEN" in body["error"]
        refused = weir_admin(w, "snapshot")
        assert refused.returncode == 1 and "(403)" in refused.stderr
        for path in OPEN:
            assert request(w, "GET", path)[0] == 200, path
        run_one_task_workflow(w)
    finally:
        w.stop()
