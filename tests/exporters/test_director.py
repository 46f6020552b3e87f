"""The exporter director over a MemoryLog: order, acknowledgement, retries, filters, pause, scheduled tasks."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from broker.protocol.enums import RecordType, ValueType
from exporters import NO_EXPORTER_BOUND, ExporterConfigurationError, ExporterDirector, validate_exporter_configs
from exporters.director import RecentRecords
from tests.exporters.memory import MemoryExporter, RecordLog, config, make_record


async def eventually(check: Callable[[], Any], timeout: float = 5.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(0.005)
    raise AssertionError(f"not reached within {timeout}s: {what}")


def director_for(log: RecordLog, configs: dict[str, dict[str, Any]], **kwargs: Any) -> ExporterDirector:
    kwargs.setdefault("positions", {})
    kwargs.setdefault("retry_initial_s", 0.01)
    kwargs.setdefault("retry_max_s", 0.08)
    return ExporterDirector(7, configs, read_records=log.read_records, **kwargs)


def exporter(director: ExporterDirector, exporter_id: str) -> MemoryExporter:
    return director.containers[exporter_id].exporter


async def test_records_are_exported_in_order_and_only_once_committed() -> None:
    log = RecordLog()
    log.append([make_record(p) for p in range(1, 4)])
    log.append([make_record(p) for p in range(4, 11)])
    log.append_uncommitted([make_record(11)])
    director = director_for(log, {"mem": config()})
    await director.start()
    director.notify_committed(7)  # the director must not go past what the partition says is committed
    mem = exporter(director, "mem")
    await eventually(lambda: mem.exported == list(range(1, 8)), what="records 1..7 exported")
    await asyncio.sleep(0.05)
    assert mem.exported == list(range(1, 8))
    director.notify_committed(log.log.flush())
    await eventually(lambda: mem.exported == list(range(1, 12)), what="records 8..11 exported")
    assert director.positions() == {"mem": 11}
    assert director.lowest_position() == 11
    await director.close()
    assert mem.closed


async def test_restart_resumes_after_the_acknowledged_position() -> None:
    log = RecordLog()
    log.append([make_record(p) for p in range(1, 21)])
    director = director_for(log, {"mem": config()}, positions={"mem": 12, "removed": 3})
    assert director.positions() == {"mem": 12}, "positions of exporters no longer configured are dropped"
    await director.start()
    director.notify_committed(20)
    mem = exporter(director, "mem")
    await eventually(lambda: mem.exported and mem.exported[-1] == 20)
    assert mem.exported == list(range(13, 21))
    await director.close()


async def test_a_failing_export_is_retried_with_growing_back_off_and_nothing_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The back-off doubles from 10 ms up to its 80 ms cap (as logged); each retry waits at least that long (the wall
    clock only bounds it from below: a busy machine may make it later, never earlier)."""
    log = RecordLog()
    log.append([make_record(p) for p in range(1, 11)])
    director = director_for(log, {"mem": config(failAt=4, failTimes=5)})
    failures = REGISTRY.get_sample_value("weir_exporter_failures_total", {"exporter": "mem", "partition": "7"}) or 0
    await director.start()
    director.notify_committed(10)
    mem = exporter(director, "mem")
    await eventually(lambda: mem.exported[-1:] == [10], what="all records exported after the failures")
    assert mem.exported == list(range(1, 11)), "no record skipped or exported twice"
    attempts_at_4 = [t for p, t in mem.attempts if p == 4]
    assert len(attempts_at_4) == 6
    delays = [float(m) for m in re.findall(r"retrying in ([\d.]+)s", caplog.text)]
    assert delays == [0.01, 0.02, 0.04, 0.08, 0.08], caplog.text
    gaps = [b - a for a, b in itertools.pairwise(attempts_at_4)]
    assert all(gap >= delay - 0.002 for gap, delay in zip(gaps, delays, strict=True)), (gaps, delays)
    after = REGISTRY.get_sample_value("weir_exporter_failures_total", {"exporter": "mem", "partition": "7"})
    assert after == failures + 5
    assert director.positions() == {"mem": 10}
    await director.close()


async def test_position_stays_put_while_export_keeps_failing() -> None:
    log = RecordLog()
    log.append([make_record(p) for p in range(1, 6)])
    director = director_for(log, {"mem": config(failAt=3, failTimes=10_000)})
    await director.start()
    director.notify_committed(5)
    mem = exporter(director, "mem")
    await eventually(lambda: len(mem.attempts) > 5, what="several retries")
    assert mem.exported == [1, 2]
    assert director.positions() == {"mem": 2}
    assert director.lowest_position() == 2
    lag = REGISTRY.get_sample_value("weir_exporter_lag_records", {"exporter": "mem", "partition": "7"})
    assert lag == 3
    await director.close()


async def test_filtered_records_are_skipped_and_still_acknowledged() -> None:
    log = RecordLog()
    records = [
        make_record(1, ValueType.JOB),
        make_record(2, ValueType.PROCESS_INSTANCE),
        make_record(3, ValueType.JOB, RecordType.COMMAND),
        make_record(4, ValueType.JOB),
        make_record(5, ValueType.PROCESS_INSTANCE),
        make_record(6, ValueType.PROCESS_INSTANCE),
    ]
    log.append(records)
    director = director_for(
        log,
        {
            "jobs": config(valueTypes=["JOB"], recordTypes=["EVENT"]),
            "buffered": config(valueTypes=["JOB"], recordTypes=["EVENT"], ackEach=False),
        },
    )
    await director.start()
    director.notify_committed(6)
    jobs, buffered = exporter(director, "jobs"), exporter(director, "buffered")
    await eventually(lambda: director.positions()["jobs"] == 6, what="skipped tail acknowledged")
    assert jobs.exported == [1, 4]
    # The buffering exporter acknowledged nothing: records after its last export may not count as done.
    await eventually(lambda: buffered.exported == [1, 4])
    assert director.positions()["buffered"] == 0
    assert director.lowest_position() == 0
    buffered.flush()  # acknowledging the last exported record also covers the filtered records after it
    assert director.positions()["buffered"] == 6
    await director.close()


async def test_exporters_are_independent() -> None:
    log = RecordLog()
    log.append([make_record(p) for p in range(1, 6)])
    director = director_for(log, {"stuck": config(failAt=1, failTimes=10_000), "fine": config()})
    await director.start()
    director.notify_committed(5)
    await eventually(lambda: director.positions()["fine"] == 5, what="the healthy exporter keeps going")
    assert director.positions()["stuck"] == 0
    assert director.lowest_position() == 0
    await director.close()


async def test_pause_stops_exporting_and_resume_continues() -> None:
    log = RecordLog()
    log.append([make_record(p) for p in range(1, 4)])
    director = director_for(log, {"mem": config()})
    await director.start()
    director.notify_committed(3)
    mem = exporter(director, "mem")
    await eventually(lambda: mem.exported == [1, 2, 3])
    director.pause()
    director.notify_committed(log.append([make_record(p) for p in range(4, 8)]))
    await asyncio.sleep(0.1)
    assert mem.exported == [1, 2, 3] and director.paused
    director.resume()
    await eventually(lambda: mem.exported == list(range(1, 8)), what="exporting resumed")
    await director.close()


async def test_scheduled_tasks_flush_on_time_and_acknowledge() -> None:
    log = RecordLog()
    log.append([make_record(p) for p in range(1, 5)])
    director = director_for(log, {"mem": config(ackEach=False, flushEvery=0.05)})
    started = time.monotonic()
    await director.start()
    director.notify_committed(4)
    mem = exporter(director, "mem")
    await eventually(lambda: mem.exported == [1, 2, 3, 4])
    assert director.positions() == {"mem": 0}, "nothing acknowledged before the timed flush"
    await eventually(lambda: director.positions() == {"mem": 4}, what="the timed flush acknowledged")
    await eventually(lambda: len(mem.flush_times) >= 3, what="flushes keep coming")
    assert mem.flush_times[0] - started >= 0.045
    assert all(b - a >= 0.045 for a, b in zip(mem.flush_times, mem.flush_times[1:], strict=False))
    await director.close()


async def test_acknowledging_beyond_what_was_offered_is_an_error() -> None:
    log = RecordLog()
    log.append([make_record(1)])
    director = director_for(log, {"mem": config()})
    await director.start()
    director.notify_committed(1)
    mem = exporter(director, "mem")
    await eventually(lambda: mem.exported == [1])
    with pytest.raises(ValueError, match="beyond the last record"):
        mem.controller.update_last_exported_position(5)
    mem.controller.update_last_exported_position(0)  # going back is ignored
    assert director.positions() == {"mem": 1}
    await director.close()


def test_no_exporters_do_not_hold_back_compaction() -> None:
    director = ExporterDirector(1, {}, read_records=RecordLog().read_records, positions={})
    assert director.lowest_position() == NO_EXPORTER_BOUND
    assert director.positions() == {}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"className": "tests.exporters.memory.Missing"}, "has no 'Missing'"),
        ({"className": "no.such.module.Exporter"}, "cannot import"),
        ({"className": "Exporter"}, "not an import path"),
        ({"className": "tests.exporters.memory.make_record"}, "not an exporter"),
        ({"args": {}}, "className: required"),
        (config(bad=1), "failed to configure: ValueError"),
        ({"className": "exporters.elasticsearch.ElasticsearchExporter", "args": {"bulkSise": 5}}, "bulkSise"),
    ],
)
def test_configuration_errors_name_the_exporter(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(ExporterConfigurationError, match=message) as raised:
        validate_exporter_configs({"broken": entry})
    assert "broken" in str(raised.value)


async def test_a_failing_log_read_is_retried() -> None:
    log = RecordLog()
    log.append([make_record(p) for p in range(1, 4)])
    calls = {"n": 0}

    def flaky(from_position: int):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] <= 2:
            raise OSError("disk hiccup")
        return log.read_records(from_position)

    director = ExporterDirector(
        7, {"mem": config()}, read_records=flaky, positions={}, retry_initial_s=0.01, retry_max_s=0.02
    )
    await director.start()
    director.notify_committed(3)
    mem = exporter(director, "mem")
    await eventually(lambda: mem.exported == [1, 2, 3])
    await director.close()


def test_recent_records_hand_out_runs_of_one_round_and_forget_the_oldest() -> None:
    recent = RecentRecords(capacity=6)
    recent.add([make_record(p) for p in range(1, 4)])
    recent.add([make_record(p) for p in range(4, 8)])
    assert [r.position for r in recent.run(2, 10) or []] == [2, 3], "a run ends with its round"
    assert [r.position for r in recent.run(4, 5) or []] == [4, 5], "and at the last position asked for"
    assert recent.run(8, 9) is None, "not committed yet"
    recent.add([make_record(p) for p in range(8, 10)])
    assert recent.run(1, 3) is None, "the oldest round is forgotten once newer ones hold the capacity"
    assert [r.position for r in recent.run(9, 9) or []] == [9]
    recent.add([make_record(12)])
    assert recent.run(4, 9) is None and recent.run(12, 12) is not None, "a gap starts the buffer afresh"


async def test_records_handed_over_at_commit_are_exported_like_those_read_from_the_log() -> None:
    """The caught-up path (records the partition just committed) offers the same records, filtered the same way,
    and an export that fails in the middle of a round's run is offered again before the rest of the run."""
    log = RecordLog()
    director = director_for(
        log,
        {"mem": config(failAt=6, failTimes=2), "jobs": config(valueTypes=["JOB"])},
    )
    await director.start()
    for first in (1, 5, 9):
        records = [
            make_record(p, ValueType.JOB if p % 2 else ValueType.PROCESS_INSTANCE) for p in range(first, first + 4)
        ]
        director.notify_committed(log.append(records), records)
        await asyncio.sleep(0.02)
    mem, jobs = exporter(director, "mem"), exporter(director, "jobs")
    await eventually(lambda: mem.exported[-1:] == [12], what="all records exported")
    assert mem.exported == list(range(1, 13)), "none skipped or exported twice across the failure"
    await eventually(lambda: director.positions() == {"mem": 12, "jobs": 12}, what="both acknowledged")
    assert jobs.exported == [1, 3, 5, 7, 9, 11], "the filter applies on the caught-up path"
    assert log.reads == [], "nothing had to be read back from the log"
    await director.close()
