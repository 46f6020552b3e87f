"""Process instance migration against a real `weir start`: MigrateProcessInstance over gRPC (pyzeebe's stubs) and
``POST /v2/process-instances/{key}/migration`` over REST move a waiting instance to a new version, which it then
finishes; refused migrations answer with the status codes Zeebe's clients expect."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import aiohttp
import grpc
import pytest
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import WeirProcess
from tests.integration.clients import Stub, activate, complete, is_active, rpc_error

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


async def test_rest_migrates_a_waiting_instance(http: aiohttp.ClientSession, stub: Stub) -> None:
    p = Versions()
    v1 = grpc_deploy(stub, f"{p.process_id}-1.bpmn", p.v1)
    v2 = grpc_deploy(stub, f"{p.process_id}-2.bpmn", p.v2)
    status, created = await post(http, "/v2/process-instances", {"processDefinitionKey": str(v1)})
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
    complete(stub, job.key)
    (after,) = activate(stub, p.after)
    assert (after.processDefinitionKey, after.processInstanceKey) == (v2, int(pi))
    complete(stub, after.key)
    assert not is_active(stub, int(pi))
