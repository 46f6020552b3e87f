"""The history reader: v2 searches (filters, advanced operators, sort, cursor paging), lookups by key and clear
errors for requests it cannot answer, over SQLite and PostgreSQL histories of a real partition's records."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from broker.protocol.enums import RecordType, ValueType
from broker.protocol.record import Record
from exporters.history import schema
from exporters.history.backends import open_backend
from exporters.history.reader import HistoryReader, InvalidQuery, open_reader, start_form_link, start_form_named
from exporters.history.rows import Batch
from tests.exporters.conftest import fresh_database
from tests.exporters.history_check import expected_history
from tests.exporters.scenario import run_scenario
from tests.exporters.test_history_exporter import export_all, record_log


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[Record]:
    return asyncio.run(run_scenario(tmp_path_factory.mktemp("partition"), instances=4))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, records: list[Record]) -> str:
    """The scenario's records exported once per backend for the module: the tests of ``reader`` only read."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('history') / 'history.db'}"
    else:
        url = fresh_database(request.getfixturevalue("postgres"))
    asyncio.run(export_all(record_log(records), url, records[-1].position))
    return url


@pytest.fixture
async def reader(exported: str) -> Any:
    r = open_reader(exported)
    try:
        yield r
    finally:
        await r.close()


async def keys(reader: HistoryReader, entity: str, request: dict[str, Any], key: str) -> list[str]:
    return [item[key] for item in (await reader.search(entity, request))["items"]]


async def test_items_have_the_v2_shapes(reader: HistoryReader, records: list[Record]) -> None:
    expected = expected_history(records)
    result = await reader.search("process-instances", {})
    assert result["page"]["totalItems"] == len(expected.instances) == len(result["items"])
    item = next(i for i in result["items"] if i["state"] == "COMPLETED")
    assert set(item) >= {
        "processInstanceKey",
        "processDefinitionId",
        "processDefinitionName",
        "startDate",
        "hasIncident",
    }
    assert isinstance(item["processInstanceKey"], str) and item["processInstanceKey"].isdigit()
    assert item["startDate"] == "2023-11-14T22:13:20.000Z" and item["endDate"] == item["startDate"]
    assert item["processDefinitionName"] == "One task" and item["parentProcessInstanceKey"] is None
    assert {i["state"] for i in result["items"]} == {"ACTIVE", "COMPLETED", "TERMINATED"}

    incident = (await reader.search("incidents", {}))["items"][0]
    assert incident["errorType"] == "JOB_NO_RETRIES" and incident["state"] == "ACTIVE"
    assert incident["jobKey"].isdigit() and incident["errorMessage"] == "boom"
    flagged = await reader.get("process-instances", incident["processInstanceKey"])
    assert flagged is not None and flagged["hasIncident"] is True and flagged["state"] == "ACTIVE"
    element = await reader.get("element-instances", incident["elementInstanceKey"])
    assert element is not None and element["incidentKey"] == incident["incidentKey"] and element["hasIncident"]
    assert element["type"] == "SERVICE_TASK" and element["state"] == "ACTIVE" and element["endDate"] is None

    variable = (await reader.search("variables", {"filter": {"name": "order"}, "page": {"limit": 1}}))["items"][0]
    assert json.loads(variable["value"]) == {"id": "o-0", "lines": [1, 2]} and variable["isTruncated"] is False

    job = (await reader.search("jobs", {"filter": {"state": "FAILED"}}))["items"][0]
    assert job["retries"] == 0 and job["worker"] == "exporter-test" and job["kind"] == "BPMN_ELEMENT"

    decisions = await reader.search("decision-instances", {"sort": [{"field": "decisionEvaluationInstanceKey"}]})
    first = decisions["items"][0]
    assert first["decisionEvaluationInstanceKey"].endswith("-1") and first["decisionDefinitionType"] == "DECISION_TABLE"
    assert {i["state"] for i in decisions["items"]} == {"EVALUATED", "FAILED"}

    definition = (await reader.search("process-definitions", {}))["items"][0]
    assert definition["processDefinitionId"] == "one-task" and definition["version"] == 1
    xml = await reader.process_definition_xml(definition["processDefinitionKey"])
    assert xml is not None and "<bpmn:process" in xml
    assert await reader.process_definition_xml("1") is None
    assert await reader.get("process-instances", "12345") is None
    assert await reader.get("process-instances", "not-a-key") is None
    tasks = (await reader.search("user-tasks", {"sort": [{"field": "userTaskKey"}]}))["items"]
    assert [(t["state"], t["assignee"] or "") for t in tasks] == [
        expected.user_tasks[k] for k in sorted(expected.user_tasks)
    ]
    native = tasks[0]
    assert native["elementId"] == "approve" and native["candidateGroups"] == ["sales", "ops"]
    assert native["name"] == "Approve the order", "the element's name from the BPMN"
    element = await reader.get("element-instances", native["elementInstanceKey"])
    assert element is not None and element["elementName"] == "Approve the order"
    assert native["candidateUsers"] == ["ann"] and native["customHeaders"] == {"department": "sales"}
    assert native["processDefinitionId"] == "user-task-native" and native["creationDate"].endswith("Z")
    by_group = {"filter": {"candidateGroup": "ops", "state": "COMPLETED"}}
    assert [t["userTaskKey"] for t in (await reader.search("user-tasks", by_group))["items"]] == [native["userTaskKey"]]


async def test_filters(reader: HistoryReader, records: list[Record]) -> None:
    expected = expected_history(records)
    active = sorted(str(k) for k, s in expected.instances.items() if s == "ACTIVE")
    pi = "process-instances"
    assert sorted(await keys(reader, pi, {"filter": {"state": "ACTIVE"}}, "processInstanceKey")) == active
    assert sorted(await keys(reader, pi, {"filter": {"state": {"$eq": "ACTIVE"}}}, "processInstanceKey")) == active
    assert sorted(await keys(reader, pi, {"filter": {"endDate": {"$exists": False}}}, "processInstanceKey")) == active
    others = await keys(reader, pi, {"filter": {"state": {"$neq": "ACTIVE"}}}, "processInstanceKey")
    assert len(others) == len(expected.instances) - len(active)
    chosen = sorted(str(k) for k in expected.instances)[:2]
    assert (
        sorted(await keys(reader, pi, {"filter": {"processInstanceKey": {"$in": chosen}}}, "processInstanceKey"))
        == chosen
    )
    assert await keys(reader, pi, {"filter": {"processInstanceKey": chosen[0]}}, "processInstanceKey") == chosen[:1]
    assert len(await keys(reader, pi, {"filter": {"hasIncident": True}}, "processInstanceKey")) == 1
    assert await keys(reader, pi, {"filter": {"startDate": {"$gt": "2023-11-14T22:13:20Z"}}}, "state") == []
    dated = {"startDate": {"$gte": "2023-11-14T22:13:20.000Z", "$lt": "2023-11-14T22:13:21+00:00"}}
    assert len(await keys(reader, pi, {"filter": dated}, "state")) == len(expected.instances)
    assert len(await keys(reader, pi, {"filter": {"processDefinitionName": {"$like": "One*"}}}, "state")) == 5
    assert await keys(reader, pi, {"filter": {"processDefinitionId": {"$like": "one?tas"}}}, "state") == []
    alternatives = {"$or": [{"state": "TERMINATED"}, {"hasIncident": True}]}
    assert sorted(await keys(reader, pi, {"filter": alternatives}, "state")) == ["ACTIVE", "TERMINATED"]
    by_variable = {"variables": [{"name": "i", "value": "2"}]}
    (with_two,) = await keys(reader, pi, {"filter": by_variable}, "processInstanceKey")
    assert (
        json.loads(
            (await reader.search("variables", {"filter": {"processInstanceKey": with_two, "name": "order"}}))["items"][
                0
            ]["value"]
        )["id"]
        == "o-2"
    )
    names = await keys(reader, "variables", {"filter": {"name": {"$like": "or*"}}}, "name")
    assert names and set(names) == {"order"}
    assert await keys(reader, "variables", {"filter": {"name": {"$in": ["late", "x"]}}}, "name") in (
        ["late", "x"],
        ["x", "late"],
    )
    elements = await keys(
        reader, "element-instances", {"filter": {"type": "SERVICE_TASK", "state": "TERMINATED"}}, "elementId"
    )
    assert elements == ["task"]
    jobs = await keys(reader, "jobs", {"filter": {"retries": {"$lt": 1}}}, "state")
    assert jobs == ["FAILED"]


async def test_sort_and_cursor_paging(reader: HistoryReader, records: list[Record]) -> None:
    expected = expected_history(records)
    ordered = sorted(expected.variables)
    descending = await keys(reader, "variables", {"sort": [{"field": "variableKey", "order": "DESC"}]}, "variableKey")
    assert descending == [str(k) for k in reversed(ordered)]
    by_name = await keys(
        reader, "variables", {"sort": [{"field": "name"}, {"field": "variableKey", "order": "DESC"}]}, "name"
    )
    assert by_name == sorted(by_name)

    first = await reader.search("variables", {"page": {"limit": 3}})
    assert [i["variableKey"] for i in first["items"]] == [str(k) for k in ordered[:3]]
    assert first["page"]["totalItems"] == len(ordered)
    second = await reader.search("variables", {"page": {"limit": 3, "after": first["page"]["endCursor"]}})
    assert [i["variableKey"] for i in second["items"]] == [str(k) for k in ordered[3:6]]
    back = await reader.search("variables", {"page": {"limit": 3, "before": second["page"]["startCursor"]}})
    assert back["items"] == first["items"]
    skipped = await reader.search("variables", {"page": {"limit": 2, "from": 4}})
    assert [i["variableKey"] for i in skipped["items"]] == [str(k) for k in ordered[4:6]]
    empty = await reader.search("variables", {"filter": {"name": "nothing"}})
    assert empty == {"items": [], "page": {"totalItems": 0, "startCursor": None, "endCursor": None}}


@pytest.mark.parametrize(
    ("entity", "request_", "message"),
    [
        (
            "process-instances",
            {"filter": {"colour": "red"}},
            "filter.colour: unknown filter field for process-instances; allowed: $or, businessId, endDate",
        ),
        (
            "variables",
            {"sort": [{"field": "colour"}]},
            "sort[0].field: unknown sort field 'colour' for variables; allowed: name, processInstanceKey",
        ),
        ("variables", {"sort": [{"field": "name", "order": "UP"}]}, "sort[0].order: expected ASC or DESC"),
        (
            "variables",
            {"filter": {"name": {"$gt": "a"}}},
            "unknown operator '$gt'; allowed: $eq, $neq, $exists, $in, $notIn, $like",
        ),
        ("variables", {"filter": {"variableKey": "abc"}}, "filter.variableKey: expected a key"),
        (
            "process-instances",
            {"filter": {"startDate": "yesterday"}},
            "filter.startDate: expected an ISO-8601 date-time",
        ),
        ("process-instances", {"filter": {"hasIncident": "yes"}}, "filter.hasIncident: expected true or false"),
        ("variables", {"page": {"limit": 0}}, "page.limit: expected an integer from 1 to 10000"),
        ("variables", {"page": {"after": "garbage"}}, "page.after: not a cursor of this search"),
        ("variables", {"page": {"from": 1, "after": "x"}}, "page: from and after cannot be combined"),
        ("variables", {"query": {}}, "unknown search request field(s) query; allowed: filter, page, sort"),
        ("instances", {}, "unknown entity 'instances'; searchable: process-definitions, process-instances"),
    ],
)
async def test_requests_it_cannot_answer_raise_invalid_query(
    reader: HistoryReader, entity: str, request_: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidQuery) as info:
        await reader.search(entity, request_)
    assert message in str(info.value)


# -- long variable values and the variables a user task sees -----------------------------------------------------

_PREVIEW = 8191  # Camunda's variable size threshold


def _write_rows(url: str, rows: dict[str, list[dict[str, Any]]], incident_instances: set[int] | None = None) -> None:
    """Rows written as the exporter writes them (one batch, one transaction), then the incident flags of
    ``incident_instances`` recomputed as after a batch with incident events of those instances."""
    backend = open_backend(url)
    backend.connect()
    try:
        backend.migrate(0)
        batch = Batch()
        for table, table_rows in rows.items():
            key = schema.TABLES_BY_NAME[table].key
            batch.rows[table] = {row[key]: row for row in table_rows}
        batch.incident_instances = set(incident_instances or ())
        backend.write(batch, 1)
    finally:
        backend.close()


@pytest.fixture
async def scoped_reader(history_url: str) -> Any:
    """Instance 10 → subprocess 11 → user task element 12 (task 20); element 13 is a sibling of 11. Variables:
    1 (long) at 10, 2 at 11, 3 at 12, 4 at 13, 5 (exactly the preview length) at 10, 6 ("x" shadowing 1) at 12."""

    def variable(key: int, name: str, value: str, scope: int) -> dict[str, Any]:
        return {"variable_key": key, "name": name, "value": value, "scope_key": scope, "process_instance_key": 10}

    def element(key: int, scope: int) -> dict[str, Any]:
        return {"element_instance_key": key, "process_instance_key": 10, "flow_scope_key": scope, "state": "ACTIVE"}

    _write_rows(
        history_url,
        {
            "process_instances": [{"process_instance_key": 10, "state": "ACTIVE"}],
            "element_instances": [element(11, 10), element(12, 11), element(13, 10)],
            "user_tasks": [{"user_task_key": 20, "element_instance_key": 12, "process_instance_key": 10}],
            "variables": [
                variable(1, "x", json.dumps("é" * 9000), 10),  # 9002 characters, more bytes in UTF-8
                variable(2, "sub", "2", 11),
                variable(3, "task", "3", 12),
                variable(4, "sibling", "4", 13),
                variable(5, "edge", json.dumps("a" * (_PREVIEW - 2)), 10),
                variable(6, "x", '"inner"', 12),
            ],
        },
    )
    r = open_reader(history_url)
    try:
        yield r
    finally:
        await r.close()


def _by_key(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["variableKey"]: item for item in result["items"]}


async def test_searches_truncate_long_variable_values_and_get_returns_them_whole(scoped_reader: HistoryReader) -> None:
    full = json.dumps("é" * 9000)
    found = _by_key(await scoped_reader.search("variables", {}))
    assert found["1"]["value"] == full[:_PREVIEW] and found["1"]["isTruncated"] is True
    assert len(found["5"]["value"]) == _PREVIEW and found["5"]["isTruncated"] is False, "at the limit: whole"
    assert found["2"] == {**found["2"], "value": "2", "isTruncated": False}

    whole = _by_key(await scoped_reader.search("variables", {}, truncate_values=False))
    assert whole["1"]["value"] == full and whole["1"]["isTruncated"] is False
    assert {k: v for k, v in whole.items() if k != "1"} == {k: v for k, v in found.items() if k != "1"}

    item = await scoped_reader.get("variables", "1")
    assert item is not None and item["value"] == full and item["isTruncated"] is False
    # Filters and sort see the whole value, whatever the item shows.
    assert [
        i["variableKey"] for i in (await scoped_reader.search("variables", {"filter": {"value": full}}))["items"]
    ] == ["1"]


async def test_user_task_variables_are_those_of_its_scopes(scoped_reader: HistoryReader) -> None:
    result = await scoped_reader.search_user_task_variables("20", {"sort": [{"field": "variableKey"}]})
    assert result is not None and result["page"]["totalItems"] == 5
    assert [i["variableKey"] for i in result["items"]] == ["1", "2", "3", "5", "6"], "not the sibling scope's 4"
    assert result["items"][0]["isTruncated"] is True and len(result["items"][0]["value"]) == _PREVIEW
    whole = await scoped_reader.search_user_task_variables("20", {"filter": {"name": "x"}}, truncate_values=False)
    assert whole is not None and sorted((i["scopeKey"], i["value"]) for i in whole["items"]) == [
        ("10", json.dumps("é" * 9000)),
        ("12", '"inner"'),
    ]
    paged = await scoped_reader.search_user_task_variables("20", {"sort": [{"field": "name"}], "page": {"limit": 2}})
    assert paged is not None and [i["name"] for i in paged["items"]] == ["edge", "sub"]
    assert await scoped_reader.search_user_task_variables("21", {}) is None
    assert await scoped_reader.search_user_task_variables("not-a-key", {}) is None
    with pytest.raises(InvalidQuery) as info:
        await scoped_reader.search_user_task_variables("20", {"filter": {"scopeKey": "10"}})
    assert "filter.scopeKey: unknown filter field for user-task-variables; allowed: $or, name" in str(info.value)


async def test_has_incident_covers_the_instances_an_instance_called(history_url: str) -> None:
    """1 calls 2, which calls 3; 4 stands alone. An incident in 3 flags 1, 2 and 3 (item and filter); another one
    in 2 keeps 1 and 2 flagged once the one in 3 is resolved; resolving that one too clears them all."""

    def instance(key: int, caller: int | None) -> dict[str, Any]:
        return {"process_instance_key": key, "parent_process_instance_key": caller, "state": "ACTIVE"}

    def incident(key: int, instance: int, state: str) -> dict[str, Any]:
        return {"incident_key": key, "process_instance_key": instance, "state": state}

    instances = [instance(1, None), instance(2, 1), instance(3, 2), instance(4, None)]
    reader = open_reader(history_url)

    async def flagged() -> list[str]:
        found = await reader.search("process-instances", {"filter": {"hasIncident": True}})
        items = (await reader.search("process-instances", {"sort": [{"field": "processInstanceKey"}]}))["items"]
        assert sorted(i["processInstanceKey"] for i in found["items"]) == [
            i["processInstanceKey"] for i in items if i["hasIncident"]
        ]
        return sorted(i["processInstanceKey"] for i in found["items"])

    try:
        _write_rows(history_url, {"process_instances": instances, "incidents": [incident(30, 3, "ACTIVE")]}, {3})
        assert await flagged() == ["1", "2", "3"]
        _write_rows(history_url, {"incidents": [incident(20, 2, "ACTIVE"), incident(30, 3, "RESOLVED")]}, {2, 3})
        assert await flagged() == ["1", "2"]
        _write_rows(history_url, {"incidents": [incident(20, 2, "RESOLVED")]}, {2})
        assert await flagged() == []
    finally:
        await reader.close()


# -- what an instance view draws -------------------------------------------------------------------------------


def _events(records: list[Record], value_type: ValueType, intent: str) -> list[Record]:
    return [
        r
        for r in records
        if r.record_type == RecordType.EVENT and r.value_type == value_type and r.intent_enum.name == intent
    ]


async def test_element_statistics_flows_hierarchy_and_incidents(reader: HistoryReader, records: list[Record]) -> None:
    """The scenario's one-task instances: three completed, one failed into an incident, one canceled."""
    [definition] = [
        r.key for r in _events(records, ValueType.PROCESS, "CREATED") if r.value["bpmnProcessId"] == "one-task"
    ]
    statistics = await reader.process_definition_element_statistics(str(definition), None)
    assert {s["elementId"]: (s["active"], s["canceled"], s["incidents"], s["completed"]) for s in statistics} == {
        "start": (0, 0, 0, 5),
        "task": (0, 1, 1, 3),
        "end": (0, 0, 0, 3),
    }
    terminated = await reader.process_definition_element_statistics(
        str(definition), {"filter": {"state": "TERMINATED"}}
    )
    assert {s["elementId"]: s["canceled"] for s in terminated} == {"start": 0, "task": 1}
    assert await reader.process_definition_element_statistics("99", None) == []
    with pytest.raises(InvalidQuery):
        await reader.process_definition_element_statistics(str(definition), {"filter": {"nope": 1}})

    [incident] = _events(records, ValueType.INCIDENT, "CREATED")
    failed = str(incident.value["processInstanceKey"])
    assert [(s["elementId"], s["incidents"]) for s in await reader.process_instance_element_statistics(failed)] == [
        ("start", 0),
        ("task", 1),
    ]
    found = await reader.search_instance_incidents(failed, {})
    assert found is not None and [i["incidentKey"] for i in found["items"]] == [str(incident.key)]
    assert await reader.search_instance_incidents("99", {}) is None
    assert await reader.call_hierarchy(failed) == [
        {"processInstanceKey": failed, "processDefinitionKey": str(definition), "processDefinitionName": "One task"}
    ]
    assert await reader.call_hierarchy("99") is None

    taken = _events(records, ValueType.PROCESS_INSTANCE, "SEQUENCE_FLOW_TAKEN")
    completed = str(_events(records, ValueType.JOB, "COMPLETED")[0].value["processInstanceKey"])
    flows = await reader.sequence_flows(completed)
    assert [f["elementId"] for f in flows] == ["flow-start-task", "flow-task-end"]
    assert {f["elementId"] for f in flows} == {
        r.value["elementId"] for r in taken if str(r.value["processInstanceKey"]) == completed
    }
    assert flows[0] == {
        "sequenceFlowId": f"{completed}_flow-start-task",
        "processInstanceKey": completed,
        "rootProcessInstanceKey": completed,
        "processDefinitionKey": str(definition),
        "processDefinitionId": "one-task",
        "elementId": "flow-start-task",
        "tenantId": "<default>",
    }
    assert await reader.sequence_flows("99") == []


async def test_decisions_forms_and_resources(reader: HistoryReader, records: list[Record]) -> None:
    [drg] = _events(records, ValueType.DECISION_REQUIREMENTS, "CREATED")
    decisions = _events(records, ValueType.DECISION, "CREATED")
    found = await reader.search("decision-definitions", {"sort": [{"field": "decisionDefinitionId"}]})
    assert [(d["decisionDefinitionId"], d["decisionDefinitionKey"]) for d in found["items"]] == sorted(
        (d.value["decisionId"], str(d.key)) for d in decisions
    )
    assert {d["decisionRequirementsName"] for d in found["items"]} == {"Discounts"}
    [requirements] = (await reader.search("decision-requirements", {}))["items"]
    assert requirements == {
        "decisionRequirementsKey": str(drg.key),
        "decisionRequirementsId": "discount_drg",
        "decisionRequirementsName": "Discounts",
        "version": 1,
        "resourceName": "discount.dmn",
        "tenantId": "<default>",
    }
    xml = await reader.decision_requirements_xml(str(drg.key))
    assert xml is not None and 'id="discount_drg"' in xml
    assert await reader.decision_definition_xml(str(decisions[0].key)) == xml
    assert await reader.decision_requirements_xml("99") is None

    [form] = _events(records, ValueType.FORM, "CREATED")
    assert await reader.form(form.key) == {
        "tenantId": "<default>",
        "formId": "exported-form",
        "schema": '{"id": "exported-form", "components": []}',
        "version": 1,
        "formKey": str(form.key),
    }
    resource = await reader.resource(str(form.key))
    assert resource is not None and (resource["kind"], resource["resourceName"]) == ("form", "exported.form")
    assert await reader.resource("99") is None
    # the native task links an external form; one-task's start event none
    [task] = [r for r in _events(records, ValueType.USER_TASK, "CREATED") if r.value["elementId"] == "approve"]
    assert await reader.user_task_form_key(str(task.value["userTaskKey"])) == (True, None)
    assert await reader.user_task_form_key("99") == (False, None)
    [definition] = [
        r.key for r in _events(records, ValueType.PROCESS, "CREATED") if r.value["bpmnProcessId"] == "one-task"
    ]
    assert await reader.start_form_key(str(definition)) == (True, None)
    assert await reader.start_form_key("99") == (False, None)


def test_a_start_form_link_names_a_form_id_and_its_binding() -> None:
    def process(form: str) -> str:
        return (
            '<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" '
            'xmlns:zeebe="http://camunda.org/schema/zeebe/1.0"><process id="p"><startEvent id="s">'
            f"<extensionElements>{form}</extensionElements></startEvent></process></definitions>"
        )

    assert start_form_link(process('<zeebe:formDefinition formId="f" />'), "p") == ("f", "latest", None)
    linked = process('<zeebe:formDefinition formId="f" bindingType="versionTag" versionTag="v1" />')
    assert start_form_link(linked, "p") == ("f", "versionTag", "v1")
    assert start_form_link(process('<zeebe:formDefinition formKey="camunda-forms:bpmn:x" />'), "p") is None
    assert start_form_link(process('<zeebe:formDefinition formId="f" />'), "other") is None
    assert start_form_link("<not xml", "p") is None
    assert start_form_named(process('<zeebe:formDefinition formKey="camunda-forms:bpmn:x" />'), "p") is True
    assert start_form_named(process('<zeebe:formDefinition externalReference="https://x" />'), "p") is False
    assert start_form_named(process(""), "p") is False
