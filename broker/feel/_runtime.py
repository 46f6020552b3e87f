"""Evaluation state shared by compiled expressions: variable scopes, warnings, the clock and the budget."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from ._values import MISSING, from_host, to_host

#: At most this many warnings are kept per evaluation; loops over big lists must not flood incidents.
MAX_WARNINGS = 50


#: Size units one list item or context entry costs (about the bytes of its slot); a character costs one.
ITEM_SIZE = 8

#: The types of items that add to the expanded size of the list or context holding them (beyond their slot).
_SIZED_ITEMS = frozenset({str, list, dict})

#: Marks a list or context whose expanded size is being measured (met again inside itself: a cycle).
_MEASURING = -1


@dataclass(frozen=True, slots=True)
class Limits:
    """What one evaluation may spend, so that no expression can stall a partition or exhaust its memory.

    Both budgets count work, never time, so an evaluation fails (or not) identically on every replica and
    in every replay.

    - ``max_steps``: loop iterations and filtered items (weighted by the size of the loop body), function
      calls (weighted by the body of a user function), and the items and characters a built-in reads.
      A step is about one evaluated syntax node: the default is roughly 100 ms of work.
    - ``max_size``: everything the evaluation produces, summed: one unit per character of each string
      built and ``ITEM_SIZE`` per list item or context entry. About bytes; the default is 16 MB. A value
      about to be written out in full (the result, and what ``flatten``, ``string`` or ``to json`` expand)
      must also fit, expanded, in what is left of it: see :func:`expanded_size`.
    """

    max_steps: int = 500_000
    max_size: int = 16_000_000


DEFAULT_LIMITS = Limits()


class FeelEvaluationError(Exception):
    """An evaluation that must fail instead of yielding null (``assert``, runaway recursion, budget).

    Most FEEL errors yield null plus a warning; only these abort the evaluation.
    """


class FeelBudgetExceeded(FeelEvaluationError):
    """The evaluation spent more than its :class:`Limits` allow.

    - ``budget``: ``"step"`` or ``"size"``; ``limit``: the limit in force
    - ``expression``: the text evaluated (set on the way out); ``reason``: the message without it
    """

    def __init__(self, budget: str, limit: int, expression: str = "") -> None:
        self.budget = budget
        self.limit = limit
        self.expression = expression
        if budget == "step":
            self.reason = f"exceeded the step budget of {limit:,} steps (loop iterations, function calls, items read)"
        else:
            self.reason = f"exceeded the size budget of {limit:,} (characters and list or context items produced)"
        super().__init__(f"Evaluation of '{expression}' {self.reason}" if expression else self.reason)


class Scope:
    """One level of variable bindings; ``host`` marks the caller's context, whose values need conversion."""

    __slots__ = ("host", "parent", "vars")

    def __init__(self, variables: Mapping[str, Any], parent: Scope | None, host: bool = False) -> None:
        self.vars = variables
        self.parent = parent
        self.host = host


class Env:
    """The mutable state of one evaluation.

    Compiled closures read variables through ``scope`` and swap it while they evaluate nested
    bindings (loops, filters, function bodies), restoring it afterwards.
    """

    __slots__ = ("converted", "limits", "now", "scope", "size_left", "steps_left", "warnings")

    def __init__(self, scope: Scope, now: dt.datetime | None, limits: Limits = DEFAULT_LIMITS) -> None:
        self.scope = scope
        self.now = now
        self.warnings: list[str] = []
        self.converted: dict[int, Any] | None = None
        self.limits = limits
        self.steps_left = limits.max_steps
        self.size_left = limits.max_size

    def spend(self, steps: int) -> None:
        """Charge ``steps`` of work; raises :class:`FeelBudgetExceeded` once the step budget is gone."""
        self.steps_left -= steps
        if self.steps_left < 0:
            raise FeelBudgetExceeded("step", self.limits.max_steps)

    def out_of_steps(self) -> NoReturn:
        """Fail the evaluation on the step budget (for loops that charge ``steps_left`` inline)."""
        raise FeelBudgetExceeded("step", self.limits.max_steps)

    def ensure_room(self, size: int) -> None:
        """Fail on the size budget before producing ``size`` units that would not fit (charges nothing)."""
        if size > self.size_left:
            raise FeelBudgetExceeded("size", self.limits.max_size)

    def grow(self, size: int) -> None:
        """Charge ``size`` units of produced data; raises :class:`FeelBudgetExceeded` past the size budget."""
        self.size_left -= size
        if self.size_left < 0:
            raise FeelBudgetExceeded("size", self.limits.max_size)

    def admit(self, value: Any) -> Any:
        """``value`` if it fits, written out in full, in what is left of the size budget; else fail on that budget.

        Holding a value is cheap however often it is referenced, but converting, encoding or flattening it
        writes each reference out again: a value nesting a shared part level by level is tiny in memory and
        exponential once written. This is checked before anything writes a value out.
        """
        t = type(value)
        if (t is list or t is dict) and expanded_size(value, {}) > self.size_left:
            raise FeelBudgetExceeded("size", self.limits.max_size)
        return value

    def host_result(self, value: Any) -> Any:
        """``to_host(self.admit(value))`` in one pass over the top level of ``value`` (the usual result is a flat
        list or context, so this adds little to the conversion every result needs anyway)."""
        t = type(value)
        if t is list:
            total = ITEM_SIZE * len(value)
            listed: list[Any] = []
            items: Any = enumerate(value)
            out: Any = listed
        elif t is dict:
            total = ITEM_SIZE * len(value) + sum(map(len, value))
            listed = []
            items = value.items()
            out = {}
        else:
            return to_host(value)
        measured: dict[int, int] | None = None
        for key, item in items:
            ti = type(item)
            if ti is str:
                total += len(item)
            elif ti is list or ti is dict:
                if measured is None:
                    measured = {}
                known = measured.get(id(item))
                total += expanded_size(item, measured) if known is None else known
            elif ti is not int and ti is not bool and item is not None:
                item = to_host(item)
            if t is list:
                listed.append(item)
            else:
                out[key] = item
        if total > self.size_left:
            raise FeelBudgetExceeded("size", self.limits.max_size)
        if measured is not None:  # nested lists and contexts are converted once they are known to fit
            for key, item in enumerate(listed) if t is list else out.items():
                if type(item) is list or type(item) is dict:
                    out[key] = to_host(item)
        return out

    def warn(self, message: str) -> None:
        """Record a suppressed failure, keeping the first ``MAX_WARNINGS`` distinct messages."""
        warnings = self.warnings
        if len(warnings) < MAX_WARNINGS and message not in warnings:
            warnings.append(message)

    def host_value(self, value: Any) -> Any:
        """Convert a caller-supplied value once per evaluation (containers are cached by identity)."""
        t = type(value)
        if t is str or t is int or t is bool or value is None:
            return value
        if t is not list and t is not dict:
            return from_host(value)
        cache = self.converted
        if cache is None:
            cache = self.converted = {}
        key = id(value)
        found = cache.get(key, MISSING)
        if found is MISSING:
            found = cache[key] = from_host(value)
        return found

    def lookup(self, name: str) -> Any:
        """The value bound to ``name`` in the innermost scope that has it, or ``MISSING``."""
        scope: Scope | None = self.scope
        while scope is not None:
            value = scope.vars.get(name, MISSING)
            if value is not MISSING:
                return self.host_value(value) if scope.host else value
            scope = scope.parent
        return MISSING

    def push(self, variables: Mapping[str, Any]) -> Scope:
        """Enter a nested scope; returns the previous scope for ``restore``."""
        previous = self.scope
        self.scope = Scope(variables, previous)
        return previous


def expanded_size(value: list[Any] | dict[str, Any], measured: dict[int, int]) -> int:
    """The size of a list or context written out in full, in the units of the size budget.

    ``ITEM_SIZE`` per item or entry, the characters of its keys and strings, and the expanded size of each
    list or context it holds, counted again wherever it is held. ``measured`` caches the size of each list
    and context by identity (all are alive while ``value`` is), so the walk takes one visit per distinct
    value however often each is shared. Numbers and other scalars count as their slot.
    """
    count = len(value)
    if type(value) is dict:
        total = ITEM_SIZE * count + sum(map(len, value))
        items: Any = value.values()
    else:
        total = ITEM_SIZE * count
        items = value
    key = id(value)
    if count > 16 and _SIZED_ITEMS.isdisjoint(map(type, items)):  # scalars only: no walk in Python
        measured[key] = total
        return total
    measured[key] = _MEASURING
    for item in items:
        t = type(item)
        if t is str:
            total += len(item)
        elif t is list or t is dict:
            known = measured.get(id(item))
            if known is None:
                known = expanded_size(item, measured)
            elif known == _MEASURING:
                raise FeelEvaluationError("a list holds itself (a 'for' loop returned a value holding 'partial')")
            total += known
    measured[key] = total
    return total
