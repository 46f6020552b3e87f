"""Conformance: unary tests (decision table input entries) evaluated against an input value."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from broker.feel import evaluate_unary_tests, parse_unary_tests

UnaryCase = tuple[str, Any, dict[str, Any], bool | None]

UNARY: list[UnaryCase] = [
    ('"valid"', "valid", {}, True),
    ('"valid"', "invalid", {}, False),
    ("< 10", 5, {}, True),
    ("< 10", 10, {}, False),
    ("<= 10", 10, {}, True),
    ("> 10", 11, {}, True),
    ("> 10", 10.5, {}, True),
    (">= 10", 9, {}, False),
    ("< 10", None, {}, None),  # feel-scala: null is not ordered (ComparisonTypeTest)
    ("(2..5)", 2, {}, False),
    ("(2..5)", 3, {}, True),
    ("[2..5]", 2, {}, True),
    ("[2..5]", 5, {}, True),
    ("(2..5]", 5, {}, True),
    ("]2..5[", 5, {}, False),
    ("[2..5]", 6, {}, False),
    ("[2..5]", None, {}, None),  # null is not in a range, nor outside it
    ("[2..5]", "NaN", {}, None),
    ("2, 3, 4", 3, {}, True),
    ("2, 3, 4", 5, {}, False),
    ("< 10, > 50", 60, {}, True),
    ("< 10, > 50", 30, {}, False),
    ('not("valid")', "valid", {}, False),
    ('not("valid")', "other", {}, True),
    ("not(2, 3)", 4, {}, True),
    ("not(2, 3)", 3, {}, False),
    ("not(< 5)", 7, {}, True),
    ("-", "anything", {}, True),
    ("-", None, {}, True),
    ("null", None, {}, True),
    ("null", 1, {}, False),
    ("not(null)", 1, {}, True),
    ('ends with(?, "@camunda.com")', "me@camunda.com", {}, True),
    ('ends with(?, "@camunda.com")', "me@example.com", {}, False),
    ('list contains(?, "invalid")', ["valid", "invalid"], {}, True),
    ("? > 5 and ? < 10", 7, {}, True),
    ("? > 5 and ? < 10", 12, {}, False),
    ("? = limit", 3, {"limit": 3}, True),
    # feel-scala (InterpreterUnaryTest, ComparisonTypeTest): an expression of ``?`` decides by its boolean; null
    # compared, or any other value, is null, not the input compared with it
    ("? > 3", None, {}, None),
    ("? + 1 > 3", None, {}, None),
    ('ends with(?, "@camunda.com")', None, {}, None),
    ("?", None, {}, None),
    ("?", 3, {}, None),
    ("? = null", None, {}, True),
    ("limit", 3, {"limit": 3}, True),
    ("< limit", 2, {"limit": 3}, True),
    ("[low..high]", 5, {"low": 1, "high": 9}, True),
    ("[1, 2, 3]", 2, {}, True),
    ("[1, 2, 3]", 4, {}, False),
    ("true", True, {}, True),
    ("false", True, {}, False),
    ("false", False, {}, True),
    ('date("2020-01-01")', dt.date(2020, 1, 1), {}, True),
    ('< date("2020-01-01")', dt.date(2019, 12, 31), {}, True),
    ('[date("2020-01-01")..date("2020-12-31")]', dt.date(2021, 1, 1), {}, False),
    ('"a", "b"', "b", {}, True),
    ("0.3", 0.3, {}, True),
    ("< 0.3", 0.1 + 0.2, {}, False),
    ("odd(?)", 3, {}, True),
    ("count(?) > 1", [1, 2], {}, True),
    ("= 5", 5, {}, True),
    ("!= 5", 5, {}, False),
]


@pytest.mark.parametrize("case", UNARY, ids=lambda c: f"{c[0]} <- {c[1]!r}")
def test_unary_tests(case: UnaryCase) -> None:
    tests, value, context, expected = case
    assert evaluate_unary_tests(tests, value, context) is expected


def test_compiled_unary_tests_are_reusable() -> None:
    compiled = parse_unary_tests("[1..10], > 100")
    assert [evaluate_unary_tests(compiled, v) for v in (0, 1, 50, 101)] == [False, True, False, True]


def test_unary_tests_report_warnings() -> None:
    result, warnings = parse_unary_tests("< 10").evaluate_with_warnings("text")
    assert result is None
    assert any("Can't compare" in w for w in warnings)
