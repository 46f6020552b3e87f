"""Business ids and tags in the history (Camunda 8.9): instances, their called children, jobs and user tasks keep
them, and searches filter by them (a business id like any text; tags: all of the given ones) and sort by business id.
Over SQLite and PostgreSQL, from a real partition's records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker.protocol.enums import DeploymentIntent, RecordType, ValueType
from exporters.history import schema
from exporters.history.backends import open_backend
from exporters.history.reader import open_reader
from tests.exporters.scenario import PartitionDriver, logged_run
from tests.exporters.test_history_exporter import export_all, record_log
from tests.harness import BPMN

DMN = BPMN.parent / "dmn"


async def _create(
    d: PartitionDriver, process_id: str, business_id: str, tags: list[str], variables: dict | None = None
) -> int:
    labels = {"businessId": business_id, "tags": tags}
    rec = await d.create(process_id, variables, labels)
    assert rec.record_type == RecordType.EVENT, rec.rejection_reason
    return rec.value["processInstanceKey"]


async def test_instances_jobs_and_user_tasks_keep_business_ids_and_tags(history_url: str, tmp_path: Path) -> None:
    created: dict[str, int] = {}

    async def drive(d: PartitionDriver) -> None:
        await d.deploy("call-activity.bpmn", "user-task-native.bpmn")
        decisions = [{"resourceName": n, "resource": (DMN / n).read_bytes()} for n in ("discount.dmn", "greeting.dmn")]
        await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": decisions})
        await d.deploy("business-rule-task.bpmn")
        rule_variables = {"decisionToCall": "discount", "orders": 12, "total": 10, "name": "Ada"}
        created["decided"] = await _create(d, "business-rule-task", "order-3", [], rule_variables)
        created["called"] = await _create(d, "call-activity", "order-2", ["shop:eu", "vip"])
        created["other"] = await _create(d, "call-activity", "order-1", ["shop:us"])
        task_variables = {"reviewers": ["ann"], "due": "2031-01-01T00:00:00Z"}
        created["task"] = await _create(d, "user-task-native", "", ["vip"], task_variables)
        await d.settle()
        await d.activate("child-work")

    records = await logged_run(tmp_path / "partition", drive)
    await export_all(record_log(records), history_url, records[-1].position)
    reader = open_reader(history_url)
    try:

        async def search(entity: str, request: dict[str, Any], key: str) -> list[int]:
            return sorted(int(i[key]) for i in (await reader.search(entity, request))["items"])

        root = await reader.get("process-instances", str(created["called"]))
        assert root is not None and root["businessId"] == "order-2" and root["tags"] == ["shop:eu", "vip"]
        plain = await reader.get("process-instances", str(created["task"]))
        assert plain is not None and plain["businessId"] is None and plain["tags"] == ["vip"]

        by_id = await search("process-instances", {"filter": {"businessId": "order-2"}}, "processInstanceKey")
        assert len(by_id) == 2 and created["called"] in by_id, "the root and the child it called"
        (child,) = [k for k in by_id if k != created["called"]]
        called = await reader.get("process-instances", str(child)) or {}
        assert called["parentProcessInstanceKey"] == called["rootProcessInstanceKey"] == str(created["called"])
        assert root["rootProcessInstanceKey"] == str(created["called"])
        both = await search("process-instances", {"filter": {"tags": ["vip", "shop:eu"]}}, "processInstanceKey")
        assert both == sorted([created["called"], child])
        vip = await search("process-instances", {"filter": {"tags": "vip"}}, "processInstanceKey")
        assert vip == sorted([created["called"], child, created["task"]])
        assert await search("process-instances", {"filter": {"tags": ["vip", "shop:us"]}}, "processInstanceKey") == []

        ordered = await reader.search(
            "process-instances",
            {"filter": {"parentProcessInstanceKey": {"$exists": False}}, "sort": [{"field": "businessId"}]},
        )
        ids = [i["businessId"] for i in ordered["items"]]
        assert [i for i in ids if i] == ["order-1", "order-2", "order-3"]

        jobs = (await reader.search("jobs", {"filter": {"tags": "shop:eu"}}))["items"]
        assert [j["tags"] for j in jobs] == [["shop:eu", "vip"]] and jobs[0]["processInstanceKey"] == str(child)
        tasks = (await reader.search("user-tasks", {"filter": {"tags": ["vip"]}}))["items"]
        assert len(tasks) == 1 and tasks[0]["processInstanceKey"] == str(created["task"])
        assert tasks[0]["tags"] == ["vip"]

        # A job or user task has its instance's business id (8.10), and every row names the root of its instance's
        # chain of calls (8.9): a root instance's rows the instance itself, a called instance's rows its caller
        assert jobs[0]["businessId"] == "order-2" and jobs[0]["rootProcessInstanceKey"] == str(created["called"])
        assert tasks[0]["businessId"] is None and tasks[0]["rootProcessInstanceKey"] == str(created["task"])
        by_business = await search("jobs", {"filter": {"businessId": "order-2"}}, "jobKey")
        assert by_business == [int(jobs[0]["jobKey"])]
        root_rows = {
            entity: (await reader.search(entity, {"filter": {"processInstanceKey": str(created["called"])}}))["items"]
            for entity in ("element-instances", "variables")
        }
        assert root_rows["element-instances"]
        assert {i["rootProcessInstanceKey"] for rows in root_rows.values() for i in rows} == {str(created["called"])}
        decided = (
            await reader.search("decision-instances", {"filter": {"processInstanceKey": str(created["decided"])}})
        )["items"]
        assert decided and {(i["businessId"], i["rootProcessInstanceKey"]) for i in decided} == {
            ("order-3", str(created["decided"]))
        }
        child_elements = await reader.search("element-instances", {"filter": {"processInstanceKey": str(child)}})
        assert {i["rootProcessInstanceKey"] for i in child_elements["items"]} == {str(created["called"])}
    finally:
        await reader.close()


async def test_migration_3_adds_the_columns_and_older_rows_read_without_them(
    history_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = open_backend(history_url)
    backend.connect()
    try:
        with monkeypatch.context() as patch:
            patch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:2])
            assert backend.migrate(1) == [1, 2]
        p = backend.placeholder
        with backend.transaction() as cursor:
            cursor.execute(
                f"INSERT INTO process_instances (process_instance_key, state, has_incident) VALUES ({p}, {p}, {p})",
                (7, "ACTIVE", 0),
            )
            cursor.execute(
                "INSERT INTO process_instances (process_instance_key, state, has_incident, parent_process_instance_key)"
                f" VALUES ({p}, {p}, {p}, {p})",
                (8, "ACTIVE", 0, 7),
            )
        assert backend.migrate(2) == list(range(3, schema.LATEST_VERSION + 1))
    finally:
        backend.close()
    reader = open_reader(history_url)
    try:
        old = await reader.get("process-instances", "7")
        assert old is not None and old["businessId"] is None and old["tags"] == []
        # rows written before records named their root: a root instance is its own, a called one's is not known
        assert old["rootProcessInstanceKey"] == "7"
        assert (await reader.get("process-instances", "8") or {})["rootProcessInstanceKey"] is None
        assert (await reader.search("process-instances", {"filter": {"tags": "vip"}}))["items"] == []
    finally:
        await reader.close()
