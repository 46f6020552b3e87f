"""What replication costs: completed one-task instances/s through the gateway, replication 3 against 1.

Run: ``.venv/bin/python tests/bench/cluster_bench.py [--runs 2] [--duration 15] [--concurrency 64]``. Each run starts
a fresh ``weir cluster up`` (3 brokers, 3 partitions) per replication factor, in alternating order so that drift of the
machine's load hits both alike, drives it with ``weir bench --json`` (closed loop, create-with-result, streamed
workers) after a short warm-up that also lets the deployment reach every partition, and stops it with
``weir cluster down``. Everything shares this machine's cores: brokers, gateway and load generator.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.cluster.harness import Cluster  # noqa: E402 (after the path set-up above)


def bench(address: str, duration: float, concurrency: int, rate: float = 0.0) -> dict[str, Any]:
    load = ["--rate", str(rate)] if rate else ["--concurrency", str(concurrency)]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "client.cli",
            "bench",
            "--address",
            address,
            "--duration",
            str(duration),
            *load,
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=duration + 120,
    )
    if done.returncode != 0:
        raise SystemExit(f"weir bench failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(root: Path, replication: int, args: argparse.Namespace) -> dict[str, Any]:
    cluster = Cluster(root / f"r{replication}", brokers=3, partitions=3, replication=replication)
    try:
        cluster.up()
        bench(cluster.gateway, args.warmup, args.concurrency)
        pids = {f"broker {b['nodeId']}": int(b["pid"]) for b in cluster.info["brokers"]}
        pids["gateway"] = int(cluster.info["gateway"]["pid"])
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        result = bench(cluster.gateway, args.duration, args.concurrency, args.rate)
        # Cores each process used while measured (the load generator itself is the rest of the machine).
        result["cores"] = {
            name: round((cpu_seconds(pid) - before[name]) / result["seconds"], 2) for name, pid in pids.items()
        }
        cluster.down()
        return result
    finally:
        cluster.kill_everything()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per replication factor (2)")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds of measured load per run (15)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of unmeasured load first (3)")
    parser.add_argument("--concurrency", type=int, default=64, help="instances in flight (64)")
    parser.add_argument("--rate", type=float, default=0.0, help="open loop at this many instances/s instead")
    args = parser.parse_args()
    results: dict[int, list[dict[str, Any]]] = {1: [], 3: []}
    with tempfile.TemporaryDirectory(prefix="weir-cluster-bench-") as tmp:
        for run in range(args.runs):
            order = (3, 1) if run % 2 == 0 else (1, 3)
            for replication in order:
                result = one_run(Path(tmp) / f"run{run}", replication, args)
                results[replication].append(result)
                print(
                    f"run {run + 1} R={replication}: {result['instancesPerSecond']:.1f} instances/s, "
                    f"p50 {result['latencyMs']['p50']} ms, p99 {result['latencyMs']['p99']} ms, "
                    f"errors {result['errors']}, rejected {result['backpressureRejections']}; cores used: "
                    + ", ".join(f"{name} {cores}" for name, cores in result["cores"].items()),
                    flush=True,
                )
    print("\n3 brokers, 3 partitions, one gateway; one-task, closed loop, median of runs:")
    medians = {}
    for replication in (1, 3):
        rows = results[replication]
        medians[replication] = statistics.median(r["instancesPerSecond"] for r in rows)
        p50 = statistics.median(r["latencyMs"]["p50"] for r in rows)
        p99 = statistics.median(r["latencyMs"]["p99"] for r in rows)
        print(
            f"  R={replication}: {medians[replication]:7.1f} completed instances/s   latency p50 {p50:6.1f} ms  "
            f"p99 {p99:6.1f} ms"
        )
    if medians[1]:
        print(f"  R=3 / R=1 throughput: {medians[3] / medians[1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
