"""Temporal values: parsing FEEL's ISO 8601 forms, arithmetic with durations, and value properties.

Arithmetic follows java.time, which the reference engine uses: adding a days-time duration to a zoned
date-time moves the instant (so a day across a DST change is 24 hours), adding months keeps the local
wall time and clamps the day to the month's end.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ._values import UTC, YearMonthDuration

_DATE_RE = re.compile(r"(-?\d{4,9})-(\d{2})-(\d{2})")
_TIME_RE = re.compile(
    r"(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?"
    r"(?:(?P<z>Z)|(?P<off>[+-]\d{2}:\d{2}(?::\d{2})?)|@(?P<zone>[A-Za-z0-9_+\-/]+))?"
)
#: Each component may carry its own sign (``PT-5M``, ``P-1Y-2M``), as Java's parsers allow.
_DURATION_RE = re.compile(
    r"(?P<sign>-)?P(?:(?P<y>-?\d+)Y)?(?:(?P<mo>-?\d+)M)?(?:(?P<w>-?\d+)W)?(?:(?P<d>-?\d+)D)?"
    r"(?:T(?:(?P<h>-?\d+)H)?(?:(?P<mi>-?\d+)M)?(?:(?P<s>-?\d+(?:\.\d+)?)S)?)?"
)


def parse_zone(text: str) -> dt.tzinfo | None:
    """A zone id (``Europe/Berlin``, ``UTC``, ``Z``) or offset (``+02:00``) as tzinfo; None if unknown."""
    if text in ("Z", "z"):
        return UTC
    if re.fullmatch(r"[+-]\d{2}:\d{2}", text):
        return _offset(text)
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def _offset(text: str) -> dt.tzinfo:
    sign = -1 if text[0] == "-" else 1
    parts = [int(p) for p in text[1:].split(":")]
    delta = dt.timedelta(hours=parts[0], minutes=parts[1], seconds=parts[2] if len(parts) > 2 else 0)
    return UTC if not delta else dt.timezone(sign * delta)


def parse_date(text: str) -> dt.date | None:
    """``YYYY-MM-DD`` to a date, or None."""
    match = _DATE_RE.fullmatch(text)
    if not match:
        return None
    try:
        return dt.date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None


def _time_parts(match: re.Match[str]) -> tuple[dt.time, dt.tzinfo | None] | None:
    hour, minute = int(match[1]), int(match[2])
    second = int(match[3] or 0)
    micro = int((match[4] or "0").ljust(6, "0")[:6])
    tz: dt.tzinfo | None = None
    if match["z"]:
        tz = UTC
    elif match["off"]:
        tz = _offset(match["off"])
    elif match["zone"]:
        tz = parse_zone(match["zone"])
        if tz is None:
            return None
    if hour == 24 and minute == 0 and second == 0 and micro == 0:
        hour = 0
    try:
        return dt.time(hour, minute, second, micro), tz
    except ValueError:
        return None


def parse_time(text: str) -> dt.time | None:
    """``HH:MM[:SS[.f]]`` with optional ``Z``, offset or ``@zone``; a leading ``T`` is tolerated."""
    if text.startswith("T"):
        text = text[1:]
    match = _TIME_RE.fullmatch(text)
    if not match:
        return None
    parts = _time_parts(match)
    if parts is None:
        return None
    time, tz = parts
    return time.replace(tzinfo=tz)


def parse_datetime(text: str) -> dt.datetime | None:
    """``YYYY-MM-DDTHH:MM:SS`` with optional offset or zone; a bare date means midnight. Java's zoned form
    ``...+02:00[Europe/Berlin]`` (or without the offset) is read as that instant in the named zone."""
    if text.endswith("]") and "[" in text:
        base, _, zone_id = text[:-1].rpartition("[")
        zone = parse_zone(zone_id)
        value = _parse_datetime(base) if zone is not None and "T" in base and "@" not in base else None
        if value is None or zone is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=zone)
        try:
            return value.astimezone(zone)
        except OverflowError:  # the instant falls outside the years a date-time can hold
            return None
    return _parse_datetime(text)


def _parse_datetime(text: str) -> dt.datetime | None:
    date_part, sep, time_part = text.partition("T")
    date = parse_date(date_part)
    if date is None:
        return None
    if not sep:
        return dt.datetime.combine(date, dt.time())
    match = _TIME_RE.fullmatch(time_part)
    if not match:
        return None
    parts = _time_parts(match)
    if parts is None:
        return None
    time, tz = parts
    return dt.datetime.combine(date, time).replace(tzinfo=tz)


def parse_duration(text: str) -> dt.timedelta | YearMonthDuration | None:
    """ISO 8601 duration: ``PnYnM`` gives a years-months duration, ``PnDTnHnMnS`` a days-time one."""
    match = _DURATION_RE.fullmatch(text)
    if not match or text.endswith(("P", "T")):
        return None
    sign = -1 if match["sign"] else 1
    has_ym = match["y"] is not None or match["mo"] is not None
    has_dt = any(match[g] is not None for g in ("w", "d", "h", "mi", "s"))
    if has_ym and has_dt:
        return None
    if has_ym:
        return YearMonthDuration(sign * (int(match["y"] or 0) * 12 + int(match["mo"] or 0)))
    seconds = Decimal(match["s"] or 0)
    whole = int(seconds)
    micro = int((seconds - whole) * 1_000_000)
    delta = dt.timedelta(
        weeks=int(match["w"] or 0),
        days=int(match["d"] or 0),
        hours=int(match["h"] or 0),
        minutes=int(match["mi"] or 0),
        seconds=whole,
        microseconds=micro,
    )
    return delta if sign > 0 else -delta


def parse_temporal_literal(text: str) -> Any:
    """The value of an ``@"..."`` literal: a date-time, date, time or duration, or None."""
    if text.startswith(("P", "-P")):
        return parse_duration(text)
    if "T" in text[1:]:
        return parse_datetime(text)
    if _DATE_RE.fullmatch(text):
        return parse_date(text)
    return parse_time(text)


# ----------------------------------------------------------------------------------------------------
# arithmetic


def add_months(value: dt.date | dt.datetime, months: int) -> Any:
    """Shift by calendar months, clamping the day (Jan 31 + 1 month = Feb 28/29)."""
    total = value.year * 12 + (value.month - 1) + months
    year, month = divmod(total, 12)
    month += 1
    if not 1 <= year <= 9999:
        raise OverflowError("date out of range")
    day = min(value.day, calendar.monthrange(year, month)[1])
    return value.replace(year=year, month=month, day=day)


def add_timedelta_to_datetime(value: dt.datetime, delta: dt.timedelta) -> dt.datetime:
    """Instant arithmetic for zoned values, wall-clock arithmetic for local ones."""
    tz = value.tzinfo
    if tz is None or not isinstance(tz, ZoneInfo):
        return value + delta
    return (value.astimezone(UTC) + delta).astimezone(tz)


def subtract_datetimes(a: dt.datetime, b: dt.datetime) -> dt.timedelta:
    """Elapsed time between two date-times of the same kind (instants when zoned)."""
    if a.tzinfo is not None:
        return a.astimezone(UTC) - b.astimezone(UTC)
    return a - b


def add_timedelta_to_time(value: dt.time, delta: dt.timedelta) -> dt.time:
    """Clock arithmetic that wraps around midnight."""
    anchor = dt.datetime.combine(dt.date(2000, 1, 1), value.replace(tzinfo=None)) + delta
    return anchor.time().replace(tzinfo=value.tzinfo)


def subtract_times(a: dt.time, b: dt.time) -> dt.timedelta:
    """Duration from ``b`` to ``a`` on the same day, honouring fixed offsets."""
    day = dt.date(2000, 1, 1)
    return dt.datetime.combine(day, a) - dt.datetime.combine(day, b)


def timedelta_micros(delta: dt.timedelta) -> int:
    """Exact length in microseconds."""
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def micros_to_timedelta(micros: int) -> dt.timedelta:
    """Inverse of :func:`timedelta_micros`."""
    return dt.timedelta(microseconds=micros)


# ----------------------------------------------------------------------------------------------------
# properties


def _seconds_value(value: dt.time | dt.datetime) -> int | Decimal:
    if value.microsecond:
        return Decimal(value.second) + Decimal(value.microsecond) / Decimal(1_000_000)
    return value.second


def _zone_id(value: dt.time | dt.datetime) -> str | None:
    tz = value.tzinfo
    if isinstance(tz, ZoneInfo):
        return tz.key
    return None


#: A zoned time has no date; its offset is taken on this fixed day so results never depend on the clock.
_ZONED_TIME_DAY = dt.date(2000, 1, 1)


def _offset_of(value: dt.time | dt.datetime) -> dt.timedelta | None:
    if value.tzinfo is None:
        return None
    if isinstance(value, dt.datetime):
        return value.utcoffset()
    if isinstance(value.tzinfo, ZoneInfo):
        return value.tzinfo.utcoffset(dt.datetime.combine(_ZONED_TIME_DAY, value.replace(tzinfo=None)))
    return value.utcoffset()


def _dt_duration_parts(value: dt.timedelta) -> dict[str, Any]:
    micros = timedelta_micros(value)
    sign = -1 if micros < 0 else 1
    micros = abs(micros)
    seconds, micro = divmod(micros, 1_000_000)
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    secs: int | Decimal = seconds if not micro else Decimal(seconds) + Decimal(micro) / Decimal(1_000_000)
    return {"days": sign * days, "hours": sign * hours, "minutes": sign * minutes, "seconds": sign * secs}


def temporal_properties(value: Any) -> dict[str, Any] | None:
    """The named properties of a temporal value (``year``, ``hour``, ``time offset``...), or None."""
    t = type(value)
    if t is dt.date:
        return {
            "year": value.year,
            "month": value.month,
            "day": value.day,
            "weekday": value.isoweekday(),
        }
    if t is dt.datetime:
        return {
            "year": value.year,
            "month": value.month,
            "day": value.day,
            "weekday": value.isoweekday(),
            "hour": value.hour,
            "minute": value.minute,
            "second": _seconds_value(value),
            "time offset": _offset_of(value),
            "timezone": _zone_id(value),
        }
    if t is dt.time:
        return {
            "hour": value.hour,
            "minute": value.minute,
            "second": _seconds_value(value),
            "time offset": _offset_of(value),
            "timezone": _zone_id(value),
        }
    if t is dt.timedelta:
        return _dt_duration_parts(value)
    if t is YearMonthDuration:
        return {"years": value.years, "months": int(value.months - 12 * value.years)}
    return None
