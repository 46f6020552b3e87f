"""Median of several ``weir bench`` runs, each against a fresh single-node Weir, side by side per configuration.

Every run starts ``weir start`` on a new data folder (fsync on, as in production), runs ``weir bench --json`` against
it and stops it, so one run's log and state never slow the next. Configurations given with ``--config NAME=ARGS``
(extra ``weir start`` arguments) are interleaved run by run (every other run in reverse order), so a noisy neighbour
hurts them alike; the other configurations' instances/s are also shown as a share of the first's, run by run.
``--baseline DIR`` runs every configuration a second time with the broker code of another checkout (e.g. ``git
worktree add DIR HEAD~1``), for a before/after comparison in one run.

    .venv/bin/python tests/bench/bench_runs.py --runs 3 --duration 8 -- --process one-task
    .venv/bin/python tests/bench/bench_runs.py --runs 3 --config default= --config no-exporter=--no-exporter
    .venv/bin/python tests/bench/bench_runs.py --config "vegas=--no-exporter WEIR_BROKER_BACKPRESSURE_ALGORITHM=vegas"

Arguments of the form ``WEIR_…=value`` in a configuration are set in the broker's environment.
"""

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.harness import REPO, WeirProcess

FIELDS = (
    ("instancesPerSecond", "inst/s"),
    ("tasksPerSecond", "tasks/s"),
    ("latencyMs.p50", "p50ms"),
    ("latencyMs.p99", "p99ms"),
    ("backpressureRejections", "rejected"),
    ("errors", "errors"),
    ("brokerPeakRssMb", "RSS_MiB"),
    ("brokerCpuMsPerInstance", "cpu_ms/inst"),
)


def figure(summary: dict, path: str) -> float | None:
    value: object = summary
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return float(value) if isinstance(value, int | float) else None


def one_run(start_args: list[str], bench_args: list[str], duration: float, repo: Path) -> dict:
    env = dict(arg.split("=", 1) for arg in start_args if arg.startswith("WEIR_") and "=" in arg)
    start_args = [arg for arg in start_args if not (arg.startswith("WEIR_") and "=" in arg)]
    with tempfile.TemporaryDirectory(prefix="weir-bench-") as tmp:
        weir = WeirProcess(Path(tmp) / "data", extra_args=start_args, env=env, repo=repo).start()
        try:
            cmd = [sys.executable, "-m", "client.cli", "bench", "--address", weir.address, "--json"]
            cmd += ["--duration", str(duration), "--broker-pid", str(weir.pid), *bench_args]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=duration + 120)
            return json.loads(out.stdout.strip().splitlines()[-1])
        finally:
            weir.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--config", action="append", default=[], help="NAME=extra weir start args (repeatable)")
    parser.add_argument("--baseline", type=Path, help="also run each configuration with this checkout's broker")
    parser.add_argument("bench_args", nargs="*", help="arguments passed to weir bench (after --)")
    args = parser.parse_args()
    configs = [(*c.split("=", 1), REPO) for c in args.config] or [("default", "", REPO)]
    if args.baseline:
        configs += [(f"{name}@baseline", extra, args.baseline.resolve()) for name, extra, _ in configs]
    results: dict[str, list[dict]] = {name: [] for name, _, _ in configs}
    for run in range(args.runs):
        # Every other run goes through the configurations backwards, so none always runs right after the same one
        # (a run's leftovers, e.g. the previous data folder's deletion being written back, land on the next run).
        for name, extra, repo in configs if run % 2 == 0 else configs[::-1]:
            summary = one_run(shlex.split(extra), args.bench_args, args.duration, repo)
            results[name].append(summary)
            figures = " ".join(f"{label}={figure(summary, key)}" for key, label in FIELDS)
            print(f"run {run + 1} {name:>14}: {figures}", flush=True)
    print("median of", args.runs, "runs:")
    for name, runs in results.items():
        figures = []
        for key, label in FIELDS:
            values = [v for r in runs if (v := figure(r, key)) is not None]
            if values:
                figures.append(f"{label}={statistics.median(values):.1f}")
        print(f"  {name:>14}: {' '.join(figures)}", flush=True)
    first = configs[0][0]
    if len(configs) > 1:
        print(f"instances/s as a share of {first}'s, run by run (median):")
        for name, runs in list(results.items())[1:]:
            ratios = [
                b / a
                for ra, rb in zip(results[first], runs, strict=True)
                if (a := figure(ra, "instancesPerSecond")) and (b := figure(rb, "instancesPerSecond")) is not None
            ]
            shown = " ".join(f"{r:.0%}" for r in ratios)
            print(f"  {name:>14}: {shown}  (median {statistics.median(ratios):.0%})", flush=True)


if __name__ == "__main__":
    main()
