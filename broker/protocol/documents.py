"""What a command value may hold, checked where commands enter a broker and where the gateway parses variables.

Everything in a command is written to the log (msgpack) and variables are later shown to workers and exporters as
JSON. A value that cannot take both forms must be refused when it arrives: found later, while a round's block is
encoded or a job batch rendered, it would fail every command of the round or every activation of the job type.

- Strings (and map keys) must be valid Unicode without lone UTF-16 surrogates (``"\\ud800"`` in JSON text).
- Integers must fit msgpack (−2^63 … 2^64−1); nesting is bounded by :data:`MAX_DEPTH`.
- Variables documents (any ``variables`` map of a command) must also render as JSON: no NaN or Infinity, no bytes
  or msgpack extension types, string keys only.
"""

from __future__ import annotations

import math
from typing import Any

MAX_DEPTH = 100
"""Deepest nesting of maps and lists in a command value (msgpack itself stops at 511)."""

INT_MIN = -(2**63)
INT_MAX = 2**64 - 1

_SCALARS = (type(None), bool, int, float, str)


class InvalidDocumentError(ValueError):
    """A command value that cannot be logged or rendered; the message names the offending variable or field."""


# Where a value sits, built only when a problem is reported: None for the root, else (parent, key).
_Where = tuple[Any, Any] | None


def _render(where: _Where) -> str:
    keys = []
    while where is not None:
        where, key = where
        keys.append(key)
    out = ""
    for key in reversed(keys):
        out = f"{out}[{key}]" if isinstance(key, int) else (f"{out}.{key}" if out else str(key))
    return out


def _describe_string(text: str) -> str | None:
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        bad = text[e.start]
        where = f"at character {e.start}"
        return f"contains a lone UTF-16 surrogate (\\u{ord(bad):04x}) {where}, which is not valid Unicode"
    return None


def _label(noun: str, where: str) -> str:
    return f"{noun} '{_printable(where)}'" if where else noun


def _printable(text: str) -> str:
    """A name safe to put in an error message (itself encoded as UTF-8 on the way back)."""
    shown = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return shown if len(shown) <= 80 else shown[:77] + "..."


def find_problem(value: Any, *, json_only: bool, noun: str = "variable", max_bytes: int | None = None) -> str | None:
    """The first reason ``value`` cannot be stored (or, with ``json_only``, shown as JSON), naming where; or None.

    Iterative, so a deeply nested value cannot exhaust the interpreter's stack while it is checked. ``max_bytes``
    bounds the (approximate) encoded size.
    """
    stack: list[tuple[Any, _Where, int]] = [(value, None, 0)]
    size = 0
    while stack:
        item, where, depth = stack.pop()
        kind = type(item)
        if kind is str:
            size += len(item) + 5
            if not item.isascii() and (reason := _describe_string(item)):
                return f"{_label(noun, _render(where))} {reason}"
        elif kind is dict:
            if depth >= MAX_DEPTH:
                return f"{_label(noun, _render(where))} is nested more than {MAX_DEPTH} levels deep"
            size += 5
            for k, v in item.items():
                if type(k) is not str:
                    if json_only or not isinstance(k, _SCALARS):
                        return f"{_label(noun, _render(where))} has a key that is not a string: {k!r:.40}"
                else:
                    size += len(k) + 5
                    if not k.isascii() and (reason := _describe_string(k)):
                        return f"{noun} name '{_printable(_render((where, k)))}' {reason}"
                value_kind = type(v)  # the common scalars inline; everything else through the stack
                if value_kind is str and v.isascii():
                    size += len(v) + 5
                    if max_bytes is not None and size > max_bytes:
                        return f"{_label(noun, _render((where, k)))} makes it larger than {max_bytes} bytes"
                elif (value_kind is int and INT_MIN <= v <= INT_MAX) or value_kind is bool or v is None:
                    size += 9
                else:
                    stack.append((v, (where, k), depth + 1))
        elif kind is list or kind is tuple:
            if depth >= MAX_DEPTH:
                return f"{_label(noun, _render(where))} is nested more than {MAX_DEPTH} levels deep"
            size += 5
            stack.extend((v, (where, i), depth + 1) for i, v in enumerate(item))
        elif kind is int:
            size += 9
            if not INT_MIN <= item <= INT_MAX:
                return f"{_label(noun, _render(where))} is an integer outside -2^63 .. 2^64-1"
        elif kind is float:
            size += 9
            if json_only and not math.isfinite(item):
                return f"{_label(noun, _render(where))} is {item}, which JSON cannot represent"
        elif kind is bool or item is None:
            size += 1
        elif kind is bytes and not json_only:
            size += len(item) + 5
        else:
            return f"{_label(noun, _render(where))} holds a value of type {kind.__name__}, which is not a JSON value"
        if max_bytes is not None and size > max_bytes:
            return f"{_label(noun, _render(where))} makes it larger than {max_bytes} bytes"
    return None


def check_command_value(value: Any, max_bytes: int | None = None) -> None:
    """Raise :class:`InvalidDocumentError` unless a command value can be logged and its variables shown as JSON.

    ``max_bytes`` bounds each variables document (the largest message a worker can be sent).
    """
    if type(value) is not dict:
        raise InvalidDocumentError(f"Expected the command value to be a map, but got a {type(value).__name__}")
    rest = value
    for name in _VARIABLE_FIELDS:
        document = value.get(name)
        if type(document) is not dict:
            continue  # a JOB_BATCH's ``variables`` is the list of names to fetch: checked with the rest
        problem = find_problem(document, json_only=True, max_bytes=max_bytes)
        if problem:
            raise InvalidDocumentError(f"Expected {name} to be a valid JSON document, but the {problem}")
        if rest is value:
            rest = dict(value)
        del rest[name]
    problem = find_problem(rest, json_only=False, noun="field")
    if problem:
        raise InvalidDocumentError(f"Expected a command value that can be stored, but the {problem}")


_VARIABLE_FIELDS = ("variables",)
