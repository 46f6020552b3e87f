"""Business rule tasks: a DMN decision the engine evaluates itself (``zeebe:calledDecision``), or a job for a worker.

With ``zeebe:calledDecision``, the task (after its input mappings) finds the decision by id (static or FEEL) and
binding (``latest`` by default; ``deployment``: the version deployed with the process; ``versionTag``: the latest
version carrying the tag), evaluates it against the variables visible at the task and writes a DECISION_EVALUATION
EVALUATED record; the output becomes the task's local ``resultVariable`` and the task completes at once. Without
output mappings the result variable reaches the flow scope; with them, the mappings see it (as for script tasks).

- No decision with that id: a CALLED_DECISION_ERROR incident.
- The evaluation fails (a hit policy violated, say): a DECISION_EVALUATION FAILED record and a
  DECISION_EVALUATION_ERROR incident naming the decision. Resolving either incident evaluates again.

With ``zeebe:taskDefinition`` instead, the task is an ordinary job worker task.
"""

from __future__ import annotations

import json
from typing import Any, Final

from broker.engine import behaviors as b
from broker.engine import decision_processors as decisions
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.job_task import JobTaskProcessor
from broker.engine.expressions import ExpressionFailure
from broker.protocol.enums import DecisionEvaluationIntent, ValueType
from broker.state.element_instance import ElementInstance

CALLED_DECISION_ERROR: Final = "CALLED_DECISION_ERROR"
DECISION_EVALUATION_ERROR: Final = "DECISION_EVALUATION_ERROR"


def _called_decision(
    ctx: ProcessingContext, called: bpmn.CalledDecision, decision_id: str, inst: ElementInstance
) -> dict | str:
    """The stored decision the binding selects, or why there is none."""
    decisions_state, tenant = ctx.state.decisions, inst.value.tenant_id
    if called.binding_type == bpmn.BINDING_DEPLOYMENT:
        process = ctx.state.processes.get(inst.value.process_definition_key) or {}
        deployment_key = process.get("deploymentKey", -1)
        stored = decisions_state.in_deployment(tenant, decision_id, deployment_key) if deployment_key > 0 else None
        if stored is None:
            return (
                f"Expected to evaluate decision with id '{decision_id}' with binding type 'deployment', but no such "
                f"decision found in the deployment with key {deployment_key} which contained the current process. "
                "To resolve this incident, deploy the decision together with the process."
            )
        return stored
    if called.binding_type == bpmn.BINDING_VERSION_TAG:
        tag = called.version_tag or ""
        stored = decisions_state.with_version_tag(tenant, decision_id, tag)
        if stored is None:
            return (
                f"Expected to evaluate decision with id '{decision_id}' and version tag '{tag}', but no such decision "
                "found. To resolve this incident, deploy a decision with the given id and version tag."
            )
        return stored
    stored = decisions_state.latest(tenant, decision_id)
    if stored is None:
        return f"Expected to evaluate decision '{decision_id}', but no decision found for id '{decision_id}'"
    return stored


class BusinessRuleTaskProcessor(JobTaskProcessor):
    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        called = element.called_decision
        if called is None:
            super().on_activate(ctx, process, element, inst)
            return
        if not lc.prepare(ctx, process, element, inst):
            return
        decision_id = b.evaluate(ctx, called.decision_id, inst.key)
        if isinstance(decision_id, ExpressionFailure):
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", decision_id.message)
            return
        if not isinstance(decision_id, str) or not decision_id:
            reason = (
                f"Expected result of the expression '{called.decision_id}' to be 'STRING', but was "
                f"'{b.describe_type(decision_id)}'."
            )
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", reason)
            return
        decision = _called_decision(ctx, called, decision_id, inst)
        if isinstance(decision, str):
            b.raise_incident(ctx, inst, CALLED_DECISION_ERROR, decision)
            return
        intent, value = decisions.evaluate(ctx, decision, b.visible_variables(ctx, inst.key))
        v = inst.value
        value.update(
            bpmnProcessId=v.bpmn_process_id,
            processDefinitionKey=v.process_definition_key,
            processInstanceKey=v.process_instance_key,
            elementId=v.element_id,
            elementInstanceKey=inst.key,
        )
        ctx.event(ValueType.DECISION_EVALUATION, intent, ctx.keys.next_key(), value)
        if intent == DecisionEvaluationIntent.FAILED:
            b.raise_incident(ctx, inst, DECISION_EVALUATION_ERROR, value["evaluationFailureMessage"])
            return
        result = json.loads(value["decisionOutput"])
        b.set_local_variable(ctx, inst.key, called.result_variable, result, instance=inst)
        lc.pass_through(ctx, process, element, inst)

    def variables_without_output_mappings(
        self, ctx: ProcessingContext, element: bpmn.Element, inst: ElementInstance
    ) -> dict[str, Any] | None:
        called = element.called_decision
        if called is None:
            return None
        found = ctx.state.variables.get_local(inst.key, called.result_variable)
        return {called.result_variable: found[1]} if found is not None else None
