"""A tiny side file that remembers the log's commit position, so recovery can tell damage from a torn write.

Without it the only committed position a restarting partition knows is its snapshot's, and every block after the
snapshot looks like a possibly torn tail: a flipped byte in the last block would be cut away silently, losing
records that were acknowledged. The marker closes that gap at the cost of one small positional write per round:

- it is written only after the log's fsync returned, so the position it holds is always durable in the log;
- it is not fsynced itself: after a power loss it may be stale (a lower position), which only weakens detection
  back to the snapshot's position, never makes recovery wrong. After a process crash (kill -9) it is exact;
- it is one 16-byte write at offset 0 (magic, position, CRC), well inside one disk sector, and a marker that fails
  its CRC is ignored with a warning (it is a hint, never the source of truth).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from pathlib import Path

log = logging.getLogger("weir.partition")

FILE_NAME = "commit-position"
_MAGIC = b"WCMP"
_BODY = struct.Struct("<4sQ")
_CRC = struct.Struct("<I")
SIZE = _BODY.size + _CRC.size


def encode(position: int) -> bytes:
    body = _BODY.pack(_MAGIC, position)
    return body + _CRC.pack(zlib.crc32(body))


def read(directory: Path) -> int:
    """The position in the marker of ``directory``; 0 when there is none or it does not verify."""
    path = directory / FILE_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    if not data:  # created, then the broker stopped before its first commit
        return 0
    if len(data) == SIZE:
        magic, position = _BODY.unpack_from(data)
        (crc,) = _CRC.unpack_from(data, _BODY.size)
        if magic == _MAGIC and crc == zlib.crc32(data[: _BODY.size]):
            return int(position)
    log.warning(
        "ignoring unreadable commit marker %s (%d bytes); falling back to the snapshot position", path, len(data)
    )
    return 0


class CommitMarker:
    """The open marker file of one partition; ``record`` runs on the flushing thread right after the fsync."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._position = -1
        self._lock = threading.Lock()  # a late flush thread must never write through a closed (reused) fd

    def record(self, position: int) -> None:
        with self._lock:
            if self._fd is None or position <= self._position:
                return
            os.pwrite(self._fd, encode(position), 0)
            self._position = position

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
