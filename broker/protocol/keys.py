"""Keys carry their partition in the high bits, so any keyed command can be routed without a lookup.

``key = partition_id << 51 | counter`` — the first key on partition 1 is 2251799813685249, as in Zeebe.
"""

from __future__ import annotations

PARTITION_BITS = 51
_COUNTER_MASK = (1 << PARTITION_BITS) - 1
MAX_PARTITIONS = 8191


def encode_key(partition_id: int, counter: int) -> int:
    return (partition_id << PARTITION_BITS) | counter


def partition_of(key: int) -> int:
    """The partition that owns ``key`` (0 for keys that are not valid Weir keys)."""
    if key <= 0:
        return 0
    return key >> PARTITION_BITS


def counter_of(key: int) -> int:
    return key & _COUNTER_MASK


class KeyGenerator:
    """Issues the partition's keys. Its counter lives in state and is restored from replayed records."""

    __slots__ = ("_counter", "_partition_id")

    def __init__(self, partition_id: int, counter: int = 0) -> None:
        self._partition_id = partition_id
        self._counter = counter

    @property
    def counter(self) -> int:
        return self._counter

    def next_key(self) -> int:
        self._counter += 1
        return encode_key(self._partition_id, self._counter)

    def observe(self, key: int) -> None:
        """Raise the counter past a key seen in the log (replay), so no key is ever issued twice."""
        if key > 0 and partition_of(key) == self._partition_id:
            c = counter_of(key)
            if c > self._counter:
                self._counter = c

    def reset(self, counter: int) -> None:
        self._counter = counter
