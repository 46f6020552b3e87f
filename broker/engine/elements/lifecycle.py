"""The element instance lifecycle: the legal transitions, checked in one place, and the steps every kind shares.

ACTIVATING → ACTIVATED → COMPLETING → COMPLETED, or TERMINATING → TERMINATED from any state but the final ones.
Element processors (one per kind, see :mod:`.registry`) decide *when* to move; the functions here write the
transition, apply the element's shared behaviours (subscriptions, mappings, incidents) and hand over to the next
element or to the enclosing scope's container hooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from broker.engine import behaviors as b
from broker.engine import events
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import compensation, execution_listeners
from broker.engine.elements.lookup import processor_for, processor_of
from broker.protocol.enums import ProcessEventIntent, ProcessInstanceIntent, ValueType
from broker.protocol.record import Record
from broker.state.element_instance import ElementInstance

if TYPE_CHECKING:
    from broker.engine.elements.base import ElementProcessor

PI = ProcessInstanceIntent

# The state an element instance may move to from each state (None: the instance does not exist yet).
TRANSITIONS: Final[dict[int | None, frozenset[int]]] = {
    None: frozenset({PI.ELEMENT_ACTIVATING}),
    PI.ELEMENT_ACTIVATING: frozenset({PI.ELEMENT_ACTIVATED, PI.ELEMENT_TERMINATING}),
    PI.ELEMENT_ACTIVATED: frozenset({PI.ELEMENT_COMPLETING, PI.ELEMENT_TERMINATING}),
    PI.ELEMENT_COMPLETING: frozenset({PI.ELEMENT_COMPLETED, PI.ELEMENT_TERMINATING}),
    PI.ELEMENT_TERMINATING: frozenset({PI.ELEMENT_TERMINATED}),
}


class IllegalTransition(RuntimeError):
    """A processor tried a lifecycle move the table does not allow: a bug, never a user's mistake.

    Raised while processing, it rolls back the command (the partition keeps serving) and is logged with the key.
    """


def transition(ctx: ProcessingContext, inst: ElementInstance, intent: PI) -> ElementInstance:
    """Write the lifecycle event ``intent`` for ``inst`` after checking it against :data:`TRANSITIONS`; the instance
    in its new state."""
    return _write_transition(ctx, inst, intent)[0]


def _write_transition(ctx: ProcessingContext, inst: ElementInstance, intent: PI) -> tuple[ElementInstance, Record]:
    if intent not in TRANSITIONS.get(inst.state, frozenset()):
        raise IllegalTransition(
            f"element instance {inst.key}: {PI(inst.state).name} → {PI(intent).name} is not a legal transition"
        )
    record = ctx.instance_event(intent, inst.key, inst.value)
    return inst.with_state(intent), record


def element_of(process: bpmn.Process, inst: ElementInstance) -> bpmn.Element | None:
    """The model element of an instance; None for the process itself."""
    if inst.value.is_root:
        return None
    return process.element(inst.value.element_id)


def process_of(ctx: ProcessingContext, inst: ElementInstance) -> bpmn.Process:
    return b.services(ctx).models.get(inst.value.process_definition_key)


# -- shared activation steps: each returns False after raising an incident -----------------------------------


def take_event_variables(ctx: ProcessingContext, inst: ElementInstance) -> dict | None:
    """The trigger that activated this event (if any); its variables become the event's local variables."""
    trigger = ctx.state.event_triggers.get(inst.key)
    if trigger and trigger.get("variables"):
        b.set_local_document(ctx, inst.key, trigger["variables"], inst)
    return trigger


def apply_inputs(ctx: ProcessingContext, element: bpmn.Element, inst: ElementInstance) -> bool:
    """Input mappings, then the element's start execution listeners, one job at a time (False while one runs)."""
    if inst.listener_index == 0:  # past the first start listener, the mappings were applied
        failure = b.apply_input_mappings(ctx, element, inst)
        if failure is not None:
            b.raise_incident(ctx, inst, "IO_MAPPING_ERROR", failure.message)
            return False
    return not element.start_listeners or execution_listeners.run_next(ctx, element.start_listeners, inst)


def subscribe(
    ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
) -> bool:
    """Open the timer, message and signal subscriptions of the instance (its own, boundary and event sub-process
    events)."""
    targets: Sequence[bpmn.Element] = subscription_targets(process, element, processor_of(ctx, inst.value))
    if not targets:
        return True
    if element is not None and body_of(ctx, inst) is not None:  # the boundary events are the body's
        targets = [t for t in targets if t.attached_to_id != element.id]
    problem = events.open_subscriptions(ctx, targets, inst)
    if problem is not None:
        b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", problem)
        return False
    return True


def subscription_targets(
    process: bpmn.Process, element: bpmn.Element | None, processor: ElementProcessor
) -> tuple[bpmn.Element, ...]:
    """The events an instance of ``element`` run by ``processor`` may open subscriptions for (timers, messages,
    signals): none means it never owns one, so it has none to open or close. Derived once per element and kind."""
    key = ("subscription_targets", element.id if element is not None else None, processor)
    found = process.derived.get(key)
    if found is None:
        found = process.derived[key] = tuple(
            t
            for t in processor.event_targets(process, element)
            if t.timer is not None or t.message is not None or t.signal_name is not None
        )
    return found


def prepare(ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element, inst: ElementInstance) -> bool:
    """Input mappings, then subscriptions: what every activity and event does before its own work."""
    return apply_inputs(ctx, element, inst) and subscribe(ctx, process, element, inst)


# -- transitions ---------------------------------------------------------------------------------------------


def activated(ctx: ProcessingContext, inst: ElementInstance) -> ElementInstance:
    return transition(ctx, inst, PI.ELEMENT_ACTIVATED)


def pass_through(ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element, inst: ElementInstance) -> None:
    """An element with nothing to wait for: activated and completed in the same step."""
    complete(ctx, process, element, activated(ctx, inst))


def complete(
    ctx: ProcessingContext,
    process: bpmn.Process,
    element: bpmn.Element | None,
    inst: ElementInstance,
    flows: tuple[bpmn.SequenceFlow, ...] | None = None,
    trigger: dict | None = None,
) -> None:
    """COMPLETING (closing subscriptions), output mappings, end execution listeners, COMPLETED, then the kind's
    ``on_completed``.

    ``flows``: the outgoing flows to take (default: all). ``trigger``: the event an event-based gateway received;
    it moves to the winning catch event. A failing output mapping leaves the instance COMPLETING with an incident;
    so does each end listener while its job runs (COMPLETE_EXECUTION_LISTENER comes back here).
    """
    processor = processor_of(ctx, inst.value)
    if inst.state != PI.ELEMENT_COMPLETING:
        inst = transition(ctx, inst, PI.ELEMENT_COMPLETING)
        own = element if element is not None else element_of(process, inst)  # a body may come without one
        if subscription_targets(process, own, processor):
            events.close_subscriptions(ctx, inst)
        if inst.listener_index:  # as the COMPLETING applier did: the end listeners count from the first
            inst = inst.with_listener_index(0)
    body = body_of(ctx, inst)
    # past the first end listener, the mappings were applied
    if (
        element is not None
        and inst.listener_index == 0
        and not _apply_outputs(ctx, processor, element, inst, body is not None)
    ):
        return
    if process.uses_execution_listeners:
        end_listeners = execution_listeners.of(ctx, process, inst, bpmn.LISTENER_END)
        if end_listeners and not execution_listeners.run_next(ctx, end_listeners, inst):
            return
    if body is not None and not processor_of(ctx, body.value).before_child_completed(ctx, process, body, inst):
        return
    if body is None and not _path_may_end(ctx, process, inst):
        return
    processor.before_completed(ctx, process, element, inst)
    compensation.on_completing(ctx, process, inst)
    inst = transition(ctx, inst, PI.ELEMENT_COMPLETED)
    if compensation.is_handler(inst.value):
        compensation.handler_completed(ctx, inst)
    processor.on_completed(ctx, process, element, inst, flows, trigger)


def _apply_outputs(
    ctx: ProcessingContext, processor: ElementProcessor, element: bpmn.Element, inst: ElementInstance, in_body: bool
) -> bool:
    """Output mappings, or what reaches the flow scope without them; False after raising an incident.

    An instance of a multi-instance activity (``in_body``) holds its loop variables (input element, ``loopCounter``,
    the output element's variable), as in Zeebe: its output mappings merge from the instance itself, and what it
    hands on without them (event variables, a decision's result) keeps those names in it.
    """
    flow_scope_key = inst.value.flow_scope_key
    if element.output_mappings:
        failure = b.apply_output_mappings(ctx, element, inst, inst.key if in_body else flow_scope_key)
        if failure is not None:
            b.raise_incident(ctx, inst, "IO_MAPPING_ERROR", failure.message)
            return False
        return True
    document = processor.variables_without_output_mappings(ctx, element, inst)
    if document and in_body:
        from broker.engine.elements.multi_instance import loop_variables  # it builds on this module

        kept = loop_variables(element.multi_instance)
        document = {name: value for name, value in document.items() if name not in kept}
    if document and flow_scope_key > 0:
        b.merge_document(ctx, flow_scope_key, document)
    return True


def _path_may_end(ctx: ProcessingContext, process: bpmn.Process, inst: ElementInstance) -> bool:
    """An element without outgoing flows ends its path: a scope that hears ending paths (an ad-hoc sub-process)
    looks at it before it is COMPLETED; False after it raised an incident on it."""
    own = process.elements.get(inst.value.element_id)
    if own is None or own.outgoing:
        return True
    scope_element = process.elements.get(own.flow_scope_id)  # asked first: the model is cheaper than the state
    if scope_element is None or not processor_for(ctx, scope_element).hears_ending_paths:
        return True
    scope = ctx.state.elements.get(inst.value.flow_scope_key)
    if scope is None:
        return True
    return processor_of(ctx, scope.value).before_child_completed(ctx, process, scope, inst)


def take_outgoing(
    ctx: ProcessingContext,
    process: bpmn.Process,
    element: bpmn.Element,
    inst: ElementInstance,
    flows: tuple[bpmn.SequenceFlow, ...] | None,
    trigger: dict | None,
) -> None:
    """Leave a completed element over its outgoing flows; with none, tell the flow scope a child left.

    An instance of a multi-instance activity leaves through its body instead.
    """
    v = inst.value
    if body_of(ctx, inst) is not None:
        child_left(ctx, v.flow_scope_key, completed=True)
        return
    outgoing = flows if flows is not None else process.outgoing_flows(element.id)
    for flow in outgoing:
        target_key = None
        if trigger is not None:
            target_key = ctx.keys.next_key()
            moved = {**trigger, "scopeKey": target_key}
            ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERED, target_key, moved)
        take_flow(ctx, process, flow, inst, key=target_key)
    if not outgoing:
        child_left(ctx, v.flow_scope_key, completed=True)
    elif any(process.element(flow.target_id).is_join for flow in outgoing):
        reconsider_joins(ctx, process, v.flow_scope_key)


def take_flow(
    ctx: ProcessingContext,
    process: bpmn.Process,
    flow: bpmn.SequenceFlow,
    inst: ElementInstance,
    key: int | None = None,
) -> None:
    """Take a sequence flow out of ``inst`` and activate its target; a join only once it may activate (the token
    waits there until then).

    ``key``: the target's element instance key when it was chosen beforehand (an event-based gateway's winner).
    """
    v = inst.value
    scope_key = v.flow_scope_key
    flow_value = v.for_element(flow.id, "SEQUENCE_FLOW", bpmn.UNSPECIFIED, scope_key)
    ctx.instance_event(PI.SEQUENCE_FLOW_TAKEN, ctx.keys.next_key(), flow_value)
    target = process.element(flow.target_id)
    if target.is_join and processor_for(ctx, target).activation_blocked(ctx, target, scope_key) is not None:
        return
    b.activate_element(ctx, target, v, scope_key, key=key)


def reconsider_joins(ctx: ProcessingContext, process: bpmn.Process, scope_key: int) -> None:
    """Something changed in the scope (a token moved, arrived or left): a join whose tokens waited may activate now.

    Only inclusive joins wait for something other than their own incoming flows (the tokens that can still reach
    them); parallel joins activate when their last flow is taken.
    """
    scope = ctx.state.elements.get(scope_key) if scope_key > 0 else None
    if scope is None or scope.state != PI.ELEMENT_ACTIVATED:
        return
    for join in process.inclusive_joins_in(scope.value.element_id):
        if processor_for(ctx, join).activation_blocked(ctx, join, scope_key) is None:
            b.activate_element(ctx, join, scope.value, scope_key)


def body_of(ctx: ProcessingContext, inst: ElementInstance) -> ElementInstance | None:
    """The multi-instance body ``inst`` is an instance of, if it is one."""
    scope_key = inst.value.flow_scope_key
    scope = ctx.state.elements.get(scope_key) if scope_key > 0 else None
    if scope is None or not processor_of(ctx, scope.value).contains_its_own_element:
        return None
    return scope


def child_left(ctx: ProcessingContext, scope_key: int, *, completed: bool) -> None:
    """A child completed without outgoing flows, or terminated: the scope's container hook decides what follows."""
    scope = ctx.state.elements.get(scope_key) if scope_key > 0 else None
    if scope is None:
        return
    processor = processor_of(ctx, scope.value)
    process = process_of(ctx, scope)
    if scope.flows > 0:  # tokens wait at joins: one may activate now that this one is gone
        reconsider_joins(ctx, process, scope_key)
    if completed:
        processor.on_child_completed(ctx, process, scope)
    else:
        processor.on_child_terminated(ctx, process, scope)


def terminate(ctx: ProcessingContext, inst: ElementInstance) -> Record:
    """Start terminating ``inst``: what runs inside it first (its kind's ``on_terminating``), then the instance
    itself. Returns the TERMINATING event."""
    inst, terminating = _write_transition(ctx, inst, PI.ELEMENT_TERMINATING)
    if not processor_of(ctx, inst.value).on_terminating(ctx, inst):
        terminated(ctx, inst)
    return terminating


def terminate_children(ctx: ProcessingContext, scope_key: int, *, keep: int = -1) -> None:
    """Write TERMINATE_ELEMENT for every child of the scope not already terminating (except ``keep``)."""
    for child_key in ctx.state.elements.children(scope_key):
        child = ctx.state.elements.get(child_key)
        if child_key != keep and child is not None and child.state != PI.ELEMENT_TERMINATING:
            ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.TERMINATE_ELEMENT, child_key, child.value.to_dict())


def terminated(ctx: ProcessingContext, inst: ElementInstance) -> None:
    """The instance has no children left: the kind cleans up, TERMINATED, then what its termination triggers."""
    processor = processor_of(ctx, inst.value)
    process = process_of(ctx, inst)
    element = element_of(process, inst)
    processor.on_terminate(ctx, process, element, inst)
    # read before TERMINATED: ending the element removes its state, the pending trigger included
    trigger = ctx.state.event_triggers.get(inst.key)
    inst = transition(ctx, inst, PI.ELEMENT_TERMINATED)
    processor.on_terminated(ctx, process, element, inst, trigger)


def clean_up(ctx: ProcessingContext, inst: ElementInstance) -> None:
    """What every element leaves behind when it ends early: its job, subscriptions (compensation ones included) and
    open incidents."""
    b.cancel_job(ctx, inst)
    events.close_subscriptions(ctx, inst)
    compensation.on_ended_early(ctx, inst)
    b.resolve_incidents_of(ctx, inst)
