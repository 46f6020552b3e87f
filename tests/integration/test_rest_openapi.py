"""The served OpenAPI document and the server agree: schemathesis generates requests from /v2/openapi.json against
a real `weir start`, and every answer must be documented (status, content type, body schema) and none may be a
server error.

schemathesis is imported by the test alone (and its pytest plugin is off, ``-p no:schemathesis``): every test process
collects this file, and only one runs it."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.harness import WeirProcess

# Generated requests per operation: 20 for one with a body or query (their input space is large), 6 for one whose
# only input is its path (an id or key: a few cover the shapes hypothesis draws). An operation whose body and query
# have the very schemas of one tested before it gets 6 as well: the searches, a quarter of the operations, share one
# generic body (a free-form filter object, sort and page), which each search's own filter fields refuse or answer
# (a few others share theirs too: the updates of groups, roles and tenants, the batch operations' filters). Drawing
# the requests, on the test's side, costs most of the time (about 0.2 s per operation on an idle machine, 140
# operations). WEIR_OPENAPI_EXAMPLES=N multiplies every count by N for a longer search.
SCALE = int(os.environ.get("WEIR_OPENAPI_EXAMPLES", "1"))
WITH_BODY_EXAMPLES, PATH_ONLY_EXAMPLES, SAME_INPUT_EXAMPLES = 20 * SCALE, 6 * SCALE, 6 * SCALE


def input_schemas(operation: Any) -> str:
    """The schemas of an operation's body and non-path parameters, as one comparable string."""
    bodies = [body.definition for body in operation.body]
    others = [p.definition for p in operation.iter_parameters() if p.location != "path"]
    return json.dumps([bodies, others], sort_keys=True)


@pytest.mark.timeout(600 * SCALE)
def test_every_answer_is_documented_and_none_is_a_server_error(weir: WeirProcess) -> None:
    import schemathesis
    from schemathesis import checks

    every_check = [
        checks.not_a_server_error,
        checks.status_code_conformance,
        checks.content_type_conformance,
        checks.response_schema_conformance,
    ]
    schema = schemathesis.openapi.from_url(f"{weir.rest_url}/v2/openapi.json")
    tested = []
    inputs_seen: set[str] = set()
    for result in schema.get_all_operations():
        operation = result.ok()
        path_only = not operation.get_request_payload_content_types() and all(
            parameter.location == "path" for parameter in operation.iter_parameters()
        )
        inputs = input_schemas(operation)
        if path_only:
            examples = PATH_ONLY_EXAMPLES
        elif inputs in inputs_seen:
            examples = SAME_INPUT_EXAMPLES
        else:
            examples = WITH_BODY_EXAMPLES
        inputs_seen.add(inputs)

        @given(case=operation.as_strategy())
        @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def run(case: schemathesis.Case) -> None:
            if case.path == "/v2/jobs/activation" and isinstance(case.body, dict):
                case.body["requestTimeout"] = -1  # no long polls: generated job types never have jobs
            case.call_and_validate(checks=every_check)

        run()
        tested.append(f"{operation.method.upper()} {operation.path}")
    assert len(tested) >= 30, tested
