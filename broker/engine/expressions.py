"""One place where the engine evaluates model expressions (FEEL), with compile caching and failure reasons.

A model attribute starting with ``=`` is a FEEL expression; anything else is a static value. Evaluation never
raises into the engine: it returns a value or a :class:`ExpressionFailure` that processors turn into incidents.
That includes an evaluation over its budget (``feel.Limits``) and a result bigger than ``max_result_size``, so
no expression can stall a partition or store a huge variable.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from broker import feel
from broker.feel import to_json_value
from broker.protocol.documents import find_problem


@dataclass(slots=True, frozen=True)
class ExpressionFailure:
    message: str


_UTC = dt.UTC
_TOO_DEEP = "the expression is nested too deeply to be parsed; split it into smaller expressions"

#: The largest result an expression may produce (about its encoded bytes): the default gateway message size,
#: since a bigger variable could not be handed to a job worker anyway.
DEFAULT_MAX_RESULT_SIZE = 4 * 1024 * 1024


class ExpressionEvaluator:
    """Compiles each distinct expression once and evaluates it against a variables context.

    - ``limits``: the FEEL budget of one evaluation (steps and produced size)
    - ``max_result_size``: results estimated larger than this many bytes are failures, not variables
    """

    def __init__(
        self,
        cache_size: int = 10_000,
        *,
        limits: feel.Limits = feel.DEFAULT_LIMITS,
        max_result_size: int = DEFAULT_MAX_RESULT_SIZE,
    ) -> None:
        self._compiled: dict[str, Any] = {}
        self._cache_size = cache_size
        self.limits = limits
        self.max_result_size = max_result_size

    @staticmethod
    def check(expression: str) -> str | None:
        """Deployment-time check: a syntax error message (with position) or None."""
        try:
            feel.parse(expression)
        except feel.FeelSyntaxError as e:
            return str(e)
        except RecursionError:
            return _TOO_DEEP
        return None

    def _compile(self, text: str) -> Any:
        c = self._compiled.get(text)
        if c is None:
            if len(self._compiled) >= self._cache_size:
                self._compiled.clear()
            c = feel.parse(text)
            self._compiled[text] = c
        return c

    def evaluate(self, source: str, context: dict[str, Any], now_ms: int) -> Any:
        """Value of ``source`` (FEEL if it starts with '=', else the static string) or an ExpressionFailure."""
        if not source.startswith("="):
            return source
        return self.evaluate_feel(source[1:], context, now_ms)

    def evaluate_feel(self, text: str, context: dict[str, Any], now_ms: int) -> Any:
        """A FEEL expression (without its '='), as a JSON-compatible value or an ExpressionFailure."""
        value = self._evaluate(text, context, now_ms)
        if isinstance(value, ExpressionFailure):
            return value
        try:
            result = to_json_value(value)
        except RecursionError:
            return ExpressionFailure(f"failed to evaluate expression '{text}': the result is nested too deeply")
        # A result the log or a worker could not take (a huge integer, a lone surrogate) is an incident here, not
        # a failure of the whole processing round later.
        problem = find_problem(result, json_only=True, noun="result")
        if problem:
            return ExpressionFailure(f"failed to evaluate expression '{text}': the {problem}")
        return result

    def evaluate_raw(self, source: str, context: dict[str, Any], now_ms: int) -> Any:
        """Like :meth:`evaluate`, but FEEL temporals stay temporals (timers need durations and dates exactly)."""
        if not source.startswith("="):
            return source
        return self._evaluate(source[1:], context, now_ms)

    def _evaluate(self, text: str, context: dict[str, Any], now_ms: int) -> Any:
        try:
            compiled = self._compile(text)
        except feel.FeelSyntaxError as e:
            return ExpressionFailure(f"failed to parse expression '{text}': {e}")
        except RecursionError:
            return ExpressionFailure(f"failed to parse expression '{text}': {_TOO_DEEP}")
        now = dt.datetime.fromtimestamp(now_ms / 1000, tz=_UTC)
        try:
            value, warnings = feel.evaluate_with_warnings(compiled, context, now=now, limits=self.limits)
        except feel.FeelBudgetExceeded as e:
            key = "maxSteps" if e.budget == "step" else "maxSize"
            return ExpressionFailure(
                f"failed to evaluate expression '{text}': it {e.reason}; the limit is broker.expressions.{key}"
            )
        except Exception as e:  # the evaluator must never take the partition down
            return ExpressionFailure(f"failed to evaluate expression '{text}': {e}")
        if value is None and warnings:
            return ExpressionFailure(f"failed to evaluate expression '{text}': {'; '.join(warnings)}")
        if exceeds_size(value, self.max_result_size):
            return ExpressionFailure(
                f"failed to evaluate expression '{text}': its result is larger than the maximum variable size"
                f" of {self.max_result_size:,} bytes (the max message size, gateway.maxMessageSize)"
            )
        return value

    def evaluate_condition(self, source: str, context: dict[str, Any], now_ms: int) -> bool | ExpressionFailure:
        text = source[1:] if source.startswith("=") else source
        value = self.evaluate_feel(text, context, now_ms)
        if isinstance(value, ExpressionFailure):
            return value
        if not isinstance(value, bool):
            return ExpressionFailure(
                f"Expected result of the expression '{text}' to be 'BOOLEAN', but was '{type_name(value)}'."
            )
        return value


def exceeds_size(value: Any, limit: int) -> bool:
    """Whether ``value`` would take more than ``limit`` bytes encoded (estimated; stops as soon as it knows).

    Strings count their UTF-8 bytes, whole numbers their bytes, other scalars 9, and each list item or context
    entry a byte of framing: close to the msgpack size of the variable. A value held in several places counts in
    each, as encoding writes it out each time (FEEL results were already measured so, against the size budget).
    """
    left = limit
    pending = [value]
    while pending:
        item = pending.pop()
        t = type(item)
        if t is str:
            left -= len(item) if item.isascii() else len(item.encode("utf-8", "surrogatepass"))
        elif t is list or t is tuple:
            left -= 1 + len(item)
            pending.extend(item)
        elif t is dict:
            left -= 1 + len(item)
            for key, entry in item.items():
                pending.append(key)
                pending.append(entry)
        elif t is int:
            left -= 1 + item.bit_length() // 8
        else:
            left -= 9
        if left < 0:
            return True
    return False


def type_name(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int | float | Decimal):
        return "NUMBER"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, list):
        return "ARRAY"
    if isinstance(value, dict):
        return "OBJECT"
    return type(value).__name__.upper()
