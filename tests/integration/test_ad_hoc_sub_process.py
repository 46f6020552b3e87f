"""Ad-hoc sub-processes against a real ``weir start``: the elements a collection names start, inner flows run on,
the sub-process completes when nothing inside is active or when its completion condition holds (terminating the
rest, or waiting for it), and a collection that names no inner element is an incident that can be fixed."""

import grpc
from pyzeebe.proto import gateway_pb2 as pb

from broker.protocol.enums import ProcessInstanceIntent, RecordType, ValueType
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
    logged_records,
    rpc_error,
    variables_of,
)

PI = ProcessInstanceIntent


def test_the_collection_activates_two_of_three_inner_tasks_and_the_sub_process_completes_when_both_are_done(
    stub: Stub,
) -> None:
    d = deploy(stub, "ad-hoc.bpmn")
    result = create_with_result(stub, d.pid(), {"chosen": ["tool-a", "tool-b"]})
    (a,) = activate(stub, d.type("ah-a"))
    (b,) = activate(stub, d.type("ah-b"))
    assert activate_now(stub, d.type("ah-c"), wait_ms=100) == []  # not named by the collection
    complete(stub, a.key, {"fromA": 1})
    assert activate_now(stub, d.type("ah-after"), wait_ms=200) == []  # b is still active
    complete(stub, b.key, {"fromB": 2})
    (after,) = activate(stub, d.type("ah-after"))
    assert variables_of(after) == {"chosen": ["tool-a", "tool-b"], "fromA": 1, "fromB": 2}
    complete(stub, after.key)
    result.result(timeout=10)


def test_an_inner_element_takes_its_outgoing_flow_to_another_inner_element(stub: Stub) -> None:
    d = deploy(stub, "ad-hoc.bpmn")
    pi = create(stub, d.pid(), {"chosen": ["tool-c", "tool-a"]})
    (a,) = activate(stub, d.type("ah-a"))
    (c,) = activate(stub, d.type("ah-c"))
    complete(stub, a.key)
    complete(stub, c.key, {"checked": False})
    (check,) = activate(stub, d.type("ah-c-check"))  # entered over the flow, never named by the collection
    assert variables_of(check)["checked"] is False
    assert activate_now(stub, d.type("ah-after"), wait_ms=200) == []
    complete(stub, check.key, {"checked": True})
    (after,) = activate(stub, d.type("ah-after"))
    assert variables_of(after)["checked"] is True
    complete(stub, after.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_an_empty_collection_activates_nothing_and_the_sub_process_stays_active(stub: Stub) -> None:
    d = deploy(stub, "ad-hoc.bpmn")
    pi = create(stub, d.pid(), {"chosen": []})
    for job_type in ("ah-a", "ah-b", "ah-c", "ah-after"):
        assert activate_now(stub, d.type(job_type), wait_ms=50) == []
    assert is_active(stub, pi)  # as in Zeebe: it waits (to be cancelled or interrupted)
    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=pi), timeout=10)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to be cancelled")


def test_the_completion_condition_completes_the_sub_process_and_terminates_the_rest(stub: Stub) -> None:
    d = deploy(stub, "ad-hoc-condition.bpmn")
    pi = create(stub, d.pid(), {"enough": False})
    (search,) = activate(stub, d.type("ahc-search"))
    (ask,) = activate(stub, d.type("ahc-ask"))
    complete(stub, search.key, {"finding": "nothing yet"})  # a path ended, the condition does not hold
    assert activate_now(stub, d.type("ahc-after"), wait_ms=200) == []
    complete(stub, ask.key, {"finding": "the answer", "enough": True})
    (after,) = activate(stub, d.type("ahc-after"))  # the timer catch event "wait" was terminated
    assert variables_of(after)["findings"] == ["nothing yet", "the answer"]
    complete(stub, after.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_the_completion_condition_terminates_an_inner_job_that_is_still_running(stub: Stub) -> None:
    d = deploy(stub, "ad-hoc-condition.bpmn")
    pi = create(stub, d.pid(), {"enough": False})
    (search,) = activate(stub, d.type("ahc-search"))
    (ask,) = activate(stub, d.type("ahc-ask"))
    complete(stub, search.key, {"finding": "enough", "enough": True})
    (after,) = activate(stub, d.type("ahc-after"))
    assert variables_of(after)["findings"] == ["enough"]
    assert rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=ask.key)).code() == grpc.StatusCode.NOT_FOUND
    complete(stub, after.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_without_cancel_remaining_instances_the_sub_process_waits_for_what_runs_inside(stub: Stub) -> None:
    d = deploy(stub, "ad-hoc-wait.bpmn")
    pi = create(stub, d.pid(), {"enough": False})
    (search,) = activate(stub, d.type("ahw-search"))
    (ask,) = activate(stub, d.type("ahw-ask"))
    complete(stub, search.key, {"finding": "first", "enough": True})
    assert activate_now(stub, d.type("ahw-after"), wait_ms=300) == []  # ask still runs, and is not terminated
    complete(stub, ask.key, {"finding": "second"})
    (after,) = activate(stub, d.type("ahw-after"))
    assert variables_of(after)["findings"] == ["first", "second"]
    complete(stub, after.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_a_collection_naming_an_unknown_element_is_an_incident_that_can_be_fixed(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "ad-hoc.bpmn")
    pi = create(stub, d.pid(), {"chosen": ["tool-a", "tool-c-check", "nope"]})
    (incident,) = eventually(lambda: incidents_of(weir, pi), what="the sub-process's incident")
    assert incident.error_type == "EXTRACT_VALUE_ERROR"
    assert incident.element_id == "tools"
    # tool-c-check has an incoming flow: it is entered only from tool-c
    assert incident.error_message == (
        "Failed to activate ad-hoc elements. No BPMN elements found with ids: 'tool-c-check', 'nope' "
        "(expression '=chosen')."
    )
    assert activate_now(stub, d.type("ah-a"), wait_ms=100) == []  # nothing started

    stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=pi, variables='{"chosen": ["tool-b"]}'), timeout=10)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    (b,) = activate(stub, d.type("ah-b"))
    complete(stub, b.key)
    (after,) = activate(stub, d.type("ah-after"))
    complete(stub, after.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_a_collection_that_is_not_a_list_of_strings_is_an_incident(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "ad-hoc.bpmn")
    pi = create(stub, d.pid(), {"chosen": "tool-a"})
    (incident,) = eventually(lambda: incidents_of(weir, pi), what="the sub-process's incident")
    assert incident.error_message == (
        "Failed to activate ad-hoc elements. Expected result of the expression '=chosen' to be 'ARRAY', but was "
        "'STRING'."
    )


def test_an_error_boundary_on_the_sub_process_catches_an_inner_error_and_ends_what_runs_inside(stub: Stub) -> None:
    d = deploy(stub, "ad-hoc-boundary.bpmn")
    pi = create(stub, d.pid())
    (risky,) = activate(stub, d.type("ahb-risky"))
    (slow,) = activate(stub, d.type("ahb-slow"))
    assert variables_of(slow)["where"] == "inside"  # the input mapping is the sub-process's local variable
    stub.ThrowError(pb.ThrowErrorRequest(jobKey=risky.key, errorCode="FAILED", errorMessage="no"), timeout=10)
    (recover,) = activate(stub, d.type("ahb-recover"))
    assert "where" not in variables_of(recover)
    assert rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=slow.key)).code() == grpc.StatusCode.NOT_FOUND
    assert activate_now(stub, d.type("ahb-after"), wait_ms=100) == []
    complete(stub, recover.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_output_mappings_apply_when_the_sub_process_completes(stub: Stub) -> None:
    d = deploy(stub, "ad-hoc-boundary.bpmn")
    pi = create(stub, d.pid())
    for job_type in ("ahb-risky", "ahb-slow"):
        (job,) = activate(stub, d.type(job_type))
        complete(stub, job.key)
    (after,) = activate(stub, d.type("ahb-after"))
    assert variables_of(after) == {"trace": "inside then out"}  # only what the output mappings propagate
    complete(stub, after.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_a_multi_instance_ad_hoc_sub_process_activates_one_element_per_item(stub: Stub) -> None:
    d = deploy(stub, "ad-hoc-multi.bpmn")
    pi = create(stub, d.pid(), {"tools": ["c", "a"]})
    (c,) = activate(stub, d.type("ahm-c"))
    (a,) = activate(stub, d.type("ahm-a"))
    assert variables_of(c)["tool"] == "c" and variables_of(a)["tool"] == "a"
    assert activate_now(stub, d.type("ahm-b"), wait_ms=100) == []
    complete(stub, c.key)
    assert activate_now(stub, d.type("ahm-after"), wait_ms=200) == []
    complete(stub, a.key)
    (after,) = activate(stub, d.type("ahm-after"))
    complete(stub, after.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_each_activated_element_runs_in_an_inner_instance_of_its_own(fresh_weir: WeirProcess, fresh_stub: Stub) -> None:
    stub = fresh_stub
    d = deploy(stub, "ad-hoc.bpmn")
    pi = create(stub, d.pid(), {"chosen": ["tool-a", "tool-c", "tool-a"]})  # an element may be named twice
    for job_type in ("ah-a", "ah-a", "ah-c", "ah-c-check", "ah-after"):
        (job,) = activate(stub, d.type(job_type))
        complete(stub, job.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")
    fresh_weir.stop()
    events = [
        r
        for r in logged_records(fresh_weir)
        if r.value_type == ValueType.PROCESS_INSTANCE
        and r.record_type == RecordType.EVENT
        and r.value.get("processInstanceKey") == pi
    ]
    (ad_hoc_key,) = {r.key for r in events if r.value["bpmnElementType"] == "AD_HOC_SUB_PROCESS"}
    inner = [r for r in events if r.value["bpmnElementType"] == "AD_HOC_SUB_PROCESS_INNER_INSTANCE"]
    inner_keys = sorted({r.key for r in inner})
    assert len(inner_keys) == 3
    assert {r.value["elementId"] for r in inner} == {"tools#innerInstance"}
    assert {r.value["flowScopeKey"] for r in inner} == {ad_hoc_key}
    for key in inner_keys:
        intents = [ProcessInstanceIntent(r.intent) for r in inner if r.key == key]
        assert intents == [PI.ELEMENT_ACTIVATING, PI.ELEMENT_ACTIVATED, PI.ELEMENT_COMPLETING, PI.ELEMENT_COMPLETED]
    scopes = {
        r.value["elementId"]: r.value["flowScopeKey"]
        for r in events
        if r.intent == PI.ELEMENT_ACTIVATED and r.value["elementId"] in ("tool-c", "tool-c-check")
    }
    assert scopes["tool-c"] == scopes["tool-c-check"] and scopes["tool-c"] in inner_keys  # the flow stays inside
    completed = [r.value["elementId"] for r in events if r.intent == PI.ELEMENT_COMPLETED]
    assert completed.index("tools") > max(i for i, e in enumerate(completed) if e == "tools#innerInstance")


def test_a_failing_completion_condition_is_an_incident_on_the_inner_instance(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "ad-hoc-condition.bpmn")
    pi = create(stub, d.pid(), {"enough": "maybe"})
    (search,) = activate(stub, d.type("ahc-search"))
    (ask,) = activate(stub, d.type("ahc-ask"))
    complete(stub, search.key, {"finding": "f"})
    (incident,) = eventually(lambda: incidents_of(weir, pi), what="the inner instance's incident")
    assert incident.error_type == "EXTRACT_VALUE_ERROR"
    assert incident.element_id == "research#innerInstance"
    assert incident.error_message.startswith("Failed to evaluate completion condition.")

    stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=pi, variables='{"enough": true}'), timeout=10)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    (after,) = activate(stub, d.type("ahc-after"))
    assert variables_of(after)["findings"] == ["f"]  # collected once, although the path was judged twice
    assert rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=ask.key)).code() == grpc.StatusCode.NOT_FOUND
    complete(stub, after.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_an_interrupting_event_sub_process_inside_ends_the_inner_elements_and_then_the_sub_process(
    stub: Stub,
) -> None:
    d = deploy(stub, "ad-hoc-event-subprocess.bpmn")
    key = f"stop-{d.suffix}"
    pi = create(stub, d.pid(), {"stopKey": key})
    (slow,) = activate(stub, d.type("ahe-slow"))
    stub.PublishMessage(pb.PublishMessageRequest(name="ad-hoc-stop", correlationKey=key, timeToLive=60_000), timeout=10)
    (wrap_up,) = activate(stub, d.type("ahe-wrap-up"))
    assert rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=slow.key)).code() == grpc.StatusCode.NOT_FOUND
    assert activate_now(stub, d.type("ahe-after"), wait_ms=100) == []
    complete(stub, wrap_up.key)
    (after,) = activate(stub, d.type("ahe-after"))  # the event sub-process ended the sub-process's last path
    complete(stub, after.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")
