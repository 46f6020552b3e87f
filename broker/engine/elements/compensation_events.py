"""Compensation events: the intermediate throw and end events that compensate, and the boundary event that
associates an activity with its handler (see :mod:`.compensation` for the subscriptions behind them)."""

from __future__ import annotations

from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import compensation
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.base import ElementProcessor
from broker.state.element_instance import ElementInstance


class CompensationThrowProcessor(ElementProcessor):
    """Compensation intermediate throw and end events: trigger the handlers, wait for them, then go on."""

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if not lc.prepare(ctx, process, element, inst):
            return
        inst = lc.activated(ctx, inst)
        if not compensation.throw(ctx, process, element, inst):
            lc.complete(ctx, process, element, inst)  # nothing to compensate


class CompensationBoundaryProcessor(ElementProcessor):
    """A compensation boundary event is never waited for: compensation writes its whole lifecycle at once, before
    its handler starts (see :func:`.compensation.throw`). Activated any other way, it passes through."""

    started_by_flow = False
