"""The simulator is deterministic, and a fixed seed set of 3 brokers × 3 partitions keeps every invariant under every
fault (client/sim: production partitions, gateway command layer and exporters on simulated time, disk and network).
"""

from __future__ import annotations

import pytest

from tests.sim.common import TICKS, cli, run_once

# A fixed seed set that every change must keep clean: 3 brokers × 3 partitions, every fault.
CLEAN_SEEDS = range(1, 5)


def test_the_same_seed_gives_the_same_transcript_in_this_process_and_another() -> None:
    """A fresh process with another hash seed gives the transcript of this one, which may have run other simulations
    (with injected bugs too) before: nothing of a run depends on the process or is left behind by an earlier run."""
    other = cli(
        *("--seed", "1", "--ticks", str(TICKS), "--brokers", "3", "--partitions", "3", "--faults", "all"),
        env={"PYTHONHASHSEED": "123", "PATH": "/usr/bin:/bin"},
    )
    first = run_once(1)
    assert len(first.transcript) > 500, "a run this long has many events"
    out, err = other.communicate(timeout=300)
    assert other.returncode == 0, out + err
    assert f"transcript sha256 {first.sha256}" in out


def test_a_different_seed_gives_a_different_run() -> None:
    assert run_once(1).sha256 != run_once(2).sha256


@pytest.mark.parametrize("seed", CLEAN_SEEDS)
def test_the_fixed_seed_set_keeps_every_invariant_under_every_fault(seed: int) -> None:
    result = run_once(seed)
    assert not result.violations, "\n".join(result.violations[:10] + result.transcript[-20:])
    outcomes = [line for line in result.transcript if "drained:" in line]
    assert outcomes and "instances=0 " not in outcomes[-1], "the workload ran"
    assert " pushed=0 " not in outcomes[-1], "jobs were pushed to job streams"
    assert any(" fault " in line for line in result.transcript), "faults were injected"
