"""The evaluation budget: every runaway expression fails fast and small, ordinary ones never notice.

Budgets count steps and produced data, never time, so the tests assert on which budget failed; the few
time bounds below are generous and only guard against a return of the old multi-second behaviour. They count this
process's CPU time, not the wall clock, so other work on a shared machine (a parallel test run) does not move them.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest

from broker.feel import (
    DEFAULT_LIMITS,
    FeelBudgetExceeded,
    Limits,
    evaluate,
    evaluate_unary_tests,
    evaluate_with_warnings,
)

MiB = 1024 * 1024


@contextmanager
def bounded(seconds: float, megabytes: float) -> Iterator[None]:
    """Fail if the block takes more than ``seconds`` of CPU or allocates more than ``megabytes`` at its peak."""
    tracemalloc.start()
    start = time.process_time()
    try:
        yield
    finally:
        elapsed = time.process_time() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < seconds, f"took {elapsed:.2f}s"
    assert peak < megabytes * MiB, f"peaked at {peak / MiB:.1f} MiB"


def exceeded(expression: str, context: dict[str, Any] | None = None, limits: Limits | None = None) -> str:
    """The budget ``expression`` runs out of (it must run out of one)."""
    with pytest.raises(FeelBudgetExceeded) as info:
        evaluate(expression, context, limits=limits)
    assert info.value.expression == expression
    return info.value.budget


# -- regular expressions -----------------------------------------------------------------------------------

REGEX_BOMBS = [
    'matches("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", "^(a+)+$")',
    'matches("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", "(a|aa)+$")',
    'matches("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "(x+x+)+y")',
    'replace("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", "^(a+)+$", "b")',
    'split("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", "(a+)+b")',
    'extract("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", "(a*)*b")',
]


@pytest.mark.parametrize("expression", REGEX_BOMBS)
def test_catastrophic_backtracking_patterns_answer_at_once(expression: str) -> None:
    with bounded(seconds=0.5, megabytes=16):
        value = evaluate(expression)
    assert value in (
        False,
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!",
        ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"],
        [],
    )


def test_a_bomb_pattern_over_a_long_input_is_linear() -> None:
    with bounded(seconds=1.0, megabytes=32):
        assert evaluate('matches(s, "^(a+)+$")', {"s": "a" * 1_000_000 + "!"}) is False


def test_patterns_that_need_backtracking_fail_the_call_with_a_reason() -> None:
    value, warnings = evaluate_with_warnings('matches("abab", "(ab)\\1")')
    assert value is None
    assert "back-references and look-around are not supported" in warnings[0]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('matches("ab", "a b # letters", "x")', True),
        ('matches("a b", "a b", "x")', False),
        ('matches("a b", "a[ ]b", "x")', True),
        ('matches("a.b", ".", "q")', True),
        ('matches("ab", ".", "q")', False),
        ('matches("A.B", "a.b", "qi")', True),
        ('matches("x\ny", "^y$", "m")', True),
        ('matches("x\ny", "^y$")', False),
        ('matches("x\ny", "x.y", "s")', True),
        ('matches("Ünïcödé", "^\\p{L}+$")', True),
        ('matches("abc", "b", "z")', None),
    ],
)
def test_xpath_flags(expression: str, expected: bool | None) -> None:
    assert evaluate(expression) is expected


# -- the step budget ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "for i in 1..1000, j in 1..1000, k in 1..1000 return i",
        "count(for i in 1..1000000 return i)",
        "some x in xs, y in xs satisfies x + y < 0",
        "{f: function(n) if n = 0 then 0 else f(n - 1) + f(n - 1)}.f(40)",
        "count(distinct values(for i in 1..20000 return i))",
        "for i in 1..1000 return count(xs[item > i])",
        "for i in 1..1000 return list contains(xs, -1)",
        "sum(for i in 1..1000 return count(sort(xs)))",
        "for i in 1..100000 return [xs] = [ys]",
        "for i in 1..100000 return list contains([[xs]], [ys])",
    ],
)
def test_runaway_work_fails_on_the_step_budget_quickly_and_small(expression: str) -> None:
    context = {"xs": list(range(10_000)), "ys": list(range(10_000))}
    with bounded(seconds=10.0, megabytes=64):  # traced: slower than normal
        assert exceeded(expression, context) == "step"


def test_nested_loops_over_huge_ranges_keep_memory_bounded() -> None:
    with bounded(seconds=10.0, megabytes=48):
        assert exceeded("for i in 1..100000, j in 1..100000 return [i, j]") in ("step", "size")


def test_string_doubling_fails_on_the_size_budget() -> None:
    expression = 'for i in 1..40 return if i = 1 then "ab" else partial[-1] + partial[-1]'
    with bounded(seconds=2.0, megabytes=64):
        assert exceeded(expression) == "size"


def test_many_copies_of_a_big_string_fail_on_the_size_budget() -> None:
    with bounded(seconds=2.0, megabytes=64):
        assert exceeded('for i in 1..1000 return s + "!"', {"s": "x" * 100_000}) == "size"


@pytest.mark.parametrize(
    "expression",
    [
        "string(for i in 1..1000 return s)",
        "to json(for i in 1..1000 return s)",
        "string join(for i in 1..1000 return s)",
        'string join(for i in 1..10000 return "x", s)',
        'replace(substring(s, 1, 10000), ".", s)',
    ],
)
def test_outputs_many_times_larger_than_their_inputs_fail_before_they_are_built(expression: str) -> None:
    """A list of one big string repeated, or a long delimiter or replacement repeated, is cheap to hold but not
    to render: these are checked before (or while) the output is built."""
    with bounded(seconds=2.0, megabytes=48):
        assert exceeded(expression, {"s": "x" * 100_000}) == "size"


def test_building_contexts_and_lists_counts_against_the_size_budget() -> None:
    small = Limits(max_steps=10**9, max_size=80_000)
    assert exceeded("for i in 1..10000 return {a: i}", limits=small) == "size"
    assert exceeded("for i in 1..10000 return [i]", limits=small) == "size"
    assert exceeded("string join(for i in 1..20000 return string(i))", limits=small) == "size"


def test_the_message_names_the_expression_and_the_budget() -> None:
    with pytest.raises(FeelBudgetExceeded) as info:
        evaluate("for i in 1..10 return i", limits=Limits(max_steps=5))
    message = str(info.value)
    assert "'for i in 1..10 return i'" in message
    assert "step budget of 5 steps" in message
    with pytest.raises(FeelBudgetExceeded) as info:
        evaluate('"abc" + "def"', limits=Limits(max_size=5))
    assert "size budget of 5" in str(info.value) and '\'"abc" + "def"\'' in str(info.value)


def test_unary_tests_have_the_budget_too() -> None:
    with pytest.raises(FeelBudgetExceeded):
        evaluate_unary_tests("count(for i in 1..10 return i) > 0", 1, limits=Limits(max_steps=5))


def test_the_budget_is_deterministic() -> None:
    """The same evaluation fails at the same point every time: nothing depends on the clock."""
    limits = Limits(max_steps=10_000)
    expression = "for i in 1..100 return for j in 1..100 return i * j"
    outcomes = set()
    for _ in range(5):
        with pytest.raises(FeelBudgetExceeded) as info:
            evaluate(expression, limits=limits)
        outcomes.add((info.value.budget, str(info.value)))
    assert len(outcomes) == 1
    assert evaluate(expression, limits=Limits(max_steps=100_000))[99][99] == 10_000


def test_huge_whole_numbers_round_instead_of_growing() -> None:
    with bounded(seconds=1.0, megabytes=16):
        assert evaluate("(2 ** 100000) ** 100000") is None  # beyond FEEL's exponent range: null
        assert evaluate("(2 ** 100000) * (2 ** 100000) * (10 ** 999990)") is None
        value = evaluate("for i in 1..12 return if i = 1 then 3 ** 1000 else partial[-1] * partial[-1]")
    assert isinstance(value[-1], Decimal) and 977_100 < value[-1].adjusted() < 977_200  # 3 ** 2048000, rounded
    start = time.process_time()
    product = evaluate("product(for i in 1..100000 return 999999999)")
    assert isinstance(product, Decimal) and product.adjusted() == 899_999  # rounded, not a 3-million-bit int
    assert time.process_time() - start < 5.0
    assert evaluate("2 ** 64") == 18446744073709551616  # ordinary big numbers stay exact
    assert evaluate("12345678901234567890 * 98765432109876543210") == 12345678901234567890 * 98765432109876543210


def test_warnings_about_big_values_render_only_their_start() -> None:
    context = {"xs": list(range(200_000))}
    with bounded(seconds=5.0, megabytes=64):
        value, warnings = evaluate_with_warnings("for i in 1..100 return xs + i", context)
    assert value == [None] * 100
    assert warnings[0].startswith("Can't apply '+' to list [0, 1, 2,") and "..." in warnings[0]


# -- ordinary expressions ------------------------------------------------------------------------------------

ORDINARY: list[tuple[str, dict[str, Any], Callable[[Any], bool]]] = [
    ('amount > 100 and status = "open"', {"amount": 250, "status": "open"}, lambda v: v is True),
    ("sum(items[price > 10].price)", {"items": [{"price": i} for i in range(10_000)]}, lambda v: v == 49_994_945),
    ("for x in xs return x * 2", {"xs": list(range(20_000))}, lambda v: len(v) == 20_000 and v[-1] == 39_998),
    ("count(distinct values(xs))", {"xs": [i % 100 for i in range(2_000)]}, lambda v: v == 100),
    ("sort(xs)[1]", {"xs": list(range(20_000, 0, -1))}, lambda v: v == 1),
    ('string length(s + "!")', {"s": "x" * 1_000_000}, lambda v: v == 1_000_001),
    ('count(split(s, ","))', {"s": ",".join(["ab"] * 50_000)}, lambda v: v == 50_000),
    ('replace(s, "[0-9]+", "#")', {"s": "a1b22c333" * 1_000}, lambda v: v == "a#b#c#" * 1_000),
    ("every o in orders satisfies o.total >= 0", {"orders": [{"total": i} for i in range(10_000)]}, lambda v: v),
    ('{id: o.id, vip: o.total > 1000, tag: "o-" + string(o.id)}', {"o": {"id": 7, "total": 5}}, lambda v: v["tag"]),
]


@pytest.mark.parametrize(("expression", "context", "check"), ORDINARY)
def test_ordinary_expressions_stay_well_within_the_budget(
    expression: str, context: dict[str, Any], check: Callable[[Any], bool]
) -> None:
    assert check(evaluate(expression, context, limits=DEFAULT_LIMITS))
