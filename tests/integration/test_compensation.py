"""Compensation against a real ``weir start``: handlers of completed activities run when a compensation throw or end
event is reached (for all of the scope or one ``activityRef``), inside sub-processes and event sub-processes, once per
completed instance of a multi-instance activity, with the compensated activity's variables; the throw event waits for
them; an activity that never completed is not compensated."""

from pyzeebe.proto import gateway_pb2 as pb

from broker.protocol.enums import CompensationSubscriptionIntent, ProcessInstanceIntent, RecordType, ValueType
from tests.harness import WeirProcess, eventually
from tests.integration.clients import (
    Stub,
    activate,
    activate_now,
    complete,
    create,
    create_with_result,
    deploy,
    is_active,
    logged_records,
    variables_of,
)

CSI = CompensationSubscriptionIntent


def nothing_of(stub: Stub, job_type: str) -> bool:
    return activate_now(stub, job_type, wait_ms=200) == []


def test_a_failed_payment_cancels_the_booking_with_the_booked_activitys_variables(stub: Stub) -> None:
    d = deploy(stub, "compensation-booking.bpmn")
    pi = create(stub, d.pid(), {"guest": "Ada"})
    (book,) = activate(stub, d.type("book"))
    assert variables_of(book)["reservation"] == "room for Ada"
    complete(stub, book.key, {"bookingId": "B-17"})
    (pay,) = activate(stub, d.type("pay"))
    stub.ThrowError(pb.ThrowErrorRequest(jobKey=pay.key, errorCode="payment-failed"), timeout=10)
    (cancel,) = activate(stub, d.type("cancel-booking"))
    variables = variables_of(cancel)
    assert variables["bookingId"] == "B-17"
    assert variables["reservation"] == "room for Ada"  # the booking task's local variable, kept for its handler
    assert nothing_of(stub, d.type("notify")), "the throw event waits for the handler"
    complete(stub, cancel.key, {"cancelled": True})
    (notify,) = activate(stub, d.type("notify"))
    assert variables_of(notify)["cancelled"] is True
    complete(stub, notify.key)
    eventually(lambda: not is_active(stub, pi), what="the instance to complete")


def test_a_paid_booking_is_never_compensated(stub: Stub) -> None:
    d = deploy(stub, "compensation-booking.bpmn")
    result = create_with_result(stub, d.pid(), {"guest": "Bob"})
    (book,) = activate(stub, d.type("book"))
    complete(stub, book.key)
    (pay,) = activate(stub, d.type("pay"))
    complete(stub, pay.key)
    result.result(timeout=10)
    assert nothing_of(stub, d.type("cancel-booking"))


def test_a_compensation_end_event_compensates_only_the_activities_that_completed(stub: Stub) -> None:
    d = deploy(stub, "compensation-end-event.bpmn")
    result = create_with_result(stub, d.pid(), {"skipB": True})
    (a,) = activate(stub, d.type("ce-a"))
    complete(stub, a.key)
    (undo_a,) = activate(stub, d.type("ce-undo-a"))
    assert nothing_of(stub, d.type("ce-undo-b")), "b never ran, so it is not compensated"
    complete(stub, undo_a.key)
    result.result(timeout=10)


def test_a_compensation_end_event_runs_all_handlers_at_once_and_waits_for_them(stub: Stub) -> None:
    d = deploy(stub, "compensation-end-event.bpmn")
    result = create_with_result(stub, d.pid(), {"skipB": False})
    for job_type in ("ce-a", "ce-b"):
        (job,) = activate(stub, d.type(job_type))
        complete(stub, job.key)
    (undo_a,) = activate(stub, d.type("ce-undo-a"))
    (undo_b,) = activate(stub, d.type("ce-undo-b"))
    complete(stub, undo_b.key)
    assert not result.done()
    complete(stub, undo_a.key)
    result.result(timeout=10)


def test_an_activity_ref_compensates_that_activity_only(stub: Stub) -> None:
    d = deploy(stub, "compensation-activity-ref.bpmn")
    pi = create(stub, d.pid())
    for job_type in ("ref-a", "ref-b"):
        (job,) = activate(stub, d.type(job_type))
        complete(stub, job.key)
    (undo_a,) = activate(stub, d.type("ref-undo-a"))
    complete(stub, undo_a.key)
    (after,) = activate(stub, d.type("ref-after"))
    assert nothing_of(stub, d.type("ref-undo-b"))
    complete(stub, after.key)
    eventually(lambda: not is_active(stub, pi), what="the instance to complete")


def test_inside_a_sub_process_and_from_outside_a_completed_one(stub: Stub) -> None:
    d = deploy(stub, "compensation-subprocess.bpmn")
    pi = create(stub, d.pid(), {"tripNo": 7})
    (flight,) = activate(stub, d.type("sub-flight"))
    complete(stub, flight.key, {"seat": "12A"})
    # the throw inside the sub-process compensates what completed in there
    (cancel_flight,) = activate(stub, d.type("sub-cancel-flight"))
    assert variables_of(cancel_flight)["tripName"] == "trip-7"
    complete(stub, cancel_flight.key)
    (hotel,) = activate(stub, d.type("sub-hotel"))
    complete(stub, hotel.key, {"room": 301})
    (review,) = activate(stub, d.type("sub-review"))
    complete(stub, review.key)
    # the sub-process completed; its hotel booking is compensated from the outer scope, with the sub-process's
    # and the hotel task's local variables
    (cancel_hotel,) = activate(stub, d.type("sub-cancel-hotel"))
    assert variables_of(cancel_hotel)["tripName"] == "trip-7"
    assert variables_of(cancel_hotel)["room"] == 301
    assert nothing_of(stub, d.type("sub-cancel-flight")), "the flight was compensated already"
    complete(stub, cancel_hotel.key)
    eventually(lambda: not is_active(stub, pi), what="the instance to complete")


def test_a_multi_instance_activity_is_compensated_once_and_a_multi_instance_handler_once_per_item(
    stub: Stub,
) -> None:
    d = deploy(stub, "compensation-multi-instance.bpmn")
    result = create_with_result(stub, d.pid(), {"items": ["x", "y", "z"]})
    for job in activate(stub, d.type("mi-charge"), 3):
        complete(stub, job.key)
    for _ in range(3):  # sequential
        (job,) = activate(stub, d.type("mi-notify"))
        complete(stub, job.key)
    # as in Zeebe, the boundary event belongs to the multi-instance body: its handler runs once for the body
    (retract,) = activate(stub, d.type("mi-retract"))
    assert nothing_of(stub, d.type("mi-retract"))
    # a handler that is multi-instance itself runs once per item of its own collection
    refunds = activate(stub, d.type("mi-refund"), 3)
    assert sorted((variables_of(j)["item"], variables_of(j)["loopCounter"]) for j in refunds) == [
        ("x", 1),
        ("y", 2),
        ("z", 3),
    ]
    assert nothing_of(stub, d.type("mi-refund"))
    for job in [*refunds, retract]:
        assert not result.done()
        complete(stub, job.key)
    result.result(timeout=10)


def test_a_throw_in_an_event_sub_process_compensates_the_enclosing_scope(stub: Stub) -> None:
    d = deploy(stub, "compensation-event-subprocess.bpmn")
    pi = create(stub, d.pid())
    (reserve,) = activate(stub, d.type("esp-reserve"))
    complete(stub, reserve.key, {"reservationId": 5})
    (ship,) = activate(stub, d.type("esp-ship"))
    stub.ThrowError(pb.ThrowErrorRequest(jobKey=ship.key, errorCode="abort"), timeout=10)
    (release,) = activate(stub, d.type("esp-release"))
    assert variables_of(release)["reservationId"] == 5
    complete(stub, release.key)
    eventually(lambda: not is_active(stub, pi), what="the instance to complete")


def test_subscription_records_follow_zeebes_lifecycle(fresh_weir: WeirProcess, fresh_stub: Stub) -> None:
    stub = fresh_stub
    d = deploy(stub, "compensation-end-event.bpmn")
    pi = create(stub, d.pid(), {"skipB": False})
    for job_type in ("ce-a", "ce-b"):
        (job,) = activate(stub, d.type(job_type))
        complete(stub, job.key)
    for job_type in ("ce-undo-a", "ce-undo-b"):
        (job,) = activate(stub, d.type(job_type))
        complete(stub, job.key)
    eventually(lambda: not is_active(stub, pi), what="the instance to complete")
    # an instance that completes without compensating drops its subscriptions
    d2 = deploy(stub, "compensation-booking.bpmn")
    pi2 = create(stub, d2.pid(), {"guest": "Cy"})
    for job_type in ("book", "pay"):
        (job,) = activate(stub, d2.type(job_type))
        complete(stub, job.key)
    eventually(lambda: not is_active(stub, pi2), what="the second instance to complete")
    fresh_weir.stop()
    records = [r for r in logged_records(fresh_weir) if r.record_type == RecordType.EVENT]
    subs = [r for r in records if r.value_type == ValueType.COMPENSATION_SUBSCRIPTION]
    first = [(CSI(r.intent), r.value["compensableActivityId"]) for r in subs if r.value["processInstanceKey"] == pi]
    assert first == [
        (CSI.CREATED, "a"),
        (CSI.CREATED, "b"),
        (CSI.TRIGGERED, "a"),
        (CSI.TRIGGERED, "b"),
        (CSI.COMPLETED, "a"),
        (CSI.COMPLETED, "b"),
    ]
    triggered = next(r for r in subs if r.intent == CSI.TRIGGERED)
    assert triggered.value["throwEventId"] == "compensate-all"
    assert triggered.value["compensationHandlerId"] == "undo-a"
    handler_activated = [
        r
        for r in records
        if r.value_type == ValueType.PROCESS_INSTANCE
        and r.intent == ProcessInstanceIntent.ELEMENT_ACTIVATED
        and r.value.get("elementId") == "undo-a"
        and r.value["processInstanceKey"] == pi
    ]
    assert handler_activated and handler_activated[0].value["bpmnEventType"] == "COMPENSATION"
    assert handler_activated[0].key == triggered.value["compensationHandlerInstanceKey"]
    second = [(CSI(r.intent), r.value["compensableActivityId"]) for r in subs if r.value["processInstanceKey"] == pi2]
    assert second == [(CSI.CREATED, "book"), (CSI.DELETED, "book")]


def test_each_instance_of_a_multi_instance_sub_process_is_compensated_with_its_own_variables(stub: Stub) -> None:
    d = deploy(stub, "compensation-multi-instance-subprocess.bpmn")
    result = create_with_result(stub, d.pid(), {"items": ["a", "b", "c"]})
    for job in activate(stub, d.type("mis-reserve"), 3):
        complete(stub, job.key)
    (review,) = activate(stub, d.type("mis-review"))
    complete(stub, review.key)
    # the reservation completed three times, once per inner instance: its handler runs three times, each with the
    # inner instance's input element and loop counter
    releases = activate(stub, d.type("mis-release"), 3)
    assert sorted((variables_of(j)["item"], variables_of(j)["loopCounter"]) for j in releases) == [
        ("a", 1),
        ("b", 2),
        ("c", 3),
    ]
    assert nothing_of(stub, d.type("mis-release"))
    for job in releases:
        assert not result.done(), "the throw event waits for every handler"
        complete(stub, job.key)
    result.result(timeout=10)


def test_a_throw_inside_an_inner_instance_compensates_that_instance_only(stub: Stub) -> None:
    d = deploy(stub, "compensation-multi-instance-subprocess.bpmn")
    pi = create(stub, d.pid(), {"items": ["a", "rejected", "c"]})
    for job in activate(stub, d.type("mis-reserve"), 3):
        complete(stub, job.key)
    (own,) = activate(stub, d.type("mis-release"))
    assert variables_of(own)["item"] == "rejected"
    assert nothing_of(stub, d.type("mis-release")), "the other instances' reservations stay"
    assert nothing_of(stub, d.type("mis-review")), "the body waits for the compensating instance"
    complete(stub, own.key)
    (review,) = activate(stub, d.type("mis-review"))
    complete(stub, review.key)
    # from outside, only what was not compensated yet
    releases = activate(stub, d.type("mis-release"), 2)
    assert sorted(variables_of(j)["item"] for j in releases) == ["a", "c"]
    assert nothing_of(stub, d.type("mis-release"))
    for job in releases:
        complete(stub, job.key)
    eventually(lambda: not is_active(stub, pi), what="the instance to complete")
