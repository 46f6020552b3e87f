"""The bad-input suite's memory check for the Raft port, against real brokers (`weir cluster up`).

Strangers announce 2 GiB messages on the partition leader's Raft port and send 64 MiB each. The broker's peak
resident memory while they do (sampled, and the kernel's high-water mark VmHWM reset before) stays within
``BOUND`` of before: each unauthenticated connection may buffer 16 KiB and is closed when its announced length
exceeds that. Before the cap, each connection buffered what it was sent, up to 2 GiB. Then a workflow completes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from pyzeebe.proto import gateway_pb2_grpc

from tests.cluster.harness import Cluster
from tests.harness import eventually
from tests.integration.clients import activate, complete, create_with_result, deploy
from tests.raw_sockets import PeakMemory, flood

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

MiB = 1024 * 1024
BOUND = 16 * MiB


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "cluster", brokers=3, partitions=1, replication=3)
    try:
        yield c.up()
    finally:
        c.kill_everything()


def workflow(stub: gateway_pb2_grpc.GatewayStub, process_id: str, job_type: str, n: int) -> bool:
    pending = create_with_result(stub, process_id, {"n": n})
    (job,) = activate(stub, job_type, 1, within=15)
    complete(stub, job.key, {"done": True})
    return bool(pending.result(timeout=15).variables)


def test_a_2_gib_length_prefix_on_raft_keeps_the_leaders_memory_bounded(cluster: Cluster) -> None:
    channel = grpc.insecure_channel(cluster.gateway)
    stub = gateway_pb2_grpc.GatewayStub(channel)
    try:
        deployed = deploy(stub, "one-task.bpmn")  # one partition: no distribution to wait for
        eventually(lambda: workflow(stub, deployed.pid(), deployed.type("test"), 0), timeout=60, what="a workflow")
        leader = cluster.wait_leader(1)
        broker = cluster.broker(leader)
        host, port = broker["host"], broker["raftBasePort"]

        results = []
        with PeakMemory(cluster.pid(leader)) as memory:
            threads = [
                threading.Thread(target=lambda: results.append(flood(host, port, 64 * MiB)), daemon=True)
                for _ in range(8)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(90)
        sent = sum(r.sent for r in results)
        print(
            f"leader RSS before {memory.before / MiB:.1f} MiB, peak +{memory.grown / MiB:.1f} MiB "
            f"(VmHWM reset: {memory.hwm_reset}) while 8 strangers announced 2 GiB and got {sent / MiB:.1f} MiB in"
        )
        assert len(results) == 8 and all(r.closed_by_peer for r in results), results
        assert memory.grown < BOUND, f"the leader grew by {memory.grown / MiB:.0f} MiB"
        assert "announced a 2147483647-byte message" in cluster.broker_log(leader)

        eventually(
            lambda: workflow(stub, deployed.pid(), deployed.type("test"), 1),
            timeout=60,
            what=f"a workflow after the flood\n{cluster.logs()}",
        )
    finally:
        channel.close()
