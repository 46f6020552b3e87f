"""Repairing running instances on a 3-broker cluster (3 partitions, replication 3) while leaders are killed with
``kill -9``: modifications and migrations acknowledged by the gateway are applied exactly once, survive the leader
change, and the instances finish in the shape they were repaired into; a batch cancellation spanning every partition
completes across a leader's death and cancels each instance once. Afterwards every replica's log agrees on the
common prefix and replays to the broker's state.
"""

from __future__ import annotations

import json
import os
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from pyzeebe.proto import gateway_pb2 as pb
from pyzeebe.proto import gateway_pb2_grpc

from broker.protocol.enums import (
    ProcessInstanceIntent,
    ProcessInstanceMigrationIntent,
    ProcessInstanceModificationIntent,
    RecordType,
    ValueType,
)
from tests.cluster.audit import committed, divergence, partition_of, read_replica_logs, replay_differences
from tests.cluster.harness import Cluster
from tests.harness import eventually
from tests.integration.clients import Stub, activate, activate_now, complete
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.slow

ALL = {1, 2, 3}
# Answers that say the command was not taken (no leader yet, the gateway reconnecting): sent again.
NOT_TAKEN = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)


def _model(process_id: str, type_a: str, type_b: str) -> bytes:
    """start → task a → task b → end."""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="x">
  <bpmn:process id="{process_id}" isExecutable="true">
    <bpmn:startEvent id="start" />
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="a" />
    <bpmn:serviceTask id="a">
      <bpmn:extensionElements><zeebe:taskDefinition type="{type_a}" /></bpmn:extensionElements>
    </bpmn:serviceTask>
    <bpmn:sequenceFlow id="f2" sourceRef="a" targetRef="b" />
    <bpmn:serviceTask id="b">
      <bpmn:extensionElements><zeebe:taskDefinition type="{type_b}" /></bpmn:extensionElements>
    </bpmn:serviceTask>
    <bpmn:sequenceFlow id="f3" sourceRef="b" targetRef="end" />
    <bpmn:endEvent id="end" />
  </bpmn:process>
</bpmn:definitions>""".encode()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The cluster exports into one PostgreSQL history, which the gateway's searches and batch operations read."""
    server = PostgresServer().start()
    history = {
        "WEIR_BROKER_EXPORTERS_HISTORY_CLASSNAME": "exporters.history.HistoryExporter",
        "WEIR_BROKER_EXPORTERS_HISTORY_ARGS_URL": server.url,
        "WEIR_GATEWAY_HISTORY_URL": server.url,
    }
    saved = {name: os.environ.get(name) for name in history}
    os.environ.update(history)  # the cluster's processes inherit the environment
    c = Cluster(Path(tmp_path_factory.mktemp("repair")) / "cluster")
    try:
        c.up()
        yield c
    finally:
        c.kill_everything()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.remove()


def _sent(call: object, request: object) -> object:
    """``call(request)``, sent again while the answer says it was not taken (a leader change in progress)."""

    def attempt() -> object:
        try:
            return call(request, timeout=10)  # type: ignore[operator]
        except grpc.RpcError as e:
            if e.code() in NOT_TAKEN:
                return None
            raise

    return eventually(attempt, timeout=30, interval=0.2, what=f"{type(request).__name__} taken")


def _deploy_everywhere(stub: Stub, process_id: str, content: bytes) -> pb.ProcessMetadata:
    request = pb.DeployResourceRequest(resources=[pb.Resource(name=f"{process_id}.bpmn", content=content)])
    (deployment,) = _sent(stub.DeployResource, request).deployments  # type: ignore[attr-defined]
    process = deployment.process
    seen: set[int] = set()

    def known_everywhere() -> bool:  # a creation by key lands on the partition asked once it is there
        created = _sent(
            stub.CreateProcessInstance,
            pb.CreateProcessInstanceRequest(processDefinitionKey=process.processDefinitionKey),
        )
        key = created.processInstanceKey  # type: ignore[attr-defined]
        _sent(stub.CancelProcessInstance, pb.CancelProcessInstanceRequest(processInstanceKey=key))
        seen.add(partition_of(key))
        return seen == ALL

    eventually(known_everywhere, timeout=30, interval=0.05, what=f"{process_id} v{process.version} everywhere")
    return process


def _rest(cluster: Cluster, method: str, path: str, body: dict | None = None) -> dict:
    """A call to the gateway's REST API; the answer's JSON."""
    request = urllib.request.Request(
        str(cluster.info["gateway"]["restUrl"]) + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"{}")


def _kill_a_leader(cluster: Cluster, partition: int) -> int:
    leader = cluster.wait_leader(partition)
    cluster.kill(leader)
    for p in range(1, cluster.partitions + 1):
        cluster.wait_leader(p, exclude={leader}, timeout=30)
    return leader


def test_modifications_and_migrations_survive_leader_kills_and_apply_once(cluster: Cluster, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    process_id = f"repair-{suffix}"
    type_a, type_b, type_b2 = f"a-{suffix}", f"b-{suffix}", f"b2-{suffix}"
    channel = grpc.insecure_channel(cluster.gateway)
    stub = gateway_pb2_grpc.GatewayStub(channel)
    try:
        v1 = _deploy_everywhere(stub, process_id, _model(process_id, type_a, type_b))
        instances: list[int] = []
        while len(instances) < 6 or {partition_of(k) for k in instances} != ALL:
            assert len(instances) < 20
            request = pb.CreateProcessInstanceRequest(processDefinitionKey=v1.processDefinitionKey)
            instances.append(_sent(stub.CreateProcessInstance, request).processInstanceKey)  # type: ignore[attr-defined]
        jobs = {
            job.processInstanceKey: job for job in activate(stub, type_a, len(instances), timeout_ms=600_000, within=30)
        }
        assert set(jobs) == set(instances)

        killed = _kill_a_leader(cluster, 1)  # the deployment partition's leader: v2 is deployed by its successor
        v2 = _deploy_everywhere(stub, process_id, _model(process_id, type_a, type_b2))
        assert v2.version == 2
        modified, migrated = instances[: len(instances) // 2], instances[len(instances) // 2 :]
        for key in modified:  # skip task a: terminate it and activate b
            request = pb.ModifyProcessInstanceRequest(
                processInstanceKey=key,
                activateInstructions=[pb.ModifyProcessInstanceRequest.ActivateInstruction(elementId="b")],
                terminateInstructions=[
                    pb.ModifyProcessInstanceRequest.TerminateInstruction(
                        elementInstanceKey=jobs[key].elementInstanceKey
                    )
                ],
            )
            _sent(stub.ModifyProcessInstance, request)
        cluster.restart_broker(killed)

        killed = _kill_a_leader(cluster, 2)
        plan = pb.MigrateProcessInstanceRequest.MigrationPlan(
            targetProcessDefinitionKey=v2.processDefinitionKey,
            mappingInstructions=[
                pb.MigrateProcessInstanceRequest.MappingInstruction(sourceElementId=e, targetElementId=e)
                for e in ("a", "b")
            ],
        )
        for key in migrated:
            _sent(
                stub.MigrateProcessInstance,
                pb.MigrateProcessInstanceRequest(processInstanceKey=key, migrationPlan=plan),
            )
        cluster.restart_broker(killed)

        # the migrated instances keep their job of task a (same key) and go on in v2: b is of type b2
        for key in migrated:
            complete(stub, jobs[key].key)
        b_jobs = activate(stub, type_b, len(modified), within=30)
        b2_jobs = activate(stub, type_b2, len(migrated), within=30)
        assert sorted(j.processInstanceKey for j in b_jobs) == sorted(modified)
        assert sorted(j.processInstanceKey for j in b2_jobs) == sorted(migrated)
        assert {j.processDefinitionKey for j in b2_jobs} == {v2.processDefinitionKey}
        for job in b_jobs + b2_jobs:
            complete(stub, job.key)
        assert activate_now(stub, type_b, wait_ms=1000) == [] and activate_now(stub, type_b2, wait_ms=1000) == []

        # a batch cancellation over every partition, with a leader killed while it runs
        doomed: list[int] = []
        while len(doomed) < 6 or {partition_of(k) for k in doomed} != ALL:
            assert len(doomed) < 20
            request = pb.CreateProcessInstanceRequest(processDefinitionKey=v1.processDefinitionKey)
            doomed.append(_sent(stub.CreateProcessInstance, request).processInstanceKey)  # type: ignore[attr-defined]
        selection = {"filter": {"processInstanceKey": {"$in": [str(k) for k in doomed]}}}
        eventually(
            lambda: len(_rest(cluster, "POST", "/v2/process-instances/search", selection)["items"]) == len(doomed),
            timeout=30,
            what="the history to know the instances to cancel",
        )
        batch = _rest(cluster, "POST", "/v2/process-instances/cancellation", selection)["batchOperationKey"]
        killed = _kill_a_leader(cluster, 3)
        eventually(
            lambda: _rest(cluster, "GET", f"/v2/batch-operations/{batch}")["state"] == "COMPLETED",
            timeout=60,
            interval=0.2,
            what="the batch to complete",
        )
        cluster.restart_broker(killed)
        assert activate_now(stub, type_a, wait_ms=1000) == []  # their jobs went with them
    finally:
        channel.close()

    cluster.down()
    logs = read_replica_logs(cluster)
    assert divergence(logs) == []
    records = [r for recs in committed(logs, cluster.replication).values() for r in recs]
    done = Counter(
        (r.value_type, r.key)
        for r in records
        if r.record_type == RecordType.EVENT
        and (r.value_type, r.intent)
        in {
            (ValueType.PROCESS_INSTANCE_MODIFICATION, ProcessInstanceModificationIntent.MODIFIED),
            (ValueType.PROCESS_INSTANCE_MIGRATION, ProcessInstanceMigrationIntent.MIGRATED),
        }
    )
    assert done == Counter(
        {(ValueType.PROCESS_INSTANCE_MODIFICATION, k): 1 for k in modified}
        | {(ValueType.PROCESS_INSTANCE_MIGRATION, k): 1 for k in migrated}
    )
    cancelled = Counter(
        r.key
        for r in records
        if r.record_type == RecordType.EVENT
        and r.value_type == ValueType.PROCESS_INSTANCE
        and r.intent == ProcessInstanceIntent.ELEMENT_TERMINATED
        and r.key in doomed
    )
    assert cancelled == Counter(doomed), "each instance of the batch is cancelled exactly once"
    assert replay_differences(cluster, tmp_path) == []
