"""The table of built-in functions and the argument checks they share.

A built-in is registered with its FEEL parameter names (so named arguments work); optional trailing
parameters end with ``?``; a ``*`` before the last name collects the remaining arguments into a list.
Implementations take ``(env, *args)`` and raise :class:`ArgumentError` for arguments they cannot
handle; the caller turns that into null plus a warning, as FEEL does for failed invocations.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from ._runtime import Env
from ._values import MISSING, describe, type_name

Impl = Callable[..., Any]


class ArgumentError(Exception):
    """A built-in was given arguments it cannot work with; the call yields null."""


class Builtin:
    """One signature of a built-in function."""

    __slots__ = ("impl", "name", "params", "required", "varargs")

    def __init__(self, name: str, spec: str, impl: Impl) -> None:
        names = [p.strip() for p in spec.split(",")] if spec.strip() else []
        self.varargs = bool(names) and names[-1].startswith("*")
        self.params = tuple(p.lstrip("*").rstrip("?") for p in names)
        optional = sum(1 for p in names if p.endswith("?") or p.startswith("*"))
        self.required = len(names) - optional
        self.name = name
        self.impl = impl

    def accepts_count(self, count: int) -> bool:
        if self.varargs:
            return count >= self.required
        return self.required <= count <= len(self.params)

    def accepts_names(self, names: set[str]) -> bool:
        return names <= set(self.params) and set(self.params[: self.required]) <= names

    def arrange_positional(self, args: list[Any]) -> list[Any]:
        """Collect surplus arguments into the varargs list; a lone list argument is the list itself."""
        if not self.varargs:
            return args
        fixed = len(self.params) - 1
        rest = args[fixed:]
        if fixed == 0 and len(rest) == 1 and type(rest[0]) is list:
            rest = rest[0]
        return [*args[:fixed], rest]

    def arrange_named(self, named: dict[str, Any]) -> list[Any]:
        """Order named arguments by parameter; absent optional ones are passed as ``MISSING``."""
        args = [named.get(p, MISSING) for p in self.params]
        while args and args[-1] is MISSING:
            args.pop()
        if self.varargs and len(args) == len(self.params) and type(args[-1]) is not list:
            args[-1] = [args[-1]]
        return args

    def invoke(self, env: Env, args: list[Any]) -> Any:
        try:
            return self.impl(env, *args)
        except ArgumentError as error:
            env.warn(f"Failed to invoke function '{self.name}': {error}")
        except (ArithmeticError, ValueError, OverflowError) as error:
            env.warn(f"Failed to invoke function '{self.name}': {error or type(error).__name__}")
        return None


BUILTINS: dict[str, list[Builtin]] = {}


def builtin(name: str, spec: str) -> Callable[[Impl], Impl]:
    """Register ``impl`` as a signature of built-in ``name``."""

    def register(impl: Impl) -> Impl:
        BUILTINS.setdefault(name, []).append(Builtin(name, spec, impl))
        return impl

    return register


def alias(name: str, target: str) -> None:
    """Make ``name`` another name of an already registered built-in."""
    BUILTINS[name] = [Builtin(name, _spec_of(b), b.impl) for b in BUILTINS[target]]


def _spec_of(b: Builtin) -> str:
    parts = []
    for index, param in enumerate(b.params):
        if b.varargs and index == len(b.params) - 1:
            parts.append("*" + param)
        elif index >= b.required:
            parts.append(param + "?")
        else:
            parts.append(param)
    return ", ".join(parts)


def find_positional(name: str, count: int) -> Builtin | None:
    """The signature of ``name`` that takes ``count`` positional arguments."""
    for candidate in BUILTINS.get(name, ()):
        if candidate.accepts_count(count):
            return candidate
    return None


def find_named(name: str, names: set[str]) -> Builtin | None:
    """The signature of ``name`` whose parameters cover the given argument names."""
    for candidate in BUILTINS.get(name, ()):
        if candidate.accepts_names(names):
            return candidate
    return None


# ----------------------------------------------------------------------------------------------------
# argument checks


def _fail(expected: str, value: Any) -> ArgumentError:
    return ArgumentError(f"expected {expected} but found {type_name(value)} {describe(value)}")


def arg_str(value: Any) -> str:
    if type(value) is not str:
        raise _fail("string", value)
    return value


def arg_num(value: Any) -> int | Decimal:
    t = type(value)
    if t is not int and t is not Decimal:
        raise _fail("number", value)
    return value


def arg_int(value: Any) -> int:
    number = arg_num(value)
    if number != int(number):
        raise ArgumentError(f"expected a whole number but found {describe(value)}")
    return int(number)


def arg_bool(value: Any) -> bool:
    if type(value) is not bool:
        raise _fail("boolean", value)
    return value


def arg_list(value: Any) -> list[Any]:
    if type(value) is not list:
        raise _fail("list", value)
    return value


def arg_ctx(value: Any) -> dict[str, Any]:
    if type(value) is not dict:
        raise _fail("context", value)
    return value


def present(value: Any) -> bool:
    """True when an optional argument was given."""
    return value is not MISSING
