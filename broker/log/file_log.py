"""A partition log in segmented, checksummed files: the durable `LogStorage`.

Threading model:
- One `threading.Lock` guards the in-memory bookkeeping and every write. `append` holds it for one positional
  write (plus, once per segment, an fsync of the finished segment — see Rolling).
- `flush` holds it only to take a snapshot of what is appended, then fsyncs *without* it, so the event-loop
  thread keeps appending the next batch while a worker thread waits on the disk. A flush commits exactly the
  blocks that were appended when it took the lock. Flushes are serialized by a second lock.
- Commit listeners run on the flushing thread after the commit position advanced.

Rolling: before the first frame goes into a new segment, the finished segment is fsynced. A crash can then
only tear the tail of the *last* segment, which is what makes "bad frame followed by valid data" a reliable
sign of real corruption during recovery. Directory entries of new segments are fsynced by the next flush,
before it commits anything stored in them.

Failures: a failed write (e.g. ENOSPC) truncates the file back to the last good frame, raises LogWriteError
and leaves the log usable. A failed fsync leaves the page cache in an unknown state (the kernel may have
dropped the dirty pages), so the log then refuses further writes; reopening it re-verifies what actually
reached the disk.
"""

from __future__ import annotations

import logging
import os
import threading
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from broker.log.frame import HEADER_SIZE, FrameError, encode_header, payload_of, verify_frame
from broker.log.segment import Segment, corruption, list_segment_files, scan_segment, segment_file_name
from broker.log.storage import (
    CommitListener,
    LogBlock,
    LogCorruptionError,
    LogPositionCompactedError,
    LogWriteError,
)

_log = logging.getLogger("weir.log")

DEFAULT_SEGMENT_SIZE = 64 * 1024 * 1024
# Readers fetch committed bytes in chunks of this size: few syscalls for small blocks, bounded memory per
# reader.
_READ_CHUNK_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class _CommitMark:
    """Where the committed prefix of the log ends: a position and the byte just after its frame.

    Replaced as a whole (one attribute store), so readers on other threads always see a consistent triple.
    """

    position: int
    segment_first_position: int
    segment_offset: int


_EMPTY_MARK = _CommitMark(0, 0, 0)


class FileLog:
    """Segmented, checksummed, group-committed log files in one directory (see the module docstring).

    - `segment_size`: a new segment starts when the active one would grow beyond it; a block larger than that
      gets a segment of its own.
    - `committed_position_hint`: the highest position the caller knows was committed (from its own durable
      state). Damage at or below it is never mistaken for a torn write, and a log that ends before it is
      corrupt.
    - Opening verifies every frame of every segment; see `scan_segment` for what is repaired and what raises
      LogCorruptionError. Whatever survives verification is fsynced and counts as committed.
    """

    def __init__(
        self,
        directory: Path,
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        committed_position_hint: int = 0,
    ) -> None:
        if segment_size < HEADER_SIZE + 1:
            raise ValueError(f"segment_size must be at least {HEADER_SIZE + 1} bytes, got {segment_size}")
        if committed_position_hint < 0:
            raise ValueError(f"committed_position_hint must be >= 0, got {committed_position_hint}")
        self._directory = Path(directory)
        self._segment_size = segment_size
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._segments: list[Segment] = []
        self._segment_firsts: list[int] = []
        self._active_fd: int | None = None
        # Descriptors of finished segments (already fsynced); closed by the next flush, never while one is
        # syncing.
        self._retired_fds: list[int] = []
        self._directory_dirty = False
        self._last_position = 0
        self._commit = _EMPTY_MARK
        self._listeners: list[CommitListener] = []
        self._closed = False
        self._failure: str | None = None
        self._directory.mkdir(parents=True, exist_ok=True)
        self._recover(committed_position_hint)

    # -- recovery ------------------------------------------------------------------------------------------

    def _recover(self, committed_position_hint: int) -> None:
        files = list_segment_files(self._directory)
        # A crash between creating a segment and writing its first frame leaves an empty file: nothing to
        # keep.
        while files and files[-1][1].stat().st_size == 0:
            _log.warning("removing empty log segment %s left by an interrupted roll", files[-1][1])
            files.pop()[1].unlink()
        previous: Segment | None = None
        for number, (first_position, path) in enumerate(files):
            if previous is not None and first_position != previous.last_position + 1:
                kind = "gap" if first_position > previous.last_position + 1 else "overlap"
                raise corruption(
                    path, 0, f"from {first_position}", f"position {kind} after segment {previous.path.name}"
                )
            is_last = number == len(files) - 1
            segment = scan_segment(
                path, first_position, is_last=is_last, committed_position_hint=committed_position_hint
            )
            if segment.size == 0:
                if not is_last:
                    raise corruption(path, 0, f"from {first_position}", "empty segment before later segments")
                _log.warning("removing log segment %s: nothing in it survived verification", path)
                path.unlink()
                break
            self._segments.append(segment)
            self._segment_firsts.append(segment.first_position)
            previous = segment
        if not self._segments:
            self._fsync_directory()
            return
        last = self._segments[-1]
        if last.last_position < committed_position_hint:
            raise corruption(
                last.path,
                last.size,
                f"{last.last_position + 1}..{committed_position_hint}",
                f"the log ends at position {last.last_position} but positions up to "
                f"{committed_position_hint} were committed",
            )
        self._active_fd = os.open(last.path, os.O_WRONLY | os.O_CLOEXEC)
        os.fsync(self._active_fd)
        self._fsync_directory()
        self._last_position = last.last_position
        self._commit = _CommitMark(last.last_position, last.first_position, last.size)

    # -- positions -----------------------------------------------------------------------------------------

    @property
    def commit_position(self) -> int:
        return self._commit.position

    @property
    def last_position(self) -> int:
        return self._last_position

    @property
    def first_position(self) -> int:
        segments = self._segments
        return segments[0].first_position if segments else 0

    @property
    def directory(self) -> Path:
        return self._directory

    # -- writing -------------------------------------------------------------------------------------------

    def append(self, block: LogBlock) -> None:
        """Write `block` to the OS (not yet durable); ValueError if it does not continue the log."""
        header = encode_header(block)  # checksumming outside the lock keeps flush snapshots quick
        frame_size = len(header) + len(block.payload)
        with self._lock:
            self._check_writable()
            if self._last_position and block.first_position != self._last_position + 1:
                raise ValueError(
                    f"block positions {block.first_position}..{block.last_position} do not continue the log, "
                    f"whose last position is {self._last_position}"
                )
            active = self._segments[-1] if self._segments else None
            if active is None or self._active_fd is None or active.size + frame_size > self._segment_size:
                self._roll_and_write(block, header)
            else:
                self._write_frame(self._active_fd, active, block, header)
            self._last_position = block.last_position

    def _roll_and_write(self, block: LogBlock, header: bytes) -> None:
        if self._active_fd is not None:
            self._fsync_or_fail(self._active_fd, self._segments[-1].path)
        path = self._directory / segment_file_name(block.first_position)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise LogWriteError(f"could not create log segment {path}: {error.strerror}") from error
        segment = Segment(first_position=block.first_position, path=path)
        try:
            self._write_frame(fd, segment, block, header)
        except LogWriteError:
            os.close(fd)
            try:
                path.unlink()
            except OSError:
                _log.warning("could not remove empty log segment %s after a failed write", path)
            raise
        self._directory_dirty = True
        if self._active_fd is not None:
            self._retired_fds.append(self._active_fd)
        self._active_fd = fd
        self._segments.append(segment)
        self._segment_firsts.append(segment.first_position)

    def _write_frame(self, fd: int, segment: Segment, block: LogBlock, header: bytes) -> None:
        """Write one frame at the segment's end; on failure cut the file back so no partial frame remains."""
        offset = segment.size
        try:
            written = os.pwritev(fd, (header, block.payload), offset)
            frame_size = len(header) + len(block.payload)
            if written < frame_size:  # short write (e.g. the disk filled up mid-frame): finish it or fail
                rest = (header + block.payload)[written:]
                while rest:
                    count = os.pwrite(fd, rest, offset + frame_size - len(rest))
                    rest = rest[count:]
        except OSError as error:
            try:
                os.ftruncate(fd, offset)
            except OSError as truncate_error:
                self._failure = f"could not cut {segment.path} back to byte {offset}: {truncate_error.strerror}"
                raise LogWriteError(self._failure) from error
            raise LogWriteError(
                f"could not append positions {block.first_position}..{block.last_position} to log segment "
                f"{segment.path} at byte {offset}: {error.strerror}; nothing of the block was kept"
            ) from error
        segment.record_frame(block.first_position, block.last_position, offset, frame_size)

    def flush(self) -> int:
        """Fsync everything appended before this call took the lock, then commit it and notify listeners.

        Safe to call from a worker thread while another thread appends; returns the commit position.
        """
        with self._flush_lock:
            with self._lock:
                self._check_writable()
                target_position = self._last_position
                if target_position == self._commit.position:
                    return target_position
                active = self._segments[-1]
                target = _CommitMark(target_position, active.first_position, active.size)
                fd = self._active_fd
                sync_directory, self._directory_dirty = self._directory_dirty, False
                retired, self._retired_fds = self._retired_fds, []
            for retired_fd in retired:
                os.close(retired_fd)
            assert fd is not None
            self._fsync_or_fail(fd, active.path)
            if sync_directory:
                try:
                    self._fsync_directory()
                except OSError as error:
                    self._failure = f"fsync of log directory {self._directory} failed: {error.strerror}"
                    raise LogWriteError(self._failure) from error
            self._commit = target
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(target_position)
            except Exception:
                _log.exception("commit listener %r failed at position %d", listener, target_position)
        return target_position

    def _fsync_or_fail(self, fd: int, path: Path) -> None:
        try:
            os.fsync(fd)
        except OSError as error:
            self._failure = f"fsync of log segment {path} failed: {error.strerror}"
            raise LogWriteError(self._failure) from error

    def _fsync_directory(self) -> None:
        fd = os.open(self._directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _check_writable(self) -> None:
        if self._closed:
            raise ValueError(f"the log at {self._directory} is closed")
        if self._failure is not None:
            raise LogWriteError(
                f"the log at {self._directory} refuses writes after an earlier failure ({self._failure}); "
                "reopen it to recover"
            )

    def add_commit_listener(self, callback: CommitListener) -> None:
        """Register `callback(commit_position)`; it runs on the flushing thread, so it must be quick and
        thread-safe (e.g. `loop.call_soon_threadsafe`). Exceptions are logged and do not undo the commit."""
        with self._lock:
            self._listeners.append(callback)

    # -- reading -------------------------------------------------------------------------------------------

    def read(self, from_position: int) -> Iterator[LogBlock]:
        """Yield committed blocks from the one containing `from_position` on.

        - Raises LogPositionCompactedError now if `from_position` was compacted away (and later, if compaction
          overtakes a slow iterator).
        - The iterator follows the commit position as it advances and ends when it reaches it; it is
          independent of concurrent appends, flushes and compaction.
        """
        if from_position < 1:
            raise ValueError(f"positions start at 1, got {from_position}")
        with self._lock:
            if self._closed:
                raise ValueError(f"the log at {self._directory} is closed")
            self._check_not_compacted(from_position)
        return self._read_blocks(from_position)

    def _check_not_compacted(self, position: int) -> None:
        if self._segments and position < self._segments[0].first_position:
            raise LogPositionCompactedError(
                f"position {position} of the log at {self._directory} was compacted away; the first stored "
                f"position is {self._segments[0].first_position}"
            )

    def _locate(self, position: int) -> tuple[Segment, int] | None:
        """The segment holding committed `position` and an offset to scan from; None past the commit."""
        with self._lock:
            if position > self._commit.position or not self._segments:
                return None
            self._check_not_compacted(position)
            segment = self._segments[bisect_right(self._segment_firsts, position) - 1]
            return segment, segment.offset_near(position)

    def _committed_bytes(self, segment: Segment) -> tuple[int, bool]:
        """How many bytes of `segment` are committed, and whether that is all it will ever hold."""
        mark = self._commit
        if mark.segment_first_position > segment.first_position:
            return segment.size, True
        if mark.segment_first_position == segment.first_position:
            return mark.segment_offset, False
        return 0, False

    def _read_blocks(self, position: int) -> Iterator[LogBlock]:
        while (located := self._locate(position)) is not None:
            segment, offset = located
            try:
                fd = os.open(segment.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                raise LogPositionCompactedError(
                    f"position {position} was compacted away while being read from {segment.path}"
                ) from None
            try:
                while True:
                    limit, complete = self._committed_bytes(segment)
                    if offset >= limit:
                        break
                    chunk, consumed = b"", 0
                    while offset + consumed < limit:
                        try:
                            header = verify_frame(chunk, consumed)
                        except FrameError as error:
                            if not error.incomplete:
                                raise self._read_corruption(segment, offset + consumed, error) from None
                            # The chunk ends inside this frame: refill from the frame's start.
                            offset, consumed = offset + consumed, 0
                            needed = error.header.frame_size if error.header else HEADER_SIZE
                            chunk = os.pread(fd, min(max(needed, _READ_CHUNK_BYTES), limit - offset), offset)
                            if len(chunk) < needed:
                                error.reason = "frame runs past the committed end of the segment"
                                raise self._read_corruption(segment, offset, error) from None
                            continue
                        frame_offset = consumed
                        consumed += header.frame_size
                        if header.last_position >= position:
                            position = header.last_position + 1
                            payload = payload_of(chunk, frame_offset, header)
                            yield LogBlock(header.first_position, header.last_position, payload)
                    offset += consumed
                if not complete:
                    return
            finally:
                os.close(fd)

    @staticmethod
    def _read_corruption(segment: Segment, offset: int, error: FrameError) -> LogCorruptionError:
        header = error.header
        positions = f"{header.first_position}..{header.last_position}" if header else "unknown"
        return LogCorruptionError(
            f"log segment {segment.path} is corrupt at byte {offset} (positions {positions}): "
            f"{error.reason}; committed data changed on disk after it was verified — restore the partition "
            "from a replica or a backup"
        )

    # -- compaction and lifecycle --------------------------------------------------------------------------

    def delete_before(self, position: int) -> int:
        """Delete whole segments whose blocks all end below `position` (and are committed); return bytes
        freed.

        The active segment is never deleted, so the log keeps its end position.
        """
        freed = 0
        with self._lock:
            if self._closed:
                raise ValueError(f"the log at {self._directory} is closed")
            bound = min(position, self._commit.position + 1)
            while len(self._segments) > 1 and self._segments[0].last_position < bound:
                segment = self._segments.pop(0)
                self._segment_firsts.pop(0)
                try:
                    segment.path.unlink()
                except OSError as error:
                    _log.warning("could not delete compacted log segment %s: %s", segment.path, error.strerror)
                    continue
                freed += segment.size
        return freed

    def close(self) -> None:
        """Close all files. Appends that were not flushed are not committed (they may or may not survive)."""
        with self._flush_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            for fd in [*self._retired_fds, *([self._active_fd] if self._active_fd is not None else [])]:
                os.close(fd)
            self._retired_fds = []
            self._active_fd = None

    def __enter__(self) -> FileLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"FileLog({str(self._directory)!r}, positions {self.first_position}..{self._last_position}, "
            f"committed {self._commit.position}, segments {len(self._segments)})"
        )
