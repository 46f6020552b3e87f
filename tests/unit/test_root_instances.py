"""rootProcessInstanceKey (Camunda 8.9): every record of a chain of call activities names the instance at its top.

A partition runs in-process (as in test_replay.py); the records are read back from its log, and a replay of that log
rebuilds the live state.
"""

from __future__ import annotations

from pathlib import Path

from broker.protocol.enums import RecordType, ValueType
from broker.tools.inspect import iter_records
from exporters.record_json import record_document
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live

# the value types whose records belong to an element of a process instance and name its root
_ROOTED = (ValueType.PROCESS_INSTANCE, ValueType.JOB, ValueType.USER_TASK, ValueType.VARIABLE, ValueType.INCIDENT)


def _roots_and_parents(d: Driver) -> tuple[dict[int, set[int]], dict[int, int]]:
    """The rootProcessInstanceKey of every event on the log that has an instance, by that instance's key; and the
    parent of each called instance."""
    roots: dict[int, set[int]] = {}
    parents: dict[int, int] = {}
    for record in iter_records(d.directory):
        if record.record_type != RecordType.EVENT or record.value_type not in _ROOTED:
            continue
        v = record.value
        instance = v.get("processInstanceKey", -1)
        if record.value_type == ValueType.PROCESS_INSTANCE:
            # left out of the log while it is the instance itself; exports carry it
            assert ("rootProcessInstanceKey" in v) == (v["parentProcessInstanceKey"] > 0)
            v = record_document(record, "8.9.0")["value"]
        if instance > 0:
            roots.setdefault(instance, set()).add(v["rootProcessInstanceKey"])
        if v.get("parentProcessInstanceKey", -1) > 0:
            parents[instance] = v["parentProcessInstanceKey"]
    return roots, parents


async def test_a_chain_of_calls_names_its_root_on_every_record_and_replays(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("call-chain.bpmn", "call-activity-feel.bpmn", "user-task-native.bpmn", "one-task.bpmn"))
    # three levels: call-chain -> call-chain-middle -> call-chain-leaf, whose job fails into an incident
    chain = accepted(await d.create("call-chain", {"escalate": False})).value["processInstanceKey"]
    # two levels, the child waiting in a user task
    task_variables = {"childId": "user-task-native", "reviewers": ["ann"], "due": "2031-01-01T00:00:00Z"}
    caller = accepted(await d.create("call-activity-feel", task_variables)).value["processInstanceKey"]
    plain = accepted(await d.create("one-task")).value["processInstanceKey"]
    await d.settle()

    (leaf_job,) = await d.activate("chain-work")
    job = d.read(lambda s: s.jobs.get(leaf_job))["value"]
    leaf = job["processInstanceKey"]
    assert leaf != chain and job["rootProcessInstanceKey"] == chain, "the grandchild's job names the top"
    accepted(await d.fail(leaf_job, 0))
    (_, incident), *_ = d.incidents()
    assert (incident["processInstanceKey"], incident["rootProcessInstanceKey"]) == (leaf, chain)
    (plain_job,) = await d.activate("test")
    assert d.read(lambda s: s.jobs.get(plain_job))["value"]["rootProcessInstanceKey"] == plain
    await d.settle()
    await d.close()

    roots, parents = _roots_and_parents(d)
    assert len(parents) == 3, "the middle, the leaf and the user task's instance"

    def top(key: int) -> int:
        return top(parents[key]) if key in parents else key

    assert roots == {key: {top(key)} for key in roots}
    assert {top(key) for key in parents} == {chain, caller} and roots[plain] == {plain}
    user_tasks = [r.value for r in iter_records(d.directory) if r.value_type == ValueType.USER_TASK]
    assert user_tasks and {(v["processInstanceKey"] in parents, v["rootProcessInstanceKey"]) for v in user_tasks} == {
        (True, caller)
    }
    check_replay_equals_live(d.directory, tmp_path)
