"""Completed call-activity chains per second through pyzeebe, against a real single-node Weir.

Each instance of call-chain.bpmn calls a child process, which calls a grandchild with one job: three process
instances and one job per completed chain. Starts ``weir start`` on free ports (fsync on, as in production), then for
each run creates chains from ``--concurrency`` client tasks with create-with-result while a pyzeebe worker completes
the jobs; with ``--baseline`` each run also measures one-task.bpmn (one instance, one job) on the same broker for
comparison. Prints one line per run, the medians and the broker's peak RSS. The load generator shares the machine
with the broker, so the figures are floors, not ceilings. Nothing is asserted.

    .venv/bin/python tests/bench/call_chain_bench.py --seconds 10 --runs 3 --baseline
"""

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pyzeebe import ZeebeClient, ZeebeWorker, create_insecure_channel
from pyzeebe.errors import ZeebeBackPressureError

from tests.bench.instances_bench import rss_mb
from tests.harness import BPMN, WeirProcess


async def run_once(
    address: str, fixture: str, job_type: str, seconds: float, concurrency: int
) -> tuple[list[float], float]:
    """Create-with-result latencies of the instances created within ``seconds``, and the time they all took."""
    channel = create_insecure_channel(grpc_address=address)
    client = ZeebeClient(channel)
    await client.deploy_resource(str(BPMN / fixture))
    worker = ZeebeWorker(channel, max_connection_retries=-1)

    @worker.task(task_type=job_type, max_jobs_to_activate=64, max_running_jobs=256, timeout_ms=30_000)
    async def work() -> dict:
        return {"done": True}

    work_task = asyncio.create_task(worker.work())
    latencies: list[float] = []
    stop_at = time.monotonic() + seconds
    process_id = fixture.removesuffix(".bpmn")

    async def creator() -> None:
        while time.monotonic() < stop_at:
            t0 = time.monotonic()
            try:
                await client.run_process_with_result(process_id, {"escalate": False}, timeout=30_000)
            except ZeebeBackPressureError:  # the broker sheds load: back off, as a client should
                await asyncio.sleep(0.02)
                continue
            latencies.append(time.monotonic() - t0)

    started = time.monotonic()
    await asyncio.gather(*(creator() for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    await worker.stop()
    work_task.cancel()
    await asyncio.gather(work_task, return_exceptions=True)
    await channel.close()
    return latencies, elapsed


def describe(name: str, result: tuple[list[float], float]) -> tuple[float, str]:
    latencies, seconds = result
    latencies.sort()
    rate = len(latencies) / seconds
    p50 = latencies[len(latencies) // 2] * 1000 if latencies else 0
    p99 = latencies[int(len(latencies) * 0.99)] * 1000 if latencies else 0
    return rate, f"{name}: {rate:6.0f}/s  p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  ({len(latencies)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--baseline", action="store_true", help="also measure one-task instances in each run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        weir = WeirProcess(Path(tmp) / "data", extra_args=["--log-level", "WARNING"])
        weir.start()
        try:
            chains: list[float] = []
            singles: list[float] = []
            for i in range(args.runs):
                lat = asyncio.run(
                    run_once(weir.address, "call-chain.bpmn", "chain-work", args.seconds, args.concurrency)
                )
                rate, line = describe("chains (3 instances + 1 job)", lat)
                chains.append(rate)
                if args.baseline:
                    lat = asyncio.run(run_once(weir.address, "one-task.bpmn", "test", args.seconds, args.concurrency))
                    single, single_line = describe("one-task", lat)
                    singles.append(single)
                    line += f"  |  {single_line}"
                print(f"run {i + 1}: {line}", flush=True)
            summary = f"median: {statistics.median(chains):.0f} completed parent→child→grandchild chains/s"
            if singles:
                summary += f", {statistics.median(singles):.0f} one-task instances/s"
            print(f"{summary}; broker peak RSS {rss_mb(weir.pid):.0f} MiB; cores: {os.cpu_count()}", flush=True)
        finally:
            weir.stop()


if __name__ == "__main__":
    main()
