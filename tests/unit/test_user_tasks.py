"""Native user tasks on one in-process partition: the USER_TASK lifecycle, its commands and rejections, task
listeners (approval, corrections, denial) and cancellation; the log replays to the live state afterwards."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from broker.protocol.enums import JobIntent, RecordType, RejectionType, UserTaskIntent, ValueType
from broker.protocol.record import Record
from broker.state.repositories import PartitionState
from broker.tools.inspect import iter_records
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live

UT = UserTaskIntent
DUE = "2030-02-01T09:00:00+01:00"


def task_of(d: Driver, instance_key: int) -> dict[str, Any] | None:
    """The (settled) user task of a process instance, if any."""

    def find(s: PartitionState) -> dict[str, Any] | None:
        from broker.state.db import unpack

        for _, raw in s.iter_all("user_tasks"):
            entry = unpack(raw)
            if entry["value"]["processInstanceKey"] == instance_key:
                return entry
        return None

    return d.read(find)


async def eventually_task(d: Driver, instance_key: int, state: str) -> dict[str, Any]:
    for _ in range(500):
        entry = task_of(d, instance_key)
        if entry is not None and entry["state"] == state:
            return entry
        await asyncio.sleep(0.01)
    raise AssertionError(f"no user task in state {state}: {task_of(d, instance_key)}")


def user_task_records(directory: Path, key: int) -> list[str]:
    return [
        UT(r.intent).name
        for r in iter_records(directory)
        if r.value_type == ValueType.USER_TASK and r.key == key and r.record_type == RecordType.EVENT
    ]


async def command(d: Driver, intent: UT, key: int, **value: Any) -> Record:
    return await d.send(ValueType.USER_TASK, intent, value, key)


async def test_a_native_user_task_is_created_assigned_updated_and_completed(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("user-task-native.bpmn"))
    created = accepted(await d.create("user-task-native", {"reviewers": ["ann", "bob"], "due": DUE}))
    pi = created.value["processInstanceKey"]
    entry = await eventually_task(d, pi, "CREATED")
    task = entry["value"]
    key = task["userTaskKey"]
    assert task["candidateGroupsList"] == ["sales", "ops"]
    assert task["candidateUsersList"] == ["ann", "bob"]
    assert (task["dueDate"], task["followUpDate"]) == (DUE, "2030-01-01T10:00:00+01:00")
    assert (task["priority"], task["externalFormReference"]) == (70, "https://forms.example/approve")
    assert task["customHeaders"] == {"department": "sales"} and task["assignee"] == ""
    assert d.read(lambda s: list(s.iter_all("jobs"))) == []  # a native user task is not a job

    rejected = await command(d, UT.ASSIGN, 12345, assignee="ann")
    assert rejected.rejection_type == RejectionType.NOT_FOUND
    assert rejected.rejection_reason == "Expected to assign user task with key '12345', but no such user task was found"

    assigned = accepted(await command(d, UT.ASSIGN, key, assignee="ann", action="handover"))
    assert assigned.intent == UT.ASSIGNED
    assert (assigned.value["assignee"], assigned.value["action"]) == ("ann", "handover")
    assert assigned.value["changedAttributes"] == ["assignee"]
    refused = await command(d, UT.CLAIM, key, assignee="bob")
    assert refused.rejection_type == RejectionType.INVALID_STATE
    assert refused.rejection_reason == f"Expected to claim user task with key '{key}', but it has already been assigned"
    accepted(await command(d, UT.CLAIM, key, assignee="ann"))  # claiming one's own task is fine

    updated = accepted(
        await command(
            d,
            UT.UPDATE,
            key,
            changedAttributes=["priority", "candidateUsersList"],
            priority=90,
            candidateUsersList=["ann", "bob"],
        )
    )
    assert updated.intent == UT.UPDATED and updated.value["changedAttributes"] == ["priority"]
    bad = await command(d, UT.UPDATE, key, changedAttributes=["priority"], priority=101)
    assert bad.rejection_type == RejectionType.INVALID_ARGUMENT

    completed = accepted(await command(d, UT.COMPLETE, key, variables={"approved": True}))
    assert completed.intent == UT.COMPLETED and completed.value["action"] == "complete"
    await d.settle()
    assert task_of(d, pi) is None
    again = await command(d, UT.COMPLETE, key, variables={})
    assert again.rejection_type == RejectionType.NOT_FOUND
    await d.close()
    assert user_task_records(d.directory, key) == [
        "CREATING",
        "CREATED",
        "ASSIGNING",
        "ASSIGNED",
        "CLAIMING",
        "ASSIGNED",
        "UPDATING",
        "UPDATED",
        "COMPLETING",
        "COMPLETED",
    ]
    variables = [r.value for r in iter_records(d.directory) if r.value_type == ValueType.VARIABLE]
    assert any(v["name"] == "approved" and v["scopeKey"] == pi for v in variables)
    check_replay_equals_live(d.directory, tmp_path)


async def test_the_timer_boundary_event_cancels_the_user_task(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("user-task-native.bpmn"))
    pi = accepted(await d.create("user-task-native", {"reviewers": [], "due": None})).value["processInstanceKey"]
    key = (await eventually_task(d, pi, "CREATED"))["value"]["userTaskKey"]
    d.clock.now += 61_000
    for _ in range(500):
        if task_of(d, pi) is None:
            break
        await asyncio.sleep(0.01)
    assert task_of(d, pi) is None
    late = await command(d, UT.COMPLETE, key)
    assert late.rejection_type == RejectionType.NOT_FOUND
    await d.close()
    assert user_task_records(d.directory, key)[-2:] == ["CANCELING", "CANCELED"]
    check_replay_equals_live(d.directory, tmp_path)


async def complete_listener(d: Driver, job_type: str, result: dict[str, Any] | None = None) -> Record:
    for _ in range(200):
        keys = await d.activate(job_type, 1)
        if keys:
            value = {"variables": {}, "result": result or {}}
            return await d.send(ValueType.JOB, JobIntent.COMPLETE, value, keys[0])
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {job_type} job")


async def test_task_listeners_run_in_order_correct_and_deny(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("user-task-listeners.bpmn"))
    pi = accepted(await d.create("user-task-listeners", {"owner": "zoe"})).value["processInstanceKey"]
    assert (await eventually_task(d, pi, "CREATING"))["state"] == "CREATING"
    creating = {"correctedAttributes": ["assignee"], "corrections": {"assignee": "ida"}}
    accepted(await complete_listener(d, "tl-creating", creating))
    # the modelled assignee, as the creating listener corrected it, goes through the assigning listeners
    assigning = await eventually_task(d, pi, "ASSIGNING")
    assert assigning["transition"]["value"]["assignee"] == "ida" and assigning["value"]["assignee"] == ""
    corrections = {"assignee": "max", "priority": 80}
    result = {"denied": False, "correctedAttributes": ["assignee", "priority"], "corrections": corrections}
    accepted(await complete_listener(d, "tl-assigning", result))
    entry = await eventually_task(d, pi, "CREATED")
    key = entry["value"]["userTaskKey"]
    assert (entry["value"]["assignee"], entry["value"]["priority"]) == ("max", 80)

    # completing: the request waits for both listeners; the second denies
    completion = asyncio.create_task(command(d, UT.COMPLETE, key, variables={"ok": True}))
    accepted(await complete_listener(d, "tl-completing"))
    assert not completion.done()
    (audit,) = await d.activate("tl-completing-audit")
    with_variables = await d.send(ValueType.JOB, JobIntent.COMPLETE, {"variables": {"x": 1}}, audit)
    assert with_variables.rejection_type == RejectionType.INVALID_ARGUMENT
    denial = {"variables": {}, "result": {"denied": True, "deniedReason": "missing receipt"}}
    accepted(await d.send(ValueType.JOB, JobIntent.COMPLETE, denial, audit))
    denied = await asyncio.wait_for(completion, 5)
    assert denied.record_type == RecordType.COMMAND_REJECTION and denied.rejection_type == RejectionType.INVALID_STATE
    assert "denied by a task listener" in denied.rejection_reason and "missing receipt" in denied.rejection_reason
    assert (await eventually_task(d, pi, "CREATED"))["value"]["assignee"] == "max"

    # a denial where none is allowed (creating, canceling) is refused
    accepted(await d.cancel(pi))
    for _ in range(200):
        cancel_listeners = await d.activate("tl-canceling")
        if cancel_listeners:
            break
        await asyncio.sleep(0.01)
    deny = {"variables": {}, "result": {"denied": True}}
    refused = await d.send(ValueType.JOB, JobIntent.COMPLETE, deny, cancel_listeners[0])
    assert refused.rejection_type == RejectionType.INVALID_ARGUMENT and "denying" in refused.rejection_reason
    assert (await eventually_task(d, pi, "CANCELING"))["state"] == "CANCELING"  # the element waits for it
    accepted(await d.send(ValueType.JOB, JobIntent.COMPLETE, {"variables": {}}, cancel_listeners[0]))
    await d.settle()
    assert task_of(d, pi) is None
    assert d.read(lambda s: list(s.iter_all("element_instances"))) == []  # the instance terminated after it
    await d.close()
    assert user_task_records(d.directory, key) == [
        "CREATING",
        "CORRECTED",
        "CREATED",
        "ASSIGNING",
        "CORRECTED",
        "ASSIGNED",
        "COMPLETING",
        "COMPLETION_DENIED",
        "CANCELING",
        "CANCELED",
    ]
    check_replay_equals_live(d.directory, tmp_path)


async def wait_incident(d: Driver, error_type: str) -> tuple[int, dict[str, Any]]:
    for _ in range(500):
        found = [(key, i) for key, i in d.incidents() if i["errorType"] == error_type]
        if found:
            return found[0]
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {error_type} incident: {d.incidents()}")


async def test_incidents_stop_a_transition_and_resolving_them_resumes_it(tmp_path: Path) -> None:
    """A missing form, a listener out of retries and a listener type that is no string each raise an incident on
    the element; once resolved, the creation or the transition goes on where it stopped."""
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("user-task-listener-feel.bpmn"))
    variables = {"formId": "approval-form", "creatingType": "tl-feel-creating", "assigningType": None}
    pi = accepted(await d.create("user-task-listener-feel", variables)).value["processInstanceKey"]
    key, incident = await wait_incident(d, "FORM_NOT_FOUND")
    assert "approval-form" in incident["errorMessage"] and task_of(d, pi) is None
    form = {"resourceName": "approval.form", "resource": b'{"id": "approval-form", "components": []}'}
    deployed = accepted(await d.send(ValueType.DEPLOYMENT, 0, {"resources": [form]}))  # DeploymentIntent.CREATE
    form_key = deployed.value["formMetadata"][0]["formKey"]
    accepted(await d.resolve(key))

    # the creating listener (retries="1", from the older event type name "create") fails: an incident of its own
    (job,) = await d.activate("tl-feel-creating")
    accepted(await d.fail(job, retries=0))
    key, incident = await wait_incident(d, "TASK_LISTENER_NO_RETRIES")
    assert incident["jobKey"] == job
    accepted(await d.update_retries(job, 1))
    accepted(await d.resolve(key))
    (job,) = await d.activate("tl-feel-creating")
    accepted(await d.complete(job))
    entry = await eventually_task(d, pi, "CREATED")
    task_key = entry["value"]["userTaskKey"]
    assert entry["value"]["formKey"] == form_key

    # assigning: the listener's type is null, so the transition stops until the variable is set
    assignment = asyncio.create_task(command(d, UT.ASSIGN, task_key, assignee="ann"))
    key, incident = await wait_incident(d, "EXTRACT_VALUE_ERROR")
    assert (await eventually_task(d, pi, "ASSIGNING"))["state"] == "ASSIGNING"
    accepted(await d.set_variables(pi, {"assigningType": "tl-feel-assigning"}))
    accepted(await d.resolve(key))
    (job,) = await d.activate("tl-feel-assigning")
    thrown = await d.throw_error(job, "E")
    assert thrown.rejection_type == RejectionType.INVALID_STATE and "TASK_LISTENER" in thrown.rejection_reason
    accepted(await d.complete(job))
    assigned = await asyncio.wait_for(assignment, 5)
    assert assigned.intent == UT.ASSIGNED and assigned.value["assignee"] == "ann"
    await d.close()
    assert user_task_records(d.directory, task_key) == ["CREATING", "CREATED", "ASSIGNING", "ASSIGNED"]
    check_replay_equals_live(d.directory, tmp_path)
