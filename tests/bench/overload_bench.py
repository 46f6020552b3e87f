"""Overload: a single-node Weir offered several times what it sustains, then offered a normal load again.

Phases against one fresh ``weir start`` (fsync on), each a ``weir bench --role starter --json`` run, while one
``weir bench --role worker`` process completes the jobs throughout (as in production, workers are not the
process that floods the broker, so an overloaded starter does not starve them):
1. sustainable: closed loop (``--concurrency``) for ``--measure`` seconds: the sustainable rate S;
2. overload: open loop at ``--factor`` × S for ``--seconds`` seconds (bounded in flight);
3. recovery: closed loop again for ``--measure`` seconds; the timeline shows how soon it is back at S.
Prints accepted throughput under overload as a share of S, p99 of accepted requests, backpressure rejections,
the broker's RSS (peak and after each phase), whether it stayed up, and the recovery timeline.

    .venv/bin/python tests/bench/overload_bench.py --seconds 60 --factor 3
    .venv/bin/python tests/bench/overload_bench.py --seconds 60 --factor 3 -- --backpressure-algorithm vegas
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.harness import WeirProcess


def rss_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def bench_command(weir: WeirProcess, seconds: float, *args: str) -> list[str]:
    cmd = [sys.executable, "-m", "client.cli", "bench", "--address", weir.address, "--json"]
    return [*cmd, "--duration", str(seconds), "--broker-pid", str(weir.pid), *args]


def bench(weir: WeirProcess, seconds: float, *args: str) -> dict:
    cmd = bench_command(weir, seconds, "--role", "starter", *args)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=seconds + 180)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the overload phase")
    parser.add_argument("--measure", type=float, default=10.0, help="length of the sustainable and recovery phases")
    parser.add_argument("--factor", type=float, default=3.0, help="overload = factor × sustainable rate")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("start_args", nargs="*", help="extra weir start arguments (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="weir-overload-") as tmp:
        weir = WeirProcess(Path(tmp) / "data", extra_args=["--no-exporter", *args.start_args]).start()
        total = 2 * args.measure + args.seconds + 240  # the worker outlives every phase and its drain
        worker = subprocess.Popen(
            bench_command(weir, total, "--role", "worker"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            time.sleep(2)  # the worker's job streams are open before the first instance starts
            base = bench(weir, args.measure, "--concurrency", str(args.concurrency))
            sustainable = base["instancesPerSecond"]
            rss_base = rss_mb(weir.pid, "VmRSS")
            print(f"sustainable: {sustainable:.0f} instances/s, p99 {base['latencyMs']['p99']} ms", flush=True)
            offered = sustainable * args.factor
            over = bench(weir, args.seconds, "--rate", f"{offered:.0f}", "--max-in-flight", "5000")
            rss_over = rss_mb(weir.pid, "VmRSS")
            accepted = over["instancesPerSecond"]
            print(
                f"overload {args.factor:g}× ({offered:.0f}/s offered for {args.seconds:g} s): accepted and completed "
                f"{accepted:.0f}/s = {100 * accepted / sustainable:.0f} % of sustainable; p50 "
                f"{over['latencyMs']['p50']} ms, p99 {over['latencyMs']['p99']} ms of accepted; "
                f"{over['backpressureRejections']} rejected with RESOURCE_EXHAUSTED, {over['errors']} other errors"
                + (f" (last: {over['lastError']})" if over["errors"] else ""),
                flush=True,
            )
            after = bench(weir, args.measure, "--concurrency", str(args.concurrency))
            alive = weir.proc is not None and weir.proc.poll() is None
            rates = [row[1] for row in after["timeline"]]
            recovered_at = next((i for i, r in enumerate(rates) if r >= 0.8 * sustainable), None)
            print(
                f"recovery: {after['instancesPerSecond']:.0f}/s = {100 * after['instancesPerSecond'] / sustainable:.0f}"
                f" % of sustainable; per second {rates}; at ≥80 % from second {recovered_at}",
                flush=True,
            )
            print(
                f"broker RSS MiB: after warm-up {rss_base:.0f}, after overload {rss_over:.0f}, peak "
                f"{rss_mb(weir.pid, 'VmHWM'):.0f}; broker alive: {alive}",
                flush=True,
            )
            timeline = " ".join(f"{c}/{r}" for _, c, r in over["timeline"])
            print(f"overload timeline (completed/rejected per second): {timeline}", flush=True)
        finally:
            worker.kill()
            weir.stop()


if __name__ == "__main__":
    main()
