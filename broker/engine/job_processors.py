"""Job commands: activation in batches, complete, fail, throw error, retries, timeouts, back-off and yield.

A job is accepted for completion, failure or error only while ACTIVATABLE or ACTIVATED; time-based commands (TIME_OUT,
RECUR_AFTER_BACKOFF) are written by the leader's checkers and re-checked here against the command's own timestamp,
so a stale or early command is rejected instead of acting on the wall clock.
"""

from __future__ import annotations

import json
from typing import Any, Final

from broker.engine import behaviors as b
from broker.engine import events, user_tasks
from broker.engine.context import ProcessingContext
from broker.engine.elements import ad_hoc_sub_process, execution_listeners
from broker.protocol.entity_values import IncidentValue, JobValue
from broker.protocol.enums import (
    IncidentIntent,
    JobBatchIntent,
    JobIntent,
    JobKind,
    ProcessInstanceIntent,
    RejectionType,
    ValueType,
)
from broker.protocol.limits import duration_problem
from broker.protocol.record import Record
from broker.state.repositories import JobState

_OVERSIZED_PER_BATCH = 16  # bounds the work one activation spends on jobs that cannot be sent
_JOB_OVERHEAD = 256  # keys, numbers, field tags and length prefixes of one ActivatedJob message


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _json_size(value: Any) -> int:
    if not value:
        return 2
    text = _ENCODER.encode(value)
    return len(text) if text.isascii() else len(text.encode())


def rendered_size(job: JobValue) -> int:
    """An upper bound of the bytes an activated job takes in an ActivateJobs response (JSON documents included)."""
    texts = (job.type, job.bpmn_process_id, job.element_id, job.worker)
    return (
        _json_size(job.variables) + _json_size(job.custom_headers) + sum(len(t.encode()) for t in texts) + _JOB_OVERHEAD
    )


def _job_or_reject(ctx: ProcessingContext, cmd: Record, action: str, allowed: tuple[str, ...]) -> JobValue | None:
    job = ctx.state.jobs.get(cmd.key)
    if job is None:
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to {action} job with key '{cmd.key}', but no such job was found",
        )
        return None
    if not b.may_update(ctx, job["value"]):
        return None
    if job["state"] not in allowed:
        ctx.reject(
            RejectionType.INVALID_STATE,
            f"Expected to {action} job with key '{cmd.key}', but it is in state '{job['state']}'",
        )
        return None
    return JobValue.from_dict(job["value"])


_ACTIVE = (JobState.ACTIVATABLE, JobState.ACTIVATED)
MAX_SCANNED_FOR_PERMISSIONS: Final = 10_000
"""Activatable jobs of other processes one activation looks past, at most, for a caller allowed only some processes'
jobs (a bound on the work of one command; the rest are looked at by the next activation)."""

# The incident a job out of retries raises, by job kind (as Zeebe's); JOB_NO_RETRIES for the others.
_NO_RETRIES: dict[str, str] = {
    JobKind.EXECUTION_LISTENER: "EXECUTION_LISTENER_NO_RETRIES",
    JobKind.TASK_LISTENER: "TASK_LISTENER_NO_RETRIES",
}
# The job kinds a worker may throw a BPMN error from (as Zeebe's).
_MAY_THROW_ERRORS = frozenset({JobKind.BPMN_ELEMENT, JobKind.AD_HOC_SUB_PROCESS})


def activation_request(
    job_type: str,
    worker: str,
    timeout: int,
    max_jobs: int,
    fetch_variables: list[str] | None = None,
    tenant_ids: list[str] | None = None,
) -> dict:
    """The value of a JOB_BATCH ACTIVATE command: what a worker asks for (the gateway and tests write these)."""
    return {
        "type": job_type,
        "worker": worker,
        "timeout": timeout,
        "maxJobsToActivate": max_jobs,
        "variables": list(fetch_variables or []),
        "jobKeys": [],
        "jobs": [],
        "truncated": False,
        "tenantIds": list(tenant_ids or [b.TENANT]),
    }


def _activatable(
    ctx: ProcessingContext, job_type: str, tenant_ids: list[str], limit: int, processes: frozenset[str] | None
) -> list[int]:
    """Up to ``limit`` activatable jobs of the type in any of the tenants, oldest (lowest key) first; with
    ``processes``, only jobs of those processes (looking at no more than MAX_SCANNED_FOR_PERMISSIONS of the others)."""
    jobs = ctx.state.jobs

    def keys(tenant: str) -> list[int]:
        if processes is None:
            return jobs.activatable_keys(tenant, job_type, limit)
        return jobs.activatable_keys(
            tenant,
            job_type,
            limit,
            accept=lambda job: job.get("bpmnProcessId") in processes,
            max_scanned=MAX_SCANNED_FOR_PERMISSIONS,
        )

    if len(tenant_ids) == 1:
        return keys(tenant_ids[0])
    return sorted(k for t in dict.fromkeys(tenant_ids) for k in keys(t))[:limit]


def _permitted_processes(ctx: ProcessingContext) -> frozenset[str] | None:
    """The processes whose jobs the caller may take (UPDATE_PROCESS_INSTANCE, as in Camunda), or None: all."""
    access = b.caller_access(ctx)
    if access is None or not b.services(ctx).authorizations:
        return None
    ids = access.resource_ids("PROCESS_DEFINITION", ("UPDATE_PROCESS_INSTANCE",))
    return None if "*" in ids else ids


def activate_batch(ctx: ProcessingContext, cmd: Record) -> None:
    """JOB_BATCH ACTIVATE: hand up to maxJobsToActivate activatable jobs of a type to one worker."""
    v = cmd.value
    tenants = v.get("tenantIds") or [b.TENANT]
    if b.refuse_unassigned_tenant(ctx, "ActivateJobs", tenants):
        return
    max_jobs = int(v.get("maxJobsToActivate", 1))
    # The gateway validates these too; a command from any other path must not activate a job that could never
    # be sent (a deadline beyond int64) or time out.
    problem = duration_problem("timeout", int(v["timeout"]), minimum=1)
    if problem is None and max_jobs < 1:
        problem = f"Expected argument 'maxJobsToActivate' to be greater than 0, but was {max_jobs}"
    if problem:
        ctx.reject(RejectionType.INVALID_ARGUMENT, problem)
        return
    # a few more than asked for: jobs too large to send are failed on the way and others take their place
    keys = _activatable(ctx, v["type"], tenants, max_jobs + _OVERSIZED_PER_BATCH, _permitted_processes(ctx))
    limit = ctx.max_batch_bytes
    jobs: list[dict[str, Any]] = []
    job_keys = []
    size = 0
    truncated = False
    for key in keys:
        if len(jobs) >= max_jobs:
            break
        job = ctx.state.jobs.get(key)
        assert job is not None
        stored = JobValue.from_dict(job["value"])
        activated = b.activate_job(
            ctx,
            key,
            stored,
            worker=v["worker"],
            timeout=int(v["timeout"]),
            fetch=v.get("variables") or None,
        )
        approx = rendered_size(activated)
        if approx > limit:
            _fail_too_large(ctx, key, stored, approx, limit)
            continue
        if size + approx > limit:
            truncated = True  # the rest stay activatable for the next request, as in Zeebe
            break
        size += approx
        jobs.append(activated.to_dict())
        job_keys.append(key)
    value = {**v, "jobKeys": job_keys, "jobs": jobs, "truncated": truncated}
    rec = ctx.event(ValueType.JOB_BATCH, JobBatchIntent.ACTIVATED, ctx.keys.next_key() if jobs else cmd.key, value)
    ctx.respond(rec)


def _fail_too_large(ctx: ProcessingContext, key: int, job: JobValue, size: int, limit: int) -> None:
    """A job that alone exceeds what a response may carry fails with an incident, so it stops blocking its type.

    Like a job out of retries: reduce the variables (or fetch fewer), update the retries, resolve the incident.
    """
    message = (
        f"The job with key '{key}' cannot be activated: with its variables it takes {size} bytes, more than the "
        f"{limit} bytes a response to a worker may carry. Reduce the variables (or fetch fewer), then update the "
        "job's retries and resolve this incident."
    )
    value = job._replace(retries=0, error_message=message, deadline=-1, recurring_time=-1, variables={})
    ctx.typed_event(ValueType.JOB, JobIntent.FAILED, key, value)
    inst = ctx.state.elements.get(value.element_instance_key)
    if inst is not None:
        b.raise_incident(ctx, inst, "MESSAGE_SIZE_EXCEEDED", message, job_key=key)


def complete(ctx: ProcessingContext, cmd: Record) -> None:
    job = _job_or_reject(ctx, cmd, "complete", _ACTIVE)
    if job is None:
        return
    kind = job.job_kind
    if kind == ad_hoc_sub_process.JOB_KIND:  # the worker's result decides what follows
        ad_hoc_sub_process.complete_job(ctx, cmd.key, job.to_dict(), cmd.value)
        return
    variables = cmd.value.get("variables") or {}
    if kind == JobKind.TASK_LISTENER:
        _complete_task_listener(ctx, cmd, job, variables)
        return
    value = job.completed(variables)
    rec = ctx.typed_event(ValueType.JOB, JobIntent.COMPLETED, cmd.key, value)
    ctx.respond(rec)
    inst = ctx.state.elements.get(value.element_instance_key)
    if inst is None:
        return
    if kind == JobKind.EXECUTION_LISTENER:
        execution_listeners.take_variables(ctx, inst, rec.value, variables)
        ctx.follow_up(
            ValueType.PROCESS_INSTANCE,
            ProcessInstanceIntent.COMPLETE_EXECUTION_LISTENER,
            inst.key,
            inst.value.to_dict(),
        )
        return
    process = b.services(ctx).models.get(value.process_definition_key)
    element = process.element(value.element_id)
    if variables:
        if element.output_mappings:
            b.set_local_document(ctx, inst.key, variables, inst)
        else:
            b.merge_document(ctx, inst.key, variables)
    ctx.follow_up(ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.COMPLETE_ELEMENT, inst.key, inst.value.to_dict())


def _complete_task_listener(ctx: ProcessingContext, cmd: Record, job: JobValue, variables: dict) -> None:
    """A task listener's job: no variables; its result may deny the user task's change or correct the task."""
    if variables:
        ctx.reject(
            RejectionType.INVALID_ARGUMENT,
            f"Expected to complete task listener job with key '{cmd.key}' without variables, but variables were "
            "given: a task listener changes its user task through the job result's corrections, not variables",
        )
        return
    result = cmd.value.get("result") or {}
    problem = user_tasks.listener_result_problem(ctx, job, result)
    if problem:
        ctx.reject(
            RejectionType.INVALID_ARGUMENT,
            f"Expected to complete task listener job with key '{cmd.key}', but {problem}",
        )
        return
    value = job.completed({}, result)
    rec = ctx.typed_event(ValueType.JOB, JobIntent.COMPLETED, cmd.key, value)
    ctx.respond(rec)
    user_tasks.listener_completed(ctx, value, result)


def fail(ctx: ProcessingContext, cmd: Record) -> None:
    job = _job_or_reject(ctx, cmd, "fail", _ACTIVE)
    if job is None:
        return
    v = cmd.value
    retries = int(v.get("retries", 0))
    backoff = int(v.get("retryBackoff", 0))
    problem = duration_problem("retryBackOff", backoff, minimum=0) if backoff > 0 else None
    if problem:
        ctx.reject(RejectionType.INVALID_ARGUMENT, problem)
        return
    value = job._replace(
        retries=retries,
        error_message=v.get("errorMessage", ""),
        retry_backoff=backoff,
        recurring_time=ctx.now + backoff if retries > 0 and backoff > 0 else -1,
        deadline=-1,
        variables={},
    )
    rec = ctx.typed_event(ValueType.JOB, JobIntent.FAILED, cmd.key, value)
    ctx.respond(rec)
    inst = ctx.state.elements.get(value.element_instance_key)
    variables = v.get("variables") or {}
    if variables and inst is not None:
        b.set_local_document(ctx, inst.key, variables, inst)
    if retries > 0:
        if backoff <= 0:
            b.job_became_activatable(ctx, cmd.key, value)
    elif inst is not None:
        message = value.error_message or "No more retries left."
        error_type = _NO_RETRIES.get(value.job_kind, "JOB_NO_RETRIES")
        b.raise_incident(ctx, inst, error_type, message, job_key=cmd.key)


def throw_error(ctx: ProcessingContext, cmd: Record) -> None:
    job = _job_or_reject(ctx, cmd, "throw an error for", _ACTIVE)
    if job is None:
        return
    kind = job.job_kind
    if kind not in _MAY_THROW_ERRORS:  # a listener runs while its element is not active: nothing could catch it
        ctx.reject(
            RejectionType.INVALID_STATE,
            f"Cannot throw BPMN error from {kind} job with key '{cmd.key}', type '{job.type}' and "
            f"processInstanceKey '{job.process_instance_key}'",
        )
        return
    v = cmd.value
    code = v.get("errorCode", "")
    message = v.get("errorMessage", "")
    value = job._replace(error_code=code, error_message=message, variables={}, deadline=-1)
    rec = ctx.typed_event(ValueType.JOB, JobIntent.ERROR_THROWN, cmd.key, value)
    ctx.respond(rec)
    inst = ctx.state.elements.get(value.element_instance_key)
    if inst is None:
        return
    process = b.services(ctx).models.get(value.process_definition_key)
    catch = events.find_error_catch(ctx, process, inst, code)
    if catch is None:
        b.raise_incident(ctx, inst, "UNHANDLED_ERROR_EVENT", b.unhandled_error_message(code, message), job_key=cmd.key)
        return
    attached, catch_event = catch
    catching_process = b.services(ctx).models.get(attached.value.process_definition_key)  # a caller's, maybe
    events.fire(ctx, catching_process, attached, catch_event, v.get("variables") or {})


def update_retries(ctx: ProcessingContext, cmd: Record) -> None:
    job = _job_or_reject(ctx, cmd, "update retries of", (*_ACTIVE, JobState.FAILED, JobState.ERROR_THROWN))
    if job is None:
        return
    retries = int(cmd.value.get("retries", 0))
    if retries < 1:
        ctx.reject(
            RejectionType.INVALID_ARGUMENT,
            f"Expected to update retries of job with key '{cmd.key}' with a positive amount of retries, "
            f"but got '{retries}'",
        )
        return
    value = job._replace(retries=retries)
    rec = ctx.typed_event(ValueType.JOB, JobIntent.RETRIES_UPDATED, cmd.key, value)
    ctx.respond(rec)


def update_timeout(ctx: ProcessingContext, cmd: Record) -> None:
    job = _job_or_reject(ctx, cmd, "update the timeout of", (JobState.ACTIVATED,))
    if job is None:
        return
    timeout = int(cmd.value.get("timeout", 0))
    problem = duration_problem("timeout", timeout, minimum=1)
    if problem:
        ctx.reject(RejectionType.INVALID_ARGUMENT, problem)
        return
    value = job._replace(deadline=ctx.now + timeout)
    rec = ctx.typed_event(ValueType.JOB, JobIntent.TIMEOUT_UPDATED, cmd.key, value)
    ctx.respond(rec)


def time_out(ctx: ProcessingContext, cmd: Record) -> None:
    """Written by the deadline checker: only an activated job whose deadline has passed times out."""
    job = ctx.state.jobs.get(cmd.key)
    if job is None or job["state"] != JobState.ACTIVATED:
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to time out activated job with key '{cmd.key}', but none found",
        )
        return
    stored = JobValue.from_dict(job["value"])
    if stored.deadline > ctx.now:
        ctx.reject(RejectionType.INVALID_STATE, f"Job '{cmd.key}' is not due yet (deadline {stored.deadline})")
        return
    value = stored._replace(deadline=-1, worker="")
    ctx.typed_event(ValueType.JOB, JobIntent.TIMED_OUT, cmd.key, value)
    b.job_became_activatable(ctx, cmd.key, value)


def recur_after_backoff(ctx: ProcessingContext, cmd: Record) -> None:
    job = ctx.state.jobs.get(cmd.key)
    stored = JobValue.from_dict(job["value"]) if job is not None and job["state"] == JobState.FAILED else None
    if stored is None or stored.recurring_time <= 0:
        ctx.reject(RejectionType.NOT_FOUND, f"Expected a job in back-off with key '{cmd.key}', but none found")
        return
    if stored.recurring_time > ctx.now:
        ctx.reject(RejectionType.INVALID_STATE, f"Job '{cmd.key}' back-off has not elapsed yet")
        return
    value = stored._replace(recurring_time=-1)
    ctx.typed_event(ValueType.JOB, JobIntent.RECURRED_AFTER_BACKOFF, cmd.key, value)
    b.job_became_activatable(ctx, cmd.key, value)


def yield_job(ctx: ProcessingContext, cmd: Record) -> None:
    """A pushed job whose stream vanished goes back to being activatable."""
    job = ctx.state.jobs.get(cmd.key)
    if job is None or job["state"] != JobState.ACTIVATED:
        ctx.reject(RejectionType.NOT_FOUND, f"Expected to yield activated job with key '{cmd.key}', but none found")
        return
    value = JobValue.from_dict(job["value"])._replace(deadline=-1, worker="")
    ctx.typed_event(ValueType.JOB, JobIntent.YIELDED, cmd.key, value)
    ctx.side_effects.jobs_available.add(value.type)


def resolve_incident(ctx: ProcessingContext, cmd: Record) -> None:
    stored = ctx.state.incidents.get(cmd.key)
    if stored is None:
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to resolve incident with key '{cmd.key}', but no such incident was found",
        )
        return
    if not b.may_update(ctx, stored):
        return
    incident = IncidentValue.from_dict(stored)
    rec = ctx.typed_event(ValueType.INCIDENT, IncidentIntent.RESOLVED, cmd.key, incident)
    ctx.respond(rec)
    job_key = incident.job_key
    if job_key > 0:
        job = ctx.state.jobs.get(job_key)
        if job is None:
            return
        value = JobValue.from_dict(job["value"])
        if job["state"] == JobState.ACTIVATABLE:
            b.job_became_activatable(ctx, job_key, value)
        else:
            inst = ctx.state.elements.get(incident.element_instance_key)
            if inst is not None:
                message = value.error_message or "No more retries left."
                b.raise_incident(ctx, inst, incident.error_type, message, job_key=job_key)
        return
    inst = ctx.state.elements.get(incident.element_instance_key)
    if inst is None:
        return
    if user_tasks.resume(ctx, inst):
        return
    pi = ProcessInstanceIntent
    if inst.state == pi.ELEMENT_ACTIVATING:
        ctx.follow_up(ValueType.PROCESS_INSTANCE, pi.ACTIVATE_ELEMENT, inst.key, inst.value.to_dict())
    elif inst.state == pi.ELEMENT_COMPLETING:
        ctx.follow_up(ValueType.PROCESS_INSTANCE, pi.COMPLETE_ELEMENT, inst.key, inst.value.to_dict())
