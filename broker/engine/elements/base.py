"""The hooks an element kind implements; defaults describe an element that does nothing special.

A processor is stateless and shared: everything it needs comes in the arguments. The lifecycle (:mod:`.lifecycle`)
calls the hooks; a hook that fails raises an incident and returns, leaving the instance where it is so that resolving
the incident runs the step again.
"""

from __future__ import annotations

from typing import Any

from broker.engine import behaviors as b
from broker.engine import events
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.protocol.enums import ProcessEventIntent, ProcessInstanceIntent, ValueType
from broker.state.element_instance import ElementInstance

PI = ProcessInstanceIntent


class ElementProcessor:
    """One element kind's behaviour at each step of its lifecycle."""

    # A multi-instance body: its children are instances of its own element (they leave through it, and the element's
    # boundary events are the body's).
    contains_its_own_element = False
    # An ad-hoc sub-process: :meth:`before_child_completed` also runs for each child that ends a path (completes
    # without outgoing flows).
    hears_ending_paths = False
    # Token counting (the appliers keep how many sequence flows are in flight in each scope):
    # - ``started_by_flow``: its activation consumes the flows that reached it (one, or the arrived ones of a join);
    #   False for what an event or its scope starts (start and boundary events, processes, event sub-processes).
    # - ``reached_by_link``: its activation consumes the token its link throw event left in flight.
    # - ``leaves_by_link``: completing, it leaves a token in flight for the link catch event it continues at.
    started_by_flow = True
    reached_by_link = False
    leaves_by_link = False
    # An event sub-process: an error or escalation thrown inside it is not caught by the event sub-processes of its
    # flow scope (itself and its siblings), only further out.
    hides_sibling_event_sub_processes = False
    # Compensation (see :mod:`.compensation`):
    # - ``keeps_compensation_inside``: completing, it keeps the compensation subscriptions of what completed inside
    #   it (under one of its own), so that they can be compensated from outside (a sub-process, a multi-instance body).
    # - ``drops_compensation_inside``: terminated, the subscriptions of what completed inside it go with it.
    # - ``compensates_enclosing_scope``: a compensation throw event inside it also compensates the activities of the
    #   scope around it (an event sub-process acts for the scope it interrupts or runs beside).
    keeps_compensation_inside = False
    drops_compensation_inside = False
    compensates_enclosing_scope = False
    # A trigger stored on a scope that targets it ends the scope's flow (a terminate end event; the start event of an
    # interrupting event sub-process about to start): what completes in the scope meanwhile goes nowhere.
    ends_the_flow_of_its_scope = False

    def event_targets(self, process: bpmn.Process, element: bpmn.Element | None) -> list[bpmn.Element]:
        """The events an instance of this element subscribes to while active. Default: its boundary events."""
        assert element is not None
        return list(process.boundary_events_of(element.id))

    def on_event(
        self,
        ctx: ProcessingContext,
        process: bpmn.Process,
        inst: ElementInstance,
        target: bpmn.Element,
        variables: dict,
    ) -> None:
        """One of :meth:`event_targets` occurred while ``inst`` waits. Default: a boundary event fires; an
        interrupting one first terminates the activity it is attached to."""
        if target.attached_to_id != inst.value.element_id:
            raise ValueError(f"'{target.id}' is not an event that element '{inst.value.element_id}' waits for")
        if target.interrupts:
            b.trigger_boundary(ctx, inst, target, variables)
            return
        v = inst.value
        boundary_key = ctx.keys.next_key()
        ctx.event(
            ValueType.PROCESS_EVENT,
            ProcessEventIntent.TRIGGERED,
            boundary_key,
            {**b.event_trigger(ctx, inst, target, variables), "scopeKey": boundary_key},
        )
        b.activate_element(ctx, target, v, v.flow_scope_key, key=boundary_key)

    def activation_blocked(self, ctx: ProcessingContext, element: bpmn.Element, scope_key: int) -> str | None:
        """Why the element may not be activated yet (a join still waiting), or None."""
        return None

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        """The instance is ACTIVATING: do the kind's work, then move on (or wait). Default: pass through."""
        assert element is not None
        if lc.prepare(ctx, process, element, inst):
            lc.pass_through(ctx, process, element, inst)

    def on_complete(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        """COMPLETE_ELEMENT arrived (the awaited job, event or children are done). Default: complete."""
        lc.complete(ctx, process, element, inst)

    def variables_without_output_mappings(
        self, ctx: ProcessingContext, element: bpmn.Element, inst: ElementInstance
    ) -> dict[str, Any] | None:
        """What reaches the flow scope when the element completes without output mappings. Default: nothing (a
        job's variables were merged when it completed)."""
        return None

    def before_completed(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        """Output mappings are applied; the instance is about to be COMPLETED (its state still readable)."""

    def on_completed(
        self,
        ctx: ProcessingContext,
        process: bpmn.Process,
        element: bpmn.Element | None,
        inst: ElementInstance,
        flows: tuple[bpmn.SequenceFlow, ...] | None,
        trigger: dict | None,
    ) -> None:
        """The instance is COMPLETED. Default: take the outgoing flows."""
        assert element is not None
        lc.take_outgoing(ctx, process, element, inst, flows, trigger)

    def on_terminating(self, ctx: ProcessingContext, inst: ElementInstance) -> bool:
        """The instance is TERMINATING: start terminating what runs inside it. True when it must wait for that to
        end (the last one to go calls :func:`.lifecycle.terminated`); False to be terminated at once. Default: its
        child element instances."""
        if ctx.state.elements.children(inst.key):
            lc.terminate_children(ctx, inst.key)
            return True
        return False

    def on_terminate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        """The instance's children are gone and it is about to be TERMINATED: clean up what it holds."""
        lc.clean_up(ctx, inst)

    def on_terminated(
        self,
        ctx: ProcessingContext,
        process: bpmn.Process,
        element: bpmn.Element | None,
        inst: ElementInstance,
        trigger: dict | None,
    ) -> None:
        """The instance is TERMINATED. Default: an interrupting boundary event that caused it starts; otherwise the
        flow scope hears that a child left."""
        v = inst.value
        scope_key = v.flow_scope_key
        if trigger is not None:
            boundary = process.elements.get(trigger["targetElementId"])
            if boundary is not None and boundary.attached_to_id is not None:
                boundary_key = ctx.keys.next_key()
                ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERED, boundary_key, trigger)
                b.activate_element(ctx, boundary, v, scope_key, key=boundary_key)
                return
        lc.child_left(ctx, scope_key, completed=False)

    # -- containers (process, sub-processes): what happens when a child arrives or leaves -------------------

    def on_child_activating(
        self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance, child: ElementInstance
    ) -> bool:
        """A child was just written ACTIVATING, before its own activation; False after raising an incident."""
        return True

    def before_child_completed(
        self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance, child: ElementInstance
    ) -> bool:
        """A child of a multi-instance body, or one ending a path in a scope that :attr:`hears_ending_paths`, is
        about to be COMPLETED (its variables are still there); False after raising an incident on it."""
        return True

    def on_child_completed(self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance) -> None:
        """A child completed without outgoing flows. Only containers have children."""
        raise NotImplementedError(f"{type(self).__name__} has no children")

    def on_child_terminated(self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance) -> None:
        """A child terminated. Only containers have children."""
        raise NotImplementedError(f"{type(self).__name__} has no children")


class ContainerProcessor(ElementProcessor):
    """A flow scope (process, sub-process, event sub-process): it ends when its last child leaves, and subscribes
    to the start events of the event sub-processes inside it."""

    def event_targets(self, process: bpmn.Process, element: bpmn.Element | None) -> list[bpmn.Element]:
        scope_id = process.id if element is None else element.id
        own = super().event_targets(process, element) if element is not None else []
        return own + list(process.event_sub_process_starts_of(scope_id))

    def on_event(
        self,
        ctx: ProcessingContext,
        process: bpmn.Process,
        inst: ElementInstance,
        target: bpmn.Element,
        variables: dict,
    ) -> None:
        """An event sub-process's start event fired inside this scope; an interrupting one first terminates the
        scope's other children and stops its other event sub-processes."""
        if target.attached_to_id is not None:
            super().on_event(ctx, process, inst, target, variables)
            return
        if target.interrupts:
            events.close_event_sub_process_subscriptions(ctx, process, inst)
            b.trigger_event_sub_process(ctx, inst, target, variables)
        else:
            trigger = b.event_trigger(ctx, inst, target, variables)
            b.start_event_sub_process(ctx, inst, target, trigger, interrupting=False)

    def on_child_completed(self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance) -> None:
        self._maybe_complete(ctx, process, scope)

    def on_child_terminated(self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance) -> None:
        if scope.state == PI.ELEMENT_TERMINATING:
            if scope.children == 0:
                lc.terminated(ctx, scope)
            return
        self._maybe_complete(ctx, process, scope)

    @staticmethod
    def _maybe_complete(ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance) -> None:
        """With nothing left inside, the scope completes, or the interrupting event sub-process that waited for the
        other children to terminate starts."""
        if scope.state != PI.ELEMENT_ACTIVATED or scope.children != 0:
            return
        trigger = ctx.state.event_triggers.get(scope.key)
        if trigger is not None:
            target = process.elements.get(trigger["targetElementId"])
            scope_id = process.id if scope.value.is_root else scope.value.element_id
            starts = process.event_sub_process_starts_of(scope_id)
            if target is not None and any(s.id == target.id for s in starts):
                b.start_event_sub_process(ctx, scope, target, trigger, interrupting=True)
                return
        if scope.flows == 0:
            ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.COMPLETE_ELEMENT, scope.key, scope.value.to_dict())
