"""The element instance lifecycle: ACTIVATE_ELEMENT, COMPLETE_ELEMENT and TERMINATE_ELEMENT commands.

ACTIVATING → ACTIVATED → COMPLETING → COMPLETED, or TERMINATING → TERMINATED, with SEQUENCE_FLOW_TAKEN between
elements (a link throw event instead activates the link catch event of the same name in its scope). Elements that do
not wait (events without triggers, gateways, pass-through tasks) go through their whole lifecycle while processing one
command. A failure (expression, mapping, uncaught error) becomes an incident and the element stays in ACTIVATING or
COMPLETING; resolving the incident runs that step again.
"""

from __future__ import annotations

from typing import Any

from broker.engine import behaviors as b
from broker.engine import events, signals
from broker.engine.bpmn import INITIAL_ENGINE_KINDS
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.expressions import ExpressionFailure
from broker.protocol.enums import (
    EscalationIntent,
    JobIntent,
    ProcessEventIntent,
    ProcessInstanceIntent,
    ProcessInstanceResultIntent,
    RecordType,
    RejectionType,
    ValueType,
)
from broker.protocol.record import Record, RequestMetadata

PI = ProcessInstanceIntent

# What this processor runs; deployment rejects models with anything else.
SUPPORTED_KINDS = INITIAL_ENGINE_KINDS

_PASS_THROUGH = frozenset(
    {bpmn.START_EVENT, bpmn.TASK, bpmn.MANUAL_TASK, bpmn.INTERMEDIATE_THROW_EVENT, bpmn.BOUNDARY_EVENT}
)
_THROW_EVENTS = frozenset({bpmn.END_EVENT, bpmn.INTERMEDIATE_THROW_EVENT})
_JOB_TASKS = frozenset({bpmn.SERVICE_TASK, bpmn.SEND_TASK, bpmn.SCRIPT_TASK, bpmn.BUSINESS_RULE_TASK, bpmn.USER_TASK})


def _element(process: bpmn.Process, inst: dict) -> bpmn.Element | None:
    """The model element of an instance; None for the process itself."""
    if inst["value"]["bpmnElementType"] == bpmn.PROCESS:
        return None
    return process.element(inst["value"]["elementId"])


class BpmnElementProcessor:
    """Runs the lifecycle steps of every supported element kind."""

    # -- ACTIVATE_ELEMENT ------------------------------------------------------------------------------------

    def activate(self, ctx: ProcessingContext, cmd: Record) -> None:
        v = cmd.value
        process = b.services(ctx).models.get(v["processDefinitionKey"])
        inst = ctx.state.elements.get(cmd.key)
        if inst is None:
            scope_key = v["flowScopeKey"]
            if scope_key > 0:
                scope = ctx.state.elements.get(scope_key)
                if scope is None or scope["state"] != PI.ELEMENT_ACTIVATED:
                    ctx.reject(
                        RejectionType.INVALID_STATE,
                        f"Expected to activate element '{v['elementId']}', but its flow scope is not active",
                    )
                    return
                element = process.element(v["elementId"])
                is_join = element.element_type == bpmn.PARALLEL_GATEWAY and len(element.incoming) > 1
                if is_join and not b.join_ready(ctx, scope_key, element):
                    ctx.reject(RejectionType.INVALID_STATE, "Expected all incoming flows of the join to be taken")
                    return
            ctx.event(ValueType.PROCESS_INSTANCE, PI.ELEMENT_ACTIVATING, cmd.key, v)
            inst = ctx.state.elements.get(cmd.key)
            assert inst is not None
            if scope_key > 0 and self._interrupted(ctx, process, scope_key):
                # a token that was on its way when a terminate end event or an interrupting event sub-process ended
                # the scope's flow: it arrives and is terminated at once
                ctx.event(ValueType.PROCESS_INSTANCE, PI.ELEMENT_TERMINATING, cmd.key, v)
                inst["state"] = PI.ELEMENT_TERMINATING
                self._terminated(ctx, inst)
                return
        elif inst["state"] != PI.ELEMENT_ACTIVATING:
            ctx.reject(RejectionType.INVALID_STATE, f"Expected element '{cmd.key}' to be activating")
            return
        self._on_activate(ctx, process, inst)

    @staticmethod
    def _interrupted(ctx: ProcessingContext, process: bpmn.Process, scope_key: int) -> bool:
        """Whether the scope's flow was ended: a terminate end event, or an interrupting event sub-process about
        to start (its own activation comes after the trigger has moved on)."""
        trigger = ctx.state.event_triggers.get(scope_key)
        if trigger is None:
            return False
        target = process.elements.get(trigger["targetElementId"])
        return target is not None and target.element_type in (bpmn.END_EVENT, bpmn.START_EVENT)

    def _on_activate(self, ctx: ProcessingContext, process: bpmn.Process, inst: dict) -> None:
        element = _element(process, inst)
        v = inst["value"]
        if element is None:  # the process itself
            problem = events.open_subscriptions(ctx, process, None, inst)
            if problem is not None:
                b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", problem)
                return
            self._activated(ctx, inst)
            trigger = ctx.state.event_triggers.get(inst["key"])
            if trigger is not None:  # started by a timer, message or signal start event
                start_key = ctx.keys.next_key()
                ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERED, start_key, trigger)
                b.activate_element(ctx, process.element(trigger["targetElementId"]), v, inst["key"], key=start_key)
                return
            start = process.none_start_event_of(process.id)
            assert start is not None
            b.activate_element(ctx, start, v, inst["key"])
            return
        etype = element.element_type
        triggered = None
        if etype in (bpmn.BOUNDARY_EVENT, bpmn.START_EVENT, bpmn.INTERMEDIATE_CATCH_EVENT):
            triggered = ctx.state.event_triggers.get(inst["key"])
            if triggered and triggered.get("variables"):
                b.set_local_document(ctx, inst["key"], triggered["variables"], inst)
        failure = b.apply_input_mappings(ctx, element, inst)
        if failure is not None:
            b.raise_incident(ctx, inst, "IO_MAPPING_ERROR", failure.message)
            return
        if etype == bpmn.INTERMEDIATE_CATCH_EVENT and (triggered is not None or element.event_type == bpmn.LINK):
            # the winner of an event-based gateway (its event already happened), or a link catch event entered from
            # its throw event: nothing to wait for
            self._activated(ctx, inst)
            self._complete(ctx, process, element, inst)
            return
        problem = events.open_subscriptions(ctx, process, element, inst)
        if problem is not None:
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", problem)
            return
        if etype in events.CATCH_ELEMENTS:
            self._activated(ctx, inst)  # waits for its timer or message
        elif etype in _JOB_TASKS:
            self._create_job(ctx, process, element, inst)
        elif etype == bpmn.SUB_PROCESS:
            self._activated(ctx, inst)
            start = process.none_start_event_of(element.id)
            assert start is not None
            b.activate_element(ctx, start, v, inst["key"])
        elif etype == bpmn.EVENT_SUB_PROCESS:
            self._activated(ctx, inst)
            trigger = ctx.state.event_triggers.get(inst["key"])
            assert trigger is not None, "an event sub-process starts only through its start event's trigger"
            start_key = ctx.keys.next_key()
            moved = {**trigger, "scopeKey": inst["key"]}
            ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERED, start_key, moved)
            b.activate_element(ctx, process.element(trigger["targetElementId"]), v, inst["key"], key=start_key)
        elif etype == bpmn.EVENT_BASED_GATEWAY:
            self._activated(ctx, inst)  # waits for the first of its events
        elif etype == bpmn.END_EVENT and element.event_type == bpmn.TERMINATE:
            self._terminate_scope(ctx, process, element, inst)
        elif etype in _THROW_EVENTS and element.event_type == bpmn.ESCALATION:
            self._throw_escalation(ctx, process, element, inst)
        elif etype in _THROW_EVENTS and element.event_type == bpmn.SIGNAL:
            self._throw_signal(ctx, process, element, inst)
        elif etype == bpmn.EXCLUSIVE_GATEWAY:
            flow = self._choose_flow(ctx, process, element, inst)
            if flow is None:
                return
            self._activated(ctx, inst)
            self._complete(ctx, process, element, inst, flows=(flow,))
        elif etype == bpmn.END_EVENT and element.event_type == bpmn.ERROR:
            self._throw_error_end(ctx, process, element, inst)
        else:  # pass-through elements, none end events, parallel gateways
            self._activated(ctx, inst)
            self._complete(ctx, process, element, inst)

    def _activated(self, ctx: ProcessingContext, inst: dict) -> None:
        ctx.event(ValueType.PROCESS_INSTANCE, PI.ELEMENT_ACTIVATED, inst["key"], inst["value"])
        inst["state"] = PI.ELEMENT_ACTIVATED

    def _create_job(self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element, inst: dict) -> None:
        job_def = element.job
        assert job_def is not None
        job_type = b.evaluate(ctx, job_def.type, inst["key"])
        if isinstance(job_type, ExpressionFailure) or not isinstance(job_type, str) or not job_type:
            reason = (
                job_type.message
                if isinstance(job_type, ExpressionFailure)
                else (
                    f"Expected result of the expression '{job_def.type}' to be 'STRING', but was "
                    f"'{b.describe_type(job_type)}'."
                )
            )
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", reason)
            return
        retries: Any = b.evaluate(ctx, job_def.retries, inst["key"])
        if isinstance(retries, str):
            try:
                retries = int(retries)
            except ValueError:
                retries = ExpressionFailure(f"Expected retries '{job_def.retries}' to be a number")
        if isinstance(retries, ExpressionFailure) or not isinstance(retries, int | float) or isinstance(retries, bool):
            reason = (
                retries.message
                if isinstance(retries, ExpressionFailure)
                else (
                    f"Expected result of the expression '{job_def.retries}' to be 'NUMBER', but was "
                    f"'{b.describe_type(retries)}'."
                )
            )
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", reason)
            return
        v = inst["value"]
        job_key = ctx.keys.next_key()
        job = {
            "type": job_type,
            "worker": "",
            "retries": int(retries),
            "retryBackoff": 0,
            "recurringTime": -1,
            "deadline": -1,
            "timeout": -1,
            "customHeaders": dict(job_def.headers),
            "variables": {},
            "errorMessage": "",
            "errorCode": "",
            "elementId": element.id,
            "elementInstanceKey": inst["key"],
            "processInstanceKey": v["processInstanceKey"],
            "bpmnProcessId": v["bpmnProcessId"],
            "processDefinitionVersion": v["version"],
            "processDefinitionKey": v["processDefinitionKey"],
            "tenantId": b.TENANT,
            "jobKind": "BPMN_ELEMENT",
        }
        ctx.event(ValueType.JOB, JobIntent.CREATED, job_key, job)
        self._activated(ctx, inst)
        b.job_became_activatable(ctx, job_key, job)

    def _choose_flow(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element, inst: dict
    ) -> bpmn.SequenceFlow | None:
        outgoing = process.outgoing_flows(element.id)
        if len(outgoing) == 1 and outgoing[0].condition is None:
            return outgoing[0]
        context = b.visible_variables(ctx, inst["key"])
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

    def _throw_error_end(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element, inst: dict
    ) -> None:
        code_source = element.error.error_code if element.error and element.error.error_code else ""
        code = b.evaluate(ctx, code_source, inst["key"]) if code_source else ""
        if isinstance(code, ExpressionFailure):
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", code.message)
            return
        code = str(code)
        catch = b.find_error_catch(ctx, process, inst, code)
        if catch is None:
            b.raise_incident(ctx, inst, "UNHANDLED_ERROR_EVENT", b.unhandled_error_message(code, ""))
            return
        self._activated(ctx, inst)
        attached, catch_event = catch
        events.fire(ctx, process, attached, catch_event, {})

    def _terminate_scope(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element, inst: dict
    ) -> None:
        """Terminate end event: every other element of the scope terminates, then the scope completes."""
        self._activated(ctx, inst)
        scope_key = inst["value"]["flowScopeKey"]
        scope = ctx.state.elements.get(scope_key)
        if scope is not None:
            trigger = b.event_trigger(ctx, scope, element, {})
            ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERING, ctx.keys.next_key(), trigger)
            for child_key in ctx.state.elements.children(scope_key):
                child = ctx.state.elements.get(child_key)
                if child_key != inst["key"] and child is not None and child["state"] != PI.ELEMENT_TERMINATING:
                    ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.TERMINATE_ELEMENT, child_key, child["value"])
        self._complete(ctx, process, element, inst)

    def _throw_escalation(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element, inst: dict
    ) -> None:
        """Escalation throw/end event: the nearest catch fires; uncaught, the flow simply continues."""
        source = element.escalation_code or ""
        code = b.evaluate(ctx, source, inst["key"]) if source else ""
        if isinstance(code, ExpressionFailure):
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", code.message)
            return
        code = str(code)
        catch = b.find_escalation_catch(ctx, process, inst, code)
        v = inst["value"]
        value = {
            "processInstanceKey": v["processInstanceKey"],
            "escalationCode": code,
            "throwElementId": element.id,
            "catchElementId": catch[1].id if catch else "",
            "tenantId": b.TENANT,
        }
        if catch is None:
            ctx.event(ValueType.ESCALATION, EscalationIntent.NOT_ESCALATED, ctx.keys.next_key(), value)
            self._activated(ctx, inst)
            self._complete(ctx, process, element, inst)
            return
        ctx.event(ValueType.ESCALATION, EscalationIntent.ESCALATED, ctx.keys.next_key(), value)
        self._activated(ctx, inst)
        attached, catch_event = catch
        events.fire(ctx, process, attached, catch_event, {})
        if not events.is_interrupting(catch_event):
            self._complete(ctx, process, element, inst)

    def _throw_signal(self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element, inst: dict) -> None:
        """Signal throw/end event: broadcast with the event's local variables (its input mappings), then go on."""
        source = element.signal_name or ""
        name = b.evaluate(ctx, source, inst["key"])
        if isinstance(name, ExpressionFailure) or not isinstance(name, str) or not name:
            reason = (
                name.message
                if isinstance(name, ExpressionFailure)
                else f"Expected the signal name '{source}' to be a non-empty STRING, but was '{name!r}'"
            )
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", reason)
            return
        self._activated(ctx, inst)
        signals.broadcast(ctx, name, ctx.state.variables.local(inst["key"]))
        if ctx.state.elements.get(inst["key"]) is not None:
            self._complete(ctx, process, element, inst)

    # -- COMPLETE_ELEMENT ------------------------------------------------------------------------------------

    def complete_command(self, ctx: ProcessingContext, cmd: Record) -> None:
        inst = ctx.state.elements.get(cmd.key)
        if inst is None:
            ctx.reject(
                RejectionType.NOT_FOUND,
                f"Expected to complete element with key '{cmd.key}', but it does not exist",
            )
            return
        if inst["state"] not in (PI.ELEMENT_ACTIVATED, PI.ELEMENT_COMPLETING):
            ctx.reject(RejectionType.INVALID_STATE, f"Expected element '{cmd.key}' to be active, but it is not")
            return
        process = b.services(ctx).models.get(inst["value"]["processDefinitionKey"])
        element = _element(process, inst)
        flows = None
        if element is not None and element.element_type == bpmn.EXCLUSIVE_GATEWAY:
            flow = self._choose_flow(ctx, process, element, inst)
            if flow is None:
                return
            flows = (flow,)
        elif element is not None and element.element_type == bpmn.EVENT_BASED_GATEWAY:
            trigger = ctx.state.event_triggers.get(inst["key"])
            if trigger is None:
                ctx.reject(RejectionType.INVALID_STATE, f"Expected gateway '{cmd.key}' to have received an event")
                return
            winner = [f for f in process.outgoing_flows(element.id) if f.target_id == trigger["targetElementId"]]
            self._complete(ctx, process, element, inst, flows=tuple(winner[:1]), trigger=trigger)
            return
        self._complete(ctx, process, element, inst, flows=flows)

    def _complete(
        self,
        ctx: ProcessingContext,
        process: bpmn.Process,
        element: bpmn.Element | None,
        inst: dict,
        flows: tuple[bpmn.SequenceFlow, ...] | None = None,
        trigger: dict | None = None,
    ) -> None:
        """``trigger``: the event an event-based gateway received; it moves to the winning catch event."""
        v = inst["value"]
        if inst["state"] != PI.ELEMENT_COMPLETING:
            ctx.event(ValueType.PROCESS_INSTANCE, PI.ELEMENT_COMPLETING, inst["key"], v)
            inst["state"] = PI.ELEMENT_COMPLETING
            events.close_subscriptions(ctx, inst)
        if element is not None:
            failure = b.apply_output_mappings(ctx, element, inst)
            if failure is not None:
                b.raise_incident(ctx, inst, "IO_MAPPING_ERROR", failure.message)
                return
        awaiting = ctx.state.awaiting_results.get(inst["key"]) if element is None else None
        result_variables = None
        if awaiting is not None:
            result_variables = b.visible_variables(ctx, inst["key"], awaiting.get("fetchVariables") or None)
        ctx.event(ValueType.PROCESS_INSTANCE, PI.ELEMENT_COMPLETED, inst["key"], v)
        if element is None:
            if awaiting is not None:
                self._send_result(ctx, v, awaiting, result_variables or {})
            return
        if element.element_type == bpmn.INTERMEDIATE_THROW_EVENT and element.event_type == bpmn.LINK:
            # no sequence flow: the token jumps to the catch event of the same name (the COMPLETED applier keeps it
            # in flight on the flow scope until the catch event's activation consumes it)
            b.activate_element(ctx, b.link_catch(process, element), v, v["flowScopeKey"])
            return
        outgoing = flows if flows is not None else process.outgoing_flows(element.id)
        for flow in outgoing:
            target_key = None
            if trigger is not None:
                target_key = ctx.keys.next_key()
                moved = {**trigger, "scopeKey": target_key}
                ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERED, target_key, moved)
            b.take_flow(ctx, process, flow, inst, key=target_key)
        if not outgoing:
            self._maybe_complete_scope(ctx, v["flowScopeKey"])

    def _maybe_complete_scope(self, ctx: ProcessingContext, scope_key: int) -> None:
        """A child left an active scope: with nothing left inside, the scope completes, or the interrupting event
        sub-process that waited for the other children to terminate starts."""
        scope = ctx.state.elements.get(scope_key)
        if scope is None or scope["state"] != PI.ELEMENT_ACTIVATED or scope["children"] != 0:
            return
        trigger = ctx.state.event_triggers.get(scope_key)
        if trigger is not None:
            process = b.services(ctx).models.get(scope["value"]["processDefinitionKey"])
            target = process.elements.get(trigger["targetElementId"])
            if target is not None and target.element_type == bpmn.START_EVENT:
                b.start_event_sub_process(ctx, scope, target, trigger, interrupting=True)
                return
        if scope["flows"] == 0:
            ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.COMPLETE_ELEMENT, scope_key, scope["value"])

    def _send_result(self, ctx: ProcessingContext, v: dict, awaiting: dict, variables: dict) -> None:
        rec = ctx.event(
            ValueType.PROCESS_INSTANCE_RESULT,
            ProcessInstanceResultIntent.COMPLETED,
            v["processInstanceKey"],
            {
                "bpmnProcessId": v["bpmnProcessId"],
                "processDefinitionKey": v["processDefinitionKey"],
                "processInstanceKey": v["processInstanceKey"],
                "version": v["version"],
                "variables": variables,
                "tenantId": b.TENANT,
            },
        )
        ctx.respond(rec, RequestMetadata(awaiting["streamId"], awaiting["requestId"]))

    # -- TERMINATE_ELEMENT -----------------------------------------------------------------------------------

    def terminate_command(self, ctx: ProcessingContext, cmd: Record) -> None:
        inst = ctx.state.elements.get(cmd.key)
        if inst is None or inst["state"] == PI.ELEMENT_TERMINATING:
            ctx.reject(RejectionType.INVALID_STATE, f"Expected element '{cmd.key}' to be active, but it is not")
            return
        self.terminate(ctx, inst)

    def terminate(self, ctx: ProcessingContext, inst: dict) -> Record:
        """Start terminating ``inst``: children first, then the instance itself. Returns the TERMINATING event."""
        terminating = ctx.event(ValueType.PROCESS_INSTANCE, PI.ELEMENT_TERMINATING, inst["key"], inst["value"])
        inst["state"] = PI.ELEMENT_TERMINATING
        children = ctx.state.elements.children(inst["key"])
        if children:
            for child_key in children:
                child = ctx.state.elements.get(child_key)
                if child is not None and child["state"] != PI.ELEMENT_TERMINATING:
                    ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.TERMINATE_ELEMENT, child_key, child["value"])
            return terminating
        self._terminated(ctx, inst)
        return terminating

    def _terminated(self, ctx: ProcessingContext, inst: dict) -> None:
        b.cancel_job(ctx, inst)
        events.close_subscriptions(ctx, inst)
        b.resolve_incidents_of(ctx, inst)
        v = inst["value"]
        awaiting = ctx.state.awaiting_results.get(inst["key"]) if v["flowScopeKey"] <= 0 else None
        # read before TERMINATED: ending the element removes its state, the pending trigger included
        trigger = ctx.state.event_triggers.get(inst["key"])
        ctx.event(ValueType.PROCESS_INSTANCE, PI.ELEMENT_TERMINATED, inst["key"], v)
        if awaiting is not None:
            self._reject_result(ctx, v, awaiting)
        scope_key = v["flowScopeKey"]
        if trigger is not None:
            process = b.services(ctx).models.get(v["processDefinitionKey"])
            boundary = process.elements.get(trigger["targetElementId"])
            if boundary is not None and boundary.element_type == bpmn.BOUNDARY_EVENT:
                boundary_key = ctx.keys.next_key()
                ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERED, boundary_key, trigger)
                b.activate_element(ctx, boundary, v, scope_key, key=boundary_key)
                return
        scope = ctx.state.elements.get(scope_key) if scope_key > 0 else None
        if scope is not None and scope["state"] == PI.ELEMENT_TERMINATING and scope["children"] == 0:
            self._terminated(ctx, scope)
        elif scope is not None:
            self._maybe_complete_scope(ctx, scope_key)

    def _reject_result(self, ctx: ProcessingContext, v: dict, awaiting: dict) -> None:
        rejection = Record(
            position=-1,
            key=v["processInstanceKey"],
            record_type=RecordType.COMMAND_REJECTION,
            value_type=ValueType.PROCESS_INSTANCE_CREATION,
            intent=2,
            timestamp=ctx.now,
            value={},
            rejection_type=RejectionType.INVALID_STATE,
            rejection_reason=(
                f"Expected to receive the result of process instance '{v['processInstanceKey']}', but it was terminated"
            ),
        )
        ctx.respond(rejection, RequestMetadata(awaiting["streamId"], awaiting["requestId"]))
