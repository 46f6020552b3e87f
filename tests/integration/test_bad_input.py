"""Bad input gets the right gRPC status and a message a person can act on, and the broker keeps serving.

Every case checks three things: the status code, that the message names what is wrong, and that afterwards the
broker still works (a follow-up deploy or create succeeds) with its state unchanged where that matters.
"""

import json
import uuid
from typing import Any

import grpc
import pytest
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import BPMN, WeirProcess, eventually
from tests.integration.clients import (
    Stub,
    activate,
    activate_now,
    complete,
    create,
    deploy,
    is_active,
    open_incidents,
    rpc_error,
    variables_of,
)

UNKNOWN_KEY = 2251799813685249 + 987_654_321  # a well-formed key on partition 1 that was never issued
FOREIGN_KEY = 7  # a key whose partition bits name no partition of this cluster


def deploy_raw(stub: Stub, *resources: tuple[str, bytes]) -> pb.DeployResourceResponse:
    request = pb.DeployResourceRequest(resources=[pb.Resource(name=n, content=c) for n, c in resources])
    return stub.DeployResource(request, timeout=10)


def assert_still_serving(stub: Stub) -> None:
    """A deploy, a create and a job round trip still work."""
    d = deploy(stub, "one-task.bpmn")
    pi = create(stub, d.pid(), {"alive": True})
    (job,) = activate(stub, d.type("test"))
    assert variables_of(job) == {"alive": True}
    complete(stub, job.key)
    assert job.processInstanceKey == pi


def assert_not_deployed(stub: Stub, process_id: str) -> None:
    err = rpc_error(stub.CreateProcessInstance, pb.CreateProcessInstanceRequest(bpmnProcessId=process_id, version=-1))
    assert err.code() == grpc.StatusCode.NOT_FOUND


def rejected_deploy(stub: Stub, *resources: tuple[str, bytes]) -> str:
    """Deploy, expect INVALID_ARGUMENT, return the message."""
    request = pb.DeployResourceRequest(resources=[pb.Resource(name=n, content=c) for n, c in resources])
    err = rpc_error(stub.DeployResource, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
    return err.details()


# -- deployments ---------------------------------------------------------------------------------------------


def test_malformed_xml(stub: Stub) -> None:
    text = (BPMN / "one-task.bpmn").read_text().replace("</bpmn:process>", "", 1)
    message = rejected_deploy(stub, ("broken.bpmn", text.encode()))
    assert "broken.bpmn" in message
    assert_not_deployed(stub, "one-task-broken")
    assert_still_serving(stub)


def test_garbage_bytes(stub: Stub) -> None:
    message = rejected_deploy(stub, ("garbage.bpmn", bytes(range(256)) * 4))
    assert "garbage.bpmn" in message
    assert_still_serving(stub)


def test_empty_resource_list(stub: Stub) -> None:
    err = rpc_error(stub.DeployResource, pb.DeployResourceRequest(resources=[]))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "at least one resource" in err.details()
    assert_still_serving(stub)


def test_billion_laughs_is_refused_quickly(stub: Stub) -> None:
    message = rejected_deploy(stub, ("lols.bpmn", (BPMN / "invalid" / "billion-laughs.bpmn").read_bytes()))
    assert "lols.bpmn" in message
    assert "entit" in message.lower() or "DTD" in message or "DOCTYPE" in message
    assert_not_deployed(stub, "lols")
    assert_still_serving(stub)


def test_external_entity_is_refused(stub: Stub) -> None:
    message = rejected_deploy(stub, ("xxe.bpmn", (BPMN / "invalid" / "external-entity.bpmn").read_bytes()))
    assert "root:" not in message, "the file must never be read"
    assert "entit" in message.lower() or "DTD" in message or "DOCTYPE" in message
    assert_not_deployed(stub, "xxe")
    assert_still_serving(stub)


def test_unsupported_element(stub: Stub) -> None:
    fixture = BPMN / "invalid" / "complex-gateway.bpmn"
    message = rejected_deploy(stub, ("complex-gateway.bpmn", fixture.read_bytes()))
    assert "'decide': Elements of type 'complexGateway' are not supported" in message
    assert_not_deployed(stub, "complex")
    assert_still_serving(stub)


def test_model_with_several_problems_lists_them_all(stub: Stub) -> None:
    message = rejected_deploy(stub, ("many.bpmn", (BPMN / "invalid" / "many-problems.bpmn").read_bytes()))
    for element in ("task-a", "task-b", "nowhere", "ghost"):
        assert element in message, f"{element!r} missing from: {message}"
    assert_not_deployed(stub, "many-problems")
    assert_still_serving(stub)


def test_unparsable_condition_names_element_and_position(stub: Stub) -> None:
    message = rejected_deploy(stub, ("bad-condition.bpmn", (BPMN / "invalid" / "bad-condition.bpmn").read_bytes()))
    assert "flow-broken" in message
    assert any(word in message for word in ("position", "column", "line", "offset")), message
    assert_not_deployed(stub, "bad-condition")
    assert_still_serving(stub)


def test_one_bad_resource_rejects_the_whole_deployment(stub: Stub) -> None:
    good = (BPMN / "one-task.bpmn").read_text().replace('id="one-task"', 'id="atomic-good"').encode()
    message = rejected_deploy(
        stub, ("good.bpmn", good), ("bad.bpmn", (BPMN / "invalid" / "missing-task-definition.bpmn").read_bytes())
    )
    assert "bad.bpmn" in message
    assert_not_deployed(stub, "atomic-good")
    assert_still_serving(stub)


# -- variables -----------------------------------------------------------------------------------------------

NOT_AN_OBJECT = ["{not json", "[1, 2]", '"text"', "42", "null", '{"a": NaN}', '{"a": 1} trailing']


@pytest.mark.parametrize("document", NOT_AN_OBJECT)
def test_create_with_bad_variables(stub: Stub, document: str) -> None:
    d = deploy(stub, "one-task.bpmn")
    request = pb.CreateProcessInstanceRequest(bpmnProcessId=d.pid(), version=-1, variables=document)
    err = rpc_error(stub.CreateProcessInstance, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "JSON" in err.details()
    with_result = pb.CreateProcessInstanceWithResultRequest(request=request, requestTimeout=2000)
    assert rpc_error(stub.CreateProcessInstanceWithResult, with_result).code() == grpc.StatusCode.INVALID_ARGUMENT
    assert activate_now(stub, d.type("test")) == [], "no instance was created"
    create(stub, d.pid(), {"ok": 1})
    (job,) = activate(stub, d.type("test"))
    complete(stub, job.key)


def test_job_commands_with_bad_variables_leave_the_job_alone(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    pi = create(stub, d.pid(), {"n": 1})
    (job,) = activate(stub, d.type("test"))
    for document in NOT_AN_OBJECT:
        for call, request in (
            (stub.CompleteJob, pb.CompleteJobRequest(jobKey=job.key, variables=document)),
            (stub.FailJob, pb.FailJobRequest(jobKey=job.key, retries=1, variables=document)),
            (stub.ThrowError, pb.ThrowErrorRequest(jobKey=job.key, errorCode="E", variables=document)),
            (stub.SetVariables, pb.SetVariablesRequest(elementInstanceKey=pi, variables=document)),
        ):
            err = rpc_error(call, request)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (document, err.details())
            assert "JSON" in err.details()
    complete(stub, job.key, {"n": 2})
    assert not is_active(stub, pi)


def test_rejected_set_variables_changes_nothing(stub: Stub) -> None:
    d = deploy(stub, "two-tasks.bpmn")
    pi = create(stub, d.pid(), {"n": 1})
    err = rpc_error(stub.SetVariables, pb.SetVariablesRequest(elementInstanceKey=pi, variables='[{"n": 2}]'))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    (job,) = activate(stub, d.type("prepare"))
    assert variables_of(job) == {"n": 1}
    complete(stub, job.key)
    (ship,) = activate(stub, d.type("ship"))
    complete(stub, ship.key)


# -- unknown things ------------------------------------------------------------------------------------------


def test_unknown_process_id_version_and_key(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    cases = [
        (pb.CreateProcessInstanceRequest(bpmnProcessId=f"nope-{uuid.uuid4().hex[:6]}", version=-1), "nope-"),
        (pb.CreateProcessInstanceRequest(bpmnProcessId=d.pid(), version=7), "'7'"),
        (pb.CreateProcessInstanceRequest(processDefinitionKey=UNKNOWN_KEY), str(UNKNOWN_KEY)),
    ]
    for request, named in cases:
        err = rpc_error(stub.CreateProcessInstance, request)
        assert err.code() == grpc.StatusCode.NOT_FOUND, err.details()
        assert named in err.details()
        wrapped = pb.CreateProcessInstanceWithResultRequest(request=request, requestTimeout=2000)
        assert rpc_error(stub.CreateProcessInstanceWithResult, wrapped).code() == grpc.StatusCode.NOT_FOUND
    assert_still_serving(stub)


@pytest.mark.parametrize("key", [UNKNOWN_KEY, FOREIGN_KEY])
def test_unknown_keys(stub: Stub, key: int) -> None:
    calls: list[tuple[Any, Any]] = [
        (stub.CompleteJob, pb.CompleteJobRequest(jobKey=key)),
        (stub.FailJob, pb.FailJobRequest(jobKey=key, retries=1)),
        (stub.ThrowError, pb.ThrowErrorRequest(jobKey=key, errorCode="E")),
        (stub.UpdateJobRetries, pb.UpdateJobRetriesRequest(jobKey=key, retries=3)),
        (stub.UpdateJobTimeout, pb.UpdateJobTimeoutRequest(jobKey=key, timeout=1000)),
        (stub.ResolveIncident, pb.ResolveIncidentRequest(incidentKey=key)),
        (stub.SetVariables, pb.SetVariablesRequest(elementInstanceKey=key, variables="{}")),
        (stub.CancelProcessInstance, pb.CancelProcessInstanceRequest(processInstanceKey=key)),
    ]
    for call, request in calls:
        err = rpc_error(call, request)
        assert err.code() == grpc.StatusCode.NOT_FOUND, (request, err.details())
        assert str(key) in err.details()
    assert_still_serving(stub)


def test_completing_a_job_twice(stub: Stub) -> None:
    d = deploy(stub, "two-tasks.bpmn")
    create(stub, d.pid())
    (job,) = activate(stub, d.type("prepare"))
    complete(stub, job.key, {"first": True})
    err = rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=job.key, variables='{"second": true}'))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert str(job.key) in err.details()
    (ship,) = activate(stub, d.type("ship"))
    assert variables_of(ship) == {"first": True}, "the second completion changed nothing"
    complete(stub, ship.key)


def test_completing_a_job_with_an_open_incident(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    pi = create(stub, d.pid())
    (job,) = activate(stub, d.type("test"))
    stub.FailJob(pb.FailJobRequest(jobKey=job.key, retries=0, errorMessage="no retries"), timeout=10)
    err = rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=job.key))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert str(job.key) in err.details()
    assert "FAILED" in err.details()
    assert is_active(stub, pi)
    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=pi), timeout=10)
    assert_still_serving(stub)


# -- limits and request validation ---------------------------------------------------------------------------


def test_payload_over_the_max_message_size(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    big = json.dumps({"blob": "x" * (5 * 1024 * 1024)})
    request = pb.CreateProcessInstanceRequest(bpmnProcessId=d.pid(), version=-1, variables=big)
    err = rpc_error(stub.CreateProcessInstance, request)
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in err.details() or "size" in err.details()
    assert activate_now(stub, d.type("test")) == []
    assert_still_serving(stub)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"type": ""}, "type"),
        ({"type": "   "}, "type"),
        ({"worker": ""}, "worker"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": -5}, "timeout"),
        ({"maxJobsToActivate": 0}, "maxJobsToActivate"),
        ({"maxJobsToActivate": -1}, "maxJobsToActivate"),
    ],
)
def test_activate_jobs_validation(stub: Stub, changes: dict[str, Any], named: str) -> None:
    fields = {"type": "valid-type", "worker": "w", "timeout": 1000, "maxJobsToActivate": 1, "requestTimeout": -1}
    err = rpc_error(stub.ActivateJobs, pb.ActivateJobsRequest(**{**fields, **changes}))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert named in err.details()


def test_activate_jobs_lists_every_invalid_argument(stub: Stub) -> None:
    request = pb.ActivateJobsRequest(type="", worker="", timeout=0, maxJobsToActivate=0, requestTimeout=-1)
    err = rpc_error(stub.ActivateJobs, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    for named in ("type", "worker", "timeout", "maxJobsToActivate"):
        assert named in err.details()
    assert_still_serving(stub)


# -- runtime expression failures become incidents ------------------------------------------------------------


def test_runtime_expression_failures_raise_incidents_naming_the_expression(
    fresh_weir: WeirProcess,
    fresh_stub: Stub,
) -> None:
    stub = fresh_stub
    d = deploy(stub, "expression-failures.bpmn")
    condition_pi = create(stub, d.pid("condition-on-missing"), {"other": 1})
    job_type_pi = create(stub, d.pid("null-job-type"))
    assert is_active(stub, condition_pi) and is_active(stub, job_type_pi)

    fresh_weir.stop()
    incidents = {r.value["processInstanceKey"]: r for r in open_incidents(fresh_weir)}
    fresh_weir.start()
    condition = incidents[condition_pi].value
    assert condition["errorType"] == "CONDITION_ERROR"
    assert condition["elementId"] == "cm-split"
    assert "missingAmount > 5" in condition["errorMessage"]
    job_type = incidents[job_type_pi].value
    assert job_type["errorType"] == "EXTRACT_VALUE_ERROR"
    assert job_type["elementId"] == "nt-task"
    assert "workerKind" in job_type["errorMessage"]

    # fixing the data and resolving lets both instances continue
    stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=condition_pi, variables='{"missingAmount": 9}'))
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incidents[condition_pi].key), timeout=10)
    kind = f"resolved-kind-{uuid.uuid4().hex[:6]}"
    stub.SetVariables(
        pb.SetVariablesRequest(elementInstanceKey=job_type_pi, variables=json.dumps({"workerKind": kind}))
    )
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incidents[job_type_pi].key), timeout=10)
    (job,) = activate(stub, kind)
    assert job.processInstanceKey == job_type_pi
    complete(stub, job.key)
    for pi in (condition_pi, job_type_pi):
        eventually(lambda pi=pi: not is_active(stub, pi), timeout=5, what=f"instance {pi} to complete")
