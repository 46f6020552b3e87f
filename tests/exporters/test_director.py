"""The exporter director over a MemoryLog: order, acknowledgement, retries, filters, pause, scheduled tasks."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from broker.protocol.enums import RecordType, ValueType
from exporters import NO_EXPORTER_BOUND, ExporterConfigurationError, ExporterDirector, validate_exporter_configs
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


async def test_a_failing_export_is_retried_with_growing_back_off_and_nothing_is_skipped() -> None:
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
    gaps = [b - a for a, b in itertools.pairwise(attempts_at_4)]
    assert gaps[0] >= 0.009 and gaps[2] > gaps[0] * 1.5, f"back-off should grow: {gaps}"
    assert max(gaps) < 0.08 + 0.05, f"back-off should be capped: {gaps}"
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
