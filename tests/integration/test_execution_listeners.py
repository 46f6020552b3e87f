"""Execution listeners against a real ``weir start``: start and end listener jobs (kind EXECUTION_LISTENER) on the
process, a service task, a gateway, events and a sub-process run one at a time in document order, around the
mappings and before the element's own work; their variables reach the element (start) or the flow scope (end); a
listener out of retries raises an incident whose resolution runs it again; a bad listener type raises one whose
resolution runs the listeners again; cancelling stops a listener; BPMN errors from listener jobs are refused;
pyzeebe and zbctl workers take listener jobs by type; and deployment refuses what Zeebe refuses."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import aiohttp
import grpc
import pytest
from google.protobuf import unknown_fields
from pyzeebe import ZeebeClient, ZeebeWorker, create_insecure_channel
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import WeirProcess, eventually
from tests.integration.clients import (
    Stub,
    activate,
    activate_now,
    complete,
    create,
    create_with_result,
    deploy,
    incidents_of,
    is_active,
    rpc_error,
    variables_of,
)
from tests.integration.test_other_clients import ZBCTL, zbctl
from tests.integration.test_rest_api import activate as rest_activate
from tests.integration.test_rest_api import call as rest_call
from tests.integration.test_rest_api import search_until

FIXTURE = "execution-listeners.bpmn"
# ActivatedJob.kind (16) and listenerEventType (17), as Zeebe numbers their values (pyzeebe's stubs predate them)
EXECUTION_LISTENER, START, END = 1, 5, 4


def kind_and_event_type(job: pb.ActivatedJob) -> tuple[int, int]:
    """Fields 16 and 17 of the job as sent (0 and 6, BPMN_ELEMENT and UNSPECIFIED, when absent)."""
    found = {field.field_number: field.data for field in unknown_fields.UnknownFieldSet(job)}
    return found.get(16, 0), found.get(17, 6)


def nothing_of(stub: Stub, job_type: str) -> bool:
    return activate_now(stub, job_type, wait_ms=200) == []


def only_job(stub: Stub, job_type: str, variables: dict[str, Any] | None = None) -> pb.ActivatedJob:
    """Activate the one job of the type, complete it with ``variables``, and return it as the worker saw it."""
    (job,) = activate(stub, job_type)
    complete(stub, job.key, variables)
    return job


def test_listeners_run_in_order_around_the_mappings_and_the_elements_own_work(stub: Stub) -> None:
    d = deploy(stub, FIXTURE)
    stage = f"stage-{d.suffix}"
    result = create_with_result(stub, d.pid(), {"order": {"id": 7}, "retries": 2, "stage": stage})

    (process_start,) = activate(stub, d.type("el-process-start"))
    assert kind_and_event_type(process_start) == (EXECUTION_LISTENER, START)
    assert process_start.elementId == d.pid()
    assert nothing_of(stub, d.type("el-started")), "the start event waits for the process's start listener"
    complete(stub, process_start.key, {"fromProcessStart": 1})

    started = only_job(stub, d.type("el-started"))
    assert kind_and_event_type(started) == (EXECUTION_LISTENER, END)
    assert started.elementId == "start"

    # the task's start listeners: after its input mappings, before its job; the second one's type is FEEL
    first = only_job(stub, d.type("el-task-start"), {"discount": 10})
    assert first.elementId == "task"
    assert first.retries == 2, "retries '=retries' is FEEL"
    assert variables_of(first)["localOrder"] == {"id": 7}, "the input mappings were applied"
    assert variables_of(first)["fromProcessStart"] == 1, "the process's start listener set it on the process"
    assert nothing_of(stub, d.type("el-work")), "the job waits for the second start listener"
    second = only_job(stub, f"el-{stage}")
    assert variables_of(second)["discount"] == 10, "the first listener's variables are visible to the next one"

    (work,) = activate(stub, d.type("el-work"))
    assert kind_and_event_type(work) == (0, 6)  # BPMN_ELEMENT, UNSPECIFIED
    assert variables_of(work)["discount"] == 10, "a start listener's variables are the element's"
    complete(stub, work.key, {"result": "done"})

    task_end = only_job(stub, d.type("el-task-end"), {"audited": True})
    assert kind_and_event_type(task_end) == (EXECUTION_LISTENER, END)
    assert variables_of(task_end)["taskResult"] == "done", "the output mappings were applied"

    # the gateway decides with what its start listener set
    only_job(stub, d.type("el-route"), {"path": "sub"})
    sub_start = only_job(stub, d.type("el-sub-start"))
    assert sub_start.elementId == "sub"
    assert only_job(stub, d.type("el-sub-end-event")).elementId == "sub-end"
    only_job(stub, d.type("el-sub-end"), {"subDone": True})
    assert not result.done(), "the process waits for its end listener"
    process_end = only_job(stub, d.type("el-process-end"), {"closed": True})
    assert kind_and_event_type(process_end) == (EXECUTION_LISTENER, END)

    variables = json.loads(result.result(timeout=10).variables)
    assert variables["audited"] is True, "an end listener's variables reach the flow scope"
    assert variables["subDone"] is True
    assert variables["closed"] is True
    assert "discount" not in variables, "a start listener's variables stay local to the element"
    assert "localOrder" not in variables


def test_the_default_path_skips_the_sub_process_and_the_boundary_events_end_listener_runs_when_it_fires(
    stub: Stub,
) -> None:
    d = deploy(stub, FIXTURE)
    stage = f"stage-{d.suffix}"
    pi = create(stub, d.pid(), {"order": {}, "retries": 1, "stage": stage})
    only_job(stub, d.type("el-process-start"))
    only_job(stub, d.type("el-started"))
    only_job(stub, d.type("el-task-start"))
    only_job(stub, f"el-{stage}")
    (work,) = activate(stub, d.type("el-work"))
    complete(stub, work.key, {"result": 1})
    only_job(stub, d.type("el-task-end"))
    only_job(stub, d.type("el-route"), {"path": "direct"})
    only_job(stub, d.type("el-process-end"))
    eventually(lambda: not is_active(stub, pi), what="the instance to complete")
    assert nothing_of(stub, d.type("el-sub-start"))


def test_several_instances_of_a_multi_instance_task_each_run_the_listeners(stub: Stub) -> None:
    suffix = uuid.uuid4().hex[:8]
    xml = _process(
        suffix,
        f"""<bpmn:serviceTask id="each">
          <bpmn:extensionElements>
            <zeebe:taskDefinition type="mi-work-{suffix}" />
            <zeebe:executionListeners>
              <zeebe:executionListener eventType="start" type="mi-start-{suffix}" />
              <zeebe:executionListener eventType="end" type="mi-end-{suffix}" />
            </zeebe:executionListeners>
          </bpmn:extensionElements>
          <bpmn:multiInstanceLoopCharacteristics>
            <bpmn:extensionElements>
              <zeebe:loopCharacteristics inputCollection="=items" inputElement="item" />
            </bpmn:extensionElements>
          </bpmn:multiInstanceLoopCharacteristics>
        </bpmn:serviceTask>""",
        "each",
    )
    _deploy_xml(stub, suffix, xml)
    result = create_with_result(stub, f"p-{suffix}", {"items": ["a", "b"]})
    only_job(stub, f"t-{suffix}")
    starts = activate(stub, f"mi-start-{suffix}", 2)
    assert sorted(variables_of(job)["item"] for job in starts) == ["a", "b"]
    for job in starts:
        complete(stub, job.key)
    for job in activate(stub, f"mi-work-{suffix}", 2):
        complete(stub, job.key)
    for job in activate(stub, f"mi-end-{suffix}", 2):
        complete(stub, job.key)
    result.result(timeout=10)


def test_pyzeebe_workers_handle_listener_jobs_like_any_job(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, FIXTURE)
    stage = f"stage-{d.suffix}"
    order: list[str] = []

    async def scenario() -> dict[str, Any]:
        channel = create_insecure_channel(grpc_address=weir.address)
        client = ZeebeClient(channel)
        worker = ZeebeWorker(channel, name="listener-worker")

        def handler(name: str, result: dict[str, Any]) -> Any:
            async def handle() -> dict[str, Any]:
                order.append(name)
                return result

            return handle

        handlers = {
            "el-process-start": {},
            "el-started": {},
            "el-task-start": {"discount": 5},
            "el-work": {"result": "ok"},
            "el-task-end": {},
            "el-route": {"path": "sub"},
            "el-sub-start": {},
            "el-sub-end-event": {},
            "el-sub-end": {},
            "el-process-end": {"finished": True},
        }
        for name, result in handlers.items():
            worker.task(task_type=d.type(name))(handler(name, result))
        worker.task(task_type=f"el-{stage}")(handler("el-stage", {}))
        work = asyncio.create_task(worker.work())
        try:
            done = await client.run_process_with_result(
                d.pid(), {"order": {}, "retries": 3, "stage": stage}, timeout=20_000
            )
        finally:
            await worker.stop()
            work.cancel()
        return done.variables

    final = asyncio.run(scenario())
    assert order == [
        "el-process-start",
        "el-started",
        "el-task-start",
        "el-stage",
        "el-work",
        "el-task-end",
        "el-route",
        "el-sub-start",
        "el-sub-end-event",
        "el-sub-end",
        "el-process-end",
    ]
    assert final["finished"] is True


def test_a_listener_out_of_retries_and_a_bad_listener_type_raise_incidents_that_resolve(
    weir: WeirProcess, stub: Stub
) -> None:
    d = deploy(stub, FIXTURE)
    stage = f"stage-{d.suffix}"
    pi = create(stub, d.pid(), {"order": {}, "retries": 1})  # no 'stage': the second listener's type is null
    only_job(stub, d.type("el-process-start"))
    only_job(stub, d.type("el-started"))

    # a listener failing without retries left: EXECUTION_LISTENER_NO_RETRIES; resolving it runs that listener again
    (first,) = activate(stub, d.type("el-task-start"))
    stub.FailJob(pb.FailJobRequest(jobKey=first.key, retries=0, errorMessage="listener down"), timeout=10)
    (incident,) = eventually(lambda: incidents_of(weir, pi), what="the incident")
    assert incident.error_type == "EXECUTION_LISTENER_NO_RETRIES"
    assert incident.error_message == "listener down"
    assert incident.job_key == first.key
    assert incident.element_id == "task"
    stub.UpdateJobRetries(pb.UpdateJobRetriesRequest(jobKey=first.key, retries=1), timeout=10)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    (again,) = activate(stub, d.type("el-task-start"))
    assert again.key == first.key, "the same listener job runs again"
    complete(stub, again.key, {"discount": 1})

    # the second listener's type evaluates to null: EXTRACT_VALUE_ERROR; resolving it runs every start listener again
    resolved = incident.key
    (incident,) = eventually(lambda: [i for i in incidents_of(weir, pi) if i.key != resolved], what="a new incident")
    assert incident.error_type == "EXTRACT_VALUE_ERROR"
    assert incident.element_id == "task"
    assert nothing_of(stub, d.type("el-work"))
    stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=pi, variables=json.dumps({"stage": stage})), timeout=10)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    only_job(stub, d.type("el-task-start"))
    only_job(stub, f"el-{stage}")
    (work,) = activate(stub, d.type("el-work"))
    complete(stub, work.key, {"result": 1})
    only_job(stub, d.type("el-task-end"))
    only_job(stub, d.type("el-route"))
    only_job(stub, d.type("el-process-end"))
    eventually(lambda: not is_active(stub, pi), what="the instance to complete")


def test_cancelling_the_instance_cancels_the_active_listener_job(stub: Stub) -> None:
    d = deploy(stub, FIXTURE)
    pi = create(stub, d.pid(), {"order": {}, "retries": 1, "stage": "x"})
    only_job(stub, d.type("el-process-start"))
    only_job(stub, d.type("el-started"))
    (listener,) = activate(stub, d.type("el-task-start"))
    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=pi), timeout=10)
    eventually(lambda: not is_active(stub, pi), what="the instance to be cancelled")
    err = rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=listener.key, variables="{}"))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert nothing_of(stub, d.type("el-work"))
    assert nothing_of(stub, d.type("el-process-end")), "a cancelled process does not run its end listeners"


def test_a_bpmn_error_from_a_listener_job_is_refused(stub: Stub) -> None:
    d = deploy(stub, FIXTURE)
    pi = create(stub, d.pid(), {"order": {}, "retries": 1, "stage": "x"})
    (listener,) = activate(stub, d.type("el-process-start"))
    err = rpc_error(stub.ThrowError, pb.ThrowErrorRequest(jobKey=listener.key, errorCode="oops"))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert err.details() == (
        f"Command 'THROW_ERROR' rejected with code 'INVALID_STATE': Cannot throw BPMN error from EXECUTION_LISTENER "
        f"job with key '{listener.key}', type '{d.type('el-process-start')}' and processInstanceKey '{pi}'"
    )
    complete(stub, listener.key)  # still active: the worker can complete it
    only_job(stub, d.type("el-started"))
    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=pi), timeout=10)


REFUSED = {
    "start listener on a start event": (
        '<bpmn:startEvent id="s">{listeners}</bpmn:startEvent>',
        "start",
        "s",
        "Execution listeners of type 'start' are not supported by start events",
    ),
    "start listener on a boundary event": (
        '<bpmn:boundaryEvent id="b" attachedToRef="t">{listeners}'
        "<bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition>"
        "</bpmn:boundaryEvent>",
        "start",
        "b",
        "Execution listeners of type 'start' are not supported by boundary events",
    ),
    "end listener on a gateway": (
        '<bpmn:parallelGateway id="g">{listeners}</bpmn:parallelGateway>',
        "end",
        "g",
        "Execution listeners of type 'end' are not supported by gateway element",
    ),
    "end listener on an error end event": (
        '<bpmn:endEvent id="e2">{listeners}<bpmn:errorEventDefinition errorRef="err" /></bpmn:endEvent>',
        "end",
        "e2",
        "Execution listeners of type 'end' are not supported by [error] end events",
    ),
    "end listener on an escalation throw event": (
        '<bpmn:intermediateThrowEvent id="x">{listeners}<bpmn:escalationEventDefinition escalationRef="esc" />'
        "</bpmn:intermediateThrowEvent>",
        "end",
        "x",
        "Execution listeners of type 'end' are not supported by [escalation] intermediate throw events",
    ),
}


def test_deployment_refuses_the_listeners_zeebe_refuses(stub: Stub) -> None:
    for case, (element, event_type, element_id, message) in REFUSED.items():
        suffix = uuid.uuid4().hex[:8]
        listeners = (
            "<bpmn:extensionElements><zeebe:executionListeners>"
            f'<zeebe:executionListener eventType="{event_type}" type="l" />'
            "</zeebe:executionListeners></bpmn:extensionElements>"
        )
        err = rpc_error(
            stub.DeployResource, _deploy_request(suffix, _process(suffix, element.format(listeners=listeners)))
        )
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, case
        assert f"'{element_id}': {message}" in err.details(), (case, err.details())


def test_deployment_refuses_two_listeners_of_the_same_event_type_and_job_type(stub: Stub) -> None:
    suffix = uuid.uuid4().hex[:8]
    task = """<bpmn:serviceTask id="dup"><bpmn:extensionElements>
        <zeebe:taskDefinition type="w" />
        <zeebe:executionListeners>
          <zeebe:executionListener eventType="start" type="same" />
          <zeebe:executionListener eventType="end" type="same" />
          <zeebe:executionListener eventType="start" type="same" />
        </zeebe:executionListeners></bpmn:extensionElements></bpmn:serviceTask>"""
    err = rpc_error(stub.DeployResource, _deploy_request(suffix, _process(suffix, task)))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (
        "'dup': Found '2' duplicates based on eventType[start] and type[same], these combinations should be unique."
        in err.details()
    )
    assert "eventType[end]" not in err.details(), "the same job type for start and end is allowed"


# -- models written inline ----------------------------------------------------------------------------------------


def _process(suffix: str, element: str, through: str | None = None) -> str:
    """A process start → t (a service task of type ``t-<suffix>``) → end with ``element`` in it, on the path between
    the task and the end event when its id is ``through``."""
    flows = '<bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="t" />'
    if through is None:
        flows += '<bpmn:sequenceFlow id="f3" sourceRef="t" targetRef="end" />'
    else:
        flows += f'<bpmn:sequenceFlow id="f2" sourceRef="t" targetRef="{through}" />'
        flows += f'<bpmn:sequenceFlow id="f3" sourceRef="{through}" targetRef="end" />'
    task = f'<zeebe:taskDefinition type="t-{suffix}" />'
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d-{suffix}" targetNamespace="http://bpmn.io/schema/bpmn">
  <bpmn:error id="err" errorCode="E" />
  <bpmn:escalation id="esc" escalationCode="X" />
  <bpmn:process id="p-{suffix}" isExecutable="true">
    <bpmn:startEvent id="start" />
    <bpmn:serviceTask id="t"><bpmn:extensionElements>{task}</bpmn:extensionElements></bpmn:serviceTask>
    {element}
    <bpmn:endEvent id="end" />
    {flows}
  </bpmn:process>
</bpmn:definitions>"""


def _deploy_request(suffix: str, xml: str) -> pb.DeployResourceRequest:
    return pb.DeployResourceRequest(resources=[pb.Resource(name=f"listeners-{suffix}.bpmn", content=xml.encode())])


def _deploy_xml(stub: Stub, suffix: str, xml: str) -> None:
    stub.DeployResource(_deploy_request(suffix, xml), timeout=10)


def test_zbctl_activates_and_completes_a_listener_job(weir: WeirProcess, stub: Stub) -> None:
    if not ZBCTL.exists():
        pytest.skip("node clients not installed (run `make node-clients`)")
    d = deploy(stub, FIXTURE)
    pi = create(stub, d.pid(), {"order": {}, "retries": 1, "stage": "x"})
    activated = zbctl(weir, "activate", "jobs", d.type("el-process-start"), "--maxJobsToActivate", "5")
    assert activated.returncode == 0, activated.stderr
    (job,) = json.loads(activated.stdout)["jobs"]
    assert (job["processInstanceKey"], job["elementId"]) == (str(pi), d.pid())
    completed = zbctl(weir, "complete", "job", str(job["key"]), "--variables", '{"viaZbctl": true}')
    assert completed.returncode == 0, completed.stderr
    (started,) = activate(stub, d.type("el-started"))
    assert variables_of(started)["viaZbctl"] is True
    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=pi), timeout=10)


def test_a_timer_catch_event_subscribes_with_what_its_start_listener_set(stub: Stub) -> None:
    suffix = uuid.uuid4().hex[:8]
    catch = f"""<bpmn:intermediateCatchEvent id="wait">
        <bpmn:extensionElements><zeebe:executionListeners>
          <zeebe:executionListener eventType="start" type="set-wait-{suffix}" />
          <zeebe:executionListener eventType="end" type="waited-{suffix}" />
        </zeebe:executionListeners></bpmn:extensionElements>
        <bpmn:timerEventDefinition><bpmn:timeDuration>=delay</bpmn:timeDuration></bpmn:timerEventDefinition>
      </bpmn:intermediateCatchEvent>"""
    _deploy_xml(stub, suffix, _process(suffix, catch, through="wait"))
    result = create_with_result(stub, f"p-{suffix}")  # no 'delay': only the start listener sets it
    only_job(stub, f"t-{suffix}")
    only_job(stub, f"set-wait-{suffix}", {"delay": "PT0.1S"})
    waited = only_job(stub, f"waited-{suffix}")  # the timer fired with the listener's duration
    assert variables_of(waited)["delay"] == "PT0.1S"
    result.result(timeout=10)


def test_an_error_boundary_events_end_listener_runs_before_the_flow_goes_on(stub: Stub) -> None:
    suffix = uuid.uuid4().hex[:8]
    boundary = f"""<bpmn:boundaryEvent id="caught" attachedToRef="t">
        <bpmn:extensionElements><zeebe:executionListeners>
          <zeebe:executionListener eventType="end" type="on-caught-{suffix}" />
        </zeebe:executionListeners></bpmn:extensionElements>
        <bpmn:errorEventDefinition errorRef="err" />
      </bpmn:boundaryEvent>
      <bpmn:serviceTask id="recover"><bpmn:extensionElements>
        <zeebe:taskDefinition type="recover-{suffix}" /></bpmn:extensionElements></bpmn:serviceTask>
      <bpmn:endEvent id="recovered" />
      <bpmn:sequenceFlow id="c1" sourceRef="caught" targetRef="recover" />
      <bpmn:sequenceFlow id="c2" sourceRef="recover" targetRef="recovered" />"""
    _deploy_xml(stub, suffix, _process(suffix, boundary))
    pi = create(stub, f"p-{suffix}")
    (task,) = activate(stub, f"t-{suffix}")
    stub.ThrowError(pb.ThrowErrorRequest(jobKey=task.key, errorCode="E"), timeout=10)
    (listener,) = activate(stub, f"on-caught-{suffix}")
    assert listener.elementId == "caught"
    assert kind_and_event_type(listener) == (EXECUTION_LISTENER, END)
    assert nothing_of(stub, f"recover-{suffix}"), "the flow goes on after the end listener"
    complete(stub, listener.key, {"handled": "yes"})
    recover = only_job(stub, f"recover-{suffix}")
    assert variables_of(recover)["handled"] == "yes"
    eventually(lambda: not is_active(stub, pi), what="the instance to complete")


def test_listeners_around_a_call_activity_its_called_process_and_an_ad_hoc_sub_process(stub: Stub) -> None:
    d = deploy(stub, "execution-listeners-scopes.bpmn")
    result = create_with_result(stub, d.pid("execution-listeners-scopes"), {"orderId": "o-1"})
    (call_start,) = activate(stub, d.type("els-call-start"))
    assert call_start.elementId == "call"
    assert nothing_of(stub, d.type("els-callee-start")), "the called process starts after the start listener"
    complete(stub, call_start.key, {"callerNote": "from the start listener"})
    callee_start = only_job(stub, d.type("els-callee-start"))
    assert callee_start.bpmnProcessId == d.pid("execution-listeners-callee")
    assert variables_of(callee_start)["callerNote"] == "from the start listener", "the call activity's local"
    only_job(stub, d.type("els-callee-work"), {"childResult": 42})
    only_job(stub, d.type("els-callee-end"))
    call_end = only_job(stub, d.type("els-call-end"))
    assert variables_of(call_end)["fromChild"] == 42, "after the call activity's output mappings"
    (tools_start,) = activate(stub, d.type("els-tools-start"))
    assert tools_start.elementId == "tools"
    assert nothing_of(stub, d.type("els-tool")), "the ad-hoc sub-process activates its elements after the listener"
    complete(stub, tools_start.key)
    only_job(stub, d.type("els-tool"))
    tool_end = only_job(stub, d.type("els-tool-end"))
    assert tool_end.elementId == "tool"
    assert kind_and_event_type(tool_end) == (EXECUTION_LISTENER, END)
    only_job(stub, d.type("els-tools-end"), {"toolsDone": True})
    variables = json.loads(result.result(timeout=10).variables)
    assert variables["fromChild"] == 42
    assert variables["toolsDone"] is True


def test_listeners_around_a_native_user_task_worked_over_the_rest_api(weir: WeirProcess, stub: Stub) -> None:
    suffix = uuid.uuid4().hex[:8]
    task = f"""<bpmn:userTask id="approve">
        <bpmn:extensionElements><zeebe:userTask />
          <zeebe:executionListeners>
            <zeebe:executionListener eventType="start" type="ut-start-{suffix}" />
            <zeebe:executionListener eventType="end" type="ut-end-{suffix}" />
          </zeebe:executionListeners></bpmn:extensionElements>
      </bpmn:userTask>"""
    _deploy_xml(stub, suffix, _process(suffix, task, through="approve"))
    pi = create(stub, f"p-{suffix}")
    only_job(stub, f"t-{suffix}")

    async def scenario() -> None:
        async with aiohttp.ClientSession(base_url=weir.rest_url) as http:
            (start,) = await rest_activate(http, f"ut-start-{suffix}")
            assert (start["kind"], start["listenerEventType"]) == ("EXECUTION_LISTENER", "START")
            assert start["elementId"] == "approve"
            assert await rest_call(http, "POST", f"/v2/jobs/{start['jobKey']}/completion", {}) == (204, None)
            found = await search_until(
                http,
                "user-tasks",
                {"filter": {"processInstanceKey": str(pi)}},
                lambda answer: answer["items"] and answer["items"][0]["state"] == "CREATED",
                "the user task in the history",
            )
            key = found["items"][0]["userTaskKey"]
            completion = {"variables": {"approved": True}}
            assert await rest_call(http, "POST", f"/v2/user-tasks/{key}/completion", completion) == (204, None)
            (end,) = await rest_activate(http, f"ut-end-{suffix}")
            assert (end["kind"], end["listenerEventType"]) == ("EXECUTION_LISTENER", "END")
            assert end["variables"]["approved"] is True
            assert await rest_call(http, "POST", f"/v2/jobs/{end['jobKey']}/completion", {}) == (204, None)

    asyncio.run(scenario())
    eventually(lambda: not is_active(stub, pi), what="the instance to complete")
