"""Request bodies of the REST API: one declaration per body that both checks requests and describes them in the
OpenAPI document, so the served spec and the server cannot disagree.

A body is a JSON object of known fields: an unknown field, a missing required one or a value of the wrong type is a
400 naming the field. Keys (process instance, job… keys) travel as strings of digits, as in Camunda's v2 API, so
JavaScript clients keep all 64 bits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gateway.commands import invalid

MAX_KEY = 2**63 - 1
_KEY = re.compile(r"^[0-9]{1,19}$")
#: Keys as the OpenAPI document describes them: positive, at most 19 digits (beyond 2^63-1 is still a 400).
KEY_PATTERN = "^[1-9][0-9]{0,18}$"


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a request body: ``kind`` is string, integer, boolean, object (free JSON object), key, strings
    (array of strings), a nested :class:`Body` given as ``body``, or nested-list (an array of such bodies)."""

    kind: str
    description: str = ""
    required: bool = False
    minimum: int | None = None
    body: Body | None = None
    #: Strings: the least characters (the commands say what is wrong with a shorter one).
    min_length: int | None = None


@dataclass(frozen=True, slots=True)
class Body:
    fields: dict[str, Field] = field(default_factory=dict)
    description: str = ""

    def read(self, value: Any, where: str = "the request body") -> dict[str, Any]:
        """The fields given (nulls dropped), checked; raises a 400 CommandError naming the first problem."""
        if not isinstance(value, dict):
            invalid(f"Expected {where} to be a JSON object, but got {_json_type(value)}")
        unknown = sorted(set(value) - set(self.fields))
        if unknown:
            names = ", ".join(f"'{n}'" for n in unknown)
            known = ", ".join(self.fields) or "none"
            invalid(f"Unknown field(s) {names} in {where}; the fields are: {known}")
        result: dict[str, Any] = {}
        for name, spec in self.fields.items():
            given = value.get(name)
            if given is None:
                if spec.required:
                    invalid(f"Expected a value for '{name}' in {where}, but none given")
                continue
            result[name] = _check(name, spec, given)
        return result

    def openapi(self) -> dict[str, Any]:
        properties = {name: _field_schema(spec) for name, spec in self.fields.items()}
        schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
        required = [name for name, spec in self.fields.items() if spec.required]
        if required:
            schema["required"] = required
        if self.description:
            schema["description"] = self.description
        return schema


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def parse_key(name: str, value: Any) -> int:
    """A key as the API carries it: a string of digits (a JSON integer is accepted too) within 64 bits."""
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not _KEY.match(text) or int(text) > MAX_KEY or int(text) < 1:
        shown = value if isinstance(value, str) else _json_type(value)
        invalid(f"Expected '{name}' to be a key (a positive 64-bit integer as a string of digits), but got '{shown}'")
    return int(text)


def _check(name: str, spec: Field, value: Any) -> Any:
    kind = spec.kind
    if kind == "key":
        return parse_key(name, value)
    if kind == "string":
        if not isinstance(value, str):
            invalid(f"Expected '{name}' to be a string, but got {_json_type(value)}")
    elif kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            invalid(f"Expected '{name}' to be an integer, but got {_json_type(value)}")
        if not -(2**63) <= value <= MAX_KEY:
            invalid(f"Expected '{name}' to be a 64-bit integer, but got {value}")
        if spec.minimum is not None and value < spec.minimum:
            invalid(f"Expected '{name}' to be at least {spec.minimum}, but got {value}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            invalid(f"Expected '{name}' to be a boolean, but got {_json_type(value)}")
    elif kind == "object":
        if not isinstance(value, dict):
            invalid(f"Expected '{name}' to be a JSON object, but got {_json_type(value)}")
    elif kind == "strings":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            invalid(f"Expected '{name}' to be an array of strings, but got {_json_type(value)}")
    elif kind == "nested":
        assert spec.body is not None
        return spec.body.read(value, f"'{name}'")
    elif kind == "nested-list":
        assert spec.body is not None
        if not isinstance(value, list):
            invalid(f"Expected '{name}' to be an array of objects, but got {_json_type(value)}")
        return [spec.body.read(item, f"'{name}[{n}]'") for n, item in enumerate(value)]
    return value


def _field_schema(spec: Field) -> dict[str, Any]:
    kind = spec.kind
    if kind == "key":
        schema: dict[str, Any] = {"type": "string", "pattern": KEY_PATTERN}
    elif kind == "integer":
        schema = {"type": "integer", "format": "int64"}
        if spec.minimum is not None:
            schema["minimum"] = spec.minimum
    elif kind == "object":
        schema = {"type": "object", "additionalProperties": True}
    elif kind == "strings":
        schema = {"type": "array", "items": {"type": "string"}}
    elif kind == "nested":
        assert spec.body is not None
        schema = spec.body.openapi()
    elif kind == "nested-list":
        assert spec.body is not None
        schema = {"type": "array", "items": spec.body.openapi()}
    else:
        schema = {"type": kind}
    if spec.min_length is not None:
        schema["minLength"] = spec.min_length
    if spec.description:
        schema["description"] = spec.description
    return schema
