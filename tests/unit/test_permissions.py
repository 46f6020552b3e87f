"""Permissions (broker.security.authorizations.enabled): each command of an authenticated caller needs Camunda's
permission on its resource, granted to the caller directly or through a group, role or mapping rule; another tenant's
resources are not found; jobs are handed out only for processes the caller may update; a task list's user takes and
finishes the tasks offered to it.

One partition runs in-process (as in test_replay.py); commands without a caller (set-up here, and in production
what one partition sends another) are never checked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from broker.engine.access import forbidden_message
from broker.engine.job_processors import activation_request
from broker.protocol.enums import (
    AuthorizationIntent,
    BatchOperationCreationIntent,
    BatchOperationExecutionIntent,
    ClockIntent,
    DecisionEvaluationIntent,
    DeploymentIntent,
    GroupIntent,
    IncidentIntent,
    JobBatchIntent,
    JobIntent,
    MessageIntent,
    ProcessInstanceCreationIntent,
    ProcessInstanceIntent,
    ProcessInstanceModificationIntent,
    RejectionType,
    ResourceDeletionIntent,
    SignalIntent,
    TenantIntent,
    UserIntent,
    UserTaskIntent,
    ValueType,
    VariableDocumentIntent,
)
from broker.protocol.record import Record
from broker.protocol.values import TENANT
from broker.state.db import unpack
from broker.stream.config import PartitionConfig
from tests.harness import BPMN, FIXTURES
from tests.unit.test_identity import rejected
from tests.unit.test_replay import Driver, accepted

Send = Callable[[dict[str, Any]], Awaitable[Record]]


def driver(tmp_path: Path) -> Driver:
    d = Driver(tmp_path / "p" / "1", PartitionConfig(checker_interval_s=0.005, authorizations=True))
    d.open()
    return d


async def as_caller(d: Driver, caller: dict[str, Any], value_type: ValueType, intent: int, value: dict,
                    key: int = -1) -> Record:  # fmt: skip
    assert d.partition is not None
    return await d.partition.execute(value_type, intent, value, key, authorization=caller)


async def grant(d: Driver, owner: str, resource_type: str, resource_id: str, *permissions: str,
                owner_type: str = "USER") -> None:  # fmt: skip
    value = {
        "ownerType": owner_type,
        "ownerId": owner,
        "resourceType": resource_type,
        "resourceMatcher": "ANY" if resource_id == "*" else "ID",
        "resourceId": resource_id,
        "permissionTypes": list(permissions),
    }
    accepted(await d.send(ValueType.AUTHORIZATION, AuthorizationIntent.CREATE, value))


async def user(d: Driver, username: str) -> dict[str, Any]:
    accepted(await d.send(ValueType.USER, UserIntent.CREATE, {"username": username, "password": "scrypt$x"}))
    return {"username": username}


async def instance(d: Driver, process_id: str, variables: dict | None = None) -> int:
    return accepted(await d.create(process_id, variables)).value["processInstanceKey"]  # type: ignore[no-any-return]


def user_tasks(d: Driver) -> list[int]:
    return d.read(lambda s: sorted(unpack(v)["value"]["userTaskKey"] for _, v in s.iter_all("user_tasks")))  # type: ignore[no-any-return]


async def test_each_command_needs_its_permission_on_its_resource(tmp_path: Path) -> None:
    d = driver(tmp_path)
    accepted(await d.deploy("one-task.bpmn", "user-task-native.bpmn", "events/signal-start.bpmn", "pass-through.bpmn"))
    dmn = {"resourceName": "greeting.dmn", "resource": (FIXTURES / "dmn" / "greeting.dmn").read_bytes()}
    accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": [dmn]}))
    accepted(await d.send(ValueType.GROUP, GroupIntent.CREATE, {"groupId": "devs", "name": "Devs"}))
    one_task = (BPMN / "one-task.bpmn").read_bytes()

    # what each command needs: (name, resource type, permission, resource id, the command as a function of its key)
    cases: list[tuple[str, str, str, str, Callable[[], Awaitable[tuple[ValueType, int, dict, int]]]]] = []

    def case(name: str, resource_type: str, permission: str, resource_id: str):  # type: ignore[no-untyped-def]
        def register(make: Callable[[], Awaitable[tuple[ValueType, int, dict, int]]]) -> None:
            cases.append((name, resource_type, permission, resource_id, make))

        return register

    @case("deploy", "RESOURCE", "CREATE", "")
    async def _() -> tuple[ValueType, int, dict, int]:
        value = {"resources": [{"resourceName": "one-task.bpmn", "resource": one_task}]}
        return ValueType.DEPLOYMENT, DeploymentIntent.CREATE, value, -1

    @case("create an instance", "PROCESS_DEFINITION", "CREATE_PROCESS_INSTANCE", "one-task")
    async def _() -> tuple[ValueType, int, dict, int]:
        value = {"bpmnProcessId": "one-task", "version": -1, "variables": {}, "tenantId": TENANT}
        return ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, value, -1

    @case("set variables", "PROCESS_DEFINITION", "UPDATE_PROCESS_INSTANCE", "one-task")
    async def _() -> tuple[ValueType, int, dict, int]:
        key = await instance(d, "one-task")
        value = {"scopeKey": key, "variables": {"a": 1}, "updateSemantics": "PROPAGATE"}
        return ValueType.VARIABLE_DOCUMENT, VariableDocumentIntent.UPDATE, value, -1

    @case("complete a job", "PROCESS_DEFINITION", "UPDATE_PROCESS_INSTANCE", "one-task")
    async def _() -> tuple[ValueType, int, dict, int]:
        await instance(d, "one-task")
        [job] = await d.activate("test", 1)
        return ValueType.JOB, JobIntent.COMPLETE, {"variables": {}}, job

    @case("resolve an incident", "PROCESS_DEFINITION", "UPDATE_PROCESS_INSTANCE", "one-task")
    async def _() -> tuple[ValueType, int, dict, int]:
        await instance(d, "one-task")
        [job] = await d.activate("test", 1)
        accepted(await d.fail(job, 0))
        incident = d.read(lambda s: s.incidents.for_job(job))
        return ValueType.INCIDENT, IncidentIntent.RESOLVE, {}, incident

    @case("cancel an instance", "PROCESS_DEFINITION", "CANCEL_PROCESS_INSTANCE", "one-task")
    async def _() -> tuple[ValueType, int, dict, int]:
        return ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.CANCEL, {}, await instance(d, "one-task")

    @case("modify an instance", "PROCESS_DEFINITION", "MODIFY_PROCESS_INSTANCE", "one-task")
    async def _() -> tuple[ValueType, int, dict, int]:
        key = await instance(d, "one-task")
        activate = [{"elementId": "task", "ancestorScopeKey": -1, "variableInstructions": []}]
        value = {"processInstanceKey": key, "activateInstructions": activate, "terminateInstructions": []}
        return ValueType.PROCESS_INSTANCE_MODIFICATION, ProcessInstanceModificationIntent.MODIFY, value, key

    @case("complete a user task", "PROCESS_DEFINITION", "UPDATE_USER_TASK", "user-task-native")
    async def _() -> tuple[ValueType, int, dict, int]:
        before = set(user_tasks(d))
        await instance(d, "user-task-native", {"reviewers": ["ann"], "due": "2031-01-01T00:00:00Z"})
        await d.settle()
        [task] = set(user_tasks(d)) - before
        return ValueType.USER_TASK, UserTaskIntent.COMPLETE, {"variables": {}}, task

    @case("publish a message", "MESSAGE", "CREATE", "")
    async def _() -> tuple[ValueType, int, dict, int]:
        value = {"name": "m", "correlationKey": "k", "timeToLive": 0, "variables": {}, "tenantId": TENANT}
        return ValueType.MESSAGE, MessageIntent.PUBLISH, value, -1

    @case("broadcast a signal that starts instances", "PROCESS_DEFINITION", "CREATE_PROCESS_INSTANCE", "signal-start")
    async def _() -> tuple[ValueType, int, dict, int]:
        return ValueType.SIGNAL, SignalIntent.BROADCAST, {"signalName": "go", "variables": {}}, -1

    @case("evaluate a decision", "DECISION_DEFINITION", "CREATE_DECISION_INSTANCE", "greeting")
    async def _() -> tuple[ValueType, int, dict, int]:
        value = {"decisionId": "greeting", "decisionKey": -1, "variables": {"name": "Ann"}, "tenantId": TENANT}
        return ValueType.DECISION_EVALUATION, DecisionEvaluationIntent.EVALUATE, value, -1

    @case("delete a process", "RESOURCE", "DELETE_PROCESS", "pass-through")
    async def _() -> tuple[ValueType, int, dict, int]:
        key = d.read(lambda s: s.processes.latest(TENANT, "pass-through")["processDefinitionKey"])  # type: ignore[index]
        return ValueType.RESOURCE_DELETION, ResourceDeletionIntent.DELETE, {"resourceKey": key}, key

    @case("create a user", "USER", "CREATE", "")
    async def _() -> tuple[ValueType, int, dict, int]:
        return ValueType.USER, UserIntent.CREATE, {"username": "newcomer", "password": "scrypt$x"}, -1

    @case("add a member to a group", "GROUP", "UPDATE", "devs")
    async def _() -> tuple[ValueType, int, dict, int]:
        value = {"groupId": "devs", "entityId": "someone", "entityType": "USER"}
        return ValueType.GROUP, GroupIntent.ADD_ENTITY, value, -1

    @case("grant a permission", "AUTHORIZATION", "CREATE", "")
    async def _() -> tuple[ValueType, int, dict, int]:
        value = {"ownerType": "USER", "ownerId": "x", "resourceType": "USER", "resourceMatcher": "ANY"}
        return ValueType.AUTHORIZATION, AuthorizationIntent.CREATE, {**value, "resourceId": "*",
                                                                     "permissionTypes": ["READ"]}, -1  # fmt: skip

    @case("pin the clock", "SYSTEM", "UPDATE", "")
    async def _() -> tuple[ValueType, int, dict, int]:
        return ValueType.CLOCK, ClockIntent.PIN, {"time": 1_000}, -1

    for n, (name, resource_type, permission, resource_id, make) in enumerate(cases):
        caller = await user(d, f"user-{n}")
        value_type, intent, value, key = await make()
        ids = [resource_id] if resource_id else []
        rejected(
            await as_caller(d, caller, value_type, intent, value, key),
            RejectionType.FORBIDDEN,
            forbidden_message(permission, resource_type, ids),
        )
        # granted on the resource itself (or, for a type without ids, on all of them), through a group
        accepted(await d.send(ValueType.GROUP, GroupIntent.ADD_ENTITY,
                              {"groupId": "devs", "entityId": caller["username"], "entityType": "USER"}))  # fmt: skip
        await grant(d, "devs", resource_type, resource_id or "*", permission, owner_type="GROUP")
        rec = await as_caller(d, caller, value_type, intent, value, key)
        assert rec.record_type.name == "EVENT", f"{name}: {rec.rejection_reason}"
        accepted(await d.send(ValueType.GROUP, GroupIntent.REMOVE_ENTITY,
                              {"groupId": "devs", "entityId": caller["username"], "entityType": "USER"}))  # fmt: skip
    await d.close()


async def test_workers_get_only_jobs_of_processes_they_may_update(tmp_path: Path) -> None:
    d = driver(tmp_path)
    accepted(await d.deploy("one-task.bpmn"))
    ship = (BPMN / "one-task.bpmn").read_text().replace('id="one-task"', 'id="shipping"')
    shipping = {"resourceName": "shipping.bpmn", "resource": ship.encode()}
    accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": [shipping]}))
    worker = await user(d, "worker")
    await instance(d, "one-task")
    await instance(d, "shipping")

    async def activate() -> list[str]:
        value = activation_request("test", "w", 60_000, 10)
        rec = accepted(await as_caller(d, worker, ValueType.JOB_BATCH, JobBatchIntent.ACTIVATE, value))
        return sorted(job["bpmnProcessId"] for job in rec.value["jobs"])

    assert await activate() == [], "no permission: no jobs (and no rejection: a worker just waits)"
    await grant(d, "worker", "PROCESS_DEFINITION", "shipping", "UPDATE_PROCESS_INSTANCE")
    assert await activate() == ["shipping"], "the older job of one-task is passed over"
    await grant(d, "worker", "PROCESS_DEFINITION", "*", "UPDATE_PROCESS_INSTANCE")
    assert await activate() == ["one-task"]
    await d.close()


async def test_a_task_list_user_takes_and_finishes_the_tasks_offered_to_its_groups(tmp_path: Path) -> None:
    d = driver(tmp_path)
    accepted(await d.deploy("user-task-native.bpmn"))
    accepted(await d.send(ValueType.GROUP, GroupIntent.CREATE, {"groupId": "sales", "name": "Sales"}))
    sam, otto = await user(d, "sam"), await user(d, "otto")
    accepted(await d.send(ValueType.GROUP, GroupIntent.ADD_ENTITY,
                          {"groupId": "sales", "entityId": "sam", "entityType": "USER"}))  # fmt: skip
    await instance(d, "user-task-native", {"reviewers": ["ann"], "due": "2031-01-01T00:00:00Z"})
    await d.settle()
    [task] = user_tasks(d)

    async def send(caller: dict[str, Any], intent: UserTaskIntent, value: dict) -> Record:
        return await as_caller(d, caller, ValueType.USER_TASK, intent, value, task)

    needed = forbidden_message("UPDATE_USER_TASK", "PROCESS_DEFINITION", ["user-task-native"])
    rejected(await send(otto, UserTaskIntent.CLAIM, {"assignee": "otto"}), RejectionType.FORBIDDEN, needed)
    rejected(await send(sam, UserTaskIntent.CLAIM, {"assignee": "otto"}), RejectionType.FORBIDDEN, needed)
    rejected(await send(sam, UserTaskIntent.ASSIGN, {"assignee": "sam"}), RejectionType.FORBIDDEN, needed)
    accepted(await send(sam, UserTaskIntent.CLAIM, {"assignee": "sam"}))
    rejected(await send(otto, UserTaskIntent.COMPLETE, {"variables": {}}), RejectionType.FORBIDDEN, needed)
    accepted(await send(sam, UserTaskIntent.COMPLETE, {"variables": {"ok": True}}))
    await d.close()


async def test_another_tenants_resources_are_not_found_and_8_8_update_grants_still_cover_cancel(tmp_path: Path) -> None:
    d = driver(tmp_path)
    for tenant in ("team-a", "team-b"):
        accepted(await d.send(ValueType.TENANT, TenantIntent.CREATE, {"tenantId": tenant, "name": tenant}))
        resource = {"resourceName": "one-task.bpmn", "resource": (BPMN / "one-task.bpmn").read_bytes()}
        accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": [resource],
                                                                               "tenantId": tenant}))  # fmt: skip
    ann = await user(d, "ann")
    accepted(await d.send(ValueType.TENANT, TenantIntent.ADD_ENTITY,
                          {"tenantId": "team-a", "entityId": "ann", "entityType": "USER"}))  # fmt: skip
    await grant(d, "ann", "PROCESS_DEFINITION", "one-task", "UPDATE_PROCESS_INSTANCE")
    keys = {}
    for tenant in ("team-a", "team-b"):
        value = {"bpmnProcessId": "one-task", "version": -1, "variables": {}, "tenantId": tenant}
        created = accepted(await d.send(ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE,
                                        value))  # fmt: skip
        keys[tenant] = created.value["processInstanceKey"]
    cancel = ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.CANCEL
    rejected(
        await as_caller(d, ann, *cancel, {}, keys["team-b"]),
        RejectionType.NOT_FOUND,
        "Expected to perform operation 'CANCEL_PROCESS_INSTANCE' on resource 'PROCESS_DEFINITION', but no resource "
        "was found for tenant 'team-b'",
    )
    variables = {"scopeKey": keys["team-b"], "variables": {"a": 1}, "updateSemantics": "PROPAGATE"}
    rejected(await as_caller(d, ann, ValueType.VARIABLE_DOCUMENT, VariableDocumentIntent.UPDATE, variables),
             RejectionType.NOT_FOUND, "tenant 'team-b'")  # fmt: skip
    accepted(await as_caller(d, ann, *cancel, {}, keys["team-a"]))
    await d.close()


async def test_a_workers_job_stream_is_pushed_only_jobs_it_could_activate(tmp_path: Path) -> None:
    d = driver(tmp_path)
    assert d.partition is not None
    for tenant in ("team-a", "team-b"):
        accepted(await d.send(ValueType.TENANT, TenantIntent.CREATE, {"tenantId": tenant, "name": tenant}))
        resource = {"resourceName": "one-task.bpmn", "resource": (BPMN / "one-task.bpmn").read_bytes()}
        accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": [resource],
                                                                               "tenantId": tenant}))  # fmt: skip
    await user(d, "worker")
    accepted(await d.send(ValueType.TENANT, TenantIntent.ADD_ENTITY,
                          {"tenantId": "team-a", "entityId": "worker", "entityType": "USER"}))  # fmt: skip
    pushed: list[str] = []
    # the worker asks for both tenants' jobs (the gateway refuses that for an unassigned tenant; the engine holds too)
    stream = d.partition.job_streams.add("test", "w", 60_000, [], ["team-a", "team-b"], caller={"username": "worker"})
    d.partition.job_stream_sinks[stream.stream_id] = lambda r: (
        pushed.extend(j["tenantId"] for j in r.value["jobs"]) or True
    )

    async def start(tenant: str) -> None:
        value = {"bpmnProcessId": "one-task", "version": -1, "variables": {}, "tenantId": tenant}
        accepted(await d.send(ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, value))
        await d.settle()

    await start("team-b")
    await start("team-a")
    assert pushed == [], "authorizations on: no permission on one-task yet"
    await grant(d, "worker", "PROCESS_DEFINITION", "one-task", "UPDATE_PROCESS_INSTANCE")
    await start("team-b")
    await start("team-a")
    assert pushed == ["team-a"], "only the worker's tenant"
    await d.close()


async def test_a_batch_changes_only_the_items_its_creator_may_change(tmp_path: Path) -> None:
    """Each item of a batch is checked with its creator's permissions as the item's own command would be: an
    instance of a process it may not cancel fails with the reason, the others are cancelled."""
    from broker.engine import batch_operations as bo
    from tests.unit.test_batch_operations import items_of, logged, settled

    d = driver(tmp_path)
    accepted(await d.deploy("one-task.bpmn", "user-task-native.bpmn"))
    ops = await user(d, "ops")
    await grant(d, "ops", "BATCH", "*", "CREATE_BATCH_OPERATION_CANCEL_PROCESS_INSTANCE")
    await grant(d, "ops", "PROCESS_DEFINITION", "one-task", "CANCEL_PROCESS_INSTANCE")
    allowed = [await instance(d, "one-task"), await instance(d, "one-task")]
    other = await instance(d, "user-task-native")
    await d.settle()
    value = {
        "batchOperationType": bo.CANCEL_PROCESS_INSTANCE,
        "filter": {},
        "partitionItems": items_of(1, [(k, k) for k in [*allowed, other]]),
    }
    create = ValueType.BATCH_OPERATION_CREATION, BatchOperationCreationIntent.CREATE
    created = accepted(await as_caller(d, ops, *create, value))
    entry = await settled(d, created.value["batchOperationKey"], bo.COMPLETED)
    assert (entry["completedCount"], entry["failedCount"]) == (2, 1)
    assert d.read(lambda s: [k for k in [*allowed, other] if s.elements.get(k) is not None]) == [other]
    executed = ValueType.BATCH_OPERATION_EXECUTION, BatchOperationExecutionIntent.EXECUTED
    records = await logged(d)
    outcomes = {i["itemKey"]: i for r in records if (r.value_type, r.intent) == executed for i in r.value["items"]}
    assert outcomes[other]["state"] == "FAILED"
    assert outcomes[other]["errorMessage"] == forbidden_message(
        "CANCEL_PROCESS_INSTANCE", "PROCESS_DEFINITION", ["user-task-native"]
    )
    assert {outcomes[k]["state"] for k in allowed} == {"COMPLETED"}
