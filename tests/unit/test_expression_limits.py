"""The engine's side of expression limits: over-budget evaluations and oversized results are failures.

Processors turn an ``ExpressionFailure`` into an incident, so each failure must name the expression and
say what was exceeded.
"""

from __future__ import annotations

import time
from typing import Any

import msgpack
import pytest

from broker import feel
from broker.engine.expressions import ExpressionEvaluator, ExpressionFailure, exceeds_size

NOW_MS = 1_700_000_000_000


def failure(result: Any) -> str:
    assert isinstance(result, ExpressionFailure), f"expected a failure, got {result!r}"
    return result.message


def test_a_regex_bomb_in_a_condition_answers_at_once() -> None:
    evaluator = ExpressionEvaluator()
    start = time.perf_counter()
    value = evaluator.evaluate_condition('=matches(name, "^(a+)+$")', {"name": "a" * 30 + "!"}, NOW_MS)
    assert value is False
    assert time.perf_counter() - start < 0.5


def test_an_evaluation_over_the_step_budget_is_a_failure_naming_it() -> None:
    message = failure(ExpressionEvaluator().evaluate("=for i in 1..1000, j in 1..1000 return i", {}, NOW_MS))
    assert message.startswith("failed to evaluate expression 'for i in 1..1000, j in 1..1000 return i'")
    assert "step budget" in message


def test_an_evaluation_over_the_size_budget_is_a_failure_naming_it() -> None:
    text = 'for i in 1..40 return if i = 1 then "ab" else partial[-1] + partial[-1]'
    message = failure(ExpressionEvaluator().evaluate_feel(text, {}, NOW_MS))
    assert f"'{text}'" in message and "size budget" in message


def test_conditions_over_budget_are_failures_not_false() -> None:
    result = ExpressionEvaluator().evaluate_condition("=count(for i in 1..1000000 return i) > 0", {}, NOW_MS)
    assert "step budget" in failure(result)


def test_limits_are_configurable() -> None:
    strict = ExpressionEvaluator(limits=feel.Limits(max_steps=50))
    assert "step budget of 50 steps" in failure(strict.evaluate("=for i in 1..100 return i", {}, NOW_MS))
    assert ExpressionEvaluator().evaluate("=for i in 1..100 return i", {}, NOW_MS) == list(range(1, 101))


def test_a_result_larger_than_the_max_result_size_is_a_failure() -> None:
    evaluator = ExpressionEvaluator(max_result_size=10_000)
    text = 'string join(for i in 1..2000 return "abcdefgh")'
    message = failure(evaluator.evaluate_feel(text, {}, NOW_MS))
    assert f"'{text}'" in message and "larger than the maximum variable size of 10,000 bytes" in message
    # passing a big variable through is caught too
    big = {"rows": [{"id": i, "name": f"row {i}"} for i in range(1_000)]}
    assert "maximum variable size" in failure(evaluator.evaluate("=rows", big, NOW_MS))
    assert evaluator.evaluate("=count(rows)", big, NOW_MS) == 1_000


def test_the_default_max_result_size_stops_a_huge_variable() -> None:
    # 16 MB of characters fit the FEEL size budget but not a variable
    evaluator = ExpressionEvaluator(limits=feel.Limits(max_size=200_000_000, max_steps=10_000_000))
    text = 'for i in 1..22 return if i = 1 then "abcd" else partial[-1] + partial[-1]'
    assert "maximum variable size of 4,194,304 bytes" in failure(evaluator.evaluate_feel(text, {}, NOW_MS))


@pytest.mark.parametrize(
    "value",
    [
        "x" * 5_000,
        "é" * 3_000,
        list(range(2_000)),
        [{"id": i, "name": f"row {i}", "ok": True} for i in range(300)],
        {"a": {"b": {"c": ["d" * 100] * 40}}},
        [2**40] * 500,
    ],
)
def test_the_size_estimate_is_close_to_the_encoded_size(value: Any) -> None:
    encoded = len(msgpack.packb(value))
    assert not exceeds_size(value, int(encoded * 1.5))
    assert exceeds_size(value, int(encoded * 0.5))


def test_ordinary_mappings_are_unaffected() -> None:
    evaluator = ExpressionEvaluator()
    context = {"order": {"id": 42, "amount": 1234.5, "items": [{"price": p} for p in (5, 15, 25)]}}
    assert evaluator.evaluate(
        '={id: order.id, total: sum(order.items[price > 10].price), tag: "o-" + string(order.id)}', context, NOW_MS
    ) == {"id": 42, "total": 40, "tag": "o-42"}
    assert evaluator.evaluate("static value", context, NOW_MS) == "static value"
    assert evaluator.evaluate_condition("=order.amount > 1000", context, NOW_MS) is True
