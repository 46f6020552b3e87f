"""An in-memory `LogStorage` for engine unit tests and the deterministic simulation.

It follows the same contract as the file log (contiguity, commit only on flush, committed-only reads,
compaction errors) so code tested against it behaves the same on disk. Nothing survives the process.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right
from collections.abc import Iterator

from broker.log.storage import CommitListener, LogBlock, LogPositionCompactedError

_log = logging.getLogger("weir.log")


class MemoryLog:
    """A list of blocks behind a lock; `flush` commits everything appended when it takes the lock.

    Compaction works per block (the in-memory counterpart of a segment) and, like the file log, always keeps
    the last block so the log never forgets where it ends. Commit listeners run on the flushing thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blocks: list[LogBlock] = []
        self._firsts: list[int] = []
        self._commit_position = 0
        self._listeners: list[CommitListener] = []
        self._closed = False

    @property
    def commit_position(self) -> int:
        return self._commit_position

    @property
    def last_position(self) -> int:
        blocks = self._blocks
        return blocks[-1].last_position if blocks else 0

    @property
    def first_position(self) -> int:
        blocks = self._blocks
        return blocks[0].first_position if blocks else 0

    def append(self, block: LogBlock) -> None:
        """Add `block` (uncommitted); ValueError if it does not continue the log."""
        with self._lock:
            self._check_open()
            if self._blocks and block.first_position != self._blocks[-1].last_position + 1:
                raise ValueError(
                    f"block positions {block.first_position}..{block.last_position} do not continue the log, "
                    f"whose last position is {self._blocks[-1].last_position}"
                )
            self._blocks.append(block)
            self._firsts.append(block.first_position)

    def flush(self) -> int:
        """Commit every block appended so far and notify listeners if the commit position advanced."""
        with self._lock:
            self._check_open()
            target = self._blocks[-1].last_position if self._blocks else 0
            advanced = target > self._commit_position
            self._commit_position = max(target, self._commit_position)
            listeners = list(self._listeners) if advanced else []
        for listener in listeners:
            try:
                listener(target)
            except Exception:
                _log.exception("commit listener %r failed at position %d", listener, target)
        return self._commit_position

    def add_commit_listener(self, callback: CommitListener) -> None:
        with self._lock:
            self._listeners.append(callback)

    def read(self, from_position: int) -> Iterator[LogBlock]:
        """Yield committed blocks from the one containing `from_position` on, following the commit."""
        if from_position < 1:
            raise ValueError(f"positions start at 1, got {from_position}")
        with self._lock:
            self._check_open()
            self._check_not_compacted(from_position)
        return self._read_blocks(from_position)

    def _read_blocks(self, position: int) -> Iterator[LogBlock]:
        while True:
            with self._lock:
                if position > self._commit_position or not self._blocks:
                    return
                self._check_not_compacted(position)
                block = self._blocks[bisect_right(self._firsts, position) - 1]
            position = block.last_position + 1
            yield block

    def _check_not_compacted(self, position: int) -> None:
        if self._blocks and position < self._blocks[0].first_position:
            raise LogPositionCompactedError(
                f"position {position} was compacted away; the first stored position is {self._blocks[0].first_position}"
            )

    def delete_before(self, position: int) -> int:
        """Drop committed blocks ending below `position`, keeping the last one; return payload bytes freed."""
        with self._lock:
            self._check_open()
            bound = min(position, self._commit_position + 1)
            count = 0
            while count < len(self._blocks) - 1 and self._blocks[count].last_position < bound:
                count += 1
            freed = sum(len(block.payload) for block in self._blocks[:count])
            del self._blocks[:count]
            del self._firsts[:count]
        return freed

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def survivor(self) -> MemoryLog:
        """What a crash leaves of this log: a new, open log with the committed (flushed) blocks only."""
        with self._lock:
            kept = [b for b in self._blocks if b.last_position <= self._commit_position]
        log = MemoryLog()
        for block in kept:
            log.append(block)
        log.flush()
        return log

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("the log is closed")

    def __repr__(self) -> str:
        return (
            f"MemoryLog(positions {self.first_position}..{self.last_position}, "
            f"committed {self._commit_position}, blocks {len(self._blocks)})"
        )
