"""Arithmetic operators on FEEL values; a type mismatch yields null plus a warning."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from ._runtime import Env
from ._temporal import (
    add_months,
    add_timedelta_to_datetime,
    add_timedelta_to_time,
    micros_to_timedelta,
    subtract_datetimes,
    subtract_times,
    timedelta_micros,
)
from ._values import DECIMAL_CONTEXT, MAX_INT_DIGITS, YearMonthDuration, describe, type_name

_DATE = dt.date
_DATETIME = dt.datetime
_TIME = dt.time
_TD = dt.timedelta
_YM = YearMonthDuration


def _mismatch(env: Env, op: str, a: Any, b: Any) -> None:
    if a is None or b is None:
        env.warn(f"Can't apply '{op}' to {describe(a)} and {describe(b)}: an operand is null")
    else:
        env.warn(f"Can't apply '{op}' to {type_name(a)} {describe(a)} and {type_name(b)} {describe(b)}")
    return None


#: Whole numbers stay exact ints up to ``MAX_INT_DIGITS`` digits (Python prints at most 4,300); beyond that they
#: are rounded to 34 significant digits like every other FEEL number, so one multiplication stays cheap.
MAX_EXACT_BITS = MAX_INT_DIGITS * 3321 // 1000


def to_decimal(value: int | Decimal) -> Decimal:
    """Exact conversion to Decimal."""
    return value if type(value) is Decimal else Decimal(value)


def _decimal(env: Env, op: Callable[[Any, Any], Decimal], a: Any, b: Any, symbol: str) -> Decimal | None:
    """A decimal operation; a result beyond FEEL's exponent range is null, as for every other failed operator."""
    try:
        return op(a, b)
    except ArithmeticError:
        env.warn(f"Result of {describe(a)} {symbol} {describe(b)} is out of range")
        return None


def add(env: Env, a: Any, b: Any) -> Any:
    """``a + b`` for numbers, strings and temporal values."""
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        return a + b
    if (ta is int or ta is Decimal) and (tb is int or tb is Decimal):
        return _decimal(env, DECIMAL_CONTEXT.add, a, b, "+")
    if ta is str and tb is str:
        env.grow(len(a) + len(b))
        return a + b
    try:
        if tb is _TD:
            if ta is _TD:
                return a + b
            if ta is _DATETIME:
                return add_timedelta_to_datetime(a, b)
            if ta is _DATE:
                return (_DATETIME.combine(a, _TIME()) + b).date()
            if ta is _TIME:
                return add_timedelta_to_time(a, b)
        elif tb is _YM:
            if ta is _YM:
                return _YM(a.months + b.months)
            if ta is _DATETIME or ta is _DATE:
                return add_months(a, b.months)
        elif ta is _TD or ta is _YM:
            return add(env, b, a) if tb in (_DATETIME, _DATE, _TIME) else _mismatch(env, "+", a, b)
    except OverflowError:
        env.warn(f"Result of {describe(a)} + {describe(b)} is out of range")
        return None
    return _mismatch(env, "+", a, b)


def subtract(env: Env, a: Any, b: Any) -> Any:
    """``a - b`` for numbers and temporal values."""
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        return a - b
    if (ta is int or ta is Decimal) and (tb is int or tb is Decimal):
        return _decimal(env, DECIMAL_CONTEXT.subtract, a, b, "-")
    try:
        if tb is _TD:
            if ta is _TD:
                return a - b
            if ta is _DATETIME:
                return add_timedelta_to_datetime(a, -b)
            if ta is _DATE:
                return (_DATETIME.combine(a, _TIME()) - b).date()
            if ta is _TIME:
                return add_timedelta_to_time(a, -b)
        elif tb is _YM:
            if ta is _YM:
                return _YM(a.months - b.months)
            if ta is _DATETIME or ta is _DATE:
                return add_months(a, -b.months)
        elif ta is tb is _DATE:
            return a - b
        elif ta is tb is _DATETIME and (a.tzinfo is None) == (b.tzinfo is None):
            return subtract_datetimes(a, b)
        elif ta is tb is _TIME and (a.tzinfo is None) == (b.tzinfo is None):
            return subtract_times(a, b)
    except OverflowError:
        env.warn(f"Result of {describe(a)} - {describe(b)} is out of range")
        return None
    return _mismatch(env, "-", a, b)


def _int_factor(value: int | Decimal) -> int:
    """Durations scale by the integer part of a number (as ``java.time`` does)."""
    return int(value)


def multiply(env: Env, a: Any, b: Any) -> Any:
    """``a * b`` for numbers, and durations scaled by numbers."""
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        if a.bit_length() + b.bit_length() <= MAX_EXACT_BITS:
            return a * b
        return _decimal(env, DECIMAL_CONTEXT.multiply, a, b, "*")
    a_num = ta is int or ta is Decimal
    b_num = tb is int or tb is Decimal
    if a_num and b_num:
        return _decimal(env, DECIMAL_CONTEXT.multiply, a, b, "*")
    if a_num and tb in (_TD, _YM):
        return multiply(env, b, a)
    if b_num:
        try:
            if ta is _TD:
                return micros_to_timedelta(int(Decimal(timedelta_micros(a)) * to_decimal(b)))
            if ta is _YM:
                return _YM(a.months * _int_factor(b))
        except OverflowError:
            env.warn(f"Result of {describe(a)} * {describe(b)} is out of range")
            return None
    return _mismatch(env, "*", a, b)


def divide(env: Env, a: Any, b: Any) -> Any:
    """``a / b``; division by zero is null."""
    ta, tb = type(a), type(b)
    a_num = ta is int or ta is Decimal
    b_num = tb is int or tb is Decimal
    if b_num and not b:
        env.warn(f"Can't divide {describe(a)} by zero")
        return None
    if a_num and b_num:
        return _decimal(env, DECIMAL_CONTEXT.divide, a, b, "/")
    if b_num:
        if ta is _TD:
            micros = DECIMAL_CONTEXT.divide(timedelta_micros(a), b)
            return micros_to_timedelta(int(micros))
        if ta is _YM:
            return _YM(int(DECIMAL_CONTEXT.divide(a.months, b)))
    if ta is _TD and tb is _TD:
        if not b:
            env.warn("Can't divide by a zero duration")
            return None
        return DECIMAL_CONTEXT.divide(timedelta_micros(a), timedelta_micros(b))
    if ta is _YM and tb is _YM:
        if not b.months:
            env.warn("Can't divide by a zero duration")
            return None
        return DECIMAL_CONTEXT.divide(a.months, b.months)
    return _mismatch(env, "/", a, b)


def power(env: Env, a: Any, b: Any) -> Any:
    """``a ** b``: exact for whole exponents, through binary floating point otherwise."""
    ta, tb = type(a), type(b)
    if not ((ta is int or ta is Decimal) and (tb is int or tb is Decimal)):
        return _mismatch(env, "**", a, b)
    try:
        if b == int(b):
            exponent = int(b)
            if abs(exponent) > 100_000:
                env.warn("Exponent is too large")
                return None
            if ta is int and exponent >= 0 and a.bit_length() * exponent <= MAX_EXACT_BITS:
                return a**exponent
            return DECIMAL_CONTEXT.power(to_decimal(a), exponent)
        result = math.pow(float(a), float(b))
    except (InvalidOperation, ValueError, OverflowError, ZeroDivisionError, ArithmeticError):
        env.warn(f"Can't raise {describe(a)} to the power {describe(b)}")
        return None
    if math.isnan(result) or math.isinf(result):
        return None
    return Decimal(repr(result))


def negate(env: Env, a: Any) -> Any:
    """Unary minus for numbers and durations."""
    ta = type(a)
    if ta is int:
        return -a
    if ta is Decimal:
        return DECIMAL_CONTEXT.minus(a)
    if ta is _TD:
        return -a
    if ta is _YM:
        return _YM(-a.months)
    env.warn(f"Can't negate {describe(a)}")
    return None


ARITHMETIC = {"+": add, "-": subtract, "*": multiply, "/": divide, "**": power}
