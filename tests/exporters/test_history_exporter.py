"""The history exporter through the exporter director, on the records of a real partition, in SQLite and PostgreSQL.

- the history matches the log: every instance, element, variable, incident, job and decision, as the log left it;
- offered again after a restart (acknowledgement lost), nothing is duplicated or regresses;
- a PostgreSQL outage stalls the writer, back-pressure holds further records, and the history catches up after;
- migrations: an empty database gets every step, a re-opened one none, an older one only the new steps;
- retention removes what ended more than retentionDays ago, keeps what runs;
- bad input never stops the history: text no database stores (NUL) is made storable, a row the database rejects
  is left out, logged and counted, and every other row and later record is written.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from broker.protocol.enums import JobIntent, ValueType
from broker.protocol.enums import UserTaskIntent as UT
from broker.protocol.record import Record
from exporters import ExporterConfigurationError, ExporterDirector
from exporters.history import schema
from exporters.history.backends import open_backend
from exporters.history.exporter import HistoryExporter
from exporters.history.rows import storable
from tests.exporters.conftest import fresh_database
from tests.exporters.history_check import assert_history_matches, query
from tests.exporters.memory import RecordLog
from tests.exporters.scenario import PartitionDriver, logged_run, read_log, run_scenario
from tests.exporters.test_director import eventually
from tests.postgres_server import PostgresServer

HISTORY = "exporters.history.HistoryExporter"


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[Record]:
    return asyncio.run(run_scenario(tmp_path_factory.mktemp("partition"), instances=4))


def record_log(records: list[Record]) -> RecordLog:
    log = RecordLog()
    log.append(records)
    return log


def director(log: RecordLog, url: str, positions: dict[str, int] | None = None, **args: Any) -> ExporterDirector:
    args.setdefault("retentionDays", 0)  # the scenario's records are from 2023: no retention unless a test wants it
    return ExporterDirector(
        1,
        {"history": {"className": HISTORY, "args": {"url": url, **args}}},
        read_records=log.read_records,
        positions=positions or {},
        retry_initial_s=0.01,
        retry_max_s=0.2,
    )


async def export_all(
    log: RecordLog, url: str, through: int, positions: dict[str, int] | None = None, **args: Any
) -> int:
    d = director(log, url, positions, **args)
    await d.start()
    d.notify_committed(through)
    try:
        await eventually(lambda: d.positions()["history"] >= through, timeout=20, what=f"position {through} acked")
    finally:
        await d.close()
    return d.positions()["history"]


async def test_the_history_matches_the_log(history_url: str, records: list[Record]) -> None:
    last = records[-1].position
    assert await export_all(record_log(records), history_url, last) == last
    expected = assert_history_matches(history_url, records)
    assert len(expected.instances) >= 5 and len(expected.incidents) == 1 and expected.decisions
    assert expected.user_tasks and expected.workers
    assert query(history_url, "SELECT position FROM exported_positions") == [(last,)]
    (xml,) = query(history_url, "SELECT bpmn_xml FROM process_definitions")[0]
    assert xml.startswith("<?xml") and 'id="one-task"' in xml


async def test_records_offered_again_after_a_restart_are_neither_duplicated_nor_regress(
    history_url: str, records: list[Record]
) -> None:
    log = record_log(records)
    middle = records[len(records) // 2].position
    await export_all(log, history_url, middle)
    last = records[-1].position
    # The acknowledgement was lost (a crash before the broker persisted it): everything is offered again.
    assert await export_all(log, history_url, last, positions={"history": 0}) == last
    assert_history_matches(history_url, records)
    await export_all(log, history_url, last, positions={"history": 3})
    assert_history_matches(history_url, records)
    assert query(history_url, "SELECT position FROM exported_positions") == [(last,)]


async def test_a_postgresql_outage_holds_the_exporter_back_and_loses_nothing(
    own_postgres: PostgresServer, records: list[Record]
) -> None:
    url = fresh_database(own_postgres)
    log = record_log(records)
    first = records[10].position
    last = records[-1].position
    d = director(log, url, queueSize=8, batchSize=4, retryMaxDelay=0.2, flushDelay=0.01)
    await d.start()
    d.notify_committed(first)
    await eventually(lambda: d.positions()["history"] >= first, timeout=20, what="first records acked")
    exporter = d.containers["history"].exporter
    assert isinstance(exporter, HistoryExporter)
    own_postgres.stop()
    d.notify_committed(last)
    # The writer holds what it was sent, the queue fills up, and export waits: the director offers nothing more.
    await eventually(lambda: exporter.in_flight >= 8, timeout=10, what="the queue to fill up")
    await asyncio.sleep(0.5)
    acked = d.positions()["history"]
    assert acked < last and exporter.in_flight == 8
    offered = d.containers["history"]._last_offered
    assert offered < last, "back-pressure: records stay in the log, not in memory"
    await asyncio.to_thread(own_postgres.start)
    try:
        await eventually(lambda: d.positions()["history"] >= last, timeout=30, what="caught up after the outage")
    finally:
        await d.close()
    assert_history_matches(url, records)


async def test_a_killed_writer_process_is_replaced_and_what_it_held_is_written(
    history_url: str, records: list[Record]
) -> None:
    """kill -9 of the writer process while it holds records it has not written: a new writer is started, is sent
    those records again, and the history still matches the log."""
    log = record_log(records)
    first = records[len(records) // 3].position
    last = records[-1].position
    d = director(log, history_url, flushDelay=0.01)
    await d.start()
    try:
        d.notify_committed(first)
        await eventually(lambda: d.positions()["history"] >= first, timeout=20, what="first records acked")
        exporter = d.containers["history"].exporter
        assert isinstance(exporter, HistoryExporter) and exporter._writer is not None
        killed = exporter._writer.process.pid
        os.kill(killed, signal.SIGSTOP)  # it takes records but writes none
        d.notify_committed(last)
        await eventually(lambda: d.containers["history"]._last_offered >= last, timeout=20, what="all offered")
        assert exporter.in_flight > 0 and d.positions()["history"] < last
        os.kill(killed, signal.SIGKILL)
        await eventually(lambda: d.positions()["history"] >= last, timeout=30, what="caught up by a new writer")
        assert exporter._writer is not None and exporter._writer.process.pid != killed
    finally:
        await d.close()
    assert_history_matches(history_url, records)


async def test_migrations_run_once_and_only_the_missing_steps(
    history_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = open_backend(history_url)
    backend.connect()
    try:
        every = [m.version for m in schema.MIGRATIONS]
        assert backend.migrate(1) == every, "an empty database gets every step"
        assert backend.migrate(2) == [], "re-opening applies nothing"
        later = schema.LATEST_VERSION + 1
        step = schema.Migration(later, "a later step", ("ALTER TABLE jobs ADD COLUMN deadline_note TEXT",))
        monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS, step))
        assert backend.migrate(3) == [later], "an older database gets only the new step"
        assert backend.migrate(4) == []
        assert backend.schema_versions() == [*every, later]
    finally:
        backend.close()
    assert query(history_url, "SELECT deadline_note FROM jobs") == []


async def test_migration_2_flags_the_callers_of_instances_with_incidents(
    history_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A history written before version 2 flagged an instance for its own incidents only: upgrading flags the
    instances above it (its caller, the caller's caller), and no other."""
    backend = open_backend(history_url)
    backend.connect()
    try:
        with monkeypatch.context() as patch:
            patch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])
            assert backend.migrate(1) == [1]
        p = backend.placeholder
        with backend.transaction() as cursor:
            # 1 calls 2, which calls 3 (with an incident); 4 calls 5 (none); 6 stands alone.
            for key, parent, flag in ((1, None, 0), (2, 1, 0), (3, 2, 1), (4, None, 0), (5, 4, 0), (6, None, 0)):
                cursor.execute(
                    "INSERT INTO process_instances (process_instance_key, parent_process_instance_key, has_incident)"
                    f" VALUES ({p}, {p}, {p})",
                    (key, parent, flag),
                )
        assert backend.migrate(2)[:1] == [2]
    finally:
        backend.close()
    flagged = query(history_url, "SELECT process_instance_key FROM process_instances WHERE has_incident = 1")
    assert sorted(k for (k,) in flagged) == [1, 2, 3]


async def test_retention_removes_what_ended_before_the_cutoff_and_keeps_what_runs(
    tmp_path: Path, records: list[Record]
) -> None:
    url = f"sqlite:///{tmp_path / 'history.db'}"
    last = records[-1].position
    # The scenario's records are from 2023: with one day of retention every ended instance is old.
    await export_all(record_log(records), url, last, retentionDays=1, retentionCheckInterval=0.05)
    d = director(record_log(records), url, {"history": last}, retentionDays=1, retentionCheckInterval=0.05)
    await d.start()
    d.notify_committed(last)
    await eventually(
        lambda: not query(url, "SELECT 1 FROM process_instances WHERE end_date IS NOT NULL"),
        timeout=10,
        what="ended instances removed",
    )
    await d.close()
    remaining = query(url, "SELECT process_instance_key, state FROM process_instances")
    assert remaining and {s for _, s in remaining} == {"ACTIVE"}
    kept = {k for k, _ in remaining}
    for table in ("element_instances", "variables", "incidents", "jobs"):
        owners = {k for (k,) in query(url, f"SELECT DISTINCT process_instance_key FROM {table}")}
        assert owners <= kept, f"{table} of removed instances are gone"
    assert query(url, "SELECT COUNT(*) FROM incidents") == [(1,)], "the running instance keeps its incident"
    assert query(url, "SELECT COUNT(*) FROM decision_instances") == [(0,)]
    definitions = len({r.key for r in records if r.value_type == ValueType.PROCESS and r.is_event})
    assert query(url, "SELECT COUNT(*) FROM process_definitions") == [(definitions,)], "definitions are kept"


async def run_user_tasks(directory: Path) -> list[Record]:
    """Native user tasks: one created, assigned, updated and completed; one left open with its candidates."""

    async def drive(d: PartitionDriver) -> None:
        await d.deploy("user-task-native.bpmn")
        for reviewers in (["ann", "bob"], ["cid"]):
            await d.create("user-task-native", {"reviewers": reviewers, "due": "2026-12-24T12:00:00Z"})
        await d.settle()
        created = [
            r.key
            for r in read_log(directory / "log")
            if r.value_type == ValueType.USER_TASK and r.is_event and r.intent == UT.CREATED
        ]
        first = created[0]
        await d.send(ValueType.USER_TASK, UT.ASSIGN, {"assignee": "ann"}, first)
        change = {"changedAttributes": ["priority"], "priority": 90}
        await d.send(ValueType.USER_TASK, UT.UPDATE, change, first)
        await d.send(ValueType.USER_TASK, UT.COMPLETE, {"variables": {"approved": True}}, first)
        await d.settle()

    return await logged_run(directory, drive)


async def test_native_user_tasks_become_user_task_rows(history_url: str, tmp_path: Path) -> None:
    records = await run_user_tasks(tmp_path / "partition")
    await export_all(record_log(records), history_url, records[-1].position)
    expected = assert_history_matches(history_url, records)
    assert sorted(expected.user_tasks.values()) == [("COMPLETED", "ann"), ("CREATED", "")]
    sql = (
        "SELECT state, assignee, candidate_groups, candidate_users, due_date, follow_up_date, priority, "
        "external_form_reference, custom_headers, creation_date, completion_date FROM user_tasks ORDER BY user_task_key"
    )
    done, open_task = query(history_url, sql)
    assert done[:2] == ("COMPLETED", "ann") and done[6] == 90 and done[10] is not None
    assert open_task == (
        "CREATED",
        "",
        '["sales", "ops"]',
        '["cid"]',
        "2026-12-24T12:00:00+00:00",  # as the engine evaluated it
        "2030-01-01T10:00:00+01:00",
        70,
        "https://forms.example/approve",
        '{"department": "sales"}',
        1_700_000_000_000,
        None,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "url: required"),
        ({"url": "mysql://x"}, "expected sqlite:///path/history.db or postgresql://"),
        ({"url": "sqlite:///x.db", "retention": 3}, "unknown configuration key(s) retention"),
        ({"url": "sqlite:///x.db", "queueSize": 0}, "queueSize: expected a number of at least 1"),
        ({"url": "sqlite:///x.db", "retentionDays": "soon"}, "retentionDays: expected a number"),
    ],
)
def test_a_bad_configuration_names_the_key(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ExporterConfigurationError, match="exporter 'history'") as info:
        ExporterDirector(
            1, {"history": {"className": HISTORY, "args": args}}, read_records=RecordLog().read_records, positions={}
        )
    assert message in str(info.value)


async def run_poison_input(directory: Path) -> list[Record]:
    """An instance whose variables have a NUL and a 10 kB name, its job failed with a NUL and "poison" in the
    message (an incident), then a later instance that completes."""

    async def drive(d: PartitionDriver) -> None:
        await d.deploy("one-task.bpmn")
        await d.create("one-task", {"nul\x00name": "a\x00b", "n" * 10_000: 1})
        await d.settle()
        (job,) = await d.activate("test")
        value = {"retries": 0, "errorMessage": "poison\x00stock", "retryBackoff": 0, "variables": {}}
        await d.send(ValueType.JOB, JobIntent.FAIL, value, job)
        await d.create("one-task", {"later": True})
        await d.settle()
        (later_job,) = await d.activate("test")
        await d.complete(later_job)
        await d.settle()

    return await logged_run(directory, drive)


def skipped(table: str) -> float:
    return REGISTRY.get_sample_value("weir_history_rows_skipped_total", {"partition": "1", "table": table}) or 0.0


async def test_nul_and_long_names_are_stored_and_the_history_goes_on(history_url: str, tmp_path: Path) -> None:
    records = await run_poison_input(tmp_path / "partition")
    before = skipped("incidents") + skipped("jobs") + skipped("variables")
    last = records[-1].position
    assert await export_all(record_log(records), history_url, last) == last
    assert query(history_url, "SELECT position FROM exported_positions") == [(last,)]
    names = {name for (name,) in query(history_url, "SELECT name FROM variables")}
    assert {"nul\ufffdname", "n" * 10_000, "later"} <= names
    assert query(history_url, "SELECT value FROM variables WHERE name = 'nul\ufffdname'") == [('"a\\u0000b"',)]
    assert query(history_url, "SELECT error_message, state FROM incidents") == [("poison\ufffdstock", "ACTIVE")]
    assert query(history_url, "SELECT error_message FROM jobs WHERE state = 'FAILED'") == [("poison\ufffdstock",)]
    states = sorted(s for (s,) in query(history_url, "SELECT state FROM process_instances"))
    assert states == ["ACTIVE", "COMPLETED"], "the later instance is in the history"
    assert skipped("incidents") + skipped("jobs") + skipped("variables") == before, "nothing had to be left out"


def reject_poison_incidents(url: str) -> None:
    """Make the database itself refuse incidents whose message says "poison" (as it refuses any value it cannot
    store): a CHECK constraint in PostgreSQL, a trigger in SQLite."""
    backend = open_backend(url)
    backend.connect()
    try:
        backend.migrate(1)
        with backend.transaction() as cursor:
            if url.startswith("sqlite"):
                cursor.execute(
                    "CREATE TRIGGER no_poison BEFORE INSERT ON incidents WHEN NEW.error_message LIKE '%poison%' "
                    "BEGIN SELECT RAISE(ABORT, 'poison is not stored'); END"
                )
            else:
                cursor.execute(
                    "ALTER TABLE incidents ADD CONSTRAINT no_poison CHECK (error_message NOT LIKE '%poison%')"
                )
    finally:
        backend.close()


async def test_a_row_the_database_rejects_is_skipped_counted_and_the_rest_written(
    history_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records = await run_poison_input(tmp_path / "partition")
    reject_poison_incidents(history_url)
    before = skipped("incidents")
    last = records[-1].position
    # One batch for everything: the rejected row must not take the batch's other rows with it.
    assert await export_all(record_log(records), history_url, last, flushDelay=0.5) == last
    assert skipped("incidents") == before + 1
    assert query(history_url, "SELECT COUNT(*) FROM incidents") == [(0,)]
    incident = next(r for r in records if r.value_type == ValueType.INCIDENT and r.is_event)
    (message,) = [r.getMessage() for r in caplog.records if "history row skipped" in r.getMessage()]
    assert f"partition 1, position {incident.position}, key {incident.key}, table incidents" in message
    assert "poison" in message, "the database's own message is logged"
    assert query(history_url, "SELECT position FROM exported_positions") == [(last,)]
    states = sorted(s for (s,) in query(history_url, "SELECT state FROM process_instances"))
    assert states == ["ACTIVE", "COMPLETED"], "the later instance is in the history"
    assert query(history_url, "SELECT error_message FROM jobs WHERE state = 'FAILED'") == [("poison\ufffdstock",)]
    elements = query(history_url, "SELECT COUNT(*) FROM element_instances")[0][0]
    expected = {r.key for r in records if r.value_type == ValueType.PROCESS_INSTANCE and r.is_event} - {
        r.key
        for r in records
        if r.value_type == ValueType.PROCESS_INSTANCE and r.value.get("bpmnElementType") in ("PROCESS", "SEQUENCE_FLOW")
    }
    assert elements == len(expected), "every element row of the batch is written"


async def test_a_missing_table_is_waited_out_not_skipped(history_url: str, records: list[Record]) -> None:
    """A table gone (a schema or privilege fault, not the row's) holds the exporter back like an outage: nothing
    is skipped, and once the table is back everything is written."""
    backend = open_backend(history_url)
    backend.connect()
    try:
        backend.migrate(1)
        with backend.transaction() as cursor:
            cursor.execute("ALTER TABLE jobs RENAME TO jobs_away")
        before = skipped("jobs")
        last = records[-1].position
        d = director(record_log(records), history_url, retryMaxDelay=0.05, flushDelay=0.01)
        await d.start()
        d.notify_committed(last)
        try:
            await asyncio.sleep(1.0)
            assert d.positions().get("history", 0) < last, "held back while the table is missing"
            with backend.transaction() as cursor:
                cursor.execute("ALTER TABLE jobs_away RENAME TO jobs")
            await eventually(lambda: d.positions()["history"] >= last, timeout=20, what="caught up")
        finally:
            await d.close()
    finally:
        backend.close()
    assert skipped("jobs") == before
    assert_history_matches(history_url, records)


def test_storable_text_replaces_only_what_no_database_takes() -> None:
    assert storable("plain") == "plain"
    assert storable("naïve ☃ 𝄞") == "naïve ☃ 𝄞"
    assert storable("a\x00b\x00") == "a\ufffdb\ufffd"
    assert storable("x\ud800y") == "x\ufffdy", "a lone surrogate UTF-8 cannot encode"
