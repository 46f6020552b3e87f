"""Events that throw: terminate, error, escalation and signal end/throw events, and link events.

None end and none intermediate throw events pass through (the base processor).
"""

from __future__ import annotations

from typing import Any

from broker.engine import behaviors as b
from broker.engine import events, signals
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.base import ElementProcessor
from broker.engine.expressions import ExpressionFailure
from broker.protocol.enums import EscalationIntent, ProcessEventIntent, ValueType
from broker.state.element_instance import ElementInstance


class TerminateEndEventProcessor(ElementProcessor):
    """Every other element of the scope terminates, then the scope completes."""

    ends_the_flow_of_its_scope = True

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if not lc.prepare(ctx, process, element, inst):
            return
        inst = lc.activated(ctx, inst)
        scope_key = inst.value.flow_scope_key
        scope = ctx.state.elements.get(scope_key)
        if scope is not None:
            trigger = b.event_trigger(ctx, scope, element, {})
            ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERING, ctx.keys.next_key(), trigger)
            lc.terminate_children(ctx, scope_key, keep=inst.key)
        lc.complete(ctx, process, element, inst)


class ErrorEndEventProcessor(ElementProcessor):
    """Throws a BPMN error to the nearest catch; uncaught, an incident."""

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if not lc.prepare(ctx, process, element, inst):
            return
        code_source = element.error.error_code if element.error and element.error.error_code else ""
        code = b.evaluate(ctx, code_source, inst.key) if code_source else ""
        if isinstance(code, ExpressionFailure):
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", code.message)
            return
        code = str(code)
        catch = events.find_error_catch(ctx, process, inst, code)
        if catch is None:
            b.raise_incident(ctx, inst, "UNHANDLED_ERROR_EVENT", b.unhandled_error_message(code, ""))
            return
        inst = lc.activated(ctx, inst)
        attached, catch_event = catch
        events.fire(ctx, lc.process_of(ctx, attached), attached, catch_event, {})


class EscalationThrowProcessor(ElementProcessor):
    """Escalation throw and end events: the nearest catch fires; uncaught, the flow simply continues."""

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if not lc.prepare(ctx, process, element, inst):
            return
        source = element.escalation_code or ""
        code = b.evaluate(ctx, source, inst.key) if source else ""
        if isinstance(code, ExpressionFailure):
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", code.message)
            return
        code = str(code)
        catch = events.find_escalation_catch(ctx, process, inst, code)
        v = inst.value
        value = {
            "processInstanceKey": v.process_instance_key,
            "escalationCode": code,
            "throwElementId": element.id,
            "catchElementId": catch[1].id if catch else "",
            "tenantId": v.tenant_id,
        }
        if catch is None:
            ctx.event(ValueType.ESCALATION, EscalationIntent.NOT_ESCALATED, ctx.keys.next_key(), value)
            lc.pass_through(ctx, process, element, inst)
            return
        ctx.event(ValueType.ESCALATION, EscalationIntent.ESCALATED, ctx.keys.next_key(), value)
        inst = lc.activated(ctx, inst)
        attached, catch_event = catch
        events.fire(ctx, lc.process_of(ctx, attached), attached, catch_event, {})
        if not catch_event.interrupts:
            lc.complete(ctx, process, element, inst)


class SignalThrowProcessor(ElementProcessor):
    """Signal throw and end events: broadcast with the event's local variables (its input mappings), then go on."""

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if not lc.prepare(ctx, process, element, inst):
            return
        source = element.signal_name or ""
        name = b.evaluate(ctx, source, inst.key)
        if isinstance(name, ExpressionFailure) or not isinstance(name, str) or not name:
            reason = (
                name.message
                if isinstance(name, ExpressionFailure)
                else f"Expected the signal name '{source}' to be a non-empty STRING, but was '{name!r}'"
            )
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", reason)
            return
        inst = lc.activated(ctx, inst)
        signals.broadcast(ctx, inst.value.tenant_id, name, ctx.state.variables.local(inst.key))
        if ctx.state.elements.get(inst.key) is not None:
            lc.complete(ctx, process, element, inst)


class LinkThrowEventProcessor(ElementProcessor):
    """Continues at the link catch event of the same name in its scope, without a sequence flow."""

    leaves_by_link = True

    def on_completed(
        self,
        ctx: ProcessingContext,
        process: bpmn.Process,
        element: bpmn.Element | None,
        inst: ElementInstance,
        flows: tuple[bpmn.SequenceFlow, ...] | None,
        trigger: dict | None,
    ) -> None:
        # the COMPLETED applier keeps the token in flight on the flow scope until the catch event's activation
        # consumes it
        assert element is not None
        v = inst.value
        b.activate_element(ctx, b.link_catch(process, element), v, v.flow_scope_key)


class LinkCatchEventProcessor(ElementProcessor):
    """Entered from its link throw event: nothing to wait for."""

    reached_by_link = True

    def variables_without_output_mappings(
        self, ctx: ProcessingContext, element: bpmn.Element, inst: ElementInstance
    ) -> dict[str, Any] | None:
        return ctx.state.variables.local(inst.key)

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        lc.take_event_variables(ctx, inst)
        if lc.apply_inputs(ctx, element, inst):
            lc.pass_through(ctx, process, element, inst)
