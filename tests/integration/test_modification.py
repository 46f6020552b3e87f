"""Process instance modification and start instructions against a real `weir start`: over gRPC with pyzeebe's
generated stubs (pyzeebe's client has no call for them), over REST (Camunda's v2 shapes), and in the history."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
import grpc
import pytest

from tests.harness import WeirProcess
from tests.integration.clients import Stub, activate, activate_now, pb, rpc_error
from tests.integration.test_rest_api import assert_problem, call, search_until


def _task(element_id: str, job_type: str) -> str:
    return (
        f'<bpmn:serviceTask id="{element_id}"><bpmn:extensionElements>'
        f'<zeebe:taskDefinition type="{job_type}" /></bpmn:extensionElements></bpmn:serviceTask>'
    )


def model(process_id: str) -> bytes:
    """start → a → sub(b) → c → end; job types are ``<process id>-<element>``."""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="t">
  <bpmn:process id="{process_id}" isExecutable="true">
    <bpmn:startEvent id="start" />
    {_task("a", f"{process_id}-a")}
    <bpmn:subProcess id="sub">
      <bpmn:startEvent id="sub_start" />
      {_task("b", f"{process_id}-b")}
      <bpmn:sequenceFlow id="s1" sourceRef="sub_start" targetRef="b" />
    </bpmn:subProcess>
    {_task("c", f"{process_id}-c")}
    <bpmn:endEvent id="end" />
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="a" />
    <bpmn:sequenceFlow id="f2" sourceRef="a" targetRef="sub" />
    <bpmn:sequenceFlow id="f3" sourceRef="sub" targetRef="c" />
    <bpmn:sequenceFlow id="f4" sourceRef="c" targetRef="end" />
  </bpmn:process>
</bpmn:definitions>
""".encode()


def deployed(stub: Stub) -> str:
    process_id = f"modify-{uuid.uuid4().hex[:8]}"
    resource = pb.Resource(name=f"{process_id}.bpmn", content=model(process_id))
    stub.DeployResource(pb.DeployResourceRequest(resources=[resource]), timeout=10)
    return process_id


def modify_request(pi: int, activate: Sequence[Any] = (), terminate: Sequence[int] = ()) -> Any:
    return pb.ModifyProcessInstanceRequest(
        processInstanceKey=pi,
        activateInstructions=list(activate),
        terminateInstructions=[
            pb.ModifyProcessInstanceRequest.TerminateInstruction(elementInstanceKey=k) for k in terminate
        ],
    )


def activation(element_id: str, ancestor: int = 0, **scoped: dict[str, Any]) -> Any:
    """An activate instruction; ``scoped``: variable documents by scope id (``instance``: the process instance)."""
    return pb.ModifyProcessInstanceRequest.ActivateInstruction(
        elementId=element_id,
        ancestorElementInstanceKey=ancestor,
        variableInstructions=[
            pb.ModifyProcessInstanceRequest.VariableInstruction(
                variables=json.dumps(doc), scopeId="" if scope == "instance" else scope
            )
            for scope, doc in scoped.items()
        ],
    )


def test_modify_over_grpc_moves_the_token_with_variables(stub: Stub) -> None:
    process_id = deployed(stub)
    pi = stub.CreateProcessInstance(
        pb.CreateProcessInstanceRequest(bpmnProcessId=process_id, version=-1)
    ).processInstanceKey
    (job_a,) = activate(stub, f"{process_id}-a")
    request = modify_request(
        pi,
        activate=[activation("b", instance={"moved": True}, sub={"inSub": 1}, b={"own": 2})],
        terminate=[job_a.elementInstanceKey],
    )
    stub.ModifyProcessInstance(request, timeout=10)
    (job_b,) = activate(stub, f"{process_id}-b")
    assert json.loads(job_b.variables) == {"moved": True, "inSub": 1, "own": 2}
    error = rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=job_a.key))
    assert error.code() == grpc.StatusCode.NOT_FOUND  # the terminated task's job was cancelled with it
    # terminating the last active element ends the instance
    stub.ModifyProcessInstance(modify_request(pi, terminate=[job_b.elementInstanceKey]), timeout=10)
    error = rpc_error(stub.CancelProcessInstance, pb.CancelProcessInstanceRequest(processInstanceKey=pi))
    assert error.code() == grpc.StatusCode.NOT_FOUND


def test_modify_over_grpc_answers_zeebe_rejections(stub: Stub) -> None:
    process_id = deployed(stub)
    pi = stub.CreateProcessInstance(
        pb.CreateProcessInstanceRequest(bpmnProcessId=process_id, version=-1)
    ).processInstanceKey
    error = rpc_error(stub.ModifyProcessInstance, modify_request(pi, activate=[activation("nope")]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (
        f"Expected to modify instance of process '{process_id}' but it contains one or more activate instructions "
        "with an element that could not be found: 'nope'" in error.details()
    )
    error = rpc_error(stub.ModifyProcessInstance, modify_request(pi, activate=[activation("start")]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "The activation of elements with type 'START_EVENT' is not supported" in error.details()
    error = rpc_error(stub.ModifyProcessInstance, modify_request(pi + 1_000_000, activate=[activation("c")]))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    bad_json = pb.ModifyProcessInstanceRequest.VariableInstruction(variables="[1]")
    broken = pb.ModifyProcessInstanceRequest.ActivateInstruction(elementId="c", variableInstructions=[bad_json])
    error = rpc_error(stub.ModifyProcessInstance, modify_request(pi, activate=[broken]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert activate_now(stub, f"{process_id}-c") == []  # nothing was activated by the refused commands


def test_start_instructions_over_grpc_start_inside_the_sub_process(stub: Stub) -> None:
    process_id = deployed(stub)
    request = pb.CreateProcessInstanceRequest(
        bpmnProcessId=process_id,
        version=-1,
        variables=json.dumps({"x": 1}),
        startInstructions=[pb.ProcessInstanceCreationStartInstruction(elementId="b")],
    )
    stub.CreateProcessInstance(request, timeout=10)
    (job_b,) = activate(stub, f"{process_id}-b")
    assert json.loads(job_b.variables) == {"x": 1}
    assert activate_now(stub, f"{process_id}-a") == []
    request.startInstructions[0].elementId = "f1"
    error = rpc_error(stub.CreateProcessInstance, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "targets unsupported element type 'SEQUENCE_FLOW'" in error.details()


@pytest.fixture
async def http(weir: WeirProcess) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=weir.rest_url) as session:
        yield session


async def test_modify_over_rest_and_the_history_shows_it(stub: Stub, http: aiohttp.ClientSession) -> None:
    process_id = deployed(stub)
    status, created = await call(
        http,
        "POST",
        "/v2/process-instances",
        {"processDefinitionId": process_id, "startInstructions": [{"elementId": "a"}, {"elementId": "c"}]},
    )
    assert status == 200, created
    pi = created["processInstanceKey"]
    by_instance = {"filter": {"processInstanceKey": pi, "elementId": "a"}}
    answer = await search_until(http, "element-instances", by_instance, lambda a: a["items"], "a in the history")
    a_key = answer["items"][0]["elementInstanceKey"]
    body = {
        "activateInstructions": [
            {
                "elementId": "b",
                "ancestorElementInstanceKey": "-1",
                "variableInstructions": [{"variables": {"fromRest": True}, "scopeId": "sub"}],
            }
        ],
        "terminateInstructions": [{"elementInstanceKey": a_key}],
    }
    assert await call(http, "POST", f"/v2/process-instances/{pi}/modification", body) == (204, None)
    (job_b,) = activate(stub, f"{process_id}-b")
    assert json.loads(job_b.variables) == {"fromRest": True}

    def terminated(answer: dict) -> bool:
        return bool(answer["items"]) and answer["items"][0]["state"] == "TERMINATED"

    await search_until(http, "element-instances", by_instance, terminated, "a terminated in the history")
    in_sub = {"filter": {"processInstanceKey": pi, "elementId": "sub"}}
    await search_until(http, "element-instances", in_sub, lambda a: a["items"], "the created sub-process")

    path = f"/v2/process-instances/{pi}/modification"
    unknown = await call(http, "POST", path, {"activateInstructions": [{"elementId": "nope"}]})
    assert_problem(unknown, 400, "with an element that could not be found: 'nope'")
    missing = await call(http, "POST", f"/v2/process-instances/{int(pi) + 1_000_000}/modification", {})
    assert_problem(missing, 404, "no process instance found with key")
    not_ancestor = {"activateInstructions": [{"elementId": "b", "ancestorElementInstanceKey": a_key}]}
    assert_problem(await call(http, "POST", path, not_ancestor), 400, "does not exist, or is not in an active state")


async def test_move_and_terminate_by_element_id_over_rest(stub: Stub, http: aiohttp.ClientSession) -> None:
    process_id = deployed(stub)
    status, created = await call(http, "POST", "/v2/process-instances", {"processDefinitionId": process_id})
    assert status == 200, created
    path = f"/v2/process-instances/{created['processInstanceKey']}/modification"
    move = {
        "sourceElementInstruction": {"sourceType": "byId", "sourceElementId": "a"},
        "targetElementId": "b",
        "ancestorScopeInstruction": {"ancestorScopeType": "inferred"},
        "variableInstructions": [{"variables": {"moved": 1}}],
    }
    assert await call(http, "POST", path, {"moveInstructions": [move]}) == (204, None)
    (job_b,) = activate(stub, f"{process_id}-b")
    assert json.loads(job_b.variables) == {"moved": 1}
    assert activate_now(stub, f"{process_id}-a") == []
    by_key = {
        "sourceElementInstruction": {"sourceType": "byKey", "sourceElementInstanceKey": str(job_b.elementInstanceKey)},
        "targetElementId": "c",
        "ancestorScopeInstruction": {"ancestorScopeType": "sourceParent"},
    }
    answer = await call(http, "POST", path, {"moveInstructions": [by_key]})
    assert_problem(answer, 400, "is not an ancestor of element 'c'")  # b's parent is the sub-process
    both = {"terminateInstructions": [{"elementInstanceKey": "1", "elementId": "b"}]}
    assert_problem(await call(http, "POST", path, both), 400, "Expected either 'elementInstanceKey' or 'elementId'")
    wrong = {"moveInstructions": [{**move, "sourceElementInstruction": {"sourceType": "byKey"}}]}
    assert_problem(await call(http, "POST", path, wrong), 400, "sourceElementInstruction")
    body = {"activateInstructions": [{"elementId": "c"}], "terminateInstructions": [{"elementId": "b"}]}
    assert await call(http, "POST", path, body) == (204, None)
    (job_c,) = activate(stub, f"{process_id}-c")
    assert json.loads(job_c.variables) == {"moved": 1}  # no scopeId: it was set on the process instance
