"""Partition distribution: N brokers, P partitions, replication factor R, assigned round-robin as Zeebe does.

Partition p (1-based) is replicated on brokers ``(p - 1 + i) mod N`` for ``i`` in ``0..R-1``, so replicas — and, with
leadership tending to the first member, leaders — spread evenly over the brokers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Member:
    """A broker as the cluster knows it: node id, host, the base of its Raft ports (one port per partition) and,
    when it differs from this broker's own, the port of its command API."""

    node_id: int
    host: str
    raft_base_port: int
    command_port: int | None = None

    def command_address(self, default_port: int) -> str:
        return f"{self.host}:{self.command_port or default_port}"

    def raft_address(self, partition_id: int, partitions_count: int) -> str:
        """The Raft member address of this broker for ``partition_id``: base port + partition index."""
        if not 1 <= partition_id <= partitions_count:
            raise ValueError(f"partition {partition_id} is outside 1..{partitions_count}")
        return f"{self.host}:{self.raft_base_port + partition_id - 1}"


def distribute_partitions(cluster_size: int, partitions_count: int, replication_factor: int) -> dict[int, list[int]]:
    """Partition id -> node ids of its replicas, first one preferred as leader."""
    if cluster_size < 1 or partitions_count < 1:
        raise ValueError("cluster size and partition count must be at least 1")
    if not 1 <= replication_factor <= cluster_size:
        raise ValueError(f"replication factor {replication_factor} must be between 1 and cluster size {cluster_size}")
    return {p: [(p - 1 + i) % cluster_size for i in range(replication_factor)] for p in range(1, partitions_count + 1)}


@dataclass(frozen=True, slots=True)
class ClusterLayout:
    """Everything a broker needs to know about the cluster to host its partitions."""

    members: tuple[Member, ...]
    partitions_count: int
    replication_factor: int

    @staticmethod
    def parse_members(specs: list[str]) -> tuple[Member, ...]:
        """``host:raftBasePort[:commandPort]`` per node id, in node-id order (``initialContactPoints``)."""
        out = []
        for node_id, spec in enumerate(specs):
            parts = spec.rsplit(":", 2) if spec.count(":") >= 2 else spec.rsplit(":", 1)
            host, ports = parts[0], parts[1:]
            if not host or not ports or not all(p.isdigit() for p in ports):
                raise ValueError(f"contact point #{node_id} '{spec}' must look like host:raftBasePort[:commandPort]")
            out.append(Member(node_id, host, int(ports[0]), int(ports[1]) if len(ports) == 2 else None))
        return tuple(out)

    @property
    def cluster_size(self) -> int:
        return len(self.members)

    def replicas(self) -> dict[int, list[int]]:
        return distribute_partitions(self.cluster_size, self.partitions_count, self.replication_factor)

    def partitions_of(self, node_id: int) -> list[int]:
        return [p for p, nodes in self.replicas().items() if node_id in nodes]

    def raft_peers(self, partition_id: int, node_id: int) -> tuple[str, list[str]]:
        """(this node's Raft address, the other replicas' addresses) for a partition this node hosts."""
        nodes = self.replicas()[partition_id]
        if node_id not in nodes:
            raise ValueError(f"node {node_id} does not replicate partition {partition_id}")
        me = self.members[node_id].raft_address(partition_id, self.partitions_count)
        others = [self.members[n].raft_address(partition_id, self.partitions_count) for n in nodes if n != node_id]
        return me, others
