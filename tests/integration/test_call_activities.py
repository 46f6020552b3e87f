"""Call activities against a real ``weir start``: the called instance, its variables both ways, the binding types,
cancellation, errors and escalations crossing into the caller, and the incident of a missing called process."""

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import grpc
from pyzeebe import Job, ZeebeClient, ZeebeWorker, create_insecure_channel
from pyzeebe.proto import gateway_pb2 as pb

from broker.protocol.enums import ProcessInstanceIntent, RecordType, ValueType
from tests.harness import WeirProcess, eventually
from tests.integration.clients import (
    Stub,
    activate,
    activate_now,
    complete,
    create,
    deploy,
    incidents_of,
    is_active,
    logged_records,
    rpc_error,
    unique_copy,
    variables_of,
)

# -- variables both ways ------------------------------------------------------------------------------------


def test_a_called_process_starts_with_the_callers_variables_and_hands_its_own_back(weir: WeirProcess) -> None:
    """Driven by pyzeebe: the result of the calling instance holds what the called one added."""
    seen: dict[str, Any] = {}

    async def scenario() -> dict[str, Any]:
        channel = create_insecure_channel(grpc_address=weir.address)
        client = ZeebeClient(channel)
        d = await client.deploy_resource(str(_copy("call-activity.bpmn", suffix)))
        assert {p.bpmn_process_id for p in d.deployments} == {pid, child_pid}
        worker = ZeebeWorker(channel, name="call-checker")

        @worker.task(task_type=f"child-work-{suffix}")
        async def child_work(job: Job) -> dict:
            seen["child"] = (job.bpmn_process_id, job.process_instance_key, dict(job.variables))
            return {"paid": True, "amount": job.variables["amount"] + 1}

        @worker.task(task_type=f"after-call-{suffix}")
        async def after_call(job: Job) -> dict:
            seen["after"] = (job.process_instance_key, dict(job.variables))
            return {"shipped": True}

        work = asyncio.create_task(worker.work())
        try:
            result = await client.run_process_with_result(pid, {"orderId": "o-1", "amount": 5}, timeout=10_000)
        finally:
            await worker.stop()
            work.cancel()
        seen["instance"] = result.process_instance_key
        return result.variables

    suffix = "pyz"
    pid, child_pid = f"call-activity-{suffix}", f"call-activity-child-{suffix}"
    final = asyncio.run(scenario())
    child_id, child_instance, child_variables = seen["child"]
    assert child_id == child_pid
    assert child_instance != seen["instance"], "the called process runs as an instance of its own"
    assert child_variables == {"orderId": "o-1", "amount": 5}
    assert seen["after"] == (seen["instance"], {"orderId": "o-1", "amount": 6, "paid": True})
    assert final == {"orderId": "o-1", "amount": 6, "paid": True, "shipped": True}


def _copy(fixture: str, suffix: str) -> Path:
    """A fixture renamed like ``deploy`` does, written to a file pyzeebe can deploy."""
    content, _, _ = unique_copy(fixture, suffix)
    path = Path(tempfile.mkdtemp()) / f"{suffix}-{fixture}"
    path.write_bytes(content)
    return path


def test_with_both_propagation_flags_off_only_the_mappings_cross(stub: Stub) -> None:
    d = deploy(stub, "call-activity-mappings.bpmn")
    pi = create(stub, d.pid("call-activity-mappings"), {"order": {"customer": {"id": "c-1"}}, "secret": 42})
    (job,) = activate(stub, d.type("mapped-work"))
    assert job.bpmnProcessId == d.pid("call-activity-mappings-child")
    assert variables_of(job) == {"customer": {"id": "c-1"}, "mode": "strict"}, "only the input mappings go in"
    complete(stub, job.key, {"verdict": "good", "noise": 1})
    (after,) = activate(stub, d.type("after-mapped"))
    assert after.processInstanceKey == pi
    # only the output mapping comes back: not the child's other variables, nor the call activity's locals
    assert variables_of(after) == {"order": {"customer": {"id": "c-1"}}, "secret": 42, "customerVerdict": "good"}
    complete(stub, after.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_the_called_process_id_may_be_an_expression(stub: Stub) -> None:
    called = deploy(stub, "call-activity.bpmn")
    d = deploy(stub, "call-activity-feel.bpmn", called.suffix)
    pi = create(stub, d.pid(), {"childId": called.pid("call-activity-child")})
    (job,) = activate(stub, called.type("child-work"))
    assert job.bpmnProcessId == called.pid("call-activity-child")
    assert variables_of(job) == {"childId": called.pid("call-activity-child")}
    complete(stub, job.key, {"done": True})
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the calling instance to complete")


# -- binding types ------------------------------------------------------------------------------------------


def test_each_binding_type_calls_its_version(stub: Stub) -> None:
    first = deploy(stub, "call-binding.bpmn")  # the caller with version 1 of the child (tag v1)
    second = deploy(stub, "call-binding-child-v1b.bpmn", first.suffix)  # version 2, tag v1 again
    third = deploy(stub, "call-binding-child-v2.bpmn", first.suffix)  # version 3, tag v2
    child_id = first.pid("call-binding-child")
    keys = {
        d.process.version: d.process.processDefinitionKey
        for response in (first.response, second.response, third.response)
        for d in response.deployments
        if d.process.bpmnProcessId == child_id
    }
    assert sorted(keys) == [1, 2, 3]
    pi = create(stub, first.pid("call-binding"))
    jobs = activate(stub, first.type("bind-work"), 3)
    called = {variables_of(j)["binding"]: (j.processDefinitionVersion, j.processDefinitionKey) for j in jobs}
    assert called == {
        "latest": (3, keys[3]),
        "deployment": (1, keys[1]),  # deployed together with the caller
        "versionTag": (2, keys[2]),  # the latest version tagged v1
    }
    for job in jobs:
        complete(stub, job.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the caller to complete")


def test_a_deployment_in_which_anything_changed_gives_every_process_a_new_version(stub: Stub) -> None:
    first = deploy(stub, "call-binding.bpmn")
    again = deploy(stub, "call-binding.bpmn", first.suffix)
    assert {(d.process.bpmnProcessId, d.process.version) for d in again.response.deployments} == {
        (first.pid("call-binding"), 1),
        (first.pid("call-binding-child"), 1),
    }, "an identical deployment creates nothing"
    content = unique_copy("call-binding.bpmn", first.suffix)[0]
    changed = content.replace(b'name="Call by each binding type"', b'name="Call by each binding type, renamed"')
    response = stub.DeployResource(
        pb.DeployResourceRequest(resources=[pb.Resource(name=f"{first.suffix}-call-binding.bpmn", content=changed)]),
        timeout=10,
    )
    assert {(d.process.bpmnProcessId, d.process.version) for d in response.deployments} == {
        (first.pid("call-binding"), 2),
        (first.pid("call-binding-child"), 2),  # unchanged, but deployed with a changed caller
    }


# -- termination --------------------------------------------------------------------------------------------


def test_cancelling_the_root_terminates_the_whole_chain_and_a_child_cannot_be_cancelled_alone(stub: Stub) -> None:
    d = deploy(stub, "call-chain.bpmn")
    root = create(stub, d.pid("call-chain"), {"escalate": False})
    (job,) = activate(stub, d.type("chain-work"))
    leaf = job.processInstanceKey
    assert job.bpmnProcessId == d.pid("call-chain-leaf") and leaf != root

    error = rpc_error(stub.CancelProcessInstance, pb.CancelProcessInstanceRequest(processInstanceKey=leaf))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"Cancel the root process instance '{root}' instead" in (error.details() or "")

    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=root), timeout=10)
    eventually(lambda: not is_active(stub, leaf), timeout=5, what="the grandchild to be terminated")
    assert not is_active(stub, root)
    error = rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=job.key, variables="{}"))
    assert error.code() == grpc.StatusCode.NOT_FOUND, "the grandchild's job was cancelled with it"
    assert activate_now(stub, d.type("chain-work")) == []


# -- errors and escalations ---------------------------------------------------------------------------------


def test_an_error_thrown_by_a_childs_job_is_caught_by_a_boundary_event_on_the_call_activity(stub: Stub) -> None:
    d = deploy(stub, "call-activity.bpmn")
    pi = create(stub, d.pid("call-activity"), {"orderId": "o-9"})
    (job,) = activate(stub, d.type("child-work"))
    child = job.processInstanceKey
    stub.ThrowError(
        pb.ThrowErrorRequest(jobKey=job.key, errorCode="PAYMENT_FAILED", errorMessage="card declined"), timeout=10
    )
    (handler,) = activate(stub, d.type("payment-failure"))
    assert handler.processInstanceKey == pi and handler.elementId == "payment-failure"
    assert not is_active(stub, child), "the called instance was terminated with its call activity"
    assert activate_now(stub, d.type("after-call")) == [], "the call activity did not complete"
    complete(stub, handler.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to end at its error path")


def test_an_escalation_two_levels_down_reaches_the_non_interrupting_boundary_of_the_root(stub: Stub) -> None:
    d = deploy(stub, "call-chain.bpmn")
    root = create(stub, d.pid("call-chain"), {"escalate": True})
    (job,) = activate(stub, d.type("chain-work"))
    complete(stub, job.key)
    (escalated,) = activate(stub, d.type("chain-escalated"))
    assert escalated.processInstanceKey == root
    complete(stub, escalated.key)
    eventually(lambda: not is_active(stub, root), timeout=5, what="the chain and the escalation path to complete")


def test_a_message_interrupting_two_levels_of_calls_at_once_ends_both_cleanly(stub: Stub) -> None:
    """Both call activities (level 1 calling level 2, level 2 calling level 3) have a boundary for the same message:
    level 1's correlates first and terminates the whole chain below it; level 2's then finds nothing to interrupt."""
    d = deploy(stub, "call-message.bpmn")
    order = f"order-{d.suffix}"
    root = create(stub, d.pid("call-message"), {"orderId": order})
    (job,) = activate(stub, d.type("level3-work"))
    stub.PublishMessage(
        pb.PublishMessageRequest(name="withdraw", correlationKey=order, timeToLive=10_000, variables='{"why": "late"}'),
        timeout=10,
    )
    (withdrawn,) = activate(stub, d.type("withdrawn"))
    assert withdrawn.processInstanceKey == root
    assert variables_of(withdrawn) == {"orderId": order, "why": "late"}
    assert not is_active(stub, job.processInstanceKey), "level 3 was terminated"
    complete(stub, withdrawn.key)
    eventually(lambda: not is_active(stub, root), timeout=5, what="level 1 to complete")


# -- incidents ----------------------------------------------------------------------------------------------


def test_a_missing_called_process_is_an_incident_until_it_is_deployed_and_the_incident_resolved(
    fresh_weir: WeirProcess, fresh_stub: Stub
) -> None:
    stub = fresh_stub
    d = deploy(stub, "call-missing.bpmn")
    pi = create(stub, d.pid())
    child_id = f"call-missing-child-{d.suffix}"
    (incident,) = eventually(lambda: incidents_of(fresh_weir, pi), timeout=10, what="the call activity's incident")
    assert incident.error_type == "CALLED_ELEMENT_ERROR"
    assert incident.element_id == "call-later"
    assert (
        incident.error_message == f"Expected process with BPMN process id '{child_id}' to be deployed, but not found."
    )

    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)  # still missing
    (again,) = eventually(
        lambda: [i for i in incidents_of(fresh_weir, pi) if i.key != incident.key], what="the incident raised again"
    )

    deploy(stub, "call-missing-child.bpmn", d.suffix)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=again.key), timeout=10)
    (job,) = activate(stub, f"late-work-{d.suffix}")
    assert job.bpmnProcessId == child_id
    complete(stub, job.key, {"late": True})
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")

    # what an exporter sees: every record of the called instance names its caller
    fresh_weir.stop()
    records = logged_records(fresh_weir)
    call_activity = next(
        r.key
        for r in records
        if r.value_type == ValueType.PROCESS_INSTANCE
        and r.record_type == RecordType.EVENT
        and r.intent == ProcessInstanceIntent.ELEMENT_ACTIVATED
        and r.value["elementId"] == "call-later"
    )
    child_records = [
        r for r in records if r.value_type == ValueType.PROCESS_INSTANCE and r.value.get("bpmnProcessId") == child_id
    ]
    assert child_records
    assert {(r.value["parentProcessInstanceKey"], r.value["parentElementInstanceKey"]) for r in child_records} == {
        (pi, call_activity)
    }
    kinds = [
        (r.value["bpmnElementType"], ProcessInstanceIntent(r.intent).name)
        for r in records
        if r.value_type == ValueType.PROCESS_INSTANCE
        and r.record_type == RecordType.EVENT
        and r.value["bpmnElementType"] in ("PROCESS", "CALL_ACTIVITY")
        and r.value["processInstanceKey"] in (pi, job.processInstanceKey)
    ]
    assert kinds[-5:] == [  # the called instance completes, then its call activity, then the caller
        ("PROCESS", "ELEMENT_COMPLETED"),
        ("CALL_ACTIVITY", "ELEMENT_COMPLETING"),
        ("CALL_ACTIVITY", "ELEMENT_COMPLETED"),
        ("PROCESS", "ELEMENT_COMPLETING"),
        ("PROCESS", "ELEMENT_COMPLETED"),
    ]
