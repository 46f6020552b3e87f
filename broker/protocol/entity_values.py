"""Typed record values of the engine's entities: jobs, messages, timers, user tasks, variables and incidents.

Like :class:`~broker.protocol.values.ProcessInstanceValue` (see there why they are named tuples): ``from_dict`` and
``to_dict`` convert at the record boundary, and ``to_dict`` gives exactly the dict the engine has always written —
the same keys in the same order, optional keys left out under the same rules — because that dict is what the log,
the exporters, the history and the gateway's responses carry. A key written only by some paths (a task listener
job's ``changedAttributes``, a completed job's ``result``) is None while absent, so that an empty one written on
purpose survives the round trip. Lists of the record value are tuples here; dicts (variables, headers) are shared,
not copied, as the dict copies the engine made before were shallow too.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from broker.protocol.values import TENANT

# Builds a named tuple from its fields without the generated ``__new__`` in between (as in ``values``).
_new: Final = tuple.__new__

# -- JOB -----------------------------------------------------------------------------------------------------

# The keys every JOB record value has, in the order of the fields they carry; the optional ones follow them.
_JOB_KEYS: Final = (
    "type",
    "worker",
    "retries",
    "retryBackoff",
    "recurringTime",
    "deadline",
    "timeout",
    "customHeaders",
    "variables",
    "errorMessage",
    "errorCode",
    "elementId",
    "elementInstanceKey",
    "processInstanceKey",
    "bpmnProcessId",
    "processDefinitionVersion",
    "processDefinitionKey",
    "tenantId",
    "jobKind",
    "rootProcessInstanceKey",
)
_JOB_NONE_OPTIONAL: Final = ("", None, (), "", None, None)  # the optional fields, all absent


class JobValue(NamedTuple):
    """The value of a JOB record (and of each job in a JOB_BATCH).

    - ``root_process_instance_key``: the root of its instance's chain of calls (Camunda 8.9), -1 when not known (a
      job written before Weir kept it).
    - ``job_listener_event_type``: a listener job's event type (START, CREATING…); left out of the record while empty.
    - ``changed_attributes``: a task listener job's changed user task attributes (None: not a task listener's job).
    - ``result``: a completed job's result (None: none was given), ``user_task``: the user task an activated task
      listener job reports to its worker (None: not one); both left out while None.
    """

    type: str
    worker: str
    retries: int
    retry_backoff: int
    recurring_time: int
    deadline: int
    timeout: int
    custom_headers: dict[str, Any]
    variables: dict[str, Any]
    error_message: str
    error_code: str
    element_id: str
    element_instance_key: int
    process_instance_key: int
    bpmn_process_id: str
    process_definition_version: int
    process_definition_key: int
    tenant_id: str = TENANT
    job_kind: str = "BPMN_ELEMENT"
    root_process_instance_key: int = -1
    job_listener_event_type: str = ""
    changed_attributes: tuple[str, ...] | None = None
    tags: tuple[str, ...] = ()
    business_id: str = ""
    result: dict[str, Any] | None = None
    user_task: dict[str, Any] | None = None

    @classmethod
    def of_record(cls, record: Any) -> JobValue:
        """The typed value of a JOB record: the one it was written from, else decoded from its dict."""
        typed = record.typed
        return typed if typed is not None else cls.from_dict(record.value)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobValue:
        if len(d) == 20 and tuple(d) == _JOB_KEYS:  # the common case, read at C speed: no optional key
            return _new(cls, (*d.values(), *_JOB_NONE_OPTIONAL))
        get = d.get
        changed = get("changedAttributes")
        return _new(
            cls,
            (
                d["type"],
                get("worker", ""),
                d["retries"],
                get("retryBackoff", 0),
                get("recurringTime", -1),
                get("deadline", -1),
                get("timeout", -1),
                get("customHeaders", {}),
                get("variables", {}),
                get("errorMessage", ""),
                get("errorCode", ""),
                d["elementId"],
                d["elementInstanceKey"],
                d["processInstanceKey"],
                d["bpmnProcessId"],
                d["processDefinitionVersion"],
                d["processDefinitionKey"],
                get("tenantId", TENANT),
                get("jobKind", "BPMN_ELEMENT"),
                get("rootProcessInstanceKey", -1),
                get("jobListenerEventType", ""),
                None if changed is None else tuple(changed),
                tuple(get("tags") or ()),
                get("businessId", ""),
                get("result"),
                get("userTask"),
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        if self[20:] == _JOB_NONE_OPTIONAL:  # the common case, written at C speed
            return dict(zip(_JOB_KEYS, self, strict=False))
        d = {
            "type": self.type,
            "worker": self.worker,
            "retries": self.retries,
            "retryBackoff": self.retry_backoff,
            "recurringTime": self.recurring_time,
            "deadline": self.deadline,
            "timeout": self.timeout,
            "customHeaders": self.custom_headers,
            "variables": self.variables,
            "errorMessage": self.error_message,
            "errorCode": self.error_code,
            "elementId": self.element_id,
            "elementInstanceKey": self.element_instance_key,
            "processInstanceKey": self.process_instance_key,
            "bpmnProcessId": self.bpmn_process_id,
            "processDefinitionVersion": self.process_definition_version,
            "processDefinitionKey": self.process_definition_key,
            "tenantId": self.tenant_id,
            "jobKind": self.job_kind,
            "rootProcessInstanceKey": self.root_process_instance_key,
        }
        if self.job_listener_event_type:
            d["jobListenerEventType"] = self.job_listener_event_type
        if self.changed_attributes is not None:
            d["changedAttributes"] = list(self.changed_attributes)
        if self.tags:
            d["tags"] = list(self.tags)
        if self.business_id:
            d["businessId"] = self.business_id
        if self.result is not None:
            d["result"] = self.result
        if self.user_task is not None:
            d["userTask"] = self.user_task
        return d

    # The changes the engine makes most often, without ``_replace`` (which costs several times as much).

    def activated(
        self, worker: str, deadline: int, variables: dict[str, Any], user_task: dict[str, Any] | None
    ) -> JobValue:
        """The job as handed to ``worker`` until ``deadline`` (no longer in back-off), with its variables."""
        return _new(
            JobValue, (self[0], worker, *self[2:4], -1, deadline, *self[6:8], variables, *self[9:25], user_task)
        )

    def completed(self, variables: dict[str, Any], result: dict[str, Any] | None = None) -> JobValue:
        """The job as completed with ``variables`` (and, given one, a result)."""
        if result is None:
            return _new(JobValue, (*self[:8], variables, *self[9:]))
        return _new(JobValue, (*self[:8], variables, *self[9:24], result, self[25]))


# -- MESSAGE -------------------------------------------------------------------------------------------------


class MessageValue(NamedTuple):
    """The value of a MESSAGE record: a published message, buffered on its partition until ``deadline``."""

    name: str
    correlation_key: str
    time_to_live: int
    message_id: str
    variables: dict[str, Any]
    deadline: int
    tenant_id: str = TENANT

    @classmethod
    def of_record(cls, record: Any) -> MessageValue:
        typed = record.typed
        return typed if typed is not None else cls.from_dict(record.value)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MessageValue:
        get = d.get
        return _new(
            cls,
            (
                d["name"],
                get("correlationKey", ""),
                get("timeToLive", 0),
                get("messageId", ""),
                get("variables") or {},
                d["deadline"],
                get("tenantId", TENANT),
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "correlationKey": self.correlation_key,
            "timeToLive": self.time_to_live,
            "messageId": self.message_id,
            "variables": self.variables,
            "deadline": self.deadline,
            "tenantId": self.tenant_id,
        }


# -- TIMER ---------------------------------------------------------------------------------------------------


class TimerValue(NamedTuple):
    """The value of a TIMER record. A timer start event has no element instance (-1) and no process instance (-1).

    ``cron``, ``interval_months`` and ``interval_ms`` keep a repeating timer's schedule, so it can be rescheduled when
    it fires (see :func:`broker.engine.timers.serialize`); each is left out of the record while None.
    """

    element_instance_key: int
    process_instance_key: int
    process_definition_key: int
    due_date: int
    target_element_id: str
    repetitions: int
    tenant_id: str = TENANT
    cron: str | None = None
    interval_months: int | None = None
    interval_ms: int | None = None

    @classmethod
    def of_record(cls, record: Any) -> TimerValue:
        typed = record.typed
        return typed if typed is not None else cls.from_dict(record.value)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TimerValue:
        get = d.get
        return _new(
            cls,
            (
                get("elementInstanceKey", -1),
                get("processInstanceKey", -1),
                d["processDefinitionKey"],
                d["dueDate"],
                d["targetElementId"],
                get("repetitions", 1),
                get("tenantId", TENANT),
                get("cron"),
                get("intervalMonths"),
                get("intervalMs"),
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "elementInstanceKey": self.element_instance_key,
            "processInstanceKey": self.process_instance_key,
            "processDefinitionKey": self.process_definition_key,
            "dueDate": self.due_date,
            "targetElementId": self.target_element_id,
            "repetitions": self.repetitions,
            "tenantId": self.tenant_id,
        }
        if self.cron is not None:
            d["cron"] = self.cron
        if self.interval_months is not None:
            d["intervalMonths"] = self.interval_months
        if self.interval_ms is not None:
            d["intervalMs"] = self.interval_ms
        return d


# -- USER_TASK -----------------------------------------------------------------------------------------------


class UserTaskValue(NamedTuple):
    """The value of a USER_TASK record: the task's attributes as a transition leaves them.

    ``business_id`` and ``tags`` are the instance's (Camunda 8.9), left out of the record while empty;
    ``root_process_instance_key`` the root of its instance's chain of calls (-1: written before Weir kept it).
    """

    user_task_key: int
    assignee: str
    candidate_groups_list: tuple[str, ...]
    candidate_users_list: tuple[str, ...]
    due_date: str
    follow_up_date: str
    form_key: int
    external_form_reference: str
    variables: dict[str, Any]
    custom_headers: dict[str, str]
    bpmn_process_id: str
    process_definition_version: int
    process_definition_key: int
    process_instance_key: int
    element_id: str
    element_instance_key: int
    tenant_id: str = TENANT
    changed_attributes: tuple[str, ...] = ()
    action: str = ""
    creation_timestamp: int = -1
    priority: int = 50
    denied_reason: str = ""
    tags: tuple[str, ...] = ()
    business_id: str = ""
    root_process_instance_key: int = -1

    @classmethod
    def of_record(cls, record: Any) -> UserTaskValue:
        typed = record.typed
        return typed if typed is not None else cls.from_dict(record.value)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UserTaskValue:
        get = d.get
        return _new(
            cls,
            (
                d["userTaskKey"],
                get("assignee", ""),
                tuple(get("candidateGroupsList") or ()),
                tuple(get("candidateUsersList") or ()),
                get("dueDate", ""),
                get("followUpDate", ""),
                get("formKey", -1),
                get("externalFormReference", ""),
                get("variables") or {},
                get("customHeaders") or {},
                d["bpmnProcessId"],
                d["processDefinitionVersion"],
                d["processDefinitionKey"],
                d["processInstanceKey"],
                d["elementId"],
                d["elementInstanceKey"],
                get("tenantId", TENANT),
                tuple(get("changedAttributes") or ()),
                get("action", ""),
                get("creationTimestamp", -1),
                get("priority", 50),
                get("deniedReason", ""),
                tuple(get("tags") or ()),
                get("businessId", ""),
                get("rootProcessInstanceKey", -1),
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        d = {
            "userTaskKey": self.user_task_key,
            "assignee": self.assignee,
            "candidateGroupsList": list(self.candidate_groups_list),
            "candidateUsersList": list(self.candidate_users_list),
            "dueDate": self.due_date,
            "followUpDate": self.follow_up_date,
            "formKey": self.form_key,
            "externalFormReference": self.external_form_reference,
            "variables": self.variables,
            "customHeaders": self.custom_headers,
            "bpmnProcessId": self.bpmn_process_id,
            "processDefinitionVersion": self.process_definition_version,
            "processDefinitionKey": self.process_definition_key,
            "processInstanceKey": self.process_instance_key,
            "elementId": self.element_id,
            "elementInstanceKey": self.element_instance_key,
            "tenantId": self.tenant_id,
            "changedAttributes": list(self.changed_attributes),
            "action": self.action,
            "creationTimestamp": self.creation_timestamp,
            "priority": self.priority,
            "deniedReason": self.denied_reason,
            "rootProcessInstanceKey": self.root_process_instance_key,
        }
        if self.tags:
            d["tags"] = list(self.tags)
        if self.business_id:
            d["businessId"] = self.business_id
        return d


# -- VARIABLE ------------------------------------------------------------------------------------------------

# The keys of a VARIABLE record value, in the order of the fields they carry.
_VARIABLE_KEYS: Final = (
    "name",
    "value",
    "scopeKey",
    "processInstanceKey",
    "processDefinitionKey",
    "bpmnProcessId",
    "tenantId",
    "rootProcessInstanceKey",
)


class VariableValue(NamedTuple):
    """The value of a VARIABLE record. ``value`` is the decoded document value (exporters ship it as JSON text);
    ``root_process_instance_key`` the root of its instance's chain of calls (-1: none known)."""

    name: str
    value: Any
    scope_key: int
    process_instance_key: int
    process_definition_key: int
    bpmn_process_id: str
    tenant_id: str = TENANT
    root_process_instance_key: int = -1

    @classmethod
    def of_record(cls, record: Any) -> VariableValue:
        typed = record.typed
        return typed if typed is not None else cls.from_dict(record.value)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VariableValue:
        get = d.get
        return _new(
            cls,
            (
                d["name"],
                d["value"],
                d["scopeKey"],
                get("processInstanceKey", -1),
                get("processDefinitionKey", -1),
                get("bpmnProcessId", ""),
                get("tenantId", TENANT),
                get("rootProcessInstanceKey", -1),
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(zip(_VARIABLE_KEYS, self, strict=True))


# -- INCIDENT ------------------------------------------------------------------------------------------------


class IncidentValue(NamedTuple):
    """The value of an INCIDENT record: what stopped which element (``job_key`` -1: not a job's failure);
    ``root_process_instance_key`` the root of its instance's chain of calls (-1: none known)."""

    error_type: str
    error_message: str
    bpmn_process_id: str
    process_definition_key: int
    process_instance_key: int
    element_id: str
    element_instance_key: int
    job_key: int = -1
    variable_scope_key: int = -1
    tenant_id: str = TENANT
    root_process_instance_key: int = -1

    @classmethod
    def of_record(cls, record: Any) -> IncidentValue:
        typed = record.typed
        return typed if typed is not None else cls.from_dict(record.value)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> IncidentValue:
        get = d.get
        return _new(
            cls,
            (
                d["errorType"],
                get("errorMessage", ""),
                d["bpmnProcessId"],
                d["processDefinitionKey"],
                d["processInstanceKey"],
                d["elementId"],
                d["elementInstanceKey"],
                get("jobKey", -1),
                get("variableScopeKey", -1),
                get("tenantId", TENANT),
                get("rootProcessInstanceKey", -1),
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "errorType": self.error_type,
            "errorMessage": self.error_message,
            "bpmnProcessId": self.bpmn_process_id,
            "processDefinitionKey": self.process_definition_key,
            "processInstanceKey": self.process_instance_key,
            "elementId": self.element_id,
            "elementInstanceKey": self.element_instance_key,
            "jobKey": self.job_key,
            "variableScopeKey": self.variable_scope_key,
            "tenantId": self.tenant_id,
            "rootProcessInstanceKey": self.root_process_instance_key,
        }
