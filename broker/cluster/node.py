"""Cluster mode for a broker: which partitions it replicates and the Raft configuration of each replica."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from broker.cluster.topology import ClusterLayout
from broker.raft import RaftConfig


class ClusterConfigError(ValueError):
    """The cluster settings do not describe a cluster this broker can join."""


def build_layout(
    *, node_id: int, contact_points: list[str], partitions_count: int, replication_factor: int
) -> ClusterLayout:
    try:
        members = ClusterLayout.parse_members(contact_points)
    except ValueError as e:
        raise ClusterConfigError(f"broker.cluster.initialContactPoints: {e}") from None
    if not 0 <= node_id < len(members):
        raise ClusterConfigError(
            f"broker.cluster.nodeId: {node_id} has no entry in broker.cluster.initialContactPoints "
            f"({len(members)} brokers listed)"
        )
    if not 1 <= replication_factor <= len(members):
        raise ClusterConfigError(
            f"broker.cluster.replicationFactor: {replication_factor} must be between 1 and the number of brokers "
            f"({len(members)})"
        )
    return ClusterLayout(members, partitions_count, replication_factor)


def raft_config(
    layout: ClusterLayout,
    node_id: int,
    partition_id: int,
    partition_dir: Path,
    password: str,
    bind_host: str | None = None,
) -> RaftConfig:
    """The Raft member of ``partition_id`` on this broker: its address, its peers, its journal folder, and the
    interface its port listens on (``broker.host``, like the command API and monitoring ports)."""
    if not password:
        raise ClusterConfigError(
            "broker.cluster.raftPassword: required when partitions are replicated (Raft traffic is encrypted and "
            "authenticated with it); set WEIR_BROKER_CLUSTER_RAFT_PASSWORD"
        )
    me, others = layout.raft_peers(partition_id, node_id)
    config = RaftConfig(
        self_address=me,
        partner_addresses=tuple(others),
        password=password,
        data_dir=partition_dir / "raft",
        bind_host=bind_host,
    )
    return _with_election_priority(config, preferred=layout.replicas()[partition_id][0] == node_id).validate()


def _with_election_priority(config: RaftConfig, *, preferred: bool) -> RaftConfig:
    """Let the partition's first replica win elections when it can, so leaders spread over the brokers.

    A leader does every partition's processing, so three leaders on one broker make it the bottleneck of the cluster
    (measured: one broker at 0.5 cores while the others idle at 0.26). Raft elects whoever times out first: the
    preferred replica waits the lower half of the election window, the others the upper part, stretched a little.
    Any replica still takes over when the preferred one is gone; a returning preferred replica does not take
    leadership back.
    """
    low, high = config.election_min_seconds, config.election_max_seconds
    middle = (low + high) / 2
    if preferred:
        return dataclasses.replace(config, election_max_seconds=middle)
    return dataclasses.replace(config, election_min_seconds=middle, election_max_seconds=high + (middle - low))
