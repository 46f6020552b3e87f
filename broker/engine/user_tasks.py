"""Native user tasks (``zeebe:userTask``): the USER_TASK entity, its commands and its task listeners.

A user task is created when its element activates and lives until the element completes or terminates. Every change
goes through a transition: a command (ASSIGN, CLAIM, UPDATE, COMPLETE) or the engine (creation, cancellation) writes
the transition's first event (ASSIGNING, CLAIMING…); the task listeners of that event type then run one after the
other as jobs (kind TASK_LISTENER), each able to correct the task's attributes or, for assigning, updating and
completing, to deny the change; when the last one completed, the transition ends (ASSIGNED, UPDATED…). A client's
request is answered at that end, so its record (an ASYNC_REQUEST) is kept in state while listeners run.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from broker.engine import behaviors as b
from broker.engine.access import Access
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.job_task import (
    as_date_time,
    as_string,
    as_string_list,
    expected,
    type_and_retries,
    write_job,
)
from broker.engine.expressions import ExpressionFailure
from broker.protocol.entity_values import JobValue, UserTaskValue
from broker.protocol.enums import (
    AsyncRequestIntent,
    ProcessInstanceIntent,
    RecordType,
    RejectionType,
    UserTaskIntent,
    ValueType,
)
from broker.protocol.record import Record, RequestMetadata
from broker.state.element_instance import ElementInstance
from broker.state.repositories import UserTaskState

UT = UserTaskIntent
S = UserTaskState

ASSIGNEE = "assignee"
CANDIDATE_GROUPS = "candidateGroupsList"
CANDIDATE_USERS = "candidateUsersList"
DUE_DATE = "dueDate"
FOLLOW_UP_DATE = "followUpDate"
PRIORITY = "priority"
#: What an UPDATE may change, and what a listener may correct, in the record's attribute names.
CHANGEABLE = (CANDIDATE_GROUPS, CANDIDATE_USERS, DUE_DATE, FOLLOW_UP_DATE, PRIORITY)
CORRECTABLE = (ASSIGNEE, *CHANGEABLE)
DEFAULT_PRIORITY = 50
#: The typed value's field of each attribute an UPDATE may change or a listener may correct.
_FIELDS: dict[str, str] = {
    ASSIGNEE: "assignee",
    CANDIDATE_GROUPS: "candidate_groups_list",
    CANDIDATE_USERS: "candidate_users_list",
    DUE_DATE: "due_date",
    FOLLOW_UP_DATE: "follow_up_date",
    PRIORITY: "priority",
}

# lifecycle state → (listener event type, the event that ends the transition, the event a denial writes)
_TRANSITIONS: dict[str, tuple[str, UT, UT | None]] = {
    S.CREATING: ("creating", UT.CREATED, None),
    S.ASSIGNING: ("assigning", UT.ASSIGNED, UT.ASSIGNMENT_DENIED),
    S.CLAIMING: ("assigning", UT.ASSIGNED, UT.ASSIGNMENT_DENIED),
    S.UPDATING: ("updating", UT.UPDATED, UT.UPDATE_DENIED),
    S.COMPLETING: ("completing", UT.COMPLETED, UT.COMPLETION_DENIED),
    S.CANCELING: ("canceling", UT.CANCELED, None),
}
_DENIALS: dict[str, str] = {
    S.ASSIGNING: "Assignment",
    S.CLAIMING: "Assignment",
    S.UPDATING: "Update",
    S.COMPLETING: "Completion",
}


def listener_event_type(lifecycle_state: str) -> str:
    """The task listener event type (``assigning``…) a transition runs the listeners of."""
    return _TRANSITIONS[lifecycle_state][0]


def may_deny(lifecycle_state: str) -> bool:
    return _TRANSITIONS[lifecycle_state][2] is not None


# -- creation ------------------------------------------------------------------------------------------------


def create(ctx: ProcessingContext, element: bpmn.Element, inst: ElementInstance) -> None:
    """The element is ACTIVATING: evaluate the task's attributes and write CREATING (an incident on a bad value)."""
    task = element.user_task
    assert task is not None and task.native
    attributes = _evaluate_attributes(ctx, task, inst.key)
    if isinstance(attributes, ExpressionFailure):
        b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", attributes.message)
        return
    form_key = -1
    if task.form_id is not None:
        form_id = b.evaluate(ctx, task.form_id, inst.key)
        form = ctx.state.forms.latest(inst.value.tenant_id, form_id) if isinstance(form_id, str) else None
        if form is None:
            message = (
                f"Expected to find a form with id '{form_id}', but no form with this id is found. Deploy a form "
                "with this id, then resolve the incident."
            )
            b.raise_incident(ctx, inst, "FORM_NOT_FOUND", message)
            return
        form_key = form["formKey"]
    v = inst.value
    key = ctx.keys.next_key()
    value = UserTaskValue(
        user_task_key=key,
        assignee=attributes.get(ASSIGNEE) or "",
        candidate_groups_list=tuple(attributes.get(CANDIDATE_GROUPS) or ()),
        candidate_users_list=tuple(attributes.get(CANDIDATE_USERS) or ()),
        due_date=attributes.get(DUE_DATE) or "",
        follow_up_date=attributes.get(FOLLOW_UP_DATE) or "",
        form_key=form_key,
        external_form_reference=attributes.get("externalFormReference") or "",
        variables={},
        custom_headers=dict(task.headers),
        bpmn_process_id=v.bpmn_process_id,
        process_definition_version=v.version,
        process_definition_key=v.process_definition_key,
        process_instance_key=v.process_instance_key,
        element_id=element.id,
        element_instance_key=inst.key,
        changed_attributes=(),
        action="",
        creation_timestamp=ctx.now,
        priority=attributes.get(PRIORITY, DEFAULT_PRIORITY),
        denied_reason="",
        tags=v.tags,  # the instance's tags and business id (Camunda 8.9)
        business_id=v.business_id,
        root_process_instance_key=v.root_process_instance_key,
        tenant_id=v.tenant_id,
    )
    ctx.typed_event(ValueType.USER_TASK, UT.CREATING, key, value)
    proceed(ctx, key)


def _evaluate_attributes(
    ctx: ProcessingContext, task: bpmn.UserTaskDefinition, scope_key: int
) -> dict[str, Any] | ExpressionFailure:
    """Assignment, schedule, priority and form reference: static values as written, FEEL values evaluated."""
    out: dict[str, Any] = {}
    context: dict[str, Any] | None = None
    sources = (
        (ASSIGNEE, task.assignee, as_string),
        (CANDIDATE_GROUPS, task.candidate_groups, _static_or_list),
        (CANDIDATE_USERS, task.candidate_users, _static_or_list),
        (DUE_DATE, task.due_date, as_date_time),
        (FOLLOW_UP_DATE, task.follow_up_date, as_date_time),
        (PRIORITY, task.priority, _as_priority),
        ("externalFormReference", task.external_reference or task.form_key, as_string),
    )
    for name, source, convert in sources:
        if source is None:
            continue
        if not source.startswith("="):
            static = _static(name, source)
            if static is not None:
                out[name] = static
            continue
        if context is None:
            context = b.visible_variables(ctx, scope_key)
        value = b.services(ctx).expressions.evaluate_raw(source, context, ctx.now)
        if isinstance(value, ExpressionFailure):
            return value
        converted = convert(source, value)
        if isinstance(converted, ExpressionFailure):
            return converted
        if converted is not None:
            out[name] = converted
    return out


def _static(name: str, source: str) -> Any:
    if name in (CANDIDATE_GROUPS, CANDIDATE_USERS):
        return [item.strip() for item in source.split(",") if item.strip()]
    if name == PRIORITY:
        return int(source)  # checked at deployment
    return source


def _static_or_list(source: str, value: Any) -> Any:
    """A FEEL list of strings (or a comma-separated string, as Zeebe also accepts)."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    text = as_string_list(source, value)
    if text is None or isinstance(text, ExpressionFailure):
        return text
    return list(value)


def _as_priority(source: str, value: Any) -> int | ExpressionFailure | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        return expected(source, "NUMBER", value)
    if not 0 <= value <= 100:
        return ExpressionFailure(
            f"Expected result of the expression '{source}' to be a number between 0 and 100, but was '{value}'."
        )
    return int(value)


# -- transitions ---------------------------------------------------------------------------------------------


def begin(ctx: ProcessingContext, key: int, intent: UT, value: UserTaskValue) -> None:
    """Write a transition's first event (ASSIGNING, CLAIMING, UPDATING, COMPLETING, CANCELING) and run it on."""
    ctx.typed_event(ValueType.USER_TASK, intent, key, value)
    proceed(ctx, key)


def proceed(ctx: ProcessingContext, key: int) -> None:
    """The task's transition continues: the next listener's job, or, when none is left, the transition's end."""
    entry = ctx.state.user_tasks.get(key)
    assert entry is not None and entry["transition"] is not None
    listeners = listeners_of(ctx, entry)
    done = entry["transition"]["listener"]
    if done < len(listeners):
        inst = ctx.state.elements.get(UserTaskValue.from_dict(entry["value"]).element_instance_key)
        if inst is not None:
            _create_listener_job(ctx, entry, listeners[done], inst)
        return
    _finish(ctx, key, entry)


def resume(ctx: ProcessingContext, inst: ElementInstance) -> bool:
    """An incident of the element was resolved: a transition it stopped (a listener's job could not be created)
    goes on. False when the element has no task in such a transition (creation resumes by activating again)."""
    key = ctx.state.user_tasks.for_element(inst.key)
    entry = ctx.state.user_tasks.get(key) if key is not None else None
    if key is None or entry is None or entry["transition"] is None or entry["state"] == S.CREATING:
        return False
    proceed(ctx, key)
    return True


def listeners_of(ctx: ProcessingContext, entry: dict[str, Any]) -> list[bpmn.TaskListener]:
    value = UserTaskValue.from_dict(entry["value"])
    process = b.services(ctx).models.get(value.process_definition_key)
    task = process.element(value.element_id).user_task
    event_type = listener_event_type(entry["state"])
    return [listener for listener in (task.listeners if task else ()) if listener.event_type == event_type]


def _create_listener_job(
    ctx: ProcessingContext, entry: dict[str, Any], listener: bpmn.TaskListener, inst: ElementInstance
) -> None:
    """A job of kind TASK_LISTENER for the element; its completion continues the transition."""
    evaluated = type_and_retries(ctx, listener.type, listener.retries, inst.key)
    if isinstance(evaluated, ExpressionFailure):
        b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", evaluated.message)
        return
    job_type, retries = evaluated
    task = UserTaskValue.from_dict(entry["transition"]["value"])
    job_key, job = write_job(
        ctx,
        inst,
        job_type,
        retries,
        kind="TASK_LISTENER",
        headers=dict(task.custom_headers),
        listener_event_type=listener.event_type.upper(),
        changed_attributes=task.changed_attributes,
    )
    b.job_became_activatable(ctx, job_key, job)


def _finish(ctx: ProcessingContext, key: int, entry: dict[str, Any]) -> None:
    """Every listener completed: the transition's end event, then what it causes."""
    state = entry["state"]
    value = UserTaskValue.from_dict(entry["transition"]["value"])
    end = _TRANSITIONS[state][1]
    assignee = value.assignee  # at creation: the modelled one (or a creating listener's correction)
    if state == S.CREATING:
        value = value._replace(assignee="")  # ... assigned next, through its own transition
    record = ctx.typed_event(ValueType.USER_TASK, end, key, value)
    _answer(ctx, value.element_instance_key, record)
    inst = ctx.state.elements.get(value.element_instance_key)
    if inst is None:
        return
    if state == S.CREATING:
        lc.activated(ctx, inst)
        if assignee:
            begin(ctx, key, UT.ASSIGNING, value._replace(assignee=assignee, changed_attributes=(ASSIGNEE,)))
    elif state == S.COMPLETING:
        _complete_element(ctx, inst, value.variables)
    elif state == S.CANCELING and inst.state == ProcessInstanceIntent.ELEMENT_TERMINATING:
        lc.terminated(ctx, inst)


def _complete_element(ctx: ProcessingContext, inst: ElementInstance, variables: dict[str, Any]) -> None:
    """As a job's completion does: the variables reach the element (its scope, or through output mappings)."""
    if inst.state != ProcessInstanceIntent.ELEMENT_ACTIVATED:
        return
    process = b.services(ctx).models.get(inst.value.process_definition_key)
    element = process.element(inst.value.element_id)
    if variables:
        if element.output_mappings:
            b.set_local_document(ctx, inst.key, variables, inst)
        else:
            b.merge_document(ctx, inst.key, variables)
    ctx.follow_up(ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.COMPLETE_ELEMENT, inst.key, inst.value.to_dict())


def cancel(ctx: ProcessingContext, inst: ElementInstance) -> bool:
    """The element is terminating: cancel its task. True while canceling listeners run (the element waits)."""
    key = ctx.state.user_tasks.for_element(inst.key)
    if key is None:
        return False
    entry = ctx.state.user_tasks.get(key)
    assert entry is not None
    if entry["state"] == S.CANCELING:
        return True
    b.cancel_job(ctx, inst)  # a listener of the interrupted transition
    b.resolve_incidents_of(ctx, inst)  # ... and what stopped it: the task is going away
    task = UserTaskValue.from_dict(entry["value"])
    request = ctx.state.async_requests.get(inst.key)
    if request is not None:
        _refuse(ctx, request, key, task, f"the user task with key '{key}' was canceled")
    value = task._replace(changed_attributes=(), action="")
    ctx.typed_event(ValueType.USER_TASK, UT.CANCELING, key, value)
    canceling = ctx.state.user_tasks.get(key)
    assert canceling is not None
    if listeners_of(ctx, canceling):
        proceed(ctx, key)  # the element terminates when the last canceling listener completed
        return True
    ctx.typed_event(ValueType.USER_TASK, UT.CANCELED, key, value)
    return False


# -- client requests -----------------------------------------------------------------------------------------


def _receive(ctx: ProcessingContext, cmd: Record, scope_key: int) -> None:
    """Remember who asked, to answer when the transition ends."""
    b.park_request(ctx, cmd, scope_key)


def _answer(ctx: ProcessingContext, scope_key: int, record: Record) -> None:
    request = ctx.state.async_requests.get(scope_key)
    if request is None:
        return
    ctx.respond(record, RequestMetadata(request["requestStreamId"], request["requestId"]))
    ctx.event(ValueType.ASYNC_REQUEST, AsyncRequestIntent.PROCESSED, request["key"], request)


def _refuse(ctx: ProcessingContext, request: dict[str, Any], key: int, task: UserTaskValue, reason: str) -> None:
    """Answer a waiting request with a rejection of its command (INVALID_STATE)."""
    cmd = ctx.command
    assert cmd is not None
    rejection = Record(
        position=cmd.position,
        key=key,
        record_type=RecordType.COMMAND_REJECTION,
        value_type=ValueType.USER_TASK,
        intent=int(UserTaskIntent[request["intent"]]),
        timestamp=cmd.timestamp,
        value=task.to_dict(),
        source_position=cmd.position,
        partition_id=ctx.partition_id,
        rejection_type=RejectionType.INVALID_STATE,
        rejection_reason=reason,
    )
    ctx.respond(rejection, RequestMetadata(request["requestStreamId"], request["requestId"]))
    ctx.event(ValueType.ASYNC_REQUEST, AsyncRequestIntent.PROCESSED, request["key"], request)


# -- commands ------------------------------------------------------------------------------------------------


def _task_or_reject(ctx: ProcessingContext, cmd: Record, action: str) -> dict[str, Any] | None:
    entry = ctx.state.user_tasks.get(cmd.key)
    if entry is None:
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to {action} user task with key '{cmd.key}', but no such user task was found",
        )
        return None
    if not _may_change(ctx, cmd, entry["value"]):
        return None
    if entry["state"] != S.CREATED:
        ctx.reject(
            RejectionType.INVALID_STATE,
            f"Expected to {action} user task with key '{cmd.key}', but it is in state '{entry['state']}'",
        )
        return None
    return entry


def _may_change(ctx: ProcessingContext, cmd: Record, task: dict[str, Any]) -> bool:
    """UPDATE_USER_TASK on the task's process (Camunda's permission), or, without it, what a task list offers its
    user: claiming for itself a task it is a candidate for (by name or group) and completing a task assigned to it.
    A task in a tenant the caller is not assigned to is not found."""
    access = b.caller_access(ctx)
    if access is None:
        return True
    tenant = b.tenant_of(task)
    if _offered(cmd, task, access) and b.assigned(access, tenant):
        return True
    process_id = str(task.get("bpmnProcessId") or "")
    return b.authorized(ctx, "PROCESS_DEFINITION", "UPDATE_USER_TASK", [process_id], tenant=tenant, existing=True)


def _offered(cmd: Record, task: dict[str, Any], access: Access) -> bool:
    """Whether the command is the task's own user taking or finishing it: a claim for itself of a task offered to
    it (a candidate user or group, or already its own), or completing its own task."""
    own = access.username
    if not own:
        return False
    if cmd.intent == UT.COMPLETE:
        return task.get("assignee") == own
    if cmd.intent == UT.CLAIM and str(cmd.value.get("assignee") or "") == own:
        candidate = own in (task.get("candidateUsersList") or ())
        return (
            candidate or task.get("assignee") == own or bool(access.groups & set(task.get("candidateGroupsList") or ()))
        )
    return False


def _action(cmd: Record, default: str) -> str:
    return str(cmd.value.get("action") or default)


def assign(ctx: ProcessingContext, cmd: Record) -> None:
    """ASSIGN: set (or, with an empty assignee, clear) the assignee, whoever held the task."""
    entry = _task_or_reject(ctx, cmd, "assign")
    if entry is None:
        return
    task = UserTaskValue.from_dict(entry["value"])
    assignee = str(cmd.value.get("assignee") or "")
    value = task._replace(
        changed_attributes=(ASSIGNEE,) if assignee != task.assignee else (),
        assignee=assignee,
        action=_action(cmd, "assign"),
        denied_reason="",
    )
    _receive(ctx, cmd, value.element_instance_key)
    begin(ctx, cmd.key, UT.ASSIGNING, value)


def claim(ctx: ProcessingContext, cmd: Record) -> None:
    """CLAIM: take an unassigned task (or one already assigned to the same person)."""
    entry = _task_or_reject(ctx, cmd, "claim")
    if entry is None:
        return
    assignee = str(cmd.value.get("assignee") or "")
    if not assignee.strip():
        ctx.reject(
            RejectionType.INVALID_STATE,
            f"Expected to claim user task with key '{cmd.key}', but provided assignee is empty",
        )
        return
    task = UserTaskValue.from_dict(entry["value"])
    if task.assignee and task.assignee != assignee:
        ctx.reject(
            RejectionType.INVALID_STATE,
            f"Expected to claim user task with key '{cmd.key}', but it has already been assigned",
        )
        return
    value = task._replace(
        changed_attributes=(ASSIGNEE,) if assignee != task.assignee else (),
        assignee=assignee,
        action=_action(cmd, "claim"),
        denied_reason="",
    )
    _receive(ctx, cmd, value.element_instance_key)
    begin(ctx, cmd.key, UT.CLAIMING, value)


def update(ctx: ProcessingContext, cmd: Record) -> None:
    """UPDATE: the attributes named in ``changedAttributes`` take the command's values (only real changes count)."""
    entry = _task_or_reject(ctx, cmd, "update")
    if entry is None:
        return
    requested = [name for name in cmd.value.get("changedAttributes") or [] if name in CHANGEABLE]
    problem = _attribute_problem(cmd.value, requested)
    if problem:
        ctx.reject(RejectionType.INVALID_ARGUMENT, f"Expected to update user task with key '{cmd.key}', but {problem}")
        return
    value, changed = _changed(
        UserTaskValue.from_dict(entry["value"]), {name: cmd.value.get(name) for name in requested}
    )
    value = value._replace(changed_attributes=changed, action=_action(cmd, "update"), denied_reason="")
    _receive(ctx, cmd, value.element_instance_key)
    begin(ctx, cmd.key, UT.UPDATING, value)


def complete(ctx: ProcessingContext, cmd: Record) -> None:
    """COMPLETE: the task is done; its variables reach the element once the completing listeners agreed."""
    entry = _task_or_reject(ctx, cmd, "complete")
    if entry is None:
        return
    value = UserTaskValue.from_dict(entry["value"])._replace(
        variables=cmd.value.get("variables") or {},
        action=_action(cmd, "complete"),
        changed_attributes=(),
        denied_reason="",
    )
    _receive(ctx, cmd, value.element_instance_key)
    begin(ctx, cmd.key, UT.COMPLETING, value)


def _changed(task: UserTaskValue, values: dict[str, Any]) -> tuple[UserTaskValue, tuple[str, ...]]:
    """``task`` with the attributes of ``values`` (record attribute names) set, and the names of those that changed."""
    changed = []
    for name, raw in values.items():
        field = _FIELDS.get(name)
        if field is None:
            continue
        new = _normalized(name, raw)
        if new != getattr(task, field):
            task = task._replace(**{field: new})
            changed.append(name)
    return task, tuple(changed)


def _normalized(name: str, value: Any) -> Any:
    if name in (CANDIDATE_GROUPS, CANDIDATE_USERS):
        return tuple(str(item) for item in value or [])
    if name == PRIORITY:
        return DEFAULT_PRIORITY if value is None else int(value)
    return "" if value is None else str(value)


def _attribute_problem(values: dict[str, Any], names: list[str]) -> str | None:
    """Why the values of ``names`` cannot be a task's (a priority out of 0..100, a date that is not ISO-8601…)."""
    for name in names:
        value = values.get(name)
        if name == PRIORITY and value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
                return f"the priority must be a number between 0 and 100, but was '{value}'"
        elif name in (DUE_DATE, FOLLOW_UP_DATE) and value:
            try:
                parsed = dt.datetime.fromisoformat(str(value))
            except ValueError:
                parsed = None
            if parsed is None or parsed.tzinfo is None:
                return f"the {name} must be a date and time with an offset (ISO-8601), but was '{value}'"
        elif name in (CANDIDATE_GROUPS, CANDIDATE_USERS) and value is not None:
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                return f"the {name} must be a list of strings, but was '{value}'"
        elif name == ASSIGNEE and value is not None and not isinstance(value, str):
            return f"the assignee must be a string, but was '{value}'"
    return None


# -- task listener jobs --------------------------------------------------------------------------------------


def listener_result_problem(ctx: ProcessingContext, job: JobValue, result: dict[str, Any]) -> str | None:
    """Why a task listener job's result cannot be taken (a denial where none is allowed, a bad correction)."""
    key = ctx.state.user_tasks.for_element(job.element_instance_key)
    entry = ctx.state.user_tasks.get(key) if key is not None else None
    if entry is None or entry["transition"] is None:
        return "its user task is no longer in a transition"
    event_type = listener_event_type(entry["state"])
    if result.get("denied") and not may_deny(entry["state"]):
        return f"denying is not supported for '{event_type}' task listeners"
    corrected = [name for name in result.get("correctedAttributes") or [] if name in CORRECTABLE]
    if corrected and event_type == "canceling":
        return "corrections are not supported for 'canceling' task listeners"
    if corrected and result.get("denied"):
        return "a denying result cannot also correct the task"
    problem = _attribute_problem(result.get("corrections") or {}, corrected)
    return f"the correction is invalid: {problem}" if problem else None


def listener_completed(ctx: ProcessingContext, job: JobValue, result: dict[str, Any]) -> None:
    """A task listener's job completed: the transition goes on (COMPLETE_TASK_LISTENER) or is denied."""
    key = ctx.state.user_tasks.for_element(job.element_instance_key)
    entry = ctx.state.user_tasks.get(key) if key is not None else None
    if key is None or entry is None or entry["transition"] is None:
        return
    task = UserTaskValue.from_dict(entry["transition"]["value"])
    if result.get("denied"):
        denied = task._replace(denied_reason=str(result.get("deniedReason") or ""))
        ctx.follow_up(ValueType.USER_TASK, UT.DENY_TASK_LISTENER, key, denied.to_dict())
        return
    corrected = [name for name in result.get("correctedAttributes") or [] if name in CORRECTABLE]
    corrections = result.get("corrections") or {}
    ctx.follow_up(
        ValueType.USER_TASK,
        UT.COMPLETE_TASK_LISTENER,
        key,
        {**task.to_dict(), "corrections": {name: corrections.get(name) for name in corrected}},
    )


def _in_transition(ctx: ProcessingContext, cmd: Record) -> dict[str, Any] | None:
    entry = ctx.state.user_tasks.get(cmd.key)
    if entry is None or entry["transition"] is None:
        ctx.reject(
            RejectionType.INVALID_STATE,
            f"Expected to continue a transition of user task with key '{cmd.key}', but it is in none",
        )
        return None
    return entry


def complete_task_listener(ctx: ProcessingContext, cmd: Record) -> None:
    """A listener agreed: its corrections (CORRECTED), then the next listener or the transition's end."""
    entry = _in_transition(ctx, cmd)
    if entry is None:
        return
    corrections = cmd.value.get("corrections") or {}
    value, changed = _changed(UserTaskValue.from_dict(entry["transition"]["value"]), corrections)
    if changed:
        ctx.typed_event(ValueType.USER_TASK, UT.CORRECTED, cmd.key, value._replace(changed_attributes=changed))
    proceed(ctx, cmd.key)


def deny_task_listener(ctx: ProcessingContext, cmd: Record) -> None:
    """A listener denied the change: the task stays as it was and the requester is refused."""
    entry = _in_transition(ctx, cmd)
    if entry is None:
        return
    state = entry["state"]
    denied = _TRANSITIONS[state][2]
    assert denied is not None
    reason = str(cmd.value.get("deniedReason") or "")
    value = UserTaskValue.from_dict(entry["value"])._replace(
        denied_reason=reason,
        changed_attributes=(),
        action=UserTaskValue.from_dict(entry["transition"]["value"]).action,
    )
    ctx.typed_event(ValueType.USER_TASK, denied, cmd.key, value)
    request = ctx.state.async_requests.get(value.element_instance_key)
    if request is not None:
        what = _DENIALS[state]
        _refuse(
            ctx,
            request,
            cmd.key,
            value,
            f"{what} of the user task with key '{cmd.key}' was denied by a task listener. Reason to deny: '{reason}'",
        )
