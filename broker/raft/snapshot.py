"""The Raft snapshot file: pysyncobj's two boundary log entries plus the higher layer's bytes, checksummed.

pysyncobj writes this file at log compaction (through our `serializer` hook), streams it to followers whose
next entry was compacted away, and reads it back (through `deserializer`) on such a follower and at restart.
Our own binary format instead of pickle: a snapshot arriving from the network is parsed, never unpickled.

Layout (little-endian): magic, version, then for the last and the previous entry `index, term, length`
followed by the raw command bytes, then the user bytes' length and the user bytes, then CRC-32 of all before.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"WEIRSNAP"
VERSION = 1
_HEADER = struct.Struct("<8sI")
_ENTRY = struct.Struct("<QQI")
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")

# pysyncobj's log entry: (command bytes, raft index, raft term).
RaftEntry = tuple[bytes, int, int]


class SnapshotCorruptError(ValueError):
    """The snapshot file is truncated or fails its checksum; it must not be applied."""


@dataclass(frozen=True, slots=True)
class RaftSnapshot:
    """What a snapshot holds: the entry it covers up to (`last`), the one before (pysyncobj keeps both in its
    log after compaction) and the higher layer's state."""

    last: RaftEntry
    previous: RaftEntry
    user_data: bytes

    @property
    def index(self) -> int:
        return self.last[1]

    def encode(self) -> bytes:
        parts = [_HEADER.pack(MAGIC, VERSION)]
        for command, index, term in (self.last, self.previous):
            parts.append(_ENTRY.pack(index, term, len(command)))
            parts.append(bytes(command))
        parts.append(_LENGTH.pack(len(self.user_data)))
        parts.append(self.user_data)
        body = b"".join(parts)
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def decode(cls, data: bytes) -> RaftSnapshot:
        if len(data) < _HEADER.size + _CRC.size:
            raise SnapshotCorruptError(f"snapshot of {len(data)} bytes is too short")
        body, (crc,) = data[: -_CRC.size], _CRC.unpack(data[-_CRC.size :])
        if zlib.crc32(body) != crc:
            raise SnapshotCorruptError("snapshot checksum mismatch")
        magic, version = _HEADER.unpack_from(body, 0)
        if magic != MAGIC or version != VERSION:
            raise SnapshotCorruptError(f"unknown snapshot format {magic!r} v{version}")
        offset = _HEADER.size
        entries: list[RaftEntry] = []
        for _ in range(2):
            index, term, length = _ENTRY.unpack_from(body, offset)
            offset += _ENTRY.size
            entries.append((bytes(body[offset : offset + length]), index, term))
            offset += length
        (length,) = _LENGTH.unpack_from(body, offset)
        offset += _LENGTH.size
        if offset + length != len(body):
            raise SnapshotCorruptError("snapshot length fields do not add up")
        return cls(last=entries[0], previous=entries[1], user_data=bytes(body[offset:]))


def write_snapshot_file(path: Path | str, snapshot: RaftSnapshot, fsync: bool) -> None:
    """Write `path` (pysyncobj renames it into place afterwards); fsync first when asked so the rename that
    follows never exposes an empty file after a power loss."""
    with open(path, "wb") as f:
        f.write(snapshot.encode())
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def read_snapshot_file(path: Path | str) -> RaftSnapshot:
    return RaftSnapshot.decode(Path(path).read_bytes())
