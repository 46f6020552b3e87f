"""DMN against a real ``weir start``: deploying decisions and forms, EvaluateDecision on every partition, business
rule tasks calling a decision, and a failing decision's incident fixed and resolved."""

import asyncio
import json
import uuid

import grpc
import pytest
from pyzeebe import ZeebeClient, create_insecure_channel
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import BPMN, WeirProcess, eventually
from tests.integration.clients import (
    Stub,
    activate,
    create,
    deploy,
    incidents_of,
    is_active,
    rpc_error,
    variables_of,
)

DMN = BPMN.parent / "dmn"


@pytest.fixture(scope="module")
def weir(tmp_path_factory: pytest.TempPathFactory):  # three partitions: decisions must reach them all
    w = WeirProcess(tmp_path_factory.mktemp("weir") / "data", extra_args=["--partitions", "3"])
    w.start()
    try:
        yield w
    finally:
        w.stop()


def _deploy_dmn(stub: Stub, *names: str) -> pb.DeployResourceResponse:
    resources = [pb.Resource(name=n, content=(DMN / n).read_bytes()) for n in names]
    return stub.DeployResource(pb.DeployResourceRequest(resources=resources), timeout=10)


def _evaluate(stub: Stub, variables: dict, **kw: object) -> pb.EvaluateDecisionResponse:
    request = pb.EvaluateDecisionRequest(variables=json.dumps(variables), **kw)
    return stub.EvaluateDecision(request, timeout=10)


def _wait_everywhere(stub: Stub, process_id: str = "") -> None:
    """Distribution to the other partitions follows the deployment's answer: wait until all three have it."""

    def everywhere() -> bool:
        for _ in range(3):  # creations and evaluations round-robin over the partitions
            try:
                _evaluate(stub, {"orders": 12, "total": 5}, decisionId="discount")
                if process_id:
                    stub.CancelProcessInstance(
                        pb.CancelProcessInstanceRequest(processInstanceKey=create(stub, process_id, {})), timeout=10
                    )
            except grpc.RpcError:
                return False
        return True

    eventually(everywhere, timeout=10, what="the deployments on every partition")


def test_deploy_answers_with_decisions_requirements_and_forms(stub: Stub) -> None:
    form_id = f"form-{uuid.uuid4().hex[:8]}"
    form = pb.Resource(name="approve.form", content=json.dumps({"id": form_id, "components": []}).encode())
    dmn = pb.Resource(name="greeting.dmn", content=(DMN / "greeting.dmn").read_bytes())
    response = stub.DeployResource(pb.DeployResourceRequest(resources=[dmn, form]), timeout=10)
    kinds = [d.WhichOneof("Metadata") for d in response.deployments]
    assert kinds == ["decision", "decisionRequirements", "form"]
    decision, drg, deployed_form = (getattr(d, k) for d, k in zip(response.deployments, kinds, strict=True))
    assert decision.dmnDecisionId == "greeting" and decision.dmnDecisionName == "Greeting"
    assert decision.dmnDecisionRequirementsId == "greeting_drg"
    assert decision.decisionRequirementsKey == drg.decisionRequirementsKey
    assert drg.resourceName == "greeting.dmn" and drg.dmnDecisionRequirementsName == "Greeting"
    assert deployed_form.formId == form_id and deployed_form.version == 1 and deployed_form.tenantId == "<default>"
    bad = rpc_error(
        stub.DeployResource,
        pb.DeployResourceRequest(resources=[pb.Resource(name="bad.dmn", content=b"<definitions/>")]),
    )
    assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "'bad.dmn': Expected a DMN 'definitions' element" in bad.details()


def test_evaluate_decision_by_id_and_key_on_every_partition(stub: Stub) -> None:
    deployed = _deploy_dmn(stub, "discount.dmn")
    keys = {d.decision.dmnDecisionId: d.decision.decisionKey for d in deployed.deployments if d.decision.decisionKey}
    _wait_everywhere(stub)
    for _ in range(3):  # round-robin over the three partitions: each has the decisions
        response = _evaluate(stub, {"orders": 12, "total": 5}, decisionId="discount")
        assert not response.failureMessage
        assert json.loads(response.decisionOutput) == 0.15
        assert response.decisionKey == keys["discount"] and response.decisionInstanceKey > 0
        assert [d.decisionId for d in response.evaluatedDecisions] == ["customer_level", "discount"]
    level = response.evaluatedDecisions[0]
    assert level.decisionType == "DECISION_TABLE" and level.decisionOutput == '"gold"'
    assert [(i.inputId, i.inputName, i.inputValue) for i in level.evaluatedInputs] == [("in_orders", "Orders", "12")]
    [rule] = level.matchedRules
    assert (rule.ruleId, rule.ruleIndex) == ("gold", 1)
    assert [(o.outputId, o.outputName, o.outputValue) for o in rule.evaluatedOutputs] == [
        ("out_level", "level", '"gold"')
    ]
    by_key = _evaluate(stub, {"orders": 0}, decisionKey=keys["customer_level"])
    assert by_key.decisionId == "customer_level" and by_key.decisionOutput == '"basic"'
    failed = _evaluate(stub, {"orders": 4, "total": 120}, decisionId="discount")
    assert failed.failedDecisionId == "discount"
    assert "aren't allowed for UNIQUE hit policy" in failed.failureMessage
    missing = rpc_error(stub.EvaluateDecision, pb.EvaluateDecisionRequest(decisionId="no-such-decision"))
    assert missing.code() == grpc.StatusCode.NOT_FOUND
    neither = rpc_error(stub.EvaluateDecision, pb.EvaluateDecisionRequest())
    assert neither.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_business_rule_task_puts_the_decision_output_in_its_result_variable(stub: Stub) -> None:
    _deploy_dmn(stub, "discount.dmn", "greeting.dmn")
    d = deploy(stub, "business-rule-task.bpmn")
    _wait_everywhere(stub, d.pid())
    pi = create(stub, d.pid(), {"decisionToCall": "discount", "orders": 12, "total": 10, "name": "Ada"})
    (job,) = activate(stub, d.type("check-discount"))
    assert job.processInstanceKey == pi
    variables = variables_of(job)
    assert variables["discount"] == 0.15 and variables["message"] == "Hello Ada!"
    assert "text" not in variables


def test_a_failing_decision_raises_an_incident_fixed_by_variables_and_resolved(weir: WeirProcess, stub: Stub) -> None:
    _deploy_dmn(stub, "discount.dmn", "greeting.dmn")
    d = deploy(stub, "business-rule-task.bpmn")
    pi = create(stub, d.pid(), {"decisionToCall": "discount", "orders": 4, "total": 120, "name": "Bo"})
    (incident,) = eventually(lambda: incidents_of(weir, pi), what="the decision's incident")
    assert incident.error_type == "DECISION_EVALUATION_ERROR"
    assert incident.element_id == "decide"
    assert incident.error_message.startswith(
        "Expected to evaluate decision 'discount', but multiple values aren't allowed for UNIQUE hit policy"
    )
    assert is_active(stub, pi)
    stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=pi, variables='{"total": 60}'), timeout=10)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    (job,) = activate(stub, d.type("check-discount"))
    assert variables_of(job)["discount"] == 0.05


def test_delete_resource_removes_a_drg_on_every_partition(stub: Stub) -> None:
    drg_id = f"drg-{uuid.uuid4().hex[:8]}"
    decision_id = f"answer-{uuid.uuid4().hex[:8]}"
    content = (
        f'<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" id="{drg_id}" namespace="x">'
        f'<decision id="{decision_id}"><literalExpression><text>42</text></literalExpression></decision></definitions>'
    ).encode()
    response = stub.DeployResource(
        pb.DeployResourceRequest(resources=[pb.Resource(name="answer.dmn", content=content)]), timeout=10
    )
    (drg,) = [d.decisionRequirements for d in response.deployments if d.HasField("decisionRequirements")]

    def evaluates_everywhere(expected: bool) -> bool:
        for _ in range(3):
            try:
                found = _evaluate(stub, {}, decisionId=decision_id).decisionOutput == "42"
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.NOT_FOUND:
                    raise
                found = False
            if found != expected:
                return False
        return True

    eventually(lambda: evaluates_everywhere(True), timeout=10, what="the decision on every partition")
    stub.DeleteResource(pb.DeleteResourceRequest(resourceKey=drg.decisionRequirementsKey), timeout=10)
    eventually(lambda: evaluates_everywhere(False), timeout=10, what="the decision gone from every partition")
    again = rpc_error(stub.DeleteResource, pb.DeleteResourceRequest(resourceKey=drg.decisionRequirementsKey))
    assert again.code() == grpc.StatusCode.NOT_FOUND


def test_pyzeebe_deploys_and_evaluates_decisions(weir: WeirProcess) -> None:
    async def scenario() -> tuple[object, object]:
        client = ZeebeClient(create_insecure_channel(grpc_address=weir.address))
        deployed = await client.deploy_resource(str(DMN / "greeting.dmn"))
        for _ in range(100):  # the partition asked may not have received the deployment yet
            try:
                return deployed, await client.evaluate_decision(None, "greeting", variables={"name": "pyzeebe"})
            except Exception:
                await asyncio.sleep(0.1)
        raise AssertionError("the decision never became available")

    deployed, result = asyncio.run(scenario())
    kinds = {type(d).__name__ for d in deployed.deployments}  # type: ignore[attr-defined]
    assert any("Decision" in k for k in kinds), kinds
    assert result.decision_output == "Hello pyzeebe"  # type: ignore[attr-defined]
    assert result.evaluated_decisions[0].decision_type == "LITERAL_EXPRESSION"  # type: ignore[attr-defined]


def _wait_for_price(stub: Stub) -> None:
    """boxed.dmn reached every partition once each of them evaluates its 'price' decision."""

    def everywhere() -> bool:
        try:
            return all(not _evaluate(stub, {"amount": 1}, decisionId="price").failureMessage for _ in range(3))
        except grpc.RpcError:
            return False

    eventually(everywhere, timeout=10, what="boxed.dmn on every partition")


def test_evaluate_decision_with_bkms_boxed_expressions_and_type_refs(stub: Stub) -> None:
    deployed = _deploy_dmn(stub, "boxed.dmn")
    ids = [d.decision.dmnDecisionId for d in deployed.deployments if d.WhichOneof("Metadata") == "decision"]
    assert ids == ["price", "customerTier", "offer", "limits", "rates", "amounts", "dueDate", "label"]
    _wait_for_price(stub)
    price = _evaluate(stub, {"amount": 200}, decisionId="price")
    assert not price.failureMessage and json.loads(price.decisionOutput) == 180
    assert [d.decisionType for d in price.evaluatedDecisions] == ["LITERAL_EXPRESSION"]
    tier = _evaluate(stub, {"amount": 5}, decisionId="customerTier")
    assert json.loads(tier.decisionOutput) == "silver" and tier.evaluatedDecisions[0].decisionType == "INVOCATION"
    offer = _evaluate(stub, {"amount": 150}, decisionId="offer")
    assert json.loads(offer.decisionOutput) == {"tier": "gold", "doubled": 300}
    assert [(d.decisionId, d.decisionType) for d in offer.evaluatedDecisions] == [
        ("customerTier", "INVOCATION"),
        ("offer", "CONTEXT"),
    ]
    rates = _evaluate(stub, {}, decisionId="rates")
    assert json.loads(rates.decisionOutput) == [{"name": "standard", "rate": 0.1}, {"name": "member", "rate": 0.2}]
    assert rates.evaluatedDecisions[0].decisionType == "RELATION"
    amounts = _evaluate(stub, {"amount": 2}, decisionId="amounts")
    assert json.loads(amounts.decisionOutput) == [2, 4] and amounts.evaluatedDecisions[0].decisionType == "LIST"
    assert json.loads(_evaluate(stub, {}, decisionId="dueDate").decisionOutput) == "2024-01-02"
    label = _evaluate(stub, {"amount": 1}, decisionId="label")
    assert label.failedDecisionId == "label"
    assert label.failureMessage == (
        "Expected to evaluate decision 'label', but expected 'number' but found 'ValString(amount 1)'"
    )
    wrong_argument = _evaluate(stub, {"amount": "ten"}, decisionId="price")
    assert wrong_argument.failedDecisionId == "price"
    assert wrong_argument.failureMessage.endswith("expected 'number' but found 'ValString(ten)'")
    unsupported = rpc_error(
        stub.DeployResource,
        pb.DeployResourceRequest(
            resources=[
                pb.Resource(
                    name="fn.dmn",
                    content=(
                        b'<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" id="fn"><decision id="f">'
                        b"<functionDefinition><literalExpression><text>1</text></literalExpression>"
                        b"</functionDefinition></decision></definitions>"
                    ),
                )
            ]
        ),
    )
    assert unsupported.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Decision 'f': a function definition is not supported as decision logic" in unsupported.details()


def test_business_rule_task_calls_a_context_decision_and_a_bkm_type_failure_is_an_incident(
    weir: WeirProcess, stub: Stub
) -> None:
    _deploy_dmn(stub, "boxed.dmn", "greeting.dmn")
    d = deploy(stub, "business-rule-task.bpmn")
    pi = create(stub, d.pid(), {"decisionToCall": "offer", "amount": 150, "name": "Ada"})
    (job,) = activate(stub, d.type("check-discount"))
    assert job.processInstanceKey == pi
    assert variables_of(job)["discount"] == {"tier": "gold", "doubled": 300}
    stub.CompleteJob(pb.CompleteJobRequest(jobKey=job.key, variables="{}"), timeout=10)
    failing = create(stub, d.pid(), {"decisionToCall": "price", "amount": "ten", "name": "Bo"})
    (incident,) = eventually(lambda: incidents_of(weir, failing), what="the decision's incident")
    assert incident.error_type == "DECISION_EVALUATION_ERROR"
    assert incident.error_message == (
        "Expected to evaluate decision 'price', but failed to evaluate expression 'net(amount)': "
        "expected 'number' but found 'ValString(ten)'"
    )
    stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=failing, variables='{"amount": 100}'), timeout=10)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    (job,) = activate(stub, d.type("check-discount"))
    assert job.processInstanceKey == failing and variables_of(job)["discount"] == 90
