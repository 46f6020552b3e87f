"""An expression whose value shares its parts by reference (tiny to hold, exponential written out) in a running
partition: in an output mapping or a timer it becomes an incident naming the expression, at once, and the partition
goes on serving. Before, such a timer held the partition for seconds at gigabytes on every start."""

from __future__ import annotations

import time
from pathlib import Path

from broker.dmn import evaluate_decision, parse_dmn
from broker.engine.expressions import ExpressionEvaluator, ExpressionFailure
from broker.protocol.enums import DeploymentIntent, ValueType
from tests.feel.test_feel_shared_values import doubling_context
from tests.integration.test_deployment_parity import model
from tests.unit.test_replay import Driver, accepted

NOW_MS = 1_700_000_000_000
BOMB = doubling_context(30)  # about 500 characters; 2 ** 30 lists written out

OUTPUT_BOMB = model(
    "output-bomb",
    '<bpmn:startEvent id="start"/>'
    '<bpmn:serviceTask id="work"><bpmn:extensionElements><zeebe:taskDefinition type="bomb-work"/>'
    f'<zeebe:ioMapping><zeebe:output source="={BOMB}" target="huge"/></zeebe:ioMapping>'
    "</bpmn:extensionElements></bpmn:serviceTask>"
    '<bpmn:endEvent id="end"/>'
    '<bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="work"/>'
    '<bpmn:sequenceFlow id="f2" sourceRef="work" targetRef="end"/>',
)

TIMER_BOMB = model(
    "timer-bomb",
    '<bpmn:startEvent id="start"/>'
    '<bpmn:intermediateCatchEvent id="wait"><bpmn:timerEventDefinition>'
    f"<bpmn:timeDuration>={BOMB}</bpmn:timeDuration>"
    "</bpmn:timerEventDefinition></bpmn:intermediateCatchEvent>"
    '<bpmn:endEvent id="end"/>'
    '<bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="wait"/>'
    '<bpmn:sequenceFlow id="f2" sourceRef="wait" targetRef="end"/>',
)


async def test_a_shared_value_bomb_is_an_incident_and_the_partition_keeps_serving(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    resources = [
        {"resourceName": "output-bomb.bpmn", "resource": OUTPUT_BOMB},
        {"resourceName": "timer-bomb.bpmn", "resource": TIMER_BOMB},
    ]
    accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources}))
    accepted(await d.deploy("one-task.bpmn"))
    started = time.monotonic()
    timer_pi = accepted(await d.create("timer-bomb", {})).key
    output_pi = accepted(await d.create("output-bomb", {})).key
    await d.settle()
    (bomb_job,) = await d.activate("bomb-work")
    accepted(await d.complete(bomb_job))

    # an ordinary instance on the same partition, right after, completes
    other = accepted(await d.create("one-task", {"x": 1})).key
    await d.settle()
    (job,) = await d.activate("test")
    accepted(await d.complete(job, {"y": 2}))
    await d.settle()
    assert d.read(lambda s: s.elements.get(other)) is None, "the ordinary instance completed"
    elapsed = time.monotonic() - started
    assert elapsed < 20, f"took {elapsed:.1f}s"  # generous: it is about a second of ordinary processing

    incidents = {incident["processInstanceKey"]: incident for _, incident in d.incidents()}
    assert set(incidents) == {timer_pi, output_pi}
    for pi, element in ((timer_pi, "wait"), (output_pi, "work")):
        message = incidents[pi]["errorMessage"]
        assert incidents[pi]["elementId"] == element
        assert f"failed to evaluate expression '{BOMB}'" in message
        assert "size budget of 16,000,000" in message and "broker.expressions.maxSize" in message
    await d.close()


def test_the_evaluator_fails_a_shared_value_bomb_at_once() -> None:
    evaluator = ExpressionEvaluator()
    for evaluate in (evaluator.evaluate, evaluator.evaluate_raw):
        start = time.perf_counter()
        result = evaluate(f"={BOMB}", {}, NOW_MS)
        assert isinstance(result, ExpressionFailure) and "size budget" in result.message
        assert time.perf_counter() - start < 2.0


def test_a_value_within_the_budget_but_over_the_max_result_size_counts_every_reference() -> None:
    """The result check sees the value written out: 20 references to one 300 kB string are 6 MB."""
    evaluator = ExpressionEvaluator()
    result = evaluator.evaluate("=for i in 1..20 return s", {"s": "x" * 300_000}, NOW_MS)
    assert isinstance(result, ExpressionFailure) and "maximum variable size" in result.message


def test_a_decision_returning_a_shared_value_bomb_fails_naming_it() -> None:
    data = (
        '<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" id="g" namespace="x">'
        f'<decision id="d"><literalExpression><text>{BOMB}</text></literalExpression></decision></definitions>'
    ).encode()
    start = time.perf_counter()
    result = evaluate_decision(parse_dmn(data), "d", {})
    assert time.perf_counter() - start < 2.0
    assert result.failed_decision_id == "d"
    assert "size budget" in (result.failure_message or "")
