"""What a caller may read of the history: a scope (tenants, grants, the user and its groups) is one more SQL condition
on every read, so totals and pages count only the rows it allows and lookups of other rows answer as for missing
ones. Over SQLite and PostgreSQL, on rows of two tenants and two processes written straight to the tables."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from exporters.history import schema
from exporters.history.backends import open_backend, upsert_sql
from exporters.history.reader import EVERYTHING, HistoryReader, Scope, open_reader
from gateway.caller import CALLER
from gateway.commands import CommandError, ErrorCode
from gateway.directory import CallerAccess, Directory
from gateway.rest.search import SearchRoutes

A, B = "team-a", "team-b"
PD = "PROCESS_DEFINITION"
#: (definition key, process id, tenant, instances)
DEFINITIONS = ((1, "pay", A, 3), (2, "ship", A, 2), (3, "pay", B, 3), (4, "ship", B, 1))
BPMN = (
    '<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" '
    'xmlns:zeebe="http://camunda.org/schema/zeebe/1.0"><bpmn:process id="{id}"><bpmn:startEvent id="start">'
    '<bpmn:extensionElements><zeebe:formDefinition formId="{id}-form"/></bpmn:extensionElements>'
    "</bpmn:startEvent></bpmn:process></bpmn:definitions>"
)


def _instances() -> list[tuple[int, int, str, str]]:
    """(instance key, definition key, process id, tenant) of every instance."""
    out = []
    for definition, process_id, tenant, count in DEFINITIONS:
        out += [(definition * 100 + n, definition, process_id, tenant) for n in range(count)]
    return out


def _rows() -> dict[schema.Table, list[dict[str, Any]]]:
    rows: dict[schema.Table, list[dict[str, Any]]] = {}

    def add(table: schema.Table, **row: Any) -> None:
        rows.setdefault(table, []).append(row)

    for key, process_id, tenant, _ in DEFINITIONS:
        add(schema.PROCESS_DEFINITIONS, process_definition_key=key, process_definition_id=process_id, version=1,
            tenant_id=tenant, bpmn_xml=BPMN.format(id=process_id), resource_name=f"{process_id}.bpmn")  # fmt: skip
        add(schema.FORMS, form_key=10 + key, form_id=f"{process_id}-form", version=1, tenant_id=tenant,
            form_schema="{}", deleted=0, resource_name="f.form")  # fmt: skip
    for key, definition, process_id, tenant in _instances():
        common = {"process_instance_key": key, "process_definition_key": definition, "tenant_id": tenant}
        add(schema.PROCESS_INSTANCES, **common, process_definition_id=process_id, state="ACTIVE", start_date=0,
            has_incident=1)  # fmt: skip
        add(schema.ELEMENT_INSTANCES, **common, element_instance_key=key * 10, process_definition_id=process_id,
            element_id="start", type="START_EVENT", state="COMPLETED", start_date=0)  # fmt: skip
        add(schema.VARIABLES, **common, variable_key=key * 10 + 1, name="x", value="1", scope_key=key)
        add(schema.INCIDENTS, **common, incident_key=key * 10 + 2, process_definition_id=process_id,
            element_id="start", state="ACTIVE", creation_time=0, error_type="IO_MAPPING_ERROR")  # fmt: skip
        add(schema.JOBS, **common, job_key=key * 10 + 3, process_definition_id=process_id, type="t",
            state="CREATED", retries=3)  # fmt: skip
        add(schema.SEQUENCE_FLOWS, **common, sequence_flow_id=f"{key}_f", process_definition_id=process_id,
            element_id="f")  # fmt: skip
    # user tasks of instance 100 (pay, team-a): assigned to ann, offered to ann, offered to her group, nobody's;
    # and one of instance 300 (pay, team-b) assigned to ann, a tenant she is not in
    for n, (assignee, users, groups) in enumerate(
        (("ann", None, None), ("", '["ann", "bob"]', None), ("", None, '["clerks"]'), ("bob", '["bob"]', '["x"]'))
    ):
        add(schema.USER_TASKS, user_task_key=5000 + n, element_id="task", element_instance_key=100 * 10,
            process_instance_key=100, process_definition_key=1, process_definition_id="pay", state="CREATED",
            assignee=assignee, candidate_users=users, candidate_groups=groups, tenant_id=A,
            creation_date=0)  # fmt: skip
    add(schema.USER_TASKS, user_task_key=5009, element_id="task", element_instance_key=300 * 10,
        process_instance_key=300, process_definition_key=3, process_definition_id="pay", state="CREATED",
        assignee="ann", tenant_id=B, creation_date=0)  # fmt: skip
    for key, tenant in ((71, A), (72, B)):
        add(schema.DECISION_REQUIREMENTS, decision_requirements_key=key, decision_requirements_id=f"drg-{tenant}",
            version=1, tenant_id=tenant, dmn_xml="<definitions/>", deleted=0)  # fmt: skip
        add(schema.DECISION_DEFINITIONS, decision_definition_key=key + 10, decision_definition_id=f"rule-{tenant}",
            version=1, decision_requirements_key=key, tenant_id=tenant, deleted=0)  # fmt: skip
        add(schema.DECISION_INSTANCES, decision_evaluation_instance_key=f"{key + 20}-1",
            decision_evaluation_key=key + 20, decision_definition_key=key + 10,
            decision_definition_id=f"rule-{tenant}", state="EVALUATED", evaluation_date=0,
            tenant_id=tenant)  # fmt: skip
    for key in (91, 92):
        add(schema.BATCH_OPERATIONS, batch_operation_key=key, batch_operation_type="CANCEL_PROCESS_INSTANCE",
            state="ACTIVE", start_date=0, items_count=1)  # fmt: skip
        add(schema.BATCH_OPERATION_ITEMS, batch_operation_item_id=f"{key}-100", batch_operation_key=key,
            item_key=100, process_instance_key=100, state="ACTIVE")  # fmt: skip
    for group in ("clerks", "admins"):
        add(schema.GROUPS, group_id=group, group_key=len(group), name=group, description="")
    return rows


@pytest.fixture
async def reader(history_url: str) -> AsyncIterator[HistoryReader]:
    backend = open_backend(history_url)
    backend.connect()
    try:
        backend.migrate(0)
        with backend.transaction() as cursor:
            for table, rows in _rows().items():
                sql = upsert_sql(table, backend.placeholder)
                for row in rows:
                    cursor.execute(sql, [row.get(c) for c in table.columns])
    finally:
        backend.close()
    r = open_reader(history_url)
    try:
        yield r
    finally:
        await r.close()


def tenants(*ids: str) -> frozenset[str]:
    return frozenset({*ids, "<default>"})


async def total(reader: HistoryReader, entity: str, scope: Scope, request: dict[str, Any] | None = None) -> int:
    return int((await reader.search(entity, request or {}, scope=scope))["page"]["totalItems"])


async def test_tenants_cut_totals_pages_and_lookups(reader: HistoryReader) -> None:
    team_a = Scope(tenants=tenants(A))
    assert await total(reader, "process-instances", EVERYTHING) == 9
    assert await total(reader, "process-instances", team_a) == 5
    seen: list[str] = []
    page: dict[str, Any] = {"limit": 2}
    while True:
        found = await reader.search("process-instances", {"page": page}, scope=team_a)
        assert found["page"]["totalItems"] == 5, "every page counts the caller's rows only"
        if not found["items"]:
            break
        seen += [i["processInstanceKey"] for i in found["items"] if i["tenantId"] == A]
        page = {"limit": 2, "after": found["page"]["endCursor"]}
    assert sorted(seen) == ["100", "101", "102", "200", "201"], "the pages hold every team-a instance, once"
    for entity in ("element-instances", "variables", "incidents", "jobs", "process-definitions"):
        items = (await reader.search(entity, {}, scope=team_a))["items"]
        assert items and {i["tenantId"] for i in items} == {A}, entity
    assert await total(reader, "decision-definitions", team_a) == 1
    assert await total(reader, "decision-instances", team_a) == 1
    assert await total(reader, "decision-requirements", team_a) == 1
    # a filter naming the other tenant finds nothing; an $or cannot reach past the scope
    assert await total(reader, "process-instances", team_a, {"filter": {"tenantId": B}}) == 0
    either = {"filter": {"$or": [{"tenantId": B}, {"processDefinitionId": "pay"}]}}
    assert await total(reader, "process-instances", team_a, either) == 3

    assert await reader.get("process-instances", "300", scope=team_a) is None
    assert await reader.get("process-instances", "300", scope=Scope(tenants=tenants(B))) is not None
    assert await reader.get("process-instances", "100", scope=team_a) is not None
    assert await reader.process_definition_xml("3", scope=team_a) is None
    assert await reader.process_definition_xml("1", scope=team_a) is not None
    assert await reader.sequence_flows("300", scope=team_a) == []
    assert len(await reader.sequence_flows("100", scope=team_a)) == 1
    assert await reader.call_hierarchy("300", scope=team_a) is None
    assert await reader.process_instance_element_statistics("300", scope=team_a) == []
    assert await reader.process_definition_element_statistics("3", {}, scope=team_a) == []
    assert (await reader.process_definition_element_statistics("1", {}, scope=team_a))[0]["completed"] == 3
    assert await reader.search_instance_incidents("300", {}, scope=team_a) is None
    assert await reader.start_form_key("3", scope=team_a) == (False, None)
    assert await reader.start_form_key("1", scope=team_a) == (True, 11), "the form of the process's own tenant"
    assert await reader.start_form_key("3", scope=EVERYTHING) == (True, 13)
    assert await reader.form(13, scope=team_a) is None and await reader.form(11, scope=team_a) is not None
    assert await reader.resource("3", scope=team_a) is None and await reader.resource("1", scope=team_a)
    assert await reader.resource("72", scope=team_a) is None and await reader.resource("71", scope=team_a)
    assert await reader.decision_requirements_xml("72", scope=team_a) is None
    assert await reader.decision_definition_xml("82", scope=team_a) is None
    assert await reader.decision_definition_xml("81", scope=team_a) is not None
    assert await reader.user_task_form_key("5009", scope=team_a) == (False, None)


async def test_grants_cut_by_process_and_permission(reader: HistoryReader) -> None:
    pay_instances = Scope(tenants=tenants(A), grants=frozenset({(PD, "pay", "READ_PROCESS_INSTANCE")}))
    assert await total(reader, "process-instances", pay_instances) == 3, "pay in team-a, not team-b's pay"
    for entity in ("element-instances", "variables", "incidents", "jobs"):
        items = await reader.search(entity, {"page": {"limit": 1}}, scope=pay_instances)
        assert items["page"]["totalItems"] == 3, entity
    assert await total(reader, "process-definitions", pay_instances) == 0, "READ_PROCESS_DEFINITION is another one"
    assert await reader.process_definition_xml("1", scope=pay_instances) is None
    assert await reader.get("process-instances", "200", scope=pay_instances) is None, "ship: no grant"
    assert await reader.sequence_flows("200", scope=pay_instances) == []
    assert await total(reader, "user-tasks", pay_instances) == 0, "READ_USER_TASK is another one"

    everything_of_b = Scope(tenants=tenants(B), grants=frozenset({(PD, "*", "READ_PROCESS_INSTANCE")}))
    assert await total(reader, "process-instances", everything_of_b) == 4
    definitions = Scope(tenants=tenants(A, B), grants=frozenset({(PD, "ship", "READ_PROCESS_DEFINITION")}))
    assert await total(reader, "process-definitions", definitions) == 2
    assert await reader.start_form_key("1", scope=definitions) == (False, None)

    nothing = Scope(tenants=tenants(A, B), grants=frozenset())
    for entity in ("process-instances", "decision-definitions", "decision-instances", "decision-requirements",
                   "batch-operations", "batch-operation-items", "groups"):  # fmt: skip
        assert await total(reader, entity, nothing) == 0, entity
    decisions = Scope(
        tenants=tenants(A, B),
        grants=frozenset(
            {
                ("DECISION_DEFINITION", "rule-team-b", "READ_DECISION_INSTANCE"),
                ("DECISION_REQUIREMENTS_DEFINITION", "*", "READ"),
                ("BATCH", "92", "READ"),
                ("GROUP", "clerks", "READ"),
            }
        ),
    )
    assert [i["tenantId"] for i in (await reader.search("decision-instances", {}, scope=decisions))["items"]] == [B]
    assert await total(reader, "decision-definitions", decisions) == 0
    assert await total(reader, "decision-requirements", decisions) == 2
    assert await reader.get("batch-operations", "91", scope=decisions) is None
    assert await reader.get("batch-operations", "92", scope=decisions) is not None
    assert await total(reader, "batch-operation-items", decisions) == 1
    assert [g["groupId"] for g in (await reader.search("groups", {}, scope=decisions))["items"]] == ["clerks"]
    assert await reader.get("groups", "admins", scope=decisions) is None
    assert await reader.search_members("GROUP", "admins", "USER", {}, scope=decisions) is None
    assert await reader.search_members("GROUP", "clerks", "USER", {}, scope=decisions) is not None


async def test_a_user_reads_the_tasks_assigned_or_offered_to_it_in_its_tenants(reader: HistoryReader) -> None:
    ann = Scope(tenants=tenants(A), grants=frozenset(), username="ann", groups=frozenset({"clerks"}))
    found = await reader.search("user-tasks", {"sort": [{"field": "userTaskKey"}]}, scope=ann)
    assert [t["userTaskKey"] for t in found["items"]] == ["5000", "5001", "5002"], "assigned, as user, as group"
    assert found["page"]["totalItems"] == 3
    assert await reader.get("user-tasks", "5003", scope=ann) is None, "offered to others only"
    assert await reader.get("user-tasks", "5009", scope=ann) is None, "assigned to her in a tenant not hers"
    assert await reader.user_task_form_key("5001", scope=ann) == (True, None)
    assert await reader.search_user_task_variables("5003", {}, scope=ann) is None
    variables = await reader.search_user_task_variables("5002", {}, scope=ann)
    assert variables is not None and [v["name"] for v in variables["items"]] == ["x"]
    alone = Scope(tenants=tenants(A), grants=frozenset(), username="ann")
    assert await total(reader, "user-tasks", alone) == 2, "without the group"
    reads_tasks = Scope(tenants=tenants(A), grants=frozenset({(PD, "pay", "READ_USER_TASK")}), username="ann")
    assert await total(reader, "user-tasks", reads_tasks) == 4
    # authorizations off: a user reads every task of its tenants
    assert await total(reader, "user-tasks", Scope(tenants=tenants(A), username="ann")) == 4


def test_a_callers_access_becomes_its_scope() -> None:
    grants = frozenset({(PD, "pay", "READ_PROCESS_INSTANCE")})
    off = CallerAccess(False, False, frozenset(), frozenset())
    assert off.scope() == EVERYTHING
    tenants_only = CallerAccess(True, False, frozenset({A}), grants, "ann", frozenset({"clerks"}))
    assert tenants_only.scope() == Scope(tenants=tenants(A), username="ann", groups=frozenset({"clerks"}))
    both = CallerAccess(True, True, frozenset({A}), grants, "ann")
    assert both.scope() == Scope(tenants=tenants(A), grants=grants, username="ann")


class _Identity:
    """An identity source answering for ann: team-a, one grant, the clerks group."""

    async def identity(self, caller: dict[str, Any], *, password: bool = False) -> dict[str, Any]:
        return {
            "authorizationsEnabled": True,
            "tenants": [{"tenantId": A, "name": A, "description": ""}],
            "grants": [[PD, "pay", "READ_PROCESS_INSTANCE"]],
            "user": {"username": caller["username"], "name": "", "email": ""},
            "groups": ["clerks"],
            "roles": [],
        }


async def test_the_gateway_reads_within_the_callers_scope_and_refuses_when_it_cannot_tell() -> None:
    assert await SearchRoutes(None, setting="s").scope() == EVERYTHING, "authentication off: everything"
    routes = SearchRoutes(None, setting="s", directory=Directory(_Identity()), authentication=True)
    token = CALLER.set({"username": "ann"})
    try:
        scope = await routes.scope()
        assert scope == Scope(
            tenants=tenants(A),
            grants=frozenset({(PD, "pay", "READ_PROCESS_INSTANCE")}),
            username="ann",
            groups=frozenset({"clerks"}),
        )
        with pytest.raises(CommandError) as refused:
            await SearchRoutes(None, setting="s", authentication=True).scope()
        assert refused.value.code == ErrorCode.UNAVAILABLE, "no directory: no unfiltered answer"
    finally:
        CALLER.reset(token)
    with pytest.raises(CommandError) as anonymous:
        await routes.scope()
    assert anonymous.value.code == ErrorCode.UNAUTHENTICATED
