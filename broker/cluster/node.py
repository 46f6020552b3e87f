"""Cluster mode for a broker: which partitions it replicates and the Raft configuration of each replica."""

from __future__ import annotations

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
    layout: ClusterLayout, node_id: int, partition_id: int, partition_dir: Path, password: str
) -> RaftConfig:
    """The Raft member of ``partition_id`` on this broker: its address, its peers, its journal folder."""
    if not password:
        raise ClusterConfigError(
            "broker.cluster.raftPassword: required when partitions are replicated (Raft traffic is encrypted and "
            "authenticated with it); set WEIR_BROKER_CLUSTER_RAFT_PASSWORD"
        )
    me, others = layout.raft_peers(partition_id, node_id)
    return RaftConfig(
        self_address=me,
        partner_addresses=tuple(others),
        password=password,
        data_dir=partition_dir / "raft",
    ).validate()
