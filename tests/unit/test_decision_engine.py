"""DMN in the engine, on an in-process partition: deploying decisions and forms (versions, duplicates, records),
DECISION_EVALUATION EVALUATE, business rule tasks (result variable, records, incidents and their resolution), and
replay of all of it."""

from __future__ import annotations

import json
from pathlib import Path

from broker.engine.behaviors import TENANT
from broker.protocol.enums import (
    DecisionEvaluationIntent,
    DeploymentIntent,
    JobIntent,
    RecordType,
    RejectionType,
    ResourceDeletionIntent,
    ValueType,
)
from broker.protocol.record import Record
from broker.tools.inspect import iter_records
from tests.harness import BPMN
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live

DMN = BPMN.parent / "dmn"
FORM = b'{"id": "approval-form", "components": [], "type": "default"}'


async def _deploy(d: Driver, *resources: tuple[str, bytes]) -> Record:
    value = {"resources": [{"resourceName": n, "resource": data} for n, data in resources]}
    return await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, value)


def _dmn(name: str) -> tuple[str, bytes]:
    return name, (DMN / name).read_bytes()


async def _evaluate(d: Driver, variables: dict, *, decision_id: str = "", key: int = -1) -> Record:
    value = {"decisionId": decision_id, "decisionKey": key, "variables": variables, "tenantId": TENANT}
    return await d.send(ValueType.DECISION_EVALUATION, DecisionEvaluationIntent.EVALUATE, value)


def _records(directory: Path, value_type: ValueType) -> list[Record]:
    return [r for r in iter_records(directory) if r.value_type == value_type and r.record_type == RecordType.EVENT]


async def test_deploying_decisions_and_forms_versions_and_distribution_metadata(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    first = accepted(await _deploy(d, _dmn("discount.dmn"), ("approval.form", FORM)))
    [drg] = first.value["decisionRequirementsMetadata"]
    assert drg["decisionRequirementsId"] == "discount_drg" and drg["decisionRequirementsVersion"] == 1
    assert "resource" not in drg and drg["isDuplicate"] is False
    decisions = {m["decisionId"]: m for m in first.value["decisionsMetadata"]}
    assert set(decisions) == {"customer_level", "discount"}
    assert {m["version"] for m in decisions.values()} == {1}
    assert all(m["decisionRequirementsKey"] == drg["decisionRequirementsKey"] for m in decisions.values())
    [form] = first.value["formMetadata"]
    assert form["formId"] == "approval-form" and form["version"] == 1
    # identical re-deploy: same keys, duplicates
    again = accepted(await _deploy(d, _dmn("discount.dmn"), ("approval.form", FORM)))
    assert again.value["decisionRequirementsMetadata"][0]["decisionRequirementsKey"] == drg["decisionRequirementsKey"]
    assert again.value["decisionRequirementsMetadata"][0]["isDuplicate"] is True
    assert {m["decisionKey"] for m in again.value["decisionsMetadata"]} == {
        m["decisionKey"] for m in decisions.values()
    }
    # a changed resource: new versions
    changed = (DMN / "discount.dmn").read_bytes().replace(b"0.15", b"0.2")
    second = accepted(await _deploy(d, ("discount.dmn", changed)))
    assert second.value["decisionRequirementsMetadata"][0]["decisionRequirementsVersion"] == 2
    assert {m["version"] for m in second.value["decisionsMetadata"]} == {2}
    bad = await _deploy(d, ("broken.dmn", b"<definitions/>"), ("notes.txt", b"x"))
    assert bad.record_type == RecordType.COMMAND_REJECTION and bad.rejection_type == RejectionType.INVALID_ARGUMENT
    assert "'broken.dmn': Expected a DMN 'definitions'" in bad.rejection_reason
    assert "'notes.txt': Expected the resource to be a BPMN model" in bad.rejection_reason
    no_id = await _deploy(d, ("anonymous.form", b'{"components": []}'), ("broken.form", b"{"))
    assert "'anonymous.form': Expected the form to have a non-empty 'id'" in no_id.rejection_reason
    assert "'broken.form': the form is not valid JSON" in no_id.rejection_reason
    twice = await _deploy(d, _dmn("discount.dmn"), ("copy.dmn", (DMN / "discount.dmn").read_bytes()))
    assert twice.rejection_type == RejectionType.INVALID_ARGUMENT
    assert (
        "Expected the decision requirements ids to be unique within a deployment but found a duplicated id "
        "'discount_drg' in the resources 'discount.dmn' and 'copy.dmn'." in twice.rejection_reason
    )
    assert "Expected the decision ids to be unique within a deployment" in twice.rejection_reason
    await d.close()
    directory = tmp_path / "p" / "1"
    assert len(_records(directory, ValueType.DECISION_REQUIREMENTS)) == 2
    assert len(_records(directory, ValueType.DECISION)) == 4
    assert len(_records(directory, ValueType.FORM)) == 1
    check_replay_equals_live(directory, tmp_path)


async def test_evaluate_decision_by_id_and_key(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    deployed = accepted(await _deploy(d, _dmn("discount.dmn")))
    rec = accepted(await _evaluate(d, {"orders": 12, "total": 5}, decision_id="discount"))
    assert rec.intent == DecisionEvaluationIntent.EVALUATED
    assert json.loads(rec.value["decisionOutput"]) == 0.15
    assert [e["decisionId"] for e in rec.value["evaluatedDecisions"]] == ["customer_level", "discount"]
    level = rec.value["evaluatedDecisions"][0]
    assert level["decisionType"] == "DECISION_TABLE" and level["decisionOutput"] == '"gold"'
    assert level["evaluatedInputs"] == [{"inputId": "in_orders", "inputName": "Orders", "inputValue": "12"}]
    assert level["matchedRules"] == [
        {
            "ruleId": "gold",
            "ruleIndex": 1,
            "evaluatedOutputs": [{"outputId": "out_level", "outputName": "level", "outputValue": '"gold"'}],
        }
    ]
    key = next(m["decisionKey"] for m in deployed.value["decisionsMetadata"] if m["decisionId"] == "customer_level")
    by_key = accepted(await _evaluate(d, {"orders": 1}, key=key))
    assert by_key.value["decisionOutput"] == '"basic"' and by_key.value["decisionKey"] == key
    failed = accepted(await _evaluate(d, {"orders": 4, "total": 120}, decision_id="discount"))
    assert failed.intent == DecisionEvaluationIntent.FAILED
    assert failed.value["failedDecisionId"] == "discount"
    assert "aren't allowed for UNIQUE hit policy" in failed.value["evaluationFailureMessage"]
    missing = await _evaluate(d, {}, decision_id="nope")
    assert missing.rejection_type == RejectionType.NOT_FOUND
    neither = await _evaluate(d, {})
    assert neither.rejection_type == RejectionType.INVALID_ARGUMENT
    await d.close()


async def test_business_rule_task_result_records_incidents_and_resolution(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("business-rule-task.bpmn"))
    # the decision is missing: CALLED_DECISION_ERROR, resolved after deploying it
    created = accepted(
        await d.create("business-rule-task", {"decisionToCall": "discount", "orders": 4, "total": 70, "name": "Ada"})
    )
    await d.settle()
    [(incident_key, incident)] = d.incidents()
    assert incident["errorType"] == "CALLED_DECISION_ERROR"
    assert "no decision found for id 'discount'" in incident["errorMessage"]
    accepted(await _deploy(d, _dmn("discount.dmn"), _dmn("greeting.dmn")))
    accepted(await d.resolve(incident_key))
    await d.settle()
    assert d.incidents() == []
    [job_key] = await d.activate("check-discount")
    job = d.read(lambda s: s.jobs.get(job_key))
    assert job is not None
    pi_vars = d.read(lambda s: s.variables.local(created.key))
    assert pi_vars["discount"] == 0.05
    assert pi_vars["message"] == "Hello Ada!"
    assert "text" not in pi_vars  # output mappings decide what leaves the task
    accepted(await d.complete(job_key))
    # an evaluation failure: DECISION_EVALUATION_ERROR, fixed by variables, then resolved
    failing = accepted(
        await d.create("business-rule-task", {"decisionToCall": "discount", "orders": 4, "total": 120, "name": "Bo"})
    )
    await d.settle()
    [(incident_key, incident)] = d.incidents()
    assert incident["errorType"] == "DECISION_EVALUATION_ERROR"
    assert incident["errorMessage"].startswith(
        "Expected to evaluate decision 'discount', but multiple values aren't allowed for UNIQUE hit policy"
    )
    accepted(await d.set_variables(failing.key, {"total": 60}))
    accepted(await d.resolve(incident_key))
    await d.settle()
    assert d.incidents() == []
    [job_key] = await d.activate("check-discount")
    accepted(await d.send(ValueType.JOB, JobIntent.COMPLETE, {"variables": {}}, job_key))
    await d.settle()
    await d.close()
    directory = tmp_path / "p" / "1"
    evaluations = _records(directory, ValueType.DECISION_EVALUATION)
    assert [r.intent for r in evaluations] == [
        DecisionEvaluationIntent.EVALUATED,
        DecisionEvaluationIntent.EVALUATED,
        DecisionEvaluationIntent.FAILED,
        DecisionEvaluationIntent.EVALUATED,
        DecisionEvaluationIntent.EVALUATED,
    ]
    first = evaluations[0].value
    assert first["processInstanceKey"] == created.key and first["elementId"] == "decide"
    assert first["bpmnProcessId"] == "business-rule-task" and first["decisionId"] == "discount"
    assert evaluations[2].value["failedDecisionId"] == "discount"
    check_replay_equals_live(directory, tmp_path)


def _tagged_dmn(output: str, tag: str) -> bytes:
    return (
        '<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" '
        'xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="bound_drg" name="Bound" namespace="x">'
        f'<decision id="bound" name="Bound"><extensionElements><zeebe:versionTag value="{tag}"/></extensionElements>'
        f"<literalExpression><text>{output}</text></literalExpression></decision></definitions>"
    ).encode()


def _binding_process(process_id: str, binding: str) -> bytes:
    return (
        '<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" '
        'xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="x">'
        f'<bpmn:process id="{process_id}" isExecutable="true"><bpmn:startEvent id="s"/>'
        '<bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="t"/>'
        f'<bpmn:businessRuleTask id="t"><bpmn:extensionElements><zeebe:calledDecision decisionId="bound" '
        f'resultVariable="r" {binding}/></bpmn:extensionElements></bpmn:businessRuleTask>'
        '<bpmn:sequenceFlow id="f2" sourceRef="t" targetRef="w"/>'
        '<bpmn:serviceTask id="w"><bpmn:extensionElements><zeebe:taskDefinition type="bound-check"/>'
        '</bpmn:extensionElements></bpmn:serviceTask><bpmn:sequenceFlow id="f3" sourceRef="w" targetRef="e"/>'
        '<bpmn:endEvent id="e"/></bpmn:process></bpmn:definitions>'
    ).encode()


async def test_business_rule_task_bindings_latest_deployment_and_version_tag(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(
        await _deploy(
            d,
            ("bound.dmn", _tagged_dmn('"v1"', "one")),
            ("by-deployment.bpmn", _binding_process("by-deployment", 'bindingType="deployment"')),
        )
    )
    accepted(await _deploy(d, ("bound.dmn", _tagged_dmn('"v2"', "two"))))
    accepted(
        await _deploy(
            d,
            ("by-tag.bpmn", _binding_process("by-tag", 'bindingType="versionTag" versionTag="one"')),
            ("latest.bpmn", _binding_process("latest", "")),
        )
    )
    results = {}
    for process_id in ("by-deployment", "by-tag", "latest"):
        created = accepted(await d.create(process_id, {}))
        await d.settle()
        results[process_id] = d.read(lambda s, k=created.key: s.variables.local(k)).get("r")
    assert results == {"by-deployment": "v1", "by-tag": "v1", "latest": "v2"}
    unknown_tag = _binding_process("missing-tag", 'bindingType="versionTag" versionTag="x"')
    accepted(await _deploy(d, ("missing-tag.bpmn", unknown_tag)))
    created = accepted(await d.create("missing-tag", {}))
    await d.settle()
    [(_key, incident)] = [i for i in d.incidents() if i[1]["processInstanceKey"] == created.key]
    assert incident["errorType"] == "CALLED_DECISION_ERROR" and "version tag 'x'" in incident["errorMessage"]
    await d.close()
    check_replay_equals_live(tmp_path / "p" / "1", tmp_path)


async def test_deleting_a_drg_and_a_form(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    first = accepted(await _deploy(d, _dmn("discount.dmn"), ("approval.form", FORM)))
    changed = (DMN / "discount.dmn").read_bytes().replace(b"0.15", b"0.2")
    second = accepted(await _deploy(d, ("discount.dmn", changed)))
    drg_v2 = second.value["decisionRequirementsMetadata"][0]["decisionRequirementsKey"]
    delete = {"resourceKey": drg_v2}
    deleted = accepted(await d.send(ValueType.RESOURCE_DELETION, ResourceDeletionIntent.DELETE, delete))
    assert deleted.intent == ResourceDeletionIntent.DELETED and deleted.value["resourceKey"] == drg_v2
    # the previous version is the latest again
    rec = accepted(await _evaluate(d, {"orders": 12}, decision_id="discount"))
    assert json.loads(rec.value["decisionOutput"]) == 0.15 and rec.value["decisionVersion"] == 1
    # a new deployment follows the latest remaining version, as in Zeebe
    third = accepted(await _deploy(d, ("discount.dmn", changed)))
    assert third.value["decisionRequirementsMetadata"][0]["decisionRequirementsVersion"] == 2
    form_key = first.value["formMetadata"][0]["formKey"]
    accepted(await d.send(ValueType.RESOURCE_DELETION, ResourceDeletionIntent.DELETE, {"resourceKey": form_key}))
    assert d.read(lambda s: s.forms.latest(TENANT, "approval-form")) is None
    again = await d.send(ValueType.RESOURCE_DELETION, ResourceDeletionIntent.DELETE, {"resourceKey": form_key})
    assert again.rejection_type == RejectionType.NOT_FOUND
    assert again.rejection_reason == f"Expected to delete resource but no resource found with key `{form_key}`"
    await d.close()
    directory = tmp_path / "p" / "1"
    deleted_decisions = [r for r in _records(directory, ValueType.DECISION) if r.intent == 1]
    assert sorted(r.value["decisionId"] for r in deleted_decisions) == ["customer_level", "discount"]
    check_replay_equals_live(directory, tmp_path)
