"""The history exporter in real ``weir start`` processes: the default SQLite history and a PostgreSQL one.

A mixed workload (instances completed, failed into incidents, cancelled, called sub-processes, variables set,
an incident resolved) is driven through the gateway; the history is then compared with the broker's own log, read
offline once the broker stopped — after a ``kill -9`` under load and a restart, and after a PostgreSQL outage.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import grpc
from pyzeebe.proto import gateway_pb2 as pb

from exporters.history import schema
from exporters.history.rows import HISTORY_VALUE_TYPES
from tests.exporters.history_check import assert_history_matches, query
from tests.harness import WeirProcess, eventually
from tests.integration.clients import Deployed, Stub, activate, complete, create, deploy, logged_records
from tests.integration.test_exporting import log_position, metric
from tests.postgres_server import PostgresServer

HISTORY = "exporters.history.HistoryExporter"


def history_position(weir: WeirProcess) -> int:
    return int(metric(weir, "weir_exporter_position", exporter="history", partition="1") or 0)


def wait_until_exported(weir: WeirProcess, timeout: float = 60.0) -> int:
    def caught_up() -> int:
        last = log_position(weir)
        return last if last and history_position(weir) >= last else 0

    return eventually(caught_up, timeout=timeout, interval=0.1, what="the history exporter to acknowledge the log")


def writer_processes(weir: WeirProcess) -> list[int]:
    """The history writer processes the broker started."""
    return children_running(weir.pid, b"exporters.history.writer")


def children_running(parent: int, command_part: bytes) -> list[int]:
    """The live child processes of ``parent`` whose command line contains ``command_part``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and command_part in command:
            found.append(int(entry.name))
    return found


class Workload:
    """A mix of what processes do, on processes deployed under unique ids."""

    def __init__(self, stub: Stub) -> None:
        self.stub = stub
        self.one_task: Deployed = deploy(stub, "one-task.bpmn")
        self.calls: Deployed = deploy(stub, "call-activity.bpmn")

    def round(self, i: int) -> None:
        stub = self.stub
        for n in range(5):
            create(stub, self.one_task.pid(), {"round": i, "order": {"n": n, "lines": [1, 2, 3]}})
        jobs = activate(stub, self.one_task.type("test"), 5, worker=f"worker-{i}")
        for job in jobs[:3]:
            complete(stub, job.key, {"done": i})
        stub.FailJob(pb.FailJobRequest(jobKey=jobs[3].key, retries=0, errorMessage=f"no stock {i}"), timeout=10)
        stub.SetVariables(
            pb.SetVariablesRequest(elementInstanceKey=jobs[4].processInstanceKey, variables='{"note": "cancel"}'),
            timeout=10,
        )
        stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=jobs[4].processInstanceKey))
        create(stub, self.calls.pid("call-activity"), {"amount": i})
        (child_job,) = activate(stub, self.calls.type("child-work"), 1)
        complete(stub, child_job.key, {"paid": True})
        (after,) = activate(stub, self.calls.type("after-call"), 1)
        complete(stub, after.key)


def load_in_background(stub: Stub, process_id: str, stop: threading.Event) -> threading.Thread:
    """Creates instances as fast as the broker takes them until ``stop`` (errors while it is down are ignored)."""

    def run() -> None:
        n = 0
        while not stop.is_set():
            try:
                create(stub, process_id, {"n": n})
                n += 1
            except grpc.RpcError:
                time.sleep(0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def resolve_one_incident(stub: Stub, url: str) -> None:
    """Find an open incident the way a user would, in the history, and resolve it."""
    from exporters.history.reader import open_reader

    async def first_incident() -> dict:
        reader = open_reader(url)
        try:
            found = await reader.search("incidents", {"filter": {"state": "ACTIVE"}, "page": {"limit": 1}})
        finally:
            await reader.close()
        return found["items"][0]

    incident = asyncio.run(first_incident())
    stub.UpdateJobRetries(pb.UpdateJobRetriesRequest(jobKey=int(incident["jobKey"]), retries=1), timeout=10)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=int(incident["incidentKey"])), timeout=10)


def test_weir_start_keeps_a_sqlite_history_that_survives_kill_9(tmp_path: Path) -> None:
    weir = WeirProcess(tmp_path / "data").start()
    url = f"sqlite:///{(tmp_path / 'data' / 'history.db').resolve()}"
    channel = grpc.insecure_channel(weir.address)
    stub = Stub(channel)
    try:
        work = Workload(stub)
        for i in range(3):
            work.round(i)
        wait_until_exported(weir)
        resolve_one_incident(stub, url)
        stop = threading.Event()
        loader = load_in_background(stub, work.one_task.pid(), stop)
        time.sleep(1.5)
        writers = writer_processes(weir)
        assert writers, "the history is written by a process of its own"
        weir.kill(signal.SIGKILL)  # under load: the exporter has records in flight
        eventually(lambda: not any(Path(f"/proc/{pid}").exists() for pid in writers), what="its writer to exit too")
        weir.start()
        time.sleep(0.5)
        stop.set()
        loader.join(10)
        channel.close()
        # A new channel with subchannels of its own: gRPC shares subchannels between channels to one address, and
        # the old channel's is still backing off after the refusals while the broker was down.
        channel = grpc.insecure_channel(weir.address, options=[("grpc.use_local_subchannel_pool", 1)])
        work.stub = Stub(channel)
        work.stub.Topology(pb.TopologyRequest(), timeout=30, wait_for_ready=True)
        try:
            work.round(3)
        except grpc.RpcError as e:  # say whether the broker is still there, and what it logged
            alive = weir.proc is not None and weir.proc.poll() is None
            raise AssertionError(f"after the restart (broker alive: {alive}): {e}\n{weir.log()}") from e
        wait_until_exported(weir)
        assert weir.stop() == 0
    finally:
        channel.close()
        weir.kill()
    records = logged_records(weir)
    expected = assert_history_matches(url, records)
    assert len(expected.instances) > 40 and len(expected.incidents) == 4
    assert sorted({s for _, s in expected.incidents.values()}) == ["ACTIVE", "RESOLVED"]
    children = query(url, "SELECT COUNT(*) FROM process_instances WHERE parent_process_instance_key IS NOT NULL")
    assert children == [(4,)], "called processes know their parent"
    assert len(query(url, "SELECT 1 FROM jobs WHERE worker = 'worker-1'")) >= 4


def test_a_postgresql_history_waits_out_an_outage_and_loses_nothing(tmp_path: Path) -> None:
    server = PostgresServer().start()
    env = {
        "WEIR_BROKER_EXPORTERS_HISTORY_CLASSNAME": HISTORY,
        "WEIR_BROKER_EXPORTERS_HISTORY_ARGS_URL": server.url,
        "WEIR_BROKER_EXPORTERS_HISTORY_ARGS_RETRY_MAX_DELAY": "0.5",
    }
    weir = WeirProcess(tmp_path / "data", env=env).start()
    channel = grpc.insecure_channel(weir.address)
    stub = Stub(channel)
    try:
        work = Workload(stub)
        work.round(0)
        exported = wait_until_exported(weir)
        server.stop()
        for i in range(1, 4):
            work.round(i)  # the engine goes on while the history database is down
        time.sleep(1.0)
        during_outage = history_position(weir)
        assert during_outage < log_position(weir), "the exporter is held back while the database is down"
        server.start()
        wait_until_exported(weir)
        assert (metric(weir, "weir_history_write_failures_total", partition="1") or 0) > 0
        resolve_one_incident(stub, server.url)
        wait_until_exported(weir)
        assert weir.stop() == 0
        records = logged_records(weir)
        acknowledged_unwritten = [
            r.describe()
            for r in records
            if exported < r.position <= during_outage and r.is_event and r.value_type in HISTORY_VALUE_TYPES
        ]
        assert not acknowledged_unwritten, "only records the history does not keep were acknowledged during the outage"
        expected = assert_history_matches(server.url, records)
        assert len(expected.instances) == 4 * 7 and len(expected.incidents) == 4
        (version,) = server.query("SELECT MAX(version) FROM schema_version")[0]
        assert version == schema.LATEST_VERSION
        assert json.loads(server.query("SELECT value FROM variables WHERE name = 'note' LIMIT 1")[0][0]) == "cancel"
    finally:
        channel.close()
        weir.kill()
        server.remove()


def test_nul_and_long_names_from_clients_never_stop_a_postgresql_history(tmp_path: Path) -> None:
    """What the gateway lets through and PostgreSQL refuses as text (NUL in a variable name, a worker, a FailJob
    and ThrowError message) or might refuse as an indexed value (a 10 kB variable name) is stored, and the
    history goes on to the instances after it."""
    server = PostgresServer().start()
    env = {"WEIR_BROKER_EXPORTERS_HISTORY_CLASSNAME": HISTORY, "WEIR_BROKER_EXPORTERS_HISTORY_ARGS_URL": server.url}
    weir = WeirProcess(tmp_path / "data", env=env).start()
    channel = grpc.insecure_channel(weir.address)
    stub = Stub(channel)
    try:
        one_task = deploy(stub, "one-task.bpmn")
        for _ in range(2):
            create(stub, one_task.pid(), {"nul\u0000name": "a\u0000b", "n" * 10_000: 1})
        failed, thrown = activate(stub, one_task.type("test"), 2, worker="w\x00rker")
        stub.FailJob(pb.FailJobRequest(jobKey=failed.key, retries=0, errorMessage="no\x00stock"), timeout=10)
        throw = pb.ThrowErrorRequest(jobKey=thrown.key, errorCode="e\x00code", errorMessage="bad\x00input")
        stub.ThrowError(throw, timeout=10)
        later = create(stub, one_task.pid(), {"later": True})
        (job,) = activate(stub, one_task.type("test"), 1)
        complete(stub, job.key)
        wait_until_exported(weir)
        assert not metric(weir, "weir_history_write_failures_total", partition="1")
        assert weir.stop() == 0
    finally:
        channel.close()
        weir.kill()
    try:
        names = {name for (name,) in server.query("SELECT name FROM variables")}
        assert {"nul\ufffdname", "n" * 10_000, "later"} <= names
        workers = {w for (w,) in server.query("SELECT worker FROM jobs WHERE worker IS NOT NULL")}
        assert "w\ufffdrker" in workers
        messages = sorted(m for (m,) in server.query("SELECT error_message FROM incidents"))
        assert "no\ufffdstock" in messages and len(messages) == 2, messages
        assert server.query(f"SELECT state FROM process_instances WHERE process_instance_key = {later}") == [
            ("COMPLETED",)
        ]
    finally:
        server.remove()


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie waiting for its parent has)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _weir_start_in_a_session(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, list[int]]:
    """``weir start`` as a terminal would run it (a session of its own), ready; with its log and writer pids."""
    from tests.harness import REPO, free_port

    monitoring = free_port()
    command = [sys.executable, "-m", "client.cli", "start", "--data-dir", str(tmp_path / "data")]
    command += ["--gateway-port", str(free_port()), "--rest-port", str(free_port())]
    command += ["--monitoring-port", str(monitoring)]
    log_path = tmp_path / "weir.log"
    with log_path.open("w") as out:
        proc = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        eventually(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{monitoring}/ready", timeout=1).status == 200,
            timeout=60,
            what="weir start to be ready",
        )
        writers = eventually(lambda: children_running(proc.pid, b"exporters.history.writer"), what="its writer")
    except BaseException:
        proc.kill()
        raise
    return proc, log_path, writers


def test_ctrl_c_stops_weir_start_and_its_writer_cleanly(tmp_path: Path) -> None:
    """Ctrl-C in a terminal sends SIGINT to the foreground process group: the writer, in a group of its own, never
    gets it (not even while it starts), and the broker shuts down and closes it, so nothing reports a writer that
    died."""
    proc, log_path, writers = _weir_start_in_a_session(tmp_path)
    try:
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    log = log_path.read_text()
    assert "writer process exited" not in log and "Traceback" not in log, log
    assert not any(Path(f"/proc/{pid}").exists() for pid in writers), "the writer exited with the broker"


def test_the_writer_exits_by_itself_when_the_broker_is_killed(tmp_path: Path) -> None:
    """kill -9 of the broker alone: its writer (in a process group of its own) sees the socket close and exits."""
    proc, _, writers = _weir_start_in_a_session(tmp_path)
    proc.kill()
    proc.wait(10)
    eventually(lambda: not any(Path(f"/proc/{pid}").exists() for pid in writers), timeout=15, what="the writer to exit")
