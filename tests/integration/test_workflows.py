"""The single-node engine behaves as Zeebe users expect, checked through real clients against a real ``weir start``.

Each test deploys its own copy of a fixture under a unique process id and unique job types, so tests sharing the
module's broker never see each other's jobs. pyzeebe drives the worker-shaped scenarios; the RPCs pyzeebe does not
offer go through pyzeebe's bundled raw stubs.

Incident keys are not returned by any RPC. Tests that resolve incidents find them the way an operator reading an
exporter would: stop the broker gracefully, read the partition log, start it again (which also exercises replay).
"""

import asyncio
import json
import threading
import time
import uuid
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pyzeebe import Job, ZeebeClient, ZeebeWorker, create_insecure_channel
from pyzeebe.errors import BusinessError
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
    unique_copy,
    variables_of,
)

# -- a linear process with a real worker ---------------------------------------------------------------------


def test_linear_process_with_pyzeebe_worker(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "two-tasks.bpmn")
    seen: dict[str, Any] = {}

    async def scenario() -> dict[str, Any]:
        channel = create_insecure_channel(grpc_address=weir.address)
        client = ZeebeClient(channel)
        worker = ZeebeWorker(channel, name="linear-worker")

        @worker.task(task_type=d.type("prepare"))
        async def prepare(job: Job) -> dict:
            seen["prepare"] = (dict(job.variables), dict(job.custom_headers), job.retries, job.worker)
            return {"parcel": f"parcel-for-{job.variables['orderId']}", "weight": job.variables["items"] * 2}

        @worker.task(task_type=d.type("ship"))
        async def ship(job: Job) -> dict:
            seen["ship"] = (dict(job.variables), dict(job.custom_headers))
            return {"tracking": job.variables["parcel"].upper()}

        work = asyncio.create_task(worker.work())
        try:
            result = await client.run_process_with_result(d.pid(), {"orderId": "o-7", "items": 3}, timeout=10_000)
        finally:
            await worker.stop()
            work.cancel()
        return result.variables

    final = asyncio.run(scenario())
    prepare_vars, prepare_headers, retries, worker_name = seen["prepare"]
    assert prepare_vars == {"orderId": "o-7", "items": 3}
    assert prepare_headers == {"channel": "web", "region": "eu-west"}
    assert retries == 4
    assert worker_name == "linear-worker"
    ship_vars, ship_headers = seen["ship"]
    assert ship_vars == {"orderId": "o-7", "items": 3, "parcel": "parcel-for-o-7", "weight": 6}
    assert ship_headers == {}
    assert final == {
        "orderId": "o-7",
        "items": 3,
        "parcel": "parcel-for-o-7",
        "weight": 6,
        "tracking": "PARCEL-FOR-O-7",
    }


# -- gateways ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("amount", "taken", "not_taken"),
    [
        (150, "approve-large", "approve-small"),
        (50, "approve-small", "approve-large"),
        (100, "approve-small", "approve-large"),
    ],
)
def test_exclusive_gateway_routes_by_variables(stub: Stub, amount: int, taken: str, not_taken: str) -> None:
    d = deploy(stub, "exclusive-gateway.bpmn")
    result = create_with_result(stub, d.pid(), {"amount": amount})
    (job,) = activate(stub, d.type(taken))
    assert job.elementId == taken
    assert activate_now(stub, d.type(not_taken)) == []
    complete(stub, job.key, {"approvedBy": taken})
    assert json.loads(result.result(timeout=10).variables) == {"amount": amount, "approvedBy": taken}


def test_exclusive_gateway_without_match_or_default_raises_an_incident(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "exclusive-no-default.bpmn")
    pi = create(stub, d.pid(), {"amount": 50})
    assert activate_now(stub, d.type("handle-large"), wait_ms=300) == []
    assert activate_now(stub, d.type("handle-small")) == []
    assert is_active(stub, pi)

    (incident,) = eventually(lambda: incidents_of(weir, pi), what="the incident")
    assert incident.error_type == "CONDITION_ERROR"
    assert incident.element_id == "split"
    assert "split" in incident.error_message

    stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=pi, variables='{"amount": 500}'), timeout=10)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    (job,) = activate(stub, d.type("handle-large"))
    assert variables_of(job) == {"amount": 500}
    complete(stub, job.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")
    # the incident is gone: resolving it again finds nothing
    err = rpc_error(stub.ResolveIncident, pb.ResolveIncidentRequest(incidentKey=incident.key))
    assert err.code() == grpc.StatusCode.NOT_FOUND


def test_parallel_fork_and_join(stub: Stub) -> None:
    d = deploy(stub, "parallel-join.bpmn")
    result = create_with_result(stub, d.pid(), {"order": 1})
    (a,) = activate(stub, d.type("branch-a"))
    (b,) = activate(stub, d.type("branch-b"))
    (c,) = activate(stub, d.type("branch-c"))
    assert len({a.elementInstanceKey, b.elementInstanceKey, c.elementInstanceKey}) == 3
    complete(stub, a.key, {"a": True})
    complete(stub, b.key, {"b": True})
    assert activate_now(stub, d.type("summarize"), wait_ms=300) == [], "the join waits for every branch"
    complete(stub, c.key, {"c": True})
    (summary,) = activate(stub, d.type("summarize"))
    assert variables_of(summary) == {"order": 1, "a": True, "b": True, "c": True}
    assert activate_now(stub, d.type("summarize"), wait_ms=300) == [], "the join must fire exactly once"
    complete(stub, summary.key, {"done": 1})
    assert json.loads(result.result(timeout=10).variables) == {"order": 1, "a": True, "b": True, "c": True, "done": 1}
    assert not is_active(stub, result.result().processInstanceKey)


# -- create with result --------------------------------------------------------------------------------------


def test_create_with_result_returns_worker_variables_and_only_fetched_ones(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")

    async def scenario() -> tuple[Any, Any]:
        channel = create_insecure_channel(grpc_address=weir.address)
        client = ZeebeClient(channel)
        worker = ZeebeWorker(channel)

        @worker.task(task_type=d.type("test"))
        async def handler(job: Job) -> dict:
            return {"total": job.variables["price"] * job.variables["qty"], "note": "computed"}

        work = asyncio.create_task(worker.work())
        try:
            full = await client.run_process_with_result(d.pid(), {"price": 5, "qty": 4}, timeout=10_000)
            fetched = await client.run_process_with_result(
                d.pid(), {"price": 2, "qty": 3}, timeout=10_000, variables_to_fetch=["total"]
            )
        finally:
            await worker.stop()
            work.cancel()
        return full, fetched

    full, fetched = asyncio.run(scenario())
    assert full.variables == {"price": 5, "qty": 4, "total": 20, "note": "computed"}
    assert full.bpmn_process_id == d.pid()
    assert fetched.variables == {"total": 6}
    assert fetched.process_instance_key != full.process_instance_key


def test_create_with_result_times_out_without_a_worker(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as info:
        create_with_result(stub, d.pid(), {"x": 1}, request_timeout=500).result(timeout=10)
    elapsed = time.monotonic() - started
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert 0.4 <= elapsed < 5
    # the instance itself was created and waits for its job
    (job,) = activate(stub, d.type("test"))
    assert variables_of(job) == {"x": 1}
    complete(stub, job.key)


# -- failing jobs, retries, back-off -------------------------------------------------------------------------


def test_fail_with_retries_then_exhausted_then_operator_recovers(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    pi = create(stub, d.pid(), {"attempt": 0})
    (job,) = activate(stub, d.type("test"))
    assert job.retries == 3
    stub.FailJob(pb.FailJobRequest(jobKey=job.key, retries=job.retries - 1, errorMessage="flaky"), timeout=10)
    (again,) = activate(stub, d.type("test"))
    assert again.key == job.key
    assert again.retries == 2
    stub.FailJob(
        pb.FailJobRequest(jobKey=job.key, retries=0, errorMessage="database down", variables='{"lastError": "db"}'),
        timeout=10,
    )
    assert activate_now(stub, d.type("test"), wait_ms=300) == []
    err = rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=job.key))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION

    (incident,) = eventually(lambda: incidents_of(weir, pi), what="the incident")
    assert incident.error_type == "JOB_NO_RETRIES"
    assert incident.error_message == "database down"
    assert incident.job_key == job.key

    stub.UpdateJobRetries(pb.UpdateJobRetriesRequest(jobKey=job.key, retries=2), timeout=10)
    assert activate_now(stub, d.type("test"), wait_ms=300) == [], "updating retries alone does not reactivate"
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    (revived,) = activate(stub, d.type("test"))
    assert revived.key == job.key
    assert revived.retries == 2
    assert variables_of(revived)["attempt"] == 0
    complete(stub, revived.key, {"attempt": 3})
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_fail_with_retry_backoff_delays_reactivation(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    create(stub, d.pid())
    (job,) = activate(stub, d.type("test"))
    failed_at = time.monotonic()
    stub.FailJob(pb.FailJobRequest(jobKey=job.key, retries=2, errorMessage="later", retryBackOff=1500), timeout=10)
    assert activate_now(stub, d.type("test"), wait_ms=800) == [], "not activatable during the back-off"
    (again,) = activate(stub, d.type("test"))
    assert time.monotonic() - failed_at >= 1.4
    assert again.key == job.key
    assert again.retries == 2
    complete(stub, again.key)


# -- BPMN errors ---------------------------------------------------------------------------------------------


def test_throw_error_caught_by_code(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "error-boundary.bpmn")

    async def scenario() -> tuple[Any, pb.ActivatedJob]:
        channel = create_insecure_channel(grpc_address=weir.address)
        client = ZeebeClient(channel)
        worker = ZeebeWorker(channel)

        @worker.task(task_type=d.type("charge"))
        async def charge(job: Job) -> dict:
            raise BusinessError("PAYMENT_FAILED")

        work = asyncio.create_task(worker.work())
        try:
            created = await client.run_process(d.pid("error-boundary"), {"amount": 10})
            # the worker keeps running until the error path's job shows up
            (invoice,) = await asyncio.to_thread(activate, stub, d.type("send-invoice"))
            return created, invoice
        finally:
            await worker.stop()
            work.cancel()

    created, invoice = asyncio.run(scenario())
    assert invoice.elementId == "send-invoice"
    assert invoice.processInstanceKey == created.process_instance_key
    complete(stub, invoice.key)
    eventually(lambda: not is_active(stub, created.process_instance_key), timeout=5, what="completion")


def test_throw_error_variables_visible_on_the_boundary_path(stub: Stub) -> None:
    d = deploy(stub, "error-boundary.bpmn")
    result = create_with_result(stub, d.pid("error-boundary"), {"amount": 10})
    (job,) = activate(stub, d.type("charge"))
    stub.ThrowError(
        pb.ThrowErrorRequest(
            jobKey=job.key, errorCode="PAYMENT_FAILED", errorMessage="card declined", variables='{"reason": "declined"}'
        ),
        timeout=10,
    )
    (invoice,) = activate(stub, d.type("send-invoice"))
    assert variables_of(invoice) == {"amount": 10, "reason": "declined"}
    err = rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=job.key))
    assert err.code() == grpc.StatusCode.NOT_FOUND, "the caught job ended with its task"
    complete(stub, invoice.key)
    assert json.loads(result.result(timeout=10).variables) == {"amount": 10, "reason": "declined"}


def test_throw_error_caught_by_catch_all_boundary(stub: Stub) -> None:
    d = deploy(stub, "error-boundary.bpmn")
    pi = create(stub, d.pid("error-boundary-catch-all"))
    (job,) = activate(stub, d.type("charge"))
    assert job.elementId == "catch-all-charge"
    stub.ThrowError(pb.ThrowErrorRequest(jobKey=job.key, errorCode="ANYTHING_AT_ALL"), timeout=10)
    (handler,) = activate(stub, d.type("handle-error"))
    assert handler.processInstanceKey == pi
    complete(stub, handler.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="completion")


def test_uncaught_throw_error_raises_an_incident(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "error-boundary.bpmn")
    pi = create(stub, d.pid("error-boundary"))
    (job,) = activate(stub, d.type("charge"))
    stub.ThrowError(pb.ThrowErrorRequest(jobKey=job.key, errorCode="NOT_MODELLED", errorMessage="oops"), timeout=10)
    assert activate_now(stub, d.type("send-invoice"), wait_ms=300) == []
    assert is_active(stub, pi)
    err = rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=job.key))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    (incident,) = eventually(lambda: incidents_of(weir, pi), what="the incident")
    assert incident.error_type == "UNHANDLED_ERROR_EVENT"
    assert "NOT_MODELLED" in incident.error_message
    assert incident.job_key == job.key
    assert is_active(stub, pi)
    # resolving gives the job back to workers (it still has retries)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    (again,) = activate(stub, d.type("charge"))
    assert again.key == job.key
    complete(stub, again.key, {"charged": True})
    eventually(lambda: not is_active(stub, pi), timeout=5, what="completion along the normal flow")
    assert activate_now(stub, d.type("send-invoice")) == []


def test_error_end_event_in_sub_process_caught_by_its_boundary(stub: Stub) -> None:
    d = deploy(stub, "error-subprocess.bpmn")
    invalid = create_with_result(stub, d.pid(), {"order": "bad"})
    valid = create_with_result(stub, d.pid(), {"order": "good"})
    checks = {variables_of(j)["order"]: j for j in activate(stub, d.type("check"), 2)}
    complete(stub, checks["bad"].key, {"ok": False})
    complete(stub, checks["good"].key, {"ok": True})
    (reject,) = activate(stub, d.type("reject"))
    (accept,) = activate(stub, d.type("accept"))
    assert variables_of(reject)["order"] == "bad"
    assert variables_of(accept)["order"] == "good"
    complete(stub, reject.key, {"rejected": True})
    complete(stub, accept.key, {"accepted": True})
    assert json.loads(invalid.result(timeout=10).variables) == {"order": "bad", "ok": False, "rejected": True}
    assert json.loads(valid.result(timeout=10).variables) == {"order": "good", "ok": True, "accepted": True}


def test_throw_error_inside_sub_process_caught_by_the_sub_process_boundary(stub: Stub) -> None:
    d = deploy(stub, "error-subprocess.bpmn")
    result = create_with_result(stub, d.pid(), {"order": "o-1"})
    (check,) = activate(stub, d.type("check"))
    stub.ThrowError(
        pb.ThrowErrorRequest(jobKey=check.key, errorCode="INVALID", variables='{"why": "thrown by worker"}'),
        timeout=10,
    )
    (reject,) = activate(stub, d.type("reject"))
    assert variables_of(reject) == {"order": "o-1", "why": "thrown by worker"}
    assert not is_active(stub, check.elementInstanceKey), "the task inside the sub-process was terminated"
    assert activate_now(stub, d.type("accept")) == []
    complete(stub, reject.key)
    assert json.loads(result.result(timeout=10).variables) == {"order": "o-1", "why": "thrown by worker"}


def test_uncaught_error_end_event_raises_an_incident(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "error-end-event.bpmn")
    pi = create(stub, d.pid())
    (job,) = activate(stub, d.type("check-order"))
    complete(stub, job.key)
    (incident,) = eventually(lambda: incidents_of(weir, pi), what="the incident")
    assert incident.error_type == "UNHANDLED_ERROR_EVENT"
    assert incident.element_id == "reject"
    assert "ORDER_REJECTED" in incident.error_message
    assert is_active(stub, pi)
    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=pi), timeout=10)
    assert not is_active(stub, pi)
    err = rpc_error(stub.ResolveIncident, pb.ResolveIncidentRequest(incidentKey=incident.key))
    assert err.code() == grpc.StatusCode.NOT_FOUND, "cancelling the instance resolved its incident"


def test_parallel_join_survives_a_restart(fresh_weir: WeirProcess, fresh_stub: Stub) -> None:
    stub = fresh_stub
    d = deploy(stub, "parallel-join.bpmn")
    pi = create(stub, d.pid())
    (a,) = activate(stub, d.type("branch-a"))
    (b,) = activate(stub, d.type("branch-b"))
    complete(stub, a.key)
    fresh_weir.restart()
    (c,) = activate(stub, d.type("branch-c"))
    complete(stub, b.key)
    assert activate_now(stub, d.type("summarize"), wait_ms=300) == []
    complete(stub, c.key)
    (summary,) = activate(stub, d.type("summarize"))
    assert summary.processInstanceKey == pi
    assert activate_now(stub, d.type("summarize"), wait_ms=300) == []
    complete(stub, summary.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="completion")


# -- job timeouts --------------------------------------------------------------------------------------------


def test_job_times_out_and_is_activated_again(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    create(stub, d.pid())
    (first,) = activate(stub, d.type("test"), timeout_ms=500, worker="slow")
    assert first.worker == "slow"
    now_ms = time.time() * 1000
    assert now_ms - 2000 < first.deadline <= now_ms + 1000
    assert activate_now(stub, d.type("test")) == [], "not activatable before the deadline"
    (second,) = activate(stub, d.type("test"), timeout_ms=60_000, worker="fast")
    assert second.key == first.key
    assert second.worker == "fast"
    assert second.deadline >= first.deadline + 50_000
    complete(stub, second.key)


def test_update_job_retries_on_an_active_job(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    create(stub, d.pid())
    (job,) = activate(stub, d.type("test"), timeout_ms=300)
    stub.UpdateJobRetries(pb.UpdateJobRetriesRequest(jobKey=job.key, retries=7), timeout=10)
    (again,) = activate(stub, d.type("test"))  # after the short timeout
    assert (again.key, again.retries) == (job.key, 7)
    complete(stub, again.key)


def test_update_job_timeout_extends_the_deadline(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    create(stub, d.pid())
    (job,) = activate(stub, d.type("test"), timeout_ms=600)
    stub.UpdateJobTimeout(pb.UpdateJobTimeoutRequest(jobKey=job.key, timeout=30_000), timeout=10)
    assert activate_now(stub, d.type("test"), wait_ms=1200) == [], "the extended deadline has not passed"
    complete(stub, job.key)
    err = rpc_error(stub.UpdateJobTimeout, pb.UpdateJobTimeoutRequest(jobKey=job.key, timeout=1000))
    assert err.code() == grpc.StatusCode.NOT_FOUND


# -- cancel and variables ------------------------------------------------------------------------------------


def test_cancel_running_instance(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    pi = create(stub, d.pid())
    (job,) = activate(stub, d.type("test"))
    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=pi), timeout=10)
    err = rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=job.key))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert str(job.key) in err.details()
    err = rpc_error(stub.CancelProcessInstance, pb.CancelProcessInstanceRequest(processInstanceKey=pi))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert not is_active(stub, pi)


def test_cancel_removes_jobs_not_yet_activated(stub: Stub) -> None:
    d = deploy(stub, "two-tasks.bpmn")
    pi = create(stub, d.pid())
    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=pi), timeout=10)
    assert activate_now(stub, d.type("prepare"), wait_ms=200) == [], "a cancelled instance's job is gone"


def test_cancel_answers_a_waiting_create_with_result(stub: Stub) -> None:
    d = deploy(stub, "error-subprocess.bpmn")
    pending = create_with_result(stub, d.pid(), {"order": "x"})
    (check,) = activate(stub, d.type("check"))
    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=check.processInstanceKey))
    with pytest.raises(grpc.RpcError) as info:
        pending.result(timeout=5)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "terminated" in info.value.details()
    assert not is_active(stub, check.elementInstanceKey)
    err = rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=check.key))
    assert err.code() == grpc.StatusCode.NOT_FOUND


def test_set_variables_local_and_propagating(stub: Stub) -> None:
    d = deploy(stub, "two-tasks.bpmn")
    pi = create(stub, d.pid(), {"root": 1})
    (prepare,) = activate(stub, d.type("prepare"))
    task_scope = prepare.elementInstanceKey

    def set_vars(key: int, doc: dict[str, Any], local: bool) -> int:
        req = pb.SetVariablesRequest(elementInstanceKey=key, variables=json.dumps(doc), local=local)
        return stub.SetVariables(req, timeout=10).key

    k1 = set_vars(task_scope, {"onlyHere": "task", "shadow": "inner"}, local=True)
    k2 = set_vars(task_scope, {"upward": "root-level", "shadow": "updated-inner"}, local=False)
    k3 = set_vars(pi, {"root": 2, "shadow": "outer"}, local=False)
    assert len({k1, k2, k3}) == 3

    stub.FailJob(pb.FailJobRequest(jobKey=prepare.key, retries=2), timeout=10)
    (again,) = activate(stub, d.type("prepare"))
    assert variables_of(again) == {
        "root": 2,
        "onlyHere": "task",
        "shadow": "updated-inner",  # the local variable shadows the root one and took the propagated update
        "upward": "root-level",
    }
    complete(stub, again.key)
    (ship,) = activate(stub, d.type("ship"))
    assert variables_of(ship) == {"root": 2, "upward": "root-level", "shadow": "outer"}
    err = rpc_error(stub.SetVariables, pb.SetVariablesRequest(elementInstanceKey=task_scope, variables="{}"))
    assert err.code() == grpc.StatusCode.NOT_FOUND, "the completed task's scope is gone"
    complete(stub, ship.key)


# -- mappings, headers, other elements -----------------------------------------------------------------------


def test_input_output_mappings_and_headers(stub: Stub) -> None:
    d = deploy(stub, "io-mapping.bpmn")
    order = {"items": ["apple", "pear"], "customer": {"id": "c-9", "name": "Ada"}}
    result = create_with_result(stub, d.pid(), {"order": order, "maxRetries": 7})
    (job,) = activate(stub, d.type("reserve-stock"))
    assert job.retries == 7
    assert json.loads(job.customHeaders) == {"priority": "high", "sla": "PT1H"}
    seen = variables_of(job)
    assert seen["items"] == ["apple", "pear"]
    assert seen["customerId"] == "c-9"
    assert seen["warehouse"] == "warehouse-1"
    complete(stub, job.key, {"reservation": {"id": "R-1", "items": [1, 2, 3]}})
    final = json.loads(result.result(timeout=10).variables)
    assert final == {
        "order": {**order, "reservedCount": 3},
        "maxRetries": 7,
        "reservationId": "R-1",
    }, "only output mappings reach the process scope"


def test_pass_through_elements_complete(stub: Stub) -> None:
    d = deploy(stub, "pass-through.bpmn")
    response = create_with_result(stub, d.pid(), {"k": "v"}).result(timeout=10)
    assert json.loads(response.variables) == {"k": "v"}
    assert not is_active(stub, response.processInstanceKey)


def test_user_task_is_a_job_of_the_user_task_type(stub: Stub) -> None:
    d = deploy(stub, "user-task.bpmn")
    result = create_with_result(stub, d.pid(), {"approvers": ["ann", "bob"]})
    (job,) = activate(stub, "io.camunda.zeebe:userTask")
    assert job.bpmnProcessId == d.pid()
    assert job.elementId == "review"
    headers = json.loads(job.customHeaders)
    assert headers["department"] == "legal"
    assert headers.get("io.camunda.zeebe:assignee") == "demo"
    complete(stub, job.key, {"approved": True})
    assert json.loads(result.result(timeout=10).variables) == {"approvers": ["ann", "bob"], "approved": True}


# -- activation: long polling and streaming ------------------------------------------------------------------


def test_long_poll_returns_promptly_when_a_job_is_created(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    request = pb.ActivateJobsRequest(
        type=d.type("test"), worker="poller", timeout=30_000, maxJobsToActivate=5, requestTimeout=8_000
    )
    results: list[tuple[list[pb.ActivatedJob], float]] = []

    def poll() -> None:
        jobs = [j for r in stub.ActivateJobs(request, timeout=20) for j in r.jobs]
        results.append((jobs, time.monotonic()))

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.5)  # let the request park
    created_at = time.monotonic()
    pi = create(stub, d.pid(), {"n": 1})
    poller.join(timeout=15)
    ((jobs, returned_at),) = results
    assert [j.processInstanceKey for j in jobs] == [pi]
    assert returned_at - created_at < 2.0, "a parked poll must wake when a job is created"
    complete(stub, jobs[0].key)


def test_empty_long_poll_completes_ok_after_request_timeout(stub: Stub) -> None:
    started = time.monotonic()
    responses = list(
        stub.ActivateJobs(
            pb.ActivateJobsRequest(
                type=f"nobody-{uuid.uuid4().hex[:8]}", worker="w", timeout=1000, maxJobsToActivate=1, requestTimeout=700
            ),
            timeout=10,
        )
    )
    elapsed = time.monotonic() - started
    assert [j for r in responses for j in r.jobs] == []
    assert 0.6 <= elapsed < 3.0


def test_max_jobs_to_activate_is_respected(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    keys = {create(stub, d.pid(), {"i": i}) for i in range(5)}
    first = activate_now(stub, d.type("test"), max_jobs=2, wait_ms=2000)
    assert len(first) == 2
    rest = activate(stub, d.type("test"), 3)
    assert {j.processInstanceKey for j in first + rest} == keys
    assert activate_now(stub, d.type("test")) == []
    for job in first + rest:
        complete(stub, job.key)


def test_stream_activated_jobs_pushes_new_jobs(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    stream = stub.StreamActivatedJobs(
        pb.StreamActivatedJobsRequest(type=d.type("test"), worker="streamer", timeout=30_000, fetchVariable=["i"]),
        timeout=20,
    )
    received: list[pb.ActivatedJob] = []

    def consume() -> None:
        for job in stream:
            received.append(job)
            if len(received) == 3:
                return

    consumer = threading.Thread(target=consume)
    consumer.start()
    time.sleep(0.5)  # let the stream register
    results = [create_with_result(stub, d.pid(), {"i": i, "other": "hidden"}) for i in range(3)]
    consumer.join(timeout=10)
    stream.cancel()
    assert len(received) == 3
    assert sorted(variables_of(j)["i"] for j in received) == [0, 1, 2]
    assert all(variables_of(j) == {"i": variables_of(j)["i"]} for j in received), "only fetched variables"
    assert {j.worker for j in received} == {"streamer"}
    for job in received:
        complete(stub, job.key, {"done": True})
    for r in results:
        assert json.loads(r.result(timeout=10).variables)["done"] is True


# -- deployments ---------------------------------------------------------------------------------------------


def test_redeploy_versions_and_create_by_version_or_key(stub: Stub) -> None:
    suffix = uuid.uuid4().hex[:8]
    first = deploy(stub, "one-task.bpmn", suffix)
    same = deploy(stub, "one-task.bpmn", suffix)
    (p1,) = [d.process for d in first.response.deployments]
    (p1_again,) = [d.process for d in same.response.deployments]
    assert (
        (p1_again.version, p1_again.processDefinitionKey)
        == (p1.version, p1.processDefinitionKey)
        == (1, p1.processDefinitionKey)
    )
    assert same.response.key != first.response.key

    content, _, _ = unique_copy("one-task.bpmn", suffix)
    changed = content.replace(b'name="Task"', b'name="Task, renamed"')
    assert changed != content
    response = stub.DeployResource(
        pb.DeployResourceRequest(resources=[pb.Resource(name=f"{suffix}-one-task.bpmn", content=changed)]), timeout=10
    )
    (p2,) = [d.process for d in response.deployments]
    assert p2.bpmnProcessId == p1.bpmnProcessId
    assert p2.version == 2
    assert p2.processDefinitionKey != p1.processDefinitionKey

    pid = p1.bpmnProcessId
    latest = stub.CreateProcessInstance(pb.CreateProcessInstanceRequest(bpmnProcessId=pid, version=-1), timeout=10)
    v1 = stub.CreateProcessInstance(pb.CreateProcessInstanceRequest(bpmnProcessId=pid, version=1), timeout=10)
    by_key = stub.CreateProcessInstance(
        pb.CreateProcessInstanceRequest(processDefinitionKey=p1.processDefinitionKey), timeout=10
    )
    assert (latest.version, latest.processDefinitionKey) == (2, p2.processDefinitionKey)
    assert (v1.version, v1.processDefinitionKey) == (1, p1.processDefinitionKey)
    assert (by_key.version, by_key.processDefinitionKey, by_key.bpmnProcessId) == (1, p1.processDefinitionKey, pid)
    jobs = {j.processInstanceKey: j for j in activate(stub, first.type("test"), 3)}
    assert jobs[latest.processInstanceKey].processDefinitionVersion == 2
    assert jobs[v1.processInstanceKey].processDefinitionVersion == 1
    assert jobs[by_key.processInstanceKey].processDefinitionKey == p1.processDefinitionKey
    for job in jobs.values():
        complete(stub, job.key)


# -- cluster facing RPCs -------------------------------------------------------------------------------------


def test_topology_and_health(weir: WeirProcess, stub: Stub) -> None:
    topology = stub.Topology(pb.TopologyRequest(), timeout=10)
    assert topology.clusterSize == 1
    assert topology.partitionsCount == 1
    assert topology.replicationFactor == 1
    (broker,) = topology.brokers
    (partition,) = broker.partitions
    assert partition.partitionId == 1
    assert partition.role == pb.Partition.LEADER
    assert partition.health == pb.Partition.HEALTHY
    assert topology.gatewayVersion

    with grpc.insecure_channel(weir.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        answer = health.Check(health_pb2.HealthCheckRequest(service="gateway_protocol.Gateway"), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
        err = rpc_error(health.Check, health_pb2.HealthCheckRequest(service="no.such.Service"))
        assert err.code() == grpc.StatusCode.NOT_FOUND
