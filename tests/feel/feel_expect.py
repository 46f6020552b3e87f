"""Shared helpers for the FEEL conformance tables.

A case is ``(expression, variables, expected)``. Comparison is type-strict: ``True`` never equals
``1``, a whole-number result must be an ``int`` and a fraction a ``Decimal``; ``Approx`` allows
rounding differences for results of floating-point functions.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from broker.feel import YearMonthDuration, evaluate

Case = tuple[str, dict[str, Any], Any]

NOW = dt.datetime(2024, 3, 15, 10, 30, 0, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Approx:
    """A number expected up to ``places`` decimal places."""

    value: str
    places: int = 10


def same(actual: Any, expected: Any) -> bool:
    """Type-strict structural equality between a FEEL result and an expected value."""
    if isinstance(expected, Approx):
        return type(actual) is Decimal and abs(actual - Decimal(expected.value)) < Decimal(10) ** -expected.places
    if expected is None or type(expected) is bool:
        return actual is expected
    if type(expected) is int:
        return type(actual) is int and actual == expected
    if type(expected) is Decimal:
        return type(actual) is Decimal and actual == expected
    if type(expected) is list:
        return (
            type(actual) is list
            and len(actual) == len(expected)
            and all(same(a, e) for a, e in zip(actual, expected, strict=True))
        )
    if type(expected) is dict:
        return (
            type(actual) is dict
            and list(actual) == list(expected)
            and all(same(actual[k], expected[k]) for k in expected)
        )
    if type(expected) in (dt.date, dt.datetime, dt.time, dt.timedelta, YearMonthDuration, str):
        if type(actual) is not type(expected) or actual != expected:
            return False
        if type(expected) in (dt.datetime, dt.time):
            return actual.utcoffset() == expected.utcoffset() if expected.tzinfo else actual.tzinfo is None
        return True
    return bool(actual == expected)


def check(expression: str, variables: dict[str, Any], expected: Any) -> None:
    """Evaluate ``expression`` with a fixed clock and assert the result."""
    actual = evaluate(expression, variables, now=NOW)
    assert same(actual, expected), f"{expression!r} with {variables!r}: got {actual!r}, expected {expected!r}"


def case_id(case: Case) -> str:
    """A readable pytest id: the expression itself."""
    return case[0][:80]


def D(text: str) -> Decimal:
    """Shorthand for expected decimal results."""
    return Decimal(text)


def YM(months: int) -> YearMonthDuration:
    """Shorthand for expected years-months durations."""
    return YearMonthDuration(months)


def TD(**parts: float) -> dt.timedelta:
    """Shorthand for expected days-time durations."""
    return dt.timedelta(**parts)
