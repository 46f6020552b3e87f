"""FEEL value model: the Python types that stand for FEEL values, and how they compare and print.

FEEL values are plain Python values so that results need no unwrapping:

- null -> ``None``; boolean -> ``bool``; string -> ``str``
- number -> ``int`` or ``decimal.Decimal`` (floats from JSON are turned into ``Decimal`` on the way in)
- date -> ``datetime.date``; time -> ``datetime.time``; date and time -> ``datetime.datetime``
- days and time duration -> ``datetime.timedelta``; years and months duration -> :class:`YearMonthDuration`
- list -> ``list``; context -> ``dict`` with ``str`` keys; range -> :class:`FeelRange`;
  function -> :class:`FeelFunction`
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Context, Decimal
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from ._runtime import Env

#: Steps one list item or context entry costs when read in Python (compared, searched, tested).
READ_STEPS = 2

#: Arithmetic context of FEEL numbers: 34 significant digits, like IEEE 754 decimal128.
DECIMAL_CONTEXT = Context(prec=34, rounding=ROUND_HALF_EVEN, Emin=-999999, Emax=999999)

UTC = dt.UTC


@dataclass(frozen=True, order=True, slots=True)
class YearMonthDuration:
    """A calendar duration counted in whole months; ``str()`` gives the ISO 8601 form (``P1Y2M``, zero ``P0Y``)."""

    months: int

    def __str__(self) -> str:
        total = abs(self.months)
        years, months = divmod(total, 12)
        sign = "-" if self.months < 0 else ""
        if years and months:
            return f"{sign}P{years}Y{months}M"
        if years:
            return f"{sign}P{years}Y"
        if months:
            return f"{sign}P{months}M"
        return "P0Y"  # feel-scala's form of the zero years-months duration

    @property
    def years(self) -> int:
        """Normalized whole years (sign kept)."""
        return int(self.months / 12)


@dataclass(frozen=True, slots=True)
class FeelRange:
    """A FEEL range such as ``[1..10)``; an endpoint of ``None`` means unbounded on that side."""

    start: Any
    end: Any
    start_included: bool
    end_included: bool

    def __str__(self) -> str:
        left = "[" if self.start_included else "("
        right = "]" if self.end_included else ")"
        start = "" if self.start is None else to_feel_string(self.start, quoted=True)
        end = "" if self.end is None else to_feel_string(self.end, quoted=True)
        return f"{left}{start}..{end}{right}"


class FeelFunction:
    """A FEEL function value: a user-defined lambda or a built-in taken as a value.

    ``impl(env, args)`` receives evaluated positional arguments already ordered as ``params``.
    """

    __slots__ = ("impl", "name", "params")

    def __init__(self, params: Sequence[str], impl: Callable[[Env, list[Any]], Any], name: str = "") -> None:
        self.params = tuple(params)
        self.impl = impl
        self.name = name

    def __repr__(self) -> str:
        return f"function({', '.join(self.params)})"


class _Missing:
    """Sentinel for an absent variable or context entry (distinct from a present ``None``)."""

    __slots__ = ()


MISSING: Any = _Missing()

# ----------------------------------------------------------------------------------------------------
# kinds

NULL, BOOL, NUMBER, STRING, DATE, TIME, DATETIME, DT_DURATION, YM_DURATION = range(9)
LIST, CONTEXT, RANGE, FUNCTION, OTHER = range(9, 14)

KIND_OF_TYPE: dict[type, int] = {
    type(None): NULL,
    bool: BOOL,
    int: NUMBER,
    Decimal: NUMBER,
    str: STRING,
    dt.date: DATE,
    dt.time: TIME,
    dt.datetime: DATETIME,
    dt.timedelta: DT_DURATION,
    YearMonthDuration: YM_DURATION,
    list: LIST,
    dict: CONTEXT,
    FeelRange: RANGE,
    FeelFunction: FUNCTION,
}

KIND_NAMES = {
    NULL: "null",
    BOOL: "boolean",
    NUMBER: "number",
    STRING: "string",
    DATE: "date",
    TIME: "time",
    DATETIME: "date and time",
    DT_DURATION: "days and time duration",
    YM_DURATION: "years and months duration",
    LIST: "list",
    CONTEXT: "context",
    RANGE: "range",
    FUNCTION: "function",
    OTHER: "unknown",
}


def kind_of(value: Any) -> int:
    """The FEEL kind of an internal value (``OTHER`` for foreign objects)."""
    return KIND_OF_TYPE.get(type(value), OTHER)


def type_name(value: Any) -> str:
    """The FEEL type name used in messages and by ``instance of``."""
    return KIND_NAMES[kind_of(value)]


def is_number(value: Any) -> bool:
    """True for FEEL numbers; ``bool`` is excluded although it subclasses ``int``."""
    t = type(value)
    return t is int or t is Decimal


# ----------------------------------------------------------------------------------------------------
# conversion between host (JSON-like) values and internal values


def from_host(value: Any) -> Any:
    """Turn a host value (JSON-decoded, or a Python temporal) into a FEEL value.

    Floats become ``Decimal`` through their shortest repr, so ``0.1`` stays ``0.1``; tuples become lists;
    NaN and infinities become null, as FEEL has no such numbers.
    """
    t = type(value)
    if t is str or t is int or t is bool or value is None or t is Decimal:
        return value
    if t is float:
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return Decimal(repr(value))
    if t is list or t is tuple:
        return [from_host(item) for item in value]
    if t is dict or isinstance(value, Mapping):
        return {str(key): from_host(item) for key, item in value.items()}
    if isinstance(value, int):  # int subclasses such as IntEnum
        return int(value)
    return value


#: Whole numbers with more digits stay ``Decimal``: turning ``1E+99999`` into an int takes seconds.
MAX_INT_DIGITS = 4000


def to_host(value: Any) -> Any:
    """Turn a FEEL value into the public result form: integral ``Decimal`` becomes ``int``.

    The rule keeps results JSON-friendly: a whole number is always an ``int`` (up to ``MAX_INT_DIGITS``
    digits); a fraction stays a ``Decimal`` so no precision is lost.
    """
    t = type(value)
    if t is Decimal:
        if value.is_finite() and value.adjusted() < MAX_INT_DIGITS and value == value.to_integral_value():
            return int(value)
        return value
    if t is list:
        return [to_host(item) for item in value]
    if t is dict:
        return {key: to_host(item) for key, item in value.items()}
    if t is FeelRange:
        return FeelRange(to_host(value.start), to_host(value.end), value.start_included, value.end_included)
    return value


# ----------------------------------------------------------------------------------------------------
# rendering


def format_number(value: int | Decimal) -> str:
    """Plain decimal notation without exponent, as FEEL prints numbers."""
    if type(value) is int:
        return str(value)
    text = format(value, "f")
    return "0" if text == "-0" else text


def _format_fraction(micro: int) -> str:
    if not micro:
        return ""
    text = f"{micro:06d}"
    return "." + (text[:3] if text.endswith("000") else text)


def format_offset(offset: dt.timedelta) -> str:
    """``Z`` for UTC, otherwise ``+HH:MM`` (with seconds when present)."""
    if not offset:
        return "Z"
    seconds = int(offset.total_seconds())
    sign = "+" if seconds >= 0 else "-"
    seconds = abs(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}"
    return text + (f":{secs:02d}" if secs else "")


def format_zone(tz: dt.tzinfo | None, at: dt.datetime | None) -> str:
    """The zone suffix of a time or date-time: ``@Region/City`` for named zones, else the offset."""
    if tz is None:
        return ""
    if isinstance(tz, ZoneInfo):
        return f"@{tz.key}"
    offset = tz.utcoffset(at)
    return "" if offset is None else format_offset(offset)


def format_time(value: dt.time) -> str:
    """``HH:MM:SS[.fff]`` plus offset or zone."""
    base = f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}{_format_fraction(value.microsecond)}"
    return base + format_zone(value.tzinfo, None)


def format_datetime(value: dt.datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS[.fff]`` plus offset or zone."""
    return f"{format_date(value.date())}T" + format_time(value.time()) + format_zone(value.tzinfo, value)


def format_date(value: dt.date) -> str:
    """``YYYY-MM-DD``."""
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


def format_dt_duration(value: dt.timedelta) -> str:
    """ISO 8601 days-time form, e.g. ``P1DT2H30M``; zero is ``P0D``."""
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, micro = divmod(micros, 1_000_000)
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    text = f"{sign}P"
    if days:
        text += f"{days}D"
    time_part = ""
    if hours:
        time_part += f"{hours}H"
    if minutes:
        time_part += f"{minutes}M"
    if seconds or micro:
        time_part += f"{seconds}{_format_fraction(micro).rstrip('0')}S"
    if time_part:
        text += "T" + time_part
    elif not days:
        return "P0D"  # feel-scala's form of the zero days-time duration
    return text


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _format_key(key: str) -> str:
    if key.isidentifier():
        return key
    return _quote(key)


def to_feel_string(value: Any, quoted: bool = False) -> str:
    """Render a value as FEEL's ``string()`` does; nested strings are quoted."""
    t = type(value)
    if value is None:
        return "null"
    if t is bool:
        return "true" if value else "false"
    if t is int or t is Decimal:
        return format_number(value)
    if t is str:
        return _quote(value) if quoted else value
    if t is dt.date:
        return format_date(value)
    if t is dt.datetime:
        return format_datetime(value)
    if t is dt.time:
        return format_time(value)
    if t is dt.timedelta:
        return format_dt_duration(value)
    if t is YearMonthDuration or t is FeelRange:
        return str(value)
    if t is list:
        return "[" + ", ".join(to_feel_string(item, True) for item in value) + "]"
    if t is dict:
        entries = ", ".join(f"{_format_key(k)}:{to_feel_string(v, True)}" for k, v in value.items())
        return "{" + entries + "}"
    if t is FeelFunction:
        return repr(value)
    return str(value)


def rendered_size(value: Any, limit: int) -> int:
    """About how many characters ``to_feel_string`` or JSON would make of ``value``; stops counting past ``limit``.

    Checked before rendering, because a list holding one big string many times renders far larger than the
    data it occupies.
    """
    total = 0
    pending = [value]
    while pending and total <= limit:
        item = pending.pop()
        t = type(item)
        if t is str:
            total += len(item) + 2
        elif t is list:
            total += 2 + 2 * len(item)
            pending.extend(item)
        elif t is dict:
            total += 2 + 4 * len(item)
            for key, entry in item.items():
                total += len(key)
                pending.append(entry)
        elif t is int:
            total += 2 + item.bit_length() * 3 // 10
        elif t is Decimal:
            total += 40 + (abs(item.adjusted()) if item.is_finite() else 0)
        else:
            total += 40
    return total


def describe(value: Any) -> str:
    """A short rendering for warnings: strings quoted, long values cut.

    Only the start of a big value is rendered: a warning inside a loop over a large list must not cost a
    rendering of the whole list per iteration.
    """
    text = _render_prefix(value, 61)
    return text if len(text) <= 60 else text[:57] + "..."


def _render_prefix(value: Any, limit: int) -> str:
    """``to_feel_string(value, True)`` when that is at most ``limit`` long, else a longer prefix of it."""
    t = type(value)
    if t is str:
        return _quote(value) if len(value) <= limit else '"' + _quote(value[:limit])[1:-1]
    if t is list or t is dict:
        text = "[" if t is list else "{"
        items = value if t is list else value.items()
        for index, item in enumerate(items):
            if len(text) > limit:
                return text
            if index:
                text += ", "
            if t is list:
                text += _render_prefix(item, limit)
            else:
                text += f"{_format_key(item[0])}:{_render_prefix(item[1], limit)}"
        return text + ("]" if t is list else "}")
    return to_feel_string(value, quoted=True)


# ----------------------------------------------------------------------------------------------------
# equality and ordering


def _temporal_comparable(a: Any, b: Any) -> bool:
    """Naive and aware times/date-times cannot be compared (FEEL keeps local and zoned apart)."""
    return (a.tzinfo is None) == (b.tzinfo is None)


def values_equal(a: Any, b: Any, env: Env | None = None, budget: Env | None = None) -> bool | None:
    """FEEL ``=``: ``None`` (null) when the values are of different types, which FEEL cannot compare.

    - ``env`` receives warnings about incomparable values (and is charged like ``budget``)
    - ``budget`` is charged for every list item and context entry compared, at every depth
    """
    if a is None or b is None:
        return a is None and b is None
    ka = KIND_OF_TYPE.get(type(a), OTHER)
    kb = KIND_OF_TYPE.get(type(b), OTHER)
    if ka != kb:
        if env is not None:
            env.warn(f"Can't compare {describe(a)} with {describe(b)}")
        return None
    if ka == LIST:
        if len(a) != len(b):
            return False
        meter = env if env is not None else budget
        if meter is not None:
            meter.spend(READ_STEPS * len(a))
        return all(values_equal(x, y, None, meter) is True for x, y in zip(a, b, strict=True))
    if ka == CONTEXT:
        if a.keys() != b.keys():
            return False
        meter = env if env is not None else budget
        if meter is not None:
            meter.spend(READ_STEPS * len(a))
        return all(values_equal(a[key], b[key], None, meter) is True for key in a)
    if ka in (TIME, DATETIME) and not _temporal_comparable(a, b):
        if env is not None:
            env.warn(f"Can't compare {describe(a)} with {describe(b)}")
        return None
    if ka == TIME and a.tzinfo is not None:
        return _time_key(a) == _time_key(b)
    if ka == RANGE:
        return (
            a.start_included == b.start_included
            and a.end_included == b.end_included
            and values_equal(a.start, b.start) is True
            and values_equal(a.end, b.end) is True
        )
    return bool(a == b)


_ORDERED_KINDS = frozenset({NUMBER, STRING, DATE, TIME, DATETIME, DT_DURATION, YM_DURATION})


def _time_key(value: dt.time) -> Any:
    """Times with an offset are ordered by their UTC instant on a common day."""
    if value.tzinfo is None:
        return value
    return dt.datetime.combine(dt.date(2000, 1, 1), value).astimezone(UTC)


def compare(a: Any, b: Any, env: Env | None = None) -> int | None:
    """Order two values: -1, 0 or 1, or ``None`` (with a warning) when they are not comparable."""
    ka = KIND_OF_TYPE.get(type(a), OTHER)
    kb = KIND_OF_TYPE.get(type(b), OTHER)
    if ka != kb or ka not in _ORDERED_KINDS or (ka in (TIME, DATETIME) and not _temporal_comparable(a, b)):
        if env is not None:
            env.warn(f"Can't compare {describe(a)} with {describe(b)}")
        return None
    if ka == TIME:
        a, b = _time_key(a), _time_key(b)
    if a < b:
        return -1
    return 1 if a > b else 0


def is_comparable_point(value: Any) -> bool:
    """True for values that can be range endpoints."""
    return KIND_OF_TYPE.get(type(value), OTHER) in _ORDERED_KINDS
