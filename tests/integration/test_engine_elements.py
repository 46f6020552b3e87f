"""Elements the engine runs through its element registry: script tasks, message throw and end events as jobs, and
the assignment headers of job-worker user tasks, against a real ``weir start``."""

import asyncio
import json
from typing import Any

from pyzeebe import Job, ZeebeClient, ZeebeWorker, create_insecure_channel
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import WeirProcess, eventually
from tests.integration.clients import (
    Stub,
    activate,
    complete,
    create,
    create_with_result,
    deploy,
    incidents_of,
    is_active,
    variables_of,
)

# -- script tasks (zeebe:script) -----------------------------------------------------------------------------


def test_script_tasks_compute_variables_without_a_worker_for_them(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "script-task.bpmn")
    seen: dict[str, Any] = {}

    async def scenario() -> dict[str, Any]:
        channel = create_insecure_channel(grpc_address=weir.address)
        client = ZeebeClient(channel)
        worker = ZeebeWorker(channel, name="script-checker")

        @worker.task(task_type=d.type("check"))
        async def check(job: Job) -> dict:
            seen["check"] = dict(job.variables)
            return {"checked": True}

        work = asyncio.create_task(worker.work())
        try:
            result = await client.run_process_with_result(d.pid(), {"a": 2, "b": 40, "name": "weir"}, timeout=10_000)
        finally:
            await worker.stop()
            work.cancel()
        return result.variables

    final = asyncio.run(scenario())
    # the first script's result reaches the process scope; the second's stays local, mapped by its output mapping
    assert seen["check"] == {"a": 2, "b": 40, "name": "weir", "total": 42, "greeting": "WEIR!"}
    assert final == {**seen["check"], "checked": True}


def test_a_failing_script_raises_an_incident_and_runs_again_once_resolved(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "script-task-failure.bpmn")
    pi = create(stub, d.pid(), {"divisor": 0})
    (incident,) = eventually(lambda: incidents_of(weir, pi), what="the script's incident")
    assert incident.error_type == "EXTRACT_VALUE_ERROR"
    assert incident.element_id == "divide"
    assert "divisor" in incident.error_message
    assert is_active(stub, pi)

    stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=pi, variables='{"divisor": 4}'), timeout=10)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


# -- message throw and end events: a worker sends the message ------------------------------------------------


def test_message_throw_and_end_events_are_jobs_for_the_sending_worker(stub: Stub) -> None:
    d = deploy(stub, "message-throw.bpmn")
    result = create_with_result(stub, d.pid(), {"orderId": "o-1"})
    (notice,) = activate(stub, d.type("send-notice"))
    assert notice.elementId == "announce"
    assert notice.retries == 2
    assert variables_of(notice) == {"orderId": "o-1"}
    complete(stub, notice.key, {"noticeSent": True})
    (farewell,) = activate(stub, d.type("send-farewell"))
    assert farewell.elementId == "farewell"
    assert variables_of(farewell) == {"orderId": "o-1", "noticeSent": True}
    complete(stub, farewell.key, {"farewellSent": True})
    final = json.loads(result.result(timeout=10).variables)
    assert final == {"orderId": "o-1", "noticeSent": True, "farewellSent": True}


# -- job-worker user tasks: assignment and schedule as headers ------------------------------------------------


def test_user_task_attributes_that_are_expressions_reach_the_job_headers(stub: Stub) -> None:
    d = deploy(stub, "user-task-feel.bpmn")
    variables = {"owner": "carla", "groups": ["sales", "legal"], "due": "2031-02-03T04:05:06+01:00", "kind": "x"}
    pi = create(stub, d.pid(), variables)
    (job,) = activate(stub, "io.camunda.zeebe:userTask")
    assert job.processInstanceKey == pi
    headers = json.loads(job.customHeaders)
    assert headers == {
        "io.camunda.zeebe:assignee": "carla",
        "io.camunda.zeebe:candidateGroups": '["sales","legal"]',
        "io.camunda.zeebe:candidateUsers": '["ann","bob"]',
        "io.camunda.zeebe:dueDate": "2031-02-03T04:05:06+01:00",
        "io.camunda.zeebe:followUpDate": "2030-01-01T10:00:00+01:00",
        "io.camunda.zeebe:formKey": "form:x",
    }
    complete(stub, job.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_a_static_user_task_keeps_its_headers_and_gains_the_evaluated_ones(stub: Stub) -> None:
    d = deploy(stub, "user-task.bpmn")
    create(stub, d.pid(), {"approvers": ["ann", "bob"]})
    (job,) = activate(stub, "io.camunda.zeebe:userTask")
    headers = json.loads(job.customHeaders)
    assert headers["io.camunda.zeebe:assignee"] == "demo"
    assert headers["io.camunda.zeebe:candidateGroups"] == '["reviewers","managers"]'
    assert headers["io.camunda.zeebe:candidateUsers"] == '["ann","bob"]'  # '=approvers'
    assert headers["io.camunda.zeebe:dueDate"] == "2030-01-01T12:00:00Z"
    complete(stub, job.key)


def test_a_user_task_attribute_of_the_wrong_type_raises_an_incident_naming_the_expression(
    weir: WeirProcess, stub: Stub
) -> None:
    d = deploy(stub, "user-task-feel.bpmn")
    pi = create(stub, d.pid(), {"owner": 42, "groups": ["g"], "due": None, "kind": "x"})
    (incident,) = eventually(lambda: incidents_of(weir, pi), what="the task's incident")
    assert incident.error_type == "EXTRACT_VALUE_ERROR"
    assert incident.element_id == "approve"
    assert incident.error_message == ("Expected result of the expression '=owner' to be 'STRING', but was 'NUMBER'.")

    stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=pi, variables='{"owner": "dora"}'), timeout=10)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    (job,) = activate(stub, "io.camunda.zeebe:userTask")
    headers = json.loads(job.customHeaders)
    assert headers["io.camunda.zeebe:assignee"] == "dora"
    assert "io.camunda.zeebe:dueDate" not in headers  # a null date is left out
