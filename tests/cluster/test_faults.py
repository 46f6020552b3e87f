"""Faults against a real 3-broker cluster (3 partitions, replication 3): the rows R1-R4, R12 and R14.

Each test runs load through the gateway while it injects its fault with signals and file operations, stops the
cluster gracefully, reads every replica's partition log offline and checks: replicas agree on their common prefix,
and everything the cluster acknowledged is in the prefix a majority holds, once.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import statistics
import time
from pathlib import Path

import pytest

from broker.log.frame import HEADER_SIZE, verify_frame
from broker.log.segment import list_segment_files
from tests.cluster.audit import (
    History,
    Load,
    ReplicaLogs,
    audit,
    creates_on_every_partition,
    deploy_one_task,
    divergence,
    read_replica_logs,
    write_history,
)
from tests.cluster.harness import Cluster
from tests.harness import eventually

LEADER_KILLS = 5


def check(cluster: Cluster, history: History, logs: ReplicaLogs) -> None:
    """Replicas agree; nothing acknowledged is lost, duplicated or completed twice."""
    write_history(cluster.data_dir / "history.jsonl", history)
    problems = divergence(logs)
    assert not problems, "replica logs diverge:\n" + "\n".join(problems)
    result = audit(history, logs, cluster.replication)
    print(result.summary(), f"client errors {dict(history.errors)}")
    assert not result.problems(), "\n".join(result.problems())
    assert result.acknowledged_creates >= 50 and result.acknowledged_completions >= 20, "too little load to judge"


def assert_replicas_equal(logs: ReplicaLogs, partitions: list[int] | None = None) -> None:
    for partition, replicas in logs.items():
        if partitions is not None and partition not in partitions:
            continue
        lengths = {node: len(records) for node, records in replicas.items()}
        assert len(set(lengths.values())) == 1, f"partition {partition}: replica logs end at {lengths}"


# -- R1: kill -9 the leader again and again --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_r1_leader_killed_repeatedly_loses_nothing_acknowledged(cluster: Cluster) -> None:
    seed = int(os.environ.get("WEIR_CLUSTER_SEED", random.SystemRandom().randrange(1 << 32)))
    print(f"WEIR_CLUSTER_SEED={seed}")
    rng = random.Random(seed)
    deploy_one_task(cluster)
    load = Load(cluster.gateway).start()
    kills: list[tuple[int, int, float]] = []
    restarts: list[float] = []
    try:
        for i in range(LEADER_KILLS):
            time.sleep(rng.uniform(0.5, 1.5))
            partition = i % cluster.partitions + 1
            leader = cluster.wait_leader(partition)
            moment = time.monotonic()
            cluster.kill(leader)
            kills.append((partition, leader, moment))
            cluster.wait_leader(partition, exclude={leader})
            time.sleep(0.5)  # the load runs on two brokers for a while
            restarts.append(cluster.restart_broker(leader))
        time.sleep(1.0)
    finally:
        history = load.finish()
    cluster.down()
    check(cluster, history, read_replica_logs(cluster))

    failovers = []
    for partition, leader, moment in kills:
        took = history.first_ack_after(partition, moment)
        assert took is not None, f"partition {partition} acknowledged nothing after broker {leader} was killed"
        failovers.append(took)
    print(
        f"failover (kill -> next acknowledged command on that partition) over {len(kills)} kills: "
        f"p50 {statistics.median(failovers):.2f}s max {max(failovers):.2f}s; "
        f"restart-broker to ready: {', '.join(f'{s:.1f}s' for s in restarts)}"
    )


# -- R2: a follower killed and restarted catches up -------------------------------------------------------------


def _pure_follower(cluster: Cluster) -> int:
    """A broker leading no partition if there is one (else any broker that does not lead partition 1)."""
    leaders = {cluster.wait_leader(p) for p in range(1, cluster.partitions + 1)}
    followers = [n for n in range(cluster.brokers) if n not in leaders]
    return followers[0] if followers else next(n for n in range(cluster.brokers) if n != cluster.wait_leader(1))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_r2_killed_follower_catches_up(cluster: Cluster) -> None:
    deploy_one_task(cluster)
    follower = _pure_follower(cluster)
    load = Load(cluster.gateway, job_timeout_ms=60_000).start()
    try:
        time.sleep(1.0)
        cluster.kill(follower)
        time.sleep(2.0)  # the others go on without it
        cluster.restart_broker(follower)
        time.sleep(1.5)
    finally:
        history = load.finish()
    started = time.monotonic()
    cluster.wait_replicas_equal()
    print(f"broker {follower} caught up {time.monotonic() - started:.2f}s after the load stopped")
    cluster.down()
    logs = read_replica_logs(cluster)
    check(cluster, history, logs)
    assert_replicas_equal(logs)


# -- R3: every broker killed at once ------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_r3_all_brokers_killed_at_once_lose_nothing_acknowledged(cluster: Cluster) -> None:
    deploy_one_task(cluster)
    load = Load(cluster.gateway).start()
    try:
        time.sleep(2.0)
        for node_id in range(cluster.brokers):
            os.kill(cluster.pid(node_id), signal.SIGKILL)
        before = len(load.history.created)
        restart = cluster.restart_brokers(list(range(cluster.brokers)))
        serving = creates_on_every_partition(cluster)
        time.sleep(1.5)
    finally:
        history = load.finish()
    print(f"all brokers restarted in {restart:.2f}s; every partition accepted a create {serving:.2f}s later")
    assert len(history.created) > before, "nothing was acknowledged after the restart"
    cluster.down()
    check(cluster, history, read_replica_logs(cluster))


# -- R4: the leader paused longer than the election timeout ----------------------------------------------------


@pytest.mark.timeout(120)
def test_r4_paused_leader_acknowledges_nothing_after_losing_leadership(cluster: Cluster) -> None:
    deploy_one_task(cluster)
    partition = 1
    # Short client deadlines: calls stuck on the paused broker give up, so the threads go on with the others.
    load = Load(cluster.gateway, creators=4, rpc_timeout_s=1.0).start()
    try:
        time.sleep(1.0)
        paused = cluster.wait_leader(partition)
        paused_at = time.monotonic()
        cluster.kill(paused, signal.SIGSTOP)
        successor = cluster.wait_leader(partition, exclude={paused})
        elected = time.monotonic() - paused_at
        time.sleep(max(0.0, 3.0 - (time.monotonic() - paused_at)))
        resumed_at = time.monotonic()
        cluster.kill(paused, signal.SIGCONT)
        time.sleep(2.0)
    finally:
        cluster.resume_all()
        history = load.finish()
    during = [t for t in history.acks_on(partition) if paused_at < t < resumed_at]
    print(
        f"broker {paused} paused 3s: broker {successor} led partition {partition} after {elected:.2f}s; "
        f"{len(during)} commands of partition {partition} acknowledged while it was paused"
    )
    assert during, "the majority acknowledged nothing while the old leader was paused"
    eventually(
        lambda: cluster.leader_of(partition) is not None,
        timeout=10,
        what=f"a leader for partition {partition}",
    )
    cluster.down()
    logs = read_replica_logs(cluster)
    # Every acknowledged create, including any the resumed broker answered, is in the majority's committed log.
    check(cluster, history, logs)
    assert f"partition {partition}: no longer the leader" in cluster.broker_log(paused)


# -- R12: flipped bytes in a follower's committed log -------------------------------------------------------------


def _flip_byte_in_middle_block(partition_dir: Path) -> tuple[Path, int, int]:
    """Flip one payload byte of a block that is neither the first nor the last of the first segment.

    Returns the segment, the offset of the damaged frame and of the flipped byte.
    """
    (_, segment), *_ = list_segment_files(partition_dir / "log")
    data = bytearray(segment.read_bytes())
    offsets = []
    offset = 0
    while offset < len(data):
        header = verify_frame(data, offset)
        offsets.append((offset, header))
        offset += header.frame_size
    assert len(offsets) >= 3, f"{segment} holds only {len(offsets)} blocks"
    offset, header = offsets[len(offsets) // 2]
    where = offset + HEADER_SIZE + header.payload_length // 2
    data[where] ^= 0x40
    segment.write_bytes(bytes(data))
    return segment, offset, where


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_r12_corrupted_follower_log_is_detected_and_the_others_keep_serving(cluster: Cluster) -> None:
    deploy_one_task(cluster)
    partition = 1
    load = Load(cluster.gateway, job_timeout_ms=60_000).start()
    try:
        time.sleep(2.0)
    finally:
        history = load.finish()
    cluster.wait_replicas_equal()
    follower = next(n for n in cluster.replicas(partition) if n != cluster.wait_leader(partition))
    cluster.stop_broker(follower)
    segment, frame, where = _flip_byte_in_middle_block(cluster.partition_dir(follower, partition))
    log_before = len(cluster.broker_log(follower))

    restarted = True
    try:
        cluster.restart_broker(follower, timeout=30)
    except AssertionError:
        restarted = False
    message = cluster.broker_log(follower)[log_before:]
    health = cluster.health(follower) if restarted else None
    print(f"flipped a byte of {segment.name} at {where}; restarted={restarted}; health={health}")
    if restarted:
        # Started anyway: then the damaged partition must not serve from the damaged log.
        state = (health or {}).get("partitions", {}).get(str(partition), {})
        assert not state.get("healthy", False), f"partition {partition} serves from a corrupt log: {health}"
    assert f"{segment} is corrupt at byte {frame}" in message, f"no message naming {segment}:\n{message[-3000:]}"

    serving = creates_on_every_partition(cluster)
    print(f"the other two brokers serve every partition ({serving:.2f}s to a create on each)")
    cluster.down()
    logs = read_replica_logs(cluster, skip={(follower, partition)})
    check(cluster, history, logs)


# -- R14: a broker's data directory deleted -------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_r14_broker_with_deleted_data_rejoins_and_catches_up(cluster: Cluster) -> None:
    deploy_one_task(cluster)
    load = Load(cluster.gateway, job_timeout_ms=60_000).start()
    try:
        time.sleep(2.0)
        lost = _pure_follower(cluster)
        cluster.kill(lost)
        shutil.rmtree(cluster.broker(lost)["dataDir"])
        time.sleep(1.0)
        cluster.restart_broker(lost)
        started = time.monotonic()
        time.sleep(1.0)
    finally:
        history = load.finish()
    cluster.wait_replicas_equal()
    print(f"broker {lost} rebuilt from nothing: caught up {time.monotonic() - started:.2f}s after its restart")
    cluster.down()
    logs = read_replica_logs(cluster)
    check(cluster, history, logs)
    assert_replicas_equal(logs)
    assert all(logs[p][lost] for p in logs), "the rebuilt broker holds no records"
