"""The process itself: the root flow scope of an instance, and where CreateProcessInstanceWithResult is answered.

A process instance started by a call activity tells it when it starts, completes and terminates (see
:mod:`.call_activity`)."""

from __future__ import annotations

from broker.engine import behaviors as b
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import call_activity, execution_listeners
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.base import ContainerProcessor
from broker.protocol.enums import (
    ProcessEventIntent,
    ProcessInstanceResultIntent,
    RecordType,
    RejectionType,
    ValueType,
)
from broker.protocol.record import Record, RequestMetadata
from broker.protocol.values import ProcessInstanceValue
from broker.state.element_instance import ElementInstance


class ProcessProcessor(ContainerProcessor):
    started_by_flow = False

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        if inst.listener_index == 0 and inst.value.parent_element_instance_key > 0:  # not again after a listener
            call_activity.child_activating(ctx, inst)
        if process.start_listeners and not execution_listeners.run_next(ctx, process.start_listeners, inst):
            return
        if not lc.subscribe(ctx, process, None, inst):
            return
        inst = lc.activated(ctx, inst)
        v = inst.value
        trigger = ctx.state.event_triggers.get(inst.key)
        if trigger is not None:  # started by a timer, message or signal start event
            start_key = ctx.keys.next_key()
            ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERED, start_key, trigger)
            b.activate_element(ctx, process.element(trigger["targetElementId"]), v, inst.key, key=start_key)
            return
        start = process.none_start_event_of(process.id)
        assert start is not None
        b.activate_element(ctx, start, v, inst.key)

    def on_complete(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        # read before COMPLETED: ending the instance removes its variables and the awaited request
        awaiting = ctx.state.awaiting_results.get(inst.key)
        variables = None
        if awaiting is not None:
            variables = b.visible_variables(ctx, inst.key, awaiting.get("fetchVariables") or None)
        lc.complete(ctx, process, None, inst)
        if awaiting is not None and ctx.state.elements.get(inst.key) is None:  # not while an end listener runs
            _send_result(ctx, inst.value, awaiting, variables or {})

    def before_completed(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        if inst.value.parent_element_instance_key > 0:
            call_activity.child_completing(ctx, inst)

    def on_completed(
        self,
        ctx: ProcessingContext,
        process: bpmn.Process,
        element: bpmn.Element | None,
        inst: ElementInstance,
        flows: tuple[bpmn.SequenceFlow, ...] | None,
        trigger: dict | None,
    ) -> None:
        """The instance is over: there is nowhere to go but back to the call activity that started it, if any."""
        if inst.value.parent_element_instance_key > 0:
            call_activity.child_completed(ctx, inst)

    def on_terminate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        lc.clean_up(ctx, inst)
        awaiting = ctx.state.awaiting_results.get(inst.key)
        if awaiting is not None:
            _reject_result(ctx, inst.value, awaiting)

    def on_terminated(
        self,
        ctx: ProcessingContext,
        process: bpmn.Process,
        element: bpmn.Element | None,
        inst: ElementInstance,
        trigger: dict | None,
    ) -> None:
        """Cancelled, or terminated with the call activity that started it (which now ends too)."""
        if inst.value.parent_element_instance_key > 0:
            call_activity.child_terminated(ctx, inst)


def _send_result(ctx: ProcessingContext, v: ProcessInstanceValue, awaiting: dict, variables: dict) -> None:
    rec = ctx.event(
        ValueType.PROCESS_INSTANCE_RESULT,
        ProcessInstanceResultIntent.COMPLETED,
        v.process_instance_key,
        {
            "bpmnProcessId": v.bpmn_process_id,
            "processDefinitionKey": v.process_definition_key,
            "processInstanceKey": v.process_instance_key,
            "version": v.version,
            "variables": variables,
            "tenantId": v.tenant_id,
            "businessId": v.business_id,
            "tags": list(v.tags),
        },
    )
    ctx.respond(rec, RequestMetadata(awaiting["streamId"], awaiting["requestId"]))


def _reject_result(ctx: ProcessingContext, v: ProcessInstanceValue, awaiting: dict) -> None:
    rejection = Record(
        position=-1,
        key=v.process_instance_key,
        record_type=RecordType.COMMAND_REJECTION,
        value_type=ValueType.PROCESS_INSTANCE_CREATION,
        intent=2,
        timestamp=ctx.now,
        value={},
        rejection_type=RejectionType.INVALID_STATE,
        rejection_reason=(
            f"Expected to receive the result of process instance '{v.process_instance_key}', but it was terminated"
        ),
    )
    ctx.respond(rejection, RequestMetadata(awaiting["streamId"], awaiting["requestId"]))
