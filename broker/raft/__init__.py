"""Raft replication of a partition's blocks: one pysyncobj group member per partition replica.

Public surface: `RaftConfig`, `ReplicatedLog` (contract, snapshots and durability in its module docstring),
`RaftRole`, `RaftStatus` and the `ReplicationError` family.
"""

from broker.raft._member import RaftRole
from broker.raft.config import RaftConfig, RaftConfigError
from broker.raft.errors import (
    BackpressureError,
    LeadershipLostError,
    NotLeaderError,
    ReplicaStoppedError,
    ReplicationError,
    ReplicationTimeoutError,
)
from broker.raft.replicated_log import RaftStatus, ReplicatedLog

__all__ = [
    "BackpressureError",
    "LeadershipLostError",
    "NotLeaderError",
    "RaftConfig",
    "RaftConfigError",
    "RaftRole",
    "RaftStatus",
    "ReplicaStoppedError",
    "ReplicatedLog",
    "ReplicationError",
    "ReplicationTimeoutError",
]
