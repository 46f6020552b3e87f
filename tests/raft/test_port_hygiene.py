"""R19, the Raft port against strangers: real member processes, raw TCP clients, the kernel's view of the port.

A connection that has not proven the cluster password may buffer `handshake_max_bytes`, must finish within
`handshake_timeout_seconds`, and only `max_handshaking_connections` may be pending at once; meanwhile the group
keeps committing. The port listens on the configured host only.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from tests.raft.cluster import Cluster, Member, wait_until
from tests.raft.test_cluster import assert_acks_committed, assert_clean_logs
from tests.raw_sockets import Flood, flood, listening_hosts, rss_bytes, seconds_until_closed

pytestmark = pytest.mark.timeout(120)

MiB = 1024 * 1024
REFUSED = "closing unauthenticated Raft connection"


def port_of(member: Member) -> int:
    return int(member.address.rpartition(":")[2])


def acks_after(member: Member, since: float) -> int:
    return len([a for a in member.acks() if a[2] > since])


def finish(cluster: Cluster) -> None:
    """Stop the writers, then every member holds the same commits and every ack is among them."""
    for member in cluster.members:
        member.request(op="writer_stop", timeout=20)
    cluster.wait_settled()
    assert_acks_committed(cluster, cluster.assert_identical_commits())
    assert_clean_logs(cluster)


def test_raft_port_listens_on_the_members_host_only(tmp_path: Path) -> None:
    with Cluster(tmp_path) as cluster:
        cluster.leader()
        for member in cluster.members:
            assert listening_hosts(port_of(member)) == {"127.0.0.1"}, member.address


def test_huge_length_prefix_is_cut_off_and_memory_stays_bounded(tmp_path: Path) -> None:
    """Eight strangers announce 2 GiB messages and send 24 MiB each to the leader and to a follower: without
    the cap each member would buffer it all (~190 MiB); with it each connection ends after a few KiB."""
    with Cluster(tmp_path) as cluster:
        leader = cluster.leader()
        follower = next(m for m in cluster.members if m is not leader)
        for member in cluster.members:
            member.send(op="writer", size=256, in_flight=8, prefix="w")
        wait_until(lambda: len(leader.acks()) >= 200, 20, "200 acks before the attack")
        targets = [leader, follower]
        assert all(m.proc is not None for m in targets)
        before = {m.address: rss_bytes(m.proc.pid) for m in targets if m.proc is not None}
        attack_started = time.time()
        results: list[Flood] = []
        lock = threading.Lock()

        def attack(member: Member) -> None:
            result = flood("127.0.0.1", port_of(member), 24 * MiB)
            with lock:
                results.append(result)

        threads = [threading.Thread(target=attack, args=(m,)) for m in targets for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 8
        assert all(r.closed_by_peer for r in results), results
        assert all(r.sent < 24 * MiB for r in results), results  # closed long before the 24 MiB were sent
        for member in targets:
            assert member.proc is not None
            grown = rss_bytes(member.proc.pid) - before[member.address]
            print(f"{member.address}: RSS {before[member.address] / MiB:.1f} MiB, +{grown / MiB:.1f} MiB")
            assert grown < 24 * MiB, f"{member.address} grew by {grown / MiB:.0f} MiB"
            assert "announced a 2147483647-byte message" in member.log_text()
        wait_until(lambda: acks_after(leader, attack_started) >= 200, 20, "commits during and after the attack")
        finish(cluster)


def test_idle_and_trickling_connections_are_closed_after_the_handshake_timeout(tmp_path: Path) -> None:
    with Cluster(tmp_path, config={"handshake_timeout_seconds": 1.0, "max_handshaking_connections": 4}) as cluster:
        leader = cluster.leader()
        for member in cluster.members:
            member.send(op="writer", size=256, in_flight=8, prefix="w")
        port = port_of(leader)
        started = time.time()
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        time.sleep(0.2)  # all four accepted and handshaking before the fifth arrives
        extra = socket.create_connection(("127.0.0.1", port))
        try:
            # A fifth pending connection is over the limit: closed at once.
            assert (seconds_until_closed(extra, 1.0) or 99) < 0.5
            trickling = idle.pop()
            trickling.sendall(struct.pack("i", 1000))  # a plausible length, then a byte every 0.2 s
            closed_after = seconds_until_closed(trickling, 5.0, trickle=0.2)
            assert closed_after is not None and closed_after < 2.5, closed_after
            for s in idle:
                waited = seconds_until_closed(s, 5.0)
                assert waited is not None, "an idle unauthenticated connection stayed open"
            assert 0.9 < time.time() - started < 4.0
            assert "no handshake within 1s" in leader.log_text()
            assert "already handshaking" in leader.log_text()
        finally:
            for s in [*idle, extra]:
                s.close()
        wait_until(lambda: acks_after(leader, started) >= 200, 20, "commits while strangers were connected")
        finish(cluster)
