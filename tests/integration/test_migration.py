"""Process instance migration against a real `weir start`: MigrateProcessInstance over gRPC (pyzeebe's stubs) and
``POST /v2/process-instances/{key}/migration`` over REST move a waiting instance to a new version, which it then
finishes; refused migrations answer with the status codes Zeebe's clients expect."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import grpc
import pytest
from pyzeebe.proto import gateway_pb2 as pb

from broker.engine.partitioning import subscription_partition
from broker.protocol.enums import MessageSubscriptionIntent, RecordType, ValueType
from broker.protocol.keys import partition_of
from tests.harness import WeirProcess
from tests.integration.clients import Stub, activate, complete, is_active, logged_records, rpc_error

NS = (
    'xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" '
    'id="defs" targetNamespace="https://weir.example"'
)


def task(element_id: str, job_type: str) -> str:
    return (
        f'<bpmn:serviceTask id="{element_id}"><bpmn:extensionElements><zeebe:taskDefinition type="{job_type}"/>'
        "</bpmn:extensionElements></bpmn:serviceTask>"
    )


def model(process_id: str, *elements: str, flows: list[tuple[str, str]]) -> bytes:
    body = '<bpmn:startEvent id="start"/>' + "".join(elements) + '<bpmn:endEvent id="end"/>'
    body += "".join(f'<bpmn:sequenceFlow id="f{n}" sourceRef="{s}" targetRef="{t}"/>' for n, (s, t) in enumerate(flows))
    process = f'<bpmn:process id="{process_id}" isExecutable="true">{body}</bpmn:process>'
    return f"<bpmn:definitions {NS}>{process}</bpmn:definitions>".encode()


class Versions:
    """Two versions of a unique process: v1 waits in ``a`` (job type ``work``); v2 renames it ``a2`` and adds a task
    ``after`` behind it."""

    def __init__(self) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.process_id = f"migrating-{suffix}"
        self.work, self.after = f"work-{suffix}", f"after-{suffix}"
        self.v1 = model(self.process_id, task("a", self.work), flows=[("start", "a"), ("a", "end")])
        self.v2 = model(
            self.process_id,
            task("a2", self.work),
            task("after", self.after),
            flows=[("start", "a2"), ("a2", "after"), ("after", "end")],
        )


def grpc_deploy(stub: Stub, name: str, content: bytes) -> int:
    response = stub.DeployResource(
        pb.DeployResourceRequest(resources=[pb.Resource(name=name, content=content)]), timeout=10
    )
    (deployment,) = response.deployments
    return deployment.process.processDefinitionKey


def migration(instance_key: int, target_key: int, *pairs: tuple[str, str]) -> pb.MigrateProcessInstanceRequest:
    plan = pb.MigrateProcessInstanceRequest.MigrationPlan(
        targetProcessDefinitionKey=target_key,
        mappingInstructions=[
            pb.MigrateProcessInstanceRequest.MappingInstruction(sourceElementId=s, targetElementId=t) for s, t in pairs
        ],
    )
    return pb.MigrateProcessInstanceRequest(processInstanceKey=instance_key, migrationPlan=plan)


def test_grpc_migrates_a_waiting_instance_which_then_takes_the_new_flow(stub: Stub) -> None:
    p = Versions()
    v1 = grpc_deploy(stub, f"{p.process_id}-1.bpmn", p.v1)
    v2 = grpc_deploy(stub, f"{p.process_id}-2.bpmn", p.v2)
    pi = stub.CreateProcessInstance(
        pb.CreateProcessInstanceRequest(processDefinitionKey=v1, variables="{}"), timeout=10
    ).processInstanceKey
    (job,) = activate(stub, p.work)

    unmapped = rpc_error(stub.MigrateProcessInstance, migration(pi, v2))
    assert unmapped.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert unmapped.details() == (
        f"Command 'MIGRATE' rejected with code 'INVALID_STATE': Expected to migrate process instance '{pi}' but no "
        "mapping instruction defined for active element with id 'a'. Elements cannot be migrated without a mapping."
    )
    unknown = rpc_error(stub.MigrateProcessInstance, migration(pi, 12345, ("a", "a2")))
    assert unknown.code() == grpc.StatusCode.NOT_FOUND
    assert "no process definition found with key '12345'" in unknown.details()
    missing = rpc_error(stub.MigrateProcessInstance, migration(pi, v2, ("a", "nope")))
    assert missing.code() == grpc.StatusCode.INVALID_ARGUMENT

    assert (
        stub.MigrateProcessInstance(migration(pi, v2, ("a", "a2")), timeout=10) == pb.MigrateProcessInstanceResponse()
    )
    assert job.elementId == "a"
    complete(stub, job.key)  # the job activated before the migration completes the migrated element
    (after,) = activate(stub, p.after)
    assert (after.processDefinitionKey, after.elementId, after.processInstanceKey) == (v2, "after", pi)
    complete(stub, after.key)
    assert not is_active(stub, pi)


@pytest.fixture
async def http(weir: WeirProcess) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=weir.rest_url) as session:
        yield session


async def post(http: aiohttp.ClientSession, path: str, body: object) -> tuple[int, dict | None]:
    async with http.post(path, data=json.dumps(body), headers={"content-type": "application/json"}) as response:
        text = await response.text()
        return response.status, json.loads(text) if text else None


async def search_until(
    http: aiohttp.ClientSession, entity: str, query: dict, check: Callable[[dict], bool], what: str
) -> dict:
    """Search until ``check(answer)`` holds: the history exporter writes what the partition committed shortly after."""
    for _ in range(150):
        status, answer = await post(http, f"/v2/{entity}/search", query)
        assert status == 200 and answer is not None, answer
        if check(answer):
            return answer
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}: last answer {answer}")


async def test_rest_migrates_a_waiting_instance(http: aiohttp.ClientSession, stub: Stub) -> None:
    p = Versions()
    v1 = grpc_deploy(stub, f"{p.process_id}-1.bpmn", p.v1)
    v2 = grpc_deploy(stub, f"{p.process_id}-2.bpmn", p.v2)
    status, created = await post(
        http, "/v2/process-instances", {"processDefinitionKey": str(v1), "variables": {"x": 7}}
    )
    assert status == 200, created
    assert created is not None
    pi = created["processInstanceKey"]
    path = f"/v2/process-instances/{pi}/migration"
    (job,) = activate(stub, p.work)

    status, problem = await post(http, path, {"targetProcessDefinitionKey": str(v2), "mappingInstructions": []})
    assert status == 409 and problem is not None
    assert "no mapping instruction defined for active element with id 'a'" in problem["detail"]
    status, problem = await post(
        http,
        path,
        {
            "targetProcessDefinitionKey": str(v2),
            "mappingInstructions": [{"sourceElementId": "x", "targetElementId": "a2"}],
        },
    )
    assert status == 400 and problem is not None and "non-existing source element id 'x'" in problem["detail"]
    status, problem = await post(http, path, {"mappingInstructions": []})
    assert status == 400 and problem is not None and "targetProcessDefinitionKey" in problem["detail"]
    status, problem = await post(
        http,
        "/v2/process-instances/2251799813999999/migration",
        {"targetProcessDefinitionKey": str(v2), "mappingInstructions": []},
    )
    assert status == 404, problem

    mapping = [{"sourceElementId": "a", "targetElementId": "a2"}]
    status, body = await post(http, path, {"targetProcessDefinitionKey": str(v2), "mappingInstructions": mapping})
    assert (status, body) == (204, None)
    # the history follows the migration: the instance and its waiting element name the target
    query = {"filter": {"processInstanceKey": pi}}
    answer = await search_until(
        http, "element-instances", query, lambda a: {i["elementId"] for i in a["items"]} >= {"a2"}, "the migration"
    )
    (waiting,) = [i for i in answer["items"] if i["elementId"] == "a2"]  # the start event's row stays as it was
    assert (waiting["processDefinitionKey"], waiting["state"]) == (str(v2), "ACTIVE")
    instances = await search_until(http, "process-instances", query, lambda a: bool(a["items"]), "the instance")
    (instance,) = instances["items"]
    assert (instance["processDefinitionKey"], instance["processDefinitionVersion"]) == (str(v2), 2)
    variables = await search_until(http, "variables", query, lambda a: bool(a["items"]), "the variable")
    assert [(v["name"], v["value"]) for v in variables["items"]] == [("x", "7")]  # migrated, value kept

    complete(stub, job.key)
    (after,) = activate(stub, p.after)
    assert (after.processDefinitionKey, after.processInstanceKey) == (v2, int(pi))
    complete(stub, after.key)
    assert not is_active(stub, int(pi))


def message_model(process_id: str, catch_id: str, *tail: str, message_name: str) -> bytes:
    """Waits at a message catch event (correlation key ``=key``), then runs ``tail`` (service tasks, in order)."""
    catch = (
        f'<bpmn:intermediateCatchEvent id="{catch_id}"><bpmn:messageEventDefinition messageRef="m"/>'
        "</bpmn:intermediateCatchEvent>"
    )
    ids = ["start", catch_id, *(f"t{n}" for n in range(len(tail))), "end"]
    body = '<bpmn:startEvent id="start"/>' + catch + "".join(task(f"t{n}", t) for n, t in enumerate(tail))
    body += '<bpmn:endEvent id="end"/>'
    pairs = enumerate(itertools.pairwise(ids))
    body += "".join(f'<bpmn:sequenceFlow id="f{n}" sourceRef="{s}" targetRef="{t}"/>' for n, (s, t) in pairs)
    message = (
        f'<bpmn:message id="m" name="{message_name}"><bpmn:extensionElements>'
        '<zeebe:subscription correlationKey="=key"/></bpmn:extensionElements></bpmn:message>'
    )
    process = f'<bpmn:process id="{process_id}" isExecutable="true">{body}</bpmn:process>'
    return f"<bpmn:definitions {NS}>{process}{message}</bpmn:definitions>".encode()


def test_a_message_subscription_on_another_partition_follows_the_migration(tmp_path: Path) -> None:
    """Three partitions: the instance waits on one, its message subscription lives on another, which learns of the
    migration through a distributed MESSAGE_SUBSCRIPTION MIGRATE."""
    w = WeirProcess(tmp_path / "data", extra_args=["--partitions", "3"])
    w.start()
    try:
        channel = grpc.insecure_channel(w.address)
        stub = Stub(channel)
        suffix = uuid.uuid4().hex[:8]
        process_id, name, after = f"paying-{suffix}", f"paid-{suffix}", f"after-{suffix}"
        v1 = grpc_deploy(stub, "paying-1.bpmn", message_model(process_id, "paid", message_name=name))
        v2 = grpc_deploy(stub, "paying-2.bpmn", message_model(process_id, "paid2", after, message_name=name))
        key = "order-1"
        for _ in range(6):  # creations go round robin: until one lands on another partition than the message's
            pi = stub.CreateProcessInstance(
                pb.CreateProcessInstanceRequest(processDefinitionKey=v1, variables=json.dumps({"key": key})), timeout=10
            ).processInstanceKey
            if partition_of(pi) != subscription_partition(key, 3):
                break
        assert partition_of(pi) != subscription_partition(key, 3)
        time.sleep(0.5)  # the subscription is opened on the message partition
        assert stub.MigrateProcessInstance(migration(pi, v2, ("paid", "paid2")), timeout=10) is not None
        time.sleep(0.5)  # the distribution reaches the message partition
        stub.PublishMessage(pb.PublishMessageRequest(name=name, correlationKey=key, timeToLive=10_000), timeout=10)
        (job,) = activate(stub, after)
        assert (job.processInstanceKey, job.processDefinitionKey) == (pi, v2)
        complete(stub, job.key)
        channel.close()
    finally:
        w.stop()
    ms = MessageSubscriptionIntent
    copies = [
        r
        for r in logged_records(w, subscription_partition(key, 3))
        if r.value_type == ValueType.MESSAGE_SUBSCRIPTION and r.record_type == RecordType.EVENT
    ]
    # the copy the message was correlated to named the target (migrated, or, had the migration overtaken the
    # subscription's creation, created from the migrated subscription)
    before = [r for r in copies if r.intent in (ms.CREATED, ms.MIGRATED)]
    assert [(r.value["elementId"], r.value["processDefinitionKey"]) for r in before][-1] == ("paid2", v2)
    assert ms.MIGRATED in {r.intent for r in copies}  # the sleep above leaves the creation time to arrive first
