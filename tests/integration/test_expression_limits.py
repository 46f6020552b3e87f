"""Runaway expressions against a real ``weir start``: each becomes an incident naming the expression and the
budget it exceeded, and the broker keeps serving ordinary workflows promptly right after.

Before FEEL had a budget, the regex below blocked the partition for ~24 s, the nested loop grew the broker
to gigabytes and the doubling string was stored as an 84 MB variable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import grpc
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import REPO, WeirProcess, eventually
from tests.integration.clients import (
    Stub,
    activate,
    activate_now,
    complete,
    create,
    create_with_result,
    deploy,
    is_active,
    open_incidents,
    variables_of,
)


def test_runaway_expressions_raise_incidents_and_the_broker_keeps_serving(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "expression-budget.bpmn")
    started = time.monotonic()
    input_pi = create(stub, d.pid("budget-input"))
    condition_pi = create(stub, d.pid("budget-condition"))
    regex_pi = create(stub, d.pid("budget-regex"), {"name": "a" * 30 + "!"})
    output_pi = create(stub, d.pid("budget-output"))
    (job,) = activate(stub, d.type("budget-copy"))
    complete(stub, job.key, {"chunk": "x" * 300_000})  # the output mapping makes 20 copies: 6 MB

    # an ordinary workflow on the same broker, right after
    one = deploy(stub, "one-task.bpmn")
    pending = create_with_result(stub, one.pid(), {"n": 21})
    (work,) = activate(stub, one.type("test"))
    complete(stub, work.key, {"doubled": 42})
    result = pending.result(timeout=10)
    assert json.loads(result.variables) == {"n": 21, "doubled": 42}
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"the broker took {elapsed:.1f}s to serve an ordinary workflow after the runaway ones"

    eventually(lambda: not is_active(stub, regex_pi), timeout=5, what="the regex instance to take its default flow")
    for pi in (input_pi, condition_pi, output_pi):
        assert is_active(stub, pi), "an instance with a failed expression waits on its incident"

    weir.stop()
    incidents = {r.value["processInstanceKey"]: r.value for r in open_incidents(weir)}
    weir.start()
    assert regex_pi not in incidents

    loop = incidents[input_pi]
    assert loop["elementId"] == "bi-task"
    assert "'for i in 1..100000, j in 1..100000 return [i, j]'" in loop["errorMessage"]
    assert "step budget" in loop["errorMessage"]

    doubling = incidents[condition_pi]
    assert doubling["elementId"] == "bc-split"
    assert "partial[-1] + partial[-1]" in doubling["errorMessage"]
    assert "size budget" in doubling["errorMessage"]

    copies = incidents[output_pi]
    assert copies["elementId"] == "bo-task"
    assert "'for i in 1..20 return chunk'" in copies["errorMessage"]
    assert "larger than the maximum variable size" in copies["errorMessage"]

    # and after the restart it still serves
    pending = create_with_result(stub, one.pid(), {"n": 1})
    (work,) = activate(stub, one.type("test"))
    complete(stub, work.key)
    assert json.loads(pending.result(timeout=10).variables) == {"n": 1}
    assert stub.Topology(pb.TopologyRequest(), timeout=10).brokers


def test_configured_expression_limits_turn_normal_expressions_into_incidents(tmp_path: Path) -> None:
    """broker.expressions.maxSteps / maxSize (here through their WEIR_… variables) and the max message size bound
    each evaluation: expressions that pass under the defaults fail with an incident naming the budget and its key."""
    w = WeirProcess(
        tmp_path / "data",
        extra_args=["--max-message-size", str(256 * 1024)],
        env={"WEIR_BROKER_EXPRESSIONS_MAX_STEPS": "1000", "WEIR_BROKER_EXPRESSIONS_MAX_SIZE": "400000"},
    )
    w.start()
    channel = grpc.insecure_channel(w.address)
    stub = Stub(channel)
    try:
        d = deploy(stub, "expression-configured.bpmn")
        # within the configured budgets: each reaches its task with the mapped value
        create(stub, d.pid("cfg-steps"), {"n": 10})
        create(stub, d.pid("cfg-size"), {"m": 5})
        jobs = activate(stub, d.type("cfg-work"), 2)
        assert sorted((k, v) for job in jobs for k, v in variables_of(job).items() if k in ("total", "length")) == [
            ("length", 32),
            ("total", 55),
        ]
        for job in jobs:
            complete(stub, job.key)
        # over them
        steps_pi = create(stub, d.pid("cfg-steps"), {"n": 2000})
        size_pi = create(stub, d.pid("cfg-size"), {"m": 20})
        result_pi = create(stub, d.pid("cfg-result"))
        (copy_job,) = activate(stub, d.type("cfg-copy"))
        complete(stub, copy_job.key, {"chunk": "x" * 150_000})  # fits a message; twice that does not

        one = deploy(stub, "one-task.bpmn")
        pending = create_with_result(stub, one.pid(), {"n": 21})
        (work,) = activate(stub, one.type("test"))
        complete(stub, work.key, {"doubled": 42})
        assert json.loads(pending.result(timeout=10).variables) == {"n": 21, "doubled": 42}
        for pi in (steps_pi, size_pi, result_pi):
            assert is_active(stub, pi), "an instance with a failed expression waits on its incident"
        assert activate_now(stub, d.type("cfg-work")) == []

        w.stop()
        incidents = {r.value["processInstanceKey"]: r.value for r in open_incidents(w)}
        steps, size, result = incidents[steps_pi], incidents[size_pi], incidents[result_pi]
        assert steps["elementId"] == "cs-task" and "'sum(for i in 1..n return i)'" in steps["errorMessage"]
        assert "step budget of 1,000 steps" in steps["errorMessage"]
        assert "broker.expressions.maxSteps" in steps["errorMessage"]
        assert size["elementId"] == "cz-task" and "partial[-1] + partial[-1]" in size["errorMessage"]
        assert "size budget of 400,000" in size["errorMessage"]
        assert "broker.expressions.maxSize" in size["errorMessage"]
        assert result["elementId"] == "cr-task" and "'chunk + chunk'" in result["errorMessage"]
        assert "larger than the maximum variable size of 262,144 bytes" in result["errorMessage"]
    finally:
        channel.close()
        w.kill()


def test_expression_limits_must_be_positive() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "client.cli", "config", "show"],
        cwd=REPO,
        env={**os.environ, "WEIR_BROKER_EXPRESSIONS_MAX_STEPS": "0"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != 0
    assert "broker.expressions.maxSteps: must be a positive integer" in done.stderr
