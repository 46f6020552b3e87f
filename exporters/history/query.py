"""v2 search requests → SQL: filters, sort and paging of the Orchestration Cluster REST API, checked field by field.

A request is ``{"filter": {...}, "sort": [{"field", "order"}], "page": {"limit", "from", "after", "before"}}``. A
filter value is either the value itself (equality) or an object of operators (``$eq``, ``$neq``, ``$exists``, ``$in``,
``$notIn``, ``$like`` on strings and keys; ``$gt``, ``$gte``, ``$lt``, ``$lte`` on numbers and dates); ``$or`` holds
alternative filter objects. Cursors are opaque to clients (base64 of the item offset).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from exporters.history.entities import ANY_OF, BOOL, DATE, INT, JSON_LIST, KEY, STR, Entity, Field

DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000

_OPERATORS: dict[str, tuple[str, ...]] = {
    STR: ("$eq", "$neq", "$exists", "$in", "$notIn", "$like"),
    KEY: ("$eq", "$neq", "$exists", "$in", "$notIn"),
    INT: ("$eq", "$neq", "$exists", "$gt", "$gte", "$lt", "$lte", "$in"),
    DATE: ("$eq", "$neq", "$exists", "$gt", "$gte", "$lt", "$lte", "$in"),
    BOOL: ("$eq",),
    JSON_LIST: ("$eq", "$in", "$exists"),
    ANY_OF: (),
}
_COMPARISONS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}

# Variable filters: a list of {name, value} matched against the variables of the row's instance (or scope).
_VARIABLE_FILTERS: dict[tuple[str, str], tuple[str, str]] = {
    ("process-instances", "variables"): ("process_instance_key", "p.process_instance_key"),
    ("user-tasks", "processInstanceVariables"): ("process_instance_key", "t.process_instance_key"),
    ("user-tasks", "localVariables"): ("scope_key", "t.element_instance_key"),
}


class InvalidQuery(ValueError):
    """A search request the history cannot answer: the message names the field and what is allowed."""


@dataclass(slots=True)
class SqlQuery:
    where: str
    params: list[Any]
    order_by: str
    offset: int
    limit: int


def build(entity: Entity, query: Any) -> SqlQuery:
    """Check a v2 search request against ``entity`` and translate it (placeholders are ``?``)."""
    if query is None:
        query = {}
    if not isinstance(query, dict):
        raise InvalidQuery(f"the search request must be a JSON object, got {_kind(query)}")
    unknown = sorted(set(query) - {"filter", "sort", "page"})
    if unknown:
        raise InvalidQuery(f"unknown search request field(s) {', '.join(unknown)}; allowed: filter, page, sort")
    params: list[Any] = []
    where = _filter(entity, query.get("filter") or {}, params, "filter")
    order_by = _sort(entity, query.get("sort") or [])
    offset, limit = _page(query.get("page") or {})
    return SqlQuery(where or "1=1", params, order_by, offset, limit)


def key_value(field: Field, raw: Any, where: str) -> Any:
    return _value(field, raw, where)


# -- filter ----------------------------------------------------------------------------------------------------


def _filter(entity: Entity, spec: Any, params: list[Any], where: str) -> str:
    if not isinstance(spec, dict):
        raise InvalidQuery(f"{where}: expected an object of field filters, got {_kind(spec)}")
    clauses: list[str] = []
    for name, value in spec.items():
        if name == "$or":
            clauses.append(_or(entity, value, params, f"{where}.$or"))
            continue
        variables = _VARIABLE_FILTERS.get((entity.name, name))
        if variables is not None:
            clauses.append(_variables(variables, value, params, f"{where}.{name}"))
            continue
        field = entity.field(name)
        if field is None or not field.filterable:
            allowed = [*entity.filter_names(), *(n for (e, n) in _VARIABLE_FILTERS if e == entity.name), "$or"]
            raise InvalidQuery(
                f"{where}.{name}: unknown filter field for {entity.name}; allowed: {', '.join(sorted(allowed))}"
            )
        clauses.append(_condition(field, value, params, f"{where}.{name}"))
    return " AND ".join(f"({c})" for c in clauses)


def _or(entity: Entity, alternatives: Any, params: list[Any], where: str) -> str:
    if not isinstance(alternatives, list) or not alternatives:
        raise InvalidQuery(f"{where}: expected a non-empty array of filter objects")
    parts = [_filter(entity, alt, params, f"{where}[{i}]") or "1=1" for i, alt in enumerate(alternatives)]
    return " OR ".join(f"({p})" for p in parts)


def _variables(target: tuple[str, str], items: Any, params: list[Any], where: str) -> str:
    column, outer = target
    if not isinstance(items, list):
        raise InvalidQuery(f"{where}: expected an array of {{name, value}} objects")
    clauses = []
    name_field = Field("name", "vf.name", STR)
    value_field = Field("value", "vf.value", STR)
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "name" not in item or set(item) - {"name", "value"}:
            raise InvalidQuery(f"{where}[{i}]: expected an object with name and value (value as JSON text)")
        conditions = [_condition(name_field, item["name"], params, f"{where}[{i}].name")]
        if "value" in item:
            conditions.append(_condition(value_field, item["value"], params, f"{where}[{i}].value"))
        clauses.append(
            f"EXISTS (SELECT 1 FROM variables vf WHERE vf.{column} = {outer} AND {' AND '.join(conditions)})"
        )
    return " AND ".join(clauses) or "1=1"


def _condition(field: Field, spec: Any, params: list[Any], where: str) -> str:
    if field.kind == ANY_OF:
        return _any_of(field, spec, params, where)
    if not isinstance(spec, dict):
        return _operator(field, "$eq", spec, params, where)
    allowed = _OPERATORS[field.kind]
    if not spec:
        raise InvalidQuery(f"{where}: an empty operator object; allowed operators: {', '.join(allowed)}")
    parts = []
    for operator, operand in spec.items():
        if operator not in allowed:
            raise InvalidQuery(f"{where}: unknown operator {operator!r}; allowed: {', '.join(allowed)}")
        parts.append(_operator(field, operator, operand, params, f"{where}.{operator}"))
    return " AND ".join(parts)


def _operator(field: Field, operator: str, operand: Any, params: list[Any], where: str) -> str:
    column = field.sql
    if field.kind == JSON_LIST:
        return _membership(field, operator, operand, params, where)
    if operator == "$exists":
        if not isinstance(operand, bool):
            raise InvalidQuery(f"{where}: expected true or false")
        return f"{column} IS NOT NULL" if operand else f"{column} IS NULL"
    if operator in ("$in", "$notIn"):
        if not isinstance(operand, list) or not operand:
            raise InvalidQuery(f"{where}: expected a non-empty array")
        values = [_value(field, v, f"{where}[{i}]") for i, v in enumerate(operand)]
        params.extend(values)
        marks = ", ".join("?" for _ in values)
        return f"{column} IN ({marks})" if operator == "$in" else f"({column} IS NULL OR {column} NOT IN ({marks}))"
    if operator == "$like":
        if not isinstance(operand, str):
            raise InvalidQuery(f"{where}: expected a string pattern (* any characters, ? one character)")
        params.append(_like_pattern(operand))
        return f"{column} LIKE ? ESCAPE '\\'"
    params.append(_value(field, operand, where))
    if operator == "$eq":
        return f"{column} = ?"
    if operator == "$neq":
        return f"({column} IS NULL OR {column} <> ?)"
    return f"{column} {_COMPARISONS[operator]} ?"


def _any_of(field: Field, values: Any, params: list[Any], where: str) -> str:
    """An array of strings: rows whose field is any of them (an empty array matches none)."""
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InvalidQuery(f"{where}: expected an array of strings (any of them matches)")
    if not values:
        return "1=0"
    params.extend(values)
    return f"{field.sql} IN ({', '.join('?' for _ in values)})"


def _membership(field: Field, operator: str, operand: Any, params: list[Any], where: str) -> str:
    if operator == "$exists":
        if not isinstance(operand, bool):
            raise InvalidQuery(f"{where}: expected true or false")
        empty = f"({field.sql} IS NULL OR {field.sql} = '[]')"
        return f"NOT {empty}" if operand else empty
    every = operator == "$eq" and isinstance(operand, list)  # tags: [a, b] finds rows with a and b
    values = operand if operator == "$in" or every else [operand]
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise InvalidQuery(
            f"{where}: expected a string or a non-empty array of strings (all of them; for $in, any of them)"
        )
    clauses = []
    for value in values:
        params.append("%" + _escape_like(json.dumps(value)) + "%")
        clauses.append(f"{field.sql} LIKE ? ESCAPE '\\'")
    return (" AND " if every else " OR ").join(clauses)


def _value(field: Field, raw: Any, where: str) -> Any:
    kind = field.kind
    if kind == KEY:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.isdigit():
            return int(raw)
        raise InvalidQuery(f"{where}: expected a key (a string of digits), got {raw!r}")
    if kind == INT:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        raise InvalidQuery(f"{where}: expected an integer, got {raw!r}")
    if kind == DATE:
        if isinstance(raw, str):
            try:
                parsed = datetime.fromisoformat(raw)
            except ValueError:
                pass
            else:
                if parsed.tzinfo is None:
                    parsed = parsed.replace(tzinfo=UTC)
                return int(parsed.timestamp() * 1000)
        raise InvalidQuery(f"{where}: expected an ISO-8601 date-time such as 2026-01-31T09:30:00.000Z, got {raw!r}")
    if kind == BOOL:
        if isinstance(raw, bool):
            return 1 if raw else 0
        raise InvalidQuery(f"{where}: expected true or false, got {raw!r}")
    if isinstance(raw, str):
        return raw
    raise InvalidQuery(f"{where}: expected a string, got {raw!r}")


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _like_pattern(pattern: str) -> str:
    """A v2 ``$like`` pattern (``*``, ``?``, backslash escapes) as a SQL LIKE pattern with ``\\`` as escape."""
    out = []
    escaped = False
    for char in pattern:
        if escaped:
            out.append(_escape_like(char))
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "*":
            out.append("%")
        elif char == "?":
            out.append("_")
        else:
            out.append(_escape_like(char))
    if escaped:
        out.append("\\\\")
    return "".join(out)


# -- sort and page ---------------------------------------------------------------------------------------------


def _sort(entity: Entity, sort: Any) -> str:
    if not isinstance(sort, list):
        raise InvalidQuery("sort: expected an array of {field, order} objects")
    terms = []
    for i, criterion in enumerate(sort):
        if not isinstance(criterion, dict) or "field" not in criterion or set(criterion) - {"field", "order"}:
            raise InvalidQuery(f"sort[{i}]: expected an object with field and order (ASC or DESC)")
        name = criterion["field"]
        field = entity.sort_field(name) if isinstance(name, str) else None
        if field is None:
            raise InvalidQuery(
                f"sort[{i}].field: unknown sort field {name!r} for {entity.name}; allowed: "
                f"{', '.join(entity.sort_names())}"
            )
        order = criterion.get("order", "ASC")
        if not isinstance(order, str) or order.upper() not in ("ASC", "DESC"):
            raise InvalidQuery(f"sort[{i}].order: expected ASC or DESC, got {order!r}")
        terms.append(f"{field.sql} {order.upper()} NULLS LAST")
    terms.append(f"{entity.key.sql} ASC")
    return ", ".join(terms)


def _page(page: Any) -> tuple[int, int]:
    if not isinstance(page, dict):
        raise InvalidQuery("page: expected an object with limit and from, after or before")
    unknown = sorted(set(page) - {"limit", "from", "after", "before"})
    if unknown:
        raise InvalidQuery(f"page.{unknown[0]}: unknown paging field; allowed: after, before, from, limit")
    limit = page.get("limit", DEFAULT_LIMIT)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidQuery(f"page.limit: expected an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    given = [name for name in ("from", "after", "before") if page.get(name) is not None]
    if len(given) > 1:
        raise InvalidQuery(f"page: {' and '.join(given)} cannot be combined; give one of from, after, before")
    if "from" in given:
        start = page["from"]
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise InvalidQuery(f"page.from: expected an integer of at least 0, got {start!r}")
        return start, limit
    if "after" in given:
        return decode_cursor(page["after"], "page.after") + 1, limit
    if "before" in given:
        end = decode_cursor(page["before"], "page.before")
        start = max(0, end - limit)
        return start, end - start
    return 0, limit


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode().rstrip("=")


def decode_cursor(cursor: Any, where: str) -> int:
    if isinstance(cursor, str):
        try:
            data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
            offset = data["offset"]
            if isinstance(offset, int) and offset >= 0:
                return offset
        except (ValueError, KeyError, TypeError, binascii.Error):
            pass
    raise InvalidQuery(f"{where}: not a cursor of this search (use startCursor or endCursor of a response)")


def _kind(value: Any) -> str:
    return type(value).__name__
