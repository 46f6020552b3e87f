"""``weir sim``'s command line, apart from the simulator: every ``weir`` command builds its parser, and this way none
imports the engine for it (half a second of every CLI call)."""

from __future__ import annotations

import argparse

from client.sim.bugs import BUGS

FAULTS = ("crash", "cut", "isolate-leader", "drop", "duplicate", "delay", "disk-full", "slow-fsync", "clock-jump")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=1, help="the first seed (1)")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds to run, from --seed on (1)")
    parser.add_argument("--ticks", type=int, default=3000, help="ticks of 10 ms of load and faults per run (3000)")
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--replication", type=int, default=1)
    parser.add_argument(
        "--faults",
        default="",
        help=f"comma-separated faults to inject, from: {', '.join(FAULTS)}; 'all' for every one (none)",
    )
    parser.add_argument("--inject-bug", choices=sorted(BUGS), help="run with a deliberate bug (to see it caught)")
    parser.add_argument("--quiet", action="store_true", help="print only each run's final lines")
    parser.add_argument(
        "--log-level", default="CRITICAL", help="the brokers' own log lines, to stderr (CRITICAL: none but fatal)"
    )
