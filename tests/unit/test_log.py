"""The partition log: behaviour every LogStorage shares, and the file log's durability and recovery."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.log import (
    FileLog,
    LogBlock,
    LogCorruptionError,
    LogPositionCompactedError,
    LogStorage,
    LogWriteError,
    MemoryLog,
)
from broker.log.frame import HEADER_SIZE

OpenLog = Callable[[], LogStorage]


def block(first: int, last: int | None = None, size: int = 40) -> LogBlock:
    """A block whose payload names its positions, so a mix-up shows in the bytes too."""
    last = first if last is None else last
    label = f"{first}-{last}:".encode()
    return LogBlock(first, last, (label * (size // len(label) + 1))[:size])


def append_run(log: LogStorage, first: int, count: int, span: int = 1, size: int = 40) -> list[LogBlock]:
    """Append `count` blocks of `span` positions each, starting at `first`."""
    blocks = [block(first + i * span, first + (i + 1) * span - 1, size) for i in range(count)]
    for item in blocks:
        log.append(item)
    return blocks


def frame_size(item: LogBlock) -> int:
    return HEADER_SIZE + len(item.payload)


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


@pytest.fixture(params=["file", "memory"])
def open_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenLog]:
    """Opens the implementation under test; the file log gets small segments so tests cross segment rolls."""
    opened: list[LogStorage] = []

    def factory() -> LogStorage:
        log: LogStorage = FileLog(tmp_path / "log", segment_size=600) if request.param == "file" else MemoryLog()
        opened.append(log)
        return log

    yield factory
    for log in opened:
        log.close()


# -- behaviour every LogStorage shares ----------------------------------------------------------------------


def test_implements_the_protocol(open_log: OpenLog) -> None:
    assert isinstance(open_log(), LogStorage)


def test_an_empty_log_has_no_positions(open_log: OpenLog) -> None:
    log = open_log()
    assert (log.first_position, log.last_position, log.commit_position) == (0, 0, 0)
    assert log.flush() == 0
    assert list(log.read(1)) == []


def test_round_trip_across_segment_rolls(open_log: OpenLog) -> None:
    log = open_log()
    blocks = append_run(log, 1, 40, span=3, size=100)
    assert log.flush() == 120
    assert list(log.read(1)) == blocks
    assert (log.first_position, log.last_position, log.commit_position) == (1, 120, 120)


def test_reading_from_the_middle_starts_with_the_block_holding_the_position(open_log: OpenLog) -> None:
    log = open_log()
    blocks = append_run(log, 1, 40, span=3, size=100)
    log.flush()
    assert list(log.read(50)) == blocks[16:]  # block 16 covers positions 49..51
    assert list(log.read(49)) == blocks[16:]
    assert list(log.read(120)) == blocks[-1:]
    assert list(log.read(121)) == []


def test_read_returns_committed_blocks_only(open_log: OpenLog) -> None:
    log = open_log()
    committed = append_run(log, 1, 3)
    log.flush()
    pending = append_run(log, 4, 2)
    assert (log.commit_position, log.last_position) == (3, 5)
    assert list(log.read(1)) == committed
    assert list(log.read(4)) == []
    log.flush()
    assert list(log.read(1)) == committed + pending


def test_an_iterator_follows_the_commit_position_while_appends_continue(open_log: OpenLog) -> None:
    log = open_log()
    first_batch = append_run(log, 1, 5, size=200)
    log.flush()
    reader = log.read(1)
    assert next(reader) == first_batch[0]
    second_batch = append_run(log, 6, 10, size=200)
    assert [next(reader) for _ in range(4)] == first_batch[1:]
    log.flush()
    assert list(reader) == second_batch


def test_the_first_block_may_start_anywhere_then_positions_must_be_contiguous(open_log: OpenLog) -> None:
    log = open_log()
    log.append(block(1000, 1004))
    with pytest.raises(ValueError, match="do not continue"):
        log.append(block(1006))  # gap
    with pytest.raises(ValueError, match="do not continue"):
        log.append(block(1004, 1005))  # overlap
    log.append(block(1005))
    assert (log.flush(), log.first_position) == (1005, 1000)
    assert [item.first_position for item in log.read(1000)] == [1000, 1005]


@pytest.mark.parametrize(("first", "last"), [(0, 1), (-3, 2), (5, 4)])
def test_a_block_with_impossible_positions_is_rejected(first: int, last: int) -> None:
    with pytest.raises(ValueError, match="position"):
        LogBlock(first, last, b"payload")


def test_commit_listeners_hear_each_advance_on_the_flushing_thread(open_log: OpenLog) -> None:
    log = open_log()
    heard: list[tuple[int, int]] = []
    log.add_commit_listener(lambda position: heard.append((position, threading.get_ident())))
    append_run(log, 1, 3)
    log.flush()
    log.flush()  # nothing new: no notification
    append_run(log, 4, 2)
    worker = threading.Thread(target=log.flush)
    worker.start()
    worker.join()
    assert heard == [(3, threading.get_ident()), (5, worker.ident)]


def test_a_failing_listener_does_not_undo_the_commit_or_silence_others(
    open_log: OpenLog, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log()
    heard: list[int] = []

    def broken(position: int) -> None:
        raise RuntimeError("listener bug")

    log.add_commit_listener(broken)
    log.add_commit_listener(heard.append)
    append_run(log, 1, 2)
    assert log.flush() == 2
    assert heard == [2]
    assert "listener bug" in caplog.text


def test_compaction_deletes_only_whole_committed_units_and_keeps_the_last(open_log: OpenLog) -> None:
    log = open_log()
    blocks = append_run(log, 1, 30, size=100)
    log.flush()
    freed = log.delete_before(15)
    assert freed > 0
    assert 1 < log.first_position <= 15
    kept = list(log.read(log.first_position))
    assert kept == blocks[log.first_position - 1 :]
    with pytest.raises(LogPositionCompactedError, match="compacted"):
        log.read(log.first_position - 1)
    log.delete_before(10_000)
    assert log.first_position <= 30 and log.last_position == 30
    assert list(log.read(30)) == blocks[-1:]


def test_compaction_never_deletes_uncommitted_blocks(open_log: OpenLog) -> None:
    log = open_log()
    append_run(log, 1, 30, size=100)
    assert log.delete_before(31) == 0
    assert log.first_position == 1


def test_compaction_overtaking_a_reader_raises_rather_than_skipping(open_log: OpenLog) -> None:
    log = open_log()
    append_run(log, 1, 30, size=100)
    log.flush()
    reader = log.read(1)
    next(reader)
    log.delete_before(20)
    with pytest.raises(LogPositionCompactedError):
        list(reader)


def test_flushing_on_a_worker_thread_while_appending_commits_whole_blocks(open_log: OpenLog) -> None:
    log = open_log()
    commits: list[int] = []
    log.add_commit_listener(commits.append)
    done = threading.Event()

    def flush_until_done() -> None:
        while not done.is_set():
            log.flush()

    worker = threading.Thread(target=flush_until_done)
    worker.start()
    try:
        blocks = append_run(log, 1, 1500, span=2, size=64)
    finally:
        done.set()
        worker.join()
    assert log.flush() == 3000
    assert commits == sorted(set(commits)) and commits[-1] == 3000
    assert all(position % 2 == 0 for position in commits), "a commit ended inside a block"
    assert list(log.read(1)) == blocks


def test_a_closed_log_rejects_use(open_log: OpenLog) -> None:
    log = open_log()
    append_run(log, 1, 2)
    log.close()
    for action in (lambda: log.append(block(3)), log.flush, lambda: log.read(1)):
        with pytest.raises(ValueError, match="closed"):
            action()


# -- the file log: layout, reopening and group commit --------------------------------------------------------


def test_reopening_reads_back_everything_and_appends_continue(tmp_path: Path) -> None:
    with FileLog(tmp_path, segment_size=1000) as log:
        blocks = append_run(log, 7, 50, span=2, size=150)
        log.flush()
    with FileLog(tmp_path, segment_size=1000) as log:
        assert (log.first_position, log.last_position, log.commit_position) == (7, 106, 106)
        assert list(log.read(7)) == blocks
        more = append_run(log, 107, 3)
        log.flush()
        assert list(log.read(100)) == blocks[-4:] + more


def test_segments_are_named_by_first_position_and_bounded_in_size(tmp_path: Path) -> None:
    with FileLog(tmp_path, segment_size=1000) as log:
        append_run(log, 1, 12, size=300)
        huge = block(13, 13, size=5000)
        log.append(huge)
        append_run(log, 14, 2, size=300)
        log.flush()
    names = [path.name for path in segment_files(tmp_path)]
    assert names[0] == "00000000000000000001.log"
    assert "00000000000000000013.log" in names and "00000000000000000014.log" in names
    sizes = {path.name: path.stat().st_size for path in segment_files(tmp_path)}
    assert sizes.pop("00000000000000000013.log") == frame_size(huge)
    assert all(size <= 1000 for size in sizes.values())


def test_reading_a_large_log_from_near_the_end_uses_the_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads far into a big segment touch only a little of the file (the sparse index bounds the skip)."""
    with FileLog(tmp_path, segment_size=64 * 1024 * 1024) as log:
        append_run(log, 1, 4000, size=1024)
        log.flush()
        preads: list[int] = []
        real_pread = os.pread

        def counting_pread(fd: int, length: int, offset: int) -> bytes:
            preads.append(length)
            return real_pread(fd, length, offset)

        monkeypatch.setattr(os, "pread", counting_pread)
        tail = list(log.read(3990))
    assert [item.first_position for item in tail] == list(range(3990, 4001))
    assert sum(preads) < 200 * 1024


def test_flush_commits_exactly_what_was_appended_before_it_took_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = FileLog(tmp_path)
    append_run(log, 1, 10)
    syncing, release = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        syncing.set()
        assert release.wait(5)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(log.flush()))
    worker.start()
    assert syncing.wait(5)
    append_run(log, 11, 5)  # appends proceed while the flush waits on the disk
    release.set()
    worker.join()
    assert result == [10] and log.commit_position == 10
    assert log.flush() == 15
    log.close()


# -- the file log: recovery ---------------------------------------------------------------------------------


def write_log(directory: Path, count: int = 30, segment_size: int = 1000) -> list[LogBlock]:
    with FileLog(directory, segment_size=segment_size) as log:
        blocks = append_run(log, 1, count, size=100)
        log.flush()
    return blocks


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as file:
        file.seek(offset)
        value = file.read(1)[0]
        file.seek(offset)
        file.write(bytes([value ^ 0x5A]))


@pytest.mark.parametrize(
    "kept_bytes",
    [0, 1, 10, HEADER_SIZE - 1, HEADER_SIZE, HEADER_SIZE + 50, HEADER_SIZE + 99],
    ids=["nothing", "1-header-byte", "10-header-bytes", "header-minus-1", "header-only", "half", "minus-1"],
)
def test_a_torn_last_frame_is_cut_away_and_the_log_appends_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kept_bytes: int
) -> None:
    blocks = write_log(tmp_path)
    last_segment = segment_files(tmp_path)[-1]
    size = last_segment.stat().st_size
    torn_at = size - frame_size(blocks[-1])
    os.truncate(last_segment, torn_at + kept_bytes)
    caplog.set_level(logging.WARNING, logger="weir.log")
    with FileLog(tmp_path, segment_size=1000) as log:
        assert log.last_position == log.commit_position == 29
        assert list(log.read(1)) == blocks[:-1]
        log.append(blocks[-1])
        log.flush()
    if kept_bytes:
        assert f"{last_segment}" in caplog.text and f"at byte {torn_at}" in caplog.text
        assert f"cut {kept_bytes} bytes" in caplog.text
    with FileLog(tmp_path, segment_size=1000) as log:
        assert list(log.read(1)) == blocks


def test_a_torn_first_frame_of_a_new_segment_removes_that_segment(tmp_path: Path) -> None:
    blocks = write_log(tmp_path)
    last_segment = segment_files(tmp_path)[-1]
    os.truncate(last_segment, 5)
    with FileLog(tmp_path, segment_size=1000) as log:
        assert not last_segment.exists()
        assert log.last_position == int(last_segment.stem) - 1
        assert list(log.read(1)) == blocks[: log.last_position]


def test_garbage_after_the_last_frame_is_a_torn_tail(tmp_path: Path) -> None:
    blocks = write_log(tmp_path)
    with open(segment_files(tmp_path)[-1], "ab") as file:
        file.write(bytes(300))
    with FileLog(tmp_path, segment_size=1000) as log:
        assert list(log.read(1)) == blocks


def test_an_uncommitted_last_frame_failing_its_checksum_is_a_torn_tail(tmp_path: Path) -> None:
    blocks = write_log(tmp_path)
    last_segment = segment_files(tmp_path)[-1]
    flip_byte(last_segment, last_segment.stat().st_size - 10)
    with FileLog(tmp_path, segment_size=1000, committed_position_hint=29) as log:
        assert list(log.read(1)) == blocks[:-1]


def test_a_flipped_byte_in_the_first_segment_stops_the_open(tmp_path: Path) -> None:
    write_log(tmp_path)
    first_segment = segment_files(tmp_path)[0]
    flip_byte(first_segment, HEADER_SIZE + 5)
    with pytest.raises(LogCorruptionError) as raised:
        FileLog(tmp_path, segment_size=1000)
    message = str(raised.value)
    assert str(first_segment) in message
    assert "at byte 0 (positions 1..1): checksum mismatch" in message
    assert "restore the partition from a replica or a backup" in message


def test_a_flipped_byte_in_a_middle_block_stops_the_open_even_without_a_hint(tmp_path: Path) -> None:
    blocks = write_log(tmp_path, count=33)
    last_segment = segment_files(tmp_path)[-1]
    assert last_segment.stat().st_size >= 3 * frame_size(blocks[0])
    middle_offset = frame_size(blocks[0])  # the second frame of the last segment; valid frames follow it
    flip_byte(last_segment, middle_offset + HEADER_SIZE + 1)
    position = int(last_segment.stem) + 1
    with pytest.raises(LogCorruptionError, match=f"at byte {middle_offset} \\(positions {position}..{position}\\)"):
        FileLog(tmp_path, segment_size=1000)


def test_a_flipped_header_byte_with_valid_frames_after_it_stops_the_open(tmp_path: Path) -> None:
    write_log(tmp_path)
    last_segment = segment_files(tmp_path)[-1]
    flip_byte(last_segment, 8)  # the payload length of the first frame
    with pytest.raises(LogCorruptionError, match=str(last_segment)):
        FileLog(tmp_path, segment_size=1000)


def test_a_damaged_last_block_covered_by_the_hint_stops_the_open(tmp_path: Path) -> None:
    write_log(tmp_path)
    last_segment = segment_files(tmp_path)[-1]
    flip_byte(last_segment, last_segment.stat().st_size - 10)
    with pytest.raises(LogCorruptionError, match=r"checksum mismatch \(.*\) in committed data") as raised:
        FileLog(tmp_path, segment_size=1000, committed_position_hint=30)
    assert str(last_segment) in str(raised.value)


def test_a_cut_last_block_covered_by_the_hint_stops_the_open(tmp_path: Path) -> None:
    write_log(tmp_path)
    last_segment = segment_files(tmp_path)[-1]
    os.truncate(last_segment, last_segment.stat().st_size - 3)
    with pytest.raises(LogCorruptionError, match=r"positions 30\.\.30\): payload cut short"):
        FileLog(tmp_path, segment_size=1000, committed_position_hint=30)


def test_a_log_ending_before_the_hint_stops_the_open(tmp_path: Path) -> None:
    write_log(tmp_path)
    with pytest.raises(LogCorruptionError, match="ends at position 30 but positions up to 35"):
        FileLog(tmp_path, segment_size=1000, committed_position_hint=35)


def test_a_missing_segment_is_a_gap(tmp_path: Path) -> None:
    write_log(tmp_path)
    segments = segment_files(tmp_path)
    segments[1].unlink()
    with pytest.raises(LogCorruptionError, match=f"{segments[2]} is corrupt.*position gap"):
        FileLog(tmp_path, segment_size=1000)


def test_a_segment_whose_name_disagrees_with_its_frames_is_corrupt(tmp_path: Path) -> None:
    write_log(tmp_path)
    segments = segment_files(tmp_path)
    segments[0].rename(tmp_path / "00000000000000000002.log")
    with pytest.raises(LogCorruptionError, match="position overlap"):
        FileLog(tmp_path, segment_size=1000)


def test_damage_after_opening_is_caught_when_reading(tmp_path: Path) -> None:
    write_log(tmp_path)
    with FileLog(tmp_path, segment_size=1000) as log:
        flip_byte(segment_files(tmp_path)[0], HEADER_SIZE + 5)
        with pytest.raises(LogCorruptionError, match="checksum mismatch"):
            list(log.read(1))


def test_compaction_frees_whole_segment_files(tmp_path: Path) -> None:
    write_log(tmp_path)
    segments = segment_files(tmp_path)
    expected_gone = [path for path in segments[:-1] if int(path.stem) < 12]
    expected_gone = expected_gone[:-1]  # the segment holding position 11 also holds later positions
    sizes = sum(path.stat().st_size for path in expected_gone)
    with FileLog(tmp_path, segment_size=1000) as log:
        assert log.delete_before(12) == sizes
        remaining = segment_files(tmp_path)
        assert remaining == [path for path in segments if path not in expected_gone]
        assert log.first_position == int(remaining[0].stem)
        with pytest.raises(LogPositionCompactedError):
            log.read(1)
    with FileLog(tmp_path, segment_size=1000) as log:
        assert log.first_position == int(remaining[0].stem)
        assert [item.first_position for item in log.read(log.first_position)][-1] == 30


# -- the file log: write failures ---------------------------------------------------------------------------


def test_a_short_write_then_enospc_leaves_no_partial_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = FileLog(tmp_path)
    blocks = append_run(log, 1, 5)
    real_pwritev = os.pwritev

    def half_then_full(fd: int, buffers: list[bytes], offset: int) -> int:
        data = b"".join(buffers)
        return real_pwritev(fd, [data[: len(data) // 2]], offset)

    def disk_full(fd: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwritev", half_then_full)
    monkeypatch.setattr(os, "pwrite", disk_full)
    with pytest.raises(LogWriteError, match=r"positions 6\.\.6.*No space left"):
        log.append(block(6))
    monkeypatch.undo()
    assert log.last_position == 5
    assert segment_files(tmp_path)[0].stat().st_size == sum(frame_size(item) for item in blocks)
    log.append(block(6))
    assert log.flush() == 6
    log.close()
    with FileLog(tmp_path) as reopened:
        assert list(reopened.read(1)) == [*blocks, block(6)]


def test_a_failed_fsync_makes_the_log_refuse_writes_until_reopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = FileLog(tmp_path)
    append_run(log, 1, 3)

    def broken_fsync(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(LogWriteError, match="fsync"):
        log.flush()
    monkeypatch.undo()
    assert log.commit_position == 0
    with pytest.raises(LogWriteError, match="reopen"):
        log.append(block(4))
    log.close()
    with FileLog(tmp_path) as reopened:
        assert reopened.last_position == 3


@pytest.fixture
def tiny_disk() -> Iterator[Path]:
    """A real 1 MiB filesystem, so ENOSPC comes from the kernel rather than from a stub."""
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    mount_point = Path(tempfile.mkdtemp(prefix="weir-tiny-disk-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        mount_point.rmdir()
        pytest.skip(f"mounting a tmpfs is not permitted here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)
        mount_point.rmdir()


def test_a_full_disk_leaves_no_partial_frame_and_the_log_stays_usable(tiny_disk: Path) -> None:
    log = FileLog(tiny_disk / "log", segment_size=256 * 1024)
    written: list[LogBlock] = []
    with pytest.raises(LogWriteError, match="No space left"):
        for position in range(1, 1000):
            item = block(position, size=50_000)
            log.append(item)
            written.append(item)
    assert log.last_position == len(written)
    on_disk = sum(path.stat().st_size for path in segment_files(tiny_disk / "log"))
    assert on_disk == sum(frame_size(item) for item in written)
    assert log.flush() == len(written)
    assert log.delete_before(len(written)) > 0  # free space, then keep appending
    log.append(block(len(written) + 1, size=50_000))
    assert log.flush() == len(written) + 1
    log.close()
    with FileLog(tiny_disk / "log", segment_size=256 * 1024) as reopened:
        assert reopened.last_position == len(written) + 1
        assert [item.first_position for item in reopened.read(reopened.first_position)][-1] == len(written) + 1
