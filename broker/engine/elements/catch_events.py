"""Events that are entered through their trigger or wait for one: start, boundary and intermediate catch events, and
the receive task. Their trigger's variables become their local variables and, without output mappings, reach the
flow scope when they complete."""

from __future__ import annotations

from typing import Any

from broker.engine import behaviors as b
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.base import ElementProcessor
from broker.protocol.enums import ProcessInstanceIntent, ValueType
from broker.state.element_instance import ElementInstance


class _HandsOnItsEventVariables(ElementProcessor):
    """An event whose trigger's variables (its local variables) reach the flow scope when it has no output
    mappings."""

    def variables_without_output_mappings(
        self, ctx: ProcessingContext, element: bpmn.Element, inst: ElementInstance
    ) -> dict[str, Any] | None:
        return ctx.state.variables.local(inst.key)


class TriggeredEventProcessor(_HandsOnItsEventVariables):
    """Start and boundary events: their event has already happened when they are activated."""

    started_by_flow = False

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        lc.take_event_variables(ctx, inst)
        if lc.prepare(ctx, process, element, inst):
            lc.pass_through(ctx, process, element, inst)


class StartEventProcessor(TriggeredEventProcessor):
    """A start event: of a process, a sub-process, or an event sub-process, whose trigger may end its scope's flow."""

    ends_the_flow_of_its_scope = True


class _WaitsForItsEvent(_HandsOnItsEventVariables):
    """An element that subscribes to its own event and completes when it occurs (with the event's variables)."""

    def event_targets(self, process: bpmn.Process, element: bpmn.Element | None) -> list[bpmn.Element]:
        assert element is not None
        return [element, *super().event_targets(process, element)]

    def on_event(
        self,
        ctx: ProcessingContext,
        process: bpmn.Process,
        inst: ElementInstance,
        target: bpmn.Element,
        variables: dict,
    ) -> None:
        if target.id != inst.value.element_id:
            super().on_event(ctx, process, inst, target, variables)
            return
        if variables:
            b.set_local_document(ctx, inst.key, variables, inst)
        ctx.follow_up(
            ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.COMPLETE_ELEMENT, inst.key, inst.value.to_dict()
        )


class IntermediateCatchEventProcessor(_WaitsForItsEvent):
    """Waits for its timer, message or signal; as the winner of an event-based gateway its event already happened."""

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        trigger = lc.take_event_variables(ctx, inst)
        if not lc.apply_inputs(ctx, element, inst):
            return
        if trigger is not None:
            lc.pass_through(ctx, process, element, inst)
            return
        if lc.subscribe(ctx, process, element, inst):
            inst = lc.activated(ctx, inst)


class ReceiveTaskProcessor(_WaitsForItsEvent):
    """Waits for its message like a catch event, with boundary events like any activity."""

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if lc.prepare(ctx, process, element, inst):
            inst = lc.activated(ctx, inst)
