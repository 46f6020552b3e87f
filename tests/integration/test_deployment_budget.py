"""A deployment of thousands of tiny invalid resources is refused quickly with a message a person can act on, over
gRPC, REST and the broker's command API, while other work on the same node goes on.

Each hostile deployment runs while a canary (a Topology call, then an instance of a one-task process created and its
job completed) works on the same node: the canary must finish, and the hostile call must be answered, within generous
bounds. Without a work budget per deployment the node was held for seconds and the rejection grew to megabytes,
which no gRPC client can even receive.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from pyzeebe.proto import gateway_pb2 as pb

from broker.engine.deployment_limits import DEFAULT_MAX_INVALID_RESOURCES, DEFAULT_MAX_RESOURCES
from broker.protocol.codec import record_from_list
from broker.protocol.enums import DeploymentIntent, RecordType, RejectionType, ValueType
from tests.harness import WeirProcess
from tests.integration.clients import Stub, activate, complete, create, deploy, rpc_error
from tests.integration.test_bad_input_budgets import command_api

# Generous bounds for a noisy machine; the unbounded check took seconds for the hostile call and held the canary.
ANSWER_WITHIN = 20.0
CANARY_WITHIN = 20.0
# gRPC clients refuse a status message (the rejection's text) beyond 16 KiB
GRPC_STATUS_LIMIT = 16 * 1024
# A tiny resource that is not BPMN, but is well-formed XML: each costs a parse and yields a problem.
TINY = b"<a/>"
# A small model with two problems (no task definition, no incoming flow), checked against the schema too.
SMALL_INVALID = (
    b'<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" id="d" targetNamespace="t">'
    b'<process id="p" isExecutable="true"><startEvent id="s"/><serviceTask id="t"/></process></definitions>'
)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    """A broker with an embedded gateway and its command API open."""
    w = WeirProcess(tmp_path_factory.mktemp("deployment-budget") / "data", command_api=True)
    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture(scope="module")
def stub(node: WeirProcess) -> Iterator[Stub]:
    channel = grpc.insecure_channel(node.address, options=[("grpc.max_send_message_length", 8 << 20)])
    try:
        yield Stub(channel)
    finally:
        channel.close()


def while_canary_runs(stub: Stub, hostile: Callable[[], Any]) -> Any:
    """``hostile()``'s result; meanwhile a canary asks for the topology and runs a one-task instance to its end, and
    both must finish within their bounds."""
    d = deploy(stub, "one-task.bpmn")
    started = threading.Event()
    outcome: dict[str, Any] = {}

    def attack() -> None:
        started.set()
        begun = time.monotonic()
        try:
            outcome["result"] = hostile()
        except BaseException as e:  # the test thread reports it
            outcome["error"] = e
        outcome["seconds"] = time.monotonic() - begun

    thread = threading.Thread(target=attack)
    thread.start()
    started.wait()
    begun = time.monotonic()
    stub.Topology(pb.TopologyRequest(), timeout=CANARY_WITHIN)
    create(stub, d.pid())
    (job,) = activate(stub, d.type("test"), within=CANARY_WITHIN)
    complete(stub, job.key)
    canary = time.monotonic() - begun
    thread.join(ANSWER_WITHIN + 30)
    assert not thread.is_alive(), "the hostile deployment was not answered"
    if "error" in outcome:
        raise outcome["error"]
    assert canary < CANARY_WITHIN, f"the canary took {canary:.1f}s"
    assert outcome["seconds"] < ANSWER_WITHIN, f"the hostile deployment was answered after {outcome['seconds']:.1f}s"
    return outcome["result"]


def grpc_deploy(stub: Stub, resources: list[tuple[str, bytes]]) -> grpc.RpcError:
    request = pb.DeployResourceRequest(resources=[pb.Resource(name=n, content=c) for n, c in resources])
    return rpc_error(stub.DeployResource, request, timeout=ANSWER_WITHIN + 10)


def rest_deploy(node: WeirProcess, resources: list[tuple[str, bytes]]) -> tuple[int, str]:
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="resources"; filename="{name}"\r\n'
        f"Content-Type: application/octet-stream\r\n\r\n".encode()
        + content
        + b"\r\n"
        for name, content in resources
    ]
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    request = urllib.request.Request(
        f"{node.rest_url}/v2/deployments",
        data=body,
        method="POST",
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=ANSWER_WITHIN + 10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_grpc_deployment_of_more_resources_than_allowed(stub: Stub) -> None:
    """~3.8 MB of 180,000 tiny resources: refused by count, before any is read."""
    hostile = [(f"r{n}.bpmn", TINY) for n in range(180_000)]
    err = while_canary_runs(stub, lambda: grpc_deploy(stub, hostile))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (err.code(), err.details()[:500])
    assert f"Expected at most {DEFAULT_MAX_RESOURCES} resources in one deployment" in err.details()
    assert "but got 180000" in err.details() and "broker.deployments.maxResources" in err.details()


def test_grpc_deployment_of_many_invalid_resources_lists_the_first(stub: Stub) -> None:
    """As many resources as allowed, all invalid: the first ones are reported, the rest counted."""
    hostile = [(f"r{n}.bpmn", SMALL_INVALID) for n in range(DEFAULT_MAX_RESOURCES)]
    err = while_canary_runs(stub, lambda: grpc_deploy(stub, hostile))
    details = err.details()
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (err.code(), details[:500])
    assert "'r0.bpmn' is not a valid BPMN resource" in details
    assert "'t': Must have exactly one 'zeebe:taskDefinition' extension element" in details
    skipped = DEFAULT_MAX_RESOURCES - DEFAULT_MAX_INVALID_RESOURCES
    assert f"… and {skipped} more resources not checked" in details
    assert "broker.deployments.maxInvalidResources" in details
    assert len(details.encode()) < GRPC_STATUS_LIMIT


def test_rest_deployment_of_many_tiny_resources(node: WeirProcess, stub: Stub) -> None:
    """A 1.7 MB multipart body of tiny parts: 400 naming the limit."""
    hostile = [(f"r{n}.bpmn", TINY) for n in range(11_000)]
    status, body = while_canary_runs(stub, lambda: rest_deploy(node, hostile))
    assert status == 400, body[:500]
    assert "INVALID_ARGUMENT" in body and "broker.deployments.maxResources" in body, body[:500]
    within = [(f"r{n}.dmn", TINY) for n in range(DEFAULT_MAX_RESOURCES)]
    status, body = while_canary_runs(stub, lambda: rest_deploy(node, within))
    assert status == 400, body[:500]
    assert "more resources not checked" in body and len(body) < GRPC_STATUS_LIMIT, body[:500]


def test_the_limits_are_set_in_the_configuration(tmp_path: Path) -> None:
    w = WeirProcess(tmp_path / "data", env={"WEIR_BROKER_DEPLOYMENTS_MAX_RESOURCES": "2"})
    w.start()
    try:
        with grpc.insecure_channel(w.address) as channel:
            err = grpc_deploy(Stub(channel), [(f"r{n}.bpmn", TINY) for n in range(3)])
    finally:
        w.stop()
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Expected at most 2 resources in one deployment" in err.details()


def test_command_api_deployment_is_bounded_by_the_broker_itself(node: WeirProcess, stub: Stub) -> None:
    """Straight to the broker, past any gateway: the broker refuses by itself."""
    resources = [{"resourceName": f"r{n}.dmn", "resource": TINY} for n in range(50_000)]
    command = {"id": 1, "p": 1, "vt": int(ValueType.DEPLOYMENT), "i": int(DeploymentIntent.CREATE), "k": -1}
    answers = while_canary_runs(stub, lambda: command_api(node, [{**command, "v": {"resources": resources}}]))
    record = record_from_list(answers[1]["ok"])
    assert record.record_type == RecordType.COMMAND_REJECTION
    assert record.rejection_type == RejectionType.INVALID_ARGUMENT
    assert "broker.deployments.maxResources" in record.rejection_reason
