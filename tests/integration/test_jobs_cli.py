"""``weir activate jobs / complete job / fail job / throw-error job / update retries|timeout / set variables / broadcast
signal / evaluate decision / delete resource / worker`` against a real ``weir start``, each run as a user runs it (a
process), each with its refusal: exit 1 and one line naming the gRPC status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.harness import REPO, WeirProcess, eventually
from tests.integration.clients import Stub, activate, activate_now, create, deploy, is_active, pb, variables_of

DMN = Path(__file__).resolve().parents[1] / "fixtures" / "dmn" / "discount.dmn"


def cli(w: WeirProcess, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "client.cli", *args, "--address", w.address]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=90, input=stdin)


def weir_json(w: WeirProcess, *args: str) -> Any:
    out = cli(w, *args, "--output", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def refused(w: WeirProcess, status: str, *args: str) -> str:
    """Run a command that the gateway refuses: exit 1, one line on stderr naming the status."""
    out = cli(w, *args)
    assert out.returncode == 1, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {status}: "), out.stderr
    return lines[0]


def test_activate_and_complete_a_job(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    pi = create(stub, d.pid(), {"orderId": 7})
    jobs = weir_json(weir, "activate", "jobs", d.type("test"), "--request-timeout", "5000", "--worker", "cli")["jobs"]
    assert len(jobs) == 1
    job = jobs[0]
    assert job["worker"] == "cli" and int(job["processInstanceKey"]) == pi
    assert json.loads(job["variables"]) == {"orderId": 7}
    out = cli(weir, "complete", "job", job["key"], "--variables", '{"done": true}')
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"Job {job['key']} completed."
    eventually(lambda: not is_active(stub, pi), timeout=10, what="the instance to complete")

    # nothing left: an empty table line; the same job again: NOT_FOUND
    out = cli(weir, "activate", "jobs", d.type("test"))
    assert out.returncode == 0 and out.stdout.strip() == f"No jobs of type {d.type('test')} to activate."
    assert job["key"] in refused(weir, "NOT_FOUND", "complete", "job", job["key"])
    refused(weir, "INVALID_ARGUMENT", "activate", "jobs", d.type("test"), "--max-jobs", "0")


def test_fail_update_retries_and_timeout(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    create(stub, d.pid())
    (job,) = activate(stub, d.type("test"))
    key = str(job.key)
    out = cli(weir, "fail", "job", key, "--retries", "2", "--error-message", "disk full", "--retry-backoff", "0s")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"Job {key} failed (2 retries left)."
    (again,) = activate(stub, d.type("test"))
    assert again.key == job.key and again.retries == 2

    assert weir_json(weir, "update", "retries", key, "--retries", "5") == {}
    out = cli(weir, "update", "timeout", key, "--job-timeout", "10m")
    assert out.returncode == 0 and out.stdout.strip() == f"Job {key} times out 600000 ms from now."
    assert activate_now(stub, d.type("test")) == []  # still locked to its worker
    refused(weir, "NOT_FOUND", "update", "retries", "2251799813685249999", "--retries", "1")
    refused(weir, "INVALID_ARGUMENT", "update", "retries", key, "--retries", "-1")
    refused(weir, "NOT_FOUND", "fail", "job", "2251799813685249999", "--retries", "0")
    refused(weir, "NOT_FOUND", "update", "timeout", "2251799813685249999", "--job-timeout", "1s")
    bad = cli(weir, "update", "timeout", key, "--job-timeout", "soon")
    assert bad.returncode == 2 and "not a duration" in bad.stderr


def test_throw_error_is_caught_by_the_boundary_event(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "error-boundary.bpmn")
    create(stub, d.pid("error-boundary"))
    (job,) = activate(stub, d.type("charge"))
    out = cli(weir, "throwError", "job", str(job.key), "--error-code", "PAYMENT_FAILED", "--variables", '{"why": 1}')
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"Error PAYMENT_FAILED thrown for job {job.key}."
    (handler,) = activate(stub, d.type("send-invoice"))
    assert variables_of(handler)["why"] == 1
    refused(weir, "NOT_FOUND", "throw-error", "job", str(job.key), "--error-code", "X")


def test_set_variables_and_broadcast_a_signal(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "signal-catch.bpmn")
    pi = create(stub, d.pid())
    answer = weir_json(weir, "set", "variables", str(pi), "--variables", '{"colour": "red"}', "--local")
    assert int(answer["key"]) > 0
    out = cli(weir, "broadcast", "signal", "wake-up", "--variables", '{"woken": true}')
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Signal wake-up broadcast with key ")
    (job,) = activate(stub, d.type("after-signal"))
    assert variables_of(job)["colour"] == "red" and variables_of(job)["woken"] is True

    refused(weir, "NOT_FOUND", "set", "variables", "2251799813685249999", "--variables", "{}")
    refused(weir, "INVALID_ARGUMENT", "set", "variables", str(pi), "--variables", "[1]")
    refused(weir, "INVALID_ARGUMENT", "broadcast", "signal", "")


def test_evaluate_a_decision_by_id_and_by_key(weir: WeirProcess, stub: Stub) -> None:
    deployed = stub.DeployResource(
        pb.DeployResourceRequest(resources=[pb.Resource(name="discount.dmn", content=DMN.read_bytes())]), timeout=10
    )
    level = next(d.decision for d in deployed.deployments if d.decision.dmnDecisionId == "customer_level")
    by_id = weir_json(weir, "evaluate", "decision", "customer_level", "--variables", '{"orders": 12}')
    assert json.loads(by_id["decisionOutput"]) == "gold"
    out = cli(weir, "evaluate", "decision", str(level.decisionKey), "--variables", '{"orders": 4}')
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith(': "silver"') and "customer_level" in out.stdout

    refused(weir, "NOT_FOUND", "evaluate", "decision", "no_such_decision")
    failed = cli(weir, "evaluate", "decision", "discount", "--variables", '{"orders": 4, "total": 120}')
    assert failed.returncode == 1 and failed.stderr.startswith("error: decision discount failed: "), failed.stderr
    assert "UNIQUE hit policy" in failed.stderr


def test_delete_a_resource(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    key = str(d.definition_key)
    out = cli(weir, "delete", "resource", key)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"Resource {key} deleted."
    refused(weir, "NOT_FOUND", "create", d.pid())
    refused(weir, "NOT_FOUND", "delete", "resource", key)


HANDLER = """
import json, sys
variables = json.load(sys.stdin)
if variables["n"] % 2:
    print(f"odd number {variables['n']}", file=sys.stderr)
    sys.exit(3)
print(json.dumps({"doubled": variables["n"] * 2}))
"""


def test_a_worker_runs_its_handler_per_job(weir: WeirProcess, stub: Stub, tmp_path: Path) -> None:
    d = deploy(stub, "one-task.bpmn")
    handler = tmp_path / "handler.py"
    handler.write_text(HANDLER)
    instances = {n: create(stub, d.pid(), {"n": n}) for n in (2, 3, 4)}
    out = cli(
        weir,
        "worker",
        d.type("test"),
        "--handler",
        f"{sys.executable} {handler}",
        "--max-jobs-handled",
        "3",
        "--output",
        "json",
    )
    assert out.returncode == 0, out.stderr
    outcomes = {int(o["processInstanceKey"]): o for o in map(json.loads, out.stdout.splitlines())}
    assert outcomes[instances[2]]["outcome"] == "completed" and outcomes[instances[2]]["variables"] == {"doubled": 4}
    assert outcomes[instances[4]]["variables"] == {"doubled": 8}
    failed = outcomes[instances[3]]
    assert failed["outcome"] == "failed" and failed["errorMessage"] == "odd number 3" and failed["retries"] == 2
    eventually(lambda: not is_active(stub, instances[2]), timeout=10, what="the even instances to complete")
    assert is_active(stub, instances[3])
    (retried,) = activate_now(stub, d.type("test"), wait_ms=10_000)
    assert retried.processInstanceKey == instances[3] and retried.retries == 2


def test_a_worker_fails_the_job_when_the_handler_cannot_run_or_prints_no_object(
    weir: WeirProcess, stub: Stub, tmp_path: Path
) -> None:
    d = deploy(stub, "one-task.bpmn")
    create(stub, d.pid())
    out = cli(weir, "worker", d.type("test"), "--handler", str(tmp_path / "missing"), "--max-jobs-handled", "1")
    assert out.returncode == 0, out.stderr
    assert "failed (2 retries left): cannot run the handler" in out.stdout
    out = cli(weir, "worker", d.type("test"), "--handler", "echo [1]", "--max-jobs-handled", "1")
    assert "failed (1 retries left): the handler's output is not a JSON object" in out.stdout, out.stdout

    refused(weir, "INVALID_ARGUMENT", "worker", "", "--handler", "true")
