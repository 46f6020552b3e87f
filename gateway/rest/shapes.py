"""The response shapes of the Camunda 8.9 Orchestration Cluster REST API that Weir answers in: every field an item
has in 8.9, present, with null (or the empty list/object the spec types the field as) where Weir has no value.

Clients generated from the 8.9 spec (the Python SDK, the TypeScript client 9.x) decode strictly: a response lacking a
required field is an error on their side, so the history's items and the records' renderings are completed here, in
one place, rather than in each endpoint. Search filters whose fields are enums in 8.9 are checked here too: a value
outside the enum is a 400 (a typo must not read as "no results").
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gateway.commands import invalid


def business_fields(source: Mapping[str, Any]) -> dict[str, Any]:
    """The business id and tags of a record value or history item: what it carries, else null and [].

    One reader for both so that values the engine and the history add flow into every response unchanged.
    """
    business_id = source.get("businessId")
    tags = source.get("tags")
    return {"businessId": business_id or None, "tags": list(tags) if isinstance(tags, list | tuple) else []}


#: Every field of an 8.9 search item per entity, in the spec's order; the ones an item lacks become null.
ITEM_FIELDS: dict[str, tuple[str, ...]] = {
    "process-definitions": (
        "name",
        "resourceName",
        "version",
        "versionTag",
        "processDefinitionId",
        "tenantId",
        "processDefinitionKey",
        "hasStartForm",
        "state",
    ),
    "process-instances": (
        "processDefinitionId",
        "processDefinitionName",
        "processDefinitionVersion",
        "processDefinitionVersionTag",
        "startDate",
        "endDate",
        "state",
        "suspendedDate",
        "hasIncident",
        "tenantId",
        "processInstanceKey",
        "processDefinitionKey",
        "parentProcessInstanceKey",
        "parentElementInstanceKey",
        "rootProcessInstanceKey",
        "tags",
        "businessId",
    ),
    "element-instances": (
        "processDefinitionId",
        "startDate",
        "endDate",
        "elementId",
        "elementName",
        "type",
        "state",
        "hasIncident",
        "tenantId",
        "elementInstanceKey",
        "processInstanceKey",
        "rootProcessInstanceKey",
        "processDefinitionKey",
        "incidentKey",
    ),
    "variables": (
        "value",
        "isTruncated",
        "name",
        "tenantId",
        "variableKey",
        "scopeKey",
        "processInstanceKey",
        "rootProcessInstanceKey",
    ),
    "incidents": (
        "processDefinitionId",
        "errorType",
        "errorMessage",
        "elementId",
        "creationTime",
        "state",
        "tenantId",
        "incidentKey",
        "processDefinitionKey",
        "processInstanceKey",
        "rootProcessInstanceKey",
        "elementInstanceKey",
        "jobKey",
    ),
    "jobs": (
        "customHeaders",
        "deadline",
        "deniedReason",
        "elementId",
        "elementInstanceKey",
        "endTime",
        "errorCode",
        "errorMessage",
        "hasFailedWithRetriesLeft",
        "isDenied",
        "jobKey",
        "kind",
        "listenerEventType",
        "processDefinitionId",
        "processDefinitionKey",
        "processInstanceKey",
        "rootProcessInstanceKey",
        "businessId",
        "retries",
        "state",
        "tenantId",
        "type",
        "worker",
        "creationTime",
        "lastUpdateTime",
        "priority",
    ),
    "user-tasks": (
        "name",
        "state",
        "assignee",
        "elementId",
        "candidateGroups",
        "candidateUsers",
        "processDefinitionId",
        "creationDate",
        "completionDate",
        "followUpDate",
        "dueDate",
        "tenantId",
        "externalFormReference",
        "processDefinitionVersion",
        "customHeaders",
        "priority",
        "userTaskKey",
        "elementInstanceKey",
        "processName",
        "processDefinitionKey",
        "processInstanceKey",
        "rootProcessInstanceKey",
        "businessId",
        "formKey",
        "tags",
    ),
    "decision-instances": (
        "businessId",
        "decisionDefinitionId",
        "decisionDefinitionKey",
        "decisionDefinitionName",
        "decisionDefinitionType",
        "decisionDefinitionVersion",
        "decisionEvaluationInstanceKey",
        "decisionEvaluationKey",
        "elementInstanceKey",
        "evaluationDate",
        "evaluationFailure",
        "processDefinitionKey",
        "processInstanceKey",
        "result",
        "rootDecisionDefinitionKey",
        "rootProcessInstanceKey",
        "state",
        "tenantId",
    ),
    "decision-definitions": (
        "decisionDefinitionId",
        "name",
        "version",
        "decisionRequirementsId",
        "tenantId",
        "decisionDefinitionKey",
        "decisionRequirementsKey",
        "decisionRequirementsName",
        "decisionRequirementsVersion",
    ),
    "decision-requirements": (
        "decisionRequirementsName",
        "version",
        "decisionRequirementsId",
        "resourceName",
        "tenantId",
        "decisionRequirementsKey",
    ),
    "batch-operations": (
        "batchOperationKey",
        "state",
        "batchOperationType",
        "startDate",
        "endDate",
        "actorType",
        "actorId",
        "operationsTotalCount",
        "operationsFailedCount",
        "operationsCompletedCount",
        "errors",
    ),
    "batch-operation-items": (
        "operationType",
        "batchOperationKey",
        "itemKey",
        "processInstanceKey",
        "rootProcessInstanceKey",
        "state",
        "processedDate",
        "errorMessage",
    ),
    "users": ("username", "name", "email"),
    "groups": ("name", "groupId", "description"),
    "roles": ("name", "roleId", "description"),
    "tenants": ("name", "tenantId", "description"),
    "mapping-rules": ("claimName", "claimValue", "name", "mappingRuleId"),
    "authorizations": (
        "ownerId",
        "ownerType",
        "resourceType",
        "resourceId",
        "resourcePropertyName",
        "permissionTypes",
        "authorizationKey",
    ),
    # the members of groups, roles and tenants that are listed by id
    "member-users": ("username",),
    "member-clients": ("clientId",),
    "member-groups": ("groupId",),
}
ITEM_FIELDS["user-task-variables"] = ITEM_FIELDS["variables"]

#: Fields whose 8.9 type is not nullable, with the value they take when Weir has none.
_NOT_NULL: dict[str, Any] = {
    "customHeaders": {},
    "candidateGroups": [],
    "candidateUsers": [],
    # Weir has no job priorities: every job has the default one
    "priority": 0,
    "hasFailedWithRetriesLeft": False,
    "isTruncated": False,
    "hasStartForm": False,
    "kind": "BPMN_ELEMENT",
    # a job no worker activated yet
    "worker": "",
    "listenerEventType": "UNSPECIFIED",
}
#: The same, where a field is nullable in one entity and not in another.
_ENTITY_NOT_NULL: dict[str, dict[str, Any]] = {
    "authorizations": {"permissionTypes": []},
    "incidents": {"errorMessage": ""},
    "batch-operations": {
        "operationsTotalCount": 0,
        "operationsFailedCount": 0,
        "operationsCompletedCount": 0,
        "errors": [],
    },
}
#: What only a get by key adds (a decision instance's inputs and matched rules; the history keeps neither).
_GET_FIELDS: dict[str, dict[str, Any]] = {"decision-instances": {"evaluatedInputs": [], "matchedRules": []}}
#: Dates the history keeps as the text they were given (with any offset); 8.9 writes date-times in UTC ("…Z").
_GIVEN_DATES = ("dueDate", "followUpDate")
_WITH_BUSINESS = frozenset({"process-instances", "jobs", "user-tasks", "decision-instances"})


def shape_item(entity: str, item: dict[str, Any], *, by_key: bool = False) -> dict[str, Any]:
    """A history item with every field of its 8.9 shape (fields Weir adds beyond the spec stay)."""
    fields = ITEM_FIELDS.get(entity)
    if fields is None:
        return item
    derived: dict[str, Any] = {}
    if entity in _WITH_BUSINESS:
        business = business_fields(item)
        derived["businessId"] = business["businessId"]
        if "tags" in fields:
            derived["tags"] = business["tags"]
    if entity == "process-instances" and item.get("parentProcessInstanceKey") is None:
        derived["rootProcessInstanceKey"] = item.get("processInstanceKey")  # a root instance is its own root
    if entity == "process-definitions":
        derived["state"] = "ACTIVE"  # process definitions are not deleted in Weir
    shaped: dict[str, Any] = {}
    for name in fields:
        value = item.get(name)
        if value is None:
            value = derived.get(name, _ENTITY_NOT_NULL.get(entity, {}).get(name, _NOT_NULL.get(name)))
        elif name in _GIVEN_DATES:
            value = utc_date_time(value)
        shaped[name] = _copy(value)
    for name, value in item.items():
        shaped.setdefault(name, value)
    if by_key:
        for name, default in _GET_FIELDS.get(entity, {}).items():
            shaped.setdefault(name, _copy(default))
    return shaped


def utc_date_time(value: Any) -> Any:
    """An ISO-8601 date-time with an offset as UTC text with milliseconds (``2031-01-01T00:00:00.000Z``); "" as
    null; anything else unchanged."""
    if not isinstance(value, str):
        return value
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return value
    if parsed.tzinfo is None:
        return value
    return parsed.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _copy(value: Any) -> Any:
    return type(value)() if isinstance(value, dict | list) and not value else value


def shape_page(result: dict[str, Any], entity: str) -> dict[str, Any]:
    """A search result in the 8.9 shape: its items completed; the page says whether the total is a lower bound."""
    page = result.get("page") or {}
    return {
        **result,
        "items": [shape_item(entity, item) for item in result.get("items") or []],
        "page": {
            "totalItems": page.get("totalItems", 0),
            # Weir counts every match: the total is exact
            "hasMoreTotalItems": bool(page.get("hasMoreTotalItems", False)),
            "startCursor": standard_base64(page.get("startCursor")),
            "endCursor": standard_base64(page.get("endCursor")),
        },
    }


_TO_STANDARD = str.maketrans("-_", "+/")


def standard_base64(cursor: str | None) -> str | None:
    """A cursor in the 8.9 spec's alphabet: standard base64 with padding (the history writes the URL-safe form
    without it; it reads either back)."""
    if cursor is None:
        return None
    return cursor.translate(_TO_STANDARD) + "=" * (-len(cursor) % 4)


# -- enum-valued filters ---------------------------------------------------------------------------------------


def _enum(values: str) -> frozenset[str]:
    return frozenset(values.split())


_ELEMENT_TYPES = (
    "AD_HOC_SUB_PROCESS AD_HOC_SUB_PROCESS_INNER_INSTANCE BOUNDARY_EVENT BUSINESS_RULE_TASK CALL_ACTIVITY END_EVENT "
    "EVENT_BASED_GATEWAY EVENT_SUB_PROCESS EXCLUSIVE_GATEWAY INCLUSIVE_GATEWAY INTERMEDIATE_CATCH_EVENT "
    "INTERMEDIATE_THROW_EVENT MANUAL_TASK MULTI_INSTANCE_BODY PARALLEL_GATEWAY PROCESS RECEIVE_TASK SCRIPT_TASK "
    "SEND_TASK SEQUENCE_FLOW SERVICE_TASK START_EVENT SUB_PROCESS TASK UNKNOWN UNSPECIFIED USER_TASK"
)
_INCIDENT_ERROR_TYPES = (
    "AD_HOC_SUB_PROCESS_NO_RETRIES CALLED_DECISION_ERROR CALLED_ELEMENT_ERROR CONDITION_ERROR "
    "DECISION_EVALUATION_ERROR EXECUTION_LISTENER_NO_RETRIES EXTRACT_VALUE_ERROR FORM_NOT_FOUND IO_MAPPING_ERROR "
    "JOB_NO_RETRIES "
    "MESSAGE_SIZE_EXCEEDED RESOURCE_NOT_FOUND SECRET_RESOLUTION_ERROR TASK_LISTENER_NO_RETRIES UNHANDLED_ERROR_EVENT "
    "UNKNOWN UNSPECIFIED"
)
_RESOURCE_TYPES = (
    "AUDIT_LOG AUTHORIZATION BACKUP BATCH CLUSTER_VARIABLE COMPONENT DECISION_DEFINITION "
    "DECISION_REQUIREMENTS_DEFINITION DOCUMENT EXPORTER EXPRESSION GLOBAL_LISTENER GROUP MAPPING_RULE MESSAGE "
    "PROCESS_DEFINITION RESOURCE ROLE SECRET SYSTEM TENANT USER USER_TASK"
)
#: The filter fields whose values are an 8.9 enum, per entity, with the values each admits.
ENUM_FILTERS: dict[str, dict[str, frozenset[str]]] = {
    "process-definitions": {"state": _enum("ACTIVE DELETED DRAINING")},
    "process-instances": {"state": _enum("ACTIVE COMPLETED SUSPENDED TERMINATED")},
    "element-instances": {
        "state": _enum("ACTIVE COMPLETED TERMINATED"),
        "type": _enum(_ELEMENT_TYPES),
    },
    "incidents": {
        "state": _enum("ACTIVE MIGRATED PENDING RESOLVED UNKNOWN"),
        "errorType": _enum(_INCIDENT_ERROR_TYPES),
    },
    "jobs": {
        "state": _enum(
            "CANCELED COMPLETED CREATED ERROR_THROWN FAILED MIGRATED PRIORITY_UPDATED RETRIES_UPDATED TIMED_OUT "
            "TIMEOUT_UPDATED"
        ),
        "kind": _enum("AD_HOC_SUB_PROCESS BPMN_ELEMENT EXECUTION_LISTENER TASK_LISTENER"),
        "listenerEventType": _enum(
            "ASSIGNING BEFORE_ALL CANCEL CANCELING COMPLETING CREATING END START UNSPECIFIED UPDATING"
        ),
    },
    "user-tasks": {
        "state": _enum("ASSIGNING CANCELED CANCELING COMPLETED COMPLETING CREATED CREATING FAILED UPDATING")
    },
    "decision-instances": {
        "state": _enum("EVALUATED FAILED UNKNOWN UNSPECIFIED"),
        "decisionDefinitionType": _enum("DECISION_TABLE LITERAL_EXPRESSION UNKNOWN UNSPECIFIED"),
    },
    "authorizations": {
        "ownerType": _enum("CLIENT GROUP MAPPING_RULE ROLE UNSPECIFIED USER"),
        "resourceType": _enum(_RESOURCE_TYPES),
    },
}
#: Operators whose operands are values of the field (``$like`` takes a pattern, ``$exists`` a boolean).
_VALUE_OPERATORS = ("$eq", "$neq")
_LIST_OPERATORS = ("$in", "$notIn")


def check_enum_filters(entity: str, query: Mapping[str, Any]) -> None:
    """A 400 naming the field and the admitted values when an enum-valued filter holds a value outside its enum."""
    enums = ENUM_FILTERS.get(entity)
    filter_ = query.get("filter")
    if not enums or not isinstance(filter_, Mapping):
        return
    pending: list[tuple[str, Mapping[str, Any]]] = [("filter", filter_)]
    while pending:
        path, conditions = pending.pop()
        alternatives = conditions.get("$or")
        if isinstance(alternatives, list):
            pending.extend((f"{path}.$or[{i}]", alt) for i, alt in enumerate(alternatives) if isinstance(alt, Mapping))
        for name, allowed in enums.items():
            if name in conditions:
                _check_enum_condition(f"{path}.{name}", conditions[name], allowed)


def _check_enum_condition(path: str, condition: Any, allowed: frozenset[str]) -> None:
    values: list[tuple[str, Any]] = []
    if isinstance(condition, Mapping):
        values += [(f"{path}.{op}", condition[op]) for op in _VALUE_OPERATORS if op in condition]
        for op in _LIST_OPERATORS:
            if isinstance(condition.get(op), list):
                values += [(f"{path}.{op}[{i}]", v) for i, v in enumerate(condition[op])]
    else:
        values.append((path, condition))
    for where, value in values:
        if isinstance(value, str) and value not in allowed:
            invalid(f"{where}: expected one of {', '.join(sorted(allowed))}, but it is '{value}'")
