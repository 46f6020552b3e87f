"""Evaluation state shared by compiled expressions: variable scopes, warnings and the clock."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from ._values import MISSING, from_host

#: At most this many warnings are kept per evaluation; loops over big lists must not flood incidents.
MAX_WARNINGS = 50


class FeelEvaluationError(Exception):
    """An evaluation that must fail instead of yielding null (``assert``, runaway recursion).

    Most FEEL errors yield null plus a warning; only these abort the evaluation.
    """


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

    __slots__ = ("converted", "now", "scope", "warnings")

    def __init__(self, scope: Scope, now: dt.datetime | None) -> None:
        self.scope = scope
        self.now = now
        self.warnings: list[str] = []
        self.converted: dict[int, Any] | None = None

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
