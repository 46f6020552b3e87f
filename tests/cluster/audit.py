"""Load through the gateway with a Jepsen-style history, and the checkers run over every replica's log afterwards.

The load creates instances (one-task by default) and completes their jobs, remembering what the cluster acknowledged
and when. After a graceful ``weir cluster down`` each replica's partition log is read offline. Replicas must agree on
their common prefix, record by record; the prefix a majority holds is what Raft committed, and every acknowledged
effect must be in it exactly once. Each replica's log, replayed offline, must also give the state that broker holds.
"""

from __future__ import annotations

import itertools
import json
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from pyzeebe.proto import gateway_pb2, gateway_pb2_grpc

from broker.protocol.enums import (
    JobIntent,
    ProcessInstanceIntent,
    RecordType,
    ValueType,
)
from broker.protocol.record import Record
from broker.tools.inspect import diff_dumps, dump_state, iter_records, replay_log
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
    deploy_fixture(cluster, "one-task.bpmn", "one-task")


def deploy_fixture(cluster: Cluster, fixture: str, process_id: str, probe_variables: str = "{}") -> None:
    """Deploy a BPMN fixture and wait until ``process_id`` can be created on every partition.

    The probe instances stay: pick ``probe_variables`` that let them end on their own (or give the load's workers
    their jobs), so they do not hold anything open.
    """
    channel, stub = stub_for(cluster.gateway)
    with channel:
        resource = gateway_pb2.Resource(name=fixture, content=(BPMN / fixture).read_bytes())
        stub.DeployResource(gateway_pb2.DeployResourceRequest(resources=[resource]), timeout=10)
    creates_on_every_partition(cluster, timeout=20, process_id=process_id, variables=probe_variables)


def creates_on_every_partition(
    cluster: Cluster, timeout: float = 30.0, *, process_id: str = "one-task", variables: str = "{}"
) -> float:
    """Seconds until the gateway has created a ``process_id`` instance on every partition."""
    started = time.monotonic()
    channel, stub = stub_for(cluster.gateway)
    seen: set[int] = set()
    request = gateway_pb2.CreateProcessInstanceRequest(bpmnProcessId=process_id, version=-1, variables=variables)

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
    # The variables each acknowledged create was sent with (by instance key).
    variables: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Every job a worker received, with when: a job may come twice (at-least-once delivery), never complete twice.
    activated: list[tuple[float, int]] = field(default_factory=list)

    def acks_on(self, partition: int) -> list[float]:
        """Times of every acknowledged command of ``partition`` (creates and completions), sorted."""
        return sorted(t for t, k in [*self.created, *self.completed] if partition_of(k) == partition)

    def first_ack_after(self, partition: int, moment: float) -> float | None:
        later = [t for t in self.acks_on(partition) if t > moment]
        return later[0] - moment if later else None

    def activated_again(self) -> int:
        """Jobs handed out more than once (allowed: a lost activation response comes back after its timeout)."""
        return sum(1 for n in Counter(k for _, k in self.activated).values() if n > 1)


# A job worker's work: the job's variables in, the variables to complete it with out (must be idempotent).
JobHandler = Callable[[dict[str, Any]], dict[str, Any]]


def _no_variables(_variables: dict[str, Any]) -> dict[str, Any]:
    return {}


class Load:
    """Client threads creating instances and completing their jobs through the gateway.

    By default: ``one-task`` instances with no variables, and ``workers`` threads completing its ``test`` jobs.
    ``process_id``, ``variables`` (the variables of the n-th create attempt), ``handlers`` (job type -> what to
    complete its jobs with; ``workers`` threads per type) and ``max_creates`` (stop creating once that many were
    acknowledged) shape other workloads.
    """

    def __init__(
        self,
        address: str,
        *,
        creators: int = 3,
        workers: int = 2,
        job_timeout_ms: int = 1500,
        rpc_timeout_s: float = 5.0,
        process_id: str = "one-task",
        variables: Callable[[int], dict[str, Any]] | None = None,
        handlers: dict[str, JobHandler] | None = None,
        max_creates: int | None = None,
    ) -> None:
        self.channel, self.stub = stub_for(address)
        self.job_timeout_ms = job_timeout_ms
        self.rpc_timeout_s = rpc_timeout_s
        self.process_id = process_id
        self.variables = variables
        self.handlers = handlers if handlers is not None else {"test": _no_variables}
        self.max_creates = max_creates
        self.attempts = itertools.count()
        self.stop = threading.Event()
        self.history = History()
        self.creators = [threading.Thread(target=self._create, daemon=True) for _ in range(creators)]
        self.threads = list(self.creators)
        self.threads += [
            threading.Thread(target=self._work, args=(job_type, f"{job_type}-w{i}"), daemon=True)
            for job_type in self.handlers
            for i in range(workers)
        ]

    def start(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def creating(self) -> bool:
        """Whether a creator thread still runs (they stop at ``max_creates`` or at ``finish``)."""
        return any(t.is_alive() for t in self.creators)

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
        while not self.stop.is_set():
            if self.max_creates is not None and len(self.history.created) >= self.max_creates:
                return
            variables = self.variables(next(self.attempts)) if self.variables is not None else {}
            request = gateway_pb2.CreateProcessInstanceRequest(
                bpmnProcessId=self.process_id, version=-1, variables=json.dumps(variables)
            )
            try:
                response = self.stub.CreateProcessInstance(request, timeout=self.rpc_timeout_s)
            except grpc.RpcError as e:
                self._failed(e)
                continue
            self.history.variables[response.processInstanceKey] = variables
            self.history.created.append((time.monotonic(), response.processInstanceKey))

    def _work(self, job_type: str, worker: str) -> None:
        # A completion that was not acknowledged is retried; the job timeout brings back jobs whose activation
        # response was lost with a killed leader.
        handler = self.handlers[job_type]
        unfinished: list[tuple[int, str]] = []
        while not self.stop.is_set():
            if not unfinished:
                request = gateway_pb2.ActivateJobsRequest(
                    type=job_type,
                    worker=worker,
                    timeout=self.job_timeout_ms,
                    maxJobsToActivate=25,
                    requestTimeout=300,
                )
                try:
                    for response in self.stub.ActivateJobs(request, timeout=self.rpc_timeout_s):
                        now = time.monotonic()
                        for job in response.jobs:
                            self.history.activated.append((now, job.key))
                            unfinished.append((job.key, job.variables))
                except grpc.RpcError as e:
                    self._failed(e)
                    continue
            while unfinished and not self.stop.is_set():
                key, job_variables = unfinished[0]
                try:
                    done = json.dumps(handler(json.loads(job_variables or "{}")))
                    request = gateway_pb2.CompleteJobRequest(jobKey=key, variables=done)
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


def replay_differences(
    cluster: Cluster, scratch: Path, *, skip: set[tuple[int, int]] | None = None, limit: int = 5
) -> list[str]:
    """Replay == processing on every replica (the cluster must be down): each replica's whole log, replayed offline
    into an empty state, must give exactly the state that broker left in its ``runtime/``. ``skip``: (node, partition).

    A leader built its state by processing, a follower by applying the events it was sent, a restarted broker from a
    snapshot plus the log: all three must agree with a replay of the log they hold.
    """
    problems: list[str] = []
    for partition in range(1, cluster.partitions + 1):
        for node_id in cluster.replicas(partition):
            if skip and (node_id, partition) in skip:
                continue
            partition_dir = cluster.partition_dir(node_id, partition)
            target = scratch / f"replay-p{partition}-b{node_id}"
            try:
                report = replay_log(partition_dir, target)
                differences = diff_dumps(dump_state(partition_dir / "runtime"), report.dump, limit=limit)
            finally:
                shutil.rmtree(target, ignore_errors=True)
            problems += [f"partition {partition} on broker {node_id}: {line}" for line in differences]
    return problems


def variables_by_scope(records: list[Record]) -> dict[int, dict[str, Any]]:
    """The value each variable holds at the end of ``records``, by scope key (a process instance's key: its root)."""
    out: dict[int, dict[str, Any]] = {}
    for r in records:
        if r.record_type == RecordType.EVENT and r.value_type == ValueType.VARIABLE:
            out.setdefault(r.value["scopeKey"], {})[r.value["name"]] = r.value["value"]
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
