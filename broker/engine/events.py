"""Waiting states on the instance side: opening and closing timer, message and signal subscriptions, and firing them.

An element that waits (catch event, receive task) subscribes for itself; an activity subscribes for its boundary
events; an event-based gateway for the catch events after it; a scope (process, sub-process, event sub-process) for
the start events of its event sub-processes. Subscriptions belong to the element instance that opened them and are
closed when it completes or terminates. Firing a subscription completes the catch element, completes the gateway
towards the winning event, activates a boundary event (interrupting ones first terminate the activity they are
attached to) or starts an event sub-process (interrupting ones first terminate the scope's other children).

Errors and escalations are not subscribed to: :func:`find_catch` searches the scopes outwards for the event that
catches one, asking each element kind's processor how its instances take part (a multi-instance body shares its
element with its instances; an event sub-process hides its siblings).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from broker.engine import behaviors as b
from broker.engine import timers
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements.lookup import processor_of
from broker.engine.expressions import ExpressionFailure
from broker.engine.partitioning import subscription_partition
from broker.protocol.entity_values import TimerValue
from broker.protocol.enums import (
    ProcessEventIntent,
    ProcessInstanceIntent,
    ProcessMessageSubscriptionIntent,
    RejectionType,
    SignalSubscriptionIntent,
    TimerIntent,
    ValueType,
)
from broker.protocol.record import Record
from broker.state.element_instance import ElementInstance

PI = ProcessInstanceIntent
PMS = ProcessMessageSubscriptionIntent

# -- opening -------------------------------------------------------------------------------------------------


def open_subscriptions(ctx: ProcessingContext, targets: Sequence[bpmn.Element], inst: ElementInstance) -> str | None:
    """Open the timer, message and signal subscriptions of ``inst`` for ``targets`` (the events its element's kind
    waits for); a failure message (nothing opened) or None.

    All expressions are evaluated before anything is written, so a failure leaves no half-opened subscriptions
    behind and resolving the incident simply runs the activation again.
    """
    targets = [t for t in targets if t.timer is not None or t.message is not None or t.signal_name is not None]
    if (
        not targets
        or ctx.state.timers.of_owner(inst.key)
        or ctx.state.process_message_subscriptions.of_element(inst.key)
        or ctx.state.signal_subscriptions.of_owner(inst.key)
    ):
        return None  # nothing to open, or opened already by an earlier attempt of this activation
    planned = plan_subscriptions(ctx, targets, inst.key)
    if isinstance(planned, str):
        return planned
    write_subscriptions(ctx, inst, planned)
    return None


PlannedSubscription = tuple[bpmn.Element, Any]
"""A catch event and what subscribing it takes: a timer schedule, (message name, correlation key) or a signal."""


def plan_subscriptions(
    ctx: ProcessingContext, targets: list[bpmn.Element], scope_key: int
) -> list[PlannedSubscription] | str:
    """Evaluate what subscribing ``targets`` from ``scope_key`` takes, writing nothing; a failure message or the
    plan for :func:`write_subscriptions` (a migration plans before it writes anything, so it can still refuse)."""
    planned: list[PlannedSubscription] = []
    for target in targets:
        plan: Any
        if target.timer is not None:
            plan = _plan_timer(ctx, target.timer, scope_key)
        elif target.message is not None:
            plan = _plan_message(ctx, target.message, scope_key)
        elif target.signal_name is not None:
            plan = _plan_signal(ctx, target, scope_key)
        else:
            continue
        if isinstance(plan, str):
            return plan
        planned.append((target, plan))
    return planned


def planned_message_name(plan: PlannedSubscription) -> str | None:
    """The message name a planned subscription waits for (None: a timer or signal)."""
    return plan[1][0] if isinstance(plan[1], tuple) else None


def write_subscriptions(ctx: ProcessingContext, inst: ElementInstance, planned: list[PlannedSubscription]) -> None:
    """Open the subscriptions :func:`plan_subscriptions` planned, owned by ``inst``."""
    v = inst.value
    for target, plan in planned:
        if isinstance(plan, timers.Schedule):
            create_timer(ctx, plan, target.id, v.process_definition_key, inst.key, v.process_instance_key, v.tenant_id)
        elif isinstance(plan, tuple):
            name, correlation_key = plan
            _open_message_subscription(ctx, inst, target, name, correlation_key)
        else:
            open_signal_subscription(
                ctx, v.process_definition_key, v.bpmn_process_id, target.id, plan.name, inst.key, v.tenant_id
            )


class _Signal:
    """A planned signal subscription: the evaluated signal name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def _plan_signal(ctx: ProcessingContext, target: bpmn.Element, scope_key: int) -> _Signal | str:
    source = target.signal_name or ""
    name = b.evaluate(ctx, source, scope_key)
    if isinstance(name, ExpressionFailure):
        return name.message
    if not isinstance(name, str) or not name:
        return f"Expected the signal name '{source}' to be a non-empty STRING, but was '{name!r}'"
    return _Signal(name)


def open_signal_subscription(
    ctx: ProcessingContext,
    definition_key: int,
    process_id: str,
    catch_event_id: str,
    name: str,
    element_instance_key: int,
    tenant: str,
) -> None:
    """Subscribe ``catch_event_id`` to the tenant's signal ``name`` (``element_instance_key`` -1: a start event)."""
    ctx.event(
        ValueType.SIGNAL_SUBSCRIPTION,
        SignalSubscriptionIntent.CREATED,
        ctx.keys.next_key(),
        {
            "signalName": name,
            "processDefinitionKey": definition_key,
            "bpmnProcessId": process_id,
            "catchEventId": catch_event_id,
            "catchEventInstanceKey": element_instance_key,
            "tenantId": tenant,
        },
    )


def close_signal_subscription(ctx: ProcessingContext, sub: dict) -> None:
    value = {k: v for k, v in sub.items() if k != "key"}
    ctx.event(ValueType.SIGNAL_SUBSCRIPTION, SignalSubscriptionIntent.DELETED, sub["key"], value)


def _plan_timer(ctx: ProcessingContext, timer: bpmn.TimerDefinition, scope_key: int) -> timers.Schedule | str:
    source = timer.expression
    value: Any = source
    if source.startswith("="):
        value = b.services(ctx).expressions.evaluate_raw(source, b.visible_variables(ctx, scope_key), ctx.now)
        if isinstance(value, ExpressionFailure):
            return value.message
    try:
        return timers.schedule(timer.kind, value, ctx.now)
    except timers.TimerError as e:
        return str(e)
    except (OverflowError, ValueError) as e:
        return f"Invalid timer {timer.kind} '{source}': {e}"


def create_timer(
    ctx: ProcessingContext,
    schedule: timers.Schedule,
    target_id: str,
    definition_key: int,
    element_instance_key: int,
    instance_key: int,
    tenant: str,
) -> None:
    cron, interval_months, interval_ms = timers.repeating_parts(schedule)
    ctx.typed_event(
        ValueType.TIMER,
        TimerIntent.CREATED,
        ctx.keys.next_key(),
        TimerValue(
            element_instance_key=element_instance_key,
            process_instance_key=instance_key,
            process_definition_key=definition_key,
            due_date=schedule.due_date,
            target_element_id=target_id,
            repetitions=schedule.repetitions,
            tenant_id=tenant,
            cron=cron,
            interval_months=interval_months,
            interval_ms=interval_ms,
        ),
    )


def _plan_message(ctx: ProcessingContext, message: bpmn.MessageDefinition, scope_key: int) -> tuple[str, str] | str:
    name = b.evaluate(ctx, message.name, scope_key)
    if isinstance(name, ExpressionFailure):
        return name.message
    if not isinstance(name, str) or not name:
        return f"Expected the message name '{message.name}' to be a non-empty STRING, but was '{name!r}'"
    source = message.correlation_key or ""
    key = b.evaluate(ctx, source, scope_key) if source else ""
    if isinstance(key, ExpressionFailure):
        return key.message
    if isinstance(key, bool) or not isinstance(key, str | int | float):
        return (
            f"Failed to extract the correlation key for '{source}': The value must be either a string or a number, "
            f"but was '{b.describe_type(key)}'."
        )
    if isinstance(key, float) and key.is_integer():
        key = int(key)
    return name, str(key)


def _open_message_subscription(
    ctx: ProcessingContext, inst: ElementInstance, target: bpmn.Element, name: str, correlation_key: str
) -> None:
    v = inst.value
    services = b.services(ctx)
    ctx.event(
        ValueType.PROCESS_MESSAGE_SUBSCRIPTION,
        PMS.CREATING,
        ctx.keys.next_key(),
        {
            "subscriptionPartitionId": subscription_partition(correlation_key, services.partitions_count),
            "processInstancePartitionId": ctx.partition_id,
            "processInstanceKey": v.process_instance_key,
            "processDefinitionKey": v.process_definition_key,
            "bpmnProcessId": v.bpmn_process_id,
            "elementInstanceKey": inst.key,
            "elementId": target.id,
            "messageName": name,
            "correlationKey": correlation_key,
            "interrupting": target.interrupts,
            "messageKey": -1,
            "variables": {},
            "tenantId": v.tenant_id,
        },
    )


# -- closing -------------------------------------------------------------------------------------------------


def close_subscriptions(ctx: ProcessingContext, inst: ElementInstance, only: frozenset[str] | None = None) -> None:
    """The element instance is leaving: cancel its timers, delete its message and signal subscriptions.

    ``only``: close just the subscriptions of these target elements (an interrupted scope's event sub-processes).
    """
    for timer_key in ctx.state.timers.of_owner(inst.key):
        stored = ctx.state.timers.get(timer_key)
        timer = TimerValue.from_dict(stored) if stored is not None else None
        if timer is not None and (only is None or timer.target_element_id in only):
            ctx.typed_event(ValueType.TIMER, TimerIntent.CANCELED, timer_key, timer)
    for sub in ctx.state.process_message_subscriptions.of_element(inst.key):
        if sub["state"] != "DELETING" and (only is None or sub["elementId"] in only):
            ctx.event(ValueType.PROCESS_MESSAGE_SUBSCRIPTION, PMS.DELETING, ctx.keys.next_key(), _record(sub))
    for signal in ctx.state.signal_subscriptions.of_owner(inst.key):
        if only is None or signal["catchEventId"] in only:
            close_signal_subscription(ctx, signal)


def close_event_sub_process_subscriptions(
    ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance
) -> None:
    """An interrupting event sub-process started: the scope's other event sub-processes may no longer start."""
    scope_id = scope.value.element_id
    starts = frozenset(c.id for c in process.event_sub_process_starts_of(scope_id))
    if starts:
        close_subscriptions(ctx, scope, only=starts)


def close_start_timers_of(ctx: ProcessingContext, definition_key: int) -> None:
    """Cancel the timer start events of a process definition (a newer version replaces them)."""
    if definition_key <= 0:
        return
    for timer_key in ctx.state.timers.of_owner(definition_key):
        stored = ctx.state.timers.get(timer_key)
        timer = TimerValue.from_dict(stored) if stored is not None else None
        if timer is not None and timer.element_instance_key <= 0:
            ctx.typed_event(ValueType.TIMER, TimerIntent.CANCELED, timer_key, timer)


def _record(sub: dict) -> dict:
    """A stored subscription as a record value (without the bookkeeping state)."""
    return {k: v for k, v in sub.items() if k != "state"}


# -- firing --------------------------------------------------------------------------------------------------


def fire(
    ctx: ProcessingContext, process: bpmn.Process, inst: ElementInstance, target: bpmn.Element, variables: dict
) -> None:
    """The event ``target`` occurred for the waiting element instance ``inst``: its kind decides what follows."""
    processor_of(ctx, inst.value).on_event(ctx, process, inst, target, variables)


def is_waiting(inst: ElementInstance | None) -> bool:
    return inst is not None and inst.state == PI.ELEMENT_ACTIVATED


def can_fire(ctx: ProcessingContext, inst: ElementInstance | None) -> bool:
    """Waiting, and not already interrupted or decided by an earlier event (a pending trigger on it)."""
    return is_waiting(inst) and ctx.state.event_triggers.get(inst.key) is None  # type: ignore[union-attr]


# -- TIMER TRIGGER -------------------------------------------------------------------------------------------


def trigger_timer(ctx: ProcessingContext, cmd: Record) -> None:
    """Written by the leader's checker once the due date passed; re-checked against the command's timestamp."""
    stored = ctx.state.timers.get(cmd.key)
    if stored is None:
        ctx.reject(RejectionType.NOT_FOUND, f"Expected to trigger timer with key '{cmd.key}', but none was found")
        return
    timer = TimerValue.from_dict(stored)
    if timer.due_date > ctx.now:
        ctx.reject(RejectionType.INVALID_STATE, f"Timer '{cmd.key}' is not due yet (due date {timer.due_date})")
        return
    process = b.services(ctx).models.get(timer.process_definition_key)
    target = process.element(timer.target_element_id)
    eik = timer.element_instance_key
    if eik <= 0:
        ctx.typed_event(ValueType.TIMER, TimerIntent.TRIGGERED, cmd.key, timer)
        _reschedule(ctx, timer)
        start_instance(ctx, timer.process_definition_key, target.id, {})
        return
    inst = ctx.state.elements.get(eik)
    if not can_fire(ctx, inst):
        ctx.reject(RejectionType.INVALID_STATE, f"Expected the element of timer '{cmd.key}' to be active")
        return
    assert inst is not None
    ctx.typed_event(ValueType.TIMER, TimerIntent.TRIGGERED, cmd.key, timer)
    if not target.interrupts:
        _reschedule(ctx, timer)
    fire(ctx, process, inst, target, {})


def _reschedule(ctx: ProcessingContext, timer: TimerValue) -> None:
    following = timers.schedule_of(timer).next(ctx.now)
    if following is not None:
        create_timer(
            ctx,
            following,
            timer.target_element_id,
            timer.process_definition_key,
            timer.element_instance_key,
            timer.process_instance_key,
            timer.tenant_id,
        )


# -- instances started by events ------------------------------------------------------------------------------


def start_instance(
    ctx: ProcessingContext, definition_key: int, start_event_id: str, variables: dict, *, pi_key: int = -1
) -> int:
    """Create an instance that begins at the given (timer, message, signal) start event; its key."""
    stored = ctx.state.processes.get(definition_key)
    assert stored is not None
    if pi_key <= 0:
        pi_key = ctx.keys.next_key()
    value = {
        "bpmnProcessId": stored["bpmnProcessId"],
        "version": stored["version"],
        "processDefinitionKey": definition_key,
        "processInstanceKey": pi_key,
        "elementId": stored["bpmnProcessId"],
        "flowScopeKey": -1,
        "bpmnElementType": bpmn.PROCESS,
        "bpmnEventType": bpmn.UNSPECIFIED,
        "parentProcessInstanceKey": -1,
        "parentElementInstanceKey": -1,
        "tenantId": b.tenant_of(stored),
    }
    ctx.event(
        ValueType.PROCESS_EVENT,
        ProcessEventIntent.TRIGGERING,
        ctx.keys.next_key(),
        {
            "scopeKey": pi_key,
            "targetElementId": start_event_id,
            "variables": variables,
            "processDefinitionKey": definition_key,
            "processInstanceKey": pi_key,
            "tenantId": b.tenant_of(stored),
        },
    )
    ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.ACTIVATE_ELEMENT, pi_key, value)
    return pi_key


def open_start_timers(ctx: ProcessingContext, process: bpmn.Process, definition_key: int) -> None:
    """Timer start events of a newly deployed version (static definitions: there are no variables yet)."""
    for start_id in process.start_event_ids:
        start = process.element(start_id)
        if start.timer is None:
            continue
        plan = _plan_timer(ctx, start.timer, -1)
        if isinstance(plan, str):
            continue  # deployment validated the syntax; a date in the past etc. simply never fires
        stored = ctx.state.processes.get(definition_key)
        create_timer(ctx, plan, start.id, definition_key, -1, -1, b.tenant_of(stored) if stored else b.TENANT)


# -- BPMN errors ---------------------------------------------------------------------------------------------


def find_error_catch(
    ctx: ProcessingContext, process: bpmn.Process, start: ElementInstance, error_code: str
) -> tuple[ElementInstance, bpmn.Element] | None:
    """The nearest catch of a BPMN error: (element instance whose scope catches it, catching event).

    The catching event is a boundary event (attached to that instance) or the error start event of an event
    sub-process inside that instance.
    """
    return find_catch(ctx, process, start, bpmn.ERROR, error_code)


def find_escalation_catch(
    ctx: ProcessingContext, process: bpmn.Process, start: ElementInstance, code: str
) -> tuple[ElementInstance, bpmn.Element] | None:
    """Like :func:`find_error_catch`, for escalations (boundary events may be non-interrupting here)."""
    return find_catch(ctx, process, start, bpmn.ESCALATION, code)


def _catch_code(element: bpmn.Element, event_type: str) -> str | None:
    if event_type == bpmn.ERROR:
        return element.error.error_code if element.error else None
    return element.escalation_code


def _best_catch(candidates: list[bpmn.Element], event_type: str, code: str) -> bpmn.Element | None:
    """An exact code match wins over a catch-all (no code) at the same level."""
    catch_all = None
    for candidate in candidates:
        if candidate.event_type != event_type:
            continue
        candidate_code = _catch_code(candidate, event_type)
        if candidate_code is None:
            catch_all = catch_all or candidate
        elif candidate_code == code:
            return candidate
    return catch_all


def find_catch(
    ctx: ProcessingContext, process: bpmn.Process, start: ElementInstance, event_type: str, code: str
) -> tuple[ElementInstance, bpmn.Element] | None:
    """Search the throwing instance and then its flow scopes outwards for an error or escalation catch.

    At each level the event sub-processes inside the scope come first (they are nearer), then the boundary events of
    the instance itself. An event sub-process never catches what is thrown inside itself or its siblings. Past the
    root of a process instance started by a call activity, the search goes on at that call activity (in the calling
    process: the catching instance may belong to another process than ``process``).
    """
    inst: ElementInstance | None = start
    came_from_event_sub_process = False
    definition_key = start.value.process_definition_key
    while inst is not None:
        if inst.value.process_definition_key != definition_key:
            definition_key = inst.value.process_definition_key
            process = b.services(ctx).models.get(definition_key)
        element_id = inst.value.element_id
        parent_key = inst.value.flow_scope_key
        if parent_key <= 0:  # the process itself: go on at the call activity that started it, if any
            parent_key = inst.value.parent_element_instance_key
        parent = ctx.state.elements.get(parent_key) if parent_key > 0 else None
        # an instance of a multi-instance activity shares its element with the body around it: the boundary events
        # belong to the body, the event sub-processes (of a sub-process) to the instance
        processor = processor_of(ctx, inst.value)
        is_body = processor.contains_its_own_element
        in_body = parent is not None and processor_of(ctx, parent.value).contains_its_own_element
        if not came_from_event_sub_process and not is_body:
            found = _best_catch(list(process.event_sub_process_starts_of(element_id)), event_type, code)
            if found is not None:
                return inst, found
        if element_id in process.elements and not in_body:
            found = _best_catch(list(process.boundary_events_of(element_id)), event_type, code)
            if found is not None:
                return inst, found
        came_from_event_sub_process = processor.hides_sibling_event_sub_processes
        inst = parent
    return None
