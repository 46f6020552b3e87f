"""Shared behaviours composed by the processors: variables, incidents, jobs, sequence flows and error catching.

Each function writes events through the processing context (which applies them) and never mutates state directly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Final

from broker.engine.access import Access, Caller, forbidden_message, hidden_message
from broker.engine.access import resolve as resolve_access
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.deployment_limits import DeploymentLimits
from broker.engine.elements.lookup import ElementLookup
from broker.engine.expressions import ExpressionEvaluator, ExpressionFailure, type_name
from broker.engine.models import ModelCache
from broker.protocol.entity_values import IncidentValue, JobValue, UserTaskValue, VariableValue
from broker.protocol.enums import (
    AsyncRequestIntent,
    CommandDistributionIntent,
    IncidentIntent,
    JobBatchIntent,
    JobIntent,
    ProcessEventIntent,
    ProcessInstanceIntent,
    RecordType,
    RejectionType,
    ValueType,
    VariableIntent,
)
from broker.protocol.record import Record, RequestMetadata
from broker.protocol.values import TENANT, ProcessInstanceValue
from broker.protocol.values import tenant_of as tenant_of  # processors read it as b.tenant_of
from broker.state.element_instance import ElementInstance
from broker.state.repositories import JobState

PI = ProcessInstanceIntent

DEFAULT_MAX_PROCESS_DEPTH: Final = 1000
"""Most process instances in one chain of call activities, the root included (Zeebe's ``maxProcessDepth``)."""


class Services:
    """What processors share besides state: the model cache, the expression evaluator, the job streams and the
    element processors' lookup."""

    def __init__(
        self,
        models: ModelCache,
        expressions: ExpressionEvaluator,
        job_streams: Any,
        elements: ElementLookup,
        partitions_count: int = 1,
        max_process_depth: int = DEFAULT_MAX_PROCESS_DEPTH,
    ) -> None:
        self.models = models
        self.expressions = expressions
        self.job_streams = job_streams
        # Which processor runs each element kind (the registry, handed in so no processor imports it).
        self.elements = elements
        self.partitions_count = partitions_count
        # What checking one deployment may spend (broker.deployments.*, set by the engine).
        self.deployment_limits = DeploymentLimits()
        self.max_process_depth = max_process_depth
        # Whether creating a root instance checks that no active one of its process has its business id.
        self.business_id_uniqueness = False
        # Whether an authenticated caller's command needs a granted permission (broker.security.authorizations).
        self.authorizations = False
        # Parsed DMN decision requirements graphs by key (a ``decision_processors.DrgCache``, set by the engine).
        self.drgs: Any = None
        # Sends a command to a partition after commit (set by the leader's partition; None while replaying).
        self.sender: Any = None


def caller_access(ctx: ProcessingContext) -> Access | None:
    """What the command's authenticated caller may do (resolved once per command), or None: the command has no
    caller (authentication off, or a command one partition sent another), and nothing is checked."""
    command = ctx.command
    caller = command.authorization if command is not None else None
    if not caller:  # the common case: costs one attribute read
        return None
    cached = ctx.caller_access
    if cached is not None and cached[0] is command:
        return cached[1]
    access = resolve_access(ctx.state.identity, Caller.of(caller))
    ctx.caller_access = (command, access)
    return access


def authorized(
    ctx: ProcessingContext,
    resource_type: str,
    permission: str,
    resource_ids: Iterable[str] = (),
    *,
    tenant: str = TENANT,
    existing: bool = False,
    request: str = "",
    also: tuple[str, ...] = (),
) -> bool:
    """Whether the command's caller may do ``permission`` on the resource (Camunda's checks); when not, the command
    is rejected here and False returned.

    - Tenant: a caller not assigned to ``tenant`` (directly, or through a group, role or mapping rule) is refused,
      FORBIDDEN for a new resource (``request`` names the request in Zeebe's message) and NOT_FOUND for an
      ``existing`` one (its existence stays hidden). The default tenant is open to every caller.
    - Permission (only with ``broker.security.authorizations.enabled``): a grant of ``permission`` (or one of
      ``also``) on every resource of the type or on one of ``resource_ids``, else FORBIDDEN.

    A command without a caller passes (see :func:`caller_access`).
    """
    access = caller_access(ctx)
    if access is None:
        return True
    if not assigned(access, tenant):
        if existing:
            ctx.reject(RejectionType.NOT_FOUND, hidden_message(permission, resource_type, tenant))
        else:
            ctx.reject(RejectionType.FORBIDDEN, _unassigned_message(request or permission, tenant))
        return False
    if not services(ctx).authorizations:
        return True
    ids = tuple(resource_ids)
    if access.allows_any(resource_type, ids, (permission, *also)):
        return True
    ctx.reject(RejectionType.FORBIDDEN, forbidden_message(permission, resource_type, ids))
    return False


def may_update(ctx: ProcessingContext, instance: Any, permission: str = "UPDATE_PROCESS_INSTANCE") -> bool:
    """:func:`authorized` for a change to an existing instance (or its job, incident, variables): ``permission`` on
    its process, or UPDATE_PROCESS_INSTANCE (Camunda 8.8's one permission for every change, which 8.9 splits
    into cancel, modify, …); an instance in a tenant the caller is not assigned to is not found.

    ``instance`` is a ProcessInstanceValue or a stored value with ``bpmnProcessId`` and ``tenantId``."""
    if isinstance(instance, dict):
        process_id, tenant = str(instance.get("bpmnProcessId") or ""), tenant_of(instance)
    else:
        process_id, tenant = instance.bpmn_process_id, instance.tenant_id or TENANT
    also = ("UPDATE_PROCESS_INSTANCE",) if permission != "UPDATE_PROCESS_INSTANCE" else ()
    return authorized(ctx, "PROCESS_DEFINITION", permission, [process_id], tenant=tenant, existing=True, also=also)


def refuse_unassigned_tenant(ctx: ProcessingContext, request: str, tenants: Iterable[str]) -> bool:
    """Reject the command (FORBIDDEN) when its authenticated caller names a tenant it is not assigned to; True when
    it did. For requests that name several tenants (job activation); see :func:`authorized`."""
    access = caller_access(ctx)
    if access is None:
        return False
    for tenant in dict.fromkeys(tenants):
        if not assigned(access, tenant):
            ctx.reject(RejectionType.FORBIDDEN, _unassigned_message(request, tenant))
            return True
    return False


def assigned(access: Access, tenant: str) -> bool:
    """Whether the caller may act in ``tenant``: one it is assigned to, or the default tenant, open to everyone."""
    return tenant == TENANT or tenant in access.tenants


def _unassigned_message(request: str, tenant: str) -> str:
    return (
        f"Expected to handle request {request} with tenant identifier '{tenant}', but tenant is not authorized to "
        "perform this request"
    )


def answer_again(
    ctx: ProcessingContext,
    value_type: ValueType,
    intent: Any,
    key: int,
    value: dict,
    request: RequestMetadata | None = None,
) -> None:
    """Answer with an event that is not written (again): a redelivered distribution answered like its first
    delivery, or a parked request answered once what it waited for is done."""
    event = Record(-1, key, RecordType.EVENT, value_type, int(intent), ctx.now, value, partition_id=ctx.partition_id)
    ctx.respond(event, request)


def park_request(ctx: ProcessingContext, cmd: Record, scope_key: int, **extra: Any) -> None:
    """Remember who sent ``cmd`` (ASYNC_REQUEST RECEIVED under ``scope_key``), to answer it when later processing
    finishes it; a command that no client waits for is not remembered."""
    if cmd.request is None:
        return
    ctx.event(
        ValueType.ASYNC_REQUEST,
        AsyncRequestIntent.RECEIVED,
        ctx.keys.next_key(),
        {
            "scopeKey": scope_key,
            "valueType": ValueType(cmd.value_type).name,
            "intent": cmd.intent_enum.name,
            "requestId": cmd.request.request_id,
            "requestStreamId": cmd.request.stream_id,
            "operationReference": -1,
            **extra,
        },
    )


def services(ctx: ProcessingContext) -> Services:
    return ctx.services


def root_instance_key(ctx: ProcessingContext, v: ProcessInstanceValue) -> int:
    """The process instance at the top of the chain of calls that started ``v``'s instance: the one ``v`` names,
    else (a value written before Weir kept it) found by following the parent links in the state."""
    if v.root_process_instance_key > 0:
        return v.root_process_instance_key
    key = v.process_instance_key
    parent_key = v.parent_process_instance_key
    while parent_key > 0:
        parent = ctx.state.elements.get(parent_key)
        if parent is None:
            break
        key = parent_key
        parent_key = parent.value.parent_process_instance_key
    return key


# -- variables -----------------------------------------------------------------------------------------------


def distribute(ctx: ProcessingContext, key: int, value_type: ValueType, intent: Any, command_value: dict) -> None:
    """Record that every other partition must receive this command; the leader delivers it until acknowledged."""
    for partition_id in range(1, services(ctx).partitions_count + 1):
        if partition_id == ctx.partition_id:
            continue
        ctx.event(
            ValueType.COMMAND_DISTRIBUTION,
            CommandDistributionIntent.STARTED,
            key,
            {
                "partitionId": partition_id,
                "valueType": value_type.name,
                "intent": intent.name,
                "commandValue": command_value,
            },
        )


def scope_chain(ctx: ProcessingContext, scope_key: int) -> list[int]:
    """``scope_key`` and its flow scopes up to the process instance, innermost first."""
    chain = []
    key = scope_key
    while key > 0:
        chain.append(key)
        inst = ctx.state.elements.get(key)
        if inst is None:
            break
        key = inst.value.flow_scope_key
    return chain


def visible_variables(ctx: ProcessingContext, scope_key: int, names: list[str] | None = None) -> dict[str, Any]:
    """Every variable visible from ``scope_key`` (inner scopes shadow outer ones), optionally only ``names``."""
    out: dict[str, Any] = {}
    chain = scope_chain(ctx, scope_key)
    if names:
        wanted = set(names)
        for key in chain:
            for name in list(wanted):
                found = ctx.state.variables.get_local(key, name)
                if found is not None:
                    out[name] = found[1]
                    wanted.discard(name)
            if not wanted:
                break
        return out
    for key in reversed(chain):
        out.update(ctx.state.variables.local(key))
    return out


def _variable_value(scope_key: int, name: str, value: Any, inst: ElementInstance | None) -> VariableValue:
    if inst is None:
        return VariableValue(name, value, scope_key, scope_key, -1, "")
    v = inst.value
    return VariableValue(
        name,
        value,
        scope_key,
        v.process_instance_key,
        v.process_definition_key,
        v.bpmn_process_id,
        v.tenant_id,
        v.root_process_instance_key,
    )


def set_local_variable(
    ctx: ProcessingContext, scope_key: int, name: str, value: Any, *, instance: ElementInstance | None = None
) -> None:
    """Create or update a variable exactly at ``scope_key``; an unchanged value writes nothing."""
    existing = ctx.state.variables.get_local(scope_key, name)
    inst = instance if instance is not None else ctx.state.elements.get(scope_key)
    if existing is None:
        ctx.typed_event(
            ValueType.VARIABLE,
            VariableIntent.CREATED,
            ctx.keys.next_key(),
            _variable_value(scope_key, name, value, inst),
        )
    elif existing[1] != value or type(existing[1]) is not type(value):
        ctx.typed_event(
            ValueType.VARIABLE,
            VariableIntent.UPDATED,
            existing[0],
            _variable_value(scope_key, name, value, inst),
        )


def set_local_document(
    ctx: ProcessingContext, scope_key: int, document: dict[str, Any], instance: ElementInstance | None = None
) -> None:
    inst = instance if instance is not None else ctx.state.elements.get(scope_key)
    for name, value in document.items():
        set_local_variable(ctx, scope_key, name, value, instance=inst)


def merge_document(ctx: ProcessingContext, scope_key: int, document: dict[str, Any]) -> None:
    """Propagate each variable to the nearest scope (from ``scope_key`` up) that defines it, else the root."""
    if not document:
        return
    chain = scope_chain(ctx, scope_key)
    root = chain[-1]
    for name, value in document.items():
        target = root
        for key in chain:
            if ctx.state.variables.get_local(key, name) is not None:
                target = key
                break
        set_local_variable(ctx, target, name, value)


# -- incidents -----------------------------------------------------------------------------------------------


# UTF-16 surrogates, which a Python str holds only when lone (a FEEL string may: "\ud800").
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def raise_incident(
    ctx: ProcessingContext,
    instance: ElementInstance,
    error_type: str,
    message: str,
    *,
    job_key: int = -1,
    variable_scope_key: int | None = None,
) -> None:
    v = instance.value
    ctx.typed_event(
        ValueType.INCIDENT,
        IncidentIntent.CREATED,
        ctx.keys.next_key(),
        IncidentValue(
            error_type=error_type,
            # A failure message may quote a FEEL value holding a lone surrogate, which the state and the log
            # cannot store: shown as U+FFFD instead, so the incident is raised rather than the command failing.
            error_message=_SURROGATE.sub("\ufffd", message),
            bpmn_process_id=v.bpmn_process_id,
            process_definition_key=v.process_definition_key,
            process_instance_key=v.process_instance_key,
            element_id=v.element_id,
            element_instance_key=instance.key,
            job_key=job_key,
            variable_scope_key=variable_scope_key if variable_scope_key is not None else instance.key,
            tenant_id=v.tenant_id,
            root_process_instance_key=v.root_process_instance_key,
        ),
    )


def resolve_incidents_of(ctx: ProcessingContext, instance: ElementInstance) -> None:
    """Resolve the element's and its job's open incidents (the element is leaving: they no longer apply)."""
    keys = []
    ik = ctx.state.incidents.for_element(instance.key)
    if ik is not None:
        keys.append(ik)
    if instance.job_key > 0:
        jk = ctx.state.incidents.for_job(instance.job_key)
        if jk is not None:
            keys.append(jk)
    for key in keys:
        incident = ctx.state.incidents.get(key)
        if incident is not None:
            ctx.typed_event(ValueType.INCIDENT, IncidentIntent.RESOLVED, key, IncidentValue.from_dict(incident))


# -- expressions in an element's context ---------------------------------------------------------------------


def evaluate(ctx: ProcessingContext, source: str, scope_key: int) -> Any:
    """Evaluate a model attribute against the variables visible at ``scope_key``."""
    if not source.startswith("="):
        return source
    return services(ctx).expressions.evaluate(source, visible_variables(ctx, scope_key), ctx.now)


def apply_input_mappings(
    ctx: ProcessingContext, element: bpmn.Element, instance: ElementInstance
) -> ExpressionFailure | None:
    if not element.input_mappings:
        return None
    context = visible_variables(ctx, instance.key)
    local: dict[str, Any] = {}
    for mapping in element.input_mappings:
        value = _mapping_source(ctx, mapping.source, {**context, **local})
        if isinstance(value, ExpressionFailure):
            return value
        _assign_path(local, mapping.target, value)
    set_local_document(ctx, instance.key, local, instance)
    return None


def apply_output_mappings(
    ctx: ProcessingContext, element: bpmn.Element, instance: ElementInstance, scope_key: int
) -> ExpressionFailure | None:
    """The element's output mappings, merged from ``scope_key`` (its flow scope, or its own for an instance of a
    multi-instance activity) up; all evaluated before anything is written."""
    if element.output_mappings:
        context = visible_variables(ctx, instance.key)
        result: dict[str, Any] = {}
        for mapping in element.output_mappings:
            value = _mapping_source(ctx, mapping.source, context)
            if isinstance(value, ExpressionFailure):
                return value
            target_root = mapping.target.split(".", 1)[0]
            if "." in mapping.target and target_root not in result:
                existing = visible_variables(ctx, scope_key, [target_root]).get(target_root)
                if isinstance(existing, dict):
                    result[target_root] = json.loads(json.dumps(existing))
            _assign_path(result, mapping.target, value)
        merge_document(ctx, scope_key, result)
    return None


def _mapping_source(ctx: ProcessingContext, source: str, context: dict[str, Any]) -> Any:
    if not source.startswith("="):
        return source
    return services(ctx).expressions.evaluate(source, context, ctx.now)


def _assign_path(target: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node = target
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


# -- jobs ----------------------------------------------------------------------------------------------------


def _stream_may_take(ctx: ProcessingContext, stream: Any, job: JobValue) -> bool:
    """Whether an authenticated worker's stream may be pushed the job: as its activation would be, the job's tenant
    must be the worker's and (with authorizations on) its process one the worker may update. What the worker may do
    is resolved once per round."""
    memo_key = ("stream access", stream.stream_id)
    access = ctx.memo.get(memo_key)
    if access is None:
        access = resolve_access(ctx.state.identity, Caller.of(stream.caller))
        ctx.memo[memo_key] = access
    if not assigned(access, job.tenant_id):
        return False
    return not services(ctx).authorizations or access.allows_any(
        "PROCESS_DEFINITION", (job.bpmn_process_id,), ("UPDATE_PROCESS_INSTANCE",)
    )


def job_became_activatable(ctx: ProcessingContext, job_key: int, job: JobValue) -> None:
    """Push the job to an open job stream of its type, or tell long-polling workers that work is there."""
    streams = services(ctx).job_streams
    stream = None
    if streams is not None:
        stream = streams.pick(job.type, job.tenant_id, lambda s: _stream_may_take(ctx, s, job))
    if stream is None:
        ctx.side_effects.jobs_available.add(job.type)
        return
    activated = activate_job(
        ctx, job_key, job, worker=stream.worker, timeout=stream.timeout, fetch=stream.fetch_variables
    )
    record = ctx.event(
        ValueType.JOB_BATCH,
        JobBatchIntent.ACTIVATED,
        ctx.keys.next_key(),
        {
            "type": job.type,
            "worker": stream.worker,
            "timeout": stream.timeout,
            "maxJobsToActivate": 1,
            "jobKeys": [job_key],
            "jobs": [activated.to_dict()],
            "truncated": False,
            "tenantIds": [job.tenant_id],
        },
    )
    ctx.side_effects.job_pushes.append((stream.stream_id, record))


def activate_job(
    ctx: ProcessingContext, job_key: int, job: JobValue, *, worker: str, timeout: int, fetch: list[str] | None
) -> JobValue:
    """The job as handed to a worker: deadline from the command's time, variables visible at its element."""
    variables = visible_variables(ctx, job.element_instance_key, fetch or None)
    user_task = _listened_user_task(ctx, job.element_instance_key) if job.job_kind == "TASK_LISTENER" else None
    return job.activated(worker, ctx.now + timeout, variables, user_task)


def _listened_user_task(ctx: ProcessingContext, element_instance_key: int) -> dict[str, Any]:
    """What a task listener's worker is told of its user task: the task as the transition would leave it."""
    key = ctx.state.user_tasks.for_element(element_instance_key)
    entry = ctx.state.user_tasks.get(key) if key is not None else None
    if entry is None:
        return {}
    task = UserTaskValue.from_dict(entry["transition"]["value"] if entry["transition"] is not None else entry["value"])
    return {
        "action": task.action,
        "assignee": task.assignee,
        "candidateGroups": list(task.candidate_groups_list),
        "candidateUsers": list(task.candidate_users_list),
        "changedAttributes": list(task.changed_attributes),
        "dueDate": task.due_date,
        "followUpDate": task.follow_up_date,
        "formKey": task.form_key,
        "priority": task.priority,
        "userTaskKey": task.user_task_key,
    }


def cancel_job(ctx: ProcessingContext, instance: ElementInstance) -> None:
    job_key = instance.job_key
    if job_key <= 0:
        return
    job = ctx.state.jobs.get(job_key)
    if job is not None and job["state"] != JobState.ERROR_THROWN:
        ctx.typed_event(ValueType.JOB, JobIntent.CANCELED, job_key, JobValue.from_dict(job["value"]))


# -- sequence flows ------------------------------------------------------------------------------------------


def link_catch(process: bpmn.Process, throw: bpmn.Element) -> bpmn.Element:
    """The link catch event a link throw event continues at: the one of the same name in the same flow scope.

    Deployment validation guarantees exactly one exists.
    """
    found = process.link_catch_event_of(throw.flow_scope_id, throw.link_name or "")
    if found is not None:
        return found
    raise KeyError(f"no link catch event named '{throw.link_name}' in scope '{throw.flow_scope_id}'")


def activate_element(
    ctx: ProcessingContext,
    element: bpmn.Element,
    like: ProcessInstanceValue,
    scope_key: int,
    key: int | None = None,
    *,
    instance_of_body: bool = False,
    event_type: str | None = None,
) -> Record:
    """Write ACTIVATE_ELEMENT for ``element`` in flow scope ``scope_key`` (``like``: any element of the instance).

    A multi-instance activity is entered through its body; the body activates the instances themselves
    (``instance_of_body``). ``event_type``: what the records carry instead of the element's own (a compensation
    handler's carry COMPENSATION).
    """
    if element.multi_instance is not None and not instance_of_body:
        value = like.for_element(element.id, bpmn.MULTI_INSTANCE_BODY, event_type or bpmn.UNSPECIFIED, scope_key)
    else:
        value = like.for_element(element.id, element.element_type, event_type or element.event_type, scope_key)
    return ctx.instance_command(PI.ACTIVATE_ELEMENT, key if key is not None else ctx.keys.next_key(), value)


def trigger_boundary(
    ctx: ProcessingContext, attached: ElementInstance, boundary: bpmn.Element, variables: dict
) -> None:
    """An interrupting boundary event fires: it starts once ``attached`` has terminated."""
    trigger = event_trigger(ctx, attached, boundary, variables)
    ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERING, ctx.keys.next_key(), trigger)
    ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.TERMINATE_ELEMENT, attached.key, attached.value.to_dict())


def trigger_event_sub_process(
    ctx: ProcessingContext, scope: ElementInstance, start: bpmn.Element, variables: dict
) -> None:
    """The start event of an interrupting event sub-process of ``scope`` fires: the event sub-process starts once
    the scope's other children have terminated."""
    trigger = event_trigger(ctx, scope, start, variables)
    ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERING, ctx.keys.next_key(), trigger)
    children = ctx.state.elements.children(scope.key)
    for child_key in children:
        child = ctx.state.elements.get(child_key)
        if child is not None and child.state != PI.ELEMENT_TERMINATING:
            ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.TERMINATE_ELEMENT, child_key, child.value.to_dict())
    if not children:
        start_event_sub_process(ctx, scope, start, trigger, interrupting=True)


def start_event_sub_process(
    ctx: ProcessingContext, scope: ElementInstance, start: bpmn.Element, trigger: dict, *, interrupting: bool
) -> None:
    """Activate the event sub-process of ``start`` inside ``scope``; it begins at ``start`` with the trigger.

    An interrupting trigger waited on the scope (TRIGGERING) and moves to the event sub-process now; a
    non-interrupting one is recorded for the event sub-process only, leaving the scope's own pending triggers alone.
    """
    process = services(ctx).models.get(scope.value.process_definition_key)
    esp_key = ctx.keys.next_key()
    value = {**trigger, "scopeKey": scope.key if interrupting else esp_key}
    ctx.event(ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERED, esp_key, value)
    activate_element(ctx, process.element(start.flow_scope_id), scope.value, scope.key, key=esp_key)


def event_trigger(ctx: ProcessingContext, scope: ElementInstance, target: bpmn.Element, variables: dict) -> dict:
    """A PROCESS_EVENT value for ``target`` firing within ``scope``."""
    v = scope.value
    return {
        "scopeKey": scope.key,
        "targetElementId": target.id,
        "variables": variables,
        "processDefinitionKey": v.process_definition_key,
        "processInstanceKey": v.process_instance_key,
        "tenantId": v.tenant_id,
    }


def unhandled_error_message(code: str, message: str) -> str:
    return (
        f"Expected to throw an error event with the code '{code}' with message '{message}', but it was not caught."
        " No error events are available in the scope."
    )


def describe_type(value: Any) -> str:
    return type_name(value)
