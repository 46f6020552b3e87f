"""State snapshots: a consistent, checksummed copy of the partition's LMDB, tagged with its log positions.

Recovery always starts from the newest snapshot that verifies (or from empty state) and replays the log tail, so a
crash never leaves state that is ahead of the durable log. The log is compacted only below the oldest snapshot kept.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import lmdb

from broker.state.db import read_u64, unpack

log = logging.getLogger("weir.snapshot")

_DATA = "data.mdb"
_MANIFEST = "manifest.json"
KEEP = 2


@dataclass(frozen=True, slots=True)
class Snapshot:
    directory: Path
    applied_position: int
    processed_position: int
    exporter_positions: dict[str, int] = field(default_factory=dict)

    @property
    def data_file(self) -> Path:
        return self.directory / _DATA


class SnapshotCorruptError(Exception):
    pass


def _crc_file(path: Path) -> int:
    crc = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def size_needed(env: lmdb.Environment) -> int:
    """At most what a snapshot of ``env`` takes on disk (the compacted copy is never larger than the used pages)."""
    return (env.info()["last_pgno"] + 1) * env.stat()["psize"]


def take(env: lmdb.Environment, snapshots_dir: Path) -> Snapshot:
    """Copy the current state (LMDB's own consistent copy), then verify, checksum, fsync and publish it atomically.

    A failure (a full disk) raises `OSError` and removes the unpublished copy: nothing half-written stays behind.
    """
    snapshots_dir.mkdir(parents=True, exist_ok=True)
    tmp = snapshots_dir / ".pending"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        try:
            env.copy(str(tmp), compact=True)
            applied, processed, exporter_positions = _positions(tmp)
        except lmdb.Error as e:
            raise OSError(f"copying the state to {tmp} failed: {e}") from e
        data = tmp / _DATA
        manifest = {
            "appliedPosition": applied,
            "processedPosition": processed,
            "exporterPositions": exporter_positions,
            "crc32": _crc_file(data),
        }
        (tmp / _MANIFEST).write_text(json.dumps(manifest))
        for name in (_DATA, _MANIFEST):
            fd = os.open(tmp / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    final = snapshots_dir / f"{applied:020d}"
    if final.exists():
        shutil.rmtree(final)
    os.rename(tmp, final)
    _fsync_dir(snapshots_dir)
    for old in list_snapshots(snapshots_dir)[KEEP:]:
        shutil.rmtree(old.directory, ignore_errors=True)
    return Snapshot(final, applied, processed, exporter_positions)


def _positions(directory: Path) -> tuple[int, int, dict[str, int]]:
    env = lmdb.open(str(directory), readonly=True, lock=False, max_dbs=32, subdir=True)
    try:
        meta = env.open_db(b"meta", create=False)
        with env.begin() as txn:
            applied = txn.get(b"last_applied_position", db=meta)
            processed = txn.get(b"last_processed_position", db=meta)
            exporters = txn.get(b"exporter_positions", db=meta)
        return (
            read_u64(applied) if applied else 0,
            read_u64(processed) if processed else 0,
            dict(unpack(exporters)) if exporters else {},
        )
    finally:
        env.close()


def list_snapshots(snapshots_dir: Path) -> list[Snapshot]:
    """Published snapshots, newest first (unverified)."""
    out: list[Snapshot] = []
    if not snapshots_dir.exists():
        return out
    for d in snapshots_dir.iterdir():
        if d.name.startswith(".") or not (d / _MANIFEST).exists():
            continue
        try:
            m = json.loads((d / _MANIFEST).read_text())
            exported = {str(k): int(v) for k, v in m.get("exporterPositions", {}).items()}
            out.append(Snapshot(d, int(m["appliedPosition"]), int(m["processedPosition"]), exported))
        except (ValueError, KeyError, OSError):
            log.warning("ignoring unreadable snapshot manifest in %s", d)
    out.sort(key=lambda s: s.applied_position, reverse=True)
    return out


def verify(snapshot: Snapshot) -> None:
    m = json.loads((snapshot.directory / _MANIFEST).read_text())
    if not snapshot.data_file.exists() or _crc_file(snapshot.data_file) != m["crc32"]:
        raise SnapshotCorruptError(f"snapshot {snapshot.directory} failed its checksum")


def restore_latest(snapshots_dir: Path, target: Path) -> Snapshot | None:
    """Copy the newest snapshot that verifies into ``target`` (replacing it); None when there is none."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for snap in list_snapshots(snapshots_dir):
        try:
            verify(snap)
        except (SnapshotCorruptError, OSError, ValueError) as e:
            log.error("skipping corrupt snapshot: %s", e)
            continue
        shutil.copyfile(snap.data_file, target / _DATA)
        return snap
    return None
