"""R19 against real brokers (`weir cluster up`): Raft ports bound to each broker's host, strangers cut off.

The brokers run on their own loopback addresses (127.0.0.2-4), so "listens on the configured host" is told apart
from both 0.0.0.0 and the default 127.0.0.1. While strangers flood and idle on the partition leader's Raft port,
one-task workflows keep completing through the gateway.
"""

from __future__ import annotations

import itertools
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from pyzeebe.proto import gateway_pb2_grpc

from tests.cluster.harness import Cluster
from tests.cluster.test_workflows import deploy_everywhere
from tests.harness import eventually
from tests.integration.clients import activate, complete, create_with_result
from tests.raw_sockets import flood, listening_hosts, rss_bytes, seconds_until_closed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
MiB = 1024 * 1024


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "cluster", brokers=3, partitions=3, replication=3, broker_hosts=HOSTS)
    try:
        yield c.up()
    finally:
        c.kill_everything()


class Workflows:
    """One-task instances run one after another (create with result, activate, complete) in a thread.

    A command whose outcome is unknown because a partition changed leader (UNAVAILABLE) is counted in
    `unavailable` and the next instance started: on a shared 2-core box elections also happen without any
    attack. Any other failure stops the loop and lands in `errors`."""

    def __init__(self, stub: gateway_pb2_grpc.GatewayStub, process_id: str, job_type: str) -> None:
        self.stub, self.process_id, self.job_type = stub, process_id, job_type
        self.completed: list[float] = []
        self.unavailable: list[grpc.RpcError] = []
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            pending = create_with_result(self.stub, self.process_id, {"n": len(self.completed)})
            try:
                try:
                    (job,) = activate(self.stub, self.job_type, 1, within=10)
                except AssertionError as no_job:
                    # No job: the creation itself must have failed; report why.
                    raise pending.exception(timeout=20) or no_job from None
                complete(self.stub, job.key, {"done": True})
                assert pending.result(timeout=15).variables
                self.completed.append(time.time())
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    self.errors.append(e)
                    return
                self.unavailable.append(e)
            except BaseException as e:  # reported by the test
                self.errors.append(e)
                return

    def since(self, at: float) -> int:
        return len([t for t in self.completed if t > at])


def test_raft_ports_listen_on_the_broker_host_and_strangers_are_cut_off(cluster: Cluster) -> None:
    # cluster.json carries the Raft password (the brokers' environment): only its owner may read it.
    assert stat.S_IMODE((cluster.data_dir / "cluster.json").stat().st_mode) == 0o600
    # Only the cluster's own sockets count: another program may use the same port number on another address.
    pids = {cluster.pid(broker["nodeId"]) for broker in cluster.info["brokers"]}
    for broker in cluster.info["brokers"]:
        for partition in range(1, cluster.partitions + 1):
            port = broker["raftBasePort"] + partition - 1
            assert listening_hosts(port, pids) == {broker["host"]}, (broker["nodeId"], partition)
        assert listening_hosts(broker["commandPort"], pids) == {broker["host"]}

    channel = grpc.insecure_channel(cluster.gateway)
    stub = gateway_pb2_grpc.GatewayStub(channel)
    deployed = deploy_everywhere(stub, "one-task.bpmn")
    workflows = Workflows(stub, deployed.pid(), deployed.type("test"))
    workflows.thread.start()
    try:
        leader = cluster.wait_leader(1)
        broker = cluster.broker(leader)
        host, port, pid = broker["host"], broker["raftBasePort"], cluster.pid(leader)
        eventually(lambda: workflows.completed or workflows.errors, timeout=20, what="a first workflow")
        assert not workflows.errors, workflows.errors
        rss_before = rss_bytes(pid)
        attack_started = time.time()

        idle = socket.create_connection((host, port))
        results = []
        threads = [
            threading.Thread(target=lambda: results.append(flood(host, port, 24 * MiB)), daemon=True) for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        grown = rss_bytes(pid) - rss_before
        print(f"leader broker RSS {rss_before / MiB:.1f} MiB, +{grown / MiB:.1f} MiB after 8 x 24 MiB floods")
        assert len(results) == 8 and all(r.closed_by_peer for r in results), results
        assert grown < 24 * MiB, f"the broker grew by {grown / MiB:.0f} MiB"

        idle_for = seconds_until_closed(idle, 10.0)
        idle.close()
        assert idle_for is not None, "an idle unauthenticated connection stayed open"
        assert time.time() - attack_started < 12.0  # closed at ~5 s, not left open

        log = cluster.broker_log(leader)
        assert "announced a 2147483647-byte message" in log
        assert "no handshake within 5s" in log
        # The cluster kept working: workflows go on completing (a shared 2-core box may slow them, not stop them).
        after_attack = time.time()
        eventually(
            lambda: workflows.errors or workflows.since(after_attack) >= 5,
            timeout=30,
            what=f"5 more workflows to complete\n{cluster.logs()}",
        )
        assert not workflows.errors, f"{workflows.errors}\n{cluster.logs()}"
        times = [attack_started] + [t for t in workflows.completed if t > attack_started]
        gap = max(b - a for a, b in itertools.pairwise(times))
        print(
            f"{len(times) - 1} workflows completed during and after the attack; longest wait {gap:.2f}s; "
            f"{len(workflows.unavailable)} commands UNAVAILABLE (leader changes)"
        )
    finally:
        workflows.stop.set()
        workflows.thread.join(30)
        channel.close()
    assert not workflows.errors, workflows.errors
    cluster.down()
