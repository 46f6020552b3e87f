"""The step budget counts element activations per process instance within one chain of follow-ups."""

from __future__ import annotations

from broker.engine.engine import Engine
from broker.protocol.enums import JobIntent, ProcessInstanceIntent, RecordType, ValueType
from broker.protocol.record import Record
from broker.stream.step_budget import StepBudget

# What the engine counts as a step (an element activation), as the stream core hands it in.
STEP = Engine.STEP_COMMAND


def command(position: int, source: int, instance: int = 1, *, activate: bool = True) -> Record:
    intent = ProcessInstanceIntent.ACTIVATE_ELEMENT if activate else ProcessInstanceIntent.COMPLETE_ELEMENT
    value = {"processInstanceKey": instance, "elementId": f"e{position}"}
    return Record(
        position, 10 + position, RecordType.COMMAND, ValueType.PROCESS_INSTANCE, int(intent), 0, value, source
    )


def test_the_activation_beyond_the_budget_is_named_with_the_budget() -> None:
    budget = StepBudget(3, step=STEP)
    assert budget.charge(command(1, -1)) is None  # a client command begins the chain
    assert budget.charge(command(2, 1)) is None
    assert budget.charge(command(3, 2)) is None
    message = budget.charge(command(4, 3))
    assert message is not None
    assert "Process instance 1 activated 3 elements without reaching a wait state" in message
    assert "broker.maxStepsPerInstance = 3" in message
    assert "'e4'" in message


def test_only_activations_count_and_each_instance_has_its_own_count() -> None:
    budget = StepBudget(2, step=STEP)
    assert budget.charge(command(1, -1, instance=1)) is None
    assert budget.charge(command(2, 1, instance=1, activate=False)) is None  # completing is not a step
    assert budget.charge(command(3, 2, instance=2)) is None
    assert budget.charge(command(4, 3, instance=2)) is None
    assert budget.charge(command(5, 2, instance=1)) is None
    assert budget.charge(command(6, 4, instance=2)) is not None
    assert budget.charge(command(7, 5, instance=1)) is not None


def test_a_new_chain_starts_a_new_count() -> None:
    budget = StepBudget(2, step=STEP)
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
    budget = StepBudget(3, step=STEP)
    budget.charge(command(1, -1))
    budget.charge(command(2, 1))
    budget.forget_processed([command(3, 2)])
    assert budget.charge(command(3, 2)) is None
    assert budget.charge(command(4, 3)) is not None  # still counted in the chain begun at 1
    budget.forget_processed([])
    assert budget.charge(command(5, 4)) is None  # an unknown cause: counted from here (never earlier)


def test_zero_turns_the_budget_off() -> None:
    budget = StepBudget(0, step=STEP)
    assert all(budget.charge(command(p, p - 1 if p > 1 else -1)) is None for p in range(1, 100))


def test_the_instances_a_multi_instance_body_starts_are_not_steps() -> None:
    budget = StepBudget(3, step=STEP)
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


def start(position: int, source: int, instance: int, *, parent: int = -1) -> Record:
    """The activation of a process instance (started by a signal, a message, a timer or a call activity)."""
    value = {
        "processInstanceKey": instance,
        "elementId": "storm",
        "bpmnProcessId": "storm",
        "bpmnElementType": "PROCESS",
        "parentProcessInstanceKey": parent,
    }
    intent = int(ProcessInstanceIntent.ACTIVATE_ELEMENT)
    return Record(position, instance, RecordType.COMMAND, ValueType.PROCESS_INSTANCE, intent, 0, value, source)


def test_a_chain_may_start_a_bounded_number_of_instances_without_a_parent() -> None:
    budget = StepBudget(100, max_chain_instances=2, step=STEP)
    assert budget.charge(command(1, -1)) is None  # the broadcast begins the chain
    assert budget.charge(start(2, 1, instance=20)) is None
    assert budget.charge(start(3, 2, instance=30)) is None
    message = budget.charge(start(4, 3, instance=40))
    assert message is not None
    assert "Process instance 40 of 'storm' was not started" in message
    assert "broker.maxInstancesPerSignalChain = 2" in message
    assert budget.charge(start(5, 3, instance=50)) is not None, "every further one of the chain stops too"
    # called instances count toward the process depth, not this bound; another chain has a count of its own
    assert budget.charge(start(6, 3, instance=60, parent=30)) is None
    assert budget.charge(start(8, 7, instance=80)) is None


def test_the_chain_bound_is_off_at_zero_and_reports_each_chain_once() -> None:
    assert all(
        StepBudget(100, max_chain_instances=0, step=STEP).charge(start(p, p - 1, p)) is None for p in range(2, 50)
    )
    budget = StepBudget(100, max_chain_instances=1, step=STEP)
    budget.charge(start(1, 0, 10))
    stopped = [start(p, p - 1, p * 10) for p in (2, 3)]
    assert all(budget.charge(r) is not None for r in stopped)

    class Log:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def warning(self, text: str, *args: object) -> None:
            self.lines.append(text % args)

    log = Log()
    budget.report(stopped, 7, log)  # type: ignore[arg-type]
    (line,) = log.lines
    assert line.startswith("partition 7: a chain of signal broadcasts started 1 process instances; instance 20 ")


def test_what_counts_as_a_step_is_what_the_engine_hands_in() -> None:
    completing = (ValueType.PROCESS_INSTANCE, int(ProcessInstanceIntent.COMPLETE_ELEMENT))
    budget = StepBudget(1, step=completing)
    assert budget.charge(command(1, -1)) is None  # an activation is not a step of this budget
    assert budget.charge(command(2, 1)) is None
    assert budget.charge(command(3, 2, activate=False)) is None
    assert budget.charge(command(4, 3, activate=False)) is not None
