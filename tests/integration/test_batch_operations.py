"""Batch operations against a real ``weir start --partitions 3``: instances a filter matches are canceled (spread
over every partition), incidents resolved as a batch, a batch suspended and resumed, and each batch read back with
its items from the history store over REST."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import aiohttp
import pytest

from broker.protocol.keys import partition_of
from tests.harness import BPMN, WeirProcess
from tests.integration.test_rest_api import assert_problem, call, create, deploy

BATCH_FIELDS = {
    "batchOperationKey",
    "batchOperationType",
    "state",
    "startDate",
    "endDate",
    "operationsTotalCount",
    "operationsFailedCount",
    "operationsCompletedCount",
    "errors",
}
ITEM_FIELDS = {"batchOperationKey", "itemKey", "processInstanceKey", "state", "processedDate", "errorMessage"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    w = WeirProcess(tmp_path_factory.mktemp("weir") / "data", extra_args=["--partitions", "3"])
    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture
async def http(cluster: WeirProcess) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=cluster.rest_url) as session:
        yield session


async def until(http: aiohttp.ClientSession, method: str, path: str, body: Any, check: Callable[[Any], Any]) -> Any:
    """Ask until ``check`` holds for a 200 answer: the history follows the log a little behind."""
    deadline = asyncio.get_running_loop().time() + 20.0
    while True:
        status, answer = await call(http, method, path, body)
        if status == 200 and check(answer):
            return answer
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting on {method} {path}: last answer {status} {answer}")
        await asyncio.sleep(0.1)


async def started(http: aiohttp.ClientSession, process_id: str, count: int) -> list[int]:
    keys = [int((await create(http, {"processDefinitionId": process_id}))["processInstanceKey"]) for _ in range(count)]
    query = {"filter": {"processDefinitionId": process_id, "state": "ACTIVE"}}
    await until(http, "POST", "/v2/process-instances/search", query, lambda a: a["page"]["totalItems"] == count)
    return keys


async def finished(http: aiohttp.ClientSession, key: str) -> dict:
    return await until(
        http, "GET", f"/v2/batch-operations/{key}", None, lambda b: b["state"] in ("COMPLETED", "PARTIALLY_COMPLETED")
    )


async def items(http: aiohttp.ClientSession, key: str, count: int) -> list[dict]:
    query = {"filter": {"batchOperationKey": key}, "page": {"limit": 100}}
    found = await until(
        http,
        "POST",
        "/v2/batch-operation-items/search",
        query,
        lambda a: a["page"]["totalItems"] == count and all(i["state"] != "ACTIVE" for i in a["items"]),
    )
    return found["items"]


async def test_instances_a_filter_matches_are_canceled_on_every_partition(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "one-task.bpmn")
    keys = await started(http, "one-task", 20)
    assert len({partition_of(k) for k in keys}) == 3, "created round robin over the partitions"
    status, created = await call(
        http, "POST", "/v2/process-instances/cancellation", {"filter": {"processDefinitionId": "one-task"}}
    )
    assert status == 200, created
    assert created["batchOperationType"] == "CANCEL_PROCESS_INSTANCE"
    key = created["batchOperationKey"]
    batch = await finished(http, key)
    assert set(batch) >= BATCH_FIELDS
    assert batch["state"] == "COMPLETED" and batch["batchOperationType"] == "CANCEL_PROCESS_INSTANCE"
    assert (batch["operationsTotalCount"], batch["operationsCompletedCount"], batch["operationsFailedCount"]) == (
        20,
        20,
        0,
    )
    assert batch["endDate"] is not None
    found = await items(http, key, 20)
    assert all(set(i) >= ITEM_FIELDS for i in found)
    assert sorted(int(i["processInstanceKey"]) for i in found) == sorted(keys)
    assert {i["state"] for i in found} == {"COMPLETED"} and all(i["processedDate"] for i in found)
    query = {"filter": {"processDefinitionId": "one-task", "state": "TERMINATED"}}
    await until(http, "POST", "/v2/process-instances/search", query, lambda a: a["page"]["totalItems"] == 20)
    searched = await until(
        http, "POST", "/v2/batch-operations/search", {"filter": {"batchOperationKey": key}}, lambda a: a["items"]
    )
    assert searched["items"][0]["batchOperationKey"] == key
    # a completed batch cannot be suspended, resumed nor canceled
    for action in ("suspension", "resumption", "cancellation"):
        assert_problem(await call(http, "POST", f"/v2/batch-operations/{key}/{action}"), 409, "COMPLETED")


async def test_incidents_are_resolved_as_a_batch(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "script-task-failure.bpmn")
    keys = await started(http, "script-task-failure", 6)
    query = {"filter": {"processDefinitionId": "script-task-failure", "state": "ACTIVE"}}
    incidents = await until(http, "POST", "/v2/incidents/search", query, lambda a: a["page"]["totalItems"] == 6)
    incident_keys = sorted(i["incidentKey"] for i in incidents["items"])
    status, created = await call(
        http,
        "POST",
        "/v2/process-instances/incident-resolution",
        {"filter": {"processDefinitionId": "script-task-failure"}},
    )
    assert status == 200, created
    assert created["batchOperationType"] == "RESOLVE_INCIDENT"
    batch = await finished(http, created["batchOperationKey"])
    assert (batch["operationsTotalCount"], batch["operationsCompletedCount"]) == (6, 6)
    found = await items(http, created["batchOperationKey"], 6)
    assert sorted(i["itemKey"] for i in found) == incident_keys
    assert sorted(int(i["processInstanceKey"]) for i in found) == sorted(keys)
    # the script fails again once resolved (the variable is still missing): the resolved incidents are gone
    for incident in incident_keys:
        await until(http, "GET", f"/v2/incidents/{incident}", None, lambda i: i["state"] == "RESOLVED")


async def test_a_batch_is_suspended_and_resumed(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "two-tasks.bpmn")
    await started(http, "two-tasks", 30)
    status, created = await call(
        http, "POST", "/v2/process-instances/cancellation", {"filter": {"processDefinitionId": "two-tasks"}}
    )
    assert status == 200, created
    key = created["batchOperationKey"]
    # the coordinator completes the batch once every partition reported: a suspension right away finds it running
    status, _ = await call(http, "POST", f"/v2/batch-operations/{key}/suspension")
    if status == 204:
        await until(
            http, "GET", f"/v2/batch-operations/{key}", None, lambda b: b["state"] in ("SUSPENDED", "COMPLETED")
        )
        status, answer = await call(http, "POST", f"/v2/batch-operations/{key}/resumption")
        assert status in (204, 409), answer
    else:
        assert status == 409
    batch = await finished(http, key)
    assert batch["operationsCompletedCount"] == 30


async def test_unknown_batches_and_bad_requests(http: aiohttp.ClientSession) -> None:
    assert_problem(await call(http, "GET", "/v2/batch-operations/2251799813699999"), 404)
    assert_problem(await call(http, "POST", "/v2/batch-operations/2251799813699999/suspension"), 404)
    assert_problem(await call(http, "POST", "/v2/process-instances/cancellation", {}), 400, "filter")
    assert_problem(
        await call(http, "POST", "/v2/process-instances/cancellation", {"filter": {"state": "SLEEPING"}}), 400
    )
    body = {"filter": {}, "migrationPlan": {"mappingInstructions": []}}
    assert_problem(await call(http, "POST", "/v2/process-instances/migration", body), 400, "targetProcessDefinitionKey")
    assert_problem(await call(http, "POST", "/v2/process-instances/modification", {"filter": {}}), 400)
