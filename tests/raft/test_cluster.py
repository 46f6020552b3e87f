"""Three-member groups as real processes on 127.0.0.1: agreement, kill -9 failover, pause (R4), snapshots."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.raft.cluster import Cluster, Member, wait_until

pytestmark = pytest.mark.timeout(120)


def assert_clean_logs(cluster: Cluster) -> None:
    for member in cluster.members:
        assert member.bad_log_lines() == [], f"{member.address}: {member.bad_log_lines()[:3]}"


def assert_acks_committed(cluster: Cluster, committed: list[tuple[int, str, int]]) -> None:
    """Every acknowledged payload is in the committed sequence at the index its future resolved with."""
    by_id = {payload_id: index for index, payload_id, _ in committed}
    for member in cluster.members:
        for payload_id, index, _ in member.acks():
            assert by_id.get(payload_id) == index, f"{member.address} acked {payload_id}@{index}, not committed"


def assert_one_leader_per_term(cluster: Cluster) -> None:
    leaders: dict[int, set[str]] = defaultdict(set)
    for member in cluster.members:
        for _, role, term, _leader in member.status().get("roles", []):
            if role == "leader":
                leaders[term].add(member.address)
    assert all(len(who) == 1 for who in leaders.values()), dict(leaders)


def test_three_members_agree_on_1000_payloads_in_order(tmp_path: Path) -> None:
    with Cluster(tmp_path) as cluster:
        leader = cluster.leader()
        reply = leader.request(op="load", count=1000, size=1024, in_flight=50, prefix="p")
        assert reply["acked"] == 1000, reply
        cluster.wait_converged(1000, timeout=20)
        committed = cluster.assert_identical_commits()
        assert [row[1] for row in committed] == [f"p-{i}" for i in range(1000)]
        assert_acks_committed(cluster, committed)
        for follower in (m for m in cluster.members if m is not leader):
            refused = follower.request(op="load", count=1, size=10, in_flight=1, prefix="f")
            assert (refused["sent"], refused["failures"]) == (0, {"NotLeaderError": 1})
        assert_clean_logs(cluster)


def test_kill_leader_fails_over_without_losing_committed_payloads(tmp_path: Path) -> None:
    with Cluster(tmp_path) as cluster:
        old = cluster.leader()
        for member in cluster.members:
            member.send(op="writer", size=1024, in_flight=20, prefix="w")
        wait_until(lambda: len(old.acks()) >= 300, 20, "300 acks on the first leader")
        killed_at = time.time()
        old.kill()
        survivors = [m for m in cluster.members if m is not old]
        new = cluster.leader(among=survivors)
        first_ack = wait_until(lambda: [a for a in new.acks() if a[2] > killed_at], 10, "a commit on the new leader")
        failover = first_ack[0][2] - killed_at
        print(f"failover (kill -9 -> first commit on the new leader): {failover * 1000:.0f} ms")
        assert failover < 3.0
        wait_until(lambda: len(new.acks()) >= 300, 20, "300 acks on the new leader")
        old.start()  # same data directory: catches up from its journal and the leader
        time.sleep(0.5)
        for member in cluster.members:
            member.request(op="writer_stop", timeout=20)
        cluster.wait_settled()
        committed = cluster.assert_identical_commits()
        assert_acks_committed(cluster, committed)
        assert_one_leader_per_term(cluster)
        assert_clean_logs(cluster)


def test_paused_leader_commits_nothing_and_steps_down(tmp_path: Path) -> None:
    """R4: SIGSTOP the leader for twice the election timeout; after SIGCONT it acknowledges nothing it could
    not commit and follows the new leader."""
    with Cluster(tmp_path) as cluster:
        old = cluster.leader()
        old_term = old.status()["term"]
        for member in cluster.members:
            member.send(op="writer", size=1024, in_flight=20, prefix="w")
        wait_until(lambda: len(old.acks()) >= 200, 20, "200 acks on the first leader")
        old.pause()
        paused_at = time.time()
        acks_before_pause = len(old.acks())
        survivors = [m for m in cluster.members if m is not old]
        new = cluster.leader(among=survivors)
        wait_until(lambda: len([a for a in new.acks() if a[2] > paused_at]) >= 100, 20, "majority progress")
        time.sleep(max(0.0, paused_at + 2 * 0.5 - time.time()))
        old.resume()
        resumed_at = time.time()
        wait_until(lambda: old.status().get("role") == "follower" and old.status().get("term", 0) > old_term,
                   5, "the old leader to step down")  # fmt: skip
        time.sleep(0.5)
        for member in cluster.members:
            member.request(op="writer_stop", timeout=20)
        cluster.wait_settled()
        committed = cluster.assert_identical_commits()
        assert_acks_committed(cluster, committed)
        late = [a for a in old.acks()[acks_before_pause:] if a[2] >= resumed_at]
        print(f"old leader: {len(late)} acks after resume, all committed by the new majority")
        assert_one_leader_per_term(cluster)
        assert_clean_logs(cluster)


def test_lagging_member_catches_up_through_a_snapshot(tmp_path: Path) -> None:
    with Cluster(tmp_path, config={"compaction_min_entries": 200}) as cluster:
        leader = cluster.leader()
        laggard: Member = next(m for m in cluster.members if m is not leader)
        assert leader.request(op="load", count=100, size=512, in_flight=20, prefix="a")["acked"] == 100
        cluster.wait_converged(100)
        laggard.kill()
        assert leader.request(op="load", count=1500, size=512, in_flight=50, prefix="b")["acked"] == 1500
        wait_until(lambda: leader.status().get("log_entries", 10**9) < 1500, 10, "leader compaction")
        laggard.start()
        cluster.wait_converged(1600, timeout=30)
        assert laggard.status()["snapshots_installed"] >= 1
        committed = cluster.assert_identical_commits()
        assert [row[1] for row in committed] == [f"a-{i}" for i in range(100)] + [f"b-{i}" for i in range(1500)]
        assert_clean_logs(cluster)
