"""Tasks done by job workers: service, send, script, business rule and user tasks with a ``zeebe:taskDefinition``,
and message throw and end events (a worker sends the message).

The task creates a job of its type and waits; the job's completion completes it. A job-worker user task's
assignment and schedule reach the worker as headers, the way Zeebe writes them for Tasklist: static values were
placed at deployment, FEEL values are evaluated here.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from broker.engine import behaviors as b
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.base import ElementProcessor
from broker.engine.expressions import ExpressionFailure, type_name
from broker.protocol.entity_values import JobValue
from broker.protocol.enums import JobIntent, ProcessInstanceIntent, ValueType
from broker.state.element_instance import ElementInstance

PI = ProcessInstanceIntent


class JobTaskProcessor(ElementProcessor):
    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None
        if lc.prepare(ctx, process, element, inst):
            create_job(ctx, element, inst)


def type_and_retries(
    ctx: ProcessingContext, type_source: str, retries_source: str, scope_key: int
) -> tuple[str, int] | ExpressionFailure:
    """A job's type (a non-empty string) and retries (a number), static or FEEL, evaluated in ``scope_key``."""
    job_type = b.evaluate(ctx, type_source, scope_key)
    if isinstance(job_type, ExpressionFailure):
        return job_type
    if not isinstance(job_type, str) or not job_type:
        return ExpressionFailure(
            f"Expected result of the expression '{type_source}' to be 'STRING', but was '{b.describe_type(job_type)}'."
        )
    retries: Any = b.evaluate(ctx, retries_source, scope_key)
    if isinstance(retries, str):
        try:
            retries = int(retries)
        except ValueError:
            return ExpressionFailure(f"Expected retries '{retries_source}' to be a number")
    if isinstance(retries, ExpressionFailure):
        return retries
    if not isinstance(retries, int | float) or isinstance(retries, bool):
        return ExpressionFailure(
            f"Expected result of the expression '{retries_source}' to be 'NUMBER', but was "
            f"'{b.describe_type(retries)}'."
        )
    return job_type, int(retries)


def write_job(
    ctx: ProcessingContext,
    inst: ElementInstance,
    job_type: str,
    retries: int,
    *,
    kind: str,
    headers: dict[str, Any] | None = None,
    listener_event_type: str = "",
    changed_attributes: tuple[str, ...] | None = None,
) -> tuple[int, JobValue]:
    """Write JOB CREATED for a job of element instance ``inst`` (the element's own work, or one of its listeners);
    its key and record value. ``listener_event_type`` and ``changed_attributes``: what a listener's job also carries.
    The caller makes it activatable once the element is where the job expects it."""
    v = inst.value
    job = JobValue._make(  # positional: keywords cost several times as much for this many fields
        (
            job_type,  # type
            "",  # worker
            retries,
            0,  # retry back-off
            -1,  # recurring time
            -1,  # deadline
            -1,  # timeout
            headers or {},  # custom headers
            {},  # variables
            "",  # error message
            "",  # error code
            v.element_id,
            inst.key,
            v.process_instance_key,
            v.bpmn_process_id,
            v.version,
            v.process_definition_key,
            v.tenant_id,
            kind,
            v.root_process_instance_key,
            listener_event_type,
            changed_attributes,
            v.tags,  # the instance's tags and business id (Camunda 8.9), handed to the worker that activates the job
            v.business_id,
            None,  # result
            None,  # user task
        )
    )
    job_key = ctx.keys.next_key()
    ctx.typed_event(ValueType.JOB, JobIntent.CREATED, job_key, job)
    return job_key, job


def create_job(
    ctx: ProcessingContext, element: bpmn.Element, inst: ElementInstance, *, kind: str = "BPMN_ELEMENT"
) -> None:
    """Evaluate the job's type and retries, write JOB CREATED and wait (ACTIVATED, unless it already is); an
    incident on a bad value. ``kind``: Zeebe's job kind (a job-worker ad-hoc sub-process's is AD_HOC_SUB_PROCESS)."""
    job_def = element.job
    assert job_def is not None
    evaluated = type_and_retries(ctx, job_def.type, job_def.retries, inst.key)
    if isinstance(evaluated, ExpressionFailure):
        b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", evaluated.message)
        return
    job_type, retries = evaluated
    headers = user_task_headers(ctx, element, inst.key)
    if isinstance(headers, ExpressionFailure):
        b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", headers.message)
        return
    job_key, job = write_job(ctx, inst, job_type, retries, kind=kind, headers={**dict(job_def.headers), **headers})
    if inst.state != PI.ELEMENT_ACTIVATED:
        lc.activated(ctx, inst)
    b.job_became_activatable(ctx, job_key, job)


def user_task_headers(
    ctx: ProcessingContext, element: bpmn.Element, scope_key: int
) -> dict[str, str] | ExpressionFailure:
    """The headers of a job-worker user task whose assignment or schedule attributes are FEEL expressions."""
    task = element.user_task
    if task is None or task.native:
        return {}
    attributes: tuple[tuple[str | None, str, Callable[[str, Any], str | ExpressionFailure | None]], ...] = (
        (task.assignee, bpmn.USER_TASK_HEADER_ASSIGNEE, as_string),
        (task.candidate_groups, bpmn.USER_TASK_HEADER_CANDIDATE_GROUPS, as_string_list),
        (task.candidate_users, bpmn.USER_TASK_HEADER_CANDIDATE_USERS, as_string_list),
        (task.due_date, bpmn.USER_TASK_HEADER_DUE_DATE, as_date_time),
        (task.follow_up_date, bpmn.USER_TASK_HEADER_FOLLOW_UP_DATE, as_date_time),
        (task.form_key, bpmn.USER_TASK_HEADER_FORM_KEY, as_string),
    )
    headers: dict[str, str] = {}
    context: dict[str, Any] | None = None
    for source, header, convert in attributes:
        if source is None or not source.startswith("="):
            continue  # absent, or static: already among the element's headers
        if context is None:
            context = b.visible_variables(ctx, scope_key)
        value = b.services(ctx).expressions.evaluate_raw(source, context, ctx.now)
        if isinstance(value, ExpressionFailure):
            return value
        converted = convert(source, value)
        if isinstance(converted, ExpressionFailure):
            return converted
        if converted:
            headers[header] = converted
    return headers


def expected(source: str, expected: str, value: Any) -> ExpressionFailure:
    return ExpressionFailure(
        f"Expected result of the expression '{source}' to be '{expected}', but was '{type_name(value)}'."
    )


def as_string(source: str, value: Any) -> str | ExpressionFailure | None:
    if value is None or isinstance(value, str):
        return value
    return expected(source, "STRING", value)


def as_string_list(source: str, value: Any) -> str | ExpressionFailure | None:
    """A list of strings, as the JSON array text Tasklist reads."""
    if value is None:
        return None
    if not isinstance(value, list):
        return expected(source, "ARRAY", value)
    for item in value:
        if not isinstance(item, str):
            return ExpressionFailure(
                f"Expected result of the expression '{source}' to be 'ARRAY' of 'STRING' items, but it contained "
                f"'{type_name(item)}'."
            )
    return json.dumps(value, separators=(",", ":"))


def as_date_time(source: str, value: Any) -> str | ExpressionFailure | None:
    """A date and time with an offset or zone (a FEEL date and time, or an ISO-8601 string), in ISO-8601."""
    if value is None:
        return None
    parsed = value
    if isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value)
        except ValueError:
            parsed = None
    if isinstance(parsed, dt.datetime) and parsed.tzinfo is not None:
        return parsed.isoformat()
    shown = value if isinstance(value, str | dt.date) else type_name(value)
    return ExpressionFailure(
        f"Expected result of the expression '{source}' to be a date and time with an offset (ISO-8601, e.g. "
        f"'2025-01-31T12:00:00+01:00'), but was '{shown}'."
    )
