"""Business ids and tags of process instances (Camunda 8.9), decided by the engine from state alone.

A partition runs in-process (as in test_replay.py); each scenario ends by checking that a replay of the log rebuilds
the live state, the business id index included.
"""

from __future__ import annotations

from pathlib import Path

from broker.engine.behaviors import TENANT
from broker.protocol.enums import (
    ProcessInstanceBusinessIdIntent,
    ProcessInstanceCreationIntent,
    RecordType,
    RejectionType,
    ValueType,
)
from broker.protocol.record import Record
from broker.stream.partition import PartitionConfig
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live


async def create(d: Driver, process_id: str, business_id: str = "", tags: list[str] | None = None) -> Record:
    value = {
        "bpmnProcessId": process_id,
        "version": -1,
        "processDefinitionKey": -1,
        "variables": {},
        "fetchVariables": [],
        "tenantId": TENANT,
        "businessId": business_id,
        "tags": tags or [],
    }
    return await d.send(ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, value)


def unique(tmp_path: Path, *, on: bool) -> Driver:
    d = Driver(tmp_path / "p" / "1", PartitionConfig(checker_interval_s=0.005, business_id_uniqueness=on))
    d.open()
    return d


def rejected(rec: Record, rejection: RejectionType) -> str:
    assert rec.record_type == RecordType.COMMAND_REJECTION, rec.describe()
    assert rec.rejection_type == rejection, rec.rejection_reason
    return rec.rejection_reason


async def test_with_uniqueness_a_second_active_root_instance_with_the_business_id_is_rejected(tmp_path: Path) -> None:
    d = unique(tmp_path, on=True)
    accepted(await d.deploy("one-task.bpmn", "call-activity.bpmn"))
    first = accepted(await create(d, "one-task", "order-1")).value["processInstanceKey"]
    reason = rejected(await create(d, "one-task", "order-1"), RejectionType.ALREADY_EXISTS)
    assert f"'{first}'" in reason and "'order-1'" in reason
    accepted(await create(d, "one-task", "order-2"))  # another id
    accepted(await create(d, "call-activity", "order-1"))  # another process
    accepted(await create(d, "one-task"))  # none
    accepted(await create(d, "one-task"))
    # once the holder is over, the id is free again
    accepted(await d.cancel(first))
    await d.settle()
    again = accepted(await create(d, "one-task", "order-1")).value["processInstanceKey"]
    (job_key,) = [k for k in await d.activate("test", max_jobs=10) if _job(d, k)["processInstanceKey"] == again]
    accepted(await d.complete(job_key))
    await d.settle()
    accepted(await create(d, "one-task", "order-1"))
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_without_uniqueness_instances_share_a_business_id_and_switching_it_on_sees_them(tmp_path: Path) -> None:
    d = unique(tmp_path, on=False)
    accepted(await d.deploy("one-task.bpmn"))
    keys = [accepted(await create(d, "one-task", "order-1")).value["processInstanceKey"] for _ in range(2)]
    await d.settle()
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)
    d.config = PartitionConfig(checker_interval_s=0.005, business_id_uniqueness=True)
    d.open()
    rejected(await create(d, "one-task", "order-1"), RejectionType.ALREADY_EXISTS)
    accepted(await d.cancel(keys[1]))  # the other one still holds the id
    await d.settle()
    rejected(await create(d, "one-task", "order-1"), RejectionType.ALREADY_EXISTS)
    accepted(await d.cancel(keys[0]))
    await d.settle()
    accepted(await create(d, "one-task", "order-1"))
    await d.close()


async def test_call_activity_children_inherit_the_business_id_and_tags_and_are_not_counted(tmp_path: Path) -> None:
    d = unique(tmp_path, on=True)
    accepted(await d.deploy("call-activity.bpmn"))
    created = accepted(await create(d, "call-activity", "order-7", ["shop:eu", "vip", "vip"]))
    assert created.value["businessId"] == "order-7"
    assert created.value["tags"] == ["shop:eu", "vip"], "each tag once, in the order given"
    await d.settle()
    (job_key,) = await d.activate("child-work")
    job = _job(d, job_key)
    assert job["tags"] == ["shop:eu", "vip"] and job["businessId"] == "order-7"
    assert job["processInstanceKey"] != created.value["processInstanceKey"], "the child instance's job"
    child = d.read(lambda s: s.elements.get(job["processInstanceKey"]))
    assert child.value.business_id == "order-7" and child.value.tags == ("shop:eu", "vip")
    # only the root instance holds the id: a root instance of the child process may have it too
    accepted(await create(d, "call-activity-child", "order-7"))
    rejected(await create(d, "call-activity", "order-7"), RejectionType.ALREADY_EXISTS)
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_tags_and_business_ids_are_validated_as_camunda_does(tmp_path: Path) -> None:
    d = unique(tmp_path, on=False)
    accepted(await d.deploy("one-task.bpmn"))
    accepted(await create(d, "one-task", "b" * 256, [f"t{i}" for i in range(10)] + ["t0"]))
    accepted(await create(d, "one-task", tags=["a" + "-_:.9" * 19 + "z" * 4]))  # 100 characters
    for tags in (["1abc"], ["has space"], ["a" * 101], [f"t{i}" for i in range(11)], [""], ["ü"]):
        rejected(await create(d, "one-task", tags=tags), RejectionType.INVALID_ARGUMENT)
    rejected(await create(d, "one-task", "b" * 257), RejectionType.INVALID_ARGUMENT)
    await d.close()


def _job(d: Driver, key: int) -> dict:
    return d.read(lambda s: s.jobs.get(key))["value"]


async def assign(d: Driver, instance_key: int, business_id: str) -> Record:
    value = {"processInstanceKey": instance_key, "businessId": business_id}
    return await d.send(
        ValueType.PROCESS_INSTANCE_BUSINESS_ID, ProcessInstanceBusinessIdIntent.ASSIGN, value, instance_key
    )


async def test_a_running_instance_without_a_business_id_gets_one_once(tmp_path: Path) -> None:
    d = unique(tmp_path, on=False)
    accepted(await d.deploy("call-activity.bpmn", "one-task.bpmn"))
    key = accepted(await create(d, "call-activity", tags=["vip"])).value["processInstanceKey"]
    await d.settle()
    (child_job,) = await d.activate("child-work")  # created before the assignment: keeps no business id
    child_key = _job(d, child_job)["processInstanceKey"]
    rejected(await assign(d, child_key, "order-9"), RejectionType.INVALID_STATE)  # a called instance
    rejected(await assign(d, key, ""), RejectionType.INVALID_ARGUMENT)
    rejected(await assign(d, key, "x" * 257), RejectionType.INVALID_ARGUMENT)
    rejected(await assign(d, 123456, "order-9"), RejectionType.NOT_FOUND)
    assigned = accepted(await assign(d, key, "order-9"))
    assert assigned.value["businessId"] == "order-9" and assigned.value["bpmnProcessId"] == "call-activity"
    again = accepted(await assign(d, key, "order-9"))  # the same id again: accepted, nothing written
    assert again.position == -1
    reason = rejected(await assign(d, key, "order-10"), RejectionType.INVALID_STATE)
    assert "'order-9'" in reason
    # what the instance creates from now on carries it: the job after the call activity
    accepted(await d.complete(child_job))
    await d.settle()
    (after,) = await d.activate("after-call")
    job = _job(d, after)
    assert job["businessId"] == "order-9" and job["tags"] == ["vip"]
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)
    # switched on, uniqueness sees the assigned id, and assignment is refused
    d.config = PartitionConfig(checker_interval_s=0.005, business_id_uniqueness=True)
    d.open()
    rejected(await create(d, "call-activity", "order-9"), RejectionType.ALREADY_EXISTS)
    other = accepted(await create(d, "one-task")).value["processInstanceKey"]
    reason = rejected(await assign(d, other, "order-11"), RejectionType.INVALID_STATE)
    assert "businessIdUniqueness" in reason
    await d.close()
