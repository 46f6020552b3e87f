"""Cron cycles in timer events through a real ``weir start``, as a Zeebe client sees them."""

import time
import uuid
from pathlib import Path

import grpc
from pyzeebe.proto import gateway_pb2 as pb

from broker.protocol.enums import RecordType, TimerIntent, ValueType
from tests.harness import WeirProcess
from tests.integration.clients import (
    Deployed,
    Stub,
    activate_now,
    complete,
    create,
    is_active,
    logged_records,
    rpc_error,
    unique_copy,
)
from tests.integration.test_waiting import jobs_within

FIXTURE = "timer-reminder.bpmn"  # a service task with a non-interrupting timer boundary event "remind"


def deploy_cycle(stub: Stub, cycle: str) -> Deployed:
    """A unique copy of the reminder process whose boundary timer cycle is ``cycle``."""
    suffix = uuid.uuid4().hex[:8]
    content, process_ids, job_types = unique_copy(FIXTURE, suffix)
    text = content.decode().replace(
        "<bpmn:timeCycle>R/PT1S</bpmn:timeCycle>", f"<bpmn:timeCycle>{cycle}</bpmn:timeCycle>"
    )
    request = pb.DeployResourceRequest(
        resources=[pb.Resource(name=f"{suffix}-{Path(FIXTURE).name}", content=text.encode())]
    )
    return Deployed(suffix, process_ids, job_types, stub.DeployResource(request, timeout=10))


def test_a_cron_boundary_timer_fires_every_second_while_the_task_runs(stub: Stub) -> None:
    d = deploy_cycle(stub, "*/1 * * * * *")
    create(stub, d.pid())
    (work,) = jobs_within(stub, d.type("long-work"), 1)
    reminders = jobs_within(stub, d.type("send-reminder"), 2, timeout=6)
    assert len(reminders) >= 2
    assert len({r.processInstanceKey for r in reminders}) == 1, "the reminders are paths of the one instance"
    assert is_active(stub, work.elementInstanceKey), "a non-interrupting timer leaves the task running"
    complete(stub, work.key)
    time.sleep(1.5)
    assert activate_now(stub, d.type("send-reminder")) == [], "the cycle ends with the task"


def test_an_invalid_cron_cycle_is_refused_naming_the_element(stub: Stub) -> None:
    suffix = uuid.uuid4().hex[:8]
    content, _, _ = unique_copy(FIXTURE, suffix)
    text = content.decode().replace("R/PT1S", "0 0 9-17 * * FOO")
    request = pb.DeployResourceRequest(resources=[pb.Resource(name=f"{suffix}-bad-cron.bpmn", content=text.encode())])
    error = rpc_error(stub.DeployResource, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    message = error.details()
    assert f"{suffix}-bad-cron.bpmn" in message
    assert "'remind': Invalid cron expression '0 0 9-17 * * FOO' for timer: day-of-week field 'FOO'" in message
    missing = rpc_error(
        stub.CreateProcessInstance,
        pb.CreateProcessInstanceRequest(bpmnProcessId=f"timer-reminder-{suffix}", version=-1),
    )
    assert missing.code() == grpc.StatusCode.NOT_FOUND


def test_a_cron_timer_keeps_firing_after_a_restart(fresh_weir: WeirProcess, fresh_stub: Stub) -> None:
    d = deploy_cycle(fresh_stub, "*/1 * * * * *")
    create(fresh_stub, d.pid())
    jobs_within(fresh_stub, d.type("send-reminder"), 1, timeout=5)
    fresh_weir.stop()
    fresh_weir.start()
    jobs_within(fresh_stub, d.type("send-reminder"), 2, timeout=6)
    fresh_weir.stop()
    created = [
        r.value
        for r in logged_records(fresh_weir)
        if r.value_type == ValueType.TIMER and r.record_type == RecordType.EVENT and r.intent == TimerIntent.CREATED
    ]
    assert len(created) >= 3
    assert all(v["cron"] == "*/1 * * * * *" and v["repetitions"] == -1 for v in created)
    assert all(v["dueDate"] % 1000 == 0 for v in created), "cron due dates fall on whole seconds"
    due_dates = [v["dueDate"] for v in created]
    assert due_dates == sorted(set(due_dates)), "each next due date is after the previous one"
