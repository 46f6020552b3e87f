"""The seam between the stream platform and wherever a partition's log bytes live.

The engine, the stream processor and the replication layer only ever see `LogStorage`; the file-backed and the
in-memory implementations (and later a replicated one) are interchangeable behind it. The log knows nothing
about records: it stores opaque *blocks*, each covering a contiguous range of record positions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

CommitListener = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class LogBlock:
    """An opaque, immutable payload covering record positions `first_position..last_position` (inclusive).

    - The payload is produced elsewhere (an encoded, possibly compressed batch of records); the log never
      looks inside it.
    - Positions are ints >= 1 with `first_position <= last_position`; violations raise ValueError at
      construction, so a malformed block never reaches storage.
    """

    first_position: int
    last_position: int
    payload: bytes

    def __post_init__(self) -> None:
        if self.first_position < 1:
            raise ValueError(f"block first_position must be >= 1, got {self.first_position}")
        if self.last_position < self.first_position:
            raise ValueError(f"block last_position {self.last_position} is below first_position {self.first_position}")
        if not isinstance(self.payload, bytes):
            raise ValueError(f"block payload must be bytes, got {type(self.payload).__name__}")


class LogCorruptionError(Exception):
    """Durable log data failed verification (checksum, framing or position contiguity).

    Fail-stop: the broker must not serve a partition whose committed history it cannot trust. The message
    names the file, the byte offset and the positions involved, and what an operator can do about it.
    """


class LogWriteError(Exception):
    """A write or fsync to the log failed (for example ENOSPC).

    After a failed `append` the log holds no partial block and stays usable. After a failed `flush` the
    durability of unflushed data is unknown, so the log refuses further writes; reopen it to recover.
    """


class LogPositionCompactedError(LookupError):
    """A reader asked for a position that compaction has already deleted.

    Raised instead of silently skipping ahead: a reader that misses records would build a wrong state.
    """


@runtime_checkable
class LogStorage(Protocol):
    """A partition's append-only log of position-contiguous blocks.

    Contract:
    - `append` accepts blocks whose `first_position` is `last_position + 1` (any position >= 1 when empty);
      others raise ValueError. Appended blocks are neither durable nor readable until a `flush` commits them.
    - `flush` may run on a worker thread while another thread keeps appending; it commits exactly the blocks
      that were appended when it took the log's lock, never a partially written block.
    - Commit listeners run on the thread that called `flush`, after the commit position advanced.
    - `read` yields committed blocks only, in order, and asking for a compacted position raises
      `LogPositionCompactedError`.
    """

    def append(self, block: LogBlock) -> None:
        """Write `block` after the last appended one (buffered: not yet durable or committed)."""
        ...

    def flush(self) -> int:
        """Make every block appended so far durable, advance the commit position and return it."""
        ...

    @property
    def commit_position(self) -> int:
        """Last position that is durable and readable; 0 when nothing is committed."""
        ...

    @property
    def last_position(self) -> int:
        """Last appended position, committed or not; 0 when the log is empty."""
        ...

    @property
    def first_position(self) -> int:
        """First position still stored (compaction moves it forward); 0 when the log is empty."""
        ...

    def add_commit_listener(self, callback: CommitListener) -> None:
        """Call `callback(commit_position)` after each flush that advanced the commit position."""
        ...

    def read(self, from_position: int) -> Iterator[LogBlock]:
        """Yield committed blocks in order, starting with the block that contains `from_position`."""
        ...

    def delete_before(self, position: int) -> int:
        """Delete stored units whose blocks all end below `position`; return the bytes freed."""
        ...

    def close(self) -> None:
        """Release files and handles; further appends, flushes and reads raise ValueError."""
        ...
