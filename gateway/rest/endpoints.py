"""The registry of REST endpoints: each declares its path, body and responses once; the server routes them and the
OpenAPI document (gateway/rest/openapi.py) is generated from the same declarations."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gateway.rest.schema import KEY_PATTERN, Body

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class Endpoint:
    method: str
    path: str
    summary: str
    handler: Handler
    tag: str
    body: Body | None = None
    #: A body that may be left out entirely (e.g. a cancellation's optional operationReference).
    body_optional: bool = False
    multipart: dict[str, Any] | None = None
    #: A request body described by a JSON schema only (checked by the handler itself, e.g. search queries).
    raw_body: dict[str, Any] | None = None
    #: Success status → (description, JSON schema of the response or None for no content).
    responses: dict[int, tuple[str, dict[str, Any] | None]] = field(default_factory=dict)
    #: Problem statuses this endpoint may answer besides the ones every endpoint may (400, 401, 500, 503).
    errors: tuple[int, ...] = ()
    content_type: str = "application/json"
    description: str = ""
    #: Query parameters, as OpenAPI parameter objects (``"in": "query"``).
    query_params: tuple[dict[str, Any], ...] = ()
    #: The OpenAPI operationId when the one made from the method and path would repeat another's (batch operations
    #: share their words with the single-instance ones).
    operation_id: str = ""


def key_param(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "pattern": KEY_PATTERN},
    }


def obj(properties: dict[str, Any], description: str = "", required: list[str] | None = None) -> dict[str, Any]:
    """A response object schema (open to additional properties: clients must ignore fields they do not know)."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if description:
        schema["description"] = description
    if required:
        schema["required"] = required
    return schema


STRING: dict[str, Any] = {"type": "string"}
INTEGER: dict[str, Any] = {"type": "integer", "format": "int64"}
KEY: dict[str, Any] = {"type": "string", "description": "A 64-bit key as a string of digits"}
ANY_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}
