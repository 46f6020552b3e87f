"""Raft replication figures: 3 members as separate processes on 127.0.0.1 (all on this machine's cores).

Run: ``.venv/bin/python tests/bench/raft_bench.py [--runs 3] [--kills 3] [--no-fsync-too]``. For each
configuration (fsync on, as in production; off, to show what durability costs) it prints medians of the runs:
- commit rate (blocks/s) for 1-KiB and 10-KiB blocks with N calls in flight (one fresh group per run);
- latency of one synchronous `replicate` at a time, p50 and p99;
- failover: kill -9 of the leader -> first commit of a block proposed to the new leader, p50 and max over
  `--kills` kills per run (the killed member is restarted before the next kill).
The load generator runs inside the leader's process, so the rates are what a partition leader can push.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.raft.cluster import Cluster, wait_until

RATE_CASES = [(1024, 64, 6000), (1024, 256, 8000), (10240, 64, 2000)]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def one_run(root: Path, config: dict[str, Any], kills: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    with Cluster(root / "rates", config=config) as cluster:
        leader = cluster.leader()
        leader.request(op="load", count=500, size=1024, in_flight=64, prefix="warm")
        for size, in_flight, count in RATE_CASES:
            reply = leader.request(op="load", count=count, size=size, in_flight=in_flight, prefix=f"r{size}")
            figures[f"rate {size // 1024:>2} KiB x{in_flight:<3} in flight (blocks/s)"] = (
                reply["acked"] / reply["seconds"]
            )
        reply = leader.request(op="sync", count=300, size=1024, prefix="sync")
        figures["sync replicate p50 (ms)"] = percentile(reply["latencies"], 0.5) * 1000
        figures["sync replicate p99 (ms)"] = percentile(reply["latencies"], 0.99) * 1000
    failovers = []
    with Cluster(root / "failover", config=config) as cluster:
        for member in cluster.members:
            member.send(op="writer", size=1024, in_flight=16, prefix="f")
        for _ in range(kills):
            leader = cluster.leader()
            wait_until(lambda m=leader: len(m.acks()) > 100, 20, "load on the leader")  # type: ignore[misc]
            time.sleep(2.0)  # a long-running leader: idle follower links are the slow part of failover
            killed_at = time.time()
            leader.kill()
            survivors = [m for m in cluster.members if m is not leader]
            new = cluster.leader(among=survivors)
            since = killed_at
            acks = wait_until(lambda m=new, t=since: [a for a in m.acks() if a[2] > t], 20, "new commits")  # type: ignore[misc]
            failovers.append(acks[0][2] - killed_at)
            leader.start()
            leader.send(op="writer", size=1024, in_flight=16, prefix="f")
    figures["failover p50 (ms)"] = percentile(failovers, 0.5) * 1000
    figures["failover max (ms)"] = max(failovers) * 1000
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--no-fsync-too", action="store_true", help="also measure with fsync=False")
    args = parser.parse_args()
    configs = {"fsync on": {"fsync": True}}
    if args.no_fsync_too:
        configs["fsync off"] = {"fsync": False}
    for name, config in configs.items():
        runs = []
        for run in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="raft-bench-") as root:
                figures = one_run(Path(root), config, args.kills)
            print(f"[{name}] run {run + 1}: " + ", ".join(f"{k.split(' (')[0]}={v:.1f}" for k, v in figures.items()))
            runs.append(figures)
        print(f"== {name}: median of {len(runs)} runs")
        for key in runs[0]:
            print(f"  {key:<45} {statistics.median(r[key] for r in runs):>10.1f}")


if __name__ == "__main__":
    main()
