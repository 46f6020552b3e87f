"""The element lifecycle commands: ACTIVATE_ELEMENT, COMPLETE_ELEMENT, COMPLETE_EXECUTION_LISTENER and
TERMINATE_ELEMENT.

Each command is checked against the instance's state, then handed to the processor of the element's kind. Elements
that do not wait (events without triggers, gateways, pass-through tasks) go through their whole lifecycle while one
command is processed.
"""

from __future__ import annotations

from broker.engine import behaviors as b
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import call_activity, compensation, registry
from broker.engine.elements import lifecycle as lc
from broker.protocol.enums import ProcessInstanceIntent, RejectionType
from broker.protocol.record import Record
from broker.protocol.values import ProcessInstanceValue

PI = ProcessInstanceIntent

# The incident error type of an element stopped by the stream processor's step budget (one of Zeebe's error types:
# none of the specific ones fits, and clients only know those).
STEP_BUDGET_INCIDENT = "UNKNOWN"


def activate(ctx: ProcessingContext, cmd: Record) -> None:
    v = ProcessInstanceValue.of_record(cmd)
    process = b.services(ctx).models.get(v.process_definition_key)
    processor = registry.processor_of(v)
    inst = ctx.state.elements.get(cmd.key)
    if inst is None:
        scope_key = v.flow_scope_key
        if scope_key > 0:
            scope = ctx.state.elements.get(scope_key)
            if scope is None or scope.state != PI.ELEMENT_ACTIVATED:
                ctx.reject(
                    RejectionType.INVALID_STATE,
                    f"Expected to activate element '{v.element_id}', but its flow scope is not active",
                )
                return
            blocked = processor.activation_blocked(ctx, process.element(v.element_id), scope_key)
            if blocked is not None:
                ctx.reject(RejectionType.INVALID_STATE, blocked)
                return
        elif v.parent_element_instance_key > 0:
            blocked = call_activity.activation_blocked(ctx, v)
            if blocked is not None:
                ctx.reject(RejectionType.INVALID_STATE, blocked)
                return
        ctx.instance_event(PI.ELEMENT_ACTIVATING, cmd.key, v, cmd.value)
        inst = ctx.state.elements.get(cmd.key)
        assert inst is not None
        if compensation.is_handler(v):
            compensation.handler_activating(ctx, inst)
        if scope_key > 0 and _interrupted(ctx, process, scope_key):
            # a token that was on its way when a terminate end event or an interrupting event sub-process ended
            # the scope's flow: it arrives and is terminated at once
            lc.terminated(ctx, lc.transition(ctx, inst, PI.ELEMENT_TERMINATING))
            return
        if scope_key > 0:
            scope = ctx.state.elements.get(scope_key)
            assert scope is not None
            if not registry.processor_of(scope.value).on_child_activating(ctx, process, scope, inst):
                return
    elif inst.state != PI.ELEMENT_ACTIVATING:
        ctx.reject(RejectionType.INVALID_STATE, f"Expected element '{cmd.key}' to be activating")
        return
    if ctx.over_step_budget is not None:
        # the instance ran too long without waiting: it stops here, ACTIVATING; resolving the incident activates again
        b.raise_incident(ctx, inst, STEP_BUDGET_INCIDENT, ctx.over_step_budget)
        return
    processor.on_activate(ctx, process, lc.element_of(process, inst), inst)
    if inst.value.flow_scope_key > 0:
        scope = ctx.state.elements.get(inst.value.flow_scope_key)
        if scope is not None and scope.flows > 0:  # a token arrived: an inclusive join it cannot reach may go on
            lc.reconsider_joins(ctx, process, scope.key)


def _interrupted(ctx: ProcessingContext, process: bpmn.Process, scope_key: int) -> bool:
    """Whether the scope's flow was ended: a terminate end event, or an interrupting event sub-process about to
    start (its own activation comes after the trigger has moved on)."""
    trigger = ctx.state.event_triggers.get(scope_key)
    if trigger is None:
        return False
    target = process.elements.get(trigger["targetElementId"])
    return target is not None and registry.processor_for(target).ends_the_flow_of_its_scope


def complete(ctx: ProcessingContext, cmd: Record) -> None:
    inst = ctx.state.elements.get(cmd.key)
    if inst is None:
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to complete element with key '{cmd.key}', but it does not exist",
        )
        return
    if inst.state not in (PI.ELEMENT_ACTIVATED, PI.ELEMENT_COMPLETING):
        ctx.reject(RejectionType.INVALID_STATE, f"Expected element '{cmd.key}' to be active, but it is not")
        return
    process = lc.process_of(ctx, inst)
    registry.processor_of(inst.value).on_complete(ctx, process, lc.element_of(process, inst), inst)


def complete_execution_listener(ctx: ProcessingContext, cmd: Record) -> None:
    """A listener job completed: the element's step runs again, and the next listener or the element goes on."""
    inst = ctx.state.elements.get(cmd.key)
    if inst is None or inst.state not in (PI.ELEMENT_ACTIVATING, PI.ELEMENT_COMPLETING):
        ctx.reject(
            RejectionType.INVALID_STATE,
            f"Expected element '{cmd.key}' to be activating or completing to continue after an execution listener",
        )
        return
    if inst.job_key > 0 or inst.listener_index == 0:  # a listener job still runs, or none ran
        ctx.reject(
            RejectionType.INVALID_STATE,
            f"Expected an execution listener job of element '{cmd.key}' to have completed, but none has",
        )
        return
    process = lc.process_of(ctx, inst)
    processor = registry.processor_of(inst.value)
    element = lc.element_of(process, inst)
    if inst.state == PI.ELEMENT_ACTIVATING:
        processor.on_activate(ctx, process, element, inst)
    else:
        processor.on_complete(ctx, process, element, inst)


def terminate(ctx: ProcessingContext, cmd: Record) -> None:
    inst = ctx.state.elements.get(cmd.key)
    if inst is None or inst.state == PI.ELEMENT_TERMINATING:
        ctx.reject(RejectionType.INVALID_STATE, f"Expected element '{cmd.key}' to be active, but it is not")
        return
    lc.terminate(ctx, inst)
