"""Spring-style cron expressions, as Zeebe accepts them in a ``timeCycle``: parsing and the next matching instant.

Six fields ``second minute hour day-of-month month day-of-week`` in UTC, with the Quartz extras Spring supports
(``L``, ``W``, ``#``) and the ``@daily``-style macros. Day-of-month and day-of-week must both match (Spring's rule,
not Unix cron's "either"). Times come in as epoch milliseconds, never from the wall clock, so a replay computes the
same due dates as the live run.
"""

from __future__ import annotations

import bisect
import calendar
import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field

FIELDS = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")

MACROS = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}

_MONTH_NAMES = {name.upper(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAY_NAMES = {"MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6, "SUN": 7}
# (lowest, highest) value per field; day-of-week is 1 (Monday) .. 7 (Sunday), and 0 is accepted as Sunday.
_BOUNDS = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (1, 7))
_DOW = 5
_DOM = 3
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
# Month, day-of-month and weekday repeat every 400 Gregorian years: a search that long is exhaustive.
_SEARCH_MONTHS = 400 * 12 + 1


_QUARTZ_TOKEN = re.compile(r"[0-9]*(L|W|LW)(-[0-9]*)?|[^#]*#.*")


class CronError(ValueError):
    """A cron expression that cannot be used; the message names the field and what is wrong with it."""


def looks_like_cron(text: str) -> bool:
    """Whether a timer cycle is meant as cron (several fields, or a macro) rather than an ISO 8601 cycle."""
    stripped = text.strip()
    return stripped.startswith("@") or len(stripped.split()) > 1


@dataclass(frozen=True, slots=True)
class _DayRules:
    """Day-of-month and day-of-week rules: plain values plus Quartz specials, evaluated per month."""

    month_days: frozenset[int]
    last_day_offsets: tuple[int, ...] = ()  # L (0) and L-n (n)
    last_weekday: bool = False  # LW
    nearest_weekday: tuple[int, ...] = ()  # nW
    weekdays: frozenset[int] = frozenset(range(1, 8))
    last_of_weekday: tuple[int, ...] = ()  # dL
    nth_weekday: tuple[tuple[int, int], ...] = ()  # d#n

    def days_in(self, length: int, first_weekday: int) -> tuple[int, ...]:
        """Matching days of a month with ``length`` days whose 1st is ISO weekday ``first_weekday``."""

        def weekday(day: int) -> int:
            return (first_weekday + day - 2) % 7 + 1

        by_month = {d for d in self.month_days if d <= length}
        by_month.update(length - n for n in self.last_day_offsets if length - n >= 1)
        if self.last_weekday:
            by_month.add(_nearest_weekday(length, length, weekday))
        by_month.update(_nearest_weekday(d, length, weekday) for d in self.nearest_weekday if d <= length)
        by_week = {d for d in range(1, length + 1) if weekday(d) in self.weekdays}
        by_week.update(length - (weekday(length) - w) % 7 for w in self.last_of_weekday)
        for w, n in self.nth_weekday:
            day = 1 + (w - weekday(1)) % 7 + 7 * (n - 1)
            if day <= length:
                by_week.add(day)
        return tuple(sorted(by_month & by_week))


def _nearest_weekday(day: int, length: int, weekday: Callable[[int], int]) -> int:
    """Quartz ``nW``: the weekday nearest to ``day`` without leaving the month."""
    wd = weekday(day)
    if wd == 6:  # Saturday: the Friday before, or the Monday after when that would leave the month
        return day - 1 if day > 1 else day + 2
    if wd == 7:  # Sunday: the Monday after, or the Friday before at the month's end
        return day + 1 if day < length else day - 2
    return day


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed cron expression; :meth:`next_after` gives the instants it fires at (equal: same rules)."""

    text: str = field(compare=False)
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: frozenset[int]
    days: _DayRules
    _month_cache: dict[tuple[int, int, int], tuple[int, ...]] = field(default_factory=dict, compare=False, repr=False)

    def next_after(self, epoch_ms: int) -> int | None:
        """The first matching whole second strictly after ``epoch_ms`` (epoch ms), or None if none ever comes."""
        start = epoch_ms // 1000 + 1
        day_index, second_of_day = divmod(start, 86_400)
        try:
            first = dt.date.fromordinal(_EPOCH_ORDINAL + day_index)
        except (ValueError, OverflowError):
            return None
        h, rest = divmod(second_of_day, 3600)
        m, s = divmod(rest, 60)
        year, month = first.year, first.month
        for _ in range(_SEARCH_MONTHS):
            if month in self.months:
                for day in self._days_of(year, month):
                    if (year, month) == (first.year, first.month) and day < first.day:
                        continue
                    same_day = (year, month, day) == (first.year, first.month, first.day)
                    found = self._time_from(h, m, s) if same_day else self._time_from(0, 0, 0)
                    if found is not None:
                        days = dt.date(year, month, day).toordinal() - _EPOCH_ORDINAL
                        return (days * 86_400 + found[0] * 3600 + found[1] * 60 + found[2]) * 1000
            month += 1
            if month > 12:
                year, month = year + 1, 1
                if year > dt.MAXYEAR:
                    return None
        return None

    def _days_of(self, year: int, month: int) -> tuple[int, ...]:
        first_weekday, length = calendar.monthrange(year, month)
        key = (month, length, first_weekday)
        days = self._month_cache.get(key)
        if days is None:
            days = self.days.days_in(length, first_weekday + 1)
            self._month_cache[key] = days
        return days

    def _time_from(self, h: int, m: int, s: int) -> tuple[int, int, int] | None:
        """The first matching (hour, minute, second) at or after ``h:m:s`` on a matching day."""
        for hour in self.hours[bisect.bisect_left(self.hours, h) :]:
            if hour > h:
                return hour, self.minutes[0], self.seconds[0]
            for minute in self.minutes[bisect.bisect_left(self.minutes, m) :]:
                if minute > m:
                    return hour, minute, self.seconds[0]
                i = bisect.bisect_left(self.seconds, s)
                if i < len(self.seconds):
                    return hour, minute, self.seconds[i]
        return None


def parse_cron(text: str) -> CronSchedule:
    """Parse a six-field cron expression or macro; :class:`CronError` names the field that is wrong and why."""
    expression = text.strip()
    if expression.startswith("@"):
        resolved = MACROS.get(expression.lower())
        if resolved is None:
            raise CronError(f"{_prefix(text)}unknown macro '{expression}'; use one of {', '.join(MACROS)}")
        expression = resolved
    parts = expression.split()
    if len(parts) != 6:
        raise CronError(
            f"{_prefix(text)}expected 6 fields (second minute hour day-of-month month day-of-week) or a macro "
            f"such as @daily, but found {len(parts)}"
        )
    parser = _FieldParser(text)
    seconds, minutes, hours = (tuple(sorted(parser.plain(i, parts[i]))) for i in range(3))
    months = frozenset(parser.plain(4, parts[4]))
    days = parser.days(parts[_DOM], parts[_DOW])
    return CronSchedule(text.strip(), seconds, minutes, hours, months, days)


def _prefix(text: str) -> str:
    return f"Invalid cron expression '{text.strip()}' for timer: "


class _FieldParser:
    """Field-by-field parsing that reports errors in terms of the field the person wrote."""

    def __init__(self, text: str) -> None:
        self.text = text

    def error(self, index: int, value: str, reason: str) -> CronError:
        return CronError(f"{_prefix(self.text)}{FIELDS[index]} field '{value}' {reason}")

    def plain(self, index: int, value: str) -> set[int]:
        """Values of a field made of numbers, names, ``*``, ranges, steps and lists."""
        result: set[int] = set()
        for item in value.split(","):
            result.update(self._item(index, value, item))
        return result

    def _item(self, index: int, value: str, item: str) -> range | list[int]:
        lowest, highest = _BOUNDS[index]
        if item == "":
            raise self.error(index, value, "has an empty list item")
        pattern, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not _is_number(step_text) or int(step_text) < 1:
                raise self.error(index, value, f"has step '{step_text}'; a step must be a whole number of 1 or more")
            step = int(step_text)
        if pattern == "*" or (pattern == "?" and index in (_DOM, _DOW)):
            first, last = lowest, highest
        elif pattern == "?":
            raise self.error(index, value, "uses '?', which is only allowed in day-of-month and day-of-week")
        elif "-" in pattern:
            start_text, _, end_text = pattern.partition("-")
            first, last = self._value(index, value, start_text), self._value(index, value, end_text)
            if index == _DOW and first == 7 and last < 7:
                first = 0  # SUN-SAT: Sunday as the first day of the week
            if first > last:
                raise self.error(index, value, f"has range '{pattern}' going backwards; write the smaller end first")
        else:
            first = self._value(index, value, pattern)
            last = highest if slash else first
        values = range(first, last + 1, step)
        if index == _DOW:
            return sorted({7 if v == 0 else v for v in values})
        return values

    def _value(self, index: int, value: str, token: str) -> int:
        lowest, highest = _BOUNDS[index]
        names = _MONTH_NAMES if index == 4 else _DAY_NAMES if index == _DOW else {}
        if token.upper() in names:
            return names[token.upper()]
        if not _is_number(token):
            hint = ""
            if _QUARTZ_TOKEN.fullmatch(token.upper()):
                hint = "; L, W and # are only allowed in day-of-month (L, L-n, LW, nW) and day-of-week (dL, d#n)"
            elif names:
                hint = f" or a name ({'-'.join((next(iter(names)), list(names)[-1]))})"
            raise self.error(index, value, f"has '{token}', which is not a number{hint}")
        number = int(token)
        if index == _DOW and number == 0:
            return 0
        if not lowest <= number <= highest:
            shown_low = 0 if index == _DOW else lowest
            raise self.error(index, value, f"has {number}, outside {shown_low}-{highest}")
        return number

    def days(self, dom: str, dow: str) -> _DayRules:
        """Day-of-month and day-of-week, each a list that may mix plain items with Quartz specials."""
        month_days: set[int] = set()
        offsets: list[int] = []
        nearest: list[int] = []
        last_weekday = False
        for item in dom.split(","):
            upper = item.upper()
            if upper == "L":
                offsets.append(0)
            elif upper.startswith("L-"):
                n = item[2:]
                if not _is_number(n) or not 1 <= int(n) <= 30:
                    raise self.error(_DOM, dom, f"has '{item}'; write L-n with n from 1 to 30 days before the last")
                offsets.append(int(n))
            elif upper == "LW":
                last_weekday = True
            elif upper.endswith("W") and _is_number(item[:-1]):
                day = int(item[:-1])
                if not 1 <= day <= 31:
                    raise self.error(_DOM, dom, f"has '{item}'; the day before W must be 1-31")
                nearest.append(day)
            elif "L" in upper or "W" in upper:
                raise self.error(_DOM, dom, f"has '{item}'; use L, L-n, LW or nW (e.g. 15W)")
            else:
                month_days.update(self._item(_DOM, dom, item))
        weekdays: set[int] = set()
        last_of: list[int] = []
        nth: list[tuple[int, int]] = []
        for item in dow.split(","):
            if "#" in item:
                day_text, _, n = item.partition("#")
                if not day_text or not _is_number(n) or not 1 <= int(n) <= 5:
                    raise self.error(_DOW, dow, f"has '{item}'; write d#n with a day and n from 1 to 5 (e.g. MON#2)")
                nth.append((self._weekday(dow, day_text), int(n)))
            elif item.upper().endswith("L") and len(item) > 1:
                last_of.append(self._weekday(dow, item[:-1]))
            elif item.upper() == "L":
                raise self.error(_DOW, dow, "has 'L' without a day; write dL for the month's last such day (e.g. 5L)")
            else:
                weekdays.update(self._item(_DOW, dow, item))
        return _DayRules(
            frozenset(month_days),
            tuple(offsets),
            last_weekday,
            tuple(nearest),
            frozenset(weekdays),
            tuple(last_of),
            tuple(nth),
        )

    def _weekday(self, value: str, token: str) -> int:
        day = self._value(_DOW, value, token)
        return 7 if day == 0 else day


def _is_number(text: str) -> bool:
    """Plain ASCII digits only: ``str.isdigit`` also accepts characters such as '²' that ``int`` refuses."""
    return text.isascii() and text.isdigit()
