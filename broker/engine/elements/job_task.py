"""Tasks done by job workers: service, send, script, business rule and user tasks with a ``zeebe:taskDefinition``.

The task creates a job of its type and waits; the job's completion completes it.
"""

from __future__ import annotations

from typing import Any

from broker.engine import behaviors as b
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.base import ElementProcessor
from broker.engine.expressions import ExpressionFailure
from broker.protocol.enums import JobIntent, ValueType
from broker.state.element_instance import ElementInstance


class JobTaskProcessor(ElementProcessor):
    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if lc.prepare(ctx, process, element, inst):
            create_job(ctx, element, inst)


def create_job(ctx: ProcessingContext, element: bpmn.Element, inst: ElementInstance) -> None:
    """Evaluate the job's type and retries, write JOB CREATED and wait (ACTIVATED); an incident on a bad value."""
    job_def = element.job
    assert job_def is not None
    job_type = b.evaluate(ctx, job_def.type, inst.key)
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
    retries: Any = b.evaluate(ctx, job_def.retries, inst.key)
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
    v = inst.value
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
        "elementInstanceKey": inst.key,
        "processInstanceKey": v.process_instance_key,
        "bpmnProcessId": v.bpmn_process_id,
        "processDefinitionVersion": v.version,
        "processDefinitionKey": v.process_definition_key,
        "tenantId": b.TENANT,
        "jobKind": "BPMN_ELEMENT",
    }
    ctx.event(ValueType.JOB, JobIntent.CREATED, job_key, job)
    lc.activated(ctx, inst)
    b.job_became_activatable(ctx, job_key, job)
