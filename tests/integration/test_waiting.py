"""Waiting states through a real ``weir start``: timers and messages, as Zeebe clients see them."""

from __future__ import annotations

import json
import time
import uuid

import grpc
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import WeirProcess, eventually
from tests.integration.clients import (
    Stub,
    activate_now,
    complete,
    create,
    deploy,
    logged_records,
    rpc_error,
)


def publish(stub: Stub, name: str, key: str, *, ttl: int = 60_000, message_id: str = "", variables: dict | None = None):
    request = pb.PublishMessageRequest(
        name=name, correlationKey=key, timeToLive=ttl, messageId=message_id, variables=json.dumps(variables or {})
    )
    return stub.PublishMessage(request, timeout=10)


def jobs_within(stub: Stub, job_type: str, expected: int, timeout: float = 5.0) -> list[pb.ActivatedJob]:
    found: list[pb.ActivatedJob] = []

    def enough() -> bool:
        found.extend(activate_now(stub, job_type))
        return len(found) >= expected

    eventually(enough, timeout=timeout, what=f"{expected} job(s) of type {job_type}")
    return found


def test_payment_message_continues_the_order(stub: Stub) -> None:
    d = deploy(stub, "order-payment.bpmn")
    order = f"order-{uuid.uuid4().hex[:8]}"
    create(stub, d.pid(), {"orderId": order, "paymentTimeout": "PT30S"})
    time.sleep(0.3)
    reply = publish(stub, "payment", order, variables={"amount": 42})
    assert reply.key > 0
    (ship,) = jobs_within(stub, d.type("ship"), 1)
    assert json.loads(ship.variables)["amount"] == 42
    assert activate_now(stub, d.type("cancel-order")) == []


def test_order_times_out_without_payment(stub: Stub) -> None:
    d = deploy(stub, "order-payment.bpmn")
    order = f"order-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    create(stub, d.pid(), {"orderId": order, "paymentTimeout": "PT1S"})
    jobs_within(stub, d.type("cancel-order"), 1)
    assert time.monotonic() - started >= 0.9, "the timeout must never fire early"
    publish(stub, "payment", order, ttl=0)  # too late: nobody waits any more
    time.sleep(0.3)
    assert activate_now(stub, d.type("ship")) == []


def test_a_message_published_first_correlates_within_its_ttl_only(stub: Stub) -> None:
    d = deploy(stub, "order-payment.bpmn")
    early, late = f"early-{uuid.uuid4().hex[:6]}", f"late-{uuid.uuid4().hex[:6]}"
    publish(stub, "payment", early, ttl=10_000)
    publish(stub, "payment", late, ttl=300)
    time.sleep(0.8)  # the late one's time to live is over
    create(stub, d.pid(), {"orderId": early, "paymentTimeout": "PT1M"})
    create(stub, d.pid(), {"orderId": late, "paymentTimeout": "PT1M"})
    shipped = jobs_within(stub, d.type("ship"), 1)
    time.sleep(0.3)
    shipped += activate_now(stub, d.type("ship"))
    assert [json.loads(j.variables)["orderId"] for j in shipped] == [early]


def test_duplicate_message_id_is_already_exists(stub: Stub) -> None:
    key = f"dup-{uuid.uuid4().hex[:8]}"
    publish(stub, "payment", key, message_id="m-1")
    error = rpc_error(
        stub.PublishMessage, pb.PublishMessageRequest(name="payment", correlationKey=key, messageId="m-1")
    )
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS
    publish(stub, "payment", key, message_id="m-2")


def test_non_interrupting_timer_fires_repeatedly_while_the_task_runs(stub: Stub) -> None:
    d = deploy(stub, "timer-reminder.bpmn")
    create(stub, d.pid())
    (work,) = jobs_within(stub, d.type("long-work"), 1)
    reminders = jobs_within(stub, d.type("send-reminder"), 2, timeout=6)
    assert len(reminders) >= 2
    complete(stub, work.key)
    time.sleep(1.5)
    assert activate_now(stub, d.type("send-reminder")) == [], "the cycle ends with the task"


def test_timer_start_event_creates_instances(stub: Stub) -> None:
    d = deploy(stub, "start-events/timer-start.bpmn")
    jobs = jobs_within(stub, d.type("scheduled-work"), 3, timeout=8)
    assert len({j.processInstanceKey for j in jobs}) == 3


def test_pending_timers_fire_once_after_a_restart_and_never_early(fresh_weir: WeirProcess, fresh_stub: Stub) -> None:
    d = deploy(fresh_stub, "timer-catch.bpmn")
    started = time.monotonic()
    keys = {create(fresh_stub, d.pid(), {"delay": "PT3S"}) for _ in range(3)}
    fresh_weir.stop()
    fresh_weir.start()
    jobs = jobs_within(fresh_stub, d.type("after-wait"), 3, timeout=10)
    assert time.monotonic() - started >= 2.9
    assert {j.processInstanceKey for j in jobs} == keys
    time.sleep(0.5)
    assert activate_now(fresh_stub, d.type("after-wait")) == []
    fresh_weir.stop()
    triggered = [r for r in logged_records(fresh_weir) if r.value_type.name == "TIMER" and r.intent == 2]
    assert len([r for r in triggered if r.record_type.name == "EVENT"]) == 3
