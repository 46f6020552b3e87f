"""Errors of the REST API as RFC 9457 problem details (``application/problem+json``), the format Camunda's v2 API
answers with: ``{type, title, status, detail, instance}``, the title naming the kind of problem (a rejection type
like NOT_FOUND or INVALID_STATE, or INVALID_ARGUMENT, UNAUTHORIZED…) and the detail saying what to fix."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from gateway.commands import CommandError, ErrorCode

CONTENT_TYPE = "application/problem+json"

HTTP_STATUS = {
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.ALREADY_EXISTS: 409,
    ErrorCode.FAILED_PRECONDITION: 409,
    ErrorCode.RESOURCE_EXHAUSTED: 503,  # backpressure: Camunda answers 503 with the title RESOURCE_EXHAUSTED
    ErrorCode.DEADLINE_EXCEEDED: 504,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.UNIMPLEMENTED: 501,
    ErrorCode.INTERNAL: 500,
    ErrorCode.UNKNOWN: 500,
}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A problem detail (RFC 9457).",
    "properties": {
        "type": {"type": "string", "description": "A URI naming the problem type; about:blank when only the title"},
        "title": {"type": "string", "description": "The kind of problem, e.g. INVALID_ARGUMENT or NOT_FOUND"},
        "status": {"type": "integer", "description": "The HTTP status code"},
        "detail": {"type": "string", "description": "What went wrong and what to do about it"},
        "instance": {"type": "string", "description": "The path of the request"},
    },
    "required": ["type", "title", "status", "detail", "instance"],
}


def problem(status: int, title: str, detail: str, instance: str, headers: dict[str, str] | None = None) -> web.Response:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, "instance": instance}
    return web.Response(
        status=status,
        text=json.dumps(body, ensure_ascii=False),
        content_type=CONTENT_TYPE,
        headers=headers,
    )


def from_error(error: CommandError, instance: str) -> web.Response:
    return problem(HTTP_STATUS[error.code], error.title, error.message, instance)
