"""``weir instances / instance / incidents / jobs / resolve / cancel / publish`` against a real ``weir start``.

Searches go to the REST API v2 (answered from the history store, which trails the log a little: the tests wait for
what they look for); resolve, cancel and publish go over gRPC. Each command is run as a user runs it, as a process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from client.inspect_cli import RestClient
from tests.harness import REPO, WeirProcess, eventually
from tests.integration.clients import Stub, activate_now, create, deploy, pb

# the history store trails the engine (a loaded machine exports slowly): searches wait this long for it
HISTORY_WAIT = 30.0


class RestWeir:
    def __init__(self, process: WeirProcess) -> None:
        self.process = process
        self.rest_address = process.rest_url
        self.rest = RestClient(self.rest_address, "", timeout=10)


@pytest.fixture(scope="module")
def weir_rest(weir: WeirProcess) -> RestWeir:
    return RestWeir(weir)


@pytest.fixture(scope="module")
def stub(weir_rest: RestWeir) -> Iterator[Stub]:
    channel = grpc.insecure_channel(weir_rest.process.address)
    try:
        yield Stub(channel)
    finally:
        channel.close()


def weir(w: RestWeir, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "client.cli", *args, "--address", w.process.address]
    if args[0] not in ("cancel", "publish"):
        command += ["--rest-address", w.rest_address]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)


def weir_json(w: RestWeir, *args: str) -> Any:
    out = weir(w, *args, "--output", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def in_history(w: RestWeir, entity: str, filter_: dict[str, Any], **match: Any) -> dict[str, Any]:
    """Waits until the history store holds an item of the filter whose fields match."""

    def found() -> dict[str, Any] | None:
        for item in w.rest.search(entity, filter_):
            if all(item.get(k) == v for k, v in match.items()):
                return item
        return None

    return eventually(found, timeout=HISTORY_WAIT, what=f"{entity} {filter_} {match} in the history")  # type: ignore[no-any-return]


def test_instances_and_one_instance(weir_rest: RestWeir, stub: Stub) -> None:
    one = deploy(stub, "one-task.bpmn")
    key = create(stub, one.pid(), {"orderId": 7, "customer": "Ada"})
    in_history(weir_rest, "element-instances", {"processInstanceKey": str(key)}, elementId="task", state="ACTIVE")

    listed = weir_json(weir_rest, "instances", "--process", one.pid())
    assert [(i["processInstanceKey"], i["state"]) for i in listed] == [(str(key), "ACTIVE")]
    table = weir(weir_rest, "instances", "--state", "ACTIVE")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split()[:4] == ["KEY", "PROCESS", "VERSION", "STATE"]
    assert any(str(key) in line and one.pid() in line and "ACTIVE" in line for line in table.stdout.splitlines())

    shown = weir_json(weir_rest, "instance", str(key))
    assert shown["instance"]["processInstanceKey"] == str(key)
    assert {e["elementId"]: e["state"] for e in shown["elements"]}["task"] == "ACTIVE"
    assert {v["name"]: v["value"] for v in shown["variables"]} == {"orderId": "7", "customer": '"Ada"'}
    assert shown["incidents"] == []
    text = weir(weir_rest, "instance", str(key)).stdout
    assert f"Instance {key} of {one.pid()} v1: ACTIVE" in text
    assert any("Task [SERVICE_TASK] ACTIVE" in line for line in text.split("Elements:")[1].splitlines())
    assert "orderId" in text and '"Ada"' in text


def test_instance_draws_the_element_tree(weir_rest: RestWeir, stub: Stub) -> None:
    nested = deploy(stub, "error-subprocess.bpmn")
    key = create(stub, nested.pid())
    in_history(weir_rest, "element-instances", {"processInstanceKey": str(key)}, elementId="check", state="ACTIVE")
    out = weir(weir_rest, "instance", str(key))
    assert out.returncode == 0, out.stderr
    # each line names the element by its name, or its id where it has none (the start event)
    tree = out.stdout.split("Elements:")[1].split("Variables:")[0].splitlines()
    sub_process = next(line for line in tree if line.lstrip().startswith("Validation [SUB_PROCESS] ACTIVE"))
    check = next(line for line in tree if line.lstrip().startswith("Check [SERVICE_TASK] ACTIVE"))
    start = next(line for line in tree if line.lstrip().startswith("start [START_EVENT] COMPLETED"))

    def indent(line: str) -> int:
        return len(line) - len(line.lstrip())

    # the task is drawn inside its sub-process, which sits beside the process's start event
    assert indent(check) > indent(sub_process) == indent(start)
    assert tree.index(check) > tree.index(sub_process) > tree.index(start)


def test_incidents_and_resolve_give_the_job_retries_back(weir_rest: RestWeir, stub: Stub) -> None:
    one = deploy(stub, "one-task.bpmn")
    key = create(stub, one.pid())
    (job,) = activate_now(stub, one.type("test"), 1)
    stub.FailJob(pb.FailJobRequest(jobKey=job.key, retries=0, errorMessage="database down"), timeout=10)
    incident = in_history(weir_rest, "incidents", {"processInstanceKey": str(key)}, state="ACTIVE")

    listed = weir_json(weir_rest, "incidents", "--instance", str(key))
    assert [(i["incidentKey"], i["errorType"], i["jobKey"]) for i in listed] == [
        (incident["incidentKey"], "JOB_NO_RETRIES", str(job.key))
    ]
    table = weir(weir_rest, "incidents").stdout
    assert any(incident["incidentKey"] in line and "database down" in line for line in table.splitlines())
    jobs = weir_json(weir_rest, "jobs", "--type", one.type("test"))
    assert [(j["jobKey"], j["retries"]) for j in jobs] == [(str(job.key), 0)]

    out = weir(weir_rest, "resolve", incident["incidentKey"], "--retries", "2")
    assert out.returncode == 0, out.stderr
    assert f"job {job.key} got 2 retries" in out.stdout
    (again,) = activate_now(stub, one.type("test"), 1)
    assert again.key == job.key and again.retries == 2
    in_history(weir_rest, "incidents", {"processInstanceKey": str(key)}, state="RESOLVED")
    assert weir_json(weir_rest, "incidents", "--instance", str(key)) == []


def test_cancel_and_publish(weir_rest: RestWeir, stub: Stub) -> None:
    one = deploy(stub, "one-task.bpmn")
    doomed = create(stub, one.pid())
    out = weir(weir_rest, "cancel", str(doomed))
    assert out.returncode == 0, out.stderr
    assert f"Process instance {doomed} canceled." in out.stdout
    in_history(weir_rest, "process-instances", {"processInstanceKey": str(doomed)}, state="TERMINATED")
    out = weir(weir_rest, "cancel", str(doomed))
    assert out.returncode == 1 and "NOT_FOUND" in out.stderr

    waiting = deploy(stub, "message-catch.bpmn")
    key = create(stub, waiting.pid(), {"requestId": f"r-{waiting.suffix}"})
    in_history(weir_rest, "element-instances", {"processInstanceKey": str(key)}, elementId="wait-message")
    published = weir_json(
        weir_rest, "publish", "approved", "--correlation-key", f"r-{waiting.suffix}", "--variables", '{"ok": true}'
    )
    assert int(published["key"]) > 0
    in_history(
        weir_rest, "element-instances", {"processInstanceKey": str(key)}, elementId="wait-message", state="COMPLETED"
    )
    assert in_history(weir_rest, "variables", {"processInstanceKey": str(key), "name": "ok"})["value"] == "true"


def test_failures_are_one_clear_line(weir_rest: RestWeir) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "client.cli", "instances", "--rest-address", "http://127.0.0.1:1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert "cannot reach the REST API at http://127.0.0.1:1" in out.stderr and "WEIR_REST_ADDRESS" in out.stderr

    out = weir(weir_rest, "instance", "2251799813685999")
    assert out.returncode == 1
    assert "404" in out.stderr and out.stderr.count("\n") == 1
