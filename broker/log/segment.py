"""Segment files: naming, the in-memory sparse index, and the start-up scan that verifies every frame.

A segment is one file `<first_position:020d>.log` holding consecutive frames. The zero-padded name sorts like
the position it starts at, so a directory listing is already in log order.
"""

from __future__ import annotations

import logging
import mmap
import os
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

from broker.log.frame import FrameError, valid_frame_after, verify_frame
from broker.log.storage import LogCorruptionError

_log = logging.getLogger("weir.log")

_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
# One index entry per this many bytes: bounds both the index size (~1 entry per 64 KiB of log) and the bytes a
# reader skips to reach its start position.
INDEX_INTERVAL_BYTES = 64 * 1024


def segment_file_name(first_position: int) -> str:
    return f"{first_position:020d}.log"


def list_segment_files(directory: Path) -> list[tuple[int, Path]]:
    """Return `(first_position, path)` of every segment file in `directory`, in position order."""
    found = []
    for entry in os.scandir(directory):
        match = _SEGMENT_NAME.match(entry.name)
        if match and entry.is_file(follow_symlinks=False):
            found.append((int(match.group(1)), Path(entry.path)))
    found.sort()
    return found


@dataclass(slots=True)
class Segment:
    """Bookkeeping for one segment file: its position range, size and a sparse position→offset index.

    Mutated only under the owning log's lock; finished (non-active) segments never change again.
    """

    first_position: int
    path: Path
    last_position: int = 0
    size: int = 0
    _index_positions: list[int] = field(default_factory=list)
    _index_offsets: list[int] = field(default_factory=list)

    def record_frame(self, first_position: int, last_position: int, offset: int, frame_size: int) -> None:
        """Account for a frame written (or verified) at `offset`."""
        if not self._index_offsets or offset - self._index_offsets[-1] >= INDEX_INTERVAL_BYTES:
            self._index_positions.append(first_position)
            self._index_offsets.append(offset)
        self.last_position = last_position
        self.size = offset + frame_size

    def offset_near(self, position: int) -> int:
        """Offset of an indexed frame at or before the one holding `position` (at most one interval back)."""
        slot = bisect_right(self._index_positions, position) - 1
        return self._index_offsets[max(slot, 0)]


def corruption(path: Path, offset: int, positions: str, reason: str) -> LogCorruptionError:
    """Build the error an operator sees when durable log data cannot be trusted."""
    return LogCorruptionError(
        f"log segment {path} is corrupt at byte {offset} (positions {positions}): {reason}; "
        "the broker refuses to start — restore the partition from a replica or a backup"
    )


def scan_segment(path: Path, first_position: int, *, is_last: bool, committed_position_hint: int) -> Segment:
    """Verify every frame of one segment file and return its bookkeeping.

    - A bad frame at the end of the last segment, with no valid frame after it and positions above
      `committed_position_hint`, is a torn write from a crash: the file is truncated there (WARNING logged).
    - Any other bad frame, or positions that do not continue where the previous frame ended, raises
      LogCorruptionError.
    """
    segment = Segment(first_position=first_position, path=path)
    size = path.stat().st_size
    if size == 0:
        return segment
    expected = first_position
    offset = 0
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        while offset < size:
            try:
                header = verify_frame(data, offset)
            except FrameError as error:
                torn = is_last and expected > committed_position_hint
                if torn and valid_frame_after(data, offset + 1) is None:
                    break
                decoded = error.header
                if decoded is not None and decoded.first_position == expected:
                    positions = f"{decoded.first_position}..{decoded.last_position}"
                else:
                    positions = f"from {expected}"
                reason = error.reason
                if is_last and expected <= committed_position_hint:
                    reason += f" in committed data (positions up to {committed_position_hint} were committed)"
                elif is_last:
                    reason += " with valid frames after it"
                raise corruption(path, offset, positions, reason) from None
            if header.first_position != expected:
                kind = "gap" if header.first_position > expected else "overlap"
                raise corruption(
                    path,
                    offset,
                    f"{header.first_position}..{header.last_position}",
                    f"position {kind}: the frame should start at position {expected}",
                )
            segment.record_frame(header.first_position, header.last_position, offset, header.frame_size)
            expected = header.last_position + 1
            offset += header.frame_size
    if offset < size:
        _log.warning(
            "log segment %s has a torn tail at byte %d: cut %d bytes (positions from %d dropped)",
            path,
            offset,
            size - offset,
            expected,
        )
        os.truncate(path, offset)
    return segment
