"""Deployment parity with Zeebe, and the step budget, against a real `weir start`.

- A straight-through processing loop is refused with INVALID_ARGUMENT naming the looping elements.
- A loop that deployment lets through (a gateway whose FEEL condition stays true) is stopped by the step budget with
  an incident on the element where it stopped; another workflow on the same broker keeps completing meanwhile; the
  budget shows on /health and /metrics; fixing the variable and resolving the incident lets the instance finish.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import grpc
import pytest
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import BPMN, WeirProcess, eventually
from tests.integration.clients import (
    Stub,
    activate,
    complete,
    create,
    deploy,
    incidents_of,
    is_active,
    rpc_error,
)

BUDGET = 1000

HEADER = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" '
    'xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" id="defs" '
    'targetNamespace="http://bpmn.io/schema/bpmn">\n'
)


def model(process_id: str, body: str) -> bytes:
    return (
        f'{HEADER}<bpmn:process id="{process_id}" isExecutable="true">{body}</bpmn:process>\n</bpmn:definitions>\n'
    ).encode()


def flow(flow_id: str, source: str, target: str, condition: str | None = None) -> str:
    if condition is None:
        return f'<bpmn:sequenceFlow id="{flow_id}" sourceRef="{source}" targetRef="{target}"/>'
    return (
        f'<bpmn:sequenceFlow id="{flow_id}" sourceRef="{source}" targetRef="{target}">'
        f'<bpmn:conditionExpression xsi:type="bpmn:tFormalExpression">{condition}</bpmn:conditionExpression>'
        "</bpmn:sequenceFlow>"
    )


# start > again -(=loop)> count (n := n + 1) > again; again -(default)> end
FEEL_LOOP = model(
    "feel-loop",
    '<bpmn:startEvent id="start"/>'
    '<bpmn:exclusiveGateway id="again" default="out"/>'
    '<bpmn:scriptTask id="count"><bpmn:extensionElements>'
    '<zeebe:script expression="=n + 1" resultVariable="n"/></bpmn:extensionElements></bpmn:scriptTask>'
    '<bpmn:endEvent id="end"/>'
    + flow("f1", "start", "again")
    + flow("f2", "again", "count", "=loop")
    + flow("f3", "count", "again")
    + flow("out", "again", "end"),
)

TASK_LOOP = model(
    "task-loop",
    '<bpmn:startEvent id="start"/><bpmn:task id="task1"/><bpmn:task id="task2"/>'
    + flow("f1", "start", "task1")
    + flow("f2", "task1", "task2")
    + flow("f3", "task2", "task1"),
)


@pytest.fixture(scope="module")
def budget_weir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    w = WeirProcess(tmp_path_factory.mktemp("budget") / "data", env={"WEIR_BROKER_MAX_STEPS_PER_INSTANCE": str(BUDGET)})
    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture
def budget_stub(budget_weir: WeirProcess) -> Iterator[Stub]:
    channel = grpc.insecure_channel(budget_weir.address)
    try:
        yield Stub(channel)
    finally:
        channel.close()


def deploy_raw(stub: Stub, name: str, content: bytes) -> pb.DeployResourceResponse:
    request = pb.DeployResourceRequest(resources=[pb.Resource(name=name, content=content)])
    return stub.DeployResource(request, timeout=10)


def rejected(stub: Stub, name: str, content: bytes) -> str:
    request = pb.DeployResourceRequest(resources=[pb.Resource(name=name, content=content)])
    err = rpc_error(stub.DeployResource, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
    return err.details()


def test_a_straight_through_loop_is_refused_naming_its_elements(budget_stub: Stub) -> None:
    message = rejected(budget_stub, "task-loop.bpmn", TASK_LOOP)
    assert "task-loop.bpmn" in message
    assert "'task-loop': Processes are not allowed to contain a straight-through processing loop: " in message
    assert "task1 > task2 > task1" in message
    err = rpc_error(
        budget_stub.CreateProcessInstance, pb.CreateProcessInstanceRequest(bpmnProcessId="task-loop", version=-1)
    )
    assert err.code() == grpc.StatusCode.NOT_FOUND


def test_schema_violations_are_refused_naming_each_line(budget_stub: Stub) -> None:
    content = (BPMN / "invalid" / "schema-violations.bpmn").read_bytes()
    message = rejected(budget_stub, "schema.bpmn", content)
    assert "schema.bpmn" in message
    assert (
        "Does not conform to the BPMN 2.0 XML schema (line: 3): Element 'bpmn:process', attribute 'isExecutable': "
        "'maybe' is not a valid value of the atomic type 'xs:boolean'." in message
    )
    assert "(line: 9): Element 'bpmn:extensionElements': This element is not expected." in message
    assert "(line: 14): Element 'bpmn:fancyTask': This element is not expected." in message
    err = rpc_error(
        budget_stub.CreateProcessInstance,
        pb.CreateProcessInstanceRequest(bpmnProcessId="schema-violations", version=-1),
    )
    assert err.code() == grpc.StatusCode.NOT_FOUND


def test_the_straight_through_loop_fixture_is_refused(budget_stub: Stub) -> None:
    content = (BPMN / "invalid" / "straight-through-loop.bpmn").read_bytes()
    message = rejected(budget_stub, "loop.bpmn", content)
    assert "prepare > done > prepare" in message


def test_every_valid_fixture_still_deploys(budget_stub: Stub) -> None:
    paths = sorted(BPMN.glob("*.bpmn")) + sorted(BPMN.glob("events/*.bpmn")) + sorted(BPMN.glob("start-events/*.bpmn"))
    for path in paths:
        response = deploy_raw(budget_stub, path.name, path.read_bytes())
        assert response.deployments, path.name


def stopped_count(w: WeirProcess) -> int:
    status, body = w.probe("/health")
    assert status == 200, body
    return int(body["partitions"]["1"]["instancesStoppedByStepBudget"])


def test_a_loop_without_wait_state_is_stopped_by_the_budget_and_resumes_after_resolve(
    budget_weir: WeirProcess, budget_stub: Stub
) -> None:
    deploy_raw(budget_stub, "feel-loop.bpmn", FEEL_LOOP)  # a condition can end it: deployment lets it through
    normal = deploy(budget_stub, "one-task.bpmn")
    before = stopped_count(budget_weir)

    looping = create(budget_stub, "feel-loop", {"loop": True, "n": 0})
    # the broker keeps serving: a normal workflow started after the loop completes promptly
    started = time.monotonic()
    other = create(budget_stub, normal.pid(), {"x": 1})
    (job,) = activate(budget_stub, normal.type("test"))
    assert job.processInstanceKey == other
    complete(budget_stub, job.key)
    eventually(lambda: not is_active(budget_stub, other), timeout=10, what="the normal instance to complete")
    assert time.monotonic() - started < 10

    eventually(lambda: stopped_count(budget_weir) == before + 1, timeout=30, what="the budget to stop the loop")
    assert is_active(budget_stub, looping)
    _, metrics = budget_weir.probe("/metrics")
    assert 'weir_instances_stopped_by_step_budget_total{partition="1"}' in metrics["text"]

    (incident,) = eventually(lambda: incidents_of(budget_weir, looping), what="the budget's incident")
    assert incident.element_id in ("again", "count")
    assert incident.error_type == "UNKNOWN"
    assert f"broker.maxStepsPerInstance = {BUDGET}" in incident.error_message
    assert "without reaching a wait state" in incident.error_message

    request = pb.SetVariablesRequest(elementInstanceKey=looping, variables=json.dumps({"loop": False}))
    budget_stub.SetVariables(request, timeout=10)
    budget_stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    eventually(lambda: not is_active(budget_stub, looping), timeout=10, what="the resolved instance to complete")


def test_a_long_but_finite_loop_under_the_budget_completes(budget_weir: WeirProcess, budget_stub: Stub) -> None:
    deploy_raw(budget_stub, "feel-loop.bpmn", FEEL_LOOP)
    before = stopped_count(budget_weir)
    # count to 400: about 800 activations in one chain, under the budget of 1000
    loop = model(
        "feel-count",
        '<bpmn:startEvent id="start"/>'
        '<bpmn:exclusiveGateway id="again" default="out"/>'
        '<bpmn:scriptTask id="count"><bpmn:extensionElements>'
        '<zeebe:script expression="=n + 1" resultVariable="n"/></bpmn:extensionElements></bpmn:scriptTask>'
        '<bpmn:endEvent id="end"/>'
        + flow("f1", "start", "again")
        + flow("f2", "again", "count", "=n &lt; 400")
        + flow("f3", "count", "again")
        + flow("out", "again", "end"),
    )
    deploy_raw(budget_stub, "feel-count.bpmn", loop)
    result = budget_stub.CreateProcessInstanceWithResult(
        pb.CreateProcessInstanceWithResultRequest(
            request=pb.CreateProcessInstanceRequest(bpmnProcessId="feel-count", version=-1, variables='{"n": 0}'),
            requestTimeout=20_000,
        ),
        timeout=30,
    )
    assert json.loads(result.variables)["n"] == 400
    assert stopped_count(budget_weir) == before
