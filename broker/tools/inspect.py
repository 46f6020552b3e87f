"""Read a partition's data offline: list its records, rebuild its state from the log, compare two states.

Nothing here writes to the partition it inspects: the log is read through its own checksums (a torn tail is
reported, never cut), and replay builds state in a separate directory through the same replay function a restarting
broker uses (broker/stream/replay.py), so "replay equals processing" can be checked against the real thing.

Usage::

    python -m broker.tools.inspect records data/partitions/1 [--json] [--from POS] [--limit N]
    python -m broker.tools.inspect replay data/partitions/1 [--compare runtime|snapshot|LMDB_DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import base64
import json
import mmap
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lmdb

from broker.engine.engine import Engine
from broker.log import LogBlock, LogCorruptionError
from broker.log.frame import HEADER_SIZE, FrameError, valid_frame_after, verify_frame
from broker.log.segment import list_segment_files
from broker.protocol.codec import decode_block
from broker.protocol.enums import RecordType, ValueType
from broker.protocol.keys import KeyGenerator
from broker.protocol.record import Record
from broker.state.db import SUB_DATABASES, StateDb, unpack
from broker.state.repositories import PartitionState
from broker.stream import snapshots
from broker.stream.replay import ReplayResult, replay_blocks

StateDump = dict[str, list[tuple[bytes, bytes]]]


# -- reading the log -----------------------------------------------------------------------------------------


def log_directory(path: Path) -> Path:
    """Accept a partition directory (holding ``log/``) or the log directory itself."""
    return path / "log" if (path / "log").is_dir() else path


@dataclass(slots=True)
class LogReader:
    """Read-only iteration over the verified blocks of a log directory.

    - A bad frame at the very end of the last segment with nothing valid after it is a torn tail: iteration
      stops there and ``torn_tail`` says where (the broker would cut it on its next start).
    - Any other bad frame, or positions that do not continue, raise LogCorruptionError naming file and byte.
    """

    directory: Path
    torn_tail: str | None = None
    blocks_read: int = 0
    last_position: int = 0

    def blocks(self, from_position: int = 1) -> Iterator[LogBlock]:
        files = list_segment_files(self.directory)
        expected = 0
        for number, (first_position, path) in enumerate(files):
            if expected and first_position != expected:
                raise LogCorruptionError(f"log segment {path} starts at position {first_position}, expected {expected}")
            expected = first_position
            is_last = number == len(files) - 1
            size = path.stat().st_size
            if size == 0:
                continue
            with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
                offset = 0
                while offset < size:
                    try:
                        header = verify_frame(data, offset)
                    except FrameError as error:
                        if is_last and valid_frame_after(data, offset + 1) is None:
                            self.torn_tail = f"{path} at byte {offset}: {error.reason} ({size - offset} bytes)"
                            return
                        raise LogCorruptionError(
                            f"log segment {path} is corrupt at byte {offset} (positions from {expected}): "
                            f"{error.reason}"
                        ) from None
                    if header.first_position != expected:
                        raise LogCorruptionError(
                            f"log segment {path} at byte {offset}: frame {header.first_position}.."
                            f"{header.last_position} should start at position {expected}"
                        )
                    start = offset + HEADER_SIZE
                    offset += header.frame_size
                    expected = header.last_position + 1
                    self.last_position = header.last_position
                    if header.last_position < from_position:
                        continue
                    self.blocks_read += 1
                    payload = bytes(data[start : start + header.payload_length])
                    yield LogBlock(header.first_position, header.last_position, payload)

    def records(self, from_position: int = 1) -> Iterator[Record]:
        for block in self.blocks(from_position):
            _processed, records = decode_block(block.payload)
            for rec in records:
                if rec.position >= from_position:
                    yield rec


def iter_records(partition_dir: Path, from_position: int = 1) -> Iterator[Record]:
    """Every record of a partition's log in position order (see LogReader for what raises)."""
    return LogReader(log_directory(partition_dir)).records(from_position)


def format_record(rec: Record) -> str:
    """One line: position, record type, value type, intent, key, source position (and a rejection's reason)."""
    line = (
        f"{rec.position:>8} {RecordType(rec.record_type).name:<17} {ValueType(rec.value_type).name:<26} "
        f"{rec.intent_enum.name:<24} key={rec.key} src={rec.source_position}"
    )
    if rec.record_type == RecordType.COMMAND_REJECTION:
        line += f" {rec.rejection_type.name}: {rec.rejection_reason}"
    return line


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()  # deployed resources, as Zeebe's JSON exporter ships them
    raise TypeError(f"cannot serialize {type(value).__name__}")


def record_json(rec: Record) -> str:
    """The record in Zeebe's exported JSON shape, on one line."""
    return json.dumps(rec.to_json_dict(), default=_json_default, separators=(",", ":"))


# -- rebuilding and reading state ----------------------------------------------------------------------------


@dataclass(slots=True)
class ReplayReport:
    dump: StateDump
    result: ReplayResult
    seconds: float
    torn_tail: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def records_per_second(self) -> float:
        return self.result.records_read / self.seconds if self.seconds > 0 else 0.0


def _partition_id(partition_dir: Path, reader: LogReader) -> int:
    if partition_dir.name.isdigit():
        return int(partition_dir.name)
    for rec in LogReader(reader.directory).records():
        return rec.partition_id
    return 1


def replay_log(partition_dir: Path, target_dir: Path) -> ReplayReport:
    """Rebuild state in the EMPTY ``target_dir`` from the partition's whole log, as a restart without snapshot
    would; return its dump and figures."""
    if (target_dir / "data.mdb").exists():
        raise ValueError(f"replay needs an empty target directory, but {target_dir} already holds a state")
    reader = LogReader(log_directory(partition_dir))
    segments = list_segment_files(reader.directory)
    if segments and segments[0][0] > 1:
        raise ValueError(
            f"the log in {reader.directory} starts at position {segments[0][0]} (compacted): a replay from empty "
            "state needs it from position 1"
        )
    partition_id = _partition_id(partition_dir, reader)
    db = StateDb(target_dir)
    try:
        state = PartitionState(db)
        engine = Engine(state)
        keys = KeyGenerator(partition_id)
        started = time.perf_counter()
        result = replay_blocks(reader.blocks(), db, state, engine, keys, applied=0, processed=0)
        seconds = time.perf_counter() - started
        return ReplayReport(db.dump(), result, seconds, reader.torn_tail)
    finally:
        db.close()


def replay(partition_dir: Path, target_dir: Path) -> StateDump:
    """The state a replay of the whole log builds, as a dump of every sub-database."""
    return replay_log(partition_dir, target_dir).dump


def dump_state(lmdb_dir: Path) -> StateDump:
    """Dump a state directory (``runtime/`` of a stopped broker, or a snapshot) without writing to it."""
    env = lmdb.open(str(lmdb_dir), readonly=True, lock=False, max_dbs=len(SUB_DATABASES) + 4, subdir=True)
    try:
        out: StateDump = {}
        with env.begin() as txn:
            for name in SUB_DATABASES:
                try:
                    db = env.open_db(name.encode(), txn=txn, create=False)
                except lmdb.NotFoundError:
                    out[name] = []
                    continue
                out[name] = list(txn.cursor(db=db).iternext())
        return out
    finally:
        env.close()


def newest_snapshot_dir(partition_dir: Path) -> Path | None:
    """The newest snapshot that verifies, or None."""
    for snap in snapshots.list_snapshots(partition_dir / "snapshots"):
        try:
            snapshots.verify(snap)
        except (snapshots.SnapshotCorruptError, OSError, ValueError):
            continue
        return snap.directory
    return None


# -- comparing states ----------------------------------------------------------------------------------------

_U64 = struct.Struct(">Q")


def _readable_key(key: bytes) -> str:
    if len(key) == 8:
        return str(_U64.unpack(key)[0])
    if len(key) % 8 == 0 and len(key) > 8:
        return "/".join(str(_U64.unpack_from(key, i)[0]) for i in range(0, len(key), 8))
    return repr(key)


def _readable_value(name: str, value: bytes) -> str:
    if name == "meta" and len(value) == 8:
        return str(_U64.unpack(value)[0])
    if not value:
        return "''"
    try:
        decoded = unpack(value)
    except Exception:  # not msgpack (or damaged): show the raw bytes
        return value.hex()
    text = repr(decoded)
    return text if len(text) <= 400 else text[:400] + "…"


# Not derived from the log: exporters acknowledge positions outside processing, so a replay cannot rebuild them.
NOT_FROM_THE_LOG = {("meta", b"exporter_positions")}


def diff_dumps(expected: StateDump, actual: StateDump, *, limit: int = 10) -> list[str]:
    """The first ``limit`` differences between two dumps, one readable line each (empty when equal).

    Entries that do not come from the log (exporter positions) are left out of the comparison.
    """
    lines: list[str] = []
    for name in sorted(set(expected) | set(actual)):
        left = {k: v for k, v in expected.get(name, []) if (name, k) not in NOT_FROM_THE_LOG}
        right = {k: v for k, v in actual.get(name, []) if (name, k) not in NOT_FROM_THE_LOG}
        if left == right:
            continue
        for key in sorted(set(left) | set(right)):
            a, b = left.get(key), right.get(key)
            if a == b:
                continue
            shown = _readable_key(key)
            if a is None:
                lines.append(f"{name}[{shown}]: only in actual: {_readable_value(name, b or b'')}")
            elif b is None:
                lines.append(f"{name}[{shown}]: only in expected: {_readable_value(name, a)}")
            else:
                lines.append(f"{name}[{shown}]: expected {_readable_value(name, a)} but got {_readable_value(name, b)}")
            if len(lines) >= limit:
                return lines
    return lines


# -- command line --------------------------------------------------------------------------------------------


def _cmd_records(args: argparse.Namespace) -> int:
    reader = LogReader(log_directory(Path(args.partition_dir)))
    shown = 0
    try:
        for rec in reader.records(args.from_position):
            print(record_json(rec) if args.json else format_record(rec))
            shown += 1
            if args.limit and shown >= args.limit:
                break
    except LogCorruptionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if reader.torn_tail:
        print(f"note: torn tail in {reader.torn_tail}", file=sys.stderr)
    return 0


def _compare_target(partition_dir: Path, which: str) -> Path | None:
    if which == "runtime":
        return partition_dir / "runtime"
    if which == "snapshot":
        return newest_snapshot_dir(partition_dir)
    return Path(which)


def _cmd_replay(args: argparse.Namespace) -> int:
    partition_dir = Path(args.partition_dir)
    target = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="weir-replay-"))
    try:
        report = replay_log(partition_dir, target)
    except (LogCorruptionError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            shutil.rmtree(target, ignore_errors=True)
    r = report.result
    print(
        f"replayed {r.records_read} records ({r.events_applied} events) up to position {r.applied_position} "
        f"in {report.seconds:.3f}s ({report.records_per_second:,.0f} records/s); processed position "
        f"{r.processed_position}, {len(r.pending)} commands not processed yet"
    )
    if report.torn_tail:
        print(f"note: torn tail in {report.torn_tail}")
    for name in SUB_DATABASES:
        print(f"  {name:<22} {len(report.dump.get(name, [])):>8} entries")
    if not args.compare:
        return 0
    other = _compare_target(partition_dir, args.compare)
    if other is None or not (other / "data.mdb").exists():
        print(f"error: no state to compare with ({args.compare})", file=sys.stderr)
        return 2
    differences = diff_dumps(dump_state(other), report.dump, limit=args.limit)
    if not differences:
        print(f"replayed state equals {other}")
        return 0
    print(f"replayed state differs from {other} (expected = {other}, actual = replay):")
    for line in differences:
        print(f"  {line}")
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker.tools.inspect", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    records = sub.add_parser("records", help="print the records of a partition's log, one per line")
    records.add_argument("partition_dir", help="a partition directory (data/partitions/<id>) or its log/")
    records.add_argument("--json", action="store_true", help="Zeebe-shaped JSON, one record per line")
    records.add_argument("--from", dest="from_position", type=int, default=1, help="first position to show")
    records.add_argument("--limit", type=int, default=0, help="show at most this many records")
    records.set_defaults(run=_cmd_records)
    rep = sub.add_parser("replay", help="rebuild state from the whole log into a scratch directory")
    rep.add_argument("partition_dir", help="a partition directory (data/partitions/<id>)")
    rep.add_argument("--compare", help="'runtime', 'snapshot' (newest valid) or an LMDB directory to compare with")
    rep.add_argument("--keep", help="build the state in this (empty) directory and keep it")
    rep.add_argument("--limit", type=int, default=20, help="differences to show at most")
    rep.set_defaults(run=_cmd_replay)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
