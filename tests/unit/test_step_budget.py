"""The step budget counts element activations per process instance within one chain of follow-ups."""

from __future__ import annotations

from broker.protocol.enums import JobIntent, ProcessInstanceIntent, RecordType, ValueType
from broker.protocol.record import Record
from broker.stream.step_budget import StepBudget


def command(position: int, source: int, instance: int = 1, *, activate: bool = True) -> Record:
    intent = ProcessInstanceIntent.ACTIVATE_ELEMENT if activate else ProcessInstanceIntent.COMPLETE_ELEMENT
    value = {"processInstanceKey": instance, "elementId": f"e{position}"}
    return Record(
        position, 10 + position, RecordType.COMMAND, ValueType.PROCESS_INSTANCE, int(intent), 0, value, source
    )


def test_the_activation_beyond_the_budget_is_named_with_the_budget() -> None:
    budget = StepBudget(3)
    assert budget.charge(command(1, -1)) is None  # a client command begins the chain
    assert budget.charge(command(2, 1)) is None
    assert budget.charge(command(3, 2)) is None
    message = budget.charge(command(4, 3))
    assert message is not None
    assert "Process instance 1 activated 3 elements without reaching a wait state" in message
    assert "broker.maxStepsPerInstance = 3" in message
    assert "'e4'" in message


def test_only_activations_count_and_each_instance_has_its_own_count() -> None:
    budget = StepBudget(2)
    assert budget.charge(command(1, -1, instance=1)) is None
    assert budget.charge(command(2, 1, instance=1, activate=False)) is None  # completing is not a step
    assert budget.charge(command(3, 2, instance=2)) is None
    assert budget.charge(command(4, 3, instance=2)) is None
    assert budget.charge(command(5, 2, instance=1)) is None
    assert budget.charge(command(6, 4, instance=2)) is not None
    assert budget.charge(command(7, 5, instance=1)) is not None


def test_a_new_chain_starts_a_new_count() -> None:
    budget = StepBudget(2)
    budget.charge(command(1, -1))
    budget.charge(command(2, 1))
    assert budget.charge(command(3, 2)) is not None
    # resolving the incident is a client command: a new chain, the element runs again
    assert budget.charge(command(4, -1)) is None
    assert budget.charge(command(5, 4)) is None
    job = Record(6, 99, RecordType.COMMAND, ValueType.JOB, int(JobIntent.COMPLETE), 0, {}, -1)
    assert budget.charge(job) is None
    assert budget.charge(command(7, 6)) is None  # the job's follow-ups: another chain


def test_forgetting_keeps_what_queued_follow_ups_need() -> None:
    budget = StepBudget(3)
    budget.charge(command(1, -1))
    budget.charge(command(2, 1))
    budget.forget_processed([command(3, 2)])
    assert budget.charge(command(3, 2)) is None
    assert budget.charge(command(4, 3)) is not None  # still counted in the chain begun at 1
    budget.forget_processed([])
    assert budget.charge(command(5, 4)) is None  # an unknown cause: counted from here (never earlier)


def test_zero_turns_the_budget_off() -> None:
    budget = StepBudget(0)
    assert all(budget.charge(command(p, p - 1 if p > 1 else -1)) is None for p in range(1, 100))


def test_the_instances_a_multi_instance_body_starts_are_not_steps() -> None:
    budget = StepBudget(3)
    body_value = {"processInstanceKey": 1, "elementId": "each", "bpmnElementType": "MULTI_INSTANCE_BODY"}
    act = int(ProcessInstanceIntent.ACTIVATE_ELEMENT)
    body = Record(2, 500, RecordType.COMMAND, ValueType.PROCESS_INSTANCE, act, 0, body_value, 1)
    assert budget.charge(command(1, -1)) is None
    assert budget.charge(body) is None
    for position in range(3, 1003):  # a thousand instances of the body's collection
        value = {"processInstanceKey": 1, "elementId": "each", "bpmnElementType": "TASK", "flowScopeKey": 500}
        instance = Record(position, 1000 + position, RecordType.COMMAND, ValueType.PROCESS_INSTANCE, act, 0, value, 2)
        assert budget.charge(instance) is None
    # what follows the body is counted again: start (1), body (2), this (3), the next is over
    assert budget.charge(command(1003, 2)) is None
    assert budget.charge(command(1004, 1003)) is not None
