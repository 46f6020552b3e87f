"""Temporal and range built-ins. ``now()`` and ``today()`` read the evaluation's clock, never the wall
clock, so evaluation stays deterministic when the log is replayed."""

from __future__ import annotations

import calendar
import datetime as dt
from typing import Any

from ._registry import ArgumentError, arg_str, builtin
from ._runtime import Env
from ._values import FeelRange, compare, is_comparable_point

_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = tuple(calendar.month_name)[1:]


@builtin("now", "")
def _now(env: Env) -> dt.datetime | None:
    if env.now is None:
        env.warn("now() has no clock: no evaluation time was given")
    return env.now


@builtin("today", "")
def _today(env: Env) -> dt.date | None:
    if env.now is None:
        env.warn("today() has no clock: no evaluation time was given")
        return None
    return env.now.date()


def _day(value: Any) -> dt.date:
    if type(value) is dt.datetime:
        return value.date()
    if type(value) is dt.date:
        return value
    raise ArgumentError("expected date or date and time")


@builtin("day of week", "date")
def _day_of_week(env: Env, value: Any) -> str:
    return _DAYS[_day(value).weekday()]


@builtin("day of year", "date")
def _day_of_year(env: Env, value: Any) -> int:
    return _day(value).timetuple().tm_yday


@builtin("week of year", "date")
def _week_of_year(env: Env, value: Any) -> int:
    return _day(value).isocalendar()[1]


@builtin("month of year", "date")
def _month_of_year(env: Env, value: Any) -> str:
    return _MONTHS[_day(value).month - 1]


@builtin("last day of month", "date")
def _last_day_of_month(env: Env, value: Any) -> dt.date:
    day = _day(value)
    return day.replace(day=calendar.monthrange(day.year, day.month)[1])


# -- ranges -------------------------------------------------------------------------------------------
# Each function accepts points and ranges; a point p acts as the degenerate range [p..p].


def _as_range(value: Any) -> FeelRange:
    if type(value) is FeelRange:
        return value
    if value is None or not is_comparable_point(value):
        raise ArgumentError(f"expected a point or range but found {value!r}")
    return FeelRange(value, value, True, True)


def _cmp(a: Any, b: Any) -> int:
    result = compare(a, b)
    if result is None:
        raise ArgumentError("range endpoints are not comparable")
    return result


def _lt(a: Any, b: Any) -> bool:
    return _cmp(a, b) < 0


def _eq(a: Any, b: Any) -> bool:
    return _cmp(a, b) == 0


def _before(a: FeelRange, b: FeelRange) -> bool:
    """a ends before b starts."""
    if a.end is None or b.start is None:
        return False
    return _lt(a.end, b.start) or (_eq(a.end, b.start) and not (a.end_included and b.start_included))


def _meets(a: FeelRange, b: FeelRange) -> bool:
    return a.end_included and b.start_included and a.end is not None and b.start is not None and _eq(a.end, b.start)


def _overlaps(a: FeelRange, b: FeelRange) -> bool:
    return not _before(a, b) and not _before(b, a)


def _starts_le(a: FeelRange, b: FeelRange) -> bool:
    """a's start is at or before b's start (taking inclusion into account)."""
    if a.start is None:
        return True
    if b.start is None:
        return False
    order = _cmp(a.start, b.start)
    return order < 0 or (order == 0 and (a.start_included or not b.start_included))


def _ends_ge(a: FeelRange, b: FeelRange) -> bool:
    """a's end is at or after b's end."""
    if a.end is None:
        return True
    if b.end is None:
        return False
    order = _cmp(a.end, b.end)
    return order > 0 or (order == 0 and (a.end_included or not b.end_included))


def _includes(a: FeelRange, b: FeelRange) -> bool:
    return _starts_le(a, b) and _ends_ge(a, b)


def _same_start(a: FeelRange, b: FeelRange) -> bool:
    if a.start is None or b.start is None:
        return a.start is None and b.start is None
    return _eq(a.start, b.start) and a.start_included == b.start_included


def _same_end(a: FeelRange, b: FeelRange) -> bool:
    if a.end is None or b.end is None:
        return a.end is None and b.end is None
    return _eq(a.end, b.end) and a.end_included == b.end_included


def _range_builtin(name: str, params: str, test: Any) -> None:
    def impl(env: Env, first: Any, second: Any) -> bool:
        return bool(test(_as_range(first), _as_range(second)))

    builtin(name, params)(impl)


for _params in ("point1, point2", "point, range", "range, point", "range1, range2"):
    _range_builtin("before", _params, _before)
    _range_builtin("after", _params, lambda a, b: _before(b, a))
    _range_builtin("coincides", _params, lambda a, b: _same_start(a, b) and _same_end(a, b))
_range_builtin("meets", "range1, range2", _meets)
_range_builtin("met by", "range1, range2", lambda a, b: _meets(b, a))
_range_builtin("overlaps", "range1, range2", _overlaps)
_range_builtin(
    "overlaps before",
    "range1, range2",
    lambda a, b: _overlaps(a, b) and _starts_le(a, b) and not _same_start(a, b) and not _ends_ge(a, b),
)
_range_builtin(
    "overlaps after",
    "range1, range2",
    lambda a, b: _overlaps(a, b) and _starts_le(b, a) and not _same_start(a, b) and not _ends_ge(b, a),
)
for _params in ("point, range", "range1, range2"):
    _range_builtin("finishes", _params, lambda a, b: _same_end(a, b) and _includes(b, a))
    _range_builtin("starts", _params, lambda a, b: _same_start(a, b) and _includes(b, a))
    _range_builtin("during", _params, lambda a, b: _includes(b, a))
for _params in ("range, point", "range1, range2"):
    _range_builtin("finished by", _params, lambda a, b: _same_end(a, b) and _includes(a, b))
    _range_builtin("started by", _params, lambda a, b: _same_start(a, b) and _includes(a, b))
    _range_builtin("includes", _params, _includes)


@builtin("range", "from")
def _range_from(env: Env, text: Any) -> FeelRange:
    """Parse a range written as text, e.g. ``"[1..10)"``."""
    from ._api import evaluate_internal

    value = evaluate_internal(arg_str(text), env.now)
    if type(value) is not FeelRange:
        raise ArgumentError(f"'{text}' is not a range")
    return value
