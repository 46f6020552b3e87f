"""Probes in a cluster: the gateway is ready only while it knows a leader for every partition."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request

from tests.cluster.harness import Cluster
from tests.harness import eventually


def probe(port: int, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_gateway_ready_turns_false_without_a_leader_and_back(cluster: Cluster) -> None:
    gateway_monitoring = cluster.reload()["gateway"]["monitoringPort"]
    assert probe(gateway_monitoring, "/ready")[0] == 200
    for node_id in (0, 1, 2):
        status, body = probe(cluster.broker(node_id)["monitoringPort"], "/ready")
        assert status == 200 and set(body["partitions"]) == {"1", "2", "3"}

    # Two of three brokers stopped (SIGSTOP keeps them as processes): no partition can have a leader.
    cluster.kill(1, signal.SIGSTOP)
    cluster.kill(2, signal.SIGSTOP)
    eventually(lambda: probe(gateway_monitoring, "/ready")[0] == 503, timeout=20, what="gateway /ready to fail")
    assert probe(gateway_monitoring, "/health")[0] == 200  # alive, just not ready

    cluster.resume_all()
    eventually(lambda: probe(gateway_monitoring, "/ready")[0] == 200, timeout=30, what="gateway /ready again")
    status, body = probe(cluster.broker(0)["monitoringPort"], "/startup")
    assert status == 200
