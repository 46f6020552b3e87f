"""The REST API (Camunda 8.8 v2) of a real `weir start`, driven over HTTP with aiohttp's client: every endpoint's
answer, its problem details for bad input and unknown keys, and a workflow run over REST alone."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from broker.protocol.keys import partition_of
from tests.harness import BPMN, FIXTURES, WeirProcess

PROBLEM = "application/problem+json"


@pytest.fixture
async def http(weir: WeirProcess) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=weir.rest_url) as session:
        yield session


async def call(
    http: aiohttp.ClientSession, method: str, path: str, body: Any = None, *, raw: bytes | None = None
) -> tuple[int, Any]:
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    headers = {"content-type": "application/json"} if data is not None else {}
    async with http.request(method, path, data=data, headers=headers) as response:
        text = await response.text()
        if response.status >= 400:
            assert response.content_type == PROBLEM, text
        return response.status, json.loads(text) if text else None


def assert_problem(answer: tuple[int, Any], status: int, *fragments: str, title: str | None = None) -> dict:
    code, body = answer
    assert code == status, body
    assert body["status"] == status and body["type"] == "about:blank" and body["instance"].startswith("/v2/")
    for fragment in fragments:
        assert fragment in body["detail"], body
    if title is not None:
        assert body["title"] == title, body
    return body


async def deploy(http: aiohttp.ClientSession, *files: Path) -> dict:
    form = aiohttp.FormData()
    for f in files:
        form.add_field("resources", f.read_bytes(), filename=f.name, content_type="application/xml")
    async with http.post("/v2/deployments", data=form) as response:
        body = await response.json(content_type=None)
        assert response.status == 200, body
        return body


async def create(http: aiohttp.ClientSession, body: dict) -> dict:
    status, created = await call(http, "POST", "/v2/process-instances", body)
    assert status == 200, created
    return created


async def activate(http: aiohttp.ClientSession, job_type: str, n: int = 1, timeout_ms: int = 5000) -> list[dict]:
    body = {"type": job_type, "worker": "rest-test", "timeout": 60_000, "maxJobsToActivate": n}
    status, answer = await call(http, "POST", "/v2/jobs/activation", {**body, "requestTimeout": timeout_ms})
    assert status == 200, answer
    return answer["jobs"]


# -- cluster, documents ----------------------------------------------------------------------------------------


async def test_topology(http: aiohttp.ClientSession) -> None:
    status, topology = await call(http, "GET", "/v2/topology")
    assert status == 200
    assert topology["clusterSize"] == 1 and topology["partitionsCount"] == 1 and topology["replicationFactor"] == 1
    [broker] = topology["brokers"]
    assert broker["partitions"] == [{"partitionId": 1, "role": "leader", "health": "healthy", "state": "active"}]
    assert broker["brokerId"] == str(broker["nodeId"])
    assert topology["gatewayVersion"].startswith("8.9.")  # the API level served
    assert topology["clusterId"] is None and topology["lastCompletedChangeId"] == "-1"


async def test_openapi_document_lists_what_is_served(http: aiohttp.ClientSession) -> None:
    status, doc = await call(http, "GET", "/v2/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.1")
    paths = doc["paths"]
    for path, method in [
        ("/v2/topology", "get"),
        ("/v2/deployments", "post"),
        ("/v2/process-instances", "post"),
        ("/v2/process-instances/{processInstanceKey}/cancellation", "post"),
        ("/v2/jobs/activation", "post"),
        ("/v2/jobs/{jobKey}/completion", "post"),
        ("/v2/jobs/{jobKey}/failure", "post"),
        ("/v2/jobs/{jobKey}/error", "post"),
        ("/v2/jobs/{jobKey}", "patch"),
        ("/v2/messages/publication", "post"),
        ("/v2/messages/correlation", "post"),
        ("/v2/signals/broadcast", "post"),
        ("/v2/incidents/{incidentKey}/resolution", "post"),
        ("/v2/decision-definitions/evaluation", "post"),
        ("/v2/process-instances/search", "post"),
        ("/v2/process-definitions/{processDefinitionKey}/xml", "get"),
    ]:
        assert method in paths.get(path, {}), f"{method.upper()} {path} missing from the OpenAPI document"
    create_body = paths["/v2/process-instances"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert create_body["additionalProperties"] is False and "processDefinitionId" in create_body["properties"]
    ids = [op["operationId"] for ops in paths.values() for op in ops.values()]
    assert len(ids) == len(set(ids))


async def test_unknown_route_and_method_are_problems(http: aiohttp.ClientSession) -> None:
    assert_problem(await call(http, "GET", "/v2/no-such-thing"), 404, "No such endpoint")
    assert_problem(await call(http, "DELETE", "/v2/topology"), 405, "DELETE is not allowed")
    huge = json.dumps({"processDefinitionId": "x", "variables": {"blob": "x" * (5 * 1024 * 1024)}}).encode()
    assert_problem(await call(http, "POST", "/v2/process-instances", raw=huge), 413, "larger than")


# -- deployments and resources ---------------------------------------------------------------------------------


async def test_deploy_process_and_decision(http: aiohttp.ClientSession) -> None:
    answer = await deploy(http, BPMN / "one-task.bpmn", FIXTURES / "dmn" / "greeting.dmn")
    assert answer["deploymentKey"].isdigit() and answer["tenantId"] == "<default>"
    # 8.9: each item names every kind, null but the one deployed
    kinds = {kind: value for d in answer["deployments"] for kind, value in d.items() if value is not None}
    assert all(set(d) == {*kinds, "form", "resource"} for d in answer["deployments"])
    process = kinds["processDefinition"]
    assert process["processDefinitionId"] == "one-task" and process["resourceName"] == "one-task.bpmn"
    assert process["processDefinitionKey"].isdigit() and process["processDefinitionVersion"] >= 1
    assert kinds["decisionDefinition"]["decisionDefinitionId"] == "greeting"
    assert kinds["decisionRequirements"]["resourceName"] == "greeting.dmn"


async def test_deploy_errors(http: aiohttp.ClientSession) -> None:
    assert_problem(await call(http, "POST", "/v2/deployments", {"resources": []}), 400, "multipart/form-data")
    other = aiohttp.FormData({"other": "x"}, default_to_multipart=True)
    async with http.post("/v2/deployments", data=other) as response:
        body = await response.json(content_type=None)
        assert response.status == 400 and "Unknown form part 'other'" in body["detail"]
    empty = aiohttp.FormData(default_to_multipart=True)
    empty.add_field("tenantId", "<default>")
    async with http.post("/v2/deployments", data=empty) as response:
        assert response.status == 400 and "at least one resource" in (await response.json(content_type=None))["detail"]
    mangled = b'--b\r\nContent-Disposition: form-data; name="\xc2\xb2\x0b"\r\n\r\n{}\r\n--b--\r\n'
    headers = {"content-type": "multipart/form-data; boundary=b"}
    async with http.post("/v2/deployments", data=mangled, headers=headers) as response:
        body = await response.json(content_type=None)
        assert response.status == 400 and "multipart/form-data" in body["detail"], body
    broken = aiohttp.FormData()
    broken.add_field("resources", b"<bpmn:definitions", filename="broken.bpmn")
    async with http.post("/v2/deployments", data=broken) as response:
        body = await response.json(content_type=None)
        assert response.status == 400 and body["title"] == "INVALID_ARGUMENT" and "broken.bpmn" in body["detail"]


async def test_delete_decision_resource(http: aiohttp.ClientSession) -> None:
    answer = await deploy(http, FIXTURES / "dmn" / "discount.dmn")
    [drg] = [d["decisionRequirements"] for d in answer["deployments"] if d["decisionRequirements"]]
    path = f"/v2/resources/{drg['decisionRequirementsKey']}/deletion"
    deleted = {"resourceKey": drg["decisionRequirementsKey"], "batchOperation": None}
    assert await call(http, "POST", path) == (200, deleted)
    assert_problem(await call(http, "POST", path), 404, title="NOT_FOUND")
    assert_problem(await call(http, "POST", "/v2/resources/x1/deletion"), 400, "'resourceKey'")


# -- process instances ---------------------------------------------------------------------------------------


async def test_create_by_id_and_by_key_and_cancel(http: aiohttp.ClientSession) -> None:
    deployed = await deploy(http, BPMN / "one-task.bpmn")
    definition = deployed["deployments"][0]["processDefinition"]
    by_id = await create(http, {"processDefinitionId": "one-task", "variables": {"n": 1}})
    assert by_id["processDefinitionId"] == "one-task" and by_id["processInstanceKey"].isdigit()
    assert by_id["processDefinitionVersion"] == definition["processDefinitionVersion"]
    assert by_id["variables"] == {} and by_id["tags"] == [] and by_id["businessId"] is None
    by_key = await create(http, {"processDefinitionKey": definition["processDefinitionKey"]})
    assert by_key["processDefinitionKey"] == definition["processDefinitionKey"]
    versioned = await create(
        http, {"processDefinitionId": "one-task", "processDefinitionVersion": definition["processDefinitionVersion"]}
    )
    assert versioned["processDefinitionKey"] == definition["processDefinitionKey"]
    for created in (by_id, by_key, versioned):
        path = f"/v2/process-instances/{created['processInstanceKey']}/cancellation"
        assert await call(http, "POST", path) == (204, None)
    again = await call(http, "POST", f"/v2/process-instances/{by_id['processInstanceKey']}/cancellation")
    assert_problem(again, 404, "Command 'CANCEL' rejected with code 'NOT_FOUND'", title="NOT_FOUND")


async def test_create_errors(http: aiohttp.ClientSession) -> None:
    path = "/v2/process-instances"
    assert_problem(await call(http, "POST", path, {"processDefinitionId": "x", "bogus": 1}), 400, "'bogus'")
    assert_problem(await call(http, "POST", path, {}), 400, "'processDefinitionId' or 'processDefinitionKey'")
    assert_problem(
        await call(http, "POST", path, {"processDefinitionId": "x", "processDefinitionKey": "1"}), 400, "both"
    )
    assert_problem(await call(http, "POST", path, {"processDefinitionKey": "12ab"}), 400, "'processDefinitionKey'")
    assert_problem(await call(http, "POST", path, {"processDefinitionKey": "99999999999999999999"}), 400, "64-bit")
    assert_problem(await call(http, "POST", path, {"processDefinitionId": "x", "variables": [1]}), 400, "'variables'")
    assert_problem(
        await call(http, "POST", path, {"processDefinitionId": "x", "processDefinitionVersion": "1"}), 400, "integer"
    )
    assert_problem(await call(http, "POST", path, raw=b"{not json"), 400, "not valid JSON")
    assert_problem(await call(http, "POST", path, raw=b'{"processDefinitionId": NaN}'), 400, "not valid JSON")
    assert_problem(await call(http, "POST", path, raw=b"[]"), 400, "JSON object")
    assert_problem(await call(http, "POST", path, raw=b""), 400, "empty")
    assert_problem(await call(http, "POST", path, {"processDefinitionId": "x", "tenantId": "t"}), 400, "tenant")
    missing = await call(http, "POST", path, {"processDefinitionId": "no-such-process"})
    assert_problem(missing, 404, "no-such-process", title="NOT_FOUND")
    # A key in a partition this cluster does not have.
    assert_problem(await call(http, "POST", "/v2/process-instances/1/cancellation"), 404, "process instance")


async def test_create_awaiting_completion_returns_variables(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "one-task.bpmn")
    creating = asyncio.create_task(
        call(
            http,
            "POST",
            "/v2/process-instances",
            {
                "processDefinitionId": "one-task",
                "variables": {"n": 3},
                "awaitCompletion": True,
                "requestTimeout": 20000,
            },
        )
    )
    [job] = await activate(http, "test")
    assert job["variables"] == {"n": 3}
    assert await call(http, "POST", f"/v2/jobs/{job['jobKey']}/completion", {"variables": {"m": 4}}) == (204, None)
    status, created = await creating
    assert status == 200 and created["variables"] == {"n": 3, "m": 4}
    assert created["processInstanceKey"] == job["processInstanceKey"]


async def test_set_variables_on_an_instance(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "one-task.bpmn")
    created = await create(http, {"processDefinitionId": "one-task"})
    path = f"/v2/element-instances/{created['processInstanceKey']}/variables"
    assert await call(http, "PUT", path, {"variables": {"late": True}}) == (204, None)
    assert_problem(await call(http, "PUT", path, {}), 400, "'variables'")
    [job] = await activate(http, "test")
    assert job["variables"] == {"late": True}
    assert await call(http, "POST", f"/v2/jobs/{job['jobKey']}/completion") == (204, None)
    gone = await call(http, "PUT", path, {"variables": {"x": 1}})
    assert_problem(gone, 404, title="NOT_FOUND")


# -- jobs ------------------------------------------------------------------------------------------------------


async def test_job_lifecycle(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "one-task.bpmn")
    created = await create(http, {"processDefinitionId": "one-task", "variables": {"a": 1, "b": 2}})
    status, answer = await call(
        http,
        "POST",
        "/v2/jobs/activation",
        {"type": "test", "timeout": 60000, "maxJobsToActivate": 5, "fetchVariable": ["a"], "requestTimeout": 5000},
    )
    assert status == 200
    [job] = answer["jobs"]
    assert job["processInstanceKey"] == created["processInstanceKey"] and job["variables"] == {"a": 1}
    assert job["processDefinitionId"] == "one-task" and job["elementId"] == "task" and job["retries"] == 3
    assert job["kind"] == "BPMN_ELEMENT" and isinstance(job["deadline"], int) and job["customHeaders"] == {}
    key = job["jobKey"]
    assert await call(http, "PATCH", f"/v2/jobs/{key}", {"changeset": {"retries": 5, "timeout": 30000}}) == (204, None)
    # Failed with retries left and no back-off: activatable again at once, with the new retries.
    failure = {"retries": 2, "errorMessage": "try again"}
    assert await call(http, "POST", f"/v2/jobs/{key}/failure", failure) == (204, None)
    [again] = await activate(http, "test")
    assert again["jobKey"] == key and again["retries"] == 2
    assert await call(http, "POST", f"/v2/jobs/{key}/completion", {"variables": {"done": True}}) == (204, None)
    assert_problem(await call(http, "POST", f"/v2/jobs/{key}/completion"), 404, "no such job", title="NOT_FOUND")


async def test_job_errors(http: aiohttp.ClientSession) -> None:
    activation = "/v2/jobs/activation"
    assert_problem(await call(http, "POST", activation, {"type": "t", "timeout": 1}), 400, "'maxJobsToActivate'")
    bad_timeout = {"type": "t", "timeout": 0, "maxJobsToActivate": 1}
    assert_problem(await call(http, "POST", activation, bad_timeout), 400, "'timeout' to be at least 1")
    blank = {"type": " ", "timeout": 10, "maxJobsToActivate": 1}
    assert_problem(await call(http, "POST", activation, blank), 400, "'type'")
    assert await call(
        http, "POST", activation, {"type": "nothing", "timeout": 10, "maxJobsToActivate": 1, "requestTimeout": -1}
    ) == (200, {"jobs": []})
    unknown = "/v2/jobs/2251799813685999"
    assert_problem(await call(http, "POST", f"{unknown}/completion", {"variables": 3}), 400, "'variables'")
    assert_problem(await call(http, "POST", f"{unknown}/completion"), 404, title="NOT_FOUND")
    assert_problem(await call(http, "POST", f"{unknown}/failure", {"retries": -1}), 400, "'retries'")
    assert_problem(await call(http, "POST", f"{unknown}/error", {}), 400, "'errorCode'")
    assert_problem(await call(http, "PATCH", unknown, {"changeset": {}}), 400, "at least one")
    assert_problem(await call(http, "PATCH", unknown, {"changeset": {"priority": 1}}), 400, "'priority'")
    assert_problem(await call(http, "PATCH", unknown, {"changeset": {"retries": 2}}), 404, title="NOT_FOUND")
    assert_problem(await call(http, "POST", "/v2/jobs/0/completion"), 400, "'jobKey'")


async def test_throw_error_reaches_the_boundary_event(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "error-boundary.bpmn")
    created = await create(http, {"processDefinitionId": "error-boundary"})
    [job] = await activate(http, "charge")
    error = {"errorCode": "PAYMENT_FAILED", "errorMessage": "declined", "variables": {"reason": "card"}}
    assert await call(http, "POST", f"/v2/jobs/{job['jobKey']}/error", error) == (204, None)
    [invoice] = await activate(http, "send-invoice")
    assert invoice["processInstanceKey"] == created["processInstanceKey"] and invoice["variables"]["reason"] == "card"
    await call(http, "POST", f"/v2/jobs/{invoice['jobKey']}/completion")


# -- messages, signals, decisions, incidents -------------------------------------------------------------------


async def test_message_publication_correlates(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "message-catch.bpmn")
    created = await create(http, {"processDefinitionId": "message-catch", "variables": {"requestId": "r-1"}})
    message = {"name": "approved", "correlationKey": "r-1", "timeToLive": 60000, "variables": {"ok": True}}
    status, published = await call(http, "POST", "/v2/messages/publication", message)
    assert status == 200 and published["messageKey"].isdigit() and published["tenantId"] == "<default>"
    [job] = await activate(http, "approved")
    assert job["processInstanceKey"] == created["processInstanceKey"] and job["variables"]["ok"] is True
    await call(http, "POST", f"/v2/jobs/{job['jobKey']}/completion")
    assert_problem(await call(http, "POST", "/v2/messages/publication", {"correlationKey": "x"}), 400, "'name'")
    assert_problem(
        await call(http, "POST", "/v2/messages/publication", {"name": "m", "timeToLive": -5}), 400, "'timeToLive'"
    )


async def test_signal_broadcast(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "signal-catch.bpmn")
    created = await create(http, {"processDefinitionId": "signal-catch"})
    status, broadcast = await call(http, "POST", "/v2/signals/broadcast", {"signalName": "wake-up"})
    assert status == 200 and broadcast["signalKey"].isdigit()
    [job] = await activate(http, "after-signal")
    assert job["processInstanceKey"] == created["processInstanceKey"]
    await call(http, "POST", f"/v2/jobs/{job['jobKey']}/completion")
    assert_problem(await call(http, "POST", "/v2/signals/broadcast", {"variables": {}}), 400, "'signalName'")


async def test_decision_evaluation(http: aiohttp.ClientSession) -> None:
    deployed = await deploy(http, FIXTURES / "dmn" / "greeting.dmn")
    [decision] = [d["decisionDefinition"] for d in deployed["deployments"] if d["decisionDefinition"]]
    path = "/v2/decision-definitions/evaluation"
    status, result = await call(http, "POST", path, {"decisionDefinitionId": "greeting", "variables": {"name": "Ada"}})
    assert status == 200, result
    assert json.loads(result["output"]) == "Hello Ada"
    assert result["failureMessage"] is None and result["failedDecisionDefinitionId"] is None
    assert result["decisionDefinitionKey"] == decision["decisionDefinitionKey"]
    assert result["evaluatedDecisions"][0]["decisionDefinitionId"] == "greeting"
    by_key = {"decisionDefinitionKey": decision["decisionDefinitionKey"], "variables": {"name": "Bo"}}
    status, result = await call(http, "POST", path, by_key)
    assert status == 200 and json.loads(result["output"]) == "Hello Bo"
    assert_problem(await call(http, "POST", path, {}), 400, "decision id")
    assert_problem(await call(http, "POST", path, {"decisionDefinitionId": "nope"}), 404, title="NOT_FOUND")


async def test_incident_resolution_errors(http: aiohttp.ClientSession) -> None:
    assert_problem(await call(http, "POST", "/v2/incidents/2251799813685999/resolution"), 404, title="NOT_FOUND")
    assert_problem(await call(http, "POST", "/v2/incidents/abc/resolution"), 400, "'incidentKey'")
    body = {"operationReference": 0}
    assert_problem(await call(http, "POST", "/v2/incidents/1/resolution", body), 400, "'operationReference'")


# -- searches from the history store ---------------------------------------------------------------------------


async def search_until(
    http: aiohttp.ClientSession, entity: str, query: dict, check: Any, what: str, timeout: float = 15.0
) -> dict:
    """Search until ``check(answer)`` holds: the history exporter writes what the partition committed shortly after."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status, answer = await call(http, "POST", f"/v2/{entity}/search", query)
        assert status == 200, answer
        if check(answer):
            return answer
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}: last answer {answer}")
        await asyncio.sleep(0.1)


async def test_workflow_entirely_over_rest(http: aiohttp.ClientSession) -> None:
    """Deploy, create, work the job, and see the instance completed in the history: REST alone, no gRPC."""
    deployed = await deploy(http, BPMN / "one-task.bpmn")
    definition_key = deployed["deployments"][0]["processDefinition"]["processDefinitionKey"]
    created = await create(http, {"processDefinitionKey": definition_key, "variables": {"order": 42}})
    instance = created["processInstanceKey"]
    by_key = {"filter": {"processInstanceKey": instance}}
    active = await search_until(http, "process-instances", by_key, lambda a: a["items"], "the instance in the history")
    assert active["items"][0]["state"] == "ACTIVE" and active["page"]["totalItems"] == 1
    [job] = await activate(http, "test")
    assert job["processInstanceKey"] == instance and job["variables"] == {"order": 42}
    assert await call(http, "POST", f"/v2/jobs/{job['jobKey']}/completion", {"variables": {"shipped": True}}) == (
        204,
        None,
    )
    await search_until(
        http,
        "process-instances",
        {"filter": {"processInstanceKey": instance, "state": "COMPLETED"}},
        lambda a: a["page"]["totalItems"] == 1,
        "the instance completed in the history",
    )
    status, item = await call(http, "GET", f"/v2/process-instances/{instance}")
    assert status == 200 and item["state"] == "COMPLETED" and item["processDefinitionId"] == "one-task"
    elements = await search_until(
        http,
        "element-instances",
        {"filter": {"processInstanceKey": instance, "elementId": "task"}},
        lambda a: a["items"] and a["items"][0]["state"] == "COMPLETED",
        "the task completed in the history",
    )
    assert elements["items"][0]["type"] == "SERVICE_TASK"
    variables = await search_until(
        http,
        "variables",
        {"filter": {"processInstanceKey": instance}, "sort": [{"field": "name", "order": "ASC"}]},
        lambda a: len(a["items"]) == 2,
        "both variables in the history",
    )
    assert [(v["name"], v["value"]) for v in variables["items"]] == [("order", "42"), ("shipped", "true")]
    status, xml = await _text(http, f"/v2/process-definitions/{definition_key}/xml")
    assert status == 200 and 'id="one-task"' in xml


async def _text(http: aiohttp.ClientSession, path: str) -> tuple[int, str]:
    async with http.get(path) as response:
        return response.status, await response.text()


async def test_incident_found_by_search_and_resolved(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "one-task.bpmn")
    created = await create(http, {"processDefinitionId": "one-task"})
    instance = created["processInstanceKey"]
    [job] = await activate(http, "test")
    failure = {"retries": 0, "errorMessage": "the printer is on fire"}
    assert await call(http, "POST", f"/v2/jobs/{job['jobKey']}/failure", failure) == (204, None)
    found = await search_until(
        http,
        "incidents",
        {"filter": {"processInstanceKey": instance, "state": "ACTIVE"}},
        lambda a: a["items"],
        "the incident in the history",
    )
    [incident] = found["items"]
    assert incident["errorType"] == "JOB_NO_RETRIES" and incident["errorMessage"] == "the printer is on fire"
    assert incident["jobKey"] == job["jobKey"]
    assert await call(http, "PATCH", f"/v2/jobs/{job['jobKey']}", {"changeset": {"retries": 1}}) == (204, None)
    path = f"/v2/incidents/{incident['incidentKey']}/resolution"
    assert await call(http, "POST", path) == (204, None)
    assert_problem(await call(http, "POST", path), 404, title="NOT_FOUND")
    [again] = await activate(http, "test")
    assert again["jobKey"] == job["jobKey"] and again["retries"] == 1
    await call(http, "POST", f"/v2/jobs/{again['jobKey']}/completion")
    await search_until(
        http,
        "incidents",
        {"filter": {"processInstanceKey": instance}},
        lambda a: [i["state"] for i in a["items"]] == ["RESOLVED"],
        "the incident resolved in the history",
    )


async def test_an_incident_in_a_called_instance_flags_every_instance_above_it(http: aiohttp.ClientSession) -> None:
    """As in Camunda, hasIncident (item and filter) covers the instance tree: an incident in the grandchild of a
    call chain flags the grandchild, its caller and the root; resolving it clears all three."""
    await deploy(http, BPMN / "call-chain.bpmn")
    root = (await create(http, {"processDefinitionId": "call-chain"}))["processInstanceKey"]
    [job] = await activate(http, "chain-work")
    leaf = job["processInstanceKey"]
    assert await call(http, "POST", f"/v2/jobs/{job['jobKey']}/failure", {"retries": 0}) == (204, None)
    [incident] = (
        await search_until(
            http, "incidents", {"filter": {"processInstanceKey": leaf, "state": "ACTIVE"}}, lambda a: a["items"], "it"
        )
    )["items"]
    tree = {"processDefinitionId": {"$like": "call-chain*"}}
    flagged = await search_until(
        http,
        "process-instances",
        {"filter": {**tree, "hasIncident": True}, "sort": [{"field": "processInstanceKey"}]},
        lambda a: a["page"]["totalItems"] == 3,
        "the incident flagged up the call chain",
    )
    [first, middle, last] = flagged["items"]
    assert (first["processInstanceKey"], last["processInstanceKey"]) == (root, leaf)
    assert (
        middle["parentProcessInstanceKey"] == root and last["parentProcessInstanceKey"] == middle["processInstanceKey"]
    )
    status, item = await call(http, "GET", f"/v2/process-instances/{root}")
    assert status == 200 and item["hasIncident"] is True
    assert await call(http, "PATCH", f"/v2/jobs/{job['jobKey']}", {"changeset": {"retries": 1}}) == (204, None)
    assert await call(http, "POST", f"/v2/incidents/{incident['incidentKey']}/resolution") == (204, None)
    cleared = await search_until(
        http,
        "process-instances",
        {"filter": {**tree, "processInstanceKey": {"$in": [root, middle["processInstanceKey"], leaf]}}},
        lambda a: a["page"]["totalItems"] == 3 and not any(i["hasIncident"] for i in a["items"]),
        "the flags cleared once the incident is resolved",
    )
    assert {i["processInstanceKey"] for i in cleared["items"]} == {root, middle["processInstanceKey"], leaf}


async def test_search_errors(http: aiohttp.ClientSession) -> None:
    assert_problem(
        await call(http, "POST", "/v2/process-instances/search", {"filter": {"colour": "red"}}), 400, "colour"
    )
    assert_problem(await call(http, "POST", "/v2/jobs/search", raw=b"{"), 400, "not valid JSON")
    assert_problem(await call(http, "POST", "/v2/incidents/search", [1]), 400, "JSON object")
    assert_problem(await call(http, "GET", "/v2/process-instances/2251799813685999"), 404, title="NOT_FOUND")
    assert_problem(await call(http, "GET", "/v2/variables/x"), 400, "'variableKey'")
    assert_problem(await call(http, "GET", "/v2/decision-instances/12"), 400, "'decisionEvaluationInstanceKey'")
    assert_problem(await call(http, "GET", "/v2/decision-instances/12-1"), 404, title="NOT_FOUND")
    assert_problem(await call(http, "GET", "/v2/process-definitions/2251799813685999/xml"), 404)
    status, found = await call(http, "POST", "/v2/decision-instances/search")
    assert status == 200 and set(found) == {"items", "page"}
    assert set(found["page"]) == {"totalItems", "hasMoreTotalItems", "startCursor", "endCursor"}
    assert found["page"]["hasMoreTotalItems"] is False  # the total is exact


async def test_enum_filters_refuse_unknown_values(http: aiohttp.ClientSession) -> None:
    """A value outside an 8.9 enum is a typo to report (400), not a search that finds nothing."""
    for entity, filter_, fragment in [
        ("process-instances", {"state": "ACTIV"}, "filter.state: expected one of ACTIVE, COMPLETED"),
        ("process-instances", {"state": {"$in": ["ACTIVE", "DONE"]}}, "filter.state.$in[1]"),
        ("incidents", {"errorType": {"$neq": "NO_RETRIES"}}, "JOB_NO_RETRIES"),
        ("jobs", {"$or": [{"kind": "BPMN_ELEMENT"}, {"state": "ACTIVATED"}]}, "filter.$or[1].state"),
        ("user-tasks", {"state": "OPEN"}, "'OPEN'"),
        ("element-instances", {"type": "TASK_SERVICE"}, "SERVICE_TASK"),
        ("decision-instances", {"decisionDefinitionType": "TABLE"}, "DECISION_TABLE"),
    ]:
        query = {"filter": filter_}
        assert_problem(await call(http, "POST", f"/v2/{entity}/search", query), 400, fragment)
    for entity, filter_ in [
        ("process-instances", {"state": {"$in": ["ACTIVE", "COMPLETED"]}}),
        ("incidents", {"errorType": "JOB_NO_RETRIES", "state": {"$neq": "RESOLVED"}}),
        ("jobs", {"state": {"$like": "COMP*"}}),
    ]:
        status, answer = await call(http, "POST", f"/v2/{entity}/search", {"filter": filter_})
        assert status == 200, answer


# -- native user tasks -----------------------------------------------------------------------------------------


async def _task_of(http: aiohttp.ClientSession, instance: str, state: str = "CREATED") -> dict:
    found = await search_until(
        http,
        "user-tasks",
        {"filter": {"processInstanceKey": instance}},
        lambda a: a["items"] and a["items"][0]["state"] == state,
        f"the user task {state} in the history",
    )
    return found["items"][0]


async def test_user_task_assign_update_unassign_complete(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "user-task-native.bpmn")
    variables = {"reviewers": ["ann"], "due": "2031-05-01T12:00:00Z"}
    created = await create(http, {"processDefinitionId": "user-task-native", "variables": variables})
    instance = created["processInstanceKey"]
    task = await _task_of(http, instance)
    path = f"/v2/user-tasks/{task['userTaskKey']}"
    assert await call(http, "POST", f"{path}/assignment", {"assignee": "ann"}) == (204, None)
    claim = {"assignee": "bob", "allowOverride": False}
    assert_problem(await call(http, "POST", f"{path}/assignment", claim), 409, "already", title="INVALID_STATE")
    assert await call(http, "PATCH", path, {"changeset": {"priority": 90, "candidateGroups": ["ops"]}}) == (204, None)
    assert await call(http, "DELETE", f"{path}/assignee") == (204, None)
    await search_until(
        http,
        "user-tasks",
        {"filter": {"userTaskKey": task["userTaskKey"]}},
        lambda a: a["items"] and a["items"][0]["priority"] == 90 and not a["items"][0].get("assignee"),
        "the update and the unassignment in the history",
    )
    assert await call(http, "POST", f"{path}/completion", {"variables": {"approved": True}}) == (204, None)
    await search_until(
        http,
        "process-instances",
        {"filter": {"processInstanceKey": instance, "state": "COMPLETED"}},
        lambda a: a["items"],
        "the instance completed by the task",
    )
    assert_problem(await call(http, "POST", f"{path}/completion"), 404, title="NOT_FOUND")


async def test_user_task_errors(http: aiohttp.ClientSession) -> None:
    unknown = "/v2/user-tasks/2251799813685999"
    assert_problem(await call(http, "POST", f"{unknown}/assignment", {}), 400, "'assignee'")
    assert_problem(await call(http, "POST", f"{unknown}/assignment", {"assignee": "ann"}), 404, title="NOT_FOUND")
    assert_problem(await call(http, "PATCH", unknown, {"changeset": {"colour": "red"}}), 400, "'colour'")
    assert_problem(await call(http, "PATCH", unknown, {}), 400, "No update data")
    assert_problem(await call(http, "POST", f"{unknown}/completion", {"variables": "x"}), 400, "'variables'")
    assert_problem(await call(http, "DELETE", "/v2/user-tasks/abc/assignee"), 400, "'userTaskKey'")


async def test_long_variable_values_are_truncated_in_searches(http: aiohttp.ClientSession) -> None:
    """Searches show the first 8191 characters of a long value with isTruncated (Camunda's variable size
    threshold); truncateValues=false and getting the variable by key give it whole."""
    await deploy(http, BPMN / "user-task-native.bpmn")
    blob = "é" + "x" * 10_000
    variables = {"reviewers": ["ann"], "due": "2031-05-01T12:00:00Z", "blob": blob}
    created = await create(http, {"processDefinitionId": "user-task-native", "variables": variables})
    instance = created["processInstanceKey"]
    query = {"filter": {"processInstanceKey": instance, "name": "blob"}}
    [item] = (await search_until(http, "variables", query, lambda a: a["items"], "the variable"))["items"]
    whole = json.dumps(blob, ensure_ascii=False)
    assert item["isTruncated"] is True and item["value"] == whole[:8191]
    status, answer = await call(http, "POST", "/v2/variables/search?truncateValues=false", query)
    assert status == 200 and answer["items"][0]["value"] == whole and answer["items"][0]["isTruncated"] is False
    status, answer = await call(http, "POST", "/v2/variables/search?truncateValues=true", query)
    assert status == 200 and answer["items"][0] == item
    status, got = await call(http, "GET", f"/v2/variables/{item['variableKey']}")
    assert status == 200 and got["value"] == whole
    assert_problem(await call(http, "POST", "/v2/variables/search?truncateValues=maybe", query), 400, "truncateValues")

    # The user task sees the instance's variables and its own local ones, long values truncated the same way.
    task = await _task_of(http, instance)
    local = {"variables": {"note": "local"}, "local": True}
    assert await call(http, "PUT", f"/v2/element-instances/{task['elementInstanceKey']}/variables", local) == (
        204,
        None,
    )
    await search_until(
        http, "variables", {"filter": {"name": "note"}}, lambda a: a["items"], "the task's local variable"
    )
    path = f"/v2/user-tasks/{task['userTaskKey']}/variables/search"
    status, seen = await call(http, "POST", path, {"sort": [{"field": "name"}]})
    assert status == 200, seen
    assert [(v["name"], v["scopeKey"]) for v in seen["items"]] == [
        ("blob", instance),
        ("due", instance),
        ("note", task["elementInstanceKey"]),
        ("reviewers", instance),
    ]
    assert seen["items"][0]["isTruncated"] is True and seen["items"][0]["value"] == whole[:8191]
    status, named = await call(http, "POST", f"{path}?truncateValues=false", {"filter": {"name": "blob"}})
    assert status == 200 and [v["value"] for v in named["items"]] == [whole]
    assert_problem(await call(http, "POST", path, {"filter": {"scopeKey": instance}}), 400, "scopeKey")
    unknown = "/v2/user-tasks/2251799813685999/variables/search"
    assert_problem(await call(http, "POST", unknown, {}), 404, title="NOT_FOUND")


async def test_task_listener_denies_an_assignment(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "user-task-listeners.bpmn")
    created = await create(http, {"processDefinitionId": "user-task-listeners", "variables": {"owner": "carol"}})
    [creating] = await activate(http, "tl-creating")
    assert creating["kind"] == "TASK_LISTENER" and creating["listenerEventType"] == "CREATING"
    assert creating["processInstanceKey"] == created["processInstanceKey"]
    assert await call(http, "POST", f"/v2/jobs/{creating['jobKey']}/completion") == (204, None)
    [first] = await activate(http, "tl-assigning")  # the modelled assignee, carol, is assigned after creation
    assert first["userTask"]["assignee"] == "carol"
    assert await call(http, "POST", f"/v2/jobs/{first['jobKey']}/completion") == (204, None)
    task = await _task_of(http, created["processInstanceKey"])
    assigning = asyncio.create_task(
        call(http, "POST", f"/v2/user-tasks/{task['userTaskKey']}/assignment", {"assignee": "mallory"})
    )
    [listener] = await activate(http, "tl-assigning")
    assert listener["userTask"]["assignee"] == "mallory" and listener["userTask"]["userTaskKey"] == task["userTaskKey"]
    denial = {"result": {"type": "userTask", "denied": True, "deniedReason": "not on this team"}}
    assert await call(http, "POST", f"/v2/jobs/{listener['jobKey']}/completion", denial) == (204, None)
    problem = assert_problem(await assigning, 409)
    assert "not on this team" in problem["detail"] or "denied" in problem["detail"], problem
    await call(http, "POST", f"/v2/process-instances/{created['processInstanceKey']}/cancellation")


def test_a_rest_port_in_use_stops_start_up_with_a_clear_message(weir: WeirProcess, tmp_path: Path) -> None:
    other = WeirProcess(tmp_path / "data")
    other.rest_port = weir.rest_port  # taken by the module's Weir
    other.start(wait=False)
    assert other.proc is not None
    code = other.proc.wait(timeout=60)
    assert code == 1
    assert f"could not bind the REST API to 127.0.0.1:{weir.rest_port}" in other.log()


async def test_requests_are_counted_by_route_and_status(http: aiohttp.ClientSession, weir: WeirProcess) -> None:
    await call(http, "GET", "/v2/topology")
    assert_problem(await call(http, "POST", "/v2/jobs/2251799813685999/completion"), 404)
    status, metrics = weir.probe("/metrics")
    assert status == 200
    text = metrics["text"]
    assert 'weir_gateway_rest_requests_total{route="GET /v2/topology",status="200"}' in text
    assert 'weir_gateway_rest_requests_total{route="POST /v2/jobs/{jobKey}/completion",status="404"}' in text


# -- the clock -------------------------------------------------------------------------------------------------


@pytest.fixture
async def two_partitions(tmp_path: Path) -> AsyncIterator[aiohttp.ClientSession]:
    """A Weir of the test's own with two partitions: pinning its clock must not leak into other tests."""
    w = WeirProcess(tmp_path / "data", extra_args=["--partitions", "2"], env={"WEIR_CLOCK_CONTROLLED": "true"})
    w.start()
    try:
        async with aiohttp.ClientSession(base_url=w.rest_url) as session:
            yield session
    finally:
        w.stop()


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def test_a_pinned_clock_fires_timers_on_every_partition_and_resets(two_partitions: aiohttp.ClientSession) -> None:
    """PUT /v2/clock pins processing time two hours ahead: the one-hour timers of instances on both partitions fire
    at the pinned time (the pin reaches the second partition by command distribution); POST /v2/clock/reset lets
    time follow the system clock again."""
    http = two_partitions
    assert_problem(await call(http, "PUT", "/v2/clock", {}), 400, "'timestamp'")
    assert_problem(await call(http, "PUT", "/v2/clock", {"timestamp": -1}), 400, "'timestamp'")
    assert_problem(await call(http, "PUT", "/v2/clock", {"timestamp": "soon"}), 400, "'timestamp'")
    await deploy(http, BPMN / "timer-catch.bpmn")
    instances: list[str] = []
    for _ in range(200):  # until the deployment reached the second partition too (distribution is asynchronous)
        body = {"processDefinitionId": "timer-catch", "variables": {"delay": "PT1H"}}
        status, created = await call(http, "POST", "/v2/process-instances", body)
        if status == 200:
            instances.append(created["processInstanceKey"])
            if {partition_of(int(k)) for k in instances} == {1, 2}:
                break
        else:
            assert_problem((status, created), 404, "Expected to find process definition")
            await asyncio.sleep(0.05)
    assert {partition_of(int(k)) for k in instances} == {1, 2}, "instances on each partition"
    waiting = {"filter": {"elementId": "wait", "state": "ACTIVE", "processInstanceKey": {"$in": instances}}}

    def every_instance(answer: dict) -> bool:
        return answer["page"]["totalItems"] == len(instances)

    await search_until(http, "element-instances", waiting, every_instance, "every instance waiting")
    assert await activate(http, "after-wait", len(instances), timeout_ms=200) == [], "not due by the system clock"

    pinned_at = (int(time.time()) + 2 * 3600) * 1000
    assert await call(http, "PUT", "/v2/clock", {"timestamp": pinned_at}) == (204, None)
    jobs: list[dict] = []
    for _ in range(50):
        jobs += await activate(http, "after-wait", len(instances), timeout_ms=500)
        if len(jobs) == len(instances):
            break
    assert sorted(j["processInstanceKey"] for j in jobs) == sorted(instances), "every timer fired"
    done = await search_until(
        http,
        "element-instances",
        {"filter": {"elementId": "wait", "state": "COMPLETED", "processInstanceKey": {"$in": instances}}},
        every_instance,
        "every timer completed in the history",
    )
    assert {e["endDate"] for e in done["items"]} == {_iso(pinned_at)}, "processed at the pinned time"

    assert await call(http, "POST", "/v2/clock/reset") == (204, None)
    # The reset reaches the second partition by distribution too: until then it still stamps the pinned time.
    following: set[int] = set()
    for _ in range(100):
        later = await create(http, {"processDefinitionId": "timer-catch", "variables": {"delay": "PT1H"}})
        key = later["processInstanceKey"]
        [started] = (
            await search_until(
                http, "process-instances", {"filter": {"processInstanceKey": key}}, lambda a: a["items"], "it"
            )
        )["items"]
        if started["startDate"] < _iso(pinned_at):
            following.add(partition_of(int(key)))
        if following == {1, 2}:
            break
        await asyncio.sleep(0.05)
    assert following == {1, 2}, "both partitions follow the system clock again"
