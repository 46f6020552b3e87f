"""The typed record values of jobs, messages, timers, user tasks, variables and incidents keep the record shape.

Two checks: each typed value's ``to_dict`` writes exactly the keys, in exactly the order and under exactly the
omission rules of the record values Weir has always written (listed here literally, so a change to a typed value
that would change the log, the exports or a response fails); and every such event the engine writes in a run that
exercises them all decodes to a typed value whose ``to_dict`` encodes to the same bytes as the record's value, on the
log (msgpack) and in exports (JSON). Commands are left out: they carry what their sender asks.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import msgpack
import pytest

from broker.protocol.entity_values import (
    IncidentValue,
    JobValue,
    MessageValue,
    TimerValue,
    UserTaskValue,
    VariableValue,
)
from broker.protocol.enums import JobIntent, RecordType, ValueType
from broker.protocol.values import ProcessInstanceValue
from broker.stream.partition import PartitionConfig
from broker.tools.inspect import iter_records
from tests.unit.test_replay import DECISIONS, EVENT_STARTED, FIXTURES, Driver, _random_step, accepted

TYPED: dict[ValueType, Any] = {
    ValueType.JOB: JobValue,
    ValueType.MESSAGE: MessageValue,
    ValueType.TIMER: TimerValue,
    ValueType.USER_TASK: UserTaskValue,
    ValueType.VARIABLE: VariableValue,
    ValueType.INCIDENT: IncidentValue,
}

JOB_KEYS = [
    "type",
    "worker",
    "retries",
    "retryBackoff",
    "recurringTime",
    "deadline",
    "timeout",
    "customHeaders",
    "variables",
    "errorMessage",
    "errorCode",
    "elementId",
    "elementInstanceKey",
    "processInstanceKey",
    "bpmnProcessId",
    "processDefinitionVersion",
    "processDefinitionKey",
    "tenantId",
    "jobKind",
    "rootProcessInstanceKey",
]
USER_TASK_KEYS = [
    "userTaskKey",
    "assignee",
    "candidateGroupsList",
    "candidateUsersList",
    "dueDate",
    "followUpDate",
    "formKey",
    "externalFormReference",
    "variables",
    "customHeaders",
    "bpmnProcessId",
    "processDefinitionVersion",
    "processDefinitionKey",
    "processInstanceKey",
    "elementId",
    "elementInstanceKey",
    "tenantId",
    "changedAttributes",
    "action",
    "creationTimestamp",
    "priority",
    "deniedReason",
    "rootProcessInstanceKey",
]


def job(**changes: Any) -> JobValue:
    value = JobValue("pay", "", 3, 0, -1, -1, -1, {}, {}, "", "", "task", 11, 10, "order", 1, 9)
    return value._replace(**changes)


def user_task(**changes: Any) -> UserTaskValue:
    value = UserTaskValue(12, "", (), (), "", "", -1, "", {}, {}, "order", 1, 9, 10, "review", 11)
    return value._replace(**changes)


def test_a_job_writes_the_keys_of_a_job_record_and_its_optional_ones_only_when_set() -> None:
    assert list(job().to_dict()) == JOB_KEYS
    listener = job(job_kind="TASK_LISTENER", job_listener_event_type="ASSIGNING", changed_attributes=())
    assert list(listener.to_dict())[len(JOB_KEYS) :] == ["jobListenerEventType", "changedAttributes"]
    assert listener.to_dict()["changedAttributes"] == []  # an empty list written on purpose stays
    full = listener._replace(tags=("a",), business_id="b-1", result={}, user_task={"userTaskKey": 12})
    assert list(full.to_dict())[len(JOB_KEYS) :] == [
        "jobListenerEventType",
        "changedAttributes",
        "tags",
        "businessId",
        "result",
        "userTask",
    ]
    assert full.to_dict()["tags"] == ["a"]


def test_a_job_decodes_alike_whatever_the_order_of_its_keys_and_changes_like_replace() -> None:
    plain = job().to_dict()
    assert JobValue.from_dict(dict(reversed(plain.items()))) == JobValue.from_dict(plain) == job()
    tagged = job(tags=("a",), changed_attributes=(), result={"approved": True})
    assert JobValue.from_dict(tagged.to_dict()) == tagged
    assert job(recurring_time=5).activated("w", 9, {"n": 1}, None) == job(worker="w", deadline=9, variables={"n": 1})
    listener = job(job_kind="TASK_LISTENER").activated("w", 9, {}, {"userTaskKey": 12})
    assert listener.user_task == {"userTaskKey": 12} and listener.worker == "w"
    assert tagged.completed({"n": 1}) == tagged._replace(variables={"n": 1})
    assert job().completed({}, {"denied": True}) == job(result={"denied": True})


def test_a_user_task_writes_the_keys_of_a_user_task_record() -> None:
    assert list(user_task().to_dict()) == USER_TASK_KEYS
    tagged = user_task(tags=("vip",), business_id="o-1", candidate_groups_list=("sales",)).to_dict()
    assert list(tagged) == [*USER_TASK_KEYS, "tags", "businessId"]
    assert (tagged["candidateGroupsList"], tagged["tags"]) == (["sales"], ["vip"])


def test_messages_variables_and_incidents_write_the_keys_of_their_records() -> None:
    message = MessageValue("paid", "o-1", 0, "", {}, 5)
    assert list(message.to_dict()) == [
        "name",
        "correlationKey",
        "timeToLive",
        "messageId",
        "variables",
        "deadline",
        "tenantId",
    ]
    variable = VariableValue("n", 1, 10, 10, 9, "order")
    assert list(variable.to_dict()) == [
        "name",
        "value",
        "scopeKey",
        "processInstanceKey",
        "processDefinitionKey",
        "bpmnProcessId",
        "tenantId",
        "rootProcessInstanceKey",
    ]
    incident = IncidentValue("JOB_NO_RETRIES", "boom", "order", 9, 10, "task", 11, 12, 11)
    assert list(incident.to_dict()) == [
        "errorType",
        "errorMessage",
        "bpmnProcessId",
        "processDefinitionKey",
        "processInstanceKey",
        "elementId",
        "elementInstanceKey",
        "jobKey",
        "variableScopeKey",
        "tenantId",
        "rootProcessInstanceKey",
    ]


def test_values_written_before_root_instance_keys_decode_with_none_known() -> None:
    """Logs and state written before Weir kept rootProcessInstanceKey still decode: -1, then the key itself."""
    for value in (
        job(),
        user_task(),
        VariableValue("n", 1, 10, 10, 9, "order"),
        IncidentValue("E", "", "o", 9, 10, "t", 11),
    ):
        old = value.to_dict()
        del old["rootProcessInstanceKey"]
        assert type(value).from_dict(old) == value and value.root_process_instance_key == -1
        assert type(value).from_dict({**old, "rootProcessInstanceKey": 10}).root_process_instance_key == 10
    # a process instance's value names its root only when that is another instance: a root instance's elements
    # (written before or after) are their own root; a called instance's written before have none known
    root = ProcessInstanceValue("order", 1, 9, 10, "order", -1, "PROCESS", "UNSPECIFIED", root_process_instance_key=10)
    assert "rootProcessInstanceKey" not in root.to_dict() and ProcessInstanceValue.from_dict(root.to_dict()) == root
    task = root.for_element("task", "SERVICE_TASK", "UNSPECIFIED", 10)
    assert task.root_process_instance_key == 10 and ProcessInstanceValue.from_dict(task.to_dict()) == task
    called = root._replace(process_instance_key=20, parent_process_instance_key=10, parent_element_instance_key=11)
    assert (
        called.to_dict()["rootProcessInstanceKey"] == 10 and ProcessInstanceValue.from_dict(called.to_dict()) == called
    )
    old = called.to_dict()
    del old["rootProcessInstanceKey"]
    assert ProcessInstanceValue.from_dict(old).root_process_instance_key == -1


def test_a_timer_keeps_its_repeating_part_only_when_it_repeats() -> None:
    keys = [
        "elementInstanceKey",
        "processInstanceKey",
        "processDefinitionKey",
        "dueDate",
        "targetElementId",
        "repetitions",
        "tenantId",
    ]
    once = TimerValue(11, 10, 9, 1000, "wait", 1)
    assert list(once.to_dict()) == keys
    assert list(once._replace(cron="@daily").to_dict()) == [*keys, "cron"]
    every = once._replace(interval_months=0, interval_ms=1000).to_dict()
    assert list(every) == [*keys, "intervalMonths", "intervalMs"]
    assert TimerValue.from_dict(every) == once._replace(interval_months=0, interval_ms=1000)


@pytest.mark.timeout(120)
async def test_every_typed_record_the_engine_writes_round_trips_to_the_same_bytes(tmp_path: Path) -> None:
    # the replay tests' random scenario (fixed seed): every element kind, task listeners, timers, messages, incidents
    rng = random.Random(20261202)
    d = Driver(tmp_path / "p" / "1", PartitionConfig(checker_interval_s=0.005))
    d.open()
    accepted(await d.deploy(*FIXTURES, *EVENT_STARTED, *DECISIONS))
    known: dict[str, set[int]] = {"instances": set(), "jobs": set(), "listener_jobs": set()}
    for _ in range(240):
        await _random_step(d, rng, known)
    # ... and a task listener's job completed with a result that corrects its user task
    accepted(await d.create("user-task-listeners"))
    await d.settle()
    listener = (await d.activate("tl-creating"))[-1]  # the random steps may have left others waiting
    result = {"correctedAttributes": ["priority"], "corrections": {"priority": 7}}
    accepted(await d.send(ValueType.JOB, JobIntent.COMPLETE, {"variables": {}, "result": result}, listener))
    await d.settle()
    await d.close()

    seen: dict[ValueType, int] = {}
    optional: set[str] = set()
    for record in iter_records(d.directory):
        typed = TYPED.get(record.value_type)
        if typed is None or record.record_type != RecordType.EVENT:
            continue
        value = typed.from_dict(record.value)
        again = value.to_dict()
        assert list(again) == list(record.value), record.describe()
        assert msgpack.packb(again, use_bin_type=True) == msgpack.packb(record.value, use_bin_type=True)
        exported = json.dumps(record.to_json_dict())
        record.value = again
        assert json.dumps(record.to_json_dict()) == exported, record.describe()
        seen[record.value_type] = seen.get(record.value_type, 0) + 1
        if record.value_type == ValueType.JOB:
            optional.update(set(again) - set(JOB_KEYS))
    for value_type in TYPED:
        assert seen.get(value_type), f"the run wrote no {value_type.name} event"
    assert {"jobListenerEventType", "changedAttributes", "result"} <= optional, optional
