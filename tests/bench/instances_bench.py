"""Completed one-task instances per second through pyzeebe, against a real single-node Weir.

Starts ``weir start`` on free ports (fsync on, as in production), deploys one-task.bpmn, then for each run creates
instances from ``--concurrency`` client tasks while a pyzeebe worker completes the jobs, and counts instances whose
create-with-result returned (creation → job → completion → result). Prints one line per run and the median.
The load generator shares the machine with the broker, so the figure is a floor, not a ceiling.

    .venv/bin/python tests/bench/instances_bench.py --seconds 10 --runs 3
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

from tests.harness import BPMN, WeirProcess


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


async def run_once(address: str, seconds: float, concurrency: int) -> tuple[float, list[float]]:
    channel = create_insecure_channel(grpc_address=address)
    client = ZeebeClient(channel)
    await client.deploy_resource(str(BPMN / "one-task.bpmn"))
    worker = ZeebeWorker(channel, max_connection_retries=-1)

    @worker.task(task_type="test", max_jobs_to_activate=64, max_running_jobs=256, timeout_ms=30_000)
    async def work() -> dict:
        return {"ok": True}

    work_task = asyncio.create_task(worker.work())
    latencies: list[float] = []
    stop_at = time.monotonic() + seconds

    async def creator() -> None:
        while time.monotonic() < stop_at:
            t0 = time.monotonic()
            await client.run_process_with_result("one-task", {"n": 1}, timeout=30_000)
            latencies.append(time.monotonic() - t0)

    started = time.monotonic()
    await asyncio.gather(*(creator() for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    await worker.stop()
    work_task.cancel()
    return len(latencies) / elapsed, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--no-exporter", action="store_true", help="without weir start's default JSON-lines exporter")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        extra = ["--log-level", "WARNING"] + (["--no-exporter"] if args.no_exporter else [])
        weir = WeirProcess(Path(tmp) / "data", extra_args=extra)
        weir.start()
        try:
            rates = []
            for i in range(args.runs):
                rate, lat = asyncio.run(run_once(weir.address, args.seconds, args.concurrency))
                lat.sort()
                p50 = lat[len(lat) // 2] * 1000 if lat else 0
                p99 = lat[int(len(lat) * 0.99)] * 1000 if lat else 0
                rates.append(rate)
                print(
                    f"run {i + 1}: {rate:7.0f} completed instances/s  create→complete p50 {p50:6.1f} ms"
                    f"  p99 {p99:6.1f} ms  ({len(lat)} instances, concurrency {args.concurrency})",
                    flush=True,
                )
            print(
                f"median: {statistics.median(rates):.0f} completed one-task instances/s; "
                f"broker peak RSS {rss_mb(weir.pid):.0f} MiB; cores: {os.cpu_count()}"
            )
        finally:
            weir.stop()


if __name__ == "__main__":
    main()
