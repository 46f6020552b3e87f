"""The searchable entities of the history: each v2 field, the SQL expression behind it and how its values convert.

Field names and shapes follow the Camunda 8.8 Orchestration Cluster REST API (``/v2/<entity>/search``): keys are
strings, dates ISO-8601 text, flags booleans, states the v2 enums.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from exporters.history.scope import Guard, Offer

# How a field's values are stored, filtered and rendered.
KEY = "key"  # BIGINT; a string in JSON ("2251799813685249")
INT = "int"
STR = "str"
DATE = "date"  # epoch ms; ISO-8601 text in JSON
BOOL = "bool"  # 0/1
JSON_LIST = "json-list"  # JSON array text; filtered by membership (an array of values: all of them)
JSON_OBJECT = "json-object"
ANY_OF = "any-of"  # a filter whose value is an array of strings, any of which matches (authorizations' resourceIds)


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    sql: str
    kind: str
    filterable: bool = True
    sortable: bool = True
    #: The item's value when search results truncate long values (None: the same as ``sql``).
    preview_sql: str | None = None


@dataclass(frozen=True, slots=True)
class Entity:
    name: str
    source: str  # FROM clause (with joins)
    key: Field  # the unique field; the last sort criterion so paging is stable
    fields: tuple[Field, ...]
    filter_only: tuple[Field, ...] = ()  # filter fields that are not part of an item
    sort_only: tuple[Field, ...] = ()  # sort fields that are not part of an item
    #: Who may read a row (`exporters.history.scope`): its tenant column (None: the rows belong to no tenant), the
    #: permission it needs, and for user tasks whom it is assigned and offered to.
    tenant: str | None = None
    guard: Guard | None = None
    offer: Offer | None = None

    @property
    def item_fields(self) -> tuple[Field, ...]:
        return self.fields

    def item_columns(self, *, truncate_values: bool = False) -> str:
        """The SELECT list of an item: long values cut to their preview when ``truncate_values``."""
        return ", ".join(
            f.preview_sql if truncate_values and f.preview_sql is not None else f.sql for f in self.item_fields
        )

    def field(self, name: str) -> Field | None:
        for f in (*self.fields, *self.filter_only):
            if f.name == name:
                return f
        return None

    def filter_names(self) -> list[str]:
        return sorted(f.name for f in (*self.fields, *self.filter_only) if f.filterable)

    def sort_field(self, name: str) -> Field | None:
        for f in (*self.fields, *self.sort_only):
            if f.name == name and f.sortable:
                return f
        return None

    def sort_names(self) -> list[str]:
        return sorted(f.name for f in (*self.fields, *self.sort_only) if f.sortable)


def _f(name: str, sql: str, kind: str, **kw: Any) -> Field:
    return Field(name, sql, kind, **kw)


_PD = "process_definitions"
_PROCESS = "PROCESS_DEFINITION"
_DECISION = "DECISION_DEFINITION"
PROCESS_DEFINITIONS = Entity(
    "process-definitions",
    f"{_PD} d",
    _f("processDefinitionKey", "d.process_definition_key", KEY),
    (
        _f("processDefinitionKey", "d.process_definition_key", KEY),
        _f("processDefinitionId", "d.process_definition_id", STR),
        _f("name", "d.name", STR),
        _f("resourceName", "d.resource_name", STR),
        _f("version", "d.version", INT),
        _f("versionTag", "d.version_tag", STR),
        _f("tenantId", "d.tenant_id", STR),
        _f("hasStartForm", "0", BOOL, filterable=False, sortable=False),
    ),
    tenant="d.tenant_id",
    guard=Guard(_PROCESS, "READ_PROCESS_DEFINITION", "d.process_definition_id"),
)


def _of_instance(column: str, instance_key: str) -> str:
    """A column of the process instance a row belongs to, looked up by its key (null for a row whose instance the
    history does not have)."""
    return f"(SELECT oi.{column} FROM process_instances oi WHERE oi.process_instance_key = {instance_key})"


def _root_of(alias: str) -> str:
    """rootProcessInstanceKey of the instance row ``alias``: the one its record named; for rows written before
    records named it, the instance itself when it is a root one (the root of a called one is not known then)."""
    return (
        f"COALESCE({alias}.root_process_instance_key, CASE WHEN {alias}.parent_process_instance_key IS NULL "
        f"THEN {alias}.process_instance_key END)"
    )


def _root_key(instance_key: str) -> Field:
    """rootProcessInstanceKey (Camunda 8.9) of a row: its instance's (null for a row whose instance the history
    does not have)."""
    root = f"(SELECT {_root_of('oi')} FROM process_instances oi WHERE oi.process_instance_key = {instance_key})"
    return _f("rootProcessInstanceKey", root, KEY, filterable=False, sortable=False)


def _business_id(instance_key: str) -> Field:
    """businessId (Camunda 8.10) of a job, user task or decision instance: its instance's (null for a decision
    evaluated on its own)."""
    return _f("businessId", _of_instance("business_id", instance_key), STR, sortable=False)


_PI_SOURCE = f"process_instances p LEFT JOIN {_PD} pd ON pd.process_definition_key = p.process_definition_key"
PROCESS_INSTANCES = Entity(
    "process-instances",
    _PI_SOURCE,
    _f("processInstanceKey", "p.process_instance_key", KEY),
    (
        _f("processInstanceKey", "p.process_instance_key", KEY),
        _f("processDefinitionId", "p.process_definition_id", STR),
        _f("processDefinitionName", "pd.name", STR),
        _f("processDefinitionVersion", "p.process_definition_version", INT),
        _f("processDefinitionVersionTag", "pd.version_tag", STR),
        _f("processDefinitionKey", "p.process_definition_key", KEY),
        _f("parentProcessInstanceKey", "p.parent_process_instance_key", KEY),
        _f("parentElementInstanceKey", "p.parent_element_instance_key", KEY),
        _f("startDate", "p.start_date", DATE),
        _f("endDate", "p.end_date", DATE),
        _f("state", "p.state", STR),
        _f("hasIncident", "p.has_incident", BOOL),
        _f("tenantId", "p.tenant_id", STR),
        _f("businessId", "p.business_id", STR),
        _f("tags", "p.tags", JSON_LIST, sortable=False),
        _f("rootProcessInstanceKey", _root_of("p"), KEY, filterable=False, sortable=False),
    ),
    tenant="p.tenant_id",
    guard=Guard(_PROCESS, "READ_PROCESS_INSTANCE", "p.process_definition_id"),
)

ELEMENT_INSTANCES = Entity(
    "element-instances",
    "element_instances e",
    _f("elementInstanceKey", "e.element_instance_key", KEY),
    (
        _f("elementInstanceKey", "e.element_instance_key", KEY),
        _f("processInstanceKey", "e.process_instance_key", KEY),
        _f("processDefinitionKey", "e.process_definition_key", KEY),
        _f("processDefinitionId", "e.process_definition_id", STR),
        _f("elementId", "e.element_id", STR),
        _f("elementName", "e.element_id", STR, filterable=False, sortable=False),
        _f("type", "e.type", STR),
        _f("state", "e.state", STR),
        _f("startDate", "e.start_date", DATE),
        _f("endDate", "e.end_date", DATE),
        _f("hasIncident", "CASE WHEN e.incident_key IS NULL THEN 0 ELSE 1 END", BOOL),
        _f("incidentKey", "e.incident_key", KEY),
        _f("tenantId", "e.tenant_id", STR),
        _root_key("e.process_instance_key"),
    ),
    filter_only=(
        _f("flowScopeKey", "e.flow_scope_key", KEY, sortable=False),
        # Camunda 8.8's name for it: the immediate children of a process instance or of a containing element
        _f("elementInstanceScopeKey", "e.flow_scope_key", KEY, sortable=False),
    ),
    tenant="e.tenant_id",
    guard=Guard(_PROCESS, "READ_PROCESS_INSTANCE", "e.process_definition_id"),
)

#: Characters of a variable's JSON value that a search result shows before it is cut (``isTruncated``); Camunda's
#: variable size threshold. Getting the variable by key, or searching with truncateValues=false, gives it whole.
VARIABLE_PREVIEW_LENGTH = 8191

_VARIABLE_FIELDS = (
    _f("variableKey", "v.variable_key", KEY),
    _f("name", "v.name", STR),
    _f("value", "v.value", STR, preview_sql=f"SUBSTR(v.value, 1, {VARIABLE_PREVIEW_LENGTH})"),
    _f(
        "isTruncated",
        "0",
        BOOL,
        filterable=False,
        sortable=False,
        preview_sql=f"CASE WHEN LENGTH(v.value) > {VARIABLE_PREVIEW_LENGTH} THEN 1 ELSE 0 END",
    ),
    _f("scopeKey", "v.scope_key", KEY),
    _f("processInstanceKey", "v.process_instance_key", KEY),
    _f("tenantId", "v.tenant_id", STR),
    _root_key("v.process_instance_key"),
)
#: Variables carry their process definition's key, not its id: the id comes from the definition.
_VARIABLE_PROCESS_ID = (
    f"(SELECT vd.process_definition_id FROM {_PD} vd WHERE vd.process_definition_key = v.process_definition_key)"
)
VARIABLES = Entity(
    "variables",
    "variables v",
    _VARIABLE_FIELDS[0],
    _VARIABLE_FIELDS,
    tenant="v.tenant_id",
    guard=Guard(_PROCESS, "READ_PROCESS_INSTANCE", _VARIABLE_PROCESS_ID),
)
#: The variables a user task sees (``/v2/user-tasks/{key}/variables/search``): those of every scope from the
#: task's element up to its process instance; Camunda 8.8 filters them by name only. Whoever may read the task may
#: read them (`HistoryReader.search_user_task_variables` checks the task).
USER_TASK_VARIABLES = Entity(
    "user-task-variables",
    "variables v",
    _VARIABLE_FIELDS[0],
    tuple(f if f.name == "name" else replace(f, filterable=False) for f in _VARIABLE_FIELDS),
    tenant="v.tenant_id",
)

INCIDENTS = Entity(
    "incidents",
    "incidents i",
    _f("incidentKey", "i.incident_key", KEY),
    (
        _f("incidentKey", "i.incident_key", KEY),
        _f("processDefinitionId", "i.process_definition_id", STR),
        _f("processDefinitionKey", "i.process_definition_key", KEY),
        _f("processInstanceKey", "i.process_instance_key", KEY),
        _f("errorType", "i.error_type", STR),
        _f("errorMessage", "i.error_message", STR),
        _f("elementId", "i.element_id", STR),
        _f("elementInstanceKey", "i.element_instance_key", KEY),
        _f("creationTime", "i.creation_time", DATE),
        _f("state", "i.state", STR),
        _f("jobKey", "i.job_key", KEY),
        _f("tenantId", "i.tenant_id", STR),
        _root_key("i.process_instance_key"),
    ),
    tenant="i.tenant_id",
    guard=Guard(_PROCESS, "READ_PROCESS_INSTANCE", "i.process_definition_id"),
)

JOBS = Entity(
    "jobs",
    "jobs j",
    _f("jobKey", "j.job_key", KEY),
    (
        _f("jobKey", "j.job_key", KEY),
        _f("type", "j.type", STR),
        _f("worker", "j.worker", STR),
        _f("state", "j.state", STR),
        _f("kind", "j.kind", STR),
        _f("listenerEventType", "j.listener_event_type", STR),
        _f("retries", "j.retries", INT),
        _f("errorMessage", "j.error_message", STR),
        _f("errorCode", "j.error_code", STR),
        _f("deadline", "j.deadline", DATE),
        _f("endTime", "j.end_time", DATE),
        _f("creationTime", "j.creation_time", DATE),
        _f("customHeaders", "j.custom_headers", JSON_OBJECT, filterable=False, sortable=False),
        _f("hasFailedWithRetriesLeft", "COALESCE(j.has_failed_with_retries_left, 0)", BOOL),
        _f("elementId", "j.element_id", STR),
        _f("elementInstanceKey", "j.element_instance_key", KEY),
        _f("processInstanceKey", "j.process_instance_key", KEY),
        _f("processDefinitionKey", "j.process_definition_key", KEY),
        _f("processDefinitionId", "j.process_definition_id", STR),
        _f("tenantId", "j.tenant_id", STR),
        _f("tags", "j.tags", JSON_LIST, sortable=False),
        _business_id("j.process_instance_key"),
        _root_key("j.process_instance_key"),
    ),
    tenant="j.tenant_id",
    guard=Guard(_PROCESS, "READ_PROCESS_INSTANCE", "j.process_definition_id"),
)

_UT_SOURCE = f"user_tasks t LEFT JOIN {_PD} td ON td.process_definition_key = t.process_definition_key"
USER_TASKS = Entity(
    "user-tasks",
    _UT_SOURCE,
    _f("userTaskKey", "t.user_task_key", KEY),
    (
        _f("userTaskKey", "t.user_task_key", KEY),
        _f("name", "t.element_id", STR, filterable=False, sortable=False),
        _f("state", "t.state", STR),
        _f("assignee", "NULLIF(t.assignee, '')", STR),
        _f("elementId", "t.element_id", STR),
        _f("candidateGroups", "t.candidate_groups", JSON_LIST, filterable=False, sortable=False),
        _f("candidateUsers", "t.candidate_users", JSON_LIST, filterable=False, sortable=False),
        _f("processDefinitionId", "t.process_definition_id", STR),
        _f("processName", "td.name", STR, filterable=False),
        _f("creationDate", "t.creation_date", DATE),
        _f("completionDate", "t.completion_date", DATE),
        _f("followUpDate", "t.follow_up_date", STR),
        _f("dueDate", "t.due_date", STR),
        _f("tenantId", "t.tenant_id", STR),
        _f("externalFormReference", "t.external_form_reference", STR, filterable=False),
        _f("processDefinitionVersion", "t.process_definition_version", INT),
        _f("customHeaders", "t.custom_headers", JSON_OBJECT, filterable=False, sortable=False),
        _f("priority", "t.priority", INT),
        _f("elementInstanceKey", "t.element_instance_key", KEY),
        _f("processInstanceKey", "t.process_instance_key", KEY),
        _f("processDefinitionKey", "t.process_definition_key", KEY),
        _f("formKey", "t.form_key", KEY),
        _f("tags", "t.tags", JSON_LIST, sortable=False),
        _business_id("t.process_instance_key"),
        _root_key("t.process_instance_key"),
    ),
    filter_only=(
        # One of the task's candidates: matched against the stored JSON array.
        _f("candidateGroup", "t.candidate_groups", JSON_LIST, sortable=False),
        _f("candidateUser", "t.candidate_users", JSON_LIST, sortable=False),
    ),
    tenant="t.tenant_id",
    guard=Guard(_PROCESS, "READ_USER_TASK", "t.process_definition_id"),
    # Camunda 8.9's property-based access: the assignee and the candidates read a task without the permission
    offer=Offer("t.assignee", "t.candidate_users", "t.candidate_groups"),
)

DECISION_INSTANCES = Entity(
    "decision-instances",
    "decision_instances di",
    _f("decisionEvaluationInstanceKey", "di.decision_evaluation_instance_key", STR),
    (
        _f("decisionEvaluationInstanceKey", "di.decision_evaluation_instance_key", STR),
        _f("decisionEvaluationKey", "di.decision_evaluation_key", KEY),
        _f("state", "di.state", STR),
        _f("evaluationDate", "di.evaluation_date", DATE),
        _f("evaluationFailure", "di.evaluation_failure", STR),
        _f("decisionDefinitionKey", "di.decision_definition_key", KEY),
        _f("decisionDefinitionId", "di.decision_definition_id", STR),
        _f("decisionDefinitionName", "di.decision_definition_name", STR),
        _f("decisionDefinitionVersion", "di.decision_definition_version", INT),
        _f("decisionDefinitionType", "di.decision_definition_type", STR),
        _f("rootDecisionDefinitionKey", "di.root_decision_definition_key", KEY),
        _f("result", "di.result", STR),
        _f("processDefinitionKey", "di.process_definition_key", KEY),
        _f("processInstanceKey", "di.process_instance_key", KEY),
        _f("elementInstanceKey", "di.element_instance_key", KEY),
        _f("tenantId", "di.tenant_id", STR),
        _business_id("di.process_instance_key"),
        _root_key("di.process_instance_key"),
    ),
    tenant="di.tenant_id",
    guard=Guard(_DECISION, "READ_DECISION_INSTANCE", "di.decision_definition_id"),
)

#: Deployed decisions with their requirements graph's name and version; deleted ones are gone, as in Camunda.
_DD_SOURCE = (
    "(SELECT * FROM decision_definitions WHERE deleted = 0) dd "
    "LEFT JOIN decision_requirements dr ON dr.decision_requirements_key = dd.decision_requirements_key"
)
DECISION_DEFINITIONS = Entity(
    "decision-definitions",
    _DD_SOURCE,
    _f("decisionDefinitionKey", "dd.decision_definition_key", KEY),
    (
        _f("decisionDefinitionKey", "dd.decision_definition_key", KEY),
        _f("decisionDefinitionId", "dd.decision_definition_id", STR),
        _f("name", "dd.name", STR),
        _f("version", "dd.version", INT),
        _f("decisionRequirementsId", "dd.decision_requirements_id", STR),
        _f("decisionRequirementsKey", "dd.decision_requirements_key", KEY),
        _f("decisionRequirementsName", "dr.decision_requirements_name", STR),
        _f("decisionRequirementsVersion", "dr.version", INT),
        _f("tenantId", "dd.tenant_id", STR),
    ),
    filter_only=(
        # the highest version of each decision id
        _f(
            "isLatestVersion",
            "CASE WHEN dd.version = (SELECT MAX(l.version) FROM decision_definitions l WHERE l.deleted = 0 AND "
            "l.decision_definition_id = dd.decision_definition_id) THEN 1 ELSE 0 END",
            BOOL,
            sortable=False,
        ),
    ),
    tenant="dd.tenant_id",
    guard=Guard(_DECISION, "READ_DECISION_DEFINITION", "dd.decision_definition_id"),
)
DECISION_REQUIREMENTS = Entity(
    "decision-requirements",
    "(SELECT * FROM decision_requirements WHERE deleted = 0) dr",
    _f("decisionRequirementsKey", "dr.decision_requirements_key", KEY),
    (
        _f("decisionRequirementsKey", "dr.decision_requirements_key", KEY),
        _f("decisionRequirementsId", "dr.decision_requirements_id", STR),
        _f("decisionRequirementsName", "dr.decision_requirements_name", STR),
        _f("version", "dr.version", INT),
        _f("resourceName", "dr.resource_name", STR),
        _f("tenantId", "dr.tenant_id", STR),
    ),
    tenant="dr.tenant_id",
    guard=Guard("DECISION_REQUIREMENTS_DEFINITION", "READ", "dr.decision_requirements_id"),
)


def _batch_count(item_state: str, reported: str) -> str:
    """Items of a batch in ``item_state``: as the items say, or as the partitions reported when that is more (a
    partition's items reach the history at its own pace)."""
    items = (
        "(SELECT COUNT(*) FROM batch_operation_items i "
        f"WHERE i.batch_operation_key = b.batch_operation_key AND i.state = '{item_state}')"
    )
    sums = (
        f"(SELECT COALESCE(SUM(r.{reported}), 0) FROM batch_operation_partitions r "
        "WHERE r.batch_operation_key = b.batch_operation_key)"
    )
    return f"(CASE WHEN {items} > {sums} THEN {items} ELSE {sums} END)"


_FAILED = _batch_count("FAILED", "failed_count")
_COMPLETED = _batch_count("COMPLETED", "completed_count")
#: Batch operations (Camunda 8.8): the counts come from the items and the partitions' reports; a batch completed
#: with failed items is PARTIALLY_COMPLETED.
BATCH_OPERATIONS = Entity(
    "batch-operations",
    "batch_operations b",
    _f("batchOperationKey", "b.batch_operation_key", KEY),
    (
        _f("batchOperationKey", "b.batch_operation_key", KEY),
        _f("batchOperationType", "b.batch_operation_type", STR),
        _f(
            "state",
            f"CASE WHEN b.state = 'COMPLETED' AND {_FAILED} > 0 THEN 'PARTIALLY_COMPLETED' ELSE b.state END",
            STR,
        ),
        _f("startDate", "b.start_date", DATE),
        _f("endDate", "b.end_date", DATE),
        _f("operationsTotalCount", "COALESCE(b.items_count, 0)", INT),
        _f("operationsFailedCount", _FAILED, INT),
        _f("operationsCompletedCount", _COMPLETED, INT),
        _f("errors", "NULL", JSON_LIST, filterable=False, sortable=False),
    ),
    guard=Guard("BATCH", "READ", "CAST(b.batch_operation_key AS TEXT)"),
)
#: The items of batch operations; those a canceled batch never reached are CANCELED.
BATCH_OPERATION_ITEMS = Entity(
    "batch-operation-items",
    "batch_operation_items bi JOIN batch_operations bo ON bo.batch_operation_key = bi.batch_operation_key",
    _f("batchOperationItemId", "bi.batch_operation_item_id", STR, filterable=False),
    (
        _f("batchOperationKey", "bi.batch_operation_key", KEY),
        _f("itemKey", "bi.item_key", KEY),
        _f("processInstanceKey", "bi.process_instance_key", KEY),
        _f("operationType", "bo.batch_operation_type", STR),
        _f(
            "state",
            "CASE WHEN bi.state = 'ACTIVE' AND bo.state = 'CANCELED' THEN 'CANCELED' ELSE bi.state END",
            STR,
        ),
        _f("processedDate", "bi.processed_date", DATE),
        _f("errorMessage", "bi.error_message", STR),
    ),
    guard=Guard("BATCH", "READ", "CAST(bi.batch_operation_key AS TEXT)"),
)

# -- identity (Camunda 8.8): users, groups, roles, tenants, mapping rules, authorizations and memberships -----------

USERS = Entity(
    "users",
    "identity_users u",
    _f("username", "u.username", STR),
    (_f("username", "u.username", STR), _f("name", "u.name", STR), _f("email", "u.email", STR)),
    guard=Guard("USER", "READ", "u.username"),
)
GROUPS = Entity(
    "groups",
    "identity_groups g",
    _f("groupId", "g.group_id", STR),
    (_f("groupId", "g.group_id", STR), _f("name", "g.name", STR), _f("description", "g.description", STR)),
    guard=Guard("GROUP", "READ", "g.group_id"),
)
ROLES = Entity(
    "roles",
    "identity_roles r",
    _f("roleId", "r.role_id", STR),
    (_f("roleId", "r.role_id", STR), _f("name", "r.name", STR), _f("description", "r.description", STR)),
    guard=Guard("ROLE", "READ", "r.role_id"),
)
TENANTS = Entity(
    "tenants",
    "identity_tenants t",
    _f("tenantId", "t.tenant_id", STR),
    (_f("tenantId", "t.tenant_id", STR), _f("name", "t.name", STR), _f("description", "t.description", STR)),
    sort_only=(_f("key", "t.tenant_key", KEY),),  # Camunda 8.8 sorts tenants by their key too
    guard=Guard("TENANT", "READ", "t.tenant_id"),
)
MAPPING_RULES = Entity(
    "mapping-rules",
    "identity_mapping_rules mr",
    _f("mappingRuleId", "mr.mapping_rule_id", STR),
    (
        _f("mappingRuleId", "mr.mapping_rule_id", STR),
        _f("claimName", "mr.claim_name", STR),
        _f("claimValue", "mr.claim_value", STR),
        _f("name", "mr.name", STR),
    ),
    guard=Guard("MAPPING_RULE", "READ", "mr.mapping_rule_id"),
)
#: Authorizations; Weir's name resources by id (or "*" for all), never by property (Camunda 8.9's
#: resourcePropertyName), so that field is null and filtering by property names finds none.
AUTHORIZATIONS = Entity(
    "authorizations",
    "identity_authorizations a",
    _f("authorizationKey", "a.authorization_key", KEY),
    (
        _f("authorizationKey", "a.authorization_key", KEY),
        _f("ownerId", "a.owner_id", STR),
        _f("ownerType", "a.owner_type", STR),
        _f("resourceType", "a.resource_type", STR),
        _f("resourceId", "a.resource_id", STR),
        _f("resourcePropertyName", "CAST(NULL AS TEXT)", STR, filterable=False),
        _f("permissionTypes", "a.permission_types", JSON_LIST, filterable=False, sortable=False),
    ),
    filter_only=(
        _f("resourceIds", "a.resource_id", ANY_OF, sortable=False),
        _f("resourcePropertyNames", "CAST(NULL AS TEXT)", ANY_OF, sortable=False),
    ),
    guard=Guard("AUTHORIZATION", "READ", "CAST(a.authorization_key AS TEXT)"),
)
#: The members of a group, role or tenant that are named by id only (users and clients may come from an identity
#: provider; a tenant's groups are listed by id). Not searchable on their own: the reader narrows them to one
#: container and member type (`HistoryReader.search_members`).


def _members(name: str, id_name: str) -> Entity:
    member = _f(id_name, "m.member_id", STR)
    return Entity(name, "identity_memberships m", member, (member,))


MEMBER_USERS = _members("member-users", "username")
MEMBER_CLIENTS = _members("member-clients", "clientId")
MEMBER_GROUPS = _members("member-groups", "groupId")

ENTITIES: dict[str, Entity] = {
    e.name: e
    for e in (
        PROCESS_DEFINITIONS,
        PROCESS_INSTANCES,
        ELEMENT_INSTANCES,
        VARIABLES,
        INCIDENTS,
        JOBS,
        USER_TASKS,
        DECISION_INSTANCES,
        DECISION_DEFINITIONS,
        DECISION_REQUIREMENTS,
        BATCH_OPERATIONS,
        BATCH_OPERATION_ITEMS,
        USERS,
        GROUPS,
        ROLES,
        TENANTS,
        MAPPING_RULES,
        AUTHORIZATIONS,
    )
}


def iso_date(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC text with milliseconds (``2026-01-31T09:30:00.000Z``)."""
    text = datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def render(field: Field, value: Any) -> Any:
    """A stored value in the v2 JSON shape of its field."""
    if value is None:
        return [] if field.kind == JSON_LIST else None
    kind = field.kind
    if kind == KEY:
        return str(value)
    if kind == DATE:
        return iso_date(int(value))
    if kind == BOOL:
        return bool(value)
    if kind in (JSON_LIST, JSON_OBJECT):
        return json.loads(value)
    if kind == INT:
        return int(value)
    return value


def item(entity: Entity, row: tuple[Any, ...]) -> dict[str, Any]:
    return {f.name: render(f, v) for f, v in zip(entity.item_fields, row, strict=True)}
