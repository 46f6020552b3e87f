"""Nothing acknowledged is ever lost: kill -9 a loaded broker again and again, then audit its log offline.

Client threads create one-task instances and complete their jobs through the Zeebe gateway protocol (pyzeebe's raw
stubs), recording every create and complete the broker acknowledged. The broker is killed with SIGKILL at random
moments and restarted on the same data and ports while the load keeps going. After a final graceful stop the log is
read offline (broker.tools.inspect) and must contain every acknowledged effect exactly once, issue no key twice, and
replay to exactly the state the broker had.
"""

import os
import random
import threading
import time
from collections import Counter
from pathlib import Path

import grpc
import pytest
from pyzeebe.proto import gateway_pb2, gateway_pb2_grpc

from broker.protocol.enums import (
    JobIntent,
    ProcessInstanceIntent,
    ValueType,
)
from broker.tools.inspect import diff_dumps, dump_state, iter_records, newest_snapshot_dir, replay_log
from tests.entities import CHANNEL_OPTIONS, entity_of
from tests.harness import BPMN, WeirProcess

KILLS = 4


class Load:
    """Client threads that create instances and complete jobs, keeping what the broker acknowledged."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        self.stub = gateway_pb2_grpc.GatewayStub(self.channel)
        self.stop = threading.Event()
        self.created: list[int] = []
        self.completed: list[int] = []
        self.errors: Counter[str] = Counter()
        self.threads = [threading.Thread(target=self._create, daemon=True) for _ in range(3)]
        self.threads += [threading.Thread(target=self._work, args=(f"w{i}",), daemon=True) for i in range(2)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)
        self.channel.close()

    def _failed(self, error: grpc.RpcError) -> None:
        self.errors[error.code().name] += 1
        time.sleep(0.02)

    def _create(self) -> None:
        request = gateway_pb2.CreateProcessInstanceRequest(bpmnProcessId="one-task", version=-1, variables="{}")
        while not self.stop.is_set():
            try:
                response = self.stub.CreateProcessInstance(request, timeout=2)
            except grpc.RpcError as e:
                self._failed(e)
                continue
            self.created.append(response.processInstanceKey)

    def _work(self, worker: str) -> None:
        # A job whose completion was not acknowledged is retried (after a restart it is still activated), and
        # its timeout brings back jobs whose activation response was lost in a crash.
        unfinished: list[int] = []
        while not self.stop.is_set():
            if not unfinished:
                request = gateway_pb2.ActivateJobsRequest(
                    type="test", worker=worker, timeout=1500, maxJobsToActivate=25, requestTimeout=300
                )
                try:
                    for response in self.stub.ActivateJobs(request, timeout=3):
                        unfinished.extend(job.key for job in response.jobs)
                except grpc.RpcError as e:
                    self._failed(e)
                    continue
            while unfinished and not self.stop.is_set():
                key = unfinished[0]
                try:
                    self.stub.CompleteJob(gateway_pb2.CompleteJobRequest(jobKey=key, variables="{}"), timeout=2)
                except grpc.RpcError as e:
                    if e.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION):
                        unfinished.pop(0)  # completed by an earlier, unacknowledged attempt, or timed out
                    self._failed(e)
                    continue
                unfinished.pop(0)
                self.completed.append(key)


@pytest.mark.timeout(120)
def test_kill_9_under_load_loses_nothing_acknowledged(tmp_path: Path) -> None:
    seed = int(os.environ.get("WEIR_CRASH_SEED", random.SystemRandom().randrange(1 << 32)))
    print(f"WEIR_CRASH_SEED={seed}")
    rng = random.Random(seed)
    weir = WeirProcess(tmp_path / "data")
    weir.start()
    load: Load | None = None
    restarts: list[float] = []
    try:
        with grpc.insecure_channel(weir.address) as channel:
            resource = gateway_pb2.Resource(name="one-task.bpmn", content=(BPMN / "one-task.bpmn").read_bytes())
            gateway_pb2_grpc.GatewayStub(channel).DeployResource(
                gateway_pb2.DeployResourceRequest(resources=[resource]), timeout=10
            )
        load = Load(weir.address)
        load.start()
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.8, 2.5))
            weir.kill()
            started = time.monotonic()
            weir.start(timeout=30)
            restarts.append(time.monotonic() - started)
        time.sleep(1.5)
        load.finish()
        assert weir.stop() == 0, weir.log()
    finally:
        if load is not None:
            load.stop.set()
        weir.kill()
    print(
        f"acknowledged: {len(load.created)} creates, {len(load.completed)} completes; client errors "
        f"{dict(load.errors)}; restart to ready: {', '.join(f'{s:.2f}s' for s in restarts)}"
    )
    assert len(load.created) >= 50 and len(load.completed) >= 20, "the load was too small to prove anything"

    partition_dir = weir.data_dir / "partitions" / "1"
    records = list(iter_records(partition_dir))
    assert [r.position for r in records] == list(range(1, len(records) + 1)), "positions must be contiguous"

    instances = {
        r.key
        for r in records
        if r.is_event
        and r.value_type == ValueType.PROCESS_INSTANCE
        and r.intent == ProcessInstanceIntent.ELEMENT_ACTIVATING
        and r.value["bpmnElementType"] == "PROCESS"
    }
    lost = [k for k in load.created if k not in instances]
    assert not lost, f"{len(lost)} acknowledged instances are not in the log, e.g. {lost[:5]}"

    completions = Counter(
        r.key for r in records if r.is_event and r.value_type == ValueType.JOB and r.intent == JobIntent.COMPLETED
    )
    lost = [k for k in load.completed if completions[k] == 0]
    assert not lost, f"{len(lost)} acknowledged job completions are not in the log, e.g. {lost[:5]}"
    twice = [k for k, n in completions.items() if n > 1]
    assert not twice, f"jobs completed more than once: {twice[:5]}"
    assert len(set(load.completed)) == len(load.completed), "a completion was acknowledged twice"

    births: dict[int, set[tuple[str, int]]] = {}
    born = Counter()
    for rec in records:
        entity = entity_of(rec)
        if entity is not None:
            births.setdefault(rec.key, set()).add(entity)
            born[(rec.value_type, rec.intent, rec.key)] += 1
    shared = {k: v for k, v in births.items() if len(v) > 1}
    assert not shared, f"keys issued to different entities: {list(shared.items())[:5]}"
    again = [k for k, n in born.items() if n > 1]
    assert not again, f"entities created twice under one key: {again[:5]}"

    report = replay_log(partition_dir, tmp_path / "replayed")
    print(
        f"offline replay: {report.result.records_read} records in {report.seconds:.2f}s "
        f"({report.records_per_second:,.0f} records/s)"
    )
    live = dump_state(partition_dir / "runtime")
    differences = diff_dumps(live, report.dump)
    assert not differences, "replay differs from the live state:\n" + "\n".join(differences)
    snapshot = newest_snapshot_dir(partition_dir)
    assert snapshot is not None
    differences = diff_dumps(dump_state(snapshot), report.dump)
    assert not differences, "replay differs from the snapshot taken at shutdown:\n" + "\n".join(differences)
