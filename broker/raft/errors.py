"""Why a `replicate` call did not resolve with a committed index."""

from __future__ import annotations


class ReplicationError(Exception):
    """Base class. Unless a subclass says otherwise the outcome is *unknown*: the entry may still commit and
    then reaches every member through `on_commit`, which is the only source of truth."""


class NotLeaderError(ReplicationError):
    """This member is not the leader, or stopped being it before the block was appended: the block is never
    delivered to `on_commit` anywhere. `leader` is the last known leader address, if any."""

    def __init__(self, message: str, leader: str | None = None) -> None:
        super().__init__(message)
        self.leader = leader


class BackpressureError(ReplicationError):
    """`max_in_flight` calls are already waiting for commit; nothing was appended. Retry later."""


class LeadershipLostError(ReplicationError):
    """Leadership was lost while the entry waited for commit. Outcome unknown (a successor may commit it)."""


class ReplicationTimeoutError(ReplicationError):
    """No commit within the call's timeout. Outcome unknown."""


class ReplicaStoppedError(ReplicationError):
    """The member is closed or stopped after a fatal error; nothing more will be committed through it."""
