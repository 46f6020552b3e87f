"""What the simulator's tests share: the cluster they run, one run per seed in a process, ``weir sim`` in another.

The tests are split over files so that a parallel run (``make test``) spreads them over its processes; each file
keeps its own runs. Many seeds: ``weir sim --seed 1 --seeds 1000 --brokers 3 --partitions 3 --faults all --quiet``.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from typing import Any

from client.sim.run import FAULTS, SimConfig, SimResult, run

TICKS = 1500


def config(
    seed: int,
    *,
    faults: tuple[str, ...] = FAULTS,
    brokers: int = 3,
    partitions: int = 3,
    replication: int = 1,
    ticks: int = TICKS,
) -> SimConfig:
    return SimConfig(seed, ticks, brokers, partitions, replication, faults)


@functools.cache
def run_once(seed: int, **cluster: Any) -> SimResult:
    """One run per seed and cluster in this process, shared by the tests that look at it."""
    return run(config(seed, **cluster), None)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``weir sim`` in another process, started now (it runs while this one runs its own)."""
    return subprocess.Popen(
        [sys.executable, "-m", "client.cli", "sim", *args, "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
