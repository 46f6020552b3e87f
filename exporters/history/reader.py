"""Reading the history: the searches of the REST API (``/v2/<entity>/search``) and single items by key.

    reader = open_reader("sqlite:///var/weir/history.db")   # or "postgresql://user@host:5432/weir"
    result = await reader.search("process-instances", {"filter": {"state": "ACTIVE"}, "page": {"limit": 20}})
    # {"items": [...], "page": {"totalItems": 3, "startCursor": "...", "endCursor": "..."}}

Reads never block the caller's event loop: SQLite queries run in a worker thread, PostgreSQL through psycopg's
async connection. The schema is created on first use when the exporter has not done it yet, so a gateway may
start before any broker has exported. A request the history cannot answer raises `InvalidQuery` (a client error).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from typing import Any

import defusedxml.ElementTree as ET

from exporters.history import entities, query
from exporters.history.backends import Backend, PostgresBackend, SqliteBackend, check_url, file_identity, sqlite_path
from exporters.history.entities import Entity
from exporters.history.query import InvalidQuery, encode_cursor
from exporters.history.scope import EVERYTHING, Guard, Scope

_log = logging.getLogger("weir.history.reader")

__all__ = ["ENTITIES", "EVERYTHING", "HistoryReader", "InvalidQuery", "Scope", "open_reader"]

ENTITIES = tuple(entities.ENTITIES)
# Items whose name is the BPMN element's (the id when the element has no name, as Operate shows it).
_NAME_FIELDS = {"element-instances": "elementName", "user-tasks": "name"}
_NAME_CACHE_SIZE = 1000


def element_names(xml: str | None) -> dict[str, str]:
    """Element id → name of every named element in a BPMN document."""
    if not xml:
        return {}
    try:
        root = ET.fromstring(xml)
    except (ET.ParseError, ValueError):
        return {}
    return {e.get("id", ""): e.get("name", "") for e in root.iter() if e.get("id") and e.get("name")}


def start_form_link(xml: str | None, process_id: str) -> tuple[str, str, str | None] | None:
    """The form a process's start event links (``zeebe:formDefinition formId``): (form id, binding type, version
    tag). None when it links none, or names an embedded (``formKey``) or external form."""
    for form in _start_form_definitions(xml, process_id):
        if form.get("formId"):
            return form.get("formId", ""), form.get("bindingType") or "latest", form.get("versionTag")
    return None


def start_form_named(xml: str | None, process_id: str) -> bool:
    """Whether a process's start event names a form, linked (formId) or embedded (formKey)."""
    return any(f.get("formId") or f.get("formKey") for f in _start_form_definitions(xml, process_id))


def _start_form_definitions(xml: str | None, process_id: str) -> list[Any]:
    """The ``zeebe:formDefinition`` elements of the top-level start events of the process ``process_id``."""
    if not xml:
        return []
    try:
        root = ET.fromstring(xml)
    except (ET.ParseError, ValueError):
        return []
    found = []
    for process in root.iter():
        if _local(process.tag) != "process" or process.get("id") != process_id:
            continue
        for start in process:
            if _local(start.tag) == "startEvent":
                found += [e for e in start.iter() if _local(e.tag) == "formDefinition"]
    return found


def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


_CLOCK_UNUSED = 0  # migration timestamps from a reader: it has no clock of its own to offer

#: The identities that have members (or are looked up as a member): their table and id column.
_IDENTITY_TABLES = {
    "GROUP": ("identity_groups", "group_id"),
    "ROLE": ("identity_roles", "role_id"),
    "TENANT": ("identity_tenants", "tenant_id"),
}
#: Members listed by their id alone, from the memberships (users and clients need not be known here).
_ID_MEMBERS = {"USER": entities.MEMBER_USERS, "CLIENT": entities.MEMBER_CLIENTS, "GROUP": entities.MEMBER_GROUPS}
#: Members listed as whole items of their own kind (those the history has).
_ITEM_MEMBERS = {"ROLE": entities.ROLES, "MAPPING_RULE": entities.MAPPING_RULES}
_MEMBERS_OF = (
    "SELECT member_id FROM identity_memberships WHERE container_kind = ? AND container_id = ? AND member_type = ?"
)
_CONTAINERS_OF = (
    "SELECT container_id FROM identity_memberships WHERE container_kind = ? AND member_type = ? AND member_id = ?"
)
#: The identities that have members, as entities (their guard decides who may read one).
_IDENTITY_ENTITIES = {"GROUP": entities.GROUPS, "ROLE": entities.ROLES, "TENANT": entities.TENANTS}
#: A form read on its own (a resource): the tenant and Camunda's RESOURCE READ on its form id.
_FORM_GUARD = Guard("RESOURCE", "READ", "f.form_id")


def visible(entity: Entity, scope: Scope) -> tuple[str, list[Any]]:
    """The condition (``?`` placeholders) keeping ``entity``'s rows to ``scope``, over its aliases."""
    return scope.condition(entity.tenant, entity.guard, entity.offer)


class HistoryReader:
    """Searches and lookups over the history tables (SQLite or PostgreSQL).

    Every read takes a ``scope`` (`exporters.history.scope`, default: everything): searches count and page only the
    rows it allows, and a lookup of a row it does not allow answers as for a missing one (None, or nothing).
    """

    placeholder = "?"

    def __init__(self, url: str) -> None:
        self.url = url
        self._schema_ready = False
        self._names: dict[int, dict[str, str]] = {}  # process definition key → element id → name
        self._start_form: dict[int, bool] = {}  # process definition key → whether its start event has a form

    # -- the contract ------------------------------------------------------------------------------------------

    async def search(
        self, entity: str, request: dict[str, Any] | None, *, truncate_values: bool = True, scope: Scope = EVERYTHING
    ) -> dict[str, Any]:
        """Answer a v2 search request for ``entity`` (see `exporters.history.query` for what it accepts).

        Long variable values are cut to their preview (``isTruncated``) unless ``truncate_values`` is False.
        """
        return await self._search(_entity(entity), request, truncate_values=truncate_values, scope=scope)

    async def search_user_task_variables(
        self,
        user_task_key: str,
        request: dict[str, Any] | None,
        *,
        truncate_values: bool = True,
        scope: Scope = EVERYTHING,
    ) -> dict[str, Any] | None:
        """The variables a user task sees: those of its element's scope and of every enclosing scope up to its
        process instance (all of them, an outer variable too when an inner one of the same name shadows it, as
        Camunda 8.8 answers). None when the history has no such user task (or ``scope`` does not allow it)."""
        definition = entities.USER_TASK_VARIABLES
        q = query.build(definition, request)  # a bad request is a client error even for an unknown task
        try:
            task_key = query.key_value(entities.USER_TASKS.key, user_task_key, "userTaskKey")
        except InvalidQuery:
            return None
        allowed, allowed_params = visible(entities.USER_TASKS, scope)
        tasks = await self._query(
            f"SELECT t.process_instance_key FROM user_tasks t WHERE t.user_task_key = ? AND {allowed}",
            [task_key, *allowed_params],
        )
        if not tasks:
            return None
        instance = tasks[0][0]
        scopes_sql = (
            "WITH RECURSIVE scopes(k) AS ("
            "SELECT element_instance_key FROM user_tasks WHERE user_task_key = ? "
            "UNION SELECT e.flow_scope_key FROM element_instances e JOIN scopes s ON e.element_instance_key = s.k"
            ") SELECT k FROM scopes"
        )
        scopes = {int(k) for (k,) in await self._query(scopes_sql, [task_key]) if k is not None}
        if instance is not None:
            scopes.add(int(instance))
        if not scopes:
            return None
        marks = ", ".join("?" for _ in scopes)
        q.where = f"({q.where}) AND v.scope_key IN ({marks})"
        q.params = [*q.params, *sorted(scopes)]
        if instance is not None:  # every scope is of the task's instance: its index narrows the search
            q.where += " AND v.process_instance_key = ?"
            q.params.append(int(instance))
        return await self._search(definition, q, truncate_values=truncate_values, scope=scope)

    async def _search(
        self,
        definition: Entity,
        request: dict[str, Any] | query.SqlQuery | None,
        *,
        truncate_values: bool,
        scope: Scope,
    ) -> dict[str, Any]:
        q = request if isinstance(request, query.SqlQuery) else query.build(definition, request)
        columns = definition.item_columns(truncate_values=truncate_values)
        allowed, allowed_params = visible(definition, scope)
        where = self._marks(f"({q.where}) AND {allowed}")
        params = [*q.params, *allowed_params]
        count_sql = f"SELECT COUNT(*) FROM {definition.source} WHERE {where}"
        select_sql = (
            f"SELECT {columns} FROM {definition.source} WHERE {where} ORDER BY {q.order_by} "
            f"LIMIT {int(q.limit)} OFFSET {int(q.offset)}"
        )
        total_rows, rows = await self._fetch_pair(count_sql, select_sql, params)
        items = await self._named([entities.item(definition, row) for row in rows], definition)
        return {
            "items": items,
            "page": {
                "totalItems": int(total_rows[0][0]),
                "startCursor": encode_cursor(q.offset) if items else None,
                "endCursor": encode_cursor(q.offset + len(items) - 1) if items else None,
            },
        }

    async def get(self, entity: str, key: str, *, scope: Scope = EVERYTHING) -> dict[str, Any] | None:
        """One item by its key (None when the history has none, or ``scope`` does not allow it)."""
        definition = _entity(entity)
        try:
            value = query.key_value(definition.key, key, definition.key.name)
        except InvalidQuery:
            return None
        columns = definition.item_columns(truncate_values=False)
        allowed, allowed_params = visible(definition, scope)
        sql = f"SELECT {columns} FROM {definition.source} WHERE {definition.key.sql} = ? AND {allowed}"
        rows = await self._query(sql, [value, *allowed_params])
        return (await self._named([entities.item(definition, rows[0])], definition))[0] if rows else None

    # -- identity: the members of groups, roles and tenants ---------------------------------------------------

    async def search_members(
        self,
        container_kind: str,
        container_id: str,
        member_type: str,
        request: dict[str, Any] | None,
        *,
        scope: Scope = EVERYTHING,
    ) -> dict[str, Any] | None:
        """The members of one type of a group, role or tenant: users, clients and groups by id; roles and mapping
        rules as whole items (those ``scope`` allows). None when the history has no such group, role or tenant, or
        ``scope`` does not allow reading it."""
        id_members = _ID_MEMBERS.get(member_type)
        definition = id_members or _ITEM_MEMBERS[member_type]
        q = query.build(definition, request)  # a bad request is a client error even for an unknown container
        if not await self._identity_exists(container_kind, container_id, scope):
            return None
        if id_members is not None:
            q.where = f"({q.where}) AND m.container_kind = ? AND m.container_id = ? AND m.member_type = ?"
        else:
            q.where = f"({q.where}) AND {definition.key.sql} IN ({_MEMBERS_OF})"
        q.params = [*q.params, container_kind, container_id, member_type]
        return await self._search(definition, q, truncate_values=True, scope=scope)

    async def search_containers(
        self,
        container_kind: str,
        member_type: str,
        member_id: str,
        request: dict[str, Any] | None,
        *,
        scope: Scope = EVERYTHING,
    ) -> dict[str, Any] | None:
        """The groups, roles or tenants of ``container_kind`` that a group or role is a member of (a group's roles),
        as whole items (those ``scope`` allows). None when the history has no such member, or ``scope`` does not
        allow reading it."""
        definition = _IDENTITY_ENTITIES[container_kind]
        q = query.build(definition, request)
        if not await self._identity_exists(member_type, member_id, scope):
            return None
        q.where = f"({q.where}) AND {definition.key.sql} IN ({_CONTAINERS_OF})"
        q.params = [*q.params, container_kind, member_type, member_id]
        return await self._search(definition, q, truncate_values=True, scope=scope)

    async def _identity_exists(self, kind: str, entity_id: str, scope: Scope) -> bool:
        definition = _IDENTITY_ENTITIES[kind]
        allowed, allowed_params = visible(definition, scope)
        sql = f"SELECT 1 FROM {definition.source} WHERE {definition.key.sql} = ? AND {allowed}"
        return bool(await self._query(sql, [entity_id, *allowed_params]))

    async def process_definition_xml(self, key: str, *, scope: Scope = EVERYTHING) -> str | None:
        """The BPMN XML of a process definition (None when unknown, or ``scope`` does not allow reading it)."""
        found = await self._definition(key, "d.bpmn_xml", scope)
        return found[0] if found else None

    async def _definition(self, key: Any, columns: str, scope: Scope) -> tuple[Any, ...] | None:
        """``columns`` (over ``d``) of a process definition the scope allows reading."""
        definition_key = _digits(key)
        if definition_key is None:
            return None
        allowed, allowed_params = visible(entities.PROCESS_DEFINITIONS, scope)
        rows = await self._query(
            f"SELECT {columns} FROM process_definitions d WHERE d.process_definition_key = ? AND {allowed}",
            [definition_key, *allowed_params],
        )
        return rows[0] if rows else None

    # -- what an instance view draws (Camunda 8.8 Operate reads) -------------------------------------------------

    async def _query(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """``sql`` written with ``?`` placeholders, run on either database."""
        return await self._fetch(self._marks(sql), params)

    async def process_definition_element_statistics(
        self, process_definition_key: str, request: dict[str, Any] | None, *, scope: Scope = EVERYTHING
    ) -> list[dict[str, Any]]:
        """Per element of a process definition: its element instances active (without an incident), canceled,
        with an active incident and completed, over the definition's instances that match ``request``'s filter
        (the fields of a process instance search) and that ``scope`` allows reading. None of an unknown
        definition, as Camunda's search answers."""
        q = query.build(entities.PROCESS_INSTANCES, request)  # a bad filter is a client error even for an unknown key
        definition = _digits(process_definition_key)
        if definition is None:
            return []
        allowed, allowed_params = visible(entities.PROCESS_INSTANCES, scope)
        instances = (
            f"SELECT p.process_instance_key FROM {entities.PROCESS_INSTANCES.source} "
            f"WHERE p.process_definition_key = ? AND ({q.where}) AND {allowed}"
        )
        params = [definition, *q.params, *allowed_params]
        return await self._element_statistics(f"e.process_instance_key IN ({instances})", params)

    async def process_instance_element_statistics(
        self, process_instance_key: str, *, scope: Scope = EVERYTHING
    ) -> list[dict[str, Any]]:
        """The element statistics of one process instance (none of an unknown instance, or one ``scope`` does not
        allow reading: the history may not have it yet, and Camunda's search answers so too)."""
        instance = await self._instance(process_instance_key, scope)
        if instance is None:
            return []
        return await self._element_statistics("e.process_instance_key = ?", [int(instance[0])])

    async def _element_statistics(self, where: str, params: list[Any]) -> list[dict[str, Any]]:
        # A multi-instance body shares its element id with its inner instances: only they are counted.
        sql = (
            "SELECT e.element_id, "
            "SUM(CASE WHEN e.state = 'ACTIVE' AND e.incident_key IS NULL THEN 1 ELSE 0 END), "
            "SUM(CASE WHEN e.state = 'TERMINATED' THEN 1 ELSE 0 END), "
            "SUM(CASE WHEN e.state = 'ACTIVE' AND e.incident_key IS NOT NULL THEN 1 ELSE 0 END), "
            "SUM(CASE WHEN e.state = 'COMPLETED' THEN 1 ELSE 0 END) "
            f"FROM element_instances e WHERE {where} AND e.type <> 'MULTI_INSTANCE_BODY' "
            "GROUP BY e.element_id ORDER BY e.element_id"
        )
        return [
            {
                "elementId": element_id,
                "active": int(active or 0),
                "canceled": int(canceled or 0),
                "incidents": int(incidents or 0),
                "completed": int(completed or 0),
            }
            for element_id, active, canceled, incidents, completed in await self._query(sql, params)
        ]

    async def _instance(self, process_instance_key: str, scope: Scope) -> tuple[Any, ...] | None:
        """(key, definition key, definition id, parent instance key, tenant) of an instance in the history that
        ``scope`` allows reading."""
        key = _digits(process_instance_key)
        if key is None:
            return None
        allowed, allowed_params = visible(entities.PROCESS_INSTANCES, scope)
        rows = await self._query(
            "SELECT p.process_instance_key, p.process_definition_key, p.process_definition_id, "
            "p.parent_process_instance_key, p.tenant_id FROM process_instances p "
            f"WHERE p.process_instance_key = ? AND {allowed}",
            [key, *allowed_params],
        )
        return rows[0] if rows else None

    async def call_hierarchy(
        self, process_instance_key: str, *, scope: Scope = EVERYTHING
    ) -> list[dict[str, Any]] | None:
        """The instance and the instances that called it, the root first, each with its process's name (its id
        when it has none). None when the history has no such instance, or ``scope`` does not allow reading it;
        the chain stops below a caller ``scope`` does not allow reading."""
        instance = await self._instance(process_instance_key, scope)
        if instance is None:
            return None
        chain: list[dict[str, Any]] = []
        current: tuple[Any, ...] | None = instance
        seen: set[int] = set()
        while current is not None and int(current[0]) not in seen:
            seen.add(int(current[0]))
            key, definition_key, definition_id, parent, _ = current
            names = await self._query(
                "SELECT name FROM process_definitions WHERE process_definition_key = ?", [definition_key]
            )
            chain.append(
                {
                    "processInstanceKey": str(key),
                    "processDefinitionKey": str(definition_key),
                    "processDefinitionName": (names[0][0] if names else None) or definition_id,
                }
            )
            current = await self._instance(str(parent), scope) if parent is not None else None
        chain.reverse()
        return chain

    async def sequence_flows(self, process_instance_key: str, *, scope: Scope = EVERYTHING) -> list[dict[str, Any]]:
        """The sequence flows the instance took, each once (none of an unknown instance, or one ``scope`` does not
        allow reading, as Camunda's search)."""
        hierarchy = await self.call_hierarchy(process_instance_key, scope=scope)
        if hierarchy is None:
            return []
        root = hierarchy[0]["processInstanceKey"]
        rows = await self._query(
            "SELECT sequence_flow_id, process_instance_key, process_definition_key, process_definition_id, "
            "element_id, tenant_id FROM sequence_flows WHERE process_instance_key = ? ORDER BY sequence_flow_id",
            [int(hierarchy[-1]["processInstanceKey"])],
        )
        return [
            {
                "sequenceFlowId": flow_id,
                "processInstanceKey": str(instance),
                "rootProcessInstanceKey": root,
                "processDefinitionKey": str(definition) if definition is not None else None,
                "processDefinitionId": definition_id,
                "elementId": element_id,
                "tenantId": tenant,
            }
            for flow_id, instance, definition, definition_id, element_id, tenant in rows
        ]

    async def search_instance_incidents(
        self, process_instance_key: str, request: dict[str, Any] | None, *, scope: Scope = EVERYTHING
    ) -> dict[str, Any] | None:
        """The incidents of an instance and of every instance it called (at any depth), searched as incidents are
        (those ``scope`` allows). None when the history has no such instance, or ``scope`` does not allow it."""
        q = query.build(entities.INCIDENTS, request)
        instance = await self._instance(process_instance_key, scope)
        if instance is None:
            return None
        tree = (
            "WITH RECURSIVE tree(k) AS (SELECT CAST(? AS BIGINT) UNION SELECT c.process_instance_key "
            "FROM process_instances c JOIN tree t ON c.parent_process_instance_key = t.k) SELECT k FROM tree"
        )
        keys = [int(k) for (k,) in await self._query(tree, [int(instance[0])])]
        marks = ", ".join("?" for _ in keys)
        q.where = f"({q.where}) AND i.process_instance_key IN ({marks})"
        q.params = [*q.params, *keys]
        return await self._search(entities.INCIDENTS, q, truncate_values=True, scope=scope)

    async def decision_requirements_xml(
        self, decision_requirements_key: str, *, scope: Scope = EVERYTHING
    ) -> str | None:
        """The DMN XML of a decision requirements graph (None when unknown or deleted, or ``scope`` does not allow
        reading it)."""
        key = _digits(decision_requirements_key)
        if key is None:
            return None
        allowed, allowed_params = visible(entities.DECISION_REQUIREMENTS, scope)
        rows = await self._query(
            "SELECT dr.dmn_xml FROM decision_requirements dr "
            f"WHERE dr.decision_requirements_key = ? AND dr.deleted = 0 AND {allowed}",
            [key, *allowed_params],
        )
        return rows[0][0] if rows else None

    async def decision_definition_xml(self, decision_definition_key: str, *, scope: Scope = EVERYTHING) -> str | None:
        """The DMN XML of the graph a decision is part of (None when unknown or deleted, or ``scope`` does not
        allow reading the decision)."""
        key = _digits(decision_definition_key)
        if key is None:
            return None
        allowed, allowed_params = visible(entities.DECISION_DEFINITIONS, scope)
        rows = await self._query(
            "SELECT dr.dmn_xml FROM decision_definitions dd JOIN decision_requirements dr "
            "ON dr.decision_requirements_key = dd.decision_requirements_key "
            f"WHERE dd.decision_definition_key = ? AND dd.deleted = 0 AND {allowed}",
            [key, *allowed_params],
        )
        return rows[0][0] if rows else None

    async def form(self, form_key: Any, *, scope: Scope = EVERYTHING) -> dict[str, Any] | None:
        """A deployed form by key: tenantId, formId, schema (its JSON as text), version, formKey. ``scope``'s
        tenants only: the form of a task or a start event is read with the task's or the process's permission."""
        key = _digits(form_key)
        if key is None:
            return None
        allowed, allowed_params = scope.condition(tenant="f.tenant_id")
        rows = await self._query(
            "SELECT f.tenant_id, f.form_id, f.form_schema, f.version, f.form_key FROM forms f "
            f"WHERE f.form_key = ? AND f.deleted = 0 AND {allowed}",
            [key, *allowed_params],
        )
        if not rows:
            return None
        tenant, form_id, form_schema, version, key = rows[0]
        return {"tenantId": tenant, "formId": form_id, "schema": form_schema, "version": version, "formKey": str(key)}

    async def user_task_form_key(self, user_task_key: str, *, scope: Scope = EVERYTHING) -> tuple[bool, int | None]:
        """Whether the history has the user task (and ``scope`` allows reading it), and the key of the form linked
        to it (None: none)."""
        key = _digits(user_task_key)
        if key is None:
            return False, None
        allowed, allowed_params = visible(entities.USER_TASKS, scope)
        rows = await self._query(
            f"SELECT t.form_key FROM user_tasks t WHERE t.user_task_key = ? AND {allowed}", [key, *allowed_params]
        )
        if not rows:
            return False, None
        return True, int(rows[0][0]) if rows[0][0] is not None else None

    async def start_form_key(
        self, process_definition_key: str, *, scope: Scope = EVERYTHING
    ) -> tuple[bool, int | None]:
        """Whether the history has the process definition (and ``scope`` allows reading it), and the key of the form
        linked to its start event (``zeebe:formDefinition formId``, resolved by its binding: latest, deployment or
        versionTag, in the process's tenant; None: none, or an embedded or external form)."""
        found = await self._definition(
            process_definition_key, "d.process_definition_id, d.bpmn_xml, d.deployment_key, d.tenant_id", scope
        )
        if found is None:
            return False, None
        process_id, xml, deployment_key, tenant = found
        link = start_form_link(xml, process_id)
        if link is None:
            return True, None
        form_id, binding, version_tag = link
        sql = "SELECT form_key FROM forms WHERE form_id = ? AND deleted = 0"
        params: list[Any] = [form_id]
        if tenant is not None:  # a process links the forms of its own tenant
            sql += " AND tenant_id = ?"
            params.append(tenant)
        if binding == "deployment":
            sql += " AND deployment_key = ?"
            params.append(deployment_key)
        elif binding == "versionTag":
            sql += " AND version_tag = ?"
            params.append(version_tag)
        forms = await self._query(f"{sql} ORDER BY version DESC LIMIT 1", params)
        return True, int(forms[0][0]) if forms else None

    async def resource(self, resource_key: str, *, scope: Scope = EVERYTHING) -> dict[str, Any] | None:
        """A deployed resource by key (a process, a decision requirements graph or a form): its ResourceResult
        fields, with ``kind`` and ``content`` (the deployed text). None when unknown, or ``scope`` does not allow
        reading it: a process needs READ_PROCESS_DEFINITION, a graph DECISION_REQUIREMENTS_DEFINITION READ, a form
        RESOURCE READ."""
        key = _digits(resource_key)
        if key is None:
            return None
        lookups = (
            (
                "bpmn",
                "SELECT d.resource_name, d.version, d.version_tag, d.process_definition_id, d.tenant_id, d.bpmn_xml "
                "FROM process_definitions d WHERE d.process_definition_key = ?",
                visible(entities.PROCESS_DEFINITIONS, scope),
            ),
            (
                "dmn",
                "SELECT dr.resource_name, dr.version, NULL, dr.decision_requirements_id, dr.tenant_id, dr.dmn_xml "
                "FROM decision_requirements dr WHERE dr.decision_requirements_key = ? AND dr.deleted = 0",
                visible(entities.DECISION_REQUIREMENTS, scope),
            ),
            (
                "form",
                "SELECT f.resource_name, f.version, f.version_tag, f.form_id, f.tenant_id, f.form_schema "
                "FROM forms f WHERE f.form_key = ? AND f.deleted = 0",
                scope.condition("f.tenant_id", _FORM_GUARD),
            ),
        )
        for kind, sql, (allowed, allowed_params) in lookups:
            rows = await self._query(f"{sql} AND {allowed}", [key, *allowed_params])
            if rows:
                name, version, tag, resource_id, tenant, content = rows[0]
                return {
                    "resourceName": name,
                    "version": version,
                    "versionTag": tag or None,
                    "resourceId": resource_id,
                    "tenantId": tenant,
                    "resourceKey": str(key),
                    "kind": kind,
                    "content": content,
                }
        return None

    async def close(self) -> None:
        raise NotImplementedError

    # -- element names from the BPMN ---------------------------------------------------------------------------

    async def _named(self, items: list[dict[str, Any]], definition: Entity) -> list[dict[str, Any]]:
        """Fill element names (records carry ids only) from the process definitions' BPMN, parsed once each; and
        whether a process definition's start event has a form."""
        if definition.name == "process-definitions" and items:
            await self._start_forms(items)
        field = _NAME_FIELDS.get(definition.name)
        if field is None or not items:
            return items
        wanted = {int(i["processDefinitionKey"]) for i in items if i.get("processDefinitionKey")}
        missing = sorted(wanted - self._names.keys())
        if missing:
            marks = ", ".join(self.placeholder for _ in missing)
            sql = (
                "SELECT process_definition_key, bpmn_xml FROM process_definitions "
                f"WHERE process_definition_key IN ({marks})"
            )
            if len(self._names) > _NAME_CACHE_SIZE:
                self._names.clear()
            for key, xml in await self._fetch(sql, missing):
                self._names[int(key)] = element_names(xml)
        for item in items:
            names = self._names.get(int(item["processDefinitionKey"] or 0), {})
            item[field] = names.get(item["elementId"]) or item["elementId"]
        return items

    async def _start_forms(self, items: list[dict[str, Any]]) -> None:
        """``hasStartForm``: the start event names a form (``zeebe:formDefinition`` with a formId or formKey)."""
        keys = sorted({int(i["processDefinitionKey"]) for i in items})
        known = {k for k in keys if k in self._start_form}
        missing = [k for k in keys if k not in known]
        if missing:
            if len(self._start_form) > _NAME_CACHE_SIZE:
                self._start_form.clear()
            marks = ", ".join("?" for _ in missing)
            sql = (
                "SELECT process_definition_key, process_definition_id, bpmn_xml FROM process_definitions "
                f"WHERE process_definition_key IN ({marks})"
            )
            for key, process_id, xml in await self._query(sql, missing):
                self._start_form[int(key)] = start_form_named(xml, process_id)
        for item in items:
            item["hasStartForm"] = self._start_form.get(int(item["processDefinitionKey"]), False)

    # -- per database --------------------------------------------------------------------------------------------

    def _marks(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("%", "%%").replace("?", self.placeholder)

    async def _fetch(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    async def _fetch_pair(
        self, first: str, second: str, params: list[Any]
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        return await self._fetch(first, params), await self._fetch(second, params)

    async def _ensure_schema(self, backend: Backend) -> None:
        if self._schema_ready:
            return

        def migrate() -> None:
            backend.connect()
            try:
                backend.migrate(_CLOCK_UNUSED)
            finally:
                backend.close()

        await asyncio.to_thread(migrate)
        self._schema_ready = True


class SqliteHistoryReader(HistoryReader):
    """Reads a SQLite history file from a worker thread (WAL: the exporter's writes never block it)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        path = sqlite_path(url)
        assert path is not None
        self.path = path
        self._connection: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None  # the file the connection has open
        self._lock = threading.Lock()

    async def _fetch(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        await self._ensure_schema(SqliteBackend(self.path))
        return (await asyncio.to_thread(self._run, [(sql, params)]))[0]

    async def _fetch_pair(
        self, first: str, second: str, params: list[Any]
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        await self._ensure_schema(SqliteBackend(self.path))
        a, b = await asyncio.to_thread(self._run, [(first, params), (second, params)])
        return a, b

    def _run(self, statements: list[tuple[str, list[Any]]]) -> list[list[tuple[Any, ...]]]:
        with self._lock:
            identity = file_identity(self.path)
            if self._connection is not None and identity != self._identity:
                # Deleted or replaced under us: the open connection would go on answering from the old file.
                _log.error("history database %s was deleted or replaced while searches read it", self.path)
                self._connection.close()
                self._connection = None
            if self._connection is None:
                if identity is None:  # connecting would create an empty database and answer searches with nothing
                    raise FileNotFoundError(
                        f"the history database {self.path} does not exist (deleted?); the history exporter writes a "
                        "new one from the broker's log"
                    )
                self._connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                self._connection.execute("PRAGMA busy_timeout=10000")
                self._identity = identity
            connection = self._connection
            connection.execute("BEGIN")  # one snapshot for the count and the page
            try:
                return [connection.execute(sql, params).fetchall() for sql, params in statements]
            finally:
                connection.execute("COMMIT")

    async def close(self) -> None:
        def close() -> None:
            with self._lock:
                if self._connection is not None:
                    self._connection.close()
                    self._connection = None

        await asyncio.to_thread(close)


class PostgresHistoryReader(HistoryReader):
    """Reads a PostgreSQL history through one async connection (reconnected when the server was restarted)."""

    placeholder = "%s"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._connection: Any = None
        self._lock = asyncio.Lock()

    async def _connect(self) -> Any:
        import psycopg

        if self._connection is None or self._connection.closed:
            self._connection = await psycopg.AsyncConnection.connect(self.url, autocommit=True, connect_timeout=5)
        return self._connection

    async def _fetch(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        return (await self._run([(sql, params)]))[0]

    async def _fetch_pair(
        self, first: str, second: str, params: list[Any]
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        a, b = await self._run([(first, params), (second, params)])
        return a, b

    async def _run(self, statements: list[tuple[str, list[Any]]]) -> list[list[tuple[Any, ...]]]:
        import psycopg

        await self._ensure_schema(PostgresBackend(self.url))
        async with self._lock:
            for attempt in (1, 2):
                connection = await self._connect()
                try:
                    results = []
                    async with connection.transaction(), connection.cursor() as cursor:
                        for sql, params in statements:
                            await cursor.execute(sql, params)
                            results.append(await cursor.fetchall())
                    return results
                except psycopg.OperationalError:
                    await self._drop()
                    if attempt == 2:
                        raise
            raise AssertionError("unreachable")

    async def _drop(self) -> None:
        if self._connection is not None:
            try:
                await self._connection.close()
            finally:
                self._connection = None

    async def close(self) -> None:
        async with self._lock:
            await self._drop()


def open_reader(url: str) -> HistoryReader:
    """A reader of the history at ``url`` (``sqlite:///abs/path/history.db`` or ``postgresql://…``)."""
    check_url(url)
    if sqlite_path(url) is not None:
        return SqliteHistoryReader(url)
    return PostgresHistoryReader(url)


def _digits(key: Any) -> int | None:
    """A key given as digits (or an int) as an int that fits a BIGINT; None otherwise."""
    text = str(key)
    if not text.isascii() or not text.isdigit() or len(text) > 19 or int(text) >= 2**63:
        return None
    return int(text)


def _entity(name: str) -> Entity:
    definition = entities.ENTITIES.get(name)
    if definition is None:
        raise InvalidQuery(f"unknown entity {name!r}; searchable: {', '.join(entities.ENTITIES)}")
    return definition
