"""Numeric and list built-ins."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from decimal import (
    ROUND_CEILING,
    ROUND_DOWN,
    ROUND_FLOOR,
    ROUND_HALF_DOWN,
    ROUND_HALF_EVEN,
    ROUND_HALF_UP,
    ROUND_UP,
    Decimal,
)
from functools import cmp_to_key
from typing import Any

from ._ops import MAX_EXACT_BITS, to_decimal
from ._registry import ArgumentError, arg_int, arg_list, arg_num, builtin, present
from ._runtime import Env
from ._values import DECIMAL_CONTEXT, FeelFunction, YearMonthDuration, compare, values_equal

# -- numeric ------------------------------------------------------------------------------------------

_MODES = {
    "UP": ROUND_UP,
    "DOWN": ROUND_DOWN,
    "CEILING": ROUND_CEILING,
    "FLOOR": ROUND_FLOOR,
    "HALF_UP": ROUND_HALF_UP,
    "HALF_DOWN": ROUND_HALF_DOWN,
    "HALF_EVEN": ROUND_HALF_EVEN,
}


def _round(value: Any, scale: Any, mode: str) -> Decimal:
    number = to_decimal(arg_num(value))
    places = arg_int(scale) if present(scale) and scale is not None else 0
    if not -6111 <= places <= 6176:
        raise ArgumentError("scale out of range")
    return number.quantize(Decimal(1).scaleb(-places), rounding=mode, context=DECIMAL_CONTEXT)


@builtin("decimal", "n, scale, mode?")
def _decimal(env: Env, n: Any, scale: Any, mode: Any = None) -> Decimal:
    if not present(mode) or mode is None:
        return _round(n, scale, ROUND_HALF_EVEN)
    if type(mode) is not str:
        raise ArgumentError("mode must be a string")
    name = mode.upper()
    if name == "UNNECESSARY":
        rounded = _round(n, scale, ROUND_HALF_EVEN)
        if rounded != n:
            raise ArgumentError("rounding necessary")
        return rounded
    if name not in _MODES:
        raise ArgumentError(f"unknown rounding mode '{mode}'")
    return _round(n, scale, _MODES[name])


def _rounding(mode: str) -> Any:
    def impl(env: Env, n: Any, scale: Any = None) -> Decimal:
        return _round(n, scale, mode)

    return impl


for _name, _mode in (
    ("floor", ROUND_FLOOR),
    ("ceiling", ROUND_CEILING),
    ("round up", ROUND_UP),
    ("round down", ROUND_DOWN),
    ("round half up", ROUND_HALF_UP),
    ("round half down", ROUND_HALF_DOWN),
):
    builtin(_name, "n, scale?")(_rounding(_mode))


@builtin("abs", "n")
@builtin("abs", "number")  # feel-scala accepts both names
def _abs(env: Env, n: Any) -> Any:
    t = type(n)
    if t is dt.timedelta:
        return abs(n)
    if t is YearMonthDuration:
        return YearMonthDuration(abs(n.months))
    return abs(arg_num(n))


@builtin("modulo", "dividend, divisor")
def _modulo(env: Env, dividend: Any, divisor: Any) -> Any:
    a, b = arg_num(dividend), arg_num(divisor)
    if not b:
        raise ArgumentError("division by zero")
    if type(a) is int and type(b) is int:
        return a % b
    a_dec, b_dec = to_decimal(a), to_decimal(b)
    quotient = DECIMAL_CONTEXT.divide(a_dec, b_dec).to_integral_value(rounding=ROUND_FLOOR)
    return DECIMAL_CONTEXT.subtract(a_dec, DECIMAL_CONTEXT.multiply(b_dec, quotient))


@builtin("sqrt", "number")
def _sqrt(env: Env, n: Any) -> Decimal:
    value = arg_num(n)
    if value < 0:
        raise ArgumentError("square root of a negative number")
    return DECIMAL_CONTEXT.sqrt(to_decimal(value))


def _from_float(value: float) -> Decimal:
    if math.isnan(value) or math.isinf(value):
        raise ArgumentError("result is not a finite number")
    return Decimal(repr(value))


@builtin("log", "number")
def _log(env: Env, n: Any) -> Decimal:
    value = arg_num(n)
    if value <= 0:
        raise ArgumentError("logarithm of a number that is not positive")
    return _from_float(math.log(value))


@builtin("exp", "number")
def _exp(env: Env, n: Any) -> Decimal:
    return _from_float(math.exp(arg_num(n)))


@builtin("odd", "number")
def _odd(env: Env, n: Any) -> bool:
    return arg_int(n) % 2 == 1


@builtin("even", "number")
def _even(env: Env, n: Any) -> bool:
    return arg_int(n) % 2 == 0


# -- list ---------------------------------------------------------------------------------------------


def _numbers(values: list[Any]) -> list[Any]:
    for value in values:
        arg_num(value)
    return values


@builtin("list contains", "list, element")
def _list_contains(env: Env, values: Any, element: Any) -> bool:
    return any(values_equal(item, element, None, env) is True for item in arg_list(values))


@builtin("count", "list")
def _count(env: Env, values: Any) -> int:
    return len(arg_list(values))


def _extreme(values: list[Any], sign: int) -> Any:
    if not values:
        return None
    best = values[0]
    for item in values[1:]:
        order = compare(item, best)
        if order is None:
            raise ArgumentError("list elements are not comparable")
        if order == sign:
            best = item
    if len(values) == 1 and compare(best, best) is None:
        raise ArgumentError("list elements are not comparable")
    return best


@builtin("min", "*list")
def _min(env: Env, values: list[Any]) -> Any:
    return _extreme(arg_list(values), -1)


@builtin("max", "*list")
def _max(env: Env, values: list[Any]) -> Any:
    return _extreme(arg_list(values), 1)


def _sum(values: list[Any]) -> Any:
    total: Any = 0
    for value in values:
        if type(total) is int and type(value) is int:
            total += value
        else:
            total = DECIMAL_CONTEXT.add(total, value)
    return total


@builtin("sum", "*list")
def _sum_builtin(env: Env, values: list[Any]) -> Any:
    values = _numbers(arg_list(values))
    return _sum(values) if values else None


@builtin("product", "*list")
def _product(env: Env, values: list[Any]) -> Any:
    values = _numbers(arg_list(values))
    if not values:
        return None
    total: Any = 1
    for value in values:
        exact = type(total) is int and type(value) is int and total.bit_length() + value.bit_length() <= MAX_EXACT_BITS
        total = total * value if exact else DECIMAL_CONTEXT.multiply(total, value)
    return total


@builtin("mean", "*list")
def _mean(env: Env, values: list[Any]) -> Any:
    values = _numbers(arg_list(values))
    if not values:
        return None
    return DECIMAL_CONTEXT.divide(_sum(values), len(values))


@builtin("median", "*list")
def _median(env: Env, values: list[Any]) -> Any:
    values = sorted(_numbers(arg_list(values)))
    if not values:
        return None
    middle = len(values) // 2
    if len(values) % 2:
        return values[middle]
    return DECIMAL_CONTEXT.divide(DECIMAL_CONTEXT.add(values[middle - 1], values[middle]), 2)


@builtin("stddev", "*list")
def _stddev(env: Env, values: list[Any]) -> Any:
    values = _numbers(arg_list(values))
    if len(values) < 2:
        return None
    mean = DECIMAL_CONTEXT.divide(_sum(values), len(values))
    squares = sum((DECIMAL_CONTEXT.power(to_decimal(v) - mean, 2) for v in values), Decimal(0))
    return _from_float(math.sqrt(float(DECIMAL_CONTEXT.divide(squares, len(values) - 1))))


@builtin("mode", "*list")
def _mode_builtin(env: Env, values: list[Any]) -> list[Any]:
    values = _numbers(arg_list(values))
    if not values:
        return []
    counts = Counter(to_decimal(v).normalize() for v in values)
    top = max(counts.values())
    originals = {to_decimal(v).normalize(): v for v in values}
    return sorted(originals[k] for k, c in counts.items() if c == top)


def _all(values: list[Any]) -> bool | None:
    result: bool | None = True
    for value in values:
        if value is False:
            return False
        if value is not True:
            result = None
    return result


def _any(values: list[Any]) -> bool | None:
    result: bool | None = False
    for value in values:
        if value is True:
            return True
        if value is not False:
            result = None
    return result


@builtin("all", "*list")
def _all_builtin(env: Env, values: list[Any]) -> bool | None:
    return _all(arg_list(values))


@builtin("and", "*list")
def _and_builtin(env: Env, values: list[Any]) -> bool | None:
    return _all(arg_list(values))


@builtin("any", "*list")
def _any_builtin(env: Env, values: list[Any]) -> bool | None:
    return _any(arg_list(values))


@builtin("or", "*list")
def _or_builtin(env: Env, values: list[Any]) -> bool | None:
    return _any(arg_list(values))


def _position(values: list[Any], position: int) -> int:
    return position - 1 if position > 0 else len(values) + position


@builtin("sublist", "list, start position, length?")
@builtin("sublist", "list, start, length?")  # feel-scala's parameter names
def _sublist(env: Env, values: Any, start: Any, length: Any = None) -> list[Any]:
    values = arg_list(values)
    begin = _position(values, arg_int(start))
    if begin < 0 or begin >= len(values):
        raise ArgumentError("start position out of range")
    if present(length) and length is not None:
        count = arg_int(length)
        if count < 0:
            raise ArgumentError("length must not be negative")
        return values[begin : begin + count]
    return values[begin:]


@builtin("append", "list, *items")
def _append(env: Env, values: Any, items: list[Any]) -> list[Any]:
    return [*arg_list(values), *items]


@builtin("concatenate", "*lists")
def _concatenate(env: Env, lists: list[Any]) -> list[Any]:
    result: list[Any] = []
    for item in lists:
        result.extend(arg_list(item))
    return result


@builtin("insert before", "list, position, newItem")
def _insert_before(env: Env, values: Any, position: Any, item: Any) -> list[Any]:
    values = arg_list(values)
    index = _position(values, arg_int(position))
    if index < 0 or index >= len(values) or arg_int(position) == 0:
        raise ArgumentError("position out of range")
    return [*values[:index], item, *values[index:]]


@builtin("remove", "list, position")
def _remove(env: Env, values: Any, position: Any) -> list[Any]:
    values = arg_list(values)
    index = _position(values, arg_int(position))
    if index < 0 or index >= len(values) or arg_int(position) == 0:
        raise ArgumentError("position out of range")
    return [*values[:index], *values[index + 1 :]]


@builtin("reverse", "list")
def _reverse(env: Env, values: Any) -> list[Any]:
    return list(reversed(arg_list(values)))


@builtin("index of", "list, match")
def _index_of(env: Env, values: Any, match: Any) -> list[int]:
    return [i + 1 for i, item in enumerate(arg_list(values)) if values_equal(item, match, None, env) is True]


def _distinct(env: Env, values: list[Any]) -> list[Any]:
    """The first occurrence of each value; quadratic, so each item is charged the comparisons it makes."""
    result: list[Any] = []
    for item in values:
        env.spend(2 * len(result))
        if not any(values_equal(item, seen, None, env) is True for seen in result):
            result.append(item)
    return result


@builtin("union", "*lists")
def _union(env: Env, lists: list[Any]) -> list[Any]:
    return _distinct(env, _concatenate(env, lists))


@builtin("distinct values", "list")
def _distinct_values(env: Env, values: Any) -> list[Any]:
    return _distinct(env, arg_list(values))


@builtin("duplicate values", "list")
def _duplicate_values(env: Env, values: Any) -> list[Any]:
    """Values occurring more than once, in the order of their first occurrence."""
    values = arg_list(values)
    distinct = _distinct(env, values)
    env.spend(len(distinct) * len(values))
    return [
        item
        for index, item in enumerate(distinct)
        if sum(1 for other in values if values_equal(item, other, None, env) is True) > 1
    ]


def _flatten(values: list[Any]) -> list[Any]:
    result: list[Any] = []
    for item in values:
        if type(item) is list:
            result.extend(_flatten(item))
        else:
            result.append(item)
    return result


@builtin("flatten", "list")
def _flatten_builtin(env: Env, values: Any) -> list[Any]:
    env.admit(arg_list(values))  # flattening writes out every reference to a shared inner list
    return _flatten(values)


@builtin("partition", "list, size")
def _partition(env: Env, values: Any, size: Any) -> list[list[Any]]:
    values = arg_list(values)
    step = arg_int(size)
    if step <= 0:
        raise ArgumentError("size must be positive")
    return [values[i : i + step] for i in range(0, len(values), step)]


@builtin("sort", "list, precedes?")
def _sort(env: Env, values: Any, precedes: Any = None) -> list[Any]:
    values = arg_list(values)
    env.spend(len(values) * len(values).bit_length())  # about the comparisons a sort makes
    if not present(precedes) or precedes is None:
        return sorted(values, key=cmp_to_key(lambda a, b: _natural(a, b)))
    if type(precedes) is not FeelFunction or len(precedes.params) != 2:
        raise ArgumentError("precedes must be a function with two parameters")

    def before(a: Any, b: Any) -> bool:
        result = precedes.impl(env, [a, b])
        if type(result) is not bool:
            raise ArgumentError(f"precedes must return a boolean but returned {result!r}")
        return result

    def order(a: Any, b: Any) -> int:
        if before(a, b):
            return -1
        return 1 if before(b, a) else 0

    return sorted(values, key=cmp_to_key(order))


def _natural(a: Any, b: Any) -> int:
    result = compare(a, b)
    if result is None:
        raise ArgumentError("list elements are not comparable")
    return result
