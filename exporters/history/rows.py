"""Records → history rows: what each exported event changes in the history tables.

A `Batch` gathers the changes of many records before they are written in one transaction. Changes to the same row
within a batch are merged (an element's ACTIVATING…COMPLETED become one row write), and a change only sets the
columns it knows: a column left None keeps what the database holds. Flags derived from other rows (an instance
"has an incident") are recomputed after the batch's rows are written.

Text that no database stores is made storable here, where a user would accept it: PostgreSQL refuses NUL in text,
so a NUL (e.g. in a job's error message, a variable's name) becomes U+FFFD, and a lone surrogate (a JSON ``\\ud800``
escape) that UTF-8 cannot encode becomes U+FFFD too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import defusedxml.ElementTree as ET

from broker.protocol.enums import RecordType, ValueType
from broker.protocol.keys import partition_of
from broker.protocol.record import Record
from exporters.history import schema

Row = dict[str, Any]

# The v2 user task state after each event: a task back from assigning or updating is CREATED again.
_USER_TASK_STATES = {
    "CREATING": "CREATING",
    "CREATED": "CREATED",
    "ASSIGNING": "ASSIGNING",
    "CLAIMING": "ASSIGNING",
    "ASSIGNED": "CREATED",
    "UPDATING": "UPDATING",
    "UPDATED": "CREATED",
    "CORRECTED": "CREATED",
    "COMPLETION_DENIED": "CREATED",
    "ASSIGNMENT_DENIED": "CREATED",
    "UPDATE_DENIED": "CREATED",
    "COMPLETING": "COMPLETING",
    "COMPLETED": "COMPLETED",
    "CANCELING": "CANCELING",
    "CANCELED": "CANCELED",
}
# Job events that are not a v2 job state of their own.
_JOB_STATES = {"RECURRED_AFTER_BACKOFF": "CREATED", "YIELDED": "CREATED", "TIMED_OUT": "TIMED_OUT"}
_JOB_FINAL = {"COMPLETED", "CANCELED", "ERROR_THROWN"}
_ELEMENT_END = {"ELEMENT_COMPLETED": "COMPLETED", "ELEMENT_TERMINATED": "TERMINATED"}
_NOT_ELEMENTS = {"PROCESS", "SEQUENCE_FLOW", "UNSPECIFIED"}

HISTORY_VALUE_TYPES = frozenset(
    {
        ValueType.PROCESS,
        ValueType.PROCESS_INSTANCE,
        ValueType.VARIABLE,
        ValueType.INCIDENT,
        ValueType.JOB,
        ValueType.JOB_BATCH,
        ValueType.USER_TASK,
        ValueType.DECISION_EVALUATION,
        ValueType.PROCESS_INSTANCE_BUSINESS_ID,
        ValueType.DECISION,
        ValueType.DECISION_REQUIREMENTS,
        ValueType.FORM,
        ValueType.BATCH_OPERATION_CREATION,
        ValueType.BATCH_OPERATION_CHUNK,
        ValueType.BATCH_OPERATION_EXECUTION,
        ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT,
        ValueType.BATCH_OPERATION_PARTITION_LIFECYCLE,
        ValueType.USER,
        ValueType.GROUP,
        ValueType.ROLE,
        ValueType.TENANT,
        ValueType.MAPPING_RULE,
        ValueType.AUTHORIZATION,
    }
)
IDENTITY_PARTITION: Final = 1
"""The partition whose identity events the history takes.

Identity records are processed on every partition (the first decides a change and distributes it), so each
partition exports the same events. Only the first partition's are taken, rather than making the writes idempotent:
the partitions export at their own pace, and a slow partition's CREATED of a user arriving after the first's DELETED
(and a CREATED of the same username again) would bring back what is gone. The first partition wrote them in the
order the changes were made, so its events alone replay them in that order.
"""
_IDENTITY_VALUE_TYPES = frozenset(
    {ValueType.USER, ValueType.GROUP, ValueType.ROLE, ValueType.TENANT, ValueType.MAPPING_RULE, ValueType.AUTHORIZATION}
)
_IDENTITY_EVENTS = frozenset({"CREATED", "UPDATED", "DELETED"})
_MEMBERSHIP_EVENTS = frozenset({"ENTITY_ADDED", "ENTITY_REMOVED"})


# The events each value type contributes to the history (None: all of them); the rest change no row.
_KEPT_EVENTS: dict[ValueType, frozenset[str] | None] = {
    ValueType.PROCESS: frozenset({"CREATED"}),
    ValueType.PROCESS_INSTANCE: frozenset(
        {"ELEMENT_ACTIVATING", "ELEMENT_COMPLETED", "ELEMENT_TERMINATED", "SEQUENCE_FLOW_TAKEN", "ELEMENT_MIGRATED"}
    ),
    ValueType.VARIABLE: frozenset({"CREATED", "UPDATED", "MIGRATED"}),
    ValueType.INCIDENT: frozenset({"CREATED", "RESOLVED", "MIGRATED"}),
    ValueType.JOB: None,
    ValueType.JOB_BATCH: frozenset({"ACTIVATED"}),
    ValueType.USER_TASK: None,
    ValueType.DECISION_EVALUATION: frozenset({"EVALUATED", "FAILED"}),
    ValueType.PROCESS_INSTANCE_BUSINESS_ID: frozenset({"ASSIGNED"}),
    ValueType.DECISION: frozenset({"CREATED", "DELETED"}),
    ValueType.DECISION_REQUIREMENTS: frozenset({"CREATED", "DELETED"}),
    ValueType.FORM: frozenset({"CREATED", "DELETED"}),
    ValueType.BATCH_OPERATION_CREATION: frozenset({"CREATED"}),
    ValueType.BATCH_OPERATION_CHUNK: frozenset({"CREATED"}),
    ValueType.BATCH_OPERATION_EXECUTION: frozenset({"EXECUTED"}),
    ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT: frozenset({"SUSPENDED", "RESUMED", "CANCELED", "COMPLETED"}),
    ValueType.BATCH_OPERATION_PARTITION_LIFECYCLE: frozenset({"PARTITION_COMPLETED"}),
    ValueType.USER: _IDENTITY_EVENTS,
    ValueType.GROUP: _IDENTITY_EVENTS | _MEMBERSHIP_EVENTS,
    ValueType.ROLE: _IDENTITY_EVENTS | _MEMBERSHIP_EVENTS,
    ValueType.TENANT: _IDENTITY_EVENTS | _MEMBERSHIP_EVENTS,
    ValueType.MAPPING_RULE: _IDENTITY_EVENTS,
    ValueType.AUTHORIZATION: _IDENTITY_EVENTS,
}
_NAMES: dict[tuple[int, int], str] = {}
_KEPT: dict[tuple[int, int, int], bool] = {}


#: The decision types the v2 API names; the others (context, relation, list, invocation) are UNKNOWN there.
_REST_DECISION_TYPES = frozenset({"DECISION_TABLE", "LITERAL_EXPRESSION"})


def _migrated_definition(v: Mapping[str, Any]) -> Row:
    """The columns a migration changes on an element instance, incident or user task: its definition and element."""
    return {
        "element_id": v.get("elementId"),
        "process_definition_key": _key(v, "processDefinitionKey"),
        "process_definition_id": v.get("bpmnProcessId"),
    }


def rest_decision_type(decision_type: str | None) -> str | None:
    """A record's decision type as Camunda's v2 API gives it."""
    if decision_type is None:
        return None
    return decision_type if decision_type in _REST_DECISION_TYPES else "UNKNOWN"


def intent_name(record: Record) -> str:
    """The record's intent name (cached per value type and code: records are many, intents few)."""
    code = (record.value_type, record.intent)
    name = _NAMES.get(code)
    if name is None:
        name = _NAMES[code] = record.intent_enum.name
    return name


def changes_history(record: Record) -> bool:
    """Whether the record changes a history row (most lifecycle events, e.g. ELEMENT_ACTIVATED, do not; identity
    events only on `IDENTITY_PARTITION`)."""
    code = (record.record_type, record.value_type, record.intent)
    kept = _KEPT.get(code)
    if kept is None:
        if record.record_type != RecordType.EVENT or record.value_type not in _KEPT_EVENTS:
            kept = False
        else:
            events = _KEPT_EVENTS[ValueType(record.value_type)]
            kept = events is None or intent_name(record) in events
        _KEPT[code] = kept
    return kept and (record.partition_id == IDENTITY_PARTITION or record.value_type not in _IDENTITY_VALUE_TYPES)


def _key(value: Mapping[str, Any], name: str) -> int | None:
    key = value.get(name)
    return key if isinstance(key, int) and key > 0 else None


def storable(text: str) -> str:
    """``text`` as every history database stores it: NUL and unencodable surrogates become U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def _make_storable(row: Row) -> None:
    for column, value in row.items():
        if isinstance(value, str):
            row[column] = storable(value)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _plain(value: Any) -> str:
    """A text field of an identity record as stored: what it holds, "" when it holds nothing (as the record does)."""
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class _Identity:
    """How one identity kind's records become rows: its table, id and key fields, and its other columns."""

    kind: str  # as memberships name it: USER, GROUP, ROLE, TENANT, MAPPING_RULE
    table: schema.Table
    id_field: str
    key_field: str
    fields: tuple[tuple[str, str], ...]  # (column, record value field)


_IDENTITIES: Final = {
    ValueType.USER: _Identity("USER", schema.USERS, "username", "userKey", (("name", "name"), ("email", "email"))),
    ValueType.GROUP: _Identity(
        "GROUP", schema.GROUPS, "groupId", "groupKey", (("name", "name"), ("description", "description"))
    ),
    ValueType.ROLE: _Identity(
        "ROLE", schema.ROLES, "roleId", "roleKey", (("name", "name"), ("description", "description"))
    ),
    ValueType.TENANT: _Identity(
        "TENANT", schema.TENANTS, "tenantId", "tenantKey", (("name", "name"), ("description", "description"))
    ),
    ValueType.MAPPING_RULE: _Identity(
        "MAPPING_RULE",
        schema.MAPPING_RULES,
        "mappingRuleId",
        "mappingRuleKey",
        (("claim_name", "claimName"), ("claim_value", "claimValue"), ("name", "name")),
    ),
}


def membership_id(container_kind: str, container_id: str, member_type: str, member_id: str) -> str:
    """The key of a membership row."""
    return json.dumps([container_kind, container_id, member_type, member_id], separators=(",", ":"))


class Batch:
    """The merged row changes of consecutive records, and the last position they cover."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[Any, Row]] = {t.name: {} for t in schema.TABLES}
        self.incident_instances: set[int] = set()  # process instances whose incident flag is recomputed
        self.incident_elements: set[int] = set()  # element instances whose incident key is recomputed
        self.first_position = 0
        self.last_position = 0
        self.records = 0
        # The last position that changed each row (table, key): named when the database rejects the row.
        self.row_positions: dict[tuple[str, Any], int] = {}
        # Rows to delete, as (table, ((column, value), ...)) matching every column: deleted before the batch's rows
        # are written (a row set after its deletion in the same batch is one of `rows` again, written after it).
        self.deletions: list[tuple[str, tuple[tuple[str, Any], ...]]] = []

    def __len__(self) -> int:
        return self.records

    def _set(self, table: schema.Table, key: Any, row: Row) -> None:
        for value in row.values():
            if value.__class__ is str and not (value.isascii() and "\x00" not in value):
                _make_storable(row)
                break
        self.row_positions[(table.name, key)] = self.last_position
        rows = self.rows[table.name]
        current = rows.get(key)
        if current is None:
            row[table.key] = key
            rows[key] = row
        else:
            current.update((k, v) for k, v in row.items() if v is not None)

    def _delete(self, table: schema.Table, match: Row) -> None:
        """Delete the rows whose columns hold ``match``'s values: the batch's own at once, the stored ones when the
        batch is written (before its rows, so a row set again after this stays)."""
        match = {c: storable(v) if isinstance(v, str) else v for c, v in match.items()}
        rows = self.rows[table.name]
        if set(match) == {table.key}:
            rows.pop(match[table.key], None)
        else:
            for key in [k for k, row in rows.items() if all(row.get(c) == v for c, v in match.items())]:
                del rows[key]
        self.deletions.append((table.name, tuple(match.items())))

    def add(self, record: Record) -> None:
        """Fold one record's changes into the batch (records must come in position order)."""
        if not self.first_position:
            self.first_position = record.position
        self.last_position = record.position
        self.records += 1
        if record.record_type != RecordType.EVENT:
            return
        handler = _HANDLERS.get(record.value_type)
        if handler is not None:
            handler(self, record, intent_name(record))

    # -- one handler per value type ----------------------------------------------------------------------------

    def _process(self, record: Record, intent: str) -> None:
        if intent != "CREATED":
            return
        v = record.value
        xml = _xml_text(v.get("resource"))
        self._set(
            schema.PROCESS_DEFINITIONS,
            record.key,
            {
                "process_definition_id": v.get("bpmnProcessId"),
                "name": _process_name(xml, v.get("bpmnProcessId")),
                "version": v.get("version"),
                "version_tag": _text(v.get("versionTag")),
                "resource_name": v.get("resourceName"),
                "tenant_id": v.get("tenantId"),
                "deployment_key": _key(v, "deploymentKey"),
                "bpmn_xml": xml,
            },
        )

    def _process_instance(self, record: Record, intent: str) -> None:
        v = record.value
        element_type = v.get("bpmnElementType")
        if intent == "SEQUENCE_FLOW_TAKEN":
            self._sequence_flow(v)
            return
        if element_type == "PROCESS":
            if intent == "ELEMENT_ACTIVATING":
                row: Row = {
                    "process_definition_key": _key(v, "processDefinitionKey"),
                    "process_definition_id": v.get("bpmnProcessId"),
                    "process_definition_version": v.get("version"),
                    "state": "ACTIVE",
                    "start_date": record.timestamp,
                    "parent_process_instance_key": _key(v, "parentProcessInstanceKey"),
                    "parent_element_instance_key": _key(v, "parentElementInstanceKey"),
                    "has_incident": 0,
                    "tenant_id": v.get("tenantId"),
                    "partition_id": record.partition_id,
                    "business_id": _text(v.get("businessId")),
                    "tags": _json_list(v.get("tags") or []),
                    "root_process_instance_key": _key(v, "rootProcessInstanceKey"),
                }
                self._set(schema.PROCESS_INSTANCES, record.key, row)
            elif intent in _ELEMENT_END:
                end = {"state": _ELEMENT_END[intent], "end_date": record.timestamp}
                self._set(schema.PROCESS_INSTANCES, record.key, end)
            elif intent == "ELEMENT_MIGRATED":  # the instance now runs the target definition
                migrated: Row = {
                    "process_definition_key": _key(v, "processDefinitionKey"),
                    "process_definition_id": v.get("bpmnProcessId"),
                    "process_definition_version": v.get("version"),
                }
                self._set(schema.PROCESS_INSTANCES, record.key, migrated)
            return
        if element_type in _NOT_ELEMENTS:
            return
        if intent == "ELEMENT_ACTIVATING":
            row = {
                "process_instance_key": _key(v, "processInstanceKey"),
                "process_definition_key": _key(v, "processDefinitionKey"),
                "process_definition_id": v.get("bpmnProcessId"),
                "flow_scope_key": _key(v, "flowScopeKey"),
                "element_id": v.get("elementId"),
                "type": element_type,
                "state": "ACTIVE",
                "start_date": record.timestamp,
                "tenant_id": v.get("tenantId"),
            }
            self._set(schema.ELEMENT_INSTANCES, record.key, row)
        elif intent in _ELEMENT_END:
            self._set(
                schema.ELEMENT_INSTANCES, record.key, {"state": _ELEMENT_END[intent], "end_date": record.timestamp}
            )
        elif intent == "ELEMENT_MIGRATED":
            self._set(schema.ELEMENT_INSTANCES, record.key, _migrated_definition(v))

    def _sequence_flow(self, v: Mapping[str, Any]) -> None:
        """A flow taken: one row per instance and flow (taking it again changes nothing Operate shows)."""
        instance = _key(v, "processInstanceKey")
        flow_id = v.get("elementId")
        if instance is None or not isinstance(flow_id, str):
            return
        row: Row = {
            "process_instance_key": instance,
            "process_definition_key": _key(v, "processDefinitionKey"),
            "process_definition_id": v.get("bpmnProcessId"),
            "element_id": flow_id,
            "tenant_id": v.get("tenantId"),
        }
        self._set(schema.SEQUENCE_FLOWS, f"{instance}_{flow_id}", row)

    def _decision(self, record: Record, intent: str) -> None:
        if intent == "DELETED":
            self._set(schema.DECISION_DEFINITIONS, record.key, {"deleted": 1})
            return
        v = record.value
        row: Row = {
            "decision_definition_id": v.get("decisionId"),
            "name": v.get("decisionName"),
            "version": v.get("version"),
            "version_tag": _text(v.get("versionTag")),
            "decision_requirements_key": _key(v, "decisionRequirementsKey"),
            "decision_requirements_id": v.get("decisionRequirementsId"),
            "tenant_id": v.get("tenantId"),
            "deployment_key": _key(v, "deploymentKey"),
            "deleted": 0,
        }
        self._set(schema.DECISION_DEFINITIONS, record.key, row)

    def _decision_requirements(self, record: Record, intent: str) -> None:
        if intent == "DELETED":
            self._set(schema.DECISION_REQUIREMENTS, record.key, {"deleted": 1})
            return
        v = record.value
        row: Row = {
            "decision_requirements_id": v.get("decisionRequirementsId"),
            "decision_requirements_name": v.get("decisionRequirementsName"),
            "version": v.get("decisionRequirementsVersion"),
            "resource_name": v.get("resourceName"),
            "tenant_id": v.get("tenantId"),
            "deployment_key": _key(v, "deploymentKey"),
            "dmn_xml": _xml_text(v.get("resource")),
            "deleted": 0,
        }
        self._set(schema.DECISION_REQUIREMENTS, record.key, row)

    def _form(self, record: Record, intent: str) -> None:
        if intent == "DELETED":
            self._set(schema.FORMS, record.key, {"deleted": 1})
            return
        v = record.value
        row: Row = {
            "form_id": v.get("formId"),
            "version": v.get("version"),
            "version_tag": _text(v.get("versionTag")),
            "resource_name": v.get("resourceName"),
            "tenant_id": v.get("tenantId"),
            "deployment_key": _key(v, "deploymentKey"),
            "form_schema": _xml_text(v.get("resource")),
            "deleted": 0,
        }
        self._set(schema.FORMS, record.key, row)

    def _business_id(self, record: Record, intent: str) -> None:
        """A business id given to a running instance (Camunda 8.10)."""
        if intent == "ASSIGNED":
            self._set(schema.PROCESS_INSTANCES, record.key, {"business_id": _text(record.value.get("businessId"))})

    def _variable(self, record: Record, intent: str) -> None:
        if intent not in ("CREATED", "UPDATED", "MIGRATED"):
            return
        v = record.value
        row: Row = {
            "name": v.get("name"),
            "scope_key": _key(v, "scopeKey"),
            "process_instance_key": _key(v, "processInstanceKey"),
            "process_definition_key": _key(v, "processDefinitionKey"),
            "tenant_id": v.get("tenantId"),
        }
        if "value" in v:
            row["value"] = json.dumps(v["value"], separators=(",", ":"), ensure_ascii=False)
        self._set(schema.VARIABLES, record.key, row)

    def _incident(self, record: Record, intent: str) -> None:
        v = record.value
        if intent == "CREATED":
            row: Row = {
                "process_instance_key": _key(v, "processInstanceKey"),
                "process_definition_key": _key(v, "processDefinitionKey"),
                "process_definition_id": v.get("bpmnProcessId"),
                "element_id": v.get("elementId"),
                "element_instance_key": _key(v, "elementInstanceKey"),
                "job_key": _key(v, "jobKey"),
                "error_type": v.get("errorType"),
                "error_message": v.get("errorMessage"),
                "state": "ACTIVE",
                "creation_time": record.timestamp,
                "tenant_id": v.get("tenantId"),
            }
        elif intent == "RESOLVED":
            row = {"state": "RESOLVED", "end_time": record.timestamp}
        elif intent == "MIGRATED":
            row = _migrated_definition(v)
        else:
            return
        self._set(schema.INCIDENTS, record.key, row)
        if (pi := _key(v, "processInstanceKey")) is not None:
            self.incident_instances.add(pi)
        if (element := _key(v, "elementInstanceKey")) is not None:
            self.incident_elements.add(element)

    def _job(self, record: Record, intent: str) -> None:
        self._job_row(record.key, record.value, _JOB_STATES.get(intent, intent), record.timestamp, intent)

    def _job_row(self, key: int, v: Mapping[str, Any], state: str | None, timestamp: int, intent: str) -> None:
        retries = v.get("retries")
        row: Row = {
            "type": v.get("type"),
            "worker": _text(v.get("worker")),
            "state": state,
            "kind": v.get("jobKind"),
            "listener_event_type": v.get("jobListenerEventType"),
            "retries": retries,
            "error_message": _text(v.get("errorMessage")),
            "error_code": _text(v.get("errorCode")),
            "deadline": v.get("deadline") if isinstance(v.get("deadline"), int) and v["deadline"] > 0 else None,
            "custom_headers": json.dumps(v["customHeaders"]) if v.get("customHeaders") else None,
            "element_id": v.get("elementId"),
            "element_instance_key": _key(v, "elementInstanceKey"),
            "process_instance_key": _key(v, "processInstanceKey"),
            "process_definition_key": _key(v, "processDefinitionKey"),
            "process_definition_id": v.get("bpmnProcessId"),
            "tenant_id": v.get("tenantId"),
            "tags": _json_list(v.get("tags")),  # the instance's, on the records that carry them
        }
        if intent == "CREATED":
            row["creation_time"] = timestamp
        elif intent == "FAILED":
            row["has_failed_with_retries_left"] = 1 if isinstance(retries, int) and retries > 0 else 0
        if intent in _JOB_FINAL:
            row["end_time"] = timestamp
        self._set(schema.JOBS, key, row)

    def _job_batch(self, record: Record, intent: str) -> None:
        if intent != "ACTIVATED":
            return
        v = record.value
        for key, job in zip(v.get("jobKeys") or (), v.get("jobs") or (), strict=False):
            if isinstance(job, Mapping):
                self._job_row(key, job, None, record.timestamp, intent)

    def _user_task(self, record: Record, intent: str) -> None:
        v = record.value
        key = _key(v, "userTaskKey") or record.key
        if intent == "MIGRATED":  # the task stays as it is, in the target definition
            migrated = _migrated_definition(v)
            migrated["process_definition_version"] = v.get("processDefinitionVersion")
            self._set(schema.USER_TASKS, key, migrated)
            return
        state = _USER_TASK_STATES.get(intent)
        if state is None:
            return
        row: Row = {
            "element_id": v.get("elementId"),
            "element_instance_key": _key(v, "elementInstanceKey"),
            "process_instance_key": _key(v, "processInstanceKey"),
            "process_definition_key": _key(v, "processDefinitionKey"),
            "process_definition_id": v.get("bpmnProcessId"),
            "process_definition_version": v.get("processDefinitionVersion"),
            "state": state,
            "candidate_groups": _json_list(v.get("candidateGroupsList")),
            "candidate_users": _json_list(v.get("candidateUsersList")),
            "due_date": _text(v.get("dueDate")),
            "follow_up_date": _text(v.get("followUpDate")),
            "form_key": _key(v, "formKey"),
            "external_form_reference": _text(v.get("externalFormReference")),
            "custom_headers": json.dumps(v["customHeaders"]) if v.get("customHeaders") else None,
            "priority": v.get("priority"),
            "tenant_id": v.get("tenantId"),
            "tags": _json_list(v.get("tags")),
        }
        if "assignee" in v:
            row["assignee"] = v.get("assignee") or ""  # "" once unassigned: a set value, not an unknown one
        if intent == "CREATED":
            row["creation_date"] = _key(v, "creationTimestamp") or record.timestamp
        elif intent in ("COMPLETED", "CANCELED"):
            row["completion_date"] = record.timestamp
        self._set(schema.USER_TASKS, key, row)

    # -- batch operations: the coordinating partition writes the batch, every partition its own items -------------

    def _batch_created(self, record: Record, intent: str) -> None:
        v = record.value
        if partition_of(record.key) != record.partition_id:
            return  # the same batch, distributed to another partition for its items
        row: Row = {
            "batch_operation_type": v.get("batchOperationType"),
            "state": "ACTIVE",
            "start_date": record.timestamp,
            "items_count": v.get("itemsCount"),
        }
        self._set(schema.BATCH_OPERATIONS, record.key, row)

    def _batch_items(self, record: Record, intent: str) -> None:
        v = record.value
        key = _key(v, "batchOperationKey") or record.key
        executed = intent == "EXECUTED"
        for item in v.get("items") or ():
            row: Row = {
                "batch_operation_key": key,
                "item_key": item.get("itemKey"),
                "process_instance_key": item.get("processInstanceKey"),
                "state": item.get("state") if executed else "ACTIVE",
            }
            if executed:
                row["processed_date"] = record.timestamp
                row["operation_type"] = v.get("batchOperationType")
                row["error_message"] = _text(item.get("errorMessage"))
            self._set(schema.BATCH_OPERATION_ITEMS, f"{key}:{item.get('itemKey')}", row)

    def _batch_lifecycle(self, record: Record, intent: str) -> None:
        if partition_of(record.key) != record.partition_id:
            return  # the coordinating partition's event is the batch's (the others follow it)
        state = {"SUSPENDED": "SUSPENDED", "RESUMED": "ACTIVE", "CANCELED": "CANCELED", "COMPLETED": "COMPLETED"}
        row: Row = {"state": state[intent]}
        if intent in ("CANCELED", "COMPLETED"):
            row["end_date"] = record.timestamp
        self._set(schema.BATCH_OPERATIONS, record.key, row)

    def _batch_partition(self, record: Record, intent: str) -> None:
        """A partition's report as the coordinating partition took it: its counts stand for items the history may
        not have from that partition yet (each partition exports at its own pace)."""
        if partition_of(record.key) != record.partition_id:
            return
        v = record.value
        row: Row = {
            "batch_operation_key": record.key,
            "partition_id": v.get("partitionId"),
            "completed_count": v.get("completedCount"),
            "failed_count": v.get("failedCount"),
        }
        self._set(schema.BATCH_OPERATION_PARTITIONS, f"{record.key}:{v.get('partitionId')}", row)

    # -- identity: the first partition's events (see IDENTITY_PARTITION) ----------------------------------------

    def _identity(self, record: Record, intent: str) -> None:
        """A user, group, role, tenant or mapping rule created, updated or deleted, or a member added or removed.

        Deleting an identity takes its memberships both ways (its members, and where it is a member): the engine
        writes no ENTITY_REMOVED for them. Its authorizations go by their own DELETED events.
        """
        if record.partition_id != IDENTITY_PARTITION:
            return
        identity = _IDENTITIES[ValueType(record.value_type)]
        v = record.value
        entity_id = v.get(identity.id_field)
        if not isinstance(entity_id, str) or not entity_id:
            return
        if intent in ("CREATED", "UPDATED"):
            row: Row = {identity.table.columns[1]: _key(v, identity.key_field) or record.key}
            row.update((column, _plain(v.get(name))) for column, name in identity.fields)
            self._set(identity.table, entity_id, row)
        elif intent == "DELETED":
            self._delete(identity.table, {identity.table.key: entity_id})
            self._delete(schema.MEMBERSHIPS, {"container_kind": identity.kind, "container_id": entity_id})
            self._delete(schema.MEMBERSHIPS, {"member_type": identity.kind, "member_id": entity_id})
        elif intent in _MEMBERSHIP_EVENTS:
            member_type, member_id = v.get("entityType"), v.get("entityId")
            if not isinstance(member_type, str) or not isinstance(member_id, str) or not member_id:
                return
            key = membership_id(identity.kind, entity_id, member_type, member_id)
            if intent == "ENTITY_ADDED":
                row = {
                    "container_kind": identity.kind,
                    "container_id": entity_id,
                    "member_type": member_type,
                    "member_id": member_id,
                }
                self._set(schema.MEMBERSHIPS, key, row)
            else:
                self._delete(schema.MEMBERSHIPS, {"membership_id": key})

    def _authorization(self, record: Record, intent: str) -> None:
        if record.partition_id != IDENTITY_PARTITION:
            return
        if intent == "DELETED":
            self._delete(schema.AUTHORIZATIONS, {"authorization_key": record.key})
            return
        v = record.value
        permissions = v.get("permissionTypes")
        row: Row = {
            "owner_id": _plain(v.get("ownerId")),
            "owner_type": _plain(v.get("ownerType")),
            "resource_matcher": _plain(v.get("resourceMatcher")),
            "resource_id": _plain(v.get("resourceId")),
            "resource_type": _plain(v.get("resourceType")),
            "permission_types": _json_list(sorted(p for p in permissions if isinstance(p, str)))
            if isinstance(permissions, list)
            else "[]",
        }
        self._set(schema.AUTHORIZATIONS, record.key, row)

    def _decision_evaluation(self, record: Record, intent: str) -> None:
        if intent not in ("EVALUATED", "FAILED"):
            return
        v = record.value
        evaluated = [d for d in v.get("evaluatedDecisions") or () if isinstance(d, Mapping)]
        failed_id = v.get("failedDecisionId") or (evaluated[-1].get("decisionId") if evaluated else None)
        for index, decision in enumerate(evaluated, start=1):
            failed = intent == "FAILED" and decision.get("decisionId") == failed_id
            row: Row = {
                "decision_evaluation_key": record.key,
                "state": "FAILED" if failed else "EVALUATED",
                "evaluation_date": record.timestamp,
                "evaluation_failure": _text(v.get("evaluationFailureMessage")) if failed else None,
                "decision_definition_key": _key(decision, "decisionKey"),
                "decision_definition_id": decision.get("decisionId"),
                "decision_definition_name": decision.get("decisionName"),
                "decision_definition_version": decision.get("decisionVersion"),
                "decision_definition_type": rest_decision_type(decision.get("decisionType")),
                "root_decision_definition_key": _key(v, "decisionKey"),
                "result": decision.get("decisionOutput"),
                "process_definition_key": _key(v, "processDefinitionKey"),
                "process_instance_key": _key(v, "processInstanceKey"),
                "element_instance_key": _key(v, "elementInstanceKey"),
                "tenant_id": decision.get("tenantId") or v.get("tenantId"),
            }
            self._set(schema.DECISION_INSTANCES, f"{record.key}-{index}", row)


_HANDLERS = {
    ValueType.PROCESS: Batch._process,
    ValueType.PROCESS_INSTANCE: Batch._process_instance,
    ValueType.VARIABLE: Batch._variable,
    ValueType.INCIDENT: Batch._incident,
    ValueType.JOB: Batch._job,
    ValueType.JOB_BATCH: Batch._job_batch,
    ValueType.USER_TASK: Batch._user_task,
    ValueType.DECISION_EVALUATION: Batch._decision_evaluation,
    ValueType.PROCESS_INSTANCE_BUSINESS_ID: Batch._business_id,
    ValueType.DECISION: Batch._decision,
    ValueType.DECISION_REQUIREMENTS: Batch._decision_requirements,
    ValueType.FORM: Batch._form,
    ValueType.BATCH_OPERATION_CREATION: Batch._batch_created,
    ValueType.BATCH_OPERATION_CHUNK: Batch._batch_items,
    ValueType.BATCH_OPERATION_EXECUTION: Batch._batch_items,
    ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT: Batch._batch_lifecycle,
    ValueType.BATCH_OPERATION_PARTITION_LIFECYCLE: Batch._batch_partition,
    ValueType.USER: Batch._identity,
    ValueType.GROUP: Batch._identity,
    ValueType.ROLE: Batch._identity,
    ValueType.TENANT: Batch._identity,
    ValueType.MAPPING_RULE: Batch._identity,
    ValueType.AUTHORIZATION: Batch._authorization,
}


def _json_list(items: Any) -> str | None:
    return json.dumps(list(items)) if isinstance(items, list | tuple) else None


def _xml_text(resource: Any) -> str | None:
    """A deployed resource (BPMN, DMN, a form's JSON) as text."""
    if isinstance(resource, bytes | bytearray | memoryview):
        return bytes(resource).decode("utf-8", errors="replace")
    return resource if isinstance(resource, str) else None


def _process_name(xml: str | None, process_id: Any) -> str | None:
    """The ``name`` of the process with ``process_id`` in the BPMN XML (None when it has none)."""
    if not xml:
        return None
    try:
        root = ET.fromstring(xml)
    except (ET.ParseError, ValueError):  # ValueError: defusedxml refused entities or a DTD
        return None
    for element in root.iter():
        if element.tag.rsplit("}", 1)[-1] == "process" and element.get("id") == process_id:
            return element.get("name") or None
    return None
