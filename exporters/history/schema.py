"""The history schema: tables, their columns, and the versioned migrations that create and evolve them.

Migrations are ordered steps; `schema_version` records each step applied, so opening a database applies only the
steps it lacks (an empty database gets them all, an up-to-date one none). Column types are written once for both
SQLite and PostgreSQL: ``{KEY}`` is the row key of tables keyed by a Zeebe key (SQLite: the rowid itself).
Dates are epoch milliseconds (BIGINT); booleans are 0/1; JSON values are text.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Table:
    """A history table: its name, key column and every column (the key first) in insert order."""

    name: str
    key: str
    columns: tuple[str, ...]


PROCESS_DEFINITIONS = Table(
    "process_definitions",
    "process_definition_key",
    (
        "process_definition_key",
        "process_definition_id",
        "name",
        "version",
        "version_tag",
        "resource_name",
        "tenant_id",
        "deployment_key",
        "bpmn_xml",
    ),
)
PROCESS_INSTANCES = Table(
    "process_instances",
    "process_instance_key",
    (
        "process_instance_key",
        "process_definition_key",
        "process_definition_id",
        "process_definition_version",
        "state",
        "start_date",
        "end_date",
        "parent_process_instance_key",
        "parent_element_instance_key",
        "has_incident",
        "tenant_id",
        "partition_id",
        "business_id",
        "tags",
        "root_process_instance_key",
    ),
)
ELEMENT_INSTANCES = Table(
    "element_instances",
    "element_instance_key",
    (
        "element_instance_key",
        "process_instance_key",
        "process_definition_key",
        "process_definition_id",
        "flow_scope_key",
        "element_id",
        "type",
        "state",
        "start_date",
        "end_date",
        "incident_key",
        "tenant_id",
    ),
)
VARIABLES = Table(
    "variables",
    "variable_key",
    ("variable_key", "name", "value", "scope_key", "process_instance_key", "process_definition_key", "tenant_id"),
)
INCIDENTS = Table(
    "incidents",
    "incident_key",
    (
        "incident_key",
        "process_instance_key",
        "process_definition_key",
        "process_definition_id",
        "element_id",
        "element_instance_key",
        "job_key",
        "error_type",
        "error_message",
        "state",
        "creation_time",
        "end_time",
        "tenant_id",
    ),
)
JOBS = Table(
    "jobs",
    "job_key",
    (
        "job_key",
        "type",
        "worker",
        "state",
        "kind",
        "listener_event_type",
        "retries",
        "error_message",
        "error_code",
        "deadline",
        "custom_headers",
        "element_id",
        "element_instance_key",
        "process_instance_key",
        "process_definition_key",
        "process_definition_id",
        "has_failed_with_retries_left",
        "creation_time",
        "end_time",
        "tenant_id",
        "tags",
    ),
)
USER_TASKS = Table(
    "user_tasks",
    "user_task_key",
    (
        "user_task_key",
        "element_id",
        "element_instance_key",
        "process_instance_key",
        "process_definition_key",
        "process_definition_id",
        "process_definition_version",
        "state",
        "assignee",
        "candidate_groups",
        "candidate_users",
        "due_date",
        "follow_up_date",
        "form_key",
        "external_form_reference",
        "custom_headers",
        "priority",
        "creation_date",
        "completion_date",
        "tenant_id",
        "tags",
    ),
)
DECISION_INSTANCES = Table(
    "decision_instances",
    "decision_evaluation_instance_key",
    (
        "decision_evaluation_instance_key",
        "decision_evaluation_key",
        "state",
        "evaluation_date",
        "evaluation_failure",
        "decision_definition_key",
        "decision_definition_id",
        "decision_definition_name",
        "decision_definition_version",
        "decision_definition_type",
        "root_decision_definition_key",
        "result",
        "process_definition_key",
        "process_instance_key",
        "element_instance_key",
        "tenant_id",
    ),
)

DECISION_DEFINITIONS = Table(
    "decision_definitions",
    "decision_definition_key",
    (
        "decision_definition_key",
        "decision_definition_id",
        "name",
        "version",
        "version_tag",
        "decision_requirements_key",
        "decision_requirements_id",
        "tenant_id",
        "deployment_key",
        "deleted",
    ),
)
DECISION_REQUIREMENTS = Table(
    "decision_requirements",
    "decision_requirements_key",
    (
        "decision_requirements_key",
        "decision_requirements_id",
        "decision_requirements_name",
        "version",
        "resource_name",
        "tenant_id",
        "deployment_key",
        "dmn_xml",
        "deleted",
    ),
)
FORMS = Table(
    "forms",
    "form_key",
    (
        "form_key",
        "form_id",
        "version",
        "version_tag",
        "resource_name",
        "tenant_id",
        "deployment_key",
        "form_schema",
        "deleted",
    ),
)
#: The sequence flows an instance took: one row per instance and flow, however often it was taken (as Operate
#: keeps them), keyed ``<processInstanceKey>_<flowId>``.
SEQUENCE_FLOWS = Table(
    "sequence_flows",
    "sequence_flow_id",
    (
        "sequence_flow_id",
        "process_instance_key",
        "process_definition_key",
        "process_definition_id",
        "element_id",
        "tenant_id",
    ),
)

BATCH_OPERATIONS = Table(
    "batch_operations",
    "batch_operation_key",
    ("batch_operation_key", "batch_operation_type", "state", "start_date", "end_date", "items_count"),
)
BATCH_OPERATION_ITEMS = Table(
    "batch_operation_items",
    "batch_operation_item_id",  # batch key and item key: an item may be part of several batches
    (
        "batch_operation_item_id",
        "batch_operation_partition_id",
        "batch_operation_key",
        "item_key",
        "process_instance_key",
        "operation_type",
        "state",
        "processed_date",
        "error_message",
    ),
)
BATCH_OPERATION_PARTITIONS = Table(
    "batch_operation_partitions",
    "batch_operation_partition_id",  # batch key and partition id
    ("batch_operation_partition_id", "batch_operation_key", "partition_id", "completed_count", "failed_count"),
)

#: The cluster's identity (Camunda 8.8 keeps it in the engine): users, groups, roles, tenants, mapping rules by
#: their ids, the authorizations granted, and who is a member of which group, role or tenant. Deleted ones are gone
#: (an id may be taken again). A user's password hash is never stored.
USERS = Table("identity_users", "username", ("username", "user_key", "name", "email"))
GROUPS = Table("identity_groups", "group_id", ("group_id", "group_key", "name", "description"))
ROLES = Table("identity_roles", "role_id", ("role_id", "role_key", "name", "description"))
TENANTS = Table("identity_tenants", "tenant_id", ("tenant_id", "tenant_key", "name", "description"))
MAPPING_RULES = Table(
    "identity_mapping_rules",
    "mapping_rule_id",
    ("mapping_rule_id", "mapping_rule_key", "claim_name", "claim_value", "name"),
)
AUTHORIZATIONS = Table(
    "identity_authorizations",
    "authorization_key",
    (
        "authorization_key",
        "owner_id",
        "owner_type",
        "resource_matcher",
        "resource_id",
        "resource_type",
        "permission_types",
    ),
)
#: One row per member of a group, role or tenant, keyed by the JSON array [container kind, container id, member
#: type, member id] (ids may hold any character, so no separator would do).
MEMBERSHIPS = Table(
    "identity_memberships",
    "membership_id",
    ("membership_id", "container_kind", "container_id", "member_type", "member_id"),
)

#: The tables the first migration creates; later ones create theirs themselves.
_FIRST_TABLES: tuple[Table, ...] = (
    PROCESS_DEFINITIONS,
    PROCESS_INSTANCES,
    ELEMENT_INSTANCES,
    VARIABLES,
    INCIDENTS,
    JOBS,
    USER_TASKS,
    DECISION_INSTANCES,
)
#: Deployed decisions, their requirements graphs and forms, and the flows instances took (Camunda 8.8 Operate reads).
_OPERATE_TABLES: tuple[Table, ...] = (DECISION_DEFINITIONS, DECISION_REQUIREMENTS, FORMS, SEQUENCE_FLOWS)
#: Batch operations and their items (Camunda 8.8).
_BATCH_TABLES: tuple[Table, ...] = (BATCH_OPERATIONS, BATCH_OPERATION_ITEMS, BATCH_OPERATION_PARTITIONS)
#: Identity (Camunda 8.8).
_IDENTITY_TABLES: tuple[Table, ...] = (USERS, GROUPS, ROLES, TENANTS, MAPPING_RULES, AUTHORIZATIONS, MEMBERSHIPS)
TABLES: tuple[Table, ...] = (*_FIRST_TABLES, *_OPERATE_TABLES, *_BATCH_TABLES, *_IDENTITY_TABLES)
TABLES_BY_NAME = {t.name: t for t in TABLES}

_TEXT_COLUMNS = {
    "process_definition_id",
    "name",
    "version_tag",
    "resource_name",
    "tenant_id",
    "bpmn_xml",
    "state",
    "element_id",
    "type",
    "value",
    "error_type",
    "error_message",
    "worker",
    "kind",
    "listener_event_type",
    "error_code",
    "custom_headers",
    "assignee",
    "candidate_groups",
    "candidate_users",
    "due_date",  # ISO-8601 text, as the user task carries it
    "follow_up_date",
    "external_form_reference",
    "decision_evaluation_instance_key",
    "evaluation_failure",
    "decision_definition_id",
    "decision_definition_name",
    "decision_definition_type",
    "result",
    "business_id",
    "tags",  # a JSON array of strings
    "decision_requirements_id",
    "decision_requirements_name",
    "dmn_xml",
    "form_id",
    "form_schema",  # the form's JSON document as deployed
    "sequence_flow_id",
    "batch_operation_type",
    "batch_operation_item_id",
    "batch_operation_partition_id",
    "operation_type",
    "username",
    "email",
    "description",
    "group_id",
    "role_id",
    "mapping_rule_id",
    "claim_name",
    "claim_value",
    "owner_id",
    "owner_type",
    "resource_matcher",
    "resource_id",
    "resource_type",
    "permission_types",  # a JSON array of strings
    "membership_id",
    "container_kind",
    "container_id",
    "member_type",
    "member_id",
}

# Columns added by a later migration (by table): the first migration creates tables without them.
_ADDED_LATER: dict[str, int] = {
    "process_instances.business_id": 3,
    "process_instances.tags": 3,
    "jobs.tags": 3,
    "user_tasks.tags": 3,
    "process_instances.root_process_instance_key": 7,
}


def _column_type(column: str) -> str:
    return "TEXT" if column in _TEXT_COLUMNS else "BIGINT"


def _create_table(table: Table) -> str:
    columns = []
    for column in table.columns:
        if f"{table.name}.{column}" in _ADDED_LATER:
            continue
        if column == table.key:
            kind = "TEXT PRIMARY KEY" if column in _TEXT_COLUMNS else "{KEY}"
        else:
            kind = _column_type(column)
        columns.append(f"{column} {kind}")
    return f"CREATE TABLE {table.name} ({', '.join(columns)})"


def _add_columns(version: int) -> tuple[str, ...]:
    """The ALTER TABLE statements of the columns that migration ``version`` adds."""
    added = [name.split(".") for name, v in _ADDED_LATER.items() if v == version]
    return tuple(f"ALTER TABLE {table} ADD COLUMN {column} {_column_type(column)}" for table, column in added)


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "history tables, their lookup indexes and the exported position per partition",
        (
            *(_create_table(t) for t in _FIRST_TABLES),
            "CREATE TABLE exported_positions (partition_id BIGINT PRIMARY KEY, position BIGINT NOT NULL)",
            # Only the lookups every view needs: an instance's elements, variables, incidents, jobs and tasks
            # (every index is written per row; retention scans instances once an hour instead of indexing end dates).
            "CREATE INDEX element_instances_by_instance ON element_instances (process_instance_key)",
            "CREATE INDEX variables_by_instance ON variables (process_instance_key)",
            "CREATE INDEX incidents_by_instance ON incidents (process_instance_key)",
            "CREATE INDEX incidents_by_element ON incidents (element_instance_key)",
            "CREATE INDEX jobs_by_instance ON jobs (process_instance_key)",
            "CREATE INDEX user_tasks_by_instance ON user_tasks (process_instance_key)",
        ),
    ),
    Migration(
        2,
        "an instance has an incident when an instance it called has one: index instances by their caller and "
        "flag the callers of flagged instances",
        (
            "CREATE INDEX process_instances_by_parent ON process_instances (parent_process_instance_key)",
            "UPDATE process_instances SET has_incident = 1 WHERE process_instance_key IN ("
            "WITH RECURSIVE callers(k) AS ("
            "SELECT parent_process_instance_key FROM process_instances "
            "WHERE has_incident = 1 AND parent_process_instance_key IS NOT NULL "
            "UNION SELECT p.parent_process_instance_key FROM process_instances p JOIN callers c "
            "ON p.process_instance_key = c.k WHERE p.parent_process_instance_key IS NOT NULL"
            ") SELECT k FROM callers)",
        ),
    ),
    Migration(
        3,
        "business ids and tags (Camunda 8.9): an instance's business id and tags, its jobs' and user tasks' tags, "
        "and instances indexed by business id",
        (
            *_add_columns(3),
            "CREATE INDEX process_instances_by_business_id ON process_instances (business_id)",
        ),
    ),
    Migration(
        4,
        "decision definitions, decision requirements (with their DMN) and forms as deployed, and the sequence "
        "flows each instance took",
        (
            *(_create_table(t) for t in _OPERATE_TABLES),
            "CREATE INDEX sequence_flows_by_instance ON sequence_flows (process_instance_key)",
            "CREATE INDEX decision_definitions_by_requirements ON decision_definitions (decision_requirements_key)",
        ),
    ),
    Migration(
        5,
        "batch operations, their items and the partitions' reports, indexed by batch",
        (
            *(_create_table(t) for t in _BATCH_TABLES),
            "CREATE INDEX batch_operation_items_by_batch ON batch_operation_items (batch_operation_key)",
            "CREATE INDEX batch_operation_partitions_by_batch ON batch_operation_partitions (batch_operation_key)",
        ),
    ),
    Migration(
        6,
        "identity: users, groups, roles, tenants, mapping rules, authorizations and memberships, the memberships "
        "indexed by container and by member",
        (
            *(_create_table(t) for t in _IDENTITY_TABLES),
            "CREATE INDEX identity_memberships_by_container ON identity_memberships "
            "(container_kind, container_id, member_type)",
            "CREATE INDEX identity_memberships_by_member ON identity_memberships (member_type, member_id)",
        ),
    ),
    Migration(
        7,
        "root instances (Camunda 8.9): each instance's rootProcessInstanceKey, the top of its chain of calls (null "
        "in rows written before)",
        _add_columns(7),
    ),
)

SCHEMA_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT PRIMARY KEY, description TEXT NOT NULL, "
    "applied_at BIGINT NOT NULL)"
)
LATEST_VERSION = MIGRATIONS[-1].version
