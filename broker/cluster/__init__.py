"""Cluster shape: which brokers replicate which partitions, and where their Raft members listen."""

from broker.cluster.topology import ClusterLayout, Member, distribute_partitions

__all__ = ["ClusterLayout", "Member", "distribute_partitions"]
