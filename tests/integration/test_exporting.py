"""Exporting from real ``weir start`` processes to a real Elasticsearch-compatible server (noida-db).

The broker is configured the way operators configure it (``WEIR_BROKER_EXPORTERS_ES_…`` variables); what the
search server holds afterwards is compared with the broker's own log, read offline once the broker stopped:
- a mixed workload lands in Zeebe's indices, once per record, searchable the way Zeebe users search;
- a search server outage under load loses nothing and duplicates nothing, and compaction never removes a record
  the exporter has not acknowledged;
- a disk that fills up because the log cannot be compacted (exporter behind) makes the broker refuse new commands
  before the disk is full, and take them again once the exporter caught up and the log was compacted.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from pyzeebe.proto import gateway_pb2 as pb

from broker.log.segment import list_segment_files
from broker.protocol.enums import RecordType, ValueType
from broker.protocol.record import Record
from broker.tools.inspect import LogReader, iter_records
from exporters import broker_version, es_templates
from exporters.record_json import dumps, record_document
from tests.harness import WeirProcess, eventually
from tests.integration.clients import Stub, activate, complete, create, deploy
from tests.search_server import NoidaServer

VERSION = broker_version()
PREFIX = "zeebe-record"
ES_CLASS = "exporters.elasticsearch.ElasticsearchExporter"
MiB = 1024 * 1024


# -- configuration, metrics and the log ----------------------------------------------------------------------


def es_exporter_env(url: str, **args: str) -> dict[str, str]:
    """The Elasticsearch exporter (id ``es``) configured through environment variables, as operators do."""
    env = {
        "WEIR_BROKER_EXPORTERS_ES_CLASSNAME": ES_CLASS,
        "WEIR_BROKER_EXPORTERS_ES_ARGS_URL": url,
        "WEIR_BROKER_EXPORTERS_ES_ARGS_BULK_DELAY": "0.2",
    }
    for key, value in args.items():
        env[f"WEIR_BROKER_EXPORTERS_ES_ARGS_{key.upper()}"] = value
    return env


def metric(weir: WeirProcess, name: str, **labels: str) -> float | None:
    """One sample of the broker's /metrics (None when it is not there yet)."""
    status, body = weir.probe("/metrics")
    assert status == 200, body
    for line in body["text"].splitlines():
        m = re.match(rf"^{name}\{{([^}}]*)\}} (\S+)$", line)
        if m and dict(re.findall(r'(\w+)="([^"]*)"', m.group(1))) == labels:
            return float(m.group(2))
    return None


def exported_position(weir: WeirProcess) -> int:
    return int(metric(weir, "weir_exporter_position", exporter="es", partition="1") or 0)


def log_position(weir: WeirProcess) -> int:
    return int(metric(weir, "weir_log_last_position", partition="1") or 0)


def broker_output(weir: WeirProcess) -> str:
    """Everything the broker logged (``WeirProcess.log`` keeps only the tail)."""
    return weir.log_path.read_text(errors="replace")


def partition_dir(weir: WeirProcess) -> Path:
    return weir.data_dir / "partitions" / "1"


def first_log_position(weir: WeirProcess) -> int:
    """Where the log starts now: the first position of its oldest segment file (compaction deletes whole ones)."""
    segments = list_segment_files(partition_dir(weir) / "log")
    return segments[0][0] if segments else 0


def wait_until_exported(weir: WeirProcess, timeout: float) -> int:
    """Wait until the exporter acknowledged the whole log; the log's last position."""

    def caught_up() -> int:
        last = log_position(weir)
        return last if last and exported_position(weir) == last else 0

    return eventually(caught_up, timeout=timeout, interval=0.1, what="the exporter to acknowledge the whole log")


def exported_by_default(record: Record) -> bool:
    """The Elasticsearch exporter's defaults: events (no commands, no rejections) of its value types."""
    return record.record_type == RecordType.EVENT and record.value_type in es_templates.EXPORTABLE_VALUE_TYPES


def slug(value_type: ValueType | int) -> str:
    return es_templates.value_type_slug(ValueType(value_type))


def index_of(record: Record) -> str:
    day = datetime.fromtimestamp(record.timestamp / 1000, UTC).strftime("%Y-%m-%d")
    return f"{PREFIX}_{slug(record.value_type)}_{VERSION}_{day}"


def assert_exported_exactly(server: NoidaServer, records: list[Record]) -> list[dict[str, Any]]:
    """The server holds one document per exported record, in its index, under its id, with its content."""
    expected = [r for r in records if exported_by_default(r)]
    hits = server.all_hits(f"{PREFIX}_*")
    assert server.count(f"{PREFIX}_*") == len(hits), "paging saw every document"
    positions = [h["_source"]["position"] for h in hits]
    duplicated = [p for p, n in Counter(positions).items() if n > 1]
    assert not duplicated, f"{len(duplicated)} positions were indexed more than once, e.g. {duplicated[:5]}"
    want = [r.position for r in expected]
    missing = sorted(set(want) - set(positions))
    extra = sorted(set(positions) - set(want))
    assert not missing, f"{len(missing)} exported records are missing, e.g. {missing[:10]}"
    assert not extra, f"{len(extra)} documents are not exported records of the log, e.g. {extra[:10]}"
    for hit, record in zip(hits, expected, strict=True):
        assert hit["_index"] == index_of(record)
        assert hit["_id"] == f"1-{record.position}"
        assert hit["_source"] == json.loads(dumps(record_document(record, VERSION))), record.describe()
    return hits


# -- keeping every log segment, even those compaction deletes -----------------------------------------------


class SegmentKeeper:
    """Hard-links every log segment file into a directory of its own as soon as it appears.

    Compaction then only removes the broker's name for a segment; the data stays readable here, so the records
    the broker compacted away can still be compared with what was exported. Segments are append-only, so the
    link sees every byte written after it was made. (Same file system only: not for the tmpfs test.)
    """

    def __init__(self, log_dir: Path, keep_dir: Path) -> None:
        self.log_dir = log_dir
        self.keep_dir = keep_dir
        self.keep_dir.mkdir(parents=True, exist_ok=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="segment-keeper", daemon=True)

    def __enter__(self) -> SegmentKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.link_new()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.link_new()

    def link_new(self) -> None:
        if not self.log_dir.is_dir():
            return
        for _, path in list_segment_files(self.log_dir):
            target = self.keep_dir / path.name
            if not target.exists():
                with contextlib.suppress(FileNotFoundError):  # compacted meanwhile: the contiguity check sees it
                    os.link(path, target)

    def records(self) -> list[Record]:
        reader = LogReader(self.keep_dir)
        records = list(reader.records())
        assert reader.torn_tail is None, reader.torn_tail
        return records


# -- load ------------------------------------------------------------------------------------------------------


def incompressible(size: int) -> str:
    """Random text: log blocks are compressed, so only random payloads take the disk space they seem to."""
    return base64.b64encode(os.urandom(size * 3 // 4)).decode("ascii")


@dataclass
class Load:
    """Background clients: one creating instances, one completing their jobs; outcomes with their times."""

    address: str
    process_id: str
    job_type: str
    payload_bytes: int
    created: list[tuple[float, int]] = field(default_factory=list)
    failed: list[tuple[float, str]] = field(default_factory=list)
    completed: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Load:
        self._threads = [
            threading.Thread(target=self._with_stub, args=(self._create_loop,), daemon=True),
            threading.Thread(target=self._with_stub, args=(self._work_loop,), daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _with_stub(self, loop: Callable[[Stub], None]) -> None:
        channel = grpc.insecure_channel(self.address)
        try:
            loop(Stub(channel))
        finally:
            channel.close()

    def _create_loop(self, stub: Stub) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            try:
                key = create(stub, self.process_id, {"n": n, "payload": incompressible(self.payload_bytes)})
                self.created.append((time.monotonic(), key))
            except grpc.RpcError as e:
                self.failed.append((time.monotonic(), f"{e.code().name}: {e.details()}"))
            time.sleep(0.005)

    def _work_loop(self, stub: Stub) -> None:
        while not self._stop.is_set():
            request = pb.ActivateJobsRequest(
                type=self.job_type, worker="load", timeout=30_000, maxJobsToActivate=20, requestTimeout=200
            )
            try:
                jobs = [job for response in stub.ActivateJobs(request, timeout=10) for job in response.jobs]
                for job in jobs:
                    complete(stub, job.key, {"done": True})
                    self.completed += 1
            except grpc.RpcError as e:
                self.failed.append((time.monotonic(), f"{e.code().name}: {e.details()}"))

    def created_between(self, start: float, end: float) -> int:
        return sum(1 for t, _ in list(self.created) if start <= t <= end)


# -- fixtures ----------------------------------------------------------------------------------------------


@pytest.fixture
def search_server(tmp_path: Path) -> Iterator[NoidaServer]:
    """A search server of the test's own (stopped by its pid at the end, whatever the test did to it)."""
    server = NoidaServer(tmp_path / "search-data")
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def running(weir: WeirProcess) -> Iterator[WeirProcess]:
    """Start the broker; make sure it is gone afterwards (a test stops it gracefully itself)."""
    weir.start()
    try:
        yield weir
    finally:
        weir.kill()


# -- 1. a mixed workload, exported --------------------------------------------------------------------------


def test_mixed_workload_lands_in_zeebe_indices_once_and_is_searchable(
    tmp_path: Path, search_server: NoidaServer
) -> None:
    search_server.start()
    weir = WeirProcess(tmp_path / "data", env=es_exporter_env(search_server.url))
    with running(weir):
        channel = grpc.insecure_channel(weir.address)
        stub = Stub(channel)
        d = deploy(stub, "one-task.bpmn")
        keys = [create(stub, d.pid(), {"order": {"id": i, "lines": [1, 2]}}) for i in range(5)]
        jobs = {job.processInstanceKey: job for job in activate(stub, d.type("test"), 5)}
        complete(stub, jobs[keys[0]].key, {"approved": True})
        complete(stub, jobs[keys[1]].key, {"approved": False})
        stub.FailJob(pb.FailJobRequest(jobKey=jobs[keys[2]].key, retries=0, errorMessage="card declined"), timeout=10)
        stub.SetVariables(
            pb.SetVariablesRequest(elementInstanceKey=keys[3], variables=json.dumps({"priority": "high"})),
            timeout=10,
        )
        stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=keys[4]), timeout=10)
        with pytest.raises(grpc.RpcError):  # a rejection: in the log, not exported by default
            stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=keys[4]), timeout=10)
        channel.close()
        wait_until_exported(weir, timeout=20)
        assert weir.stop() == 0

    records = list(iter_records(partition_dir(weir)))
    assert records[0].position == 1, "nothing was compacted: the whole log is there to compare with"
    hits = assert_exported_exactly(search_server, records)
    expected = [r for r in records if exported_by_default(r)]
    assert {ValueType(r.value_type) for r in expected} >= {
        ValueType.DEPLOYMENT,
        ValueType.PROCESS,
        ValueType.PROCESS_INSTANCE,
        ValueType.PROCESS_INSTANCE_CREATION,
        ValueType.JOB,
        ValueType.JOB_BATCH,
        ValueType.INCIDENT,
        ValueType.VARIABLE,
        ValueType.VARIABLE_DOCUMENT,
    }, "the workload produced every kind of record the exporter ships"
    assert not any(h["_source"]["recordType"] != "EVENT" for h in hits), "commands and rejections stay home"
    assert any(r.record_type == RecordType.COMMAND_REJECTION for r in records)

    # Through the aliases, by value type, the way Zeebe users query.
    per_type = Counter(ValueType(r.value_type) for r in expected)
    for value_type, count in per_type.items():
        assert search_server.count(f"{PREFIX}-{slug(value_type)}") == count, value_type.name
    status, aliases = search_server.request("GET", f"/_alias/{PREFIX}-job")
    assert status == 200 and set(aliases) == {index_of(r) for r in expected if r.value_type == ValueType.JOB}

    # By valueType and intent.
    def by_type_and_intent(value_type: ValueType, intent: str) -> list[dict[str, Any]]:
        query = {"bool": {"must": [{"term": {"valueType": value_type.name}}, {"term": {"intent": intent}}]}}
        return search_server.all_hits(f"{PREFIX}_*", query)

    for value_type, intent in [
        (ValueType.INCIDENT, "CREATED"),
        (ValueType.JOB, "COMPLETED"),
        (ValueType.JOB, "FAILED"),
        (ValueType.PROCESS_INSTANCE, "ELEMENT_TERMINATED"),
        (ValueType.VARIABLE, "CREATED"),
        (ValueType.VARIABLE_DOCUMENT, "UPDATED"),
    ]:
        in_log = [r.position for r in expected if r.value_type == value_type and r.intent_enum.name == intent]
        assert in_log, f"the workload wrote {value_type.name} {intent}"
        assert [h["_source"]["position"] for h in by_type_and_intent(value_type, intent)] == in_log
    incident = by_type_and_intent(ValueType.INCIDENT, "CREATED")[0]["_source"]["value"]
    assert incident["processInstanceKey"] == keys[2] and incident["errorMessage"] == "card declined"

    # By process instance: every record of each instance, across value types.
    for key in keys:
        in_log = [r.position for r in expected if r.value.get("processInstanceKey") == key]
        found = search_server.all_hits(f"{PREFIX}_*", {"term": {"value.processInstanceKey": key}})
        assert [h["_source"]["position"] for h in found] == in_log
    cancelled = search_server.all_hits(f"{PREFIX}-process-instance", {"term": {"value.processInstanceKey": keys[4]}})
    assert "ELEMENT_TERMINATED" in {h["_source"]["intent"] for h in cancelled}
    priority = search_server.all_hits(f"{PREFIX}-variable", {"term": {"value.name": "priority"}})
    assert [h["_source"]["value"]["value"] for h in priority] == ['"high"']


# -- 2. a search server outage under load --------------------------------------------------------------------


@pytest.mark.slow
def test_outage_under_load_loses_nothing_duplicates_nothing_and_compaction_waits(
    tmp_path: Path, search_server: NoidaServer
) -> None:
    search_server.start()
    env = {
        **es_exporter_env(search_server.url, request_timeout="2"),
        "WEIR_BROKER_LOG_SEGMENT_SIZE": str(1 * MiB),
    }
    weir = WeirProcess(tmp_path / "data", env=env, extra_args=["--snapshot-period", "1"])
    keeper = SegmentKeeper(partition_dir(weir) / "log", tmp_path / "all-segments")
    with running(weir), keeper:
        channel = grpc.insecure_channel(weir.address)
        d = deploy(Stub(channel), "one-task.bpmn")
        channel.close()
        with Load(weir.address, d.pid(), d.type("test"), payload_bytes=4096) as load:
            eventually(lambda: exported_position(weir) > 0, timeout=10, what="exporting to begin")
            time.sleep(1.0)

            # Outage: the server is stopped by its pid (SIGTERM: noida-db writes its data file periodically, so a
            # SIGKILL would lose documents it had acknowledged, a fault of the server and not of Weir's exporting).
            # The broker keeps taking commands.
            search_server.stop()
            outage_started = time.monotonic()
            snapshots_before = broker_output(weir).count("snapshot at position")
            time.sleep(0.3)  # a bulk answered just before the server exited may still be acknowledging
            acknowledged = exported_position(weir)
            samples: list[tuple[int, int]] = []
            while time.monotonic() - outage_started < 4.0:
                first = first_log_position(weir)  # read before the acknowledgement it is compared with
                samples.append((first, exported_position(weir)))
                time.sleep(0.1)
            outage_ended = time.monotonic()
            assert all(ack == acknowledged for _, ack in samples), "nothing is acknowledged while the server is down"
            assert all(first <= ack + 1 for first, ack in samples), f"compacted past the exporter: {samples}"
            assert load.created_between(outage_started, outage_ended) >= 20, "creates go on during the outage"
            assert not load.failed, load.failed[:5]
            snapshots_during_outage = broker_output(weir).count("snapshot at position") - snapshots_before
            segments_at_end = len(list_segment_files(partition_dir(weir) / "log"))
            behind_at_end = log_position(weir) - acknowledged

            # The server is back, on the same port with the same data; the load goes on.
            search_server.start()
            back = time.monotonic()
            target = log_position(weir)
            eventually(lambda: exported_position(weir) >= target, timeout=30, interval=0.05, what="catch-up")
            catch_up_s = time.monotonic() - back
            eventually(
                lambda: first_log_position(weir) > acknowledged + 1,
                timeout=15,
                interval=0.1,
                what="compaction past the outage once everything was exported",
            )
        assert not load.failed, load.failed[:5]
        last = wait_until_exported(weir, timeout=30)
        assert weir.stop() == 0

    print(
        f"\noutage: {len(load.created)} instances created, {load.created_between(outage_started, outage_ended)} "
        f"during a {outage_ended - outage_started:.1f}s outage ({snapshots_during_outage} snapshots, "
        f"{segments_at_end} segments, {behind_at_end} records behind at its end); caught up {catch_up_s:.2f}s "
        f"after the server was back; {last} records, log now starts at {first_log_position(weir)}"
    )
    assert segments_at_end >= 3, "the outage wrote enough segments for compaction to matter"
    assert snapshots_during_outage >= 2, "snapshots were taken while the server was down"
    records = keeper.records()
    assert records[0].position == 1 and records[-1].position == last, "every segment ever written was kept"
    assert_exported_exactly(search_server, records)


# -- 3. disk full: refuse in time, recover once exported (RELIABILITY R10) -----------------------------------


@contextlib.contextmanager
def small_disk(directory: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``directory`` (root only), always unmounted afterwards."""
    directory.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount command: the disk-full test needs a small tmpfs")
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)], capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here (needs root): {result.stderr.strip()}")
    try:
        yield directory
    finally:
        if subprocess.run(["umount", str(directory)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(directory)], capture_output=True)


def free_bytes(directory: Path) -> int:
    return shutil.disk_usage(directory).free


def is_disk_rejection(error: grpc.RpcError) -> bool:
    return error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "disk space" in (error.details() or "")


@pytest.mark.slow
def test_full_disk_rejects_commands_before_enospc_and_accepts_them_after_export_and_compaction(
    tmp_path: Path, search_server: NoidaServer
) -> None:
    watermark = 16 * MiB
    with small_disk(tmp_path / "disk", "48m") as disk:
        env = {
            **es_exporter_env(search_server.url, request_timeout="2"),  # the server is not started yet: down
            "WEIR_BROKER_MIN_FREE_DISK_BYTES": str(watermark),
            "WEIR_BROKER_LOG_SEGMENT_SIZE": str(2 * MiB),
        }
        weir = WeirProcess(disk, env=env, extra_args=["--snapshot-period", "1"])  # its output goes outside the disk
        with running(weir):
            channel = grpc.insecure_channel(weir.address)
            stub = Stub(channel)
            process_id = deploy(stub, "pass-through.bpmn").pid()
            acknowledged: list[int] = []
            free_at_start = free_bytes(disk)
            started = time.monotonic()
            rejection: grpc.RpcError | None = None
            while rejection is None:
                assert time.monotonic() - started < 30, f"no rejection after {len(acknowledged)} creates"
                try:
                    acknowledged.append(create(stub, process_id, {"payload": incompressible(256 * 1024)}))
                except grpc.RpcError as e:
                    if not is_disk_rejection(e):
                        raise
                    rejection = e
            free_at_rejection = free_bytes(disk)
            filled_s = time.monotonic() - started
            assert free_at_rejection < watermark, "rejected only once the disk is nearly full"
            assert free_at_rejection > watermark // 4, "rejected well before the disk is full"
            assert "free disk space" in (rejection.details() or "")

            # While the exporter cannot export, the log cannot be compacted: creates stay refused, the broker healthy.
            for _ in range(5):
                time.sleep(0.2)
                with pytest.raises(grpc.RpcError) as refused:
                    create(stub, process_id, {"payload": "small"})
                assert is_disk_rejection(refused.value), refused.value
            assert weir.probe("/health")[0] == 200
            assert exported_position(weir) <= 1, "nothing was exported (at most the first command was skipped)"

            # The server comes up: the exporter catches up, a snapshot compacts the log, space comes back.
            search_server.start()
            back = time.monotonic()

            def accepted() -> int:
                try:
                    return create(stub, process_id, {"payload": "small"})
                except grpc.RpcError as e:
                    if is_disk_rejection(e):
                        return 0
                    raise

            acknowledged.append(eventually(accepted, timeout=30, interval=0.2, what="creates to be accepted again"))
            recovered_s = time.monotonic() - back
            free_after = free_bytes(disk)
            assert free_after >= watermark
            acknowledged += [create(stub, process_id, {"payload": "small"}) for _ in range(3)]
            channel.close()
            wait_until_exported(weir, timeout=30)
            assert weir.probe("/health")[0] == 200
            assert weir.stop() == 0
        broker_log = broker_output(weir)
        for symptom in ("No space left", "ENOSPC", "Errno 28"):
            assert symptom not in broker_log, f"the broker ran into a full disk: {symptom}"
        records = list(iter_records(partition_dir(weir)))

    created_in_log = {
        r.value["processInstanceKey"]
        for r in records
        if r.value_type == ValueType.PROCESS_INSTANCE_CREATION and r.record_type == RecordType.EVENT
    }
    creations = search_server.all_hits(
        f"{PREFIX}-process-instance-creation", fields=["position", "value.processInstanceKey"]
    )
    created_exported = {h["_source"]["value"]["processInstanceKey"] for h in creations}
    lost = set(acknowledged) - created_in_log - created_exported
    assert not lost, f"{len(lost)} acknowledged creates are neither in the log nor exported"
    assert records[0].position > 1, "the log was compacted"
    print(
        f"\ndisk full: {len(acknowledged)} creates; {free_at_start} bytes free at start, rejection after "
        f"{filled_s:.1f}s with {free_at_rejection} bytes free (watermark {watermark}); accepting again "
        f"{recovered_s:.2f}s after the search server came up, {free_after} bytes free then"
    )
