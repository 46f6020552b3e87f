"""Load through the gateway with a Jepsen-style history, and the checkers run over every replica's log afterwards.

The load creates one-task instances and completes their jobs, remembering what the cluster acknowledged and when.
After a graceful ``weir cluster down`` each replica's partition log is read offline. Replicas must agree on their
common prefix, record by record; the prefix a majority holds is what Raft committed, and every acknowledged effect
must be in it exactly once.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from pyzeebe.proto import gateway_pb2, gateway_pb2_grpc

from broker.protocol.enums import (
    JobIntent,
    ProcessInstanceIntent,
    RecordType,
    ValueType,
)
from broker.protocol.record import Record
from broker.tools.inspect import iter_records
from tests.cluster.harness import Cluster
from tests.entities import BIRTHS, CHANNEL_OPTIONS
from tests.harness import BPMN, eventually

PARTITION_BITS = 51


def partition_of(key: int) -> int:
    return key >> PARTITION_BITS


def stub_for(address: str) -> tuple[grpc.Channel, gateway_pb2_grpc.GatewayStub]:
    channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    return channel, gateway_pb2_grpc.GatewayStub(channel)


def deploy_one_task(cluster: Cluster) -> None:
    """Deploy ``one-task`` and wait until an instance can be created on every partition (distribution done)."""
    channel, stub = stub_for(cluster.gateway)
    with channel:
        resource = gateway_pb2.Resource(name="one-task.bpmn", content=(BPMN / "one-task.bpmn").read_bytes())
        stub.DeployResource(gateway_pb2.DeployResourceRequest(resources=[resource]), timeout=10)
    creates_on_every_partition(cluster, timeout=20)


def creates_on_every_partition(cluster: Cluster, timeout: float = 30.0) -> float:
    """Seconds until the gateway has created a ``one-task`` instance on every partition."""
    started = time.monotonic()
    channel, stub = stub_for(cluster.gateway)
    seen: set[int] = set()
    request = gateway_pb2.CreateProcessInstanceRequest(bpmnProcessId="one-task", version=-1, variables="{}")

    def every_partition() -> bool:
        try:
            seen.add(partition_of(stub.CreateProcessInstance(request, timeout=5).processInstanceKey))
        except grpc.RpcError:
            time.sleep(0.02)
        return seen == set(range(1, cluster.partitions + 1))

    with channel:
        eventually(every_partition, timeout=timeout, interval=0.0, what="creates on every partition")
    return time.monotonic() - started


@dataclass
class History:
    """What the cluster acknowledged, with monotonic times: (time, key)."""

    created: list[tuple[float, int]] = field(default_factory=list)
    completed: list[tuple[float, int]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    def acks_on(self, partition: int) -> list[float]:
        """Times of every acknowledged command of ``partition`` (creates and completions), sorted."""
        return sorted(t for t, k in [*self.created, *self.completed] if partition_of(k) == partition)

    def first_ack_after(self, partition: int, moment: float) -> float | None:
        later = [t for t in self.acks_on(partition) if t > moment]
        return later[0] - moment if later else None


class Load:
    """Client threads creating one-task instances and completing their jobs through the gateway."""

    def __init__(
        self,
        address: str,
        *,
        creators: int = 3,
        workers: int = 2,
        job_timeout_ms: int = 1500,
        rpc_timeout_s: float = 5.0,
    ) -> None:
        self.channel, self.stub = stub_for(address)
        self.job_timeout_ms = job_timeout_ms
        self.rpc_timeout_s = rpc_timeout_s
        self.stop = threading.Event()
        self.history = History()
        self.threads = [threading.Thread(target=self._create, daemon=True) for _ in range(creators)]
        self.threads += [threading.Thread(target=self._work, args=(f"w{i}",), daemon=True) for i in range(workers)]

    def start(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def finish(self) -> History:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=15)
        self.channel.close()
        return self.history

    def _failed(self, error: grpc.RpcError) -> None:
        self.history.errors[error.code().name] += 1
        time.sleep(0.02)

    def _create(self) -> None:
        request = gateway_pb2.CreateProcessInstanceRequest(bpmnProcessId="one-task", version=-1, variables="{}")
        while not self.stop.is_set():
            try:
                response = self.stub.CreateProcessInstance(request, timeout=self.rpc_timeout_s)
            except grpc.RpcError as e:
                self._failed(e)
                continue
            self.history.created.append((time.monotonic(), response.processInstanceKey))

    def _work(self, worker: str) -> None:
        # A completion that was not acknowledged is retried; the job timeout brings back jobs whose activation
        # response was lost with a killed leader.
        unfinished: list[int] = []
        while not self.stop.is_set():
            if not unfinished:
                request = gateway_pb2.ActivateJobsRequest(
                    type="test",
                    worker=worker,
                    timeout=self.job_timeout_ms,
                    maxJobsToActivate=25,
                    requestTimeout=300,
                )
                try:
                    for response in self.stub.ActivateJobs(request, timeout=self.rpc_timeout_s):
                        unfinished.extend(job.key for job in response.jobs)
                except grpc.RpcError as e:
                    self._failed(e)
                    continue
            while unfinished and not self.stop.is_set():
                key = unfinished[0]
                try:
                    request = gateway_pb2.CompleteJobRequest(jobKey=key, variables="{}")
                    self.stub.CompleteJob(request, timeout=self.rpc_timeout_s)
                except grpc.RpcError as e:
                    if e.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION):
                        unfinished.pop(0)  # completed by an earlier unacknowledged attempt, or timed out
                    self._failed(e)
                    continue
                unfinished.pop(0)
                self.history.completed.append((time.monotonic(), key))


# -- reading replicas -----------------------------------------------------------------------------------------

ReplicaLogs = dict[int, dict[int, list[Record]]]  # partition -> node id -> records


def read_replica_logs(cluster: Cluster, skip: set[tuple[int, int]] | None = None) -> ReplicaLogs:
    """Every replica's partition log, read offline (the cluster must be down). ``skip``: (node, partition)."""
    logs: ReplicaLogs = {}
    for partition in range(1, cluster.partitions + 1):
        logs[partition] = {}
        for node_id in cluster.replicas(partition):
            if skip and (node_id, partition) in skip:
                continue
            logs[partition][node_id] = list(iter_records(cluster.partition_dir(node_id, partition)))
    return logs


def divergence(logs: ReplicaLogs) -> list[str]:
    """Where replicas disagree: the shorter log of every pair must be a prefix of the longer, record by record."""
    problems = []
    for partition, replicas in logs.items():
        nodes = sorted(replicas)
        for i, a in enumerate(nodes):
            for b in nodes[i + 1 :]:
                left, right = replicas[a], replicas[b]
                for n, (x, y) in enumerate(zip(left, right, strict=False)):
                    if x != y:
                        problems.append(
                            f"partition {partition}: brokers {a} and {b} differ at record #{n} "
                            f"(position {x.position} vs {y.position}): {x.describe()} / {y.describe()}"
                        )
                        break
        for node, records in replicas.items():
            positions = [r.position for r in records]
            if positions != list(range(1, len(records) + 1)):
                problems.append(f"partition {partition}: broker {node}'s positions are not contiguous from 1")
    return problems


def committed(logs: ReplicaLogs, replication: int) -> dict[int, list[Record]]:
    """Per partition, the prefix that a majority of the replicas hold (meaningful once ``divergence`` is empty)."""
    majority = replication // 2 + 1
    out = {}
    for partition, replicas in logs.items():
        ordered = sorted(replicas.values(), key=len, reverse=True)
        assert len(ordered) >= majority, f"partition {partition}: fewer than a majority of replica logs were read"
        out[partition] = ordered[0][: len(ordered[majority - 1])]
    return out


@dataclass
class Audit:
    acknowledged_creates: int
    acknowledged_completions: int
    lost_instances: list[int]
    lost_completions: list[int]
    duplicate_keys: list[str]
    double_completions: list[int]
    acknowledged_twice: list[int]
    completed_instances: int

    def problems(self) -> list[str]:
        out = []
        if self.lost_instances:
            out.append(f"{len(self.lost_instances)} acknowledged instances lost, e.g. {self.lost_instances[:5]}")
        if self.lost_completions:
            out.append(f"{len(self.lost_completions)} acknowledged completions lost, e.g. {self.lost_completions[:5]}")
        if self.duplicate_keys:
            out.append(f"duplicate keys: {self.duplicate_keys[:5]}")
        if self.double_completions:
            out.append(f"jobs completed twice: {self.double_completions[:5]}")
        if self.acknowledged_twice:
            out.append(f"keys acknowledged twice: {self.acknowledged_twice[:5]}")
        return out

    def summary(self) -> str:
        return (
            f"acknowledged {self.acknowledged_creates} creates and {self.acknowledged_completions} completions; "
            f"{self.completed_instances} instances completed; lost instances {len(self.lost_instances)}, lost "
            f"completions {len(self.lost_completions)}, duplicate keys {len(self.duplicate_keys)}, jobs completed "
            f"twice {len(self.double_completions)}"
        )


def audit(history: History, logs: ReplicaLogs, replication: int) -> Audit:
    """Check the history against what a majority of every partition's replicas committed."""
    log = committed(logs, replication)
    instances: set[int] = set()
    finished = 0
    completions: Counter[int] = Counter()
    births: dict[int, set[tuple[str, int]]] = {}
    born: Counter[tuple[int, int, int, int]] = Counter()
    for records in log.values():
        for r in records:
            if r.record_type != RecordType.EVENT:
                continue
            if r.value_type == ValueType.PROCESS_INSTANCE and r.value.get("bpmnElementType") == "PROCESS":
                if r.intent == ProcessInstanceIntent.ELEMENT_ACTIVATING:
                    instances.add(r.key)
                elif r.intent == ProcessInstanceIntent.ELEMENT_COMPLETED:
                    finished += 1
            if r.value_type == ValueType.JOB and r.intent == JobIntent.COMPLETED:
                completions[r.key] += 1
            kind = BIRTHS.get((r.value_type, r.intent))
            if kind is not None and r.key > 0:
                if kind == "element" and r.value.get("bpmnElementType") == "PROCESS":
                    kind = "process-instance"
                births.setdefault(r.key, set()).add((kind, r.partition_id))
                born[(r.partition_id, r.value_type, r.intent, r.key)] += 1
    created = [k for _, k in history.created]
    done = [k for _, k in history.completed]
    # A deployment and its processes are distributed to every partition under their keys: one entity each.
    shared = [f"{k}: {sorted(v)}" for k, v in births.items() if len({kind for kind, _ in v}) > 1]
    again = [f"{k} on partition {p} ({ValueType(vt).name} {i})" for (p, vt, i, k), n in born.items() if n > 1]
    return Audit(
        acknowledged_creates=len(created),
        acknowledged_completions=len(done),
        lost_instances=[k for k in created if k not in instances],
        lost_completions=[k for k in done if completions[k] == 0],
        duplicate_keys=shared + again,
        double_completions=[k for k, n in completions.items() if n > 1],
        acknowledged_twice=[k for k, n in Counter(created + done).items() if n > 1],
        completed_instances=finished,
    )


def write_history(path: Path, history: History) -> None:
    """Keep the history next to the data for a failed run's post-mortem."""
    with path.open("w") as f:
        for t, k in history.created:
            f.write(json.dumps({"op": "create", "t": t, "key": k}) + "\n")
        for t, k in history.completed:
            f.write(json.dumps({"op": "complete", "t": t, "key": k}) + "\n")
