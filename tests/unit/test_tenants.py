"""Tenants in the engine: each has its own process and decision versions, jobs, messages and signals.

A partition runs in-process (as in test_replay.py) and gets commands shaped like the gateway's with multi-tenancy
enabled; every scenario ends by checking that a replay of the log rebuilds the live state.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.engine.job_processors import activation_request
from broker.protocol.enums import (
    DecisionEvaluationIntent,
    DeploymentIntent,
    JobBatchIntent,
    MessageIntent,
    ProcessInstanceCreationIntent,
    RecordType,
    RejectionType,
    SignalIntent,
    ValueType,
)
from broker.protocol.record import Record
from broker.protocol.values import TENANT
from tests.harness import BPMN
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live

DMN = BPMN.parent / "dmn"


async def deploy(d: Driver, tenant: str, *paths: Path) -> Record:
    resources = [{"resourceName": p.name, "resource": p.read_bytes()} for p in paths]
    value = {"resources": resources, "tenantId": tenant}
    return await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, value)


async def create(
    d: Driver, tenant: str, process_id: str = "", variables: dict | None = None, *, key: int = -1
) -> Record:
    value = {
        "bpmnProcessId": process_id,
        "version": -1,
        "processDefinitionKey": key,
        "variables": variables or {},
        "fetchVariables": [],
        "tenantId": tenant,
    }
    return await d.send(ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, value)


async def activate(d: Driver, job_type: str, tenants: list[str]) -> list[dict]:
    value = activation_request(job_type, "tenant-test", 60_000, 10, tenant_ids=tenants)
    rec = accepted(await d.send(ValueType.JOB_BATCH, JobBatchIntent.ACTIVATE, value))
    return list(rec.value["jobs"])


async def jobs_of(d: Driver, job_type: str, tenants: list[str], expected: int) -> list[dict]:
    """Activate until ``expected`` jobs came (what follows a message or signal is processed a moment later)."""
    jobs: list[dict] = []
    for _ in range(100):
        jobs += await activate(d, job_type, tenants)
        if len(jobs) >= expected:
            break
        await asyncio.sleep(0.02)
    await d.settle()
    return jobs + await activate(d, job_type, tenants)


def rejected(rec: Record, rejection: RejectionType) -> str:
    assert rec.record_type == RecordType.COMMAND_REJECTION, rec.describe()
    assert rec.rejection_type == rejection, rec.rejection_reason
    return rec.rejection_reason


def open_partition(tmp_path: Path) -> Driver:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    return d


async def test_each_tenant_has_its_own_versions_and_instances_of_a_process(tmp_path: Path) -> None:
    d = open_partition(tmp_path)
    one_task = BPMN / "one-task.bpmn"
    a = accepted(await deploy(d, "team-a", one_task)).value["processesMetadata"][0]
    again = accepted(await deploy(d, "team-a", one_task)).value["processesMetadata"][0]
    b = accepted(await deploy(d, "team-b", one_task)).value["processesMetadata"][0]
    default = accepted(await deploy(d, TENANT, one_task)).value["processesMetadata"][0]
    assert (a["version"], a["tenantId"]) == (1, "team-a")
    assert again["isDuplicate"] and again["processDefinitionKey"] == a["processDefinitionKey"]
    assert (b["version"], b["tenantId"]) == (1, "team-b"), "another tenant's deployment is not a duplicate"
    assert (default["version"], default["tenantId"]) == (1, TENANT)
    assert len({a["processDefinitionKey"], b["processDefinitionKey"], default["processDefinitionKey"]}) == 3

    created = accepted(await create(d, "team-a", "one-task")).value
    assert (created["processDefinitionKey"], created["tenantId"]) == (a["processDefinitionKey"], "team-a")
    assert accepted(await create(d, "team-b", "one-task")).value["processDefinitionKey"] == b["processDefinitionKey"]
    rejected(await create(d, "team-c", "one-task"), RejectionType.NOT_FOUND)
    reason = rejected(await create(d, "team-b", key=a["processDefinitionKey"]), RejectionType.NOT_FOUND)
    assert str(a["processDefinitionKey"]) in reason, "another tenant's definition is not found by its key either"

    jobs = await jobs_of(d, "test", ["team-a"], 1)
    assert [(j["tenantId"], j["processDefinitionKey"]) for j in jobs] == [("team-a", a["processDefinitionKey"])]
    assert await activate(d, "test", [TENANT]) == [], "the default tenant has no instance"
    assert [j["tenantId"] for j in await activate(d, "test", ["team-a", "team-b"])] == ["team-b"]
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_messages_correlate_within_their_tenant(tmp_path: Path) -> None:
    d = open_partition(tmp_path)
    for tenant in ("team-a", "team-b"):
        accepted(await deploy(d, tenant, BPMN / "message-catch.bpmn", BPMN / "start-events" / "message-start.bpmn"))
        accepted(await create(d, tenant, "message-catch", {"requestId": "r-1"}))
    await d.settle()

    def message(tenant: str, name: str, key: str) -> dict:
        return {"name": name, "correlationKey": key, "timeToLive": 60_000, "messageId": "m-1", "tenantId": tenant}

    accepted(await d.send(ValueType.MESSAGE, MessageIntent.PUBLISH, message("team-b", "approved", "r-1")))
    jobs = await jobs_of(d, "approved", ["team-a", "team-b"], 1)
    assert [j["tenantId"] for j in jobs] == ["team-b"], "team-a's instance waits for a message of its own tenant"
    # message ids are unique within a tenant: the same id is another message in another tenant
    accepted(await d.send(ValueType.MESSAGE, MessageIntent.PUBLISH, message("team-a", "approved", "r-1")))
    rejected(
        await d.send(ValueType.MESSAGE, MessageIntent.PUBLISH, message("team-a", "approved", "r-1")),
        RejectionType.ALREADY_EXISTS,
    )
    assert [j["tenantId"] for j in await jobs_of(d, "approved", ["team-a", "team-b"], 1)] == ["team-a"]

    accepted(await d.send(ValueType.MESSAGE, MessageIntent.PUBLISH, message("team-a", "order-placed", "o-1")))
    started = await jobs_of(d, "handle-order", ["team-a", "team-b", TENANT], 1)
    assert [j["tenantId"] for j in started] == ["team-a"], "a message starts the processes of its tenant only"
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_signals_reach_only_their_tenant(tmp_path: Path) -> None:
    d = open_partition(tmp_path)
    for tenant in ("team-a", "team-b"):
        accepted(await deploy(d, tenant, BPMN / "signal-catch.bpmn"))
        accepted(await create(d, tenant, "signal-catch"))
    await d.settle()
    value = {"signalName": "wake-up", "variables": {}, "tenantId": "team-a"}
    assert accepted(await d.send(ValueType.SIGNAL, SignalIntent.BROADCAST, value)).value["tenantId"] == "team-a"
    jobs = await jobs_of(d, "after-signal", ["team-a", "team-b"], 1)
    assert [j["tenantId"] for j in jobs] == ["team-a"]
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_a_call_activity_calls_a_process_of_its_own_tenant(tmp_path: Path) -> None:
    d = open_partition(tmp_path)
    accepted(await deploy(d, "team-a", BPMN / "call-missing.bpmn"))
    accepted(await deploy(d, "team-b", BPMN / "call-missing-child.bpmn"))
    instance = accepted(await create(d, "team-a", "call-missing")).value["processInstanceKey"]
    await d.settle()
    incidents = [i for _, i in d.incidents() if i["processInstanceKey"] == instance]
    assert [(i["errorType"], i["tenantId"]) for i in incidents] == [("CALLED_ELEMENT_ERROR", "team-a")]
    assert "call-missing-child" in incidents[0]["errorMessage"]
    accepted(await deploy(d, "team-a", BPMN / "call-missing-child.bpmn"))
    (incident_key,) = [k for k, i in d.incidents() if i["processInstanceKey"] == instance]
    accepted(await d.resolve(incident_key))
    jobs = await jobs_of(d, "late-work", ["team-a", "team-b"], 1)
    assert [(j["tenantId"], j["bpmnProcessId"]) for j in jobs] == [("team-a", "call-missing-child")]
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_decisions_are_evaluated_within_their_tenant(tmp_path: Path) -> None:
    d = open_partition(tmp_path)
    deployed = accepted(await deploy(d, "team-a", DMN / "greeting.dmn")).value["decisionsMetadata"][0]
    assert deployed["tenantId"] == "team-a"

    async def evaluate(tenant: str, **by: object) -> Record:
        value = {"decisionId": "", "decisionKey": -1, "variables": {"name": "Ann"}, "tenantId": tenant, **by}
        return await d.send(ValueType.DECISION_EVALUATION, DecisionEvaluationIntent.EVALUATE, value)

    evaluated = accepted(await evaluate("team-a", decisionId="greeting")).value
    assert evaluated["tenantId"] == "team-a"
    assert {e["tenantId"] for e in evaluated["evaluatedDecisions"]} == {"team-a"}
    rejected(await evaluate("team-b", decisionId="greeting"), RejectionType.NOT_FOUND)
    rejected(await evaluate("team-b", decisionKey=deployed["decisionKey"]), RejectionType.NOT_FOUND)
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)
