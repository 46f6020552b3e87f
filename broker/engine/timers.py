"""Timer definitions to due dates: ISO 8601 durations, dates, repeating intervals (``R5/PT10S``) and cron cycles.

The engine evaluates a timer's attribute (static text or a FEEL expression) when the timer is created and turns the
result into a :class:`Schedule`: the first due date plus how often and how many times it repeats. Everything is
computed from the command's timestamp, never from the wall clock, so replay and processing agree.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from typing import Any

from broker.engine import cron
from broker.feel._temporal import add_months, parse_datetime, parse_duration
from broker.feel._values import YearMonthDuration
from broker.protocol.entity_values import TimerValue

INFINITE = -1
_UTC = dt.UTC


class TimerError(ValueError):
    """The timer's value is not a duration, date or cycle; the message says what was given."""


@dataclass(frozen=True, slots=True)
class Interval:
    """A duration that may count calendar months (added to a date) and/or exact time."""

    months: int = 0
    delta: dt.timedelta = dt.timedelta(0)

    def add_to(self, epoch_ms: int) -> int:
        moment = dt.datetime.fromtimestamp(epoch_ms / 1000, tz=_UTC)
        if self.months:
            moment = add_months(moment, self.months)
        moment = moment + self.delta
        return _to_ms(moment)

    def is_positive(self) -> bool:
        return self.months > 0 or (self.months == 0 and self.delta > dt.timedelta(0))


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a timer is first due and, for cycles, the interval or cron expression and remaining repetitions.

    A cron cycle (``cron`` set) repeats forever (-1), like Zeebe's; each next due date is its next match after the
    firing, not a fixed interval later.
    """

    due_date: int
    repetitions: int = 1
    interval: Interval | None = None
    cron: str | None = None

    def next(self, now: int) -> Schedule | None:
        """The schedule after one firing at ``now``, or None when this was the last repetition."""
        if self.cron is not None:
            due = _cron(self.cron).next_after(now)
            return None if due is None else Schedule(due, INFINITE, None, self.cron)
        if self.interval is None or self.repetitions == 1 or self.repetitions == 0:
            return None
        remaining = INFINITE if self.repetitions == INFINITE else self.repetitions - 1
        return Schedule(self.interval.add_to(now), remaining, self.interval)


def _to_ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def parse_interval(text: str) -> Interval:
    parsed = parse_duration(text.strip())
    if parsed is None:
        raise TimerError(f"Invalid duration format '{text}' for timer")
    return _interval(parsed, text)


def _interval(value: Any, text: str) -> Interval:
    if isinstance(value, YearMonthDuration):
        interval = Interval(months=value.months)
    elif isinstance(value, dt.timedelta):
        interval = Interval(delta=value)
    else:
        raise TimerError(f"Invalid duration format '{text}' for timer")
    if not interval.is_positive():
        raise TimerError(f"Expected a positive duration for the timer, but got '{text}'")
    return interval


def parse_date(text: str) -> int:
    """An ISO 8601 date-time (a missing offset means UTC) as epoch milliseconds."""
    moment = parse_datetime(text.strip())
    if moment is None:
        raise TimerError(f"Invalid date-time format '{text}' for timer")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_UTC)
    return _to_ms(moment)


@functools.lru_cache(maxsize=256)
def _cron(text: str) -> cron.CronSchedule:
    """Parsed once per expression: a repeating cron timer is rescheduled from its text at every firing."""
    try:
        return cron.parse_cron(text)
    except cron.CronError as e:
        raise TimerError(str(e)) from e


def parse_cron_cycle(text: str, now: int) -> Schedule:
    """A cron cycle (``0 0 9-17 * * MON-FRI``, ``@daily``): forever, first due at its first match after ``now``."""
    expression = text.strip()
    due = _cron(expression).next_after(now)
    if due is None:
        raise TimerError(
            f"Invalid cron expression '{expression}' for timer: it never matches a date "
            "(check the day-of-month, month and day-of-week fields, e.g. February 30)"
        )
    return Schedule(due, INFINITE, None, expression)


def parse_cycle(text: str, now: int) -> Schedule:
    """``R[n]/[start/]duration``: n repetitions (forever without n), the first one after ``start`` or now; or cron."""
    if not text.strip().startswith("R") and cron.looks_like_cron(text):
        return parse_cron_cycle(text, now)
    parts = text.strip().split("/")
    if len(parts) not in (2, 3) or not parts[0].startswith("R"):
        raise TimerError(
            f"Invalid time cycle format '{text}' for timer; expected e.g. 'R5/PT10S' or a cron expression "
            "such as '0 0 9-17 * * MON-FRI'"
        )
    count = parts[0][1:]
    if count == "":
        repetitions = INFINITE
    elif count.isdigit():
        repetitions = int(count)
    else:
        raise TimerError(f"Invalid repetitions '{parts[0]}' in time cycle '{text}'")
    interval = parse_interval(parts[-1])
    if len(parts) == 3:
        start = parse_date(parts[1])
        due = start if start > now else interval.add_to(now)
    else:
        due = interval.add_to(now)
    return Schedule(due, repetitions, interval)


def schedule(kind: str, value: Any, now: int) -> Schedule:
    """The schedule of a timer of ``kind`` (duration, date, cycle) whose attribute evaluated to ``value``.

    ``value`` is what the expression gave: ISO text, or a FEEL duration / date-time.
    """
    if kind == "duration":
        if isinstance(value, dt.timedelta | YearMonthDuration):
            return Schedule(_interval(value, str(value)).add_to(now))
        return Schedule(parse_interval(_text(value, kind)).add_to(now))
    if kind == "date":
        if isinstance(value, dt.datetime):
            moment = value if value.tzinfo is not None else value.replace(tzinfo=_UTC)
            return Schedule(_to_ms(moment))
        return Schedule(parse_date(_text(value, kind)))
    if kind == "cycle":
        if isinstance(value, dt.timedelta | YearMonthDuration):
            interval = _interval(value, str(value))
            return Schedule(interval.add_to(now), INFINITE, interval)
        return parse_cycle(_text(value, kind), now)
    raise TimerError(f"Unknown timer kind '{kind}'")


def _text(value: Any, kind: str) -> str:
    if not isinstance(value, str):
        raise TimerError(f"Expected the timer {kind} to be a string, but got '{value!r}'")
    return value


def serialize(s: Schedule) -> dict[str, Any]:
    """The parts of a schedule a timer record keeps, so a repeating timer can be rescheduled later."""
    if s.cron is not None:
        return {"cron": s.cron}
    if s.interval is None:
        return {}
    return {"intervalMonths": s.interval.months, "intervalMs": int(s.interval.delta / dt.timedelta(milliseconds=1))}


def from_record(timer: dict[str, Any]) -> Schedule:
    """The schedule of a stored timer record (see :func:`serialize`)."""
    interval = None
    if "intervalMonths" in timer or "intervalMs" in timer:
        interval = Interval(timer.get("intervalMonths", 0), dt.timedelta(milliseconds=timer.get("intervalMs", 0)))
    return Schedule(timer["dueDate"], timer.get("repetitions", 1), interval, timer.get("cron"))


def repeating_parts(s: Schedule) -> tuple[str | None, int | None, int | None]:
    """``(cron, interval months, interval ms)`` of a schedule, as a TIMER record keeps them (see :func:`serialize`)."""
    if s.cron is not None:
        return s.cron, None, None
    if s.interval is None:
        return None, None, None
    return None, s.interval.months, int(s.interval.delta / dt.timedelta(milliseconds=1))


def schedule_of(timer: TimerValue) -> Schedule:
    """The schedule of a timer record's value (see :func:`repeating_parts`)."""
    interval = None
    if timer.interval_months is not None or timer.interval_ms is not None:
        interval = Interval(timer.interval_months or 0, dt.timedelta(milliseconds=timer.interval_ms or 0))
    return Schedule(timer.due_date, timer.repetitions, interval, timer.cron)
