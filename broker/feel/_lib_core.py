"""Built-ins for conversion, booleans and contexts, plus the deterministic Camunda extensions."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from ._registry import ArgumentError, arg_bool, arg_ctx, arg_int, arg_list, arg_num, arg_str, builtin, present
from ._runtime import Env, FeelEvaluationError
from ._temporal import parse_date, parse_datetime, parse_duration, parse_time, parse_zone
from ._values import (
    KIND_OF_TYPE,
    OTHER,
    UTC,
    FeelFunction,
    FeelRange,
    YearMonthDuration,
    describe,
    from_host,
    kind_of,
    rendered_size,
    to_feel_string,
    to_host,
    values_equal,
)

# -- conversion ---------------------------------------------------------------------------------------


@builtin("string", "from")
def _string(env: Env, value: Any) -> str | None:
    if value is None:
        return None
    if type(value) is list or type(value) is dict:
        env.admit(value)  # first, as it takes one visit per distinct value: a value shared many times is cheap
        env.ensure_room(rendered_size(value, env.size_left))
    return to_feel_string(value)


_NUMBER_RE = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


@builtin("number", "from, grouping separator?, decimal separator?")
def _number(env: Env, text: Any, grouping: Any = None, decimal_sep: Any = None) -> Decimal | int | None:
    text = arg_str(text)
    if present(grouping) and grouping is not None:
        if arg_str(grouping) not in (" ", ",", "."):
            raise ArgumentError("grouping separator must be one of ' ', ',', '.'")
        text = text.replace(grouping, "")
    if present(decimal_sep) and decimal_sep is not None:
        if arg_str(decimal_sep) not in (",", ".") or decimal_sep == grouping:
            raise ArgumentError("decimal separator must be ',' or '.' and differ from the grouping separator")
        text = text.replace(decimal_sep, ".")
    if not _NUMBER_RE.fullmatch(text):
        raise ArgumentError(f"can't parse '{text}' as a number")
    try:
        return Decimal(text)
    except InvalidOperation as error:
        raise ArgumentError(f"can't parse '{text}' as a number") from error


@builtin("date", "from")
def _date(env: Env, value: Any) -> dt.date | None:
    t = type(value)
    if t is str:
        result = parse_date(value)
        if result is None:
            raise ArgumentError(f"can't parse '{value}' as a date")
        return result
    if t is dt.datetime:
        return value.date()
    if t is dt.date:
        return value
    raise ArgumentError(f"expected string or date but found {describe(value)}")


@builtin("date", "year, month, day")
def _date_of(env: Env, year: Any, month: Any, day: Any) -> dt.date:
    return dt.date(arg_int(year), arg_int(month), arg_int(day))


@builtin("time", "from")
def _time(env: Env, value: Any) -> dt.time | None:
    t = type(value)
    if t is str:
        result = parse_time(value)
        if result is None:
            raise ArgumentError(f"can't parse '{value}' as a time")
        return result
    if t is dt.datetime:
        return value.timetz()
    if t is dt.time:
        return value
    if t is dt.date:
        return dt.time(0, 0, tzinfo=UTC)
    raise ArgumentError(f"expected string or date and time but found {describe(value)}")


@builtin("time", "hour, minute, second, offset?")
def _time_of(env: Env, hour: Any, minute: Any, second: Any, offset: Any = None) -> dt.time:
    seconds = Decimal(arg_num(second))
    whole = int(seconds)
    micro = int((seconds - whole) * 1_000_000)
    tz: dt.tzinfo | None = None
    if present(offset) and offset is not None:
        if type(offset) is not dt.timedelta:
            raise ArgumentError("offset must be a days and time duration")
        tz = UTC if not offset else dt.timezone(offset)
    return dt.time(arg_int(hour), arg_int(minute), whole, micro, tzinfo=tz)


@builtin("date and time", "from")
def _date_and_time(env: Env, value: Any) -> dt.datetime:
    t = type(value)
    if t is str:
        result = parse_datetime(value)
        if result is None:
            raise ArgumentError(f"can't parse '{value}' as a date and time")
        return result
    if t is dt.datetime:
        return value
    if t is dt.date:
        return dt.datetime.combine(value, dt.time())
    raise ArgumentError(f"expected string but found {describe(value)}")


@builtin("date and time", "date, time")
def _date_and_time_of(env: Env, date: Any, time: Any) -> dt.datetime:
    if type(date) not in (dt.date, dt.datetime):
        raise ArgumentError("date must be a date or date and time")
    day = date.date() if type(date) is dt.datetime else date
    if type(time) is dt.time:
        return dt.datetime.combine(day, time)
    if type(time) is str and type(date) is dt.datetime:
        return _with_zone(date, time)
    raise ArgumentError("time must be a time")


def _with_zone(value: dt.datetime, zone_id: str) -> dt.datetime:
    zone = parse_zone(zone_id)
    if zone is None:
        raise ArgumentError(f"unknown time zone '{zone_id}'")
    if value.tzinfo is None:
        return value.replace(tzinfo=zone)
    return value.astimezone(zone)


@builtin("date and time", "date, timezone")
def _date_and_time_zone(env: Env, date: Any, zone: Any) -> dt.datetime:
    if type(date) is not dt.datetime:
        raise ArgumentError("date must be a date and time")
    return _with_zone(date, arg_str(zone))


@builtin("duration", "from")
def _duration(env: Env, text: Any) -> Any:
    result = parse_duration(arg_str(text))
    if result is None:
        raise ArgumentError(f"can't parse '{text}' as a duration")
    return result


def _as_date(value: Any) -> dt.date:
    if type(value) is dt.datetime:
        return value.date()
    if type(value) is dt.date:
        return value
    raise ArgumentError("expected date or date and time")


@builtin("years and months duration", "from, to")
def _years_and_months(env: Env, start: Any, end: Any) -> YearMonthDuration:
    a, b = _as_date(start), _as_date(end)
    months = (b.year - a.year) * 12 + (b.month - a.month)
    if months > 0 and b.day < a.day:
        months -= 1
    elif months < 0 and b.day > a.day:
        months += 1
    return YearMonthDuration(months)


@builtin("context", "entries")
def _context(env: Env, entries: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for entry in arg_list(entries):
        if type(entry) is not dict or "key" not in entry or "value" not in entry:
            raise ArgumentError("each entry must be a context with 'key' and 'value'")
        result[arg_str(entry["key"])] = entry["value"]
    return result


@builtin("to json", "value")
def _to_json(env: Env, value: Any) -> str:
    env.admit(value)
    env.ensure_room(rendered_size(value, env.size_left))
    return json.dumps(_jsonable(to_host(value)), separators=(",", ":"), ensure_ascii=False)


def _jsonable(value: Any) -> Any:
    t = type(value)
    if t is Decimal:
        return float(value)
    if t is list:
        return [_jsonable(v) for v in value]
    if t is dict:
        return {k: _jsonable(v) for k, v in value.items()}
    if t in (dt.date, dt.time, dt.datetime, dt.timedelta, YearMonthDuration, FeelRange):
        return to_feel_string(value)
    if t is FeelFunction:
        raise ArgumentError("a function can't be converted to JSON")
    return value


@builtin("from json", "value")
def _from_json(env: Env, text: Any) -> Any:
    try:
        return from_host(json.loads(arg_str(text), parse_float=Decimal))
    except json.JSONDecodeError as error:
        raise ArgumentError(f"invalid JSON: {error.msg}") from error


# -- boolean ------------------------------------------------------------------------------------------


@builtin("not", "negand")
def _not(env: Env, value: Any) -> bool | None:
    if type(value) is bool:
        return not value
    return None


@builtin("is defined", "value")
def _is_defined(env: Env, value: Any) -> bool:
    return value is not None


@builtin("get or else", "value, default")
def _get_or_else(env: Env, value: Any, default: Any) -> Any:
    return default if value is None else value


@builtin("assert", "value, condition, cause?")
def _assert(env: Env, value: Any, condition: Any, cause: Any = None) -> Any:
    if condition is True:
        return value
    if present(cause) and cause is not None:
        raise FeelEvaluationError(f"Assertion failure: {to_feel_string(cause)}")
    raise FeelEvaluationError("Assertion failure on evaluate the expression")


@builtin("is", "value1, value2")
def _is(env: Env, a: Any, b: Any) -> bool:
    if KIND_OF_TYPE.get(type(a), OTHER) != KIND_OF_TYPE.get(type(b), OTHER):
        return False
    if type(a) in (dt.time, dt.datetime):
        return bool(a == b and a.tzinfo == b.tzinfo)
    return values_equal(a, b, None, env) is True


# -- context ------------------------------------------------------------------------------------------


@builtin("get value", "context, key")
@builtin("get value", "context, keys")  # feel-scala names the key path ``keys``
def _get_value(env: Env, context: Any, key: Any) -> Any:
    current: Any = arg_ctx(context)
    keys = [arg_str(k) for k in key] if type(key) is list else [arg_str(key)]
    if not keys:
        return None
    for name in keys:
        if type(current) is not dict or name not in current:
            return None
        current = current[name]
    return current


@builtin("get value", "m, key")
def _get_value_m(env: Env, context: Any, key: Any) -> Any:
    return _get_value(env, context, key)


@builtin("get entries", "context")
def _get_entries(env: Env, context: Any) -> list[dict[str, Any]]:
    return [{"key": k, "value": v} for k, v in arg_ctx(context).items()]


@builtin("get entries", "m")
def _get_entries_m(env: Env, context: Any) -> list[dict[str, Any]]:
    return _get_entries(env, context)


def _put_path(context: dict[str, Any], keys: list[str], value: Any) -> dict[str, Any]:
    result = dict(context)
    head = keys[0]
    if len(keys) == 1:
        result[head] = value
    else:
        inner = result.get(head)
        result[head] = _put_path(inner if type(inner) is dict else {}, keys[1:], value)
    return result


@builtin("context put", "context, key, value")
@builtin("context put", "context, keys, value")  # feel-scala names the key path ``keys``
def _context_put(env: Env, context: Any, key: Any, value: Any) -> dict[str, Any] | None:
    keys = [arg_str(k) for k in key] if type(key) is list else [arg_str(key)]
    if not keys:
        return None
    return _put_path(arg_ctx(context), keys, value)


@builtin("put", "context, key, value")
def _put(env: Env, context: Any, key: Any, value: Any) -> dict[str, Any] | None:
    return _context_put(env, context, key, value)


@builtin("context merge", "contexts")
def _context_merge(env: Env, contexts: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for context in arg_list(contexts):
        result.update(arg_ctx(context))
    return result


@builtin("put all", "*contexts")
def _put_all(env: Env, contexts: list[Any]) -> dict[str, Any]:
    return _context_merge(env, contexts)


# -- misc ---------------------------------------------------------------------------------------------


@builtin("is empty", "list")
def _is_empty(env: Env, values: Any) -> bool:
    return not arg_list(values)


@builtin("type of", "value")
def _type_of(env: Env, value: Any) -> str:
    from ._values import KIND_NAMES

    return "Null" if value is None else KIND_NAMES[kind_of(value)]


def ensure_bool(value: Any) -> bool:
    """Shared check for predicates returning booleans (used by sort)."""
    return arg_bool(value)
