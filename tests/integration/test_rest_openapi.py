"""The served OpenAPI document and the server agree: schemathesis generates requests from /v2/openapi.json against
a real `weir start`, and every answer must be documented (status, content type, body schema) and none may be a
server error."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from tests.harness import WeirProcess

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


# Generated requests per operation: 30 for one with a body or query (their input space is large), 10 for one whose
# only input is its path (an id or key: 10 cover the shapes hypothesis draws). The time grows with the operations
# served (well past 120 s on a loaded machine).
WITH_BODY_EXAMPLES, PATH_ONLY_EXAMPLES = 30, 10


@pytest.mark.timeout(600)
def test_every_answer_is_documented_and_none_is_a_server_error(weir: WeirProcess) -> None:
    schema = schemathesis.openapi.from_url(f"{weir.rest_url}/v2/openapi.json")
    tested = []
    for result in schema.get_all_operations():
        operation = result.ok()
        path_only = not operation.get_request_payload_content_types() and all(
            parameter.location == "path" for parameter in operation.iter_parameters()
        )
        examples = PATH_ONLY_EXAMPLES if path_only else WITH_BODY_EXAMPLES

        @given(case=operation.as_strategy())
        @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def run(case: schemathesis.Case) -> None:
            if case.path == "/v2/jobs/activation" and isinstance(case.body, dict):
                case.body["requestTimeout"] = -1  # no long polls: generated job types never have jobs
            case.call_and_validate(checks=CHECKS)

        run()
        tested.append(f"{operation.method.upper()} {operation.path}")
    assert len(tested) >= 30, tested
