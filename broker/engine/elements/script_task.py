"""Script tasks: a ``zeebe:script`` FEEL expression the engine evaluates itself, or a job for a worker.

With ``zeebe:script``, the task evaluates its expression once activated (after its input mappings), keeps the
result as its local ``resultVariable`` and completes at once: without output mappings the result variable reaches
the flow scope; with them, the mappings see it. A failing evaluation is an incident; resolving it evaluates again.
With ``zeebe:taskDefinition`` instead, the task is an ordinary job worker task.
"""

from __future__ import annotations

from typing import Any

from broker.engine import behaviors as b
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.job_task import JobTaskProcessor
from broker.engine.expressions import ExpressionFailure
from broker.state.element_instance import ElementInstance


class ScriptTaskProcessor(JobTaskProcessor):
    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        script = element.script
        if script is None:
            super().on_activate(ctx, process, element, inst)
            return
        if not lc.prepare(ctx, process, element, inst):
            return
        result = b.evaluate(ctx, script.expression, inst.key)
        if isinstance(result, ExpressionFailure):
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", result.message)
            return
        b.set_local_variable(ctx, inst.key, script.result_variable, result, instance=inst)
        lc.pass_through(ctx, process, element, inst)

    def variables_without_output_mappings(
        self, ctx: ProcessingContext, element: bpmn.Element, inst: ElementInstance
    ) -> dict[str, Any] | None:
        script = element.script
        if script is None:
            return None
        found = ctx.state.variables.get_local(inst.key, script.result_variable)
        return {script.result_variable: found[1]} if found is not None else None
