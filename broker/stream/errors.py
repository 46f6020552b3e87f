"""Why a partition refused a command: what the gateway turns into UNAVAILABLE or RESOURCE_EXHAUSTED."""

from __future__ import annotations


class PartitionUnavailableError(Exception):
    """The partition cannot take commands now (starting, stopped, or failed and stopped to protect data)."""


class NotLeaderError(PartitionUnavailableError):
    """This replica does not lead the partition (now); the command was not taken, so it is safe to retry."""


class BackpressureError(Exception):
    """The partition has more commands waiting than it accepts; the client should back off and retry."""
