"""Process instance migration on one in-process partition: each kind of element Weir migrates (jobs, user tasks,
sub-processes, event sub-processes, catch events and their subscriptions, multi-instance bodies, call activities,
tokens waiting at joins) goes on in the target version, each precondition refuses with Zeebe's reason, and the log
replays to the live state."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from broker.protocol.enums import (
    JobIntent,
    MessageIntent,
    ProcessInstanceCreationIntent,
    ProcessInstanceIntent,
    ProcessInstanceMigrationIntent,
    RecordType,
    RejectionType,
    ResourceDeletionIntent,
    TimerIntent,
    UserTaskIntent,
    ValueType,
)
from broker.protocol.record import Record
from broker.protocol.values import TENANT
from broker.tools.inspect import iter_records
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live

PI = ProcessInstanceIntent
NS = (
    'xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" '
    'id="defs" targetNamespace="https://weir.example"'
)


def model(process_id: str, body: str) -> bytes:
    process = f'<bpmn:process id="{process_id}" isExecutable="true">{body}</bpmn:process>'
    return f"<bpmn:definitions {NS}>{process}</bpmn:definitions>".encode()


def task(element_id: str, job_type: str, extra: str = "") -> str:
    return (
        f'<bpmn:serviceTask id="{element_id}"><bpmn:extensionElements><zeebe:taskDefinition type="{job_type}"/>'
        f"</bpmn:extensionElements>{extra}</bpmn:serviceTask>"
    )


def flow(flow_id: str, source: str, target: str) -> str:
    return f'<bpmn:sequenceFlow id="{flow_id}" sourceRef="{source}" targetRef="{target}"/>'


def line(*ids: str) -> str:
    """Sequence flows joining the elements in order, named ``f-a-b``."""
    return "".join(flow(f"f-{a}-{b}", a, b) for a, b in itertools.pairwise(ids))


START, END = '<bpmn:startEvent id="start"/>', '<bpmn:endEvent id="end"/>'


async def deploy(d: Driver, process_id: str, body: str) -> int:
    """Deploy one process; its definition key."""
    name = f"{process_id}-{abs(hash(body))}.bpmn"
    resources = [{"resourceName": name, "resource": model(process_id, body)}]
    from broker.protocol.enums import DeploymentIntent

    rec = accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources}))
    return rec.value["processesMetadata"][0]["processDefinitionKey"]


async def migrate(d: Driver, instance_key: int, target_key: int, *pairs: tuple[str, str]) -> Record:
    value = {
        "processInstanceKey": instance_key,
        "targetProcessDefinitionKey": target_key,
        "mappingInstructions": [{"sourceElementId": s, "targetElementId": t} for s, t in pairs],
    }
    return await d.send(
        ValueType.PROCESS_INSTANCE_MIGRATION, ProcessInstanceMigrationIntent.MIGRATE, value, instance_key
    )


def events(d: Driver, value_type: ValueType, intent: int) -> list[Record]:
    return [
        r
        for r in iter_records(d.directory)
        if r.value_type == value_type and r.intent == intent and r.record_type == RecordType.EVENT
    ]


def element_instances(d: Driver, instance_key: int) -> dict[str, dict[str, Any]]:
    """The live element instances of a process instance by element id (their record values)."""
    from broker.state.db import unpack

    def find(s: Any) -> dict[str, dict[str, Any]]:
        out = {}
        for _, raw in s.iter_all("element_instances"):
            value = unpack(raw)["value"]
            if value["processInstanceKey"] == instance_key:
                out[value["elementId"]] = value
        return out

    return d.read(find)


async def jobs_of(d: Driver, job_type: str, count: int = 1) -> list[int]:
    for _ in range(300):
        keys = await d.activate(job_type, max_jobs=count)
        if len(keys) >= count:
            return keys
        await asyncio.sleep(0.01)
    raise AssertionError(f"no job of type {job_type}")


async def ended(d: Driver, instance_key: int) -> None:
    for _ in range(300):
        if not element_instances(d, instance_key):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"instance {instance_key} still runs: {sorted(element_instances(d, instance_key))}")


async def start(d: Driver, process_id: str, variables: dict[str, Any] | None = None) -> int:
    """An instance of the first version of ``process_id`` (the one deployed first)."""
    first = d.read(lambda s: s.processes.key_of(TENANT, process_id, 1))
    value = {"processDefinitionKey": first, "version": -1, "variables": variables or {}, "tenantId": "<default>"}
    rec = accepted(await d.send(ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, value))
    await d.settle()
    return rec.value["processInstanceKey"]


async def finish(d: Driver, tmp_path: Path) -> None:
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


V1_TASK = START + task("a", "work") + END + line("start", "a", "end")
V2_TASK = START + task("a2", "work") + task("after", "after") + END + line("start", "a2", "after", "end")


async def test_a_job_keeps_its_key_and_the_instance_goes_on_in_the_target_version(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    v1 = await deploy(d, "order", V1_TASK)
    v2 = await deploy(d, "order", V2_TASK)
    pi = await start(d, "order", {"x": 1})
    (job_key,) = await jobs_of(d, "work")
    deletion = {"resourceKey": v1, "tenantId": "<default>"}
    running = await d.send(ValueType.RESOURCE_DELETION, ResourceDeletionIntent.DELETE, deletion, v1)
    assert running.rejection_type == RejectionType.INVALID_STATE  # an instance of v1 runs

    migrated = accepted(await migrate(d, pi, v2, ("a", "a2")))
    # the instance runs v2 now: v1 has no instance left and may be deleted
    accepted(await d.send(ValueType.RESOURCE_DELETION, ResourceDeletionIntent.DELETE, deletion, v1))
    assert migrated.intent == ProcessInstanceMigrationIntent.MIGRATED
    assert migrated.value["targetProcessDefinitionKey"] == v2
    assert migrated.value["mappingInstructions"] == [{"sourceElementId": "a", "targetElementId": "a2"}]
    live = element_instances(d, pi)
    assert set(live) == {"order", "a2"}
    assert {v["processDefinitionKey"] for v in live.values()} == {v2}
    assert {v["version"] for v in live.values()} == {2}
    (job,) = events(d, ValueType.JOB, JobIntent.MIGRATED)
    assert job.key == job_key
    assert (job.value["elementId"], job.value["processDefinitionKey"], job.value["processDefinitionVersion"]) == (
        "a2",
        v2,
        2,
    )
    assert [r.value["elementId"] for r in events(d, ValueType.PROCESS_INSTANCE, PI.ELEMENT_MIGRATED)] == ["order", "a2"]
    (variable,) = events(d, ValueType.VARIABLE, 2)  # VARIABLE MIGRATED
    assert (variable.value["name"], variable.value["processDefinitionKey"], "value" in variable.value) == (
        "x",
        v2,
        False,
    )

    accepted(await d.complete(job_key))  # the activated job is still the worker's, and completes
    (after,) = await jobs_of(d, "after")  # the target's outgoing flow
    accepted(await d.complete(after))
    await ended(d, pi)
    await finish(d, tmp_path)


async def test_a_process_may_move_to_a_definition_of_another_process_id(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await deploy(d, "order", V1_TASK)
    other = await deploy(d, "invoice", V2_TASK)
    pi = await start(d, "order")
    (job_key,) = await jobs_of(d, "work")
    accepted(await migrate(d, pi, other, ("a", "a2")))
    assert element_instances(d, pi)["invoice"]["bpmnProcessId"] == "invoice"
    (job,) = events(d, ValueType.JOB, JobIntent.MIGRATED)
    assert job.value["bpmnProcessId"] == "invoice"
    accepted(await d.complete(job_key))
    accepted(await d.complete((await jobs_of(d, "after"))[0]))
    await ended(d, pi)
    await finish(d, tmp_path)


NATIVE = '<bpmn:userTask id="{id}"><bpmn:extensionElements><zeebe:userTask/></bpmn:extensionElements></bpmn:userTask>'


async def test_a_native_user_task_is_migrated(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await deploy(d, "review", START + NATIVE.format(id="check") + END + line("start", "check", "end"))
    v2 = await deploy(
        d,
        "review",
        START + NATIVE.format(id="check2") + task("after", "after") + END + line("start", "check2", "after", "end"),
    )
    pi = await start(d, "review")
    accepted(await migrate(d, pi, v2, ("check", "check2")))
    (task_rec,) = events(d, ValueType.USER_TASK, UserTaskIntent.MIGRATED)
    assert (task_rec.value["elementId"], task_rec.value["processDefinitionKey"]) == ("check2", v2)
    accepted(await d.send(ValueType.USER_TASK, UserTaskIntent.COMPLETE, {"variables": {}}, task_rec.key))
    accepted(await d.complete((await jobs_of(d, "after"))[0]))
    await ended(d, pi)
    await finish(d, tmp_path)


def sub_process(element_id: str, inner: str, extra: str = "") -> str:
    return f'<bpmn:subProcess id="{element_id}"{extra}>{inner}</bpmn:subProcess>'


INNER = '<bpmn:startEvent id="s-in"/>' + task("in", "inner") + '<bpmn:endEvent id="e-in"/>' + line("s-in", "in", "e-in")


async def test_a_sub_process_and_the_task_inside_it_are_migrated(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await deploy(d, "sp", START + sub_process("sub", INNER) + END + line("start", "sub", "end"))
    inner2 = (
        '<bpmn:startEvent id="s-in"/>'
        + task("in2", "inner")
        + '<bpmn:endEvent id="e-in"/>'
        + line("s-in", "in2", "e-in")
    )
    v2 = await deploy(
        d,
        "sp",
        START + sub_process("sub2", inner2) + task("after", "after") + END + line("start", "sub2", "after", "end"),
    )
    pi = await start(d, "sp")
    (job_key,) = await jobs_of(d, "inner")
    accepted(await migrate(d, pi, v2, ("sub", "sub2"), ("in", "in2")))
    assert set(element_instances(d, pi)) == {"sp", "sub2", "in2"}
    accepted(await d.complete(job_key))
    accepted(await d.complete((await jobs_of(d, "after"))[0]))
    await ended(d, pi)
    await finish(d, tmp_path)


def message_catch(element_id: str, message_ref: str) -> str:
    definition = f'<bpmn:messageEventDefinition messageRef="{message_ref}"/>'
    return f'<bpmn:intermediateCatchEvent id="{element_id}">{definition}</bpmn:intermediateCatchEvent>'


def message(message_id: str, name: str) -> str:
    return (
        f'<bpmn:message id="{message_id}" name="{name}"><bpmn:extensionElements>'
        '<zeebe:subscription correlationKey="=key"/></bpmn:extensionElements></bpmn:message>'
    )


def with_messages(process_id: str, body: str, messages: str) -> bytes:
    return (
        f'<bpmn:definitions {NS}><bpmn:process id="{process_id}" isExecutable="true">{body}</bpmn:process>'
        f"{messages}</bpmn:definitions>"
    ).encode()


async def deploy_raw(d: Driver, name: str, data: bytes) -> int:
    from broker.protocol.enums import DeploymentIntent

    resources = [{"resourceName": name, "resource": data}]
    rec = accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources}))
    return rec.value["processesMetadata"][0]["processDefinitionKey"]


async def test_a_message_catch_event_keeps_its_subscription(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    v1 = with_messages(
        "wait", START + message_catch("paid", "m") + END + line("start", "paid", "end"), message("m", "payment")
    )
    body2 = START + message_catch("paid2", "m") + task("after", "after") + END + line("start", "paid2", "after", "end")
    await deploy_raw(d, "wait-1.bpmn", v1)
    v2 = await deploy_raw(d, "wait-2.bpmn", with_messages("wait", body2, message("m", "payment")))
    pi = await start(d, "wait", {"key": "o-1"})
    from broker.protocol.enums import ProcessMessageSubscriptionIntent as PMS

    for _ in range(300):  # the message partition confirmed the subscription (else the pending CREATE carries it)
        if events(d, ValueType.PROCESS_MESSAGE_SUBSCRIPTION, PMS.CREATED):
            break
        await asyncio.sleep(0.01)
    accepted(await migrate(d, pi, v2, ("paid", "paid2")))

    (moved,) = events(d, ValueType.PROCESS_MESSAGE_SUBSCRIPTION, PMS.MIGRATED)
    assert (moved.value["elementId"], moved.value["processDefinitionKey"]) == ("paid2", v2)
    await d.settle()
    from broker.protocol.enums import MessageSubscriptionIntent as MS

    (copy,) = events(d, ValueType.MESSAGE_SUBSCRIPTION, MS.MIGRATED)  # the message partition's copy follows
    assert (copy.value["elementId"], copy.value["bpmnProcessId"], copy.value["processDefinitionKey"]) == (
        "paid2",
        "wait",
        v2,
    )
    publish = {"name": "payment", "correlationKey": "o-1", "timeToLive": 0, "messageId": "", "variables": {}}
    accepted(await d.send(ValueType.MESSAGE, MessageIntent.PUBLISH, publish))
    accepted(await d.complete((await jobs_of(d, "after"))[0]))
    await ended(d, pi)
    await finish(d, tmp_path)


def timer_boundary(element_id: str, attached_to: str, duration: str = "PT1H") -> str:
    return (
        f'<bpmn:boundaryEvent id="{element_id}" attachedToRef="{attached_to}"><bpmn:timerEventDefinition>'
        f"<bpmn:timeDuration>{duration}</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>"
    )


async def test_a_mapped_boundary_timer_moves_and_an_unmapped_one_is_replaced(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    body1 = START + task("a", "work") + timer_boundary("late", "a") + timer_boundary("later", "a", "PT2H") + END
    body1 += '<bpmn:endEvent id="e-late"/><bpmn:endEvent id="e-later"/>'
    body1 += line("start", "a", "end") + line("late", "e-late") + line("later", "e-later")
    await deploy(d, "timed", body1)
    body2 = START + task("a", "work") + timer_boundary("late2", "a") + timer_boundary("fresh", "a", "PT3H") + END
    body2 += '<bpmn:endEvent id="e-late"/><bpmn:endEvent id="e-fresh"/>'
    body2 += line("start", "a", "end") + line("late2", "e-late") + line("fresh", "e-fresh")
    v2 = await deploy(d, "timed", body2)
    pi = await start(d, "timed")
    created = {r.value["targetElementId"]: r for r in events(d, ValueType.TIMER, TimerIntent.CREATED)}
    accepted(await migrate(d, pi, v2, ("a", "a"), ("late", "late2")))
    (moved,) = events(d, ValueType.TIMER, TimerIntent.MIGRATED)
    assert moved.key == created["late"].key and moved.value["targetElementId"] == "late2"
    assert moved.value["dueDate"] == created["late"].value["dueDate"]  # keeps its due date
    assert [r.key for r in events(d, ValueType.TIMER, TimerIntent.CANCELED)] == [created["later"].key]
    fresh = [r for r in events(d, ValueType.TIMER, TimerIntent.CREATED) if r.value["targetElementId"] == "fresh"]
    assert len(fresh) == 1 and fresh[0].value["processDefinitionKey"] == v2
    d.clock.now += 3_600_001  # the migrated timer fires: the target's boundary event interrupts the task
    await ended(d, pi)
    activated = [r.value["elementId"] for r in events(d, ValueType.PROCESS_INSTANCE, PI.ELEMENT_ACTIVATED)]
    assert "late2" in activated and "e-late" in activated and "late" not in activated
    await finish(d, tmp_path)


def multi(element_id: str, job_type: str, *, sequential: bool = False) -> str:
    seq = "true" if sequential else "false"
    loop = (
        f'<bpmn:multiInstanceLoopCharacteristics isSequential="{seq}"><bpmn:extensionElements>'
        '<zeebe:loopCharacteristics inputCollection="=items" inputElement="item"/></bpmn:extensionElements>'
        "</bpmn:multiInstanceLoopCharacteristics>"
    )
    return task(element_id, job_type, loop)


async def test_a_multi_instance_body_and_its_instances_are_migrated(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await deploy(d, "each", START + multi("m", "item") + END + line("start", "m", "end"))
    v2 = await deploy(
        d, "each", START + multi("m2", "item") + task("after", "after") + END + line("start", "m2", "after", "end")
    )
    pi = await start(d, "each", {"items": [1, 2]})
    keys = await jobs_of(d, "item", 2)
    accepted(await migrate(d, pi, v2, ("m", "m2")))
    migrated = events(d, ValueType.PROCESS_INSTANCE, PI.ELEMENT_MIGRATED)
    assert [r.value["bpmnElementType"] for r in migrated] == [
        "PROCESS",
        "MULTI_INSTANCE_BODY",
        "SERVICE_TASK",
        "SERVICE_TASK",
    ]
    assert len(events(d, ValueType.JOB, JobIntent.MIGRATED)) == 2
    for key in keys:
        accepted(await d.complete(key))
    accepted(await d.complete((await jobs_of(d, "after"))[0]))
    await ended(d, pi)
    await finish(d, tmp_path)


PARALLEL = (
    START
    + '<bpmn:parallelGateway id="fork"/>'
    + task("a", "a")
    + task("b", "b")
    + '<bpmn:parallelGateway id="join"/>'
    + END
    + line("start", "fork")
    + flow("fa", "fork", "a")
    + flow("fb", "fork", "b")
    + flow("aj", "a", "join")
    + flow("bj", "b", "join")
    + line("join", "end")
)


async def test_a_token_waiting_at_a_parallel_join_moves_to_the_mapped_flow(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await deploy(d, "par", PARALLEL)
    body2 = (
        START
        + '<bpmn:parallelGateway id="fork"/>'
        + task("a", "a")
        + task("b", "b")
        + '<bpmn:parallelGateway id="join2"/>'
        + task("after", "after")
        + END
        + line("start", "fork")
        + flow("fa", "fork", "a")
        + flow("fb", "fork", "b")
        + flow("aj2", "a", "join2")
        + flow("bj2", "b", "join2")
        + line("join2", "after", "end")
    )
    v2 = await deploy(d, "par", body2)
    pi = await start(d, "par")
    accepted(await d.complete((await jobs_of(d, "a"))[0]))
    await d.settle()
    (b_job,) = await jobs_of(d, "b")
    kind, reason = await refused(d, pi, v2, ("b", "b"))
    assert kind == RejectionType.INVALID_STATE
    assert "no mapping instruction defined for the gateway with id 'join'" in reason
    kind, reason = await refused(d, pi, v2, ("b", "b"), ("join", "end"))
    assert kind == RejectionType.INVALID_STATE
    assert reason == (
        f"Expected to migrate process instance '{pi}' but active gateway with id 'join' and type 'PARALLEL_GATEWAY' is "
        "mapped to an element with id 'end' and different type 'END_EVENT'. Gateways must be mapped to gateways of "
        "the same type."
    )
    kind, reason = await refused(d, pi, v2, ("b", "b"), ("join", "join2"))
    assert "the taken sequence flow with id 'aj' of the gateway with id 'join' is not mapped to an incoming" in reason
    accepted(await migrate(d, pi, v2, ("b", "b"), ("join", "join2"), ("aj", "aj2")))
    deleted = events(d, ValueType.PROCESS_INSTANCE, PI.SEQUENCE_FLOW_DELETED)
    assert [r.value["elementId"] for r in deleted] == ["aj"]
    accepted(await d.complete(b_job))
    accepted(await d.complete((await jobs_of(d, "after"))[0]))
    await ended(d, pi)
    await finish(d, tmp_path)


async def test_a_call_activity_is_migrated_and_its_child_keeps_its_definition(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await deploy(d, "child", V1_TASK)
    call = (
        '<bpmn:callActivity id="{id}"><bpmn:extensionElements><zeebe:calledElement processId="child"/>'
        "</bpmn:extensionElements></bpmn:callActivity>"
    )
    await deploy(d, "parent", START + call.format(id="call") + END + line("start", "call", "end"))
    v2 = await deploy(
        d,
        "parent",
        START + call.format(id="call2") + task("after", "after") + END + line("start", "call2", "after", "end"),
    )
    pi = await start(d, "parent")
    (job_key,) = await jobs_of(d, "work")
    accepted(await migrate(d, pi, v2, ("call", "call2")))
    assert [r.value["elementId"] for r in events(d, ValueType.PROCESS_INSTANCE, PI.ELEMENT_MIGRATED)] == [
        "parent",
        "call2",
    ]
    assert events(d, ValueType.JOB, JobIntent.MIGRATED) == []  # the child's job belongs to the child
    # the called instance is migrated on its own (as in Zeebe), and still returns to its caller
    child_v2 = await deploy(d, "child", V2_TASK)
    (child,) = [k for k, v in element_instances_by_key(d).items() if v["bpmnProcessId"] == "child"]
    accepted(await migrate(d, child, child_v2, ("a", "a2")))
    accepted(await d.complete(job_key))
    accepted(await d.complete((await jobs_of(d, "after"))[0]))  # the child's new task (job type "after" too)
    accepted(await d.complete((await jobs_of(d, "after"))[0]))
    await ended(d, pi)
    await finish(d, tmp_path)


# -- rejections -------------------------------------------------------------------------------------------------


async def refused(d: Driver, pi: int, target: int, *pairs: tuple[str, str]) -> tuple[RejectionType, str]:
    rec = await migrate(d, pi, target, *pairs)
    assert rec.record_type == RecordType.COMMAND_REJECTION, rec.describe()
    return rec.rejection_type, rec.rejection_reason


async def test_every_precondition_refuses_with_zeebes_reason(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await deploy(d, "order", V1_TASK)
    v2 = await deploy(d, "order", V2_TASK)
    pi = await start(d, "order")
    await jobs_of(d, "work")

    assert await refused(d, 999, v2, ("a", "a2")) == (
        RejectionType.NOT_FOUND,
        "Expected to migrate process instance but no process instance found with key '999'",
    )
    assert await refused(d, pi, 777, ("a", "a2")) == (
        RejectionType.NOT_FOUND,
        "Expected to migrate process instance to process definition but no process definition found with key '777'",
    )
    kind, reason = await refused(d, pi, v2, ("a", "a2"), ("a", "after"))
    assert kind == RejectionType.INVALID_ARGUMENT
    assert (
        reason
        == f"Expected to migrate process instance '{pi}' but the mapping instructions contain duplicate source element "
        "ids '[a]'."
    )
    kind, reason = await refused(d, pi, v2, ("nope", "a2"))
    assert kind == RejectionType.INVALID_ARGUMENT and "non-existing source element id 'nope'" in reason
    kind, reason = await refused(d, pi, v2, ("a", "nope"))
    assert kind == RejectionType.INVALID_ARGUMENT and "non-existing target element id 'nope'" in reason
    kind, reason = await refused(d, pi, v2)
    assert kind == RejectionType.INVALID_STATE
    assert reason == (
        f"Expected to migrate process instance '{pi}' but no mapping instruction defined for active element with id "
        "'a'. Elements cannot be migrated without a mapping."
    )
    kind, reason = await refused(d, pi, v2, ("a", "end"))
    assert kind == RejectionType.INVALID_STATE
    assert reason == (
        f"Expected to migrate process instance '{pi}' but active element with id 'a' and type 'SERVICE_TASK' is mapped "
        "to an element with id 'end' and different type 'END_EVENT'. Elements must be mapped to elements of the same "
        "type."
    )
    in_sub = await deploy(
        d,
        "order",
        START
        + sub_process("sub", INNER.replace('"in"', '"a"').replace("-in-e", "-a-e"))
        + END
        + line("start", "sub", "end"),
    )
    kind, reason = await refused(d, pi, in_sub, ("a", "a"))
    assert kind == RejectionType.INVALID_STATE
    assert (
        "the flow scope of active element with id 'a' is changed. The flow scope of the active element is expected "
        "to be 'order' but was 'sub'" in reason
    )
    as_user_task = await deploy(d, "order", START + NATIVE.format(id="a") + END + line("start", "a", "end"))
    kind, reason = await refused(d, pi, as_user_task, ("a", "a"))
    assert "and different type 'USER_TASK'" in reason
    as_multi = await deploy(d, "order", START + multi("a", "work") + END + line("start", "a", "end"))
    kind, reason = await refused(d, pi, as_multi, ("a", "a"))
    assert "and different type 'MULTI_INSTANCE_BODY'" in reason
    await d.close()


async def test_user_task_implementations_loops_and_catch_events_must_match(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await deploy(d, "review", START + NATIVE.format(id="check") + END + line("start", "check", "end"))
    job_worker = await deploy(d, "review", START + '<bpmn:userTask id="check"/>' + END + line("start", "check", "end"))
    pi = await start(d, "review")
    kind, reason = await refused(d, pi, job_worker, ("check", "check"))
    assert kind == RejectionType.INVALID_STATE
    assert reason == (
        f"Expected to migrate process instance '{pi}' but active user task with id 'check' and implementation 'zeebe "
        "user task' is mapped to an user task with id 'check' and different implementation 'job worker'. Elements "
        "must be mapped to elements of the same implementation."
    )

    await deploy(d, "each", START + multi("m", "item") + END + line("start", "m", "end"))
    sequential = await deploy(d, "each", START + multi("m", "item", sequential=True) + END + line("start", "m", "end"))
    each = await start(d, "each", {"items": [1]})
    kind, reason = await refused(d, each, sequential, ("m", "m"))
    assert "has a different loop characteristics than the target element with id 'm'" in reason

    body = (
        START
        + task("a", "work")
        + timer_boundary("late", "a")
        + END
        + '<bpmn:endEvent id="e2"/>'
        + line("start", "a", "end")
        + line("late", "e2")
    )
    await deploy(d, "timed", body)
    signal = (
        '<bpmn:boundaryEvent id="sig" attachedToRef="a"><bpmn:signalEventDefinition signalRef="s"/>'
        "</bpmn:boundaryEvent>"
    )
    body2 = START + task("a", "work") + signal + task("b", "other") + timer_boundary("late-b", "b") + END
    body2 += (
        '<bpmn:endEvent id="e2"/><bpmn:endEvent id="e3"/>'
        + line("start", "a", "b", "end")
        + line("sig", "e2")
        + line("late-b", "e3")
    )
    v2 = await deploy_raw(d, "timed-2.bpmn", with_messages("timed", body2, '<bpmn:signal id="s" name="stop"/>'))
    timed = await start(d, "timed")
    kind, reason = await refused(d, timed, v2, ("a", "a"), ("late", "sig"))
    assert "These catch events have different event types: 'TIMER' and 'SIGNAL'" in reason
    kind, reason = await refused(d, timed, v2, ("a", "a"), ("late", "late-b"))
    assert "These mappings detach the catch event from the element in the target process" in reason
    await d.close()


async def test_unsupported_active_elements_are_refused(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    ad_hoc = '<bpmn:adHocSubProcess id="adhoc">' + task("x", "x") + "</bpmn:adHocSubProcess>"
    await deploy(d, "free", START + ad_hoc + END + line("start", "adhoc", "end"))
    v2 = await deploy(d, "free", START + ad_hoc + task("y", "y") + END + line("start", "adhoc", "y", "end"))
    pi = await start(d, "free")
    kind, reason = await refused(d, pi, v2, ("adhoc", "adhoc"), ("x", "x"))
    assert kind == RejectionType.INVALID_STATE
    assert reason == (
        f"Expected to migrate process instance '{pi}' but active element with id 'adhoc' has an unsupported type. "
        "The migration of a AD_HOC_SUB_PROCESS is not supported."
    )
    await d.close()


def signal_esp(esp_id: str, start_id: str, task_id: str, job_type: str) -> str:
    start = (
        f'<bpmn:startEvent id="{start_id}" isInterrupting="false"><bpmn:signalEventDefinition signalRef="poke"/>'
        "</bpmn:startEvent>"
    )
    inner = (
        start
        + task(task_id, job_type)
        + f'<bpmn:endEvent id="{esp_id}-end"/>'
        + line(start_id, task_id, f"{esp_id}-end")
    )
    return f'<bpmn:subProcess id="{esp_id}" triggeredByEvent="true">{inner}</bpmn:subProcess>'


async def test_an_event_sub_process_and_its_start_subscription_are_migrated(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    signal = '<bpmn:signal id="poke" name="poke"/>'
    body1 = START + task("a", "work") + END + line("start", "a", "end") + signal_esp("esp", "poked", "handle", "handle")
    await deploy_raw(d, "esp-1.bpmn", with_messages("with-esp", body1, signal))
    body2 = START + task("a", "work") + task("after", "after") + END + line("start", "a", "after", "end")
    body2 += signal_esp("esp2", "poked2", "handle2", "handle")
    v2 = await deploy_raw(d, "esp-2.bpmn", with_messages("with-esp", body2, signal))
    pi = await start(d, "with-esp")
    from broker.protocol.enums import SignalIntent, SignalSubscriptionIntent

    accepted(await d.send(ValueType.SIGNAL, SignalIntent.BROADCAST, {"signalName": "poke", "variables": {}}))
    (handle,) = await jobs_of(d, "handle")
    (work,) = await jobs_of(d, "work")
    accepted(await migrate(d, pi, v2, ("a", "a"), ("esp", "esp2"), ("handle", "handle2"), ("poked", "poked2")))
    assert set(element_instances(d, pi)) == {"with-esp", "a", "esp2", "handle2"}
    (moved,) = events(d, ValueType.SIGNAL_SUBSCRIPTION, SignalSubscriptionIntent.MIGRATED)
    assert (moved.value["catchEventId"], moved.value["processDefinitionKey"]) == ("poked2", v2)
    accepted(await d.complete(handle))
    accepted(await d.complete(work))
    accepted(await d.complete((await jobs_of(d, "after"))[0]))
    await ended(d, pi)
    await finish(d, tmp_path)


async def test_an_incident_moves_with_its_job(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await deploy(d, "order", V1_TASK)
    v2 = await deploy(d, "order", V2_TASK)
    pi = await start(d, "order")
    (job_key,) = await jobs_of(d, "work")
    accepted(await d.fail(job_key, 0))
    await d.settle()
    ((incident_key, incident),) = d.incidents()
    assert incident["elementId"] == "a"
    accepted(await migrate(d, pi, v2, ("a", "a2")))
    (moved,) = events(d, ValueType.INCIDENT, 3)  # INCIDENT MIGRATED
    assert moved.key == incident_key
    assert (moved.value["elementId"], moved.value["processDefinitionKey"]) == ("a2", v2)
    assert [i["elementId"] for _, i in d.incidents()] == ["a2"]
    accepted(await d.update_retries(job_key, 1))
    accepted(await d.resolve(incident_key))
    accepted(await d.complete((await jobs_of(d, "work"))[0]))
    accepted(await d.complete((await jobs_of(d, "after"))[0]))
    await ended(d, pi)
    await finish(d, tmp_path)


async def test_catch_events_cannot_be_merged(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    body1 = START + task("a", "work") + timer_boundary("t1", "a") + timer_boundary("t2", "a") + END
    body1 += '<bpmn:endEvent id="e1"/><bpmn:endEvent id="e2"/>' + line("start", "a", "end") + line("t1", "e1")
    body1 += line("t2", "e2")
    await deploy(d, "timed", body1)
    body2 = START + task("a", "work") + timer_boundary("t", "a") + END + '<bpmn:endEvent id="e1"/>'
    body2 += line("start", "a", "end") + line("t", "e1")
    v2 = await deploy(d, "timed", body2)
    pi = await start(d, "timed")
    kind, reason = await refused(d, pi, v2, ("a", "a"), ("t1", "t"), ("t2", "t"))
    assert kind == RejectionType.INVALID_STATE
    assert reason == (
        f"Expected to migrate process instance '{pi}' but active element with id 'a' has a catch event attached that "
        "is mapped to a catch event with id 't'. There are multiple mapping instructions that target this catch event: "
        "'t1', 't2'. Catch events cannot be merged by process instance migration. Please ensure the mapping "
        "instructions target a catch event only once."
    )
    await d.close()


async def test_an_instance_with_compensable_activities_is_refused(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    compensation = (
        '<bpmn:boundaryEvent id="comp" attachedToRef="a"><bpmn:compensateEventDefinition/></bpmn:boundaryEvent>'
        + task("undo", "undo").replace("<bpmn:serviceTask ", '<bpmn:serviceTask isForCompensation="true" ')
    )
    body = START + task("a", "a") + task("b", "b") + END + line("start", "a", "b", "end") + compensation
    association = '<bpmn:association id="assoc" associationDirection="One" sourceRef="comp" targetRef="undo"/>'
    await deploy(d, "booking", body + association)
    renamed = START + task("a", "a") + task("b2", "b") + END + line("start", "a", "b2", "end") + compensation
    v2 = await deploy(d, "booking", renamed + association)
    pi = await start(d, "booking")
    accepted(await d.complete((await jobs_of(d, "a"))[0]))
    await jobs_of(d, "b")
    kind, reason = await refused(d, pi, v2, ("b", "b2"))
    assert kind == RejectionType.INVALID_STATE
    assert reason == (
        f"Expected to migrate process instance '{pi}' but it has completed activities that can still be compensated. "
        "Weir does not migrate compensation subscriptions yet."
    )
    await d.close()


async def test_a_correlation_key_held_in_the_target_process_refuses(tmp_path: Path) -> None:
    """Instances started by a message start event hold their correlation key per process id (one active instance
    per key): migrating one to another process id where an instance holds the same key is refused."""
    d = Driver(tmp_path / "p" / "1")
    d.open()

    def by_message(process_id: str, message_name: str) -> bytes:
        start_event = '<bpmn:startEvent id="start"><bpmn:messageEventDefinition messageRef="m"/></bpmn:startEvent>'
        body = start_event + task("a", "work") + END + line("start", "a", "end")
        return with_messages(process_id, body, f'<bpmn:message id="m" name="{message_name}"/>')

    await deploy_raw(d, "first.bpmn", by_message("first", "go-first"))
    second = await deploy_raw(d, "second.bpmn", by_message("second", "go-second"))
    for name in ("go-first", "go-second"):
        publish = {"name": name, "correlationKey": "k", "timeToLive": 0, "messageId": "", "variables": {}}
        accepted(await d.send(ValueType.MESSAGE, MessageIntent.PUBLISH, publish))
    await jobs_of(d, "work", 2)
    (first,) = [k for k, v in element_instances_by_key(d).items() if v["bpmnProcessId"] == "first"]
    kind, reason = await refused(d, first, second, ("a", "a"))
    assert kind == RejectionType.INVALID_STATE
    assert reason == (
        f"Expected to migrate process instance '{first}' but target process definition '{second}' has an active "
        "instance triggered by a message start event with correlation key 'k'. Only one instance per correlation key "
        "is allowed for message start events."
    )
    await d.close()


def element_instances_by_key(d: Driver) -> dict[int, dict[str, Any]]:
    """The live process instances by key (their record values)."""
    from broker.state.db import unpack

    def find(s: Any) -> dict[int, dict[str, Any]]:
        out = {}
        for _, raw in s.iter_all("element_instances"):
            entry = unpack(raw)
            if entry["value"]["bpmnElementType"] == "PROCESS":
                out[entry["key"]] = entry["value"]
        return out

    return d.read(find)


def timer_catch(element_id: str, duration: str) -> str:
    return (
        f'<bpmn:intermediateCatchEvent id="{element_id}"><bpmn:timerEventDefinition>'
        f"<bpmn:timeDuration>{duration}</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:intermediateCatchEvent>"
    )


async def test_an_event_based_gateway_keeps_the_subscriptions_of_its_events(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    gateway = '<bpmn:eventBasedGateway id="g"/>'
    body1 = START + gateway + timer_catch("soon", "PT1H") + timer_catch("late", "PT2H") + END
    body1 += line("start", "g", "soon", "end") + flow("g-late", "g", "late") + flow("late-end", "late", "end")
    await deploy(d, "choose", body1)
    body2 = START + gateway + timer_catch("soon2", "PT1H") + timer_catch("late", "PT2H") + task("after", "after") + END
    body2 += line("start", "g", "soon2", "after", "end") + flow("g-late", "g", "late") + flow("late-end", "late", "end")
    v2 = await deploy(d, "choose", body2)
    pi = await start(d, "choose")
    kind, reason = await refused(d, pi, v2, ("g", "g"), ("soon", "late"), ("late", "late"))
    assert kind == RejectionType.INVALID_STATE
    assert "There are multiple mapping instructions that target this catch event: 'late', 'soon'" in reason
    accepted(await migrate(d, pi, v2, ("g", "g"), ("soon", "soon2"), ("late", "late")))
    moved = events(d, ValueType.TIMER, TimerIntent.MIGRATED)
    assert sorted(r.value["targetElementId"] for r in moved) == ["late", "soon2"]
    assert events(d, ValueType.TIMER, TimerIntent.CANCELED) == []
    d.clock.now += 3_600_001
    accepted(await d.complete((await jobs_of(d, "after"))[0]))  # the target's flow after the fired event
    await ended(d, pi)
    await finish(d, tmp_path)
