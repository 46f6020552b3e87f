"""A replicated cluster in the simulator: the production Raft member on simulated transport, clock and disk."""

from __future__ import annotations

from client.sim.run import run
from tests.sim.common import cli, config

SEED = 2
# Seven simulated seconds of load, as in the injected-bug runs: seed 2's include a broker crash.
TICKS = 700


def test_a_replicated_cluster_is_deterministic_and_keeps_every_invariant_under_every_fault() -> None:
    """Three replicas per partition: the production Raft member on simulated transport, clock and disk. The seed is
    one whose faults include a broker crash (seed 1's do not)."""
    other = cli(
        *("--seed", str(SEED), "--ticks", str(TICKS), "--brokers", "3", "--partitions", "3", "--replication", "3"),
        *("--faults", "all"),
    )
    first = run(config(SEED, replication=3, ticks=TICKS), None)
    assert not first.violations, "\n".join(first.violations[:10] + first.transcript[-20:])
    assert any(" fault crash" in line for line in first.transcript)
    out, err = other.communicate(timeout=300)
    assert other.returncode == 0, out + err
    assert f"transcript sha256 {first.sha256}" in out
