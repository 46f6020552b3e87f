"""Throughput of compiled FEEL expressions (evaluations per CPU second of one core).

Rates are per CPU second of this process (``time.process_time``), not wall-clock time, so a shared, busy
machine skews them less.

Run: ``.venv/bin/python tests/bench/feel_bench.py [--seconds 1.0] [--runs 3] [--baseline DIR]``. Prints the
median of the runs for each case; the target for the simple condition is at least 100,000 evaluations/s.

``--baseline DIR`` also measures the same cases with the FEEL of another checkout (e.g. one from before the
evaluation budget), alternating runs so that both see the same machine load, and prints the difference.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.environ.get("FEEL_BENCH_REPO") or str(Path(__file__).resolve().parents[2]))

from broker.feel import parse

CASES: list[tuple[str, str, dict[str, Any]]] = [
    (
        "simple condition",
        'amount > 100 and status = "open"',
        {"amount": 250.75, "status": "open", "customer": "c-17"},
    ),
    (
        "filter + function call",
        "sum(items[price > 10].price)",
        {"items": [{"sku": f"s{i}", "price": 5 + i * 2.5, "qty": i} for i in range(10)]},
    ),
    (
        "mapping with context literal",
        '{id: order.id, total: order.amount * 1.19, vip: order.amount > 1000, tag: "o-" + string(order.id)}',
        {"order": {"id": 42, "amount": 1234.5}},
    ),
    (
        "loop over 100 items",
        "for x in xs return x * 2 + 1",
        {"xs": list(range(100))},
    ),
    (
        "filter 100 contexts",
        'count(items[status = "open" and total > 50])',
        {"items": [{"status": "open" if i % 3 else "closed", "total": i} for i in range(100)]},
    ),
    (
        "regex match",
        'matches(email, "^[a-z0-9.]+@[a-z0-9.]+\\.[a-z]+$")',
        {"email": "jane.doe@example.com"},
    ),
]


def measure(expression: str, context: dict[str, Any], seconds: float) -> float:
    """Evaluations per CPU second of a compiled expression over roughly ``seconds`` of CPU time."""
    compiled = parse(expression)
    compiled.evaluate(context)
    batch = 200
    count = 0
    start = time.process_time()
    deadline = start + seconds
    while True:
        for _ in range(batch):
            compiled.evaluate(context)
        count += batch
        now = time.process_time()
        if now >= deadline:
            return count / (now - start)


def baseline_rates(directory: Path, seconds: float) -> list[float]:
    """One run of every case with the FEEL of the checkout in ``directory`` (in a process of its own)."""
    env = dict(os.environ, FEEL_BENCH_REPO=str(directory.resolve()))
    command = [sys.executable, __file__, "--seconds", str(seconds), "--runs", "1", "--json"]
    output = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    rates: list[float] = json.loads(output)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0, help="duration of one run per case")
    parser.add_argument("--runs", type=int, default=3, help="runs per case; the median is reported")
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with (e.g. without the budget)")
    parser.add_argument("--json", action="store_true", help="print only the rates of one run, as JSON")
    args = parser.parse_args()
    if args.json:
        print(json.dumps([measure(expression, context, args.seconds) for _, expression, context in CASES]))
        return
    ours: list[list[float]] = [[] for _ in CASES]
    theirs: list[list[float]] = [[] for _ in CASES]
    for _ in range(args.runs):
        for index, (_, expression, context) in enumerate(CASES):
            ours[index].append(measure(expression, context, args.seconds))
        if args.baseline is not None:
            for index, rate in enumerate(baseline_rates(args.baseline, args.seconds)):
                theirs[index].append(rate)
    for index, (name, expression, _) in enumerate(CASES):
        median = statistics.median(ours[index])
        runs = ", ".join(f"{r:,.0f}" for r in ours[index])
        print(f"{name:32s} {median:>12,.0f} evaluations/s  (runs: {runs})  {expression}")
        if args.baseline is not None:
            base = statistics.median(theirs[index])
            runs = ", ".join(f"{r:,.0f}" for r in theirs[index])
            change = (median / base - 1) * 100
            print(f"{'  baseline':32s} {base:>12,.0f} evaluations/s  (runs: {runs})  cost vs baseline: {-change:+.1f}%")


if __name__ == "__main__":
    main()
