"""The CLI's duration flags and how the worker turns a handler's exit into a job outcome (without a broker)."""

from __future__ import annotations

import argparse
import sys

import pytest

from client.jobs_cli import duration_ms, run_handler


@pytest.mark.parametrize(
    ("text", "ms"),
    [("300000", 300_000), ("500ms", 500), ("30s", 30_000), ("5m", 300_000), ("1h", 3_600_000), ("1m30s", 90_000)],
)
def test_durations_read_like_zbctl(text: str, ms: int) -> None:
    assert duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "soon", "5 minutes", "-5s", "5m junk", "1.5"])
def test_other_durations_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="not a duration"):
        duration_ms(text)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_handler_gets_the_variables_and_its_json_object_completes() -> None:
    code = "import json, sys; v = json.load(sys.stdin); print(json.dumps({'sum': v['a'] + v['b']}))"
    assert run_handler(python(code), '{"a": 1, "b": 2}', 10) == (None, {"sum": 3})
    assert run_handler(python("pass"), "{}", 10) == (None, {})


def test_a_failing_handler_fails_with_its_stderr() -> None:
    code = "import sys; print('partial', file=sys.stdout); print('no stock', file=sys.stderr); sys.exit(4)"
    assert run_handler(python(code), "{}", 10) == ("no stock", {})
    assert run_handler(python("import sys; sys.exit(2)"), "{}", 10) == ("the handler exited with status 2", {})


def test_output_that_is_not_an_object_a_missing_command_and_a_hang_fail_the_job() -> None:
    message, _ = run_handler(python("print('[1, 2]')"), "{}", 10)
    assert message is not None and "not a JSON object" in message
    message, _ = run_handler(["/nonexistent/handler"], "{}", 10)
    assert message is not None and message.startswith("cannot run the handler '/nonexistent/handler'")
    message, _ = run_handler(python("import time; time.sleep(30)"), "{}", 0.5)
    assert message is not None and "did not finish within the job's timeout" in message
