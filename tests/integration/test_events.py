"""Signals, event-based gateways, event sub-processes, error and terminate end events through a real ``weir start``."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import grpc
from pyzeebe.proto import gateway_pb2 as pb

from tests.integration.clients import (
    Deployed,
    Stub,
    activate_now,
    complete,
    create,
    deploy,
    is_active,
    rpc_error,
    unique_copy,
    variables_of,
)
from tests.integration.test_waiting import jobs_within, publish


def deploy_with_signals(stub: Stub, fixture: str, signals: dict[str, str]) -> Deployed:
    """Deploy a unique copy whose signal names are replaced too (signals reach every instance on the broker)."""
    suffix = uuid.uuid4().hex[:8]
    content, process_ids, job_types = unique_copy(fixture, suffix)
    text = content.decode()
    for old, new in signals.items():
        text = text.replace(f'<bpmn:signal id="Signal_{old}" name="', f'<bpmn:signal id="Signal_{old}" name="{new}-')
    response = stub.DeployResource(
        pb.DeployResourceRequest(resources=[pb.Resource(name=f"{suffix}-{Path(fixture).name}", content=text.encode())]),
        timeout=10,
    )
    return Deployed(suffix, process_ids, job_types, response)


def broadcast(stub: Stub, name: str, variables: dict | None = None) -> pb.BroadcastSignalResponse:
    request = pb.BroadcastSignalRequest(signalName=name, variables=json.dumps(variables or {}))
    return stub.BroadcastSignal(request, timeout=10)


def test_signal_broadcast_starts_instances_and_wakes_waiting_ones(stub: Stub) -> None:
    unique = uuid.uuid4().hex[:8]
    starter = deploy_with_signals(stub, "events/signal-start.bpmn", {"go": unique})
    catcher = deploy_with_signals(stub, "signal-catch.bpmn", {"wake": unique})
    waiting = {create(stub, catcher.pid(), {"i": i}) for i in range(2)}
    time.sleep(0.3)
    reply = broadcast(stub, f"{unique}-wake-up", {"reason": "morning"})
    assert reply.key > 0
    woken = jobs_within(stub, catcher.type("after-signal"), 2)
    assert {j.processInstanceKey for j in woken} == waiting
    assert all(variables_of(j)["reason"] == "morning" for j in woken)
    broadcast(stub, f"{unique}-go", {"batch": 7})
    (work,) = jobs_within(stub, starter.type("signalled-work"), 1)
    assert variables_of(work)["batch"] == 7
    time.sleep(0.3)
    assert activate_now(stub, starter.type("signalled-work")) == [], "one broadcast starts one instance"


def test_broadcast_without_a_name_is_invalid(stub: Stub) -> None:
    error = rpc_error(stub.BroadcastSignal, pb.BroadcastSignalRequest(signalName=""))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_event_based_gateway_first_event_wins(stub: Stub) -> None:
    d = deploy_with_signals(stub, "event-gateway.bpmn", {"recall": uuid.uuid4().hex[:8]})
    answered, timed_out = f"answered-{uuid.uuid4().hex[:6]}", f"timed-out-{uuid.uuid4().hex[:6]}"
    create(stub, d.pid(), {"requestId": answered, "timeout": "PT1S"})
    late = create(stub, d.pid(), {"requestId": timed_out, "timeout": "PT0.3S"})
    time.sleep(0.2)
    publish(stub, "answer", answered, variables={"answer": "yes"})
    (answer,) = jobs_within(stub, d.type("on-answer"), 1)
    assert variables_of(answer)["answer"] == "yes"
    (timeout,) = jobs_within(stub, d.type("on-timeout"), 1)
    assert timeout.processInstanceKey == late
    publish(stub, "answer", timed_out, ttl=0)
    time.sleep(1.2)  # the answered instance's timer would have fired by now
    assert activate_now(stub, d.type("on-timeout")) == []
    assert activate_now(stub, d.type("on-answer")) == []


def test_event_sub_processes_interrupt_or_run_alongside(stub: Stub) -> None:
    d = deploy(stub, "event-subprocess.bpmn")
    order = f"order-{uuid.uuid4().hex[:8]}"
    key = create(stub, d.pid(), {"orderId": order, "remindEvery": "R2/PT0.4S"})
    (main,) = jobs_within(stub, d.type("main-work"), 1)
    reminders = jobs_within(stub, d.type("send-reminder-esp"), 2)
    assert {r.processInstanceKey for r in reminders} == {key}
    assert is_active(stub, main.elementInstanceKey), "a non-interrupting event sub-process leaves the task alone"
    publish(stub, "cancel-order", order, variables={"cancelledBy": "customer"})
    (cancel,) = jobs_within(stub, d.type("handle-cancel"), 1)
    assert variables_of(cancel)["cancelledBy"] == "customer"
    assert rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=main.key)).code() == grpc.StatusCode.NOT_FOUND
    complete(stub, cancel.key)
    for reminder in reminders:
        assert rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=reminder.key)).code() == (
            grpc.StatusCode.NOT_FOUND
        )
    assert not is_active(stub, key)


def test_error_end_event_caught_two_scopes_up_by_an_error_event_sub_process(stub: Stub) -> None:
    d = deploy(stub, "error-event-subprocess.bpmn")
    key = create(stub, d.pid())
    (validate,) = jobs_within(stub, d.type("validate"), 1)
    complete(stub, validate.key, {"ok": False})
    (handle,) = jobs_within(stub, d.type("handle-invalid"), 1)
    assert handle.processInstanceKey == key
    complete(stub, handle.key)
    time.sleep(0.2)
    assert activate_now(stub, d.type("accepted")) == []
    assert not is_active(stub, key)


def test_terminate_end_event_ends_the_parallel_branch(stub: Stub) -> None:
    d = deploy(stub, "terminate-end.bpmn")
    key = create(stub, d.pid())
    (slow,) = jobs_within(stub, d.type("slow-branch"), 1)
    (fast,) = jobs_within(stub, d.type("fast-branch"), 1)
    complete(stub, fast.key)
    time.sleep(0.2)
    assert not is_active(stub, key)
    assert rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=slow.key)).code() == grpc.StatusCode.NOT_FOUND
