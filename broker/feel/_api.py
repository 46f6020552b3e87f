"""Public entry points: parse once, evaluate many times."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ._compiler import Compiled, Compiler, UnaryTest
from ._parser import parse_expression_tree, parse_unary_tests_tree
from ._runtime import DEFAULT_LIMITS, Env, FeelBudgetExceeded, FeelEvaluationError, Limits, Scope
from ._values import from_host

_EMPTY: Mapping[str, Any] = {}


def _new_env(context: Mapping[str, Any] | None, now: dt.datetime | None, limits: Limits | None = None) -> Env:
    scope = Scope(context if context is not None else _EMPTY, None, host=True)
    return Env(scope, now, limits if limits is not None else DEFAULT_LIMITS)


def _run(function: Compiled, env: Env, text: str, host: bool = True) -> Any:
    """Evaluate; the result is written out in full next (converted, encoded, stored), so it must fit the size budget
    so (``Env.admit``). With ``host`` it comes back as a host value (see ``to_host``)."""
    try:
        value = function(env)
        return env.host_result(value) if host else env.admit(value)
    except RecursionError as error:
        raise FeelEvaluationError(f"Evaluation of '{text}' recursed too deeply") from error
    except FeelBudgetExceeded as error:
        raise FeelBudgetExceeded(error.budget, error.limit, text) from None


class CompiledExpression:
    """A parsed FEEL expression, ready to evaluate against any context. Immutable and reusable."""

    __slots__ = ("_function", "text")

    def __init__(self, text: str, function: Compiled) -> None:
        self.text = text
        self._function = function

    def __repr__(self) -> str:
        return f"CompiledExpression({self.text!r})"

    def evaluate(
        self, context: Mapping[str, Any] | None = None, now: dt.datetime | None = None, limits: Limits | None = None
    ) -> Any:
        """Evaluate and return the result as a plain Python value (see ``broker.feel``)."""
        env = _new_env(context, now, limits)
        return _run(self._function, env, self.text)

    def evaluate_with_warnings(
        self, context: Mapping[str, Any] | None = None, now: dt.datetime | None = None, limits: Limits | None = None
    ) -> tuple[Any, list[str]]:
        """Evaluate and also return the warnings (suppressed failures) in the order they occurred."""
        env = _new_env(context, now, limits)
        value = _run(self._function, env, self.text)
        return value, env.warnings


class CompiledUnaryTests:
    """Parsed unary tests (a decision table input entry), ready to test input values."""

    __slots__ = ("_test", "text")

    def __init__(self, text: str, test: UnaryTest) -> None:
        self.text = text
        self._test = test

    def __repr__(self) -> str:
        return f"CompiledUnaryTests({self.text!r})"

    def evaluate_with_warnings(
        self,
        input_value: Any,
        context: Mapping[str, Any] | None = None,
        now: dt.datetime | None = None,
        limits: Limits | None = None,
    ) -> tuple[bool | None, list[str]]:
        """Test ``input_value``; also returns the warnings collected."""
        env = _new_env(context, now, limits)
        value = from_host(input_value)
        test = self._test
        result = _run(lambda e: test(e, value), env, self.text, host=False)
        return result, env.warnings


@lru_cache(maxsize=2048)
def parse(expression: str) -> CompiledExpression:
    """Parse and compile a FEEL expression; raises ``FeelSyntaxError`` with the position of the problem."""
    return CompiledExpression(expression, Compiler(expression).compile(parse_expression_tree(expression)))


@lru_cache(maxsize=2048)
def parse_unary_tests(text: str) -> CompiledUnaryTests:
    """Parse and compile unary tests such as ``< 10``, ``[1..5]``, ``"a","b"``, ``-`` or ``not(1, 2)``."""
    return CompiledUnaryTests(text, Compiler(text).unary_test(parse_unary_tests_tree(text)))


def _compiled(expression_or_compiled: str | CompiledExpression) -> CompiledExpression:
    if isinstance(expression_or_compiled, CompiledExpression):
        return expression_or_compiled
    return parse(expression_or_compiled)


def evaluate(
    expression_or_compiled: str | CompiledExpression,
    context: Mapping[str, Any] | None = None,
    *,
    now: dt.datetime | None = None,
    limits: Limits | None = None,
) -> Any:
    """Evaluate FEEL text or a compiled expression against ``context`` (JSON-like variables).

    - ``now`` is the clock of ``now()``/``today()``; without it they return null with a warning.
    - ``limits`` bounds the work and the data of this evaluation (default :data:`DEFAULT_LIMITS`).
    - Raises ``FeelSyntaxError`` for unparsable text and ``FeelEvaluationError`` for failed assertions
      and for exceeded limits (:class:`FeelBudgetExceeded`); every other failure yields null (use
      :func:`evaluate_with_warnings` to learn why).
    """
    return _compiled(expression_or_compiled).evaluate(context, now, limits)


def evaluate_with_warnings(
    expression_or_compiled: str | CompiledExpression,
    context: Mapping[str, Any] | None = None,
    *,
    now: dt.datetime | None = None,
    limits: Limits | None = None,
) -> tuple[Any, list[str]]:
    """Like :func:`evaluate`, also returning the warnings, e.g. ``No variable found with name 'x'``."""
    return _compiled(expression_or_compiled).evaluate_with_warnings(context, now, limits)


def evaluate_unary_tests(
    tests: str | CompiledUnaryTests,
    input_value: Any,
    context: Mapping[str, Any] | None = None,
    *,
    now: dt.datetime | None = None,
    limits: Limits | None = None,
) -> bool | None:
    """Whether ``input_value`` satisfies the unary tests; null when the tests could not decide."""
    compiled = tests if isinstance(tests, CompiledUnaryTests) else parse_unary_tests(tests)
    return compiled.evaluate_with_warnings(input_value, context, now, limits)[0]


def evaluate_internal(text: str, now: dt.datetime | None) -> Any:
    """Evaluate without converting the result (used by built-ins that parse FEEL text)."""
    compiled = parse(text)
    return compiled._function(_new_env(None, now))
