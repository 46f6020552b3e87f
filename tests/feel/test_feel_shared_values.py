"""Values that share their parts by reference: cheap to hold, but written out (converted, encoded, flattened,
rendered) every reference is written in full. A value is measured expanded before anything writes it out, so
one nesting a shared part level by level fails fast on the size budget instead of taking seconds and gigabytes.
"""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from broker.feel import FeelBudgetExceeded, FeelEvaluationError, Limits, evaluate
from tests.feel.test_feel_budget import bounded, exceeded

SECONDS = 2.0  # generous: each of these fails in about a millisecond
MEGABYTES = 64


def doubling_context(levels: int) -> str:
    """``{l0: [1], l1: [l0, l0], l2: [l1, l1], ...}``: ``levels`` short entries, 2 ** levels ones written out."""
    entries = ["l0: [1]"] + [f"l{i}: [l{i - 1}, l{i - 1}]" for i in range(1, levels + 1)]
    return "{" + ", ".join(entries) + "}"


def fails_on_size(expression: str, context: dict[str, Any] | None = None) -> None:
    with bounded(SECONDS, MEGABYTES):
        assert exceeded(expression, context) == "size"


@pytest.mark.parametrize("levels", [22, 30])
def test_a_context_doubling_a_shared_list_fails_fast_on_the_size_budget(levels: int) -> None:
    expression = doubling_context(levels)
    assert len(expression) < 500
    fails_on_size(expression)
    with pytest.raises(FeelBudgetExceeded) as info:
        evaluate(expression)
    assert str(info.value).startswith(f"Evaluation of '{expression}' exceeded the size budget of 16,000,000")


#: Every way of building a list or context that holds another value by reference, each doubling 40 times.
SHARING = [
    "for i in 1..40 return if i = 1 then [1] else [partial[-1], partial[-1]]",
    'for i in 1..40 return if i = 1 then {a: 1} else {a: partial[-1], b: partial[-1], c: "x"}',
    'for i in 1..40 return if i = 1 then {} else context put(partial[-1], "k" + string(i), partial[-1])',
    "for i in 1..40 return if i = 1 then {} else context merge([{a: partial[-1]}, {b: partial[-1]}])",
    "for i in 1..40 return if i = 1 then {} else put all({a: partial[-1]}, {b: partial[-1]})",
    "for i in 1..40 return if i = 1 then [1] else concatenate([partial[-1]], [partial[-1]])",
    "for i in 1..40 return if i = 1 then [1] else append([partial[-1]], partial[-1])",
    "for i in 1..40 return if i = 1 then [1] else insert before([partial[-1]], 1, partial[-1])",
    "for i in 1..40 return if i = 1 then [1] else {p: partial[-1], r: for j in 1..2 return p}.r",
    "for i in 1..40 return if i = 1 then [1] else sublist([partial[-1], partial[-1], 0], 1, 2)",
    "for i in 1..40 return if i = 1 then [1] else reverse([partial[-1], partial[-1]])",
    "for i in 1..40 return if i = 1 then [1] else partition([partial[-1], partial[-1]], 1)",
    "for i in 1..40 return if i = 1 then [1] else [{a: partial[-1]}, {a: partial[-1]}].a",
    "for i in 1..40 return if i = 1 then [1] else [partial[-1], partial[-1]][true]",
    "for i in 1..40 return if i = 1 then [1] else sort([partial[-1], partial[-1]], function(a, b) false)",
    "for i in 1..40 return if i = 1 then [1] else get entries({a: partial[-1], b: partial[-1]})",
    "for i in 1..40 return if i = 1 then [1] else [get or else(null, partial[-1]), partial[-1]]",
    "{f: function(x, n) if n = 0 then x else f([x, x], n - 1)}.f(1, 40)",
    # one big string held many times
    'for i in 1..20 return if i = 1 then "0123456789" + "0123456789" else [partial[-1], partial[-1]]',
    "for i in 1..100000 return s",
    "[s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s]",
]


@pytest.mark.parametrize("expression", SHARING)
def test_every_way_of_sharing_a_value_counts_it_in_full(expression: str) -> None:
    fails_on_size(expression, {"s": "x" * 1_000_000})


@pytest.mark.parametrize(
    "expression",
    [
        "string(" + doubling_context(40) + ")",
        "to json(" + doubling_context(40) + ")",
        "flatten(" + doubling_context(40) + ".l40)",
        "string join(for x in flatten(" + doubling_context(40) + '.l40) return string(x), ", ")',
    ],
)
def test_writing_a_shared_value_out_inside_an_expression_fails_first(expression: str) -> None:
    """``string``, ``to json`` and ``flatten`` write each reference out: they fail on the size budget before."""
    fails_on_size(expression)


def test_a_value_used_only_through_cheap_operations_is_fine() -> None:
    """Holding a huge-when-written value is not a failure by itself: only writing it out is."""
    assert evaluate("count(" + doubling_context(40) + ".l40)") == 2
    assert evaluate(doubling_context(40) + ".l40[1][2][1][1] != null") is True


def test_nested_types_of_a_shared_value_are_charged_per_reference() -> None:
    inner = "list<" * 31 + "number" + ">" * 31
    with bounded(SECONDS, MEGABYTES):
        assert exceeded(doubling_context(30) + ".l30 instance of " + inner, limits=Limits(max_steps=20_000)) == "step"


def test_moderate_sharing_gives_the_value_written_out() -> None:
    assert evaluate("{a: [1, 2], b: [a, a], c: {x: b, y: b}}") == {
        "a": [1, 2],
        "b": [[1, 2], [1, 2]],
        "c": {"x": [[1, 2], [1, 2]], "y": [[1, 2], [1, 2]]},
    }
    assert evaluate(doubling_context(10))["l10"][1][0][1][0][0][1][0][1][0][1] == [1]


def test_the_limit_is_what_is_left_of_the_size_budget() -> None:
    """The written-out size counts against what is left: about its msgpack bytes times a small factor."""
    expression = doubling_context(12)
    value = evaluate(expression)
    encoded = len(msgpack.packb(value))
    assert evaluate(expression, limits=Limits(max_size=encoded * 10)) == value
    with pytest.raises(FeelBudgetExceeded):
        evaluate(expression, limits=Limits(max_size=encoded))


def test_partial_is_the_list_so_far() -> None:
    assert evaluate("for i in 1..3 return partial") == [[], [[]], [[], [[]]]]
    assert evaluate("for i in 1..4 return if i = 1 then 1 else partial[-1] * 2") == [1, 2, 4, 8]
    assert evaluate("for i in 1..3 return count(partial)") == [0, 1, 2]


def test_a_loop_value_holding_partial_inside_it_is_an_error_not_a_list_holding_itself() -> None:
    with pytest.raises(FeelEvaluationError) as info:
        evaluate("for i in 1..3 return [partial]")
    assert "holds itself" in str(info.value)


# -- surrogate pairs in string escapes ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('"\\uD83D\\uDE00"', "\U0001f600"),
        ('"a\\ud83d\\ude00b"', "a\U0001f600b"),
        ('"\\uD83D\\uDE00" = "\U0001f600"', True),
        ('string length("\\uD83D\\uDE00")', 1),
        ('"\\uD83D\\uDE00\\uD83D\\uDC4D"', "\U0001f600\U0001f44d"),
        ('"\\U01F600"', "\U0001f600"),
    ],
)
def test_a_surrogate_pair_written_as_two_escapes_is_one_character(expression: str, expected: Any) -> None:
    assert evaluate(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('"\\uD83D"', "\ud83d"),
        ('"\\uDE00\\uD83D"', "\ude00\ud83d"),
        ('"\\uD83Dx"', "\ud83dx"),
        ('"\\uD83D\\u0041"', "\ud83dA"),
    ],
)
def test_a_lone_surrogate_stays_a_lone_surrogate(expression: str, expected: str) -> None:
    """FEEL keeps it; the engine refuses it as a result (not valid Unicode), as before."""
    assert evaluate(expression) == expected
