"""The OpenAPI 3.1 document of the REST API, served at ``GET /v2/openapi.json``, generated from the endpoint
declarations the server routes: it describes exactly what this gateway implements."""

from __future__ import annotations

import re
from typing import Any

from gateway.rest import problems
from gateway.rest.endpoints import Endpoint, key_param

#: Problem statuses any endpoint may answer: bad input, missing credentials, a refused web page or disabled action,
#: a Host that does not name the server, an internal error, no broker.
COMMON_ERRORS = (400, 401, 403, 421, 500, 503)
#: Besides, of endpoints with a request body: it arrived too slowly, or not as JSON.
BODY_ERRORS = (408, 415)
_REASONS = {
    400: "The request is invalid (the detail names the field)",
    401: "Credentials are missing or invalid",
    403: "Refused: a web page of another origin (gateway.rest.allowedOrigins), or an action the configuration "
    "turns off (the detail names the setting)",
    408: "The request body did not arrive within gateway.rest.bodyTimeout",
    415: "The request body is not of the content type the endpoint reads (application/json)",
    421: "The Host header does not name this server (gateway.rest.allowedHosts)",
    404: "Nothing has this key",
    406: "The content cannot be given in the form asked for (the detail names where to get it)",
    409: "The target is not in a state that allows this",
    500: "An internal error",
    501: "Not implemented",
    503: "No broker can take the request now (unavailable, or overloaded: title RESOURCE_EXHAUSTED)",
    504: "The broker did not answer in time",
}


_IDENTITY_ID = {"type": "string", "pattern": "^[a-zA-Z0-9_~@.+-]{1,256}$"}
#: Path parameters that name an identity by its id (Camunda 8.8's id rules), not by a key.
ID_PARAMS: dict[str, dict[str, Any]] = {
    "username": _IDENTITY_ID,
    "groupId": _IDENTITY_ID,
    "roleId": _IDENTITY_ID,
    "mappingRuleId": _IDENTITY_ID,
    "clientId": _IDENTITY_ID,
    "tenantId": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,31}$"},
}


def _path_param(name: str) -> dict[str, Any]:
    schema = ID_PARAMS.get(name)
    if schema is None:
        return key_param(name, f"The {_words(name)}")
    return {"name": name, "in": "path", "required": True, "description": f"The {_words(name)}", "schema": schema}


def document(endpoints: list[Endpoint], *, version: str, auth_methods: list[str]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in endpoints:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint, auth_methods)
    schemes: dict[str, Any] = {}
    if "basic" in auth_methods:
        schemes["basicAuth"] = {"type": "http", "scheme": "basic"}
    if "oauth" in auth_methods:
        schemes["bearerAuth"] = {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "Weir REST API",
            "version": version,
            "description": "The part of the Camunda 8.9 Orchestration Cluster REST API (v2) that Weir implements. "
            "Keys are 64-bit integers written as strings of digits. Errors are RFC 9457 problem details.",
        },
        "paths": paths,
        "components": {"schemas": {"ProblemDetail": problems.SCHEMA}, "securitySchemes": schemes},
    }
    if schemes:
        doc["security"] = [{name: []} for name in schemes]
    return doc


def _operation(endpoint: Endpoint, auth_methods: list[str]) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": endpoint.summary,
        "tags": [endpoint.tag],
        "operationId": _operation_id(endpoint),
    }
    if endpoint.description:
        operation["description"] = endpoint.description
    params = [_path_param(name) for name in re.findall(r"{(\w+)}", endpoint.path)]
    params.extend(endpoint.query_params)
    if params:
        operation["parameters"] = params
    if endpoint.body is not None:
        operation["requestBody"] = {
            "required": not endpoint.body_optional,
            "content": {"application/json": {"schema": endpoint.body.openapi()}},
        }
    elif endpoint.raw_body is not None:
        operation["requestBody"] = {"required": False, "content": {"application/json": {"schema": endpoint.raw_body}}}
    elif endpoint.multipart is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"multipart/form-data": {"schema": endpoint.multipart}},
        }
    responses: dict[str, Any] = {}
    for status, (description, schema) in endpoint.responses.items():
        if schema is None:
            responses[str(status)] = {"description": description}
        else:
            responses[str(status)] = {
                "description": description,
                "content": {endpoint.content_type: {"schema": schema}},
            }
    errors = set(COMMON_ERRORS) | set(endpoint.errors)
    if endpoint.body is not None or endpoint.raw_body is not None or endpoint.multipart is not None:
        errors |= set(BODY_ERRORS)
    if not auth_methods:
        errors.discard(401)
    for status in sorted(errors):
        responses[str(status)] = {
            "description": _REASONS[status],
            "content": {problems.CONTENT_TYPE: {"schema": {"$ref": "#/components/schemas/ProblemDetail"}}},
        }
    operation["responses"] = responses
    return operation


def _operation_id(endpoint: Endpoint) -> str:
    if endpoint.operation_id:
        return endpoint.operation_id
    words = re.sub(r"{\w+}", "", endpoint.path).replace("/v2/", "").replace("-", "/").split("/")
    return endpoint.method.lower() + "".join(w.capitalize() for w in words if w)


def _words(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", " ", camel).lower()
