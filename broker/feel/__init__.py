"""FEEL (Friendly Enough Expression Language) for Weir: parse once, evaluate many times.

Expressions follow the semantics of the feel-scala engine that Zeebe uses, so models copied from
Camunda behave the same. A failure inside an expression (missing variable, type mismatch, bad function
argument) yields null plus a warning, never an exception; only unparsable text
(:class:`FeelSyntaxError`), failed ``assert()`` calls (:class:`FeelEvaluationError`) and evaluations that
exceed their :class:`Limits` (:class:`FeelBudgetExceeded`: too many steps or too much data produced) raise.

Results are plain Python values: ``None``, ``bool``, ``str``, numbers, ``list``, ``dict``,
``datetime.date`` / ``time`` / ``datetime``, ``datetime.timedelta`` for days-time durations and
:class:`YearMonthDuration` for years-months durations. Numbers follow one rule: a whole number is an
``int``, any other number a ``decimal.Decimal`` (34 significant digits), so results serialize cleanly
to JSON. Float inputs are read as decimals through their shortest repr, so ``0.1 + 0.2 = 0.3``.
"""

from ._api import (
    CompiledExpression,
    CompiledUnaryTests,
    evaluate,
    evaluate_unary_tests,
    evaluate_with_warnings,
    parse,
    parse_unary_tests,
)
from ._errors import FeelSyntaxError
from ._json import to_json_value
from ._runtime import DEFAULT_LIMITS, FeelBudgetExceeded, FeelEvaluationError, Limits
from ._values import FeelFunction, FeelRange, YearMonthDuration

__all__ = [
    "DEFAULT_LIMITS",
    "CompiledExpression",
    "CompiledUnaryTests",
    "FeelBudgetExceeded",
    "FeelEvaluationError",
    "FeelFunction",
    "FeelRange",
    "FeelSyntaxError",
    "Limits",
    "YearMonthDuration",
    "evaluate",
    "evaluate_unary_tests",
    "evaluate_with_warnings",
    "parse",
    "parse_unary_tests",
    "to_json_value",
]
