"""Which partition owns a correlation key: where its messages are buffered and its subscriptions mirrored.

The hash is the one Zeebe uses (Java's ``String.hashCode`` over the key's UTF-8 bytes, taken as signed bytes, with
32-bit overflow), so a correlation key lands on the same partition in Weir as in Zeebe with the same partition count.
"""

from __future__ import annotations


def correlation_hash(correlation_key: str) -> int:
    h = 0
    for byte in correlation_key.encode():
        signed = byte - 256 if byte > 127 else byte
        h = (31 * h + signed) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def subscription_partition(correlation_key: str, partitions_count: int) -> int:
    """Partition id (1-based) for ``correlation_key``: ``abs(hash % count) + 1`` with Java's remainder."""
    h = correlation_hash(correlation_key)
    return abs(h) % partitions_count + 1
