"""Native user tasks against a real broker with an embedded gateway (``weir broker --embedded-gateway``).

User task commands go through ``gateway/user_tasks.py`` and the gateway's command layer over a remote broker client
(over the broker's command API, as a standalone gateway routes them); records are read from the JSON-lines exporter's
file; task listener jobs are worked by pyzeebe and by raw calls with Weir's messages (job result: denial,
corrections).
"""

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from pyzeebe import Job, ZeebeWorker, create_insecure_channel
from pyzeebe.proto import gateway_pb2 as pb

from broker.protocol.enums import UserTaskIntent
from broker.transport.remote import RemoteBrokerClient
from gateway import user_tasks
from gateway.commands import CommandError, ErrorCode, GatewayCommands
from tests.harness import WeirProcess, eventually
from tests.integration import weir_proto
from tests.integration.clients import Stub, create, create_with_result, deploy

DUE = "2030-02-01T09:00:00+01:00"
UNKNOWN_KEY = (1 << 51) + 424_242  # a key of partition 1 that names nothing


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    data = tmp_path_factory.mktemp("user-tasks") / "data"
    env = {
        "WEIR_BROKER_EXPORTERS_JSONL_CLASSNAME": "exporters.jsonl.JsonLinesExporter",
        "WEIR_BROKER_EXPORTERS_JSONL_ARGS_DIRECTORY": str(data.parent / "exports"),
    }
    w = WeirProcess(data, command_api=True, env=env)
    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture(scope="module")
def stub(node: WeirProcess) -> Iterator[Stub]:
    with grpc.insecure_channel(node.address) as channel:
        yield Stub(channel)


@asynccontextmanager
async def broker_client(node: WeirProcess) -> AsyncIterator[GatewayCommands]:
    client = RemoteBrokerClient([f"127.0.0.1:{node.command_port}"])
    await client.start()
    try:
        for _ in range(100):
            if client.knows_all_leaders():
                break
            await asyncio.sleep(0.05)
        yield GatewayCommands(client)
    finally:
        await client.close()


def exported(node: WeirProcess) -> list[dict[str, Any]]:
    path = Path(node.data_dir).parent / "exports" / "partition-1.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def user_task_events(node: WeirProcess, process_id: str) -> list[dict[str, Any]]:
    return [
        r
        for r in exported(node)
        if r["valueType"] == "USER_TASK" and r["recordType"] == "EVENT" and r["value"]["bpmnProcessId"] == process_id
    ]


def wait_for_event(node: WeirProcess, process_id: str, intent: str, count: int = 1) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        events = [r for r in user_task_events(node, process_id) if r["intent"] == intent]
        return events[count - 1] if len(events) >= count else None

    return eventually(found, timeout=15, what=f"USER_TASK {intent} of {process_id}")


async def rejected(call: Any) -> CommandError:
    with pytest.raises(CommandError) as info:
        await call
    return info.value


def test_a_native_user_task_is_assigned_updated_and_completed_through_the_gateway_functions(
    node: WeirProcess, stub: Stub
) -> None:
    deployed = deploy(stub, "user-task-native.bpmn")
    pid = deployed.pid("user-task-native")
    result = create_with_result(stub, pid, {"reviewers": ["ann", "bob"], "due": DUE}, request_timeout=30_000)
    created = wait_for_event(node, pid, "CREATED")
    key = created["key"]
    task = created["value"]
    assert task["userTaskKey"] == key and task["elementId"] == "approve"
    assert task["candidateGroupsList"] == ["sales", "ops"] and task["candidateUsersList"] == ["ann", "bob"]
    assert (task["dueDate"], task["priority"], task["externalFormReference"]) == (
        DUE,
        70,
        "https://forms.example/approve",
    )
    instance = task["processInstanceKey"]
    jobs = [r for r in exported(node) if r["valueType"] == "JOB" and r["value"]["processInstanceKey"] == instance]
    assert jobs == [], "a native user task creates no job"

    async def scenario() -> None:
        async with broker_client(node) as client:
            assigned = await user_tasks.assign(client, key, "ann", None, None)
            assert assigned.intent == UserTaskIntent.ASSIGNED
            assert (assigned.value["assignee"], assigned.value["action"]) == ("ann", "assign")

            refused = await rejected(user_tasks.assign(client, key, "bob", None, False))
            assert refused.code == ErrorCode.FAILED_PRECONDITION
            assert "already been assigned" in refused.message

            reassigned = await user_tasks.assign(client, key, "bob", "reassign", True)
            assert (reassigned.value["assignee"], reassigned.value["action"]) == ("bob", "reassign")
            unassigned = await user_tasks.unassign(client, key, None)
            assert (unassigned.value["assignee"], unassigned.value["action"]) == ("", "unassign")

            updated = await user_tasks.update(client, key, {"priority": 90, "candidateGroups": ["ops"]}, None)
            assert updated.intent == UserTaskIntent.UPDATED
            assert sorted(updated.value["changedAttributes"]) == ["candidateGroupsList", "priority"]
            assert (updated.value["priority"], updated.value["candidateGroupsList"]) == (90, ["ops"])

            bad = await rejected(user_tasks.update(client, key, {"priority": 101}, None))
            assert bad.code == ErrorCode.INVALID_ARGUMENT and "priority" in bad.message
            unknown_attribute = await rejected(user_tasks.update(client, key, {"name": "x"}, None))
            assert unknown_attribute.code == ErrorCode.INVALID_ARGUMENT
            empty = await rejected(user_tasks.update(client, key, {}, None))
            assert empty.code == ErrorCode.INVALID_ARGUMENT
            no_assignee = await rejected(user_tasks.assign(client, key, " ", None, None))
            assert no_assignee.code == ErrorCode.INVALID_ARGUMENT

            missing = await rejected(user_tasks.complete(client, UNKNOWN_KEY, {}, None))
            assert missing.code == ErrorCode.NOT_FOUND
            assert f"Expected to complete user task with key '{UNKNOWN_KEY}', but no such user task" in missing.message
            elsewhere = await rejected(user_tasks.complete(client, (7 << 51) + 1, {}, None))  # no partition 7
            assert elsewhere.code == ErrorCode.NOT_FOUND

            completed = await user_tasks.complete(client, key, {"approved": True}, None)
            assert completed.intent == UserTaskIntent.COMPLETED
            again = await rejected(user_tasks.complete(client, key, {}, None))
            assert again.code == ErrorCode.NOT_FOUND

    asyncio.run(scenario())
    finished = result.result(timeout=15)
    assert json.loads(finished.variables)["approved"] is True, "the completion's variables reach the instance"
    assert [r["intent"] for r in user_task_events(node, pid)] == [
        "CREATING",
        "CREATED",
        "ASSIGNING",  # ann
        "ASSIGNED",
        "ASSIGNING",  # bob (the refused claim wrote no event)
        "ASSIGNED",
        "ASSIGNING",  # unassigned
        "ASSIGNED",
        "UPDATING",
        "UPDATED",
        "COMPLETING",
        "COMPLETED",
    ]


def test_canceling_the_instance_cancels_its_user_task(node: WeirProcess, stub: Stub) -> None:
    pid = deploy(stub, "user-task-native.bpmn").pid("user-task-native")
    instance = create(stub, pid, {"reviewers": [], "due": None})
    key = wait_for_event(node, pid, "CREATED")["key"]
    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=instance), timeout=10)
    canceled = wait_for_event(node, pid, "CANCELED")
    assert canceled["key"] == key
    assert [r["intent"] for r in user_task_events(node, pid)][-2:] == ["CANCELING", "CANCELED"]

    async def complete_it() -> CommandError:
        async with broker_client(node) as client:
            return await rejected(user_tasks.complete(client, key, {}, None))

    assert asyncio.run(complete_it()).code == ErrorCode.NOT_FOUND


def test_task_listeners_run_as_jobs_and_can_deny_and_correct(node: WeirProcess, stub: Stub) -> None:
    pid = deploy(stub, "user-task-listeners.bpmn").pid("user-task-listeners")
    approved: list[tuple[str, str]] = []

    async def scenario() -> None:
        channel = create_insecure_channel(grpc_address=node.address)
        worker = ZeebeWorker(channel, name="listeners")
        for job_type in ("tl-creating", "tl-assigning", "tl-updating", "tl-completing"):

            @worker.task(task_type=job_type)
            async def approve(job: Job) -> dict:
                approved.append((job.type, job.variables.get("owner", "")))
                return {}

        work = asyncio.create_task(worker.work())
        raw = grpc.insecure_channel(node.address)
        try:
            create(stub, pid, {"owner": "zoe"})
            # creating, then the modelled assignee through the assigning listener
            first = await asyncio.to_thread(wait_for_event, node, pid, "ASSIGNED")
            key = first["key"]
            assert first["value"]["assignee"] == "zoe"
            async with broker_client(node) as client:
                assigned = await user_tasks.assign(client, key, "max", None, None)
                assert assigned.value["assignee"] == "max"

                # completing: the first listener (pyzeebe) approves, the second (raw) denies
                completion = asyncio.create_task(user_tasks.complete(client, key, {"ok": True}, None))
                (audit,) = await asyncio.to_thread(weir_proto.activate_jobs, raw, "tl-completing-audit")
                assert weir_proto.enum_name("ActivatedJob", "JobKind", audit.kind) == "TASK_LISTENER"
                assert weir_proto.enum_name("ActivatedJob", "ListenerEventType", audit.listenerEventType) == (
                    "COMPLETING"
                )
                assert (audit.userTask.userTaskKey, audit.userTask.action) == (key, "complete")
                assert audit.userTask.assignee == "max" and audit.retries == 3
                with pytest.raises(grpc.RpcError) as with_variables:
                    await asyncio.to_thread(weir_proto.complete_job, raw, audit.key, None, '{"x": 1}')
                assert with_variables.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                deny = weir_proto.message("JobResult")(denied=True, deniedReason="missing receipt")
                await asyncio.to_thread(weir_proto.complete_job, raw, audit.key, deny)
                denied = await rejected(completion)
                assert denied.code == ErrorCode.FAILED_PRECONDITION
                assert "denied by a task listener" in denied.message and "missing receipt" in denied.message

                # again: this time the audit corrects the assignee and priority, and the task completes
                completion = asyncio.create_task(user_tasks.complete(client, key, {"ok": True}, None))
                (audit,) = await asyncio.to_thread(weir_proto.activate_jobs, raw, "tl-completing-audit")
                corrections = weir_proto.message("JobResultCorrections")(assignee="eve", priority=77)
                await asyncio.to_thread(
                    weir_proto.complete_job, raw, audit.key, weir_proto.message("JobResult")(corrections=corrections)
                )
                completed = await completion
                assert completed.intent == UserTaskIntent.COMPLETED
                assert (completed.value["assignee"], completed.value["priority"]) == ("eve", 77)
        finally:
            raw.close()
            await worker.stop()
            work.cancel()

    asyncio.run(scenario())
    assert {job_type for job_type, _ in approved} == {"tl-creating", "tl-assigning", "tl-completing"}
    assert all(owner == "zoe" for _, owner in approved), "listener jobs see the element's variables"
    intents = [r["intent"] for r in user_task_events(node, pid)]
    assert intents == [
        "CREATING",
        "CREATED",
        "ASSIGNING",
        "ASSIGNED",
        "ASSIGNING",
        "ASSIGNED",
        "COMPLETING",
        "COMPLETION_DENIED",
        "COMPLETING",
        "CORRECTED",
        "COMPLETED",
    ]
    listener_jobs = [
        r["value"]
        for r in exported(node)
        if r["valueType"] == "JOB" and r["intent"] == "CREATED" and r["value"]["bpmnProcessId"] == pid
    ]
    assert {(j["jobKind"], j["jobListenerEventType"]) for j in listener_jobs} == {
        ("TASK_LISTENER", "CREATING"),
        ("TASK_LISTENER", "ASSIGNING"),
        ("TASK_LISTENER", "COMPLETING"),
    }
