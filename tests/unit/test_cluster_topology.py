"""Partition distribution and Raft addressing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from broker.cluster import ClusterLayout, distribute_partitions


def test_round_robin_like_zeebe() -> None:
    assert distribute_partitions(3, 3, 3) == {1: [0, 1, 2], 2: [1, 2, 0], 3: [2, 0, 1]}
    assert distribute_partitions(3, 3, 1) == {1: [0], 2: [1], 3: [2]}
    assert distribute_partitions(1, 2, 1) == {1: [0], 2: [0]}


def test_replicas_and_preferred_leaders_spread_evenly() -> None:
    dist = distribute_partitions(5, 10, 3)
    load = Counter(n for nodes in dist.values() for n in nodes)
    assert set(load.values()) == {6}
    firsts = Counter(nodes[0] for nodes in dist.values())
    assert set(firsts.values()) == {2}
    assert all(len(set(nodes)) == 3 for nodes in dist.values())


@pytest.mark.parametrize(("n", "p", "r"), [(0, 1, 1), (3, 0, 1), (3, 3, 4), (3, 3, 0)])
def test_invalid_shapes(n: int, p: int, r: int) -> None:
    with pytest.raises(ValueError):
        distribute_partitions(n, p, r)


def test_raft_addresses() -> None:
    layout = ClusterLayout(ClusterLayout.parse_members(["10.0.0.1:26502", "10.0.0.2:26502", "10.0.0.3:26502"]), 3, 3)
    assert layout.partitions_of(1) == [1, 2, 3]
    me, others = layout.raft_peers(2, 0)
    assert me == "10.0.0.1:26503"
    assert sorted(others) == ["10.0.0.2:26503", "10.0.0.3:26503"]
    with pytest.raises(ValueError, match="host:raftBasePort"):
        ClusterLayout.parse_members(["nohost"])


def test_the_preferred_replica_times_out_first_so_leaders_spread(tmp_path: Path) -> None:
    from broker.cluster.node import raft_config

    layout = ClusterLayout(ClusterLayout.parse_members(["h:1000", "h:2000", "h:3000"]), 3, 3)
    for partition, nodes in layout.replicas().items():
        configs = {n: raft_config(layout, n, partition, tmp_path / f"{n}-{partition}", "pw") for n in nodes}
        preferred, *rest = nodes
        for other in rest:
            # the whole window of the preferred replica lies before the others'
            assert configs[preferred].election_max_seconds <= configs[other].election_min_seconds
            assert configs[other].connection_timeout_seconds >= configs[other].election_max_seconds
