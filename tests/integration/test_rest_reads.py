"""The reads an instance view draws from, against a real ``weir start``: element statistics of definitions and
instances, sequence flows taken, call hierarchies, an instance tree's incidents, decision definitions and
requirements with their XML, deployed resources, linked forms and the cluster status; over HTTP and, for some, the
official Python SDK (which decodes every response strictly against the 8.9 shapes)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.harness import FIXTURES, WeirProcess
from tests.integration.test_rest_api import activate, assert_problem, call, create, deploy

UNKNOWN = "2251799813699999"

CALLER = """<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="reads-calls-definitions" targetNamespace="http://weir.example">
  <bpmn:process id="reads-caller" name="Reads caller" isExecutable="true">
    <bpmn:startEvent id="start" />
    <bpmn:sequenceFlow id="to-gate" sourceRef="start" targetRef="gate" />
    <bpmn:exclusiveGateway id="gate" default="to-call" />
    <bpmn:sequenceFlow id="to-skip" sourceRef="gate" targetRef="skipped">
      <bpmn:conditionExpression>=skip = true</bpmn:conditionExpression>
    </bpmn:sequenceFlow>
    <bpmn:sequenceFlow id="to-call" sourceRef="gate" targetRef="call" />
    <bpmn:endEvent id="skipped" />
    <bpmn:callActivity id="call" name="Call the worker">
      <bpmn:extensionElements><zeebe:calledElement processId="reads-callee" /></bpmn:extensionElements>
    </bpmn:callActivity>
    <bpmn:sequenceFlow id="to-end" sourceRef="call" targetRef="end" />
    <bpmn:endEvent id="end" />
  </bpmn:process>
  <bpmn:process id="reads-callee" isExecutable="true">
    <bpmn:startEvent id="callee-start" />
    <bpmn:sequenceFlow id="to-work" sourceRef="callee-start" targetRef="work" />
    <bpmn:serviceTask id="work">
      <bpmn:extensionElements><zeebe:taskDefinition type="reads-work" /></bpmn:extensionElements>
    </bpmn:serviceTask>
    <bpmn:sequenceFlow id="to-callee-end" sourceRef="work" targetRef="callee-end" />
    <bpmn:endEvent id="callee-end" />
  </bpmn:process>
</bpmn:definitions>
"""
FORMS = """<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="reads-forms-definitions" targetNamespace="http://weir.example">
  <bpmn:process id="reads-forms" isExecutable="true">
    <bpmn:startEvent id="start">
      <bpmn:extensionElements><zeebe:formDefinition formId="reads-approval" /></bpmn:extensionElements>
    </bpmn:startEvent>
    <bpmn:sequenceFlow id="to-approve" sourceRef="start" targetRef="approve" />
    <bpmn:userTask id="approve">
      <bpmn:extensionElements>
        <zeebe:userTask />
        <zeebe:formDefinition formId="reads-approval" />
      </bpmn:extensionElements>
    </bpmn:userTask>
    <bpmn:sequenceFlow id="to-external" sourceRef="approve" targetRef="external" />
    <bpmn:userTask id="external">
      <bpmn:extensionElements>
        <zeebe:userTask />
        <zeebe:formDefinition externalReference="https://forms.example/external" />
      </bpmn:extensionElements>
    </bpmn:userTask>
    <bpmn:sequenceFlow id="to-end" sourceRef="external" targetRef="end" />
    <bpmn:endEvent id="end" />
  </bpmn:process>
</bpmn:definitions>
"""
FORM = {"id": "reads-approval", "type": "default", "components": [{"type": "checkbox", "key": "ok", "label": "OK"}]}
#: Every field of an 8.9 element statistics item.
STATISTICS_FIELDS = {"elementId", "active", "canceled", "incidents", "completed"}
SEQUENCE_FLOW_FIELDS = {
    "sequenceFlowId",
    "processInstanceKey",
    "rootProcessInstanceKey",
    "processDefinitionKey",
    "processDefinitionId",
    "elementId",
    "tenantId",
}


@pytest.fixture
async def http(weir: WeirProcess) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=weir.rest_url) as session:
        yield session


@pytest.fixture(scope="module")
def resources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("reads")
    (folder / "reads-calls.bpmn").write_text(CALLER)
    (folder / "reads-forms.bpmn").write_text(FORMS)
    (folder / "reads-approval.form").write_text(json.dumps(FORM))
    return folder


async def until(http: aiohttp.ClientSession, method: str, path: str, check: Callable[[Any], Any], what: str) -> Any:
    """Ask until ``check`` holds for a 200 answer: the history follows the log a little behind."""
    deadline = asyncio.get_running_loop().time() + 15.0
    while True:
        status, answer = await call(http, method, path, {} if method == "POST" else None)
        if status == 200 and check(answer):
            return answer
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}: last answer {status} {answer}")
        await asyncio.sleep(0.1)


def by_element(statistics: dict) -> dict[str, tuple[int, int, int, int]]:
    for item in statistics["items"]:
        assert set(item) == STATISTICS_FIELDS, item
    return {i["elementId"]: (i["active"], i["canceled"], i["incidents"], i["completed"]) for i in statistics["items"]}


async def test_a_called_instance_with_an_incident_seen_from_both_ends(
    http: aiohttp.ClientSession, resources: Path
) -> None:
    """A caller whose called instance fails into an incident: statistics, sequence flows, the call hierarchy and
    the incidents of the tree; then the incident resolved, the instances completed, and a second caller canceled."""
    deployed = await deploy(http, resources / "reads-calls.bpmn")
    definitions = {
        d["processDefinition"]["processDefinitionId"]: d["processDefinition"] for d in deployed["deployments"]
    }
    caller_definition = definitions["reads-caller"]["processDefinitionKey"]
    callee_definition = definitions["reads-callee"]["processDefinitionKey"]
    root = (await create(http, {"processDefinitionId": "reads-caller"}))["processInstanceKey"]
    [job] = await activate(http, "reads-work")
    child = job["processInstanceKey"]
    assert child != root and job["rootProcessInstanceKey"] == root  # the called instance's job names the caller
    assert await call(http, "POST", f"/v2/jobs/{job['jobKey']}/failure", {"retries": 0, "errorMessage": "no"}) == (
        204,
        None,
    )

    child_stats = await until(
        http,
        "GET",
        f"/v2/process-instances/{child}/statistics/element-instances",
        lambda a: by_element(a).get("work", (0, 0, 0, 0))[2] == 1,
        "the incident in the callee's statistics",
    )
    assert by_element(child_stats) == {"callee-start": (0, 0, 0, 1), "work": (0, 0, 1, 0)}
    status, root_stats = await call(http, "GET", f"/v2/process-instances/{root}/statistics/element-instances")
    assert status == 200
    assert by_element(root_stats) == {"start": (0, 0, 0, 1), "gate": (0, 0, 0, 1), "call": (1, 0, 0, 0)}

    status, flows = await call(http, "GET", f"/v2/process-instances/{root}/sequence-flows")
    assert status == 200
    assert all(set(f) == SEQUENCE_FLOW_FIELDS for f in flows["items"])
    assert sorted(f["elementId"] for f in flows["items"]) == ["to-call", "to-gate"]
    assert {
        (f["processInstanceKey"], f["rootProcessInstanceKey"], f["processDefinitionKey"]) for f in flows["items"]
    } == {(root, root, caller_definition)}
    status, child_flows = await call(http, "GET", f"/v2/process-instances/{child}/sequence-flows")
    assert [(f["elementId"], f["rootProcessInstanceKey"]) for f in child_flows["items"]] == [("to-work", root)]

    status, hierarchy = await call(http, "GET", f"/v2/process-instances/{child}/call-hierarchy")
    assert status == 200
    assert hierarchy == [
        {
            "processInstanceKey": root,
            "processDefinitionKey": caller_definition,
            "processDefinitionName": "Reads caller",
        },
        {
            "processInstanceKey": child,
            "processDefinitionKey": callee_definition,
            "processDefinitionName": "reads-callee",
        },
    ]
    status, own = await call(http, "GET", f"/v2/process-instances/{root}/call-hierarchy")
    assert status == 200 and [e["processInstanceKey"] for e in own] == [root]

    # the root's incidents include its called instance's; a filter narrows them
    status, incidents = await call(http, "POST", f"/v2/process-instances/{root}/incidents/search", {})
    assert status == 200 and incidents["page"]["totalItems"] == 1
    [incident] = incidents["items"]
    assert (incident["processInstanceKey"], incident["elementId"], incident["errorMessage"]) == (child, "work", "no")
    assert incident["state"] == "ACTIVE" and incident["errorType"] == "JOB_NO_RETRIES"
    assert incident["rootProcessInstanceKey"] == root
    narrowed = {"filter": {"processInstanceKey": root}}
    status, none = await call(http, "POST", f"/v2/process-instances/{root}/incidents/search", narrowed)
    assert status == 200 and none["items"] == [] and none["page"]["totalItems"] == 0
    assert_problem(
        await call(http, "POST", f"/v2/process-instances/{root}/incidents/search", {"filter": {"state": "BROKEN"}}),
        400,
        "filter.state",
    )

    # resolved and completed: the counts move
    assert await call(http, "PATCH", f"/v2/jobs/{job['jobKey']}", {"changeset": {"retries": 1}}) == (204, None)
    assert await call(http, "POST", f"/v2/incidents/{incident['incidentKey']}/resolution") == (204, None)
    [again] = await activate(http, "reads-work")
    assert await call(http, "POST", f"/v2/jobs/{again['jobKey']}/completion") == (204, None)
    done = await until(
        http,
        "GET",
        f"/v2/process-instances/{root}/statistics/element-instances",
        lambda a: by_element(a).get("end") == (0, 0, 0, 1),
        "the caller completed",
    )
    assert by_element(done)["call"] == (0, 0, 0, 1)
    status, flows = await call(http, "GET", f"/v2/process-instances/{root}/sequence-flows")
    assert sorted(f["elementId"] for f in flows["items"]) == ["to-call", "to-end", "to-gate"]

    # a second caller, canceled while its callee works; a third that skips the call
    second = (await create(http, {"processDefinitionId": "reads-caller"}))["processInstanceKey"]
    await activate(http, "reads-work")
    assert await call(http, "POST", f"/v2/process-instances/{second}/cancellation") == (204, None)
    await create(http, {"processDefinitionId": "reads-caller", "variables": {"skip": True}})
    path = f"/v2/process-definitions/{caller_definition}/statistics/element-instances"
    everything = await until(
        http,
        "POST",
        path,
        lambda a: by_element(a).get("call", (0,) * 4)[1] == 1 and "skipped" in by_element(a),
        "the canceled call and the skipped one",
    )
    assert by_element(everything) == {
        "start": (0, 0, 0, 3),
        "gate": (0, 0, 0, 3),
        "call": (0, 1, 0, 1),
        "end": (0, 0, 0, 1),
        "skipped": (0, 0, 0, 1),
    }
    status, alike = await call(http, "GET", path)
    assert (status, alike) == (200, everything)
    status, canceled_only = await call(http, "POST", path, {"filter": {"state": "TERMINATED"}})
    assert status == 200
    assert by_element(canceled_only) == {"start": (0, 0, 0, 1), "gate": (0, 0, 0, 1), "call": (0, 1, 0, 0)}
    assert_problem(await call(http, "POST", path, {"filter": {"nope": 1}}), 400, "filter.nope")
    assert_problem(await call(http, "POST", path, {"sort": []}), 400, "sort")


async def test_decision_definitions_and_requirements(http: aiohttp.ClientSession) -> None:
    deployed = await deploy(http, FIXTURES / "dmn" / "discount.dmn")
    drg = next(d["decisionRequirements"] for d in deployed["deployments"] if d.get("decisionRequirements"))
    drg_key = drg["decisionRequirementsKey"]
    query = {"filter": {"decisionRequirementsKey": drg_key}, "sort": [{"field": "decisionDefinitionId"}]}
    found = await until_search(http, "decision-definitions", query, lambda a: len(a["items"]) == 2)
    first = found["items"][0]
    assert first == {
        "decisionDefinitionId": "customer_level",
        "name": "Customer level",
        "version": 1,
        "decisionRequirementsId": "discount_drg",
        "tenantId": "<default>",
        "decisionDefinitionKey": first["decisionDefinitionKey"],
        "decisionRequirementsKey": drg_key,
        "decisionRequirementsName": "Discounts",
        "decisionRequirementsVersion": drg["version"],
    }
    status, item = await call(http, "GET", f"/v2/decision-definitions/{first['decisionDefinitionKey']}")
    assert (status, item) == (200, first)
    status, xml = await _text(http, f"/v2/decision-definitions/{first['decisionDefinitionKey']}/xml")
    assert status == 200 and 'id="discount_drg"' in xml
    latest = {"filter": {"decisionDefinitionId": "discount", "isLatestVersion": True}}
    status, newest = await call(http, "POST", "/v2/decision-definitions/search", latest)
    assert status == 200 and [d["decisionRequirementsKey"] for d in newest["items"]] == [drg_key]

    found = await until_search(
        http, "decision-requirements", {"filter": {"decisionRequirementsKey": drg_key}}, lambda a: a["items"]
    )
    assert found["items"] == [
        {
            "decisionRequirementsName": "Discounts",
            "version": drg["version"],
            "decisionRequirementsId": "discount_drg",
            "resourceName": "discount.dmn",
            "tenantId": "<default>",
            "decisionRequirementsKey": drg_key,
        }
    ]
    status, item = await call(http, "GET", f"/v2/decision-requirements/{drg_key}")
    assert (status, item) == (200, found["items"][0])
    status, xml = await _text(http, f"/v2/decision-requirements/{drg_key}/xml")
    assert status == 200 and xml.lstrip().startswith("<?xml") and 'name="Discounts"' in xml

    status, resource = await call(http, "GET", f"/v2/resources/{drg_key}")
    assert status == 200 and resource == {
        "resourceName": "discount.dmn",
        "version": drg["version"],
        "versionTag": None,
        "resourceId": "discount_drg",
        "tenantId": "<default>",
        "resourceKey": drg_key,
    }
    assert_problem(
        await call(http, "GET", f"/v2/resources/{drg_key}/content"), 406, f"/v2/decision-requirements/{drg_key}/xml"
    )

    # deleted: gone from every read
    assert (await call(http, "POST", f"/v2/resources/{drg_key}/deletion"))[0] == 200
    await until_search(
        http, "decision-requirements", {"filter": {"decisionRequirementsKey": drg_key}}, lambda a: not a["items"]
    )
    assert_problem(await call(http, "GET", f"/v2/decision-definitions/{first['decisionDefinitionKey']}/xml"), 404)
    assert_problem(await call(http, "GET", f"/v2/decision-requirements/{drg_key}"), 404, drg_key)
    assert_problem(await call(http, "GET", f"/v2/resources/{drg_key}"), 404)


async def test_linked_forms_and_resources(http: aiohttp.ClientSession, resources: Path) -> None:
    deployed = await deploy(http, resources / "reads-forms.bpmn", resources / "reads-approval.form")
    process = next(d["processDefinition"] for d in deployed["deployments"] if d.get("processDefinition"))
    form = next(d["form"] for d in deployed["deployments"] if d.get("form"))
    definition = process["processDefinitionKey"]
    instance = (await create(http, {"processDefinitionKey": definition}))["processInstanceKey"]
    tasks = await until_search(
        http,
        "user-tasks",
        {"filter": {"processInstanceKey": instance}},
        lambda a: a["items"] and a["items"][0]["formKey"],
    )
    [task] = tasks["items"]
    expected = {
        "tenantId": "<default>",
        "formId": "reads-approval",
        "schema": json.dumps(FORM),
        "version": form["version"],
        "formKey": form["formKey"],
    }
    status, linked = await call(http, "GET", f"/v2/user-tasks/{task['userTaskKey']}/form")
    assert (status, linked) == (200, expected)
    status, start = await call(http, "GET", f"/v2/process-definitions/{definition}/form")
    assert (status, start) == (200, expected)
    status, item = await call(http, "GET", f"/v2/process-definitions/{definition}")
    assert status == 200 and item["hasStartForm"] is True

    # an external form is not served: 204
    assert await call(http, "POST", f"/v2/user-tasks/{task['userTaskKey']}/completion") == (204, None)
    external = await until_search(
        http,
        "user-tasks",
        {"filter": {"processInstanceKey": instance, "elementId": "external"}},
        lambda a: a["items"],
    )
    assert await call(http, "GET", f"/v2/user-tasks/{external['items'][0]['userTaskKey']}/form") == (204, None)
    other = (await deploy(http, FIXTURES / "bpmn" / "one-task.bpmn"))["deployments"][0]["processDefinition"]
    await until(http, "GET", f"/v2/process-definitions/{other['processDefinitionKey']}", bool, "the definition")
    assert await call(http, "GET", f"/v2/process-definitions/{other['processDefinitionKey']}/form") == (204, None)
    status, item = await call(http, "GET", f"/v2/process-definitions/{other['processDefinitionKey']}")
    assert status == 200 and item["hasStartForm"] is False

    status, resource = await call(http, "GET", f"/v2/resources/{form['formKey']}")
    assert (status, resource) == (
        200,
        {
            "resourceName": "reads-approval.form",
            "version": form["version"],
            "versionTag": None,
            "resourceId": "reads-approval",
            "tenantId": "<default>",
            "resourceKey": form["formKey"],
        },
    )
    assert await call(http, "GET", f"/v2/resources/{form['formKey']}/content") == (200, FORM)
    status, bpmn = await call(http, "GET", f"/v2/resources/{definition}")
    assert status == 200 and (bpmn["resourceName"], bpmn["resourceId"]) == ("reads-forms.bpmn", "reads-forms")
    assert_problem(await call(http, "GET", f"/v2/resources/{definition}/content"), 406, "process-definitions")


async def test_unknown_keys_are_404_and_bad_keys_400(http: aiohttp.ClientSession) -> None:
    # searches in Camunda: nothing of an unknown key
    for path in (
        f"/v2/process-instances/{UNKNOWN}/statistics/element-instances",
        f"/v2/process-instances/{UNKNOWN}/sequence-flows",
        f"/v2/process-definitions/{UNKNOWN}/statistics/element-instances",
    ):
        assert await call(http, "GET", path) == (200, {"items": []})
    for path in (
        f"/v2/process-instances/{UNKNOWN}/call-hierarchy",
        f"/v2/process-definitions/{UNKNOWN}/form",
        f"/v2/user-tasks/{UNKNOWN}/form",
        f"/v2/decision-definitions/{UNKNOWN}",
        f"/v2/decision-definitions/{UNKNOWN}/xml",
        f"/v2/decision-requirements/{UNKNOWN}",
        f"/v2/decision-requirements/{UNKNOWN}/xml",
        f"/v2/resources/{UNKNOWN}",
        f"/v2/resources/{UNKNOWN}/content",
    ):
        assert_problem(await call(http, "GET", path), 404, UNKNOWN, title="NOT_FOUND")
    assert_problem(await call(http, "POST", f"/v2/process-instances/{UNKNOWN}/incidents/search", {}), 404, UNKNOWN)
    assert_problem(await call(http, "GET", "/v2/process-instances/abc/sequence-flows"), 400, "processInstanceKey")


async def test_status_and_the_openapi_document(http: aiohttp.ClientSession) -> None:
    assert await call(http, "GET", "/v2/status") == (204, None)
    status, document = await call(http, "GET", "/v2/openapi.json")
    assert status == 200
    paths = document["paths"]
    for path, method in (
        ("/v2/process-definitions/{processDefinitionKey}/statistics/element-instances", "post"),
        ("/v2/process-instances/{processInstanceKey}/statistics/element-instances", "get"),
        ("/v2/process-instances/{processInstanceKey}/sequence-flows", "get"),
        ("/v2/process-instances/{processInstanceKey}/call-hierarchy", "get"),
        ("/v2/process-instances/{processInstanceKey}/incidents/search", "post"),
        ("/v2/decision-definitions/search", "post"),
        ("/v2/decision-definitions/{decisionDefinitionKey}/xml", "get"),
        ("/v2/decision-requirements/{decisionRequirementsKey}", "get"),
        ("/v2/resources/{resourceKey}/content", "get"),
        ("/v2/user-tasks/{userTaskKey}/form", "get"),
        ("/v2/process-definitions/{processDefinitionKey}/form", "get"),
        ("/v2/status", "get"),
    ):
        assert method in paths.get(path, {}), path


# -- the official Python SDK -------------------------------------------------------------------------------------


def test_the_python_sdk_reads_the_same(weir: WeirProcess, resources: Path) -> None:
    """The SDK's own methods, decoding strictly: a wrong or missing field would fail here."""
    sdk = pytest.importorskip("camunda_orchestration_sdk", reason="camunda-orchestration-sdk not installed")
    configuration = {"CAMUNDA_REST_ADDRESS": weir.rest_url, "CAMUNDA_AUTH_STRATEGY": "NONE"}
    with sdk.CamundaClient(configuration=configuration) as client:
        client.deploy_resources_from_files(
            [resources / "reads-calls.bpmn", resources / "reads-forms.bpmn", resources / "reads-approval.form"]
        )
        client.get_status()
        created = client.create_process_instance(
            data=sdk.ProcessCreationById.from_dict({"processDefinitionId": "reads-caller", "variables": {"skip": True}})
        )
        root = str(created.process_instance_key)
        flows = _eventually(lambda: client.get_process_instance_sequence_flows(root).items, "the flows")
        assert sorted(f.element_id for f in flows) == ["to-gate", "to-skip"]
        assert {str(f.root_process_instance_key) for f in flows} == {root}
        [entry] = client.get_process_instance_call_hierarchy(root)
        assert str(entry.process_instance_key) == root and entry.process_definition_name == "Reads caller"
        statistics = client.get_process_instance_statistics(root).items
        assert {s.element_id: s.completed for s in statistics} == {"start": 1, "gate": 1, "skipped": 1}
        definition = str(created.process_definition_key)
        by_definition = client.get_process_definition_statistics(definition).items
        assert {s.element_id for s in by_definition} >= {"start", "gate", "skipped"}
        client.deploy_resources_from_files([FIXTURES / "dmn" / "greeting.dmn"])
        greeting = sdk.DecisionDefinitionSearchQuery.from_dict({"filter": {"decisionDefinitionId": "greeting"}})
        found = _eventually(lambda: client.search_decision_definitions(data=greeting).items, "the decision")
        decision = client.get_decision_definition(str(found[0].decision_definition_key))
        assert decision.decision_definition_id == "greeting"
        forms = client.create_process_instance(
            data=sdk.ProcessCreationById.from_dict({"processDefinitionId": "reads-forms"})
        )
        task = _eventually(
            lambda: (
                client.search_user_tasks(
                    data=sdk.UserTaskSearchQuery.from_dict(
                        {"filter": {"processInstanceKey": str(forms.process_instance_key)}}
                    )
                ).items
            ),
            "the user task",
        )[0]
        form = client.get_user_task_form(str(task.user_task_key))
        assert form.form_id == "reads-approval" and json.loads(form.schema) == FORM


def _eventually(find: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + 15.0
    while True:
        found = find()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


async def until_search(http: aiohttp.ClientSession, entity: str, query: dict, check: Callable[[Any], Any]) -> dict:
    deadline = asyncio.get_running_loop().time() + 15.0
    while True:
        status, answer = await call(http, "POST", f"/v2/{entity}/search", query)
        assert status == 200, answer
        if check(answer):
            return answer
        assert asyncio.get_running_loop().time() < deadline, f"timed out searching {entity}: {answer}"
        await asyncio.sleep(0.1)


async def _text(http: aiohttp.ClientSession, path: str) -> tuple[int, str]:
    async with http.get(path) as response:
        return response.status, await response.text()
