"""DMN decisions and forms in the engine: deploying them, evaluating decisions, and the records both write.

- Deployment (called from the DEPLOYMENT CREATE processor): a ``.dmn`` resource is one decision requirements graph
  (DRG) with its decisions, versioned per DRG id and per decision id; a ``.form`` resource is a form, versioned per
  form id. DECISION_REQUIREMENTS, DECISION and FORM CREATED events store them; the new ones are distributed to the
  other partitions with the deployment.
- Evaluation: :func:`evaluate` evaluates a deployed decision (with the DRG it was deployed in) and builds Zeebe's
  DECISION_EVALUATION record value: the output, every evaluated decision with its inputs and matched rules, or the
  failed decision and why. The EVALUATE command (EvaluateDecision RPC) and business rule tasks both use it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker import dmn
from broker.engine import behaviors as b
from broker.engine.bpmn import resource_checksum
from broker.engine.context import ProcessingContext
from broker.protocol.enums import (
    DecisionEvaluationIntent,
    DecisionIntent,
    DecisionRequirementsIntent,
    FormIntent,
    RejectionType,
    ValueType,
)
from broker.protocol.record import Record
from broker.protocol.values import TENANT

MAX_FORM_BYTES = 4 * 1024 * 1024


class DrgCache:
    """DRG key -> parsed :class:`dmn.Drg`, read from the stored DRG record (resource bytes) on first use."""

    def __init__(self, loader: Callable[[int], dict | None], size: int = 1000) -> None:
        self._loader = loader
        self._size = size
        self._drgs: dict[int, dmn.Drg] = {}

    def put(self, key: int, drg: dmn.Drg) -> None:
        if len(self._drgs) >= self._size:
            self._drgs.clear()
        self._drgs[key] = drg

    def get(self, key: int) -> dmn.Drg | None:
        drg = self._drgs.get(key)
        if drg is None:
            stored = self._loader(key)
            if stored is None:
                return None
            drg = dmn.parse_dmn(stored["resource"], stored["resourceName"])
            self.put(key, drg)
        return drg


# -- deployment ----------------------------------------------------------------------------------------------


def read_form_id(data: bytes) -> str:
    """The ``id`` of a form (Camunda form JSON); ValueError with the reason when there is none."""
    if len(data) > MAX_FORM_BYTES:
        raise ValueError(f"the form is larger than {MAX_FORM_BYTES} bytes")
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"the form is not valid JSON: {e}") from None
    form_id = document.get("id") if isinstance(document, dict) else None
    if not isinstance(form_id, str) or not form_id.strip():
        raise ValueError("Expected the form to have a non-empty 'id'")
    return form_id


@dataclass(slots=True)
class DmnResource:
    name: str
    data: bytes
    drg: dmn.Drg
    checksum: str = ""
    latest: dict | None = None
    duplicate: bool = False
    tenant: str = TENANT


@dataclass(slots=True)
class FormResource:
    name: str
    data: bytes
    form_id: str
    checksum: str = ""
    latest: dict | None = None
    duplicate: bool = False
    tenant: str = TENANT


def check_dmn(ctx: ProcessingContext, res: DmnResource, tenant: str) -> None:
    """Fill in the tenant, checksum, the tenant's latest stored version of the DRG and whether this is an identical
    re-deploy."""
    res.tenant = tenant
    res.checksum = resource_checksum(res.data).hex()
    res.latest = ctx.state.decision_requirements.latest(tenant, res.drg.id)
    res.duplicate = (
        res.latest is not None
        and res.latest["checksum"] == res.checksum
        and res.latest["resourceName"] == res.name
        and all(
            (ctx.state.decisions.latest(tenant, d.id) or {}).get("decisionRequirementsKey")
            == res.latest["decisionRequirementsKey"]
            for d in res.drg.decisions
        )
    )


def check_form(ctx: ProcessingContext, res: FormResource, tenant: str) -> None:
    res.tenant = tenant
    res.checksum = resource_checksum(res.data).hex()
    res.latest = ctx.state.forms.latest(tenant, res.form_id)
    res.duplicate = (
        res.latest is not None and res.latest["checksum"] == res.checksum and res.latest["resourceName"] == res.name
    )


def drg_metadata(stored: dict, *, duplicate: bool) -> dict:
    return {k: v for k, v in stored.items() if k not in ("resource", "duplicate")} | {"isDuplicate": duplicate}


def decision_metadata(stored: dict, *, duplicate: bool) -> dict:
    return {k: v for k, v in stored.items() if k != "duplicate"} | {"isDuplicate": duplicate}


def form_metadata(stored: dict, *, duplicate: bool) -> dict:
    return {k: v for k, v in stored.items() if k not in ("resource", "deploymentKey", "versionTag", "duplicate")} | {
        "isDuplicate": duplicate
    }


def deploy_dmn(ctx: ProcessingContext, res: DmnResource, deployment_key: int, *, keep: bool, out: dict) -> None:
    """Write the DRG and its decisions (or, when ``keep``, report the stored ones as duplicates) into ``out``."""
    if keep:
        assert res.latest is not None
        stored_drg = res.latest
        out["decisionRequirementsMetadata"].append(drg_metadata(stored_drg, duplicate=True))
        for decision in res.drg.decisions:
            stored = ctx.state.decisions.in_drg(stored_drg["decisionRequirementsKey"], decision.id)
            if stored is not None:
                out["decisionsMetadata"].append(decision_metadata(stored, duplicate=True))
        return
    drg_key = ctx.keys.next_key()
    stored_drg = {
        "decisionRequirementsId": res.drg.id,
        "decisionRequirementsName": res.drg.name,
        "decisionRequirementsVersion": ctx.state.decision_requirements.next_version(res.tenant, res.drg.id),
        "decisionRequirementsKey": drg_key,
        "namespace": res.drg.namespace,
        "resourceName": res.name,
        "checksum": res.checksum,
        "resource": res.data,
        "duplicate": False,
        "tenantId": res.tenant,
        "deploymentKey": deployment_key,
    }
    ctx.event(ValueType.DECISION_REQUIREMENTS, DecisionRequirementsIntent.CREATED, drg_key, stored_drg)
    b.services(ctx).drgs.put(drg_key, res.drg)
    out["decisionRequirements"].append(stored_drg)
    out["decisionRequirementsMetadata"].append(drg_metadata(stored_drg, duplicate=False))
    for decision in res.drg.decisions:
        key = ctx.keys.next_key()
        stored = {
            "decisionId": decision.id,
            "decisionName": decision.name,
            "version": ctx.state.decisions.next_version(res.tenant, decision.id),
            "decisionKey": key,
            "decisionRequirementsId": res.drg.id,
            "decisionRequirementsKey": drg_key,
            "duplicate": False,
            "tenantId": res.tenant,
            "deploymentKey": deployment_key,
            "versionTag": decision.version_tag,
        }
        ctx.event(ValueType.DECISION, DecisionIntent.CREATED, key, stored)
        out["decisions"].append(stored)
        out["decisionsMetadata"].append(decision_metadata(stored, duplicate=False))


def deploy_form(ctx: ProcessingContext, res: FormResource, deployment_key: int, *, keep: bool, out: dict) -> None:
    if keep:
        assert res.latest is not None
        out["formMetadata"].append(form_metadata(res.latest, duplicate=True))
        return
    key = ctx.keys.next_key()
    stored = {
        "formId": res.form_id,
        "version": ctx.state.forms.next_version(res.tenant, res.form_id),
        "formKey": key,
        "resourceName": res.name,
        "checksum": res.checksum,
        "resource": res.data,
        "duplicate": False,
        "tenantId": res.tenant,
        "deploymentKey": deployment_key,
        "versionTag": "",
    }
    ctx.event(ValueType.FORM, FormIntent.CREATED, key, stored)
    out["forms"].append(stored)
    out["formMetadata"].append(form_metadata(stored, duplicate=False))


def deploy_distributed(ctx: ProcessingContext, command: dict, out: dict) -> None:
    """Store DRGs, decisions and forms deployed on another partition under their keys and versions (idempotent)."""
    for stored in command.get("decisionRequirements") or []:
        if ctx.state.decision_requirements.get(stored["decisionRequirementsKey"]) is None:
            ctx.event(
                ValueType.DECISION_REQUIREMENTS,
                DecisionRequirementsIntent.CREATED,
                stored["decisionRequirementsKey"],
                stored,
            )
        out["decisionRequirementsMetadata"].append(drg_metadata(stored, duplicate=False))
    for stored in command.get("decisions") or []:
        if ctx.state.decisions.get(stored["decisionKey"]) is None:
            ctx.event(ValueType.DECISION, DecisionIntent.CREATED, stored["decisionKey"], stored)
        out["decisionsMetadata"].append(decision_metadata(stored, duplicate=False))
    for stored in command.get("forms") or []:
        if ctx.state.forms.get(stored["formKey"]) is None:
            ctx.event(ValueType.FORM, FormIntent.CREATED, stored["formKey"], stored)
        out["formMetadata"].append(form_metadata(stored, duplicate=False))


# -- evaluation ----------------------------------------------------------------------------------------------


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def evaluate(
    ctx: ProcessingContext, decision: dict, variables: dict[str, Any]
) -> tuple[DecisionEvaluationIntent, dict]:
    """Evaluate the stored ``decision`` against ``variables``: EVALUATED or FAILED, and the record value.

    The value has no process fields; a business rule task adds them.
    """
    drg_key = decision["decisionRequirementsKey"]
    value: dict[str, Any] = {
        "decisionKey": decision["decisionKey"],
        "decisionId": decision["decisionId"],
        "decisionName": decision["decisionName"],
        "decisionVersion": decision["version"],
        "decisionRequirementsId": decision["decisionRequirementsId"],
        "decisionRequirementsKey": drg_key,
        "decisionOutput": "null",
        "variables": {},
        "bpmnProcessId": "",
        "processDefinitionKey": -1,
        "processInstanceKey": -1,
        "elementId": "",
        "elementInstanceKey": -1,
        "evaluatedDecisions": [],
        "evaluationFailureMessage": "",
        "failedDecisionId": "",
        "tenantId": b.tenant_of(decision),
    }
    try:
        drg = b.services(ctx).drgs.get(drg_key)
    except dmn.DmnParseError as e:  # stored before a rule changed: report, never crash the partition
        drg, message = None, str(e)
    else:
        message = f"no decision requirements graph found with key '{drg_key}'"
    if drg is None:
        value["evaluationFailureMessage"] = f"Expected to evaluate decision '{decision['decisionId']}', but {message}"
        value["failedDecisionId"] = decision["decisionId"]
        return DecisionEvaluationIntent.FAILED, value
    now = dt.datetime.fromtimestamp(ctx.now / 1000, tz=dt.UTC)
    result = dmn.evaluate_decision(
        drg, decision["decisionId"], variables, now=now, limits=b.services(ctx).expressions.limits
    )
    for evaluated in result.evaluated:
        value["evaluatedDecisions"].append(_evaluated_decision(ctx, drg_key, evaluated, value["tenantId"]))
    if result.failed:
        value["evaluationFailureMessage"] = result.failure_message
        value["failedDecisionId"] = result.failed_decision_id
        return DecisionEvaluationIntent.FAILED, value
    value["decisionOutput"] = _json(result.output)
    return DecisionEvaluationIntent.EVALUATED, value


def _evaluated_decision(ctx: ProcessingContext, drg_key: int, evaluated: dmn.EvaluatedDecision, tenant: str) -> dict:
    decision = evaluated.decision
    stored = ctx.state.decisions.in_drg(drg_key, decision.id) or {}
    return {
        "decisionId": decision.id,
        "decisionName": decision.name,
        "decisionKey": stored.get("decisionKey", -1),
        "decisionVersion": stored.get("version", -1),
        "decisionType": decision.decision_type,
        "decisionOutput": _json(evaluated.output),
        "evaluatedInputs": [
            {"inputId": i, "inputName": name, "inputValue": _json(v)} for i, name, v in evaluated.inputs
        ],
        "matchedRules": [
            {
                "ruleId": rule.rule_id,
                "ruleIndex": rule.rule_index,
                "evaluatedOutputs": [
                    {"outputId": o, "outputName": name, "outputValue": _json(v)} for o, name, v in rule.outputs
                ],
            }
            for rule in evaluated.matched_rules
        ],
        "tenantId": tenant,
    }


def evaluate_command(ctx: ProcessingContext, cmd: Record) -> None:
    """DECISION_EVALUATION EVALUATE (the EvaluateDecision RPC): by decision id (latest version) or key.

    A decision that fails to evaluate is still an accepted command: the FAILED event is the response.
    """
    v = cmd.value
    decision_id = v.get("decisionId") or ""
    decision_key = v.get("decisionKey", -1)
    tenant = b.tenant_of(v)
    if b.refuse_unassigned_tenant(ctx, "EvaluateDecision", [tenant]):
        return
    if decision_id:
        decision = ctx.state.decisions.latest(tenant, decision_id)
        if decision is None:
            ctx.reject(
                RejectionType.NOT_FOUND,
                f"Expected to find a decision with id '{decision_id}', but none found",
            )
            return
    elif decision_key is not None and decision_key > 0:
        decision = ctx.state.decisions.get(decision_key)
        if decision is None or b.tenant_of(decision) != tenant:
            ctx.reject(
                RejectionType.NOT_FOUND,
                f"Expected to evaluate a decision with key '{decision_key}', but no such decision was found",
            )
            return
    else:
        ctx.reject(
            RejectionType.INVALID_ARGUMENT,
            "Expected either a decision id or a valid decision key, but none provided",
        )
        return
    if not b.authorized(ctx, "DECISION_DEFINITION", "CREATE_DECISION_INSTANCE", [str(decision.get("decisionId"))]):
        return
    variables = v.get("variables") or {}
    intent, value = evaluate(ctx, decision, variables)
    value["variables"] = variables
    rec = ctx.event(ValueType.DECISION_EVALUATION, intent, ctx.keys.next_key(), value)
    ctx.respond(rec)


# -- deletion ------------------------------------------------------------------------------------------------


def delete_drg(ctx: ProcessingContext, drg: dict) -> None:
    """DECISION DELETED for each decision of the DRG, then DECISION_REQUIREMENTS DELETED."""
    key = drg["decisionRequirementsKey"]
    for stored in ctx.state.decisions.of_drg(key):
        ctx.event(ValueType.DECISION, DecisionIntent.DELETED, stored["decisionKey"], stored)
    ctx.event(ValueType.DECISION_REQUIREMENTS, DecisionRequirementsIntent.DELETED, key, _without_resource(drg))


def delete_form(ctx: ProcessingContext, form: dict) -> None:
    ctx.event(ValueType.FORM, FormIntent.DELETED, form["formKey"], _without_resource(form))


def _without_resource(stored: dict) -> dict:
    return {k: v for k, v in stored.items() if k != "resource"}
