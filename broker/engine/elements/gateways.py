"""Gateways: exclusive (one flow by condition), parallel (fork and join) and event-based (the first event wins)."""

from __future__ import annotations

from broker.engine import behaviors as b
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.base import ElementProcessor
from broker.engine.expressions import ExpressionFailure
from broker.protocol.enums import ProcessEventIntent, ProcessInstanceIntent, RejectionType, ValueType
from broker.state.element_instance import ElementInstance

PI = ProcessInstanceIntent


class ExclusiveGatewayProcessor(ElementProcessor):
    """Takes the first flow whose condition is true, else the default flow, else raises an incident."""

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if not lc.prepare(ctx, process, element, inst):
            return
        flow = choose_flow(ctx, process, element, inst)
        if flow is None:
            return
        inst = lc.activated(ctx, inst)
        lc.complete(ctx, process, element, inst, flows=(flow,))

    def on_complete(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        flow = choose_flow(ctx, process, element, inst)
        if flow is not None:
            lc.complete(ctx, process, element, inst, flows=(flow,))


def choose_flow(
    ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element, inst: ElementInstance
) -> bpmn.SequenceFlow | None:
    """The exclusive gateway's outgoing flow; None after raising an incident."""
    outgoing = process.outgoing_flows(element.id)
    if len(outgoing) == 1 and outgoing[0].condition is None:
        return outgoing[0]
    context = b.visible_variables(ctx, inst.key)
    evaluator = b.services(ctx).expressions
    for flow in outgoing:
        if flow.id == element.default_flow_id or flow.condition is None:
            continue
        result = evaluator.evaluate_condition(flow.condition, context, ctx.now)
        if isinstance(result, ExpressionFailure):
            b.raise_incident(ctx, inst, "CONDITION_ERROR", result.message)
            return None
        if result:
            return flow
    if element.default_flow_id is not None:
        return process.flow(element.default_flow_id)
    b.raise_incident(
        ctx,
        inst,
        "CONDITION_ERROR",
        f"Expected at least one condition to evaluate to true, or to have a default flow (gateway '{element.id}')",
    )
    return None


class ParallelGatewayProcessor(ElementProcessor):
    """Forks over every outgoing flow; as a join, activates once every incoming flow has been taken."""

    def activation_blocked(self, ctx: ProcessingContext, element: bpmn.Element, scope_key: int) -> str | None:
        if element.is_join and not all(ctx.state.joins.count(scope_key, element.id, f) > 0 for f in element.incoming):
            return "Expected all incoming flows of the join to be taken"
        return None


class InclusiveGatewayProcessor(ElementProcessor):
    """Forks over every outgoing flow whose condition is true (else the default flow, else an incident); as a join,
    activates once a token has arrived and no other token of the scope can still reach it."""

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if not lc.prepare(ctx, process, element, inst):
            return
        flows = choose_inclusive_flows(ctx, process, element, inst)
        if flows is None:
            return
        inst = lc.activated(ctx, inst)
        lc.complete(ctx, process, element, inst, flows=flows)

    def on_complete(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        flows = choose_inclusive_flows(ctx, process, element, inst)
        if flows is not None:
            lc.complete(ctx, process, element, inst, flows=flows)

    def activation_blocked(self, ctx: ProcessingContext, element: bpmn.Element, scope_key: int) -> str | None:
        if not element.is_join:
            return None
        joins = ctx.state.joins
        if not any(joins.count(scope_key, element.id, f) > 0 for f in element.incoming):
            return f"Expected a token to have arrived at the inclusive gateway '{element.id}'"
        scope = ctx.state.elements.get(scope_key)
        if scope is None:
            return "Expected the flow scope of the join to be active"
        process = lc.process_of(ctx, scope)
        waiting = 0
        for other in process.joins_in(scope.value.element_id):
            here = sum(joins.count(scope_key, other.id, f) for f in other.incoming)
            waiting += here
            if here and other.id != element.id and process.can_reach(other.id, element.id):
                return f"Expected no token waiting at '{other.id}' that can still reach '{element.id}'"
        if scope.flows > waiting:
            return "Expected no token in flight in the scope (its target decides whether it can reach the join)"
        for child_key in ctx.state.elements.children(scope_key):
            child = ctx.state.elements.get(child_key)
            if child is None or child.state == PI.ELEMENT_TERMINATING or child.value.element_id == element.id:
                continue
            if process.can_reach(child.value.element_id, element.id):
                return f"Expected no active element that can still reach '{element.id}' ('{child.value.element_id}')"
        return None


def choose_inclusive_flows(
    ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element, inst: ElementInstance
) -> tuple[bpmn.SequenceFlow, ...] | None:
    """Every outgoing flow whose condition is true, else the default flow; None after raising an incident.

    As in Zeebe, a single unconditional outgoing flow is simply taken, and other flows without a condition are
    never taken (only conditions and the default decide).
    """
    outgoing = process.outgoing_flows(element.id)
    if not outgoing:
        return ()
    if len(outgoing) == 1 and outgoing[0].condition is None:
        return outgoing
    context = b.visible_variables(ctx, inst.key)
    evaluator = b.services(ctx).expressions
    chosen = []
    for flow in outgoing:
        if flow.id == element.default_flow_id or flow.condition is None:
            continue
        result = evaluator.evaluate_condition(flow.condition, context, ctx.now)
        if isinstance(result, ExpressionFailure):
            b.raise_incident(ctx, inst, "CONDITION_ERROR", result.message)
            return None
        if result:
            chosen.append(flow)
    if chosen:
        return tuple(chosen)
    if element.default_flow_id is not None:
        return (process.flow(element.default_flow_id),)
    b.raise_incident(
        ctx,
        inst,
        "CONDITION_ERROR",
        f"Expected at least one condition to evaluate to true, or to have a default flow (gateway '{element.id}')",
    )
    return None


class EventBasedGatewayProcessor(ElementProcessor):
    """Subscribes to the events after it and waits; the first one to occur decides the flow."""

    def event_targets(self, process: bpmn.Process, element: bpmn.Element | None) -> list[bpmn.Element]:
        assert element is not None
        return [process.element(f.target_id) for f in process.outgoing_flows(element.id)]

    def on_event(
        self,
        ctx: ProcessingContext,
        process: bpmn.Process,
        inst: ElementInstance,
        target: bpmn.Element,
        variables: dict,
    ) -> None:
        """The first event wins: the gateway completes towards it (COMPLETE_ELEMENT reads the trigger)."""
        trigger = b.event_trigger(ctx, inst, target, variables)
        ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERING, ctx.keys.next_key(), trigger)
        ctx.follow_up(
            ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.COMPLETE_ELEMENT, inst.key, inst.value.to_dict()
        )

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if lc.prepare(ctx, process, element, inst):
            inst = lc.activated(ctx, inst)

    def on_complete(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        trigger = ctx.state.event_triggers.get(inst.key)
        if trigger is None:
            ctx.reject(RejectionType.INVALID_STATE, f"Expected gateway '{inst.key}' to have received an event")
            return
        winner = [f for f in process.outgoing_flows(element.id) if f.target_id == trigger["targetElementId"]]
        lc.complete(ctx, process, element, inst, flows=tuple(winner[:1]), trigger=trigger)
