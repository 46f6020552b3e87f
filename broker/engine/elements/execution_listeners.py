"""Execution listeners: jobs a worker completes before an element's own behaviour (start) or before it leaves (end).

The listeners of one event type run one at a time, in document order, each as a job of kind EXECUTION_LISTENER; the
element waits ACTIVATING (start) or COMPLETING (end) meanwhile. The element instance counts the listener jobs created
for the current event type (``listener_index``: the JOB CREATED applier counts up; ELEMENT_COMPLETING and an
EXTRACT_VALUE_ERROR incident on the element reset it, so that resolving such an incident runs them all again, as in
Zeebe). When a listener job completes, COMPLETE_EXECUTION_LISTENER runs the element's step again: past the first
listener the mappings are not applied again, and the next listener runs, or the element goes on.

Start listeners run after the input mappings and before subscriptions and the element's own work; end listeners
after the output mappings and before the element is COMPLETED. A multi-instance activity's listeners run for each
of its instances (not for the body).
"""

from __future__ import annotations

from typing import Any

from broker.engine import behaviors as b
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements.job_task import type_and_retries, write_job
from broker.engine.elements.lookup import processor_of
from broker.engine.expressions import ExpressionFailure
from broker.protocol.enums import JobKind, JobListenerEventType
from broker.state.element_instance import ElementInstance

Listeners = tuple[bpmn.ExecutionListener, ...]

_EVENT_TYPES = {bpmn.LISTENER_START: JobListenerEventType.START, bpmn.LISTENER_END: JobListenerEventType.END}


def of(ctx: ProcessingContext, process: bpmn.Process, inst: ElementInstance, event_type: str) -> Listeners:
    """The listeners of ``event_type`` that run for this element instance (the process's for the process)."""
    if not process.uses_execution_listeners:
        return ()
    v = inst.value
    owner: bpmn.Process | bpmn.Element | None
    if v.is_root:
        owner = process
    elif processor_of(ctx, v).contains_its_own_element:
        return ()  # a multi-instance body: they run for each instance inside it
    else:
        owner = process.elements.get(v.element_id)
        if owner is None:
            return ()
    return owner.start_listeners if event_type == bpmn.LISTENER_START else owner.end_listeners


def run_next(ctx: ProcessingContext, listeners: Listeners, inst: ElementInstance) -> bool:
    """True when every listener has run (or there are none): the element goes on. Otherwise the job of the next one
    is created, or an incident raised on a bad ``type`` or ``retries``, and the element waits: False."""
    index = inst.listener_index
    if index >= len(listeners):
        return True
    _create_job(ctx, listeners[index], inst)
    return False


def _create_job(ctx: ProcessingContext, listener: bpmn.ExecutionListener, inst: ElementInstance) -> None:
    evaluated = type_and_retries(ctx, listener.type, listener.retries, inst.key)
    if isinstance(evaluated, ExpressionFailure):
        b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", evaluated.message)
        return
    job_type, retries = evaluated
    job_key, job = write_job(
        ctx,
        inst,
        job_type,
        retries,
        kind=JobKind.EXECUTION_LISTENER.value,
        listener_event_type=_EVENT_TYPES[listener.event_type].value,
    )
    b.job_became_activatable(ctx, job_key, job)


def take_variables(ctx: ProcessingContext, inst: ElementInstance, job: dict[str, Any], variables: dict) -> None:
    """A listener job completed with variables: a start listener's become the element's local variables; an end
    listener's reach the flow scope, like output mappings (the process's own stay in the process)."""
    if not variables:
        return
    if job.get("jobListenerEventType") == JobListenerEventType.START:
        b.set_local_document(ctx, inst.key, variables, inst)
        return
    scope_key = inst.value.flow_scope_key
    b.merge_document(ctx, scope_key if scope_key > 0 else inst.key, variables)
