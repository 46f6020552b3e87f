"""Throughput of compiled FEEL expressions (evaluations per second on one core).

Run: ``.venv/bin/python tests/bench/feel_bench.py [--seconds 1.0] [--runs 3]``. Prints the median of
the runs for each case; the target for the simple condition is at least 100,000 evaluations/s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

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
]


def measure(expression: str, context: dict[str, Any], seconds: float) -> float:
    """Evaluations per second of a compiled expression over roughly ``seconds``."""
    compiled = parse(expression)
    compiled.evaluate(context)
    batch = 1000
    count = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(batch):
            compiled.evaluate(context)
        count += batch
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0, help="duration of one run per case")
    parser.add_argument("--runs", type=int, default=3, help="runs per case; the median is reported")
    args = parser.parse_args()
    for name, expression, context in CASES:
        rates = [measure(expression, context, args.seconds) for _ in range(args.runs)]
        median = statistics.median(rates)
        runs = ", ".join(f"{r:,.0f}" for r in rates)
        print(f"{name:32s} {median:>12,.0f} evaluations/s  (runs: {runs})  {expression}")


if __name__ == "__main__":
    main()
