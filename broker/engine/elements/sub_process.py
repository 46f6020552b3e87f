"""Embedded sub-processes and event sub-processes: flow scopes inside an instance."""

from __future__ import annotations

from broker.engine import behaviors as b
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.base import ContainerProcessor
from broker.protocol.enums import ProcessEventIntent, ValueType
from broker.state.element_instance import ElementInstance


class SubProcessProcessor(ContainerProcessor):
    """Begins at its none start event and completes when its last child has left."""

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if not lc.prepare(ctx, process, element, inst):
            return
        inst = lc.activated(ctx, inst)
        start = process.none_start_event_of(element.id)
        assert start is not None
        b.activate_element(ctx, start, inst.value, inst.key)


class EventSubProcessProcessor(ContainerProcessor):
    """Starts only through its start event's trigger, at that start event."""

    started_by_flow = False
    hides_sibling_event_sub_processes = True

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if not lc.prepare(ctx, process, element, inst):
            return
        inst = lc.activated(ctx, inst)
        trigger = ctx.state.event_triggers.get(inst.key)
        assert trigger is not None, "an event sub-process starts only through its start event's trigger"
        start_key = ctx.keys.next_key()
        moved = {**trigger, "scopeKey": inst.key}
        ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERED, start_key, moved)
        b.activate_element(ctx, process.element(trigger["targetElementId"]), inst.value, inst.key, key=start_key)
