"""The JSON-lines file exporter: record lines, rotation by size, files kept, no duplicates after a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from exporters import ExporterConfigurationError, ExporterDirector
from exporters.jsonl import JsonLinesExporter
from tests.exporters.memory import RecordLog, make_record
from tests.exporters.test_director import eventually

JSONL = "exporters.jsonl.JsonLinesExporter"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def all_positions(directory: Path) -> list[int]:
    files = sorted(
        directory.glob("partition-7.jsonl*"), key=lambda p: -int(p.suffix[1:]) if p.suffix[1:].isdigit() else 0
    )
    return [doc["position"] for f in files for doc in lines(f)]


async def run_director(log: RecordLog, args: dict[str, Any], positions: dict[str, int], through: int) -> dict[str, int]:
    director = ExporterDirector(
        7, {"file": {"className": JSONL, "args": args}}, read_records=log.read_records, positions=positions
    )
    await director.start()
    director.notify_committed(through)
    await eventually(lambda: director.containers["file"].exporter._written_through >= through, what="all written")
    await director.close()
    return director.positions()


async def test_records_are_written_as_zeebe_json_lines_and_acknowledged(tmp_path: Path) -> None:
    log = RecordLog()
    log.append([make_record(p) for p in range(1, 6)])
    positions = await run_director(log, {"directory": str(tmp_path)}, {}, 5)
    assert positions == {"file": 5}, "close flushes and acknowledges"
    docs = lines(tmp_path / "partition-7.jsonl")
    assert [d["position"] for d in docs] == [1, 2, 3, 4, 5]
    assert docs[0]["valueType"] == "JOB" and docs[0]["intent"] == "CREATED" and docs[0]["recordType"] == "EVENT"
    assert docs[0]["partitionId"] == 1 and docs[0]["value"]["elementId"] == "e1"
    assert {"brokerVersion", "recordVersion", "sourceRecordPosition", "rejectionType"} <= docs[0].keys()


async def test_files_rotate_by_size_and_only_max_files_are_kept(tmp_path: Path) -> None:
    log = RecordLog()
    log.append([make_record(p) for p in range(1, 201)])
    args = {"directory": str(tmp_path), "maxFileSize": 4096, "maxFiles": 3}
    await run_director(log, args, {}, 200)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["partition-7.jsonl", "partition-7.jsonl.1", "partition-7.jsonl.2"]
    for name in files[1:]:
        size = (tmp_path / name).stat().st_size
        assert 4096 <= size < 4096 + 1000, f"{name} rotated at {size} bytes"
    kept = all_positions(tmp_path)
    assert kept[-1] == 200 and kept == list(range(kept[0], 201)), "the kept files hold the newest records, in order"
    assert kept[0] > 1, "the oldest files were deleted"


async def test_a_restart_does_not_duplicate_lines_and_cuts_a_torn_line(tmp_path: Path) -> None:
    log = RecordLog()
    log.append([make_record(p) for p in range(1, 11)])
    await run_director(log, {"directory": str(tmp_path)}, {}, 10)
    path = tmp_path / "partition-7.jsonl"
    with path.open("a") as f:
        f.write('{"position": 11, "valueTy')  # a crash in the middle of a line
    log.append([make_record(p) for p in range(11, 16)])
    # The persisted position lags behind the file (as after a crash): records 6..10 are offered again.
    positions = await run_director(log, {"directory": str(tmp_path)}, {"file": 5}, 15)
    assert positions == {"file": 15}
    assert [d["position"] for d in lines(path)] == list(range(1, 16))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"maxFiles": 0}, "maxFiles"),
        ({"maxFileSize": "big"}, "maxFileSize"),
        ({"flushDelay": -1}, "flushDelay"),
        ({"event": "yes"}, "event"),
        ({"directry": "x"}, "unknown configuration key"),
    ],
)
def test_bad_configuration_fails_fast(args: dict[str, Any], message: str) -> None:
    from exporters.director import build_exporter

    with pytest.raises(ExporterConfigurationError, match=message):
        build_exporter("file", {"className": JSONL, "args": args}, 1, lambda: 0)


def test_value_type_switches_filter(tmp_path: Path) -> None:
    from exporters.director import build_exporter

    exporter, context = build_exporter(
        "file", {"className": JSONL, "args": {"directory": str(tmp_path), "job": False, "command": False}}, 1, lambda: 0
    )
    assert isinstance(exporter, JsonLinesExporter)
    assert not context.record_filter.accepts(make_record(1))
    from broker.protocol.enums import ValueType

    assert context.record_filter.accepts(make_record(2, ValueType.PROCESS_INSTANCE))
