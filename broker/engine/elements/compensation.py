"""Compensation: undoing activities that already completed, through the handlers associated with them.

The subscriptions and their handlers live here; the throw and end events and the boundary event are in
:mod:`.compensation_events`, and the lifecycle calls in when an element completes or ends early.

- When an activity with a compensation boundary event completes, a COMPENSATION_SUBSCRIPTION is CREATED for that
  instance, keeping its element instance, its flow scope's instance and its local variables. For a multi-instance
  activity the boundary event is the body's: its handler runs once for the whole body (as in Zeebe; a handler that
  should run per item is multi-instance itself). A sub-process or multi-instance body that completes with
  subscriptions inside gets one too (without a handler unless it has a boundary event of its own), so the activities
  inside it can be compensated from the outer scope. An activity inside a multi-instance sub-process thus has one
  subscription per completed inner instance, under that instance's own: its handler runs once for each, with that
  instance's variables (``inputElement``, ``loopCounter``). An activity that never completed has none.
- A compensation throw or end event triggers the untriggered subscriptions of its flow scope (inside an event
  sub-process: also of the scope around it), or only those of its ``activityRef``, and of everything nested inside
  them. Each handler starts at once (the compensation boundary event passes through first), in the throw event's
  flow scope, with the compensated instance's local variables as its own; the subscriptions are TRIGGERED.
- The throw event waits until every handler it started has completed (each handler's subscription is COMPLETED,
  then those of the sub-processes and bodies around it once nothing inside them is left); with nothing to
  compensate it passes through.
- Subscriptions of a sub-process, event sub-process or body that is terminated are DELETED with it; all of an
  instance's subscriptions are DELETED when it completes or is terminated.
"""

from __future__ import annotations

from typing import Any

from broker.engine import behaviors as b
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.lookup import processor_for, processor_of, started_by_compensation
from broker.protocol.enums import CompensationSubscriptionIntent, ProcessInstanceIntent, ValueType
from broker.protocol.values import ProcessInstanceValue
from broker.state.element_instance import ElementInstance

PI = ProcessInstanceIntent
CSI = CompensationSubscriptionIntent

Subscription = tuple[int, dict[str, Any]]


# -- what the rest of the lifecycle calls ---------------------------------------------------------------------


def is_handler(value: ProcessInstanceValue) -> bool:
    """Whether the element instance is a compensation handler started by compensation."""
    return started_by_compensation(value)


def on_completing(ctx: ProcessingContext, process: bpmn.Process, inst: ElementInstance) -> None:
    """The instance is about to be COMPLETED (its variables still there): subscribe it for compensation if it can
    be compensated; a process instance that completes drops all of its subscriptions."""
    v = inst.value
    if not process.uses_compensation:
        return
    if v.is_root:
        _delete(ctx, _subscriptions(ctx, v.process_instance_key))
        return
    if is_handler(v):
        return
    element = process.elements.get(v.element_id)
    handler_id = (handler_of(process, element) or "") if element is not None else ""
    if handler_id and lc.body_of(ctx, inst) is not None:
        handler_id = ""  # an instance of a multi-instance activity: its boundary events are the body's
    if not handler_id:
        if not processor_of(ctx, v).keeps_compensation_inside:
            return
        subscriptions = _subscriptions(ctx, v.process_instance_key)
        if not any(s["compensableActivityScopeKey"] == inst.key for _, s in subscriptions):
            return
    ctx.event(
        ValueType.COMPENSATION_SUBSCRIPTION,
        CSI.CREATED,
        ctx.keys.next_key(),
        {
            "tenantId": v.tenant_id,
            "processInstanceKey": v.process_instance_key,
            "processDefinitionKey": v.process_definition_key,
            "compensableActivityId": v.element_id,
            "throwEventId": "",
            "throwEventInstanceKey": -1,
            "compensationHandlerId": handler_id,
            "compensationHandlerInstanceKey": -1,
            "compensableActivityScopeKey": v.flow_scope_key,
            "compensableActivityInstanceKey": inst.key,
            "variables": ctx.state.variables.local(inst.key),
        },
    )


def on_ended_early(ctx: ProcessingContext, inst: ElementInstance) -> None:
    """The instance is terminated: the subscriptions inside it (a scope) or of its whole instance (the process)
    go with it."""
    v = inst.value
    if v.is_root:
        _delete(ctx, _subscriptions(ctx, v.process_instance_key))
    elif processor_of(ctx, v).drops_compensation_inside:
        subscriptions = _subscriptions(ctx, v.process_instance_key)
        if subscriptions:
            _delete(ctx, _nested(subscriptions, inst.key))


def handler_activating(ctx: ProcessingContext, inst: ElementInstance) -> None:
    """A handler was just written ACTIVATING: the compensated instance's variables become its local variables."""
    for _, sub in _subscriptions(ctx, inst.value.process_instance_key):
        if sub["compensationHandlerInstanceKey"] == inst.key:
            if sub.get("variables"):
                b.set_local_document(ctx, inst.key, sub["variables"], inst)
            return


def handler_completed(ctx: ProcessingContext, inst: ElementInstance) -> None:
    """A handler completed: its subscription is COMPLETED, then those of the scopes around it with nothing left
    inside; once nothing of its throw event is left, the throw event completes."""
    v = inst.value
    subscriptions = _subscriptions(ctx, v.process_instance_key)
    found = next((s for s in subscriptions if s[1]["compensationHandlerInstanceKey"] == inst.key), None)
    if found is None:
        return
    key, sub = found
    ctx.event(ValueType.COMPENSATION_SUBSCRIPTION, CSI.COMPLETED, key, sub)
    _complete_scopes(ctx, v.process_instance_key, sub["compensableActivityScopeKey"])
    throw_key = sub["throwEventInstanceKey"]
    if any(s["throwEventInstanceKey"] == throw_key for _, s in _subscriptions(ctx, v.process_instance_key)):
        return
    throw_inst = ctx.state.elements.get(throw_key)
    if throw_inst is not None and throw_inst.state == PI.ELEMENT_ACTIVATED:
        ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.COMPLETE_ELEMENT, throw_key, throw_inst.value.to_dict())


def handler_of(process: bpmn.Process, element: bpmn.Element) -> str | None:
    """The handler of the element's compensation boundary event, if it has one."""
    boundary = process.compensation_boundary_of(element.id)
    return (boundary.compensation_handler_id or None) if boundary is not None else None


# -- throwing -------------------------------------------------------------------------------------------------


def throw(ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element, inst: ElementInstance) -> bool:
    """Trigger the compensation of the throw event ``inst``; False when there is nothing to compensate."""
    v = inst.value
    scope_keys = {v.flow_scope_key}
    scope = process.elements.get(element.flow_scope_id)
    if scope is not None and processor_for(ctx, scope).compensates_enclosing_scope:
        esp = ctx.state.elements.get(v.flow_scope_key)
        if esp is not None:
            scope_keys.add(esp.value.flow_scope_key)
    untriggered = [s for s in _subscriptions(ctx, v.process_instance_key) if not s[1]["throwEventId"]]
    chosen = [
        s
        for s in untriggered
        if s[1]["compensableActivityScopeKey"] in scope_keys
        and (element.activity_ref is None or s[1]["compensableActivityId"] == element.activity_ref)
    ]
    triggered: list[Subscription] = []
    for sub in chosen:
        _trigger(ctx, process, inst, sub, untriggered, {}, triggered)
    if any(s["compensationHandlerInstanceKey"] > 0 for _, s in triggered):
        return True
    for key, value in triggered:  # only scopes whose insides were compensated already: nothing to wait for
        ctx.event(ValueType.COMPENSATION_SUBSCRIPTION, CSI.COMPLETED, key, value)
    return False


def _trigger(
    ctx: ProcessingContext,
    process: bpmn.Process,
    throw_inst: ElementInstance,
    subscription: Subscription,
    untriggered: list[Subscription],
    outer_variables: dict[str, Any],
    triggered: list[Subscription],
) -> None:
    """Start the subscription's handler (if any), mark it TRIGGERED, then do the same for what completed inside it
    (the variables of the scopes around a nested activity reach its handler too, inner ones winning)."""
    key, sub = subscription
    variables = {**outer_variables, **(sub.get("variables") or {})}
    handler_key = -1
    if sub["compensationHandlerId"]:
        handler_key = _start_handler(ctx, process, throw_inst, sub)
    value = {
        **sub,
        "throwEventId": throw_inst.value.element_id,
        "throwEventInstanceKey": throw_inst.key,
        "compensationHandlerInstanceKey": handler_key,
        "variables": variables if handler_key > 0 else sub.get("variables") or {},
    }
    ctx.event(ValueType.COMPENSATION_SUBSCRIPTION, CSI.TRIGGERED, key, value)
    triggered.append((key, value))
    instance_key = sub["compensableActivityInstanceKey"]
    for inner in untriggered:
        if inner[1]["compensableActivityScopeKey"] == instance_key:
            _trigger(ctx, process, throw_inst, inner, untriggered, variables, triggered)


def _start_handler(ctx: ProcessingContext, process: bpmn.Process, throw_inst: ElementInstance, sub: dict) -> int:
    """The compensation boundary event of the compensated activity passes through, then its handler is activated
    in the throw event's flow scope; the handler's element instance key."""
    v = throw_inst.value
    scope_key = v.flow_scope_key
    boundary = process.compensation_boundary_of(sub["compensableActivityId"])
    assert boundary is not None
    boundary_key = ctx.keys.next_key()
    value = v.for_element(boundary.id, boundary.element_type, boundary.event_type, scope_key)
    ctx.event(ValueType.PROCESS_INSTANCE, PI.ELEMENT_ACTIVATING, boundary_key, value.to_dict())
    passing = ctx.state.elements.get(boundary_key)
    assert passing is not None
    for intent in (PI.ELEMENT_ACTIVATED, PI.ELEMENT_COMPLETING, PI.ELEMENT_COMPLETED):
        passing = lc.transition(ctx, passing, intent)
    handler = process.element(sub["compensationHandlerId"])
    handler_key = ctx.keys.next_key()
    # a multi-instance handler is entered through its body (which runs an instance of the handler per item)
    b.activate_element(ctx, handler, v, scope_key, key=handler_key, event_type=bpmn.COMPENSATION)
    return handler_key


# -- subscriptions --------------------------------------------------------------------------------------------


def _subscriptions(ctx: ProcessingContext, process_instance_key: int) -> list[Subscription]:
    return ctx.state.compensation_subscriptions.of_instance(process_instance_key)


def _nested(subscriptions: list[Subscription], scope_key: int) -> list[Subscription]:
    """The subscriptions inside the scope instance, and inside the scopes among them, outermost first."""
    out = []
    todo = [scope_key]
    while todo:
        current = todo.pop()
        for sub in subscriptions:
            if sub[1]["compensableActivityScopeKey"] == current:
                out.append(sub)
                todo.append(sub[1]["compensableActivityInstanceKey"])
    return out


def _delete(ctx: ProcessingContext, subscriptions: list[Subscription]) -> None:
    for key, sub in subscriptions:
        ctx.event(ValueType.COMPENSATION_SUBSCRIPTION, CSI.DELETED, key, sub)


def _complete_scopes(ctx: ProcessingContext, process_instance_key: int, scope_key: int) -> None:
    """Nothing is left inside the scope instance's subscription: complete it (it has no handler of its own to wait
    for), then look at the scope around it."""
    while True:
        subscriptions = _subscriptions(ctx, process_instance_key)
        if any(s["compensableActivityScopeKey"] == scope_key for _, s in subscriptions):
            return
        found = next(
            (
                (k, s)
                for k, s in subscriptions
                if s["compensableActivityInstanceKey"] == scope_key and not s["compensationHandlerId"]
            ),
            None,
        )
        if found is None:
            return
        ctx.event(ValueType.COMPENSATION_SUBSCRIPTION, CSI.COMPLETED, found[0], found[1])
        scope_key = found[1]["compensableActivityScopeKey"]
