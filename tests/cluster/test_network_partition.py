"""R5: a leader cut off from the other brokers; the majority elects a leader and keeps going; after healing the old
leader's uncommitted suffix is gone, the replicas agree and nothing acknowledged is lost.

The scenario (tests/cluster/r5_scenario.py) runs in network namespaces this test creates — a client namespace with a
bridge and one namespace per broker — so the cut never touches the machine's own network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import REPO

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="network namespaces need root and iproute2"
)


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def namespaces() -> Iterator[tuple[str, list[str]]]:
    tag = uuid.uuid4().hex[:6]
    client, brokers = f"weir-c-{tag}", [f"weir-b{i}-{tag}" for i in range(3)]
    try:
        for ns in (client, *brokers):
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", client, "link", "add", "br0", "type", "bridge")
        ip("-n", client, "addr", "add", "10.77.0.2/24", "dev", "br0")
        ip("-n", client, "link", "set", "br0", "up")
        for i, ns in enumerate(brokers):
            ip("-n", client, "link", "add", f"vh{i}", "type", "veth", "peer", "name", f"vb{i}", "netns", ns)
            ip("-n", client, "link", "set", f"vh{i}", "master", "br0", "up")
            ip("-n", ns, "addr", "add", f"10.77.0.{11 + i}/24", "dev", f"vb{i}")
            ip("-n", ns, "link", "set", f"vb{i}", "up")
        yield client, brokers
    finally:
        for ns in (client, *brokers):
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)


@pytest.mark.slow
def test_r5_isolated_leader(tmp_path: Path, namespaces: tuple[str, list[str]]) -> None:
    client, brokers = namespaces
    out = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            client,
            sys.executable,
            "-m",
            "tests.cluster.r5_scenario",
            str(tmp_path / "c"),
            ",".join(brokers),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.stdout.strip(), f"no result; stderr:\n{out.stderr[-3000:]}"
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(result)
    assert result["problems"] == [], result
    assert result["divergence"] == [], result
    assert result["new"] != result["old"]
    assert result["acksDuringIsolation"] > 0, "the majority must keep acknowledging while the leader is cut off"
    assert out.returncode == 0, out.stderr[-3000:]
