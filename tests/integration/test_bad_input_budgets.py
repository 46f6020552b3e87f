"""Bad input at the edges of what can be stored or sent gets a clear error, and nothing else happens.

Each case sends the bad input to a real broker (through the gateway, and where it matters straight to the broker's
command API, which a gateway in another process uses) and then shows that a normal workflow still completes on the
same broker: one bad value must never stop a partition or block other work.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import msgpack
import pytest
from google.protobuf.descriptor import FieldDescriptor as FD
from pyzeebe.proto import gateway_pb2 as pb

from broker.protocol.enums import JobIntent, MessageIntent, SignalIntent, ValueType, VariableDocumentIntent
from tests.harness import BPMN, CliProcess, WeirProcess, eventually, free_port, retry_on_taken_port
from tests.integration.clients import (
    Stub,
    activate,
    activate_now,
    complete,
    create,
    deploy,
    is_active,
    open_incidents,
    rpc_error,
    variables_of,
)

SURROGATE = '{"a": "\\ud800"}'  # JSON text that decodes to a lone UTF-16 surrogate


PUSH_BOUND = {"WEIR_MAX_PENDING_PUSHES": "32"}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    """A broker with an embedded gateway and its command API open."""
    # a small bound on the pushes a stalled job stream may hold, so that the hoarding test needs few jobs
    w = WeirProcess(tmp_path_factory.mktemp("budgets") / "data", command_api=True, env=PUSH_BOUND)
    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture(scope="module")
def stub(node: WeirProcess) -> Iterator[Stub]:
    channel = grpc.insecure_channel(node.address)
    try:
        yield Stub(channel)
    finally:
        channel.close()


def assert_workflow_completes(stub: Stub) -> None:
    """A deploy, a create, a job round trip and the instance's end: the partition still works."""
    d = deploy(stub, "one-task.bpmn")
    future = stub.CreateProcessInstanceWithResult.future(
        pb.CreateProcessInstanceWithResultRequest(
            request=pb.CreateProcessInstanceRequest(bpmnProcessId=d.pid(), version=-1, variables='{"alive": true}'),
            requestTimeout=10_000,
        ),
        timeout=15,
    )
    (job,) = activate(stub, d.type("test"))
    assert variables_of(job) == {"alive": True}
    complete(stub, job.key, {"done": 1})
    assert json.loads(future.result().variables) == {"alive": True, "done": 1}


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def command_api(node: WeirProcess, commands: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Send commands in one message to the broker's ``Execute``-by-stream API; answers by request id."""
    identity = lambda b: b  # noqa: E731
    with grpc.insecure_channel(f"127.0.0.1:{node.command_port}") as channel:
        call = channel.stream_stream("/weir.broker.CommandApi/Commands", identity, identity)
        batch = b"".join(msgpack.packb(c, use_bin_type=True, unicode_errors="surrogatepass") for c in commands)
        answers: dict[int, dict[str, Any]] = {}
        for reply in call(iter([batch]), timeout=20):
            unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
            unpacker.feed(reply)
            for answer in unpacker:
                answers[answer["id"]] = answer
        return answers


# -- item 1: lone surrogates ---------------------------------------------------------------------------------


def test_lone_surrogate_in_variables_is_refused_by_every_rpc(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    pi = create(stub, d.pid(), {"n": 1})
    (job,) = activate(stub, d.type("test"))
    calls: list[tuple[Any, Any]] = [
        (stub.CreateProcessInstance, pb.CreateProcessInstanceRequest(bpmnProcessId=d.pid(), variables=SURROGATE)),
        (stub.CompleteJob, pb.CompleteJobRequest(jobKey=job.key, variables=SURROGATE)),
        (stub.FailJob, pb.FailJobRequest(jobKey=job.key, retries=1, variables=SURROGATE)),
        (stub.ThrowError, pb.ThrowErrorRequest(jobKey=job.key, errorCode="E", variables=SURROGATE)),
        (stub.SetVariables, pb.SetVariablesRequest(elementInstanceKey=pi, variables=SURROGATE)),
        (stub.PublishMessage, pb.PublishMessageRequest(name="m", correlationKey="k", variables=SURROGATE)),
        (stub.BroadcastSignal, pb.BroadcastSignalRequest(signalName="s", variables=SURROGATE)),
        (
            stub.SetVariables,
            pb.SetVariablesRequest(elementInstanceKey=pi, variables='{"ok": {"\\udc00name": 1}}'),
        ),
    ]
    for call, request in calls:
        err = rpc_error(call, request)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (request, err.details())
        assert "surrogate" in err.details(), err.details()
        assert "'a'" in err.details() or "name" in err.details(), err.details()
    complete(stub, job.key, {"n": 2})
    assert_workflow_completes(stub)


def test_command_api_refuses_values_that_cannot_be_stored_or_shown(stub: Stub, node: WeirProcess) -> None:
    """The broker checks commands itself: a gateway in another process (or any caller) cannot stop a partition."""
    d = deploy(stub, "one-task.bpmn")
    bad_values: dict[str, Any] = {
        "surrogate": "\ud800",
        "nan": float("nan"),
        "infinity": float("inf"),
        "extension": msgpack.ExtType(42, b"\x00"),
        "bytes": b"raw",
        "deep": _nested(150),
    }
    create = int(ValueType.PROCESS_INSTANCE_CREATION)
    commands = []
    for i, (name, bad) in enumerate(bad_values.items()):
        value = {"bpmnProcessId": d.pid(), "version": -1, "processDefinitionKey": -1, "variables": {name: bad}}
        commands.append({"id": i, "p": 1, "vt": create, "i": 0, "k": -1, "v": value})
    # the surrogate in a field other than variables (a message name); then a good creation in the same message
    message = {"name": "x\udc00", "correlationKey": "k"}
    commands.append({"id": 100, "p": 1, "vt": int(ValueType.MESSAGE), "i": 0, "k": -1, "v": message})
    good = {"bpmnProcessId": d.pid(), "version": -1, "processDefinitionKey": -1, "variables": {"fine": 1}}
    commands.append({"id": 101, "p": 1, "vt": create, "i": 0, "k": -1, "v": good})
    answers = command_api(node, commands)
    for i, name in enumerate(bad_values):
        assert answers[i].get("err") == "invalid", (name, answers[i])
        assert f"'{name}" in answers[i]["msg"], answers[i]["msg"]
    assert answers[100].get("err") == "invalid" and "'name'" in answers[100]["msg"]
    assert "ok" in answers[101], answers[101]
    (job,) = activate(stub, d.type("test"))
    assert variables_of(job) == {"fine": 1}, "only the good creation started an instance"
    complete(stub, job.key)
    assert_workflow_completes(stub)


def _string_field(number: int, value: bytes) -> bytes:
    return bytes([number << 3 | 2, len(value)]) + value


def test_requests_that_are_not_valid_protobuf_are_invalid_arguments(stub: Stub, node: WeirProcess) -> None:
    """A lone surrogate can also arrive as CESU-8 bytes in a string field, which protobuf cannot decode: the call
    gets INVALID_ARGUMENT (not UNKNOWN), and the gateway logs no traceback for it."""
    surrogate = b"x\xed\xa0\x80"  # U+D800 encoded as if it were a character: not UTF-8
    calls = {
        "PublishMessage": _string_field(1, surrogate) + _string_field(2, b"k"),
        "CreateProcessInstance": _string_field(2, surrogate),
        "BroadcastSignal": _string_field(1, surrogate),
        "ThrowError": b"\x08\x01" + _string_field(2, surrogate),
        "ActivateJobs": _string_field(1, surrogate) + b"\x20\x01",
        "StreamActivatedJobs": _string_field(1, surrogate),
        "DeployResource": b"\xff\xff\xff\xff not protobuf",
    }
    logged_before = len(node.log_path.read_bytes())
    identity = lambda b: b  # noqa: E731
    with grpc.insecure_channel(node.address) as channel:
        for method, raw in calls.items():
            path = f"/gateway_protocol.Gateway/{method}"
            streaming = method in ("ActivateJobs", "StreamActivatedJobs")
            call = (channel.unary_stream if streaming else channel.unary_unary)(path, identity, identity)
            err = rpc_error(call, raw)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, err.code(), err.details())
            assert method in err.details() and "could not be decoded" in err.details(), err.details()
    assert_workflow_completes(stub)
    logged = node.log_path.read_bytes()[logged_before:].decode(errors="replace")
    assert "Traceback" not in logged and "ERROR" not in logged, logged[-3000:]


def test_command_api_refuses_a_lone_surrogate_in_every_command_with_variables(stub: Stub, node: WeirProcess) -> None:
    """Job completion and failure, variable documents, signals and messages straight to the broker: each refused
    naming the variable, none processed, and the good command after them in the same message is."""
    d = deploy(stub, "one-task.bpmn")
    pi = create(stub, d.pid(), {"n": 1})
    (job,) = activate(stub, d.type("test"))
    bad = {"a": "\ud800"}
    commands = [
        (ValueType.JOB, JobIntent.COMPLETE, job.key, {"variables": bad}),
        (ValueType.JOB, JobIntent.FAIL, job.key, {"retries": 1, "errorMessage": "", "variables": bad}),
        (ValueType.VARIABLE_DOCUMENT, VariableDocumentIntent.UPDATE, -1, {"scopeKey": pi, "variables": bad}),
        (ValueType.SIGNAL, SignalIntent.BROADCAST, -1, {"signalName": "s", "variables": bad}),
        (ValueType.MESSAGE, MessageIntent.PUBLISH, -1, {"name": "m", "correlationKey": "k", "variables": bad}),
    ]
    batch = [
        {"id": i, "p": 1, "vt": int(vt), "i": int(intent), "k": key, "v": value}
        for i, (vt, intent, key, value) in enumerate(commands)
    ]
    good = {"variables": {"done": "\U0001f600"}}  # a whole emoji is fine
    batch.append({"id": 99, "p": 1, "vt": int(ValueType.JOB), "i": int(JobIntent.COMPLETE), "k": job.key, "v": good})
    answers = command_api(node, batch)
    for i, (vt, *_rest) in enumerate(commands):
        assert answers[i].get("err") == "invalid", (vt, answers[i])
        assert "surrogate" in answers[i]["msg"] and "'a'" in answers[i]["msg"], answers[i]["msg"]
    assert "ok" in answers[99], answers[99]
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete with the good command")
    assert_workflow_completes(stub)


def test_command_api_refuses_malformed_commands_without_stopping_the_partition(stub: Stub, node: WeirProcess) -> None:
    """An intent its value type does not have used to stop the partition (the round failed while describing it);
    malformed job stream requests ended with UNKNOWN and a logged traceback. Each is now refused on its own."""
    logged_before = len(node.log_path.read_bytes())
    pi_type = int(ValueType.PROCESS_INSTANCE)
    commands = [
        {"id": 1, "p": 1, "vt": pi_type, "i": 77, "k": -1, "v": {}},
        {"id": 2, "p": 1, "vt": int(ValueType.JOB), "i": -3, "k": 1, "v": {}},
        {"id": 3, "p": 1, "vt": 999, "i": 0, "k": -1, "v": {}},
        {"id": 4, "p": "one", "vt": pi_type, "i": 0, "k": -1, "v": {}},
        {"id": 5, "p": 1, "vt": pi_type, "i": 0, "k": -1, "v": [1, 2]},
    ]
    answers = command_api(node, commands)
    for command in commands:
        answer = answers[command["id"]]
        assert answer.get("err") == "invalid", (command, answer)
    assert "intent 77" in answers[1]["msg"]
    identity = lambda b: b  # noqa: E731
    with grpc.insecure_channel(f"127.0.0.1:{node.command_port}") as channel:
        stream_jobs = channel.unary_stream("/weir.broker.CommandApi/StreamJobs", identity, identity)
        for request in (b"\xc1", msgpack.packb([1]), msgpack.packb({"type": "t", "timeout": 1000})):
            err = rpc_error(stream_jobs, request)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (request, err.code(), err.details())
            assert "malformed job stream request" in err.details()
    assert_workflow_completes(stub)
    logged = node.log_path.read_bytes()[logged_before:].decode(errors="replace")
    assert "Traceback" not in logged and "stopped" not in logged, logged[-3000:]


def test_a_lone_surrogate_made_by_the_model_is_an_incident(stub: Stub, node: WeirProcess) -> None:
    """FEEL can build a lone surrogate (an escape, half of an emoji): where a model makes one, its element gets an
    incident naming the expression; the value never reaches the log, and the partition goes on."""
    d = deploy(stub, "surrogate-model.bpmn")
    made = {create(stub, d.pid(p)): element for p, element in (("sur-input", "si-task"), ("sur-type", "st-task"))}
    made[create(stub, d.pid("sur-message"))] = "sm-wait"
    assert_workflow_completes(stub)
    for pi in made:
        assert is_active(stub, pi), "an instance whose model made a lone surrogate waits on its incident"
    node.stop()
    try:
        incidents = {r.value["processInstanceKey"]: r.value for r in open_incidents(node)}
    finally:
        node.start()
    for pi, element in made.items():
        assert incidents[pi]["elementId"] == element, incidents.get(pi)
        assert "lone UTF-16 surrogate" in incidents[pi]["errorMessage"], incidents[pi]["errorMessage"]
    assert_workflow_completes(stub)


# -- item 4: values JSON cannot show -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "document",
    ['{"a": 1e400}', '{"a": -1e400}', '{"a": 100000000000000000000000}', '{"a": ' + "[" * 150 + "]" * 150 + "}"],
)
def test_numbers_and_nesting_that_cannot_be_stored_are_refused(stub: Stub, document: str) -> None:
    d = deploy(stub, "one-task.bpmn")
    err = rpc_error(
        stub.CreateProcessInstance, pb.CreateProcessInstanceRequest(bpmnProcessId=d.pid(), variables=document)
    )
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
    assert "'a" in err.details(), err.details()
    assert_workflow_completes(stub)


# -- item 3: numeric fields out of range ---------------------------------------------------------------------

INT64_MAX = 2**63 - 1


def test_out_of_range_numbers_are_refused_and_no_job_is_lost(stub: Stub) -> None:
    d = deploy(stub, "one-task.bpmn")
    pi = create(stub, d.pid())
    job_type = d.type("test")
    activation = {"type": job_type, "worker": "w", "timeout": 1000, "maxJobsToActivate": 1, "requestTimeout": -1}
    calls: list[tuple[Any, Any, str]] = [
        (stub.ActivateJobs, pb.ActivateJobsRequest(**{**activation, "timeout": INT64_MAX}), "timeout"),
        (stub.ActivateJobs, pb.ActivateJobsRequest(**{**activation, "requestTimeout": INT64_MAX}), "requestTimeout"),
        (
            stub.StreamActivatedJobs,
            pb.StreamActivatedJobsRequest(type=job_type, worker="w", timeout=INT64_MAX),
            "timeout",
        ),
        (stub.PublishMessage, pb.PublishMessageRequest(name="m", timeToLive=INT64_MAX), "timeToLive"),
        (stub.PublishMessage, pb.PublishMessageRequest(name="m", timeToLive=-1), "timeToLive"),
        (
            stub.CreateProcessInstanceWithResult,
            pb.CreateProcessInstanceWithResultRequest(
                request=pb.CreateProcessInstanceRequest(bpmnProcessId=d.pid(), version=-1), requestTimeout=INT64_MAX
            ),
            "requestTimeout",
        ),
        (stub.CreateProcessInstance, pb.CreateProcessInstanceRequest(bpmnProcessId=d.pid(), version=-7), "version"),
    ]
    for call, request, named in calls:
        err = rpc_error(call, request)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (request, err.details())
        assert named in err.details(), err.details()

    # the job was never activated by the refused requests: it is delivered now, then refused bad updates leave it be
    (job,) = activate(stub, job_type)
    assert job.processInstanceKey == pi
    for call, request, named in [
        (stub.UpdateJobTimeout, pb.UpdateJobTimeoutRequest(jobKey=job.key, timeout=INT64_MAX), "timeout"),
        (stub.FailJob, pb.FailJobRequest(jobKey=job.key, retries=1, retryBackOff=INT64_MAX), "retryBackOff"),
        (stub.FailJob, pb.FailJobRequest(jobKey=job.key, retries=-1), "retries"),
    ]:
        err = rpc_error(call, request)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (request, err.details())
        assert named in err.details(), err.details()
    complete(stub, job.key)
    assert_workflow_completes(stub)


_INTS = {FD.TYPE_INT64, FD.TYPE_INT32, FD.TYPE_SINT64, FD.TYPE_SINT32, FD.TYPE_SFIXED64, FD.TYPE_SFIXED32}
_UINTS = {FD.TYPE_UINT64, FD.TYPE_UINT32, FD.TYPE_FIXED64, FD.TYPE_FIXED32}
_BAD_TEXTS = ["", "x" * 300_000, "a\x00b", "{" * 100_000, "[" * 100_000]


def _repeated(field: Any) -> bool:
    repeated = getattr(type(field), "is_repeated", None)  # newer protobuf; label is deprecated there
    return bool(field.is_repeated) if repeated is not None else field.label == FD.LABEL_REPEATED


def _extremes(field: Any) -> list[Any]:
    if field.type == FD.TYPE_STRING:
        return _BAD_TEXTS
    wide = field.type not in (FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32, FD.TYPE_UINT32, FD.TYPE_FIXED32)
    if field.type in _UINTS:
        return [2**64 - 1 if wide else 2**32 - 1]
    limit = 2**63 if wide else 2**31
    return [limit - 1, -limit, -1, 0]


def test_extreme_values_in_every_field_of_every_rpc_get_a_clear_status(stub: Stub, node: WeirProcess) -> None:
    """Each scalar field of each gateway request, one at a time, at the ends of its type (and strings empty, of a
    300 kB, with NUL, or opening 100,000 brackets) while the others hold sensible values: no call ends with
    UNKNOWN, INTERNAL or UNAVAILABLE, none logs an error, and the partition keeps serving."""
    d = deploy(stub, "one-task.bpmn")
    pi = create(stub, d.pid())
    (job,) = activate(stub, d.type("test"))
    sensible = {
        "variables": "{}",
        "bpmnProcessId": d.pid(),
        "type": d.type("test") + "-other",
        "jobKey": job.key,
        "processInstanceKey": pi,
        "elementInstanceKey": pi,
        "timeout": 1000,
        "requestTimeout": 500,
        "maxJobsToActivate": 1,
        "retries": 1,
        "version": -1,
    }
    logged_before = len(node.log_path.read_bytes())
    unclear = []
    calls = 0
    for method in pb.DESCRIPTOR.services_by_name["Gateway"].methods:
        request_type = getattr(pb, method.input_type.name)
        scalars = [
            f
            for f in method.input_type.fields
            if not _repeated(f) and (f.type == FD.TYPE_STRING or f.type in _INTS | _UINTS)
        ]
        for field in scalars:
            for value in _extremes(field):
                if field.name == "requestTimeout" and value == 0:
                    continue  # the default long poll: ten seconds of waiting for nothing
                request = request_type()
                for other in scalars:
                    if other.name in sensible:
                        setattr(request, other.name, sensible[other.name])
                    elif other.type == FD.TYPE_STRING:
                        setattr(request, other.name, "x")
                setattr(request, field.name, value)
                calls += 1
                try:
                    wait = 0.5 if method.name == "StreamActivatedJobs" else 20  # a stream never ends by itself
                    answer = getattr(stub, method.name)(request, timeout=wait)
                    if method.server_streaming:
                        list(answer)
                except grpc.RpcError as e:
                    code = e.code()
                    endless = method.name == "StreamActivatedJobs" and code == grpc.StatusCode.DEADLINE_EXCEEDED
                    if code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE) or (
                        code == grpc.StatusCode.DEADLINE_EXCEEDED and not endless
                    ):
                        details = (e.details() or "")[:200]
                        unclear.append((method.name, field.name, repr(value)[:20], code.name, details))
    assert calls > 200
    assert not unclear, unclear
    assert_workflow_completes(stub)
    logged = node.log_path.read_bytes()[logged_before:].decode(errors="replace")
    assert "Traceback" not in logged and " ERROR " not in logged, logged[-3000:]


def test_command_api_activation_with_an_endless_timeout_is_rejected(stub: Stub, node: WeirProcess) -> None:
    """Without the gateway's validation, the partition itself refuses to activate a job it could never send."""
    d = deploy(stub, "one-task.bpmn")
    create(stub, d.pid())
    value = {
        "type": d.type("test"),
        "worker": "w",
        "timeout": INT64_MAX,
        "maxJobsToActivate": 5,
        "variables": [],
        "jobKeys": [],
        "jobs": [],
        "truncated": False,
    }
    answers = command_api(node, [{"id": 1, "p": 1, "vt": int(ValueType.JOB_BATCH), "i": 0, "k": -1, "v": value}])
    record = answers[1]["ok"]
    assert record[2] == 2, record  # COMMAND_REJECTION
    assert "timeout" in record[9]
    identity = lambda b: b  # noqa: E731
    with grpc.insecure_channel(f"127.0.0.1:{node.command_port}") as channel:
        stream_jobs = channel.unary_stream("/weir.broker.CommandApi/StreamJobs", identity, identity)
        request = msgpack.packb({"type": d.type("test"), "worker": "w", "timeout": INT64_MAX, "fetch": []})
        err = rpc_error(stream_jobs, request)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "timeout" in err.details(), err.details()
    (job,) = activate(stub, d.type("test"))  # still activatable, and delivered
    complete(stub, job.key)
    assert_workflow_completes(stub)


@contextlib.contextmanager
def separate_gateway(node: WeirProcess, tmp_path: Path) -> Iterator[str]:
    """A `weir gateway` in its own process in front of ``node``'s command API; yields its address."""

    def start(_attempt: int) -> tuple[CliProcess, int]:
        gateway_port, monitoring_port = free_port(), free_port()
        args = ["gateway", "--broker", f"127.0.0.1:{node.command_port}", "--gateway-port", str(gateway_port)]
        args += ["--rest-port", "0", "--monitoring-port", str(monitoring_port)]
        return CliProcess(args, tmp_path / "gateway.log", PUSH_BOUND).wait_running(monitoring_port), gateway_port

    gateway, gateway_port = retry_on_taken_port(start)
    try:
        yield f"127.0.0.1:{gateway_port}"
    finally:
        gateway.stop()


@pytest.mark.parametrize("gateway", ["embedded", "separate"])
def test_a_stream_that_stops_reading_cannot_hoard_jobs(
    stub: Stub, node: WeirProcess, tmp_path: Path, gateway: str
) -> None:
    """A StreamActivatedJobs client that stops reading holds a bounded number of pushed jobs; the other jobs of its
    type stay activatable for other workers at once, and when it goes its stream is gone at once too."""
    d = deploy(stub, "one-task.bpmn")
    job_type = d.type("test")
    polled: dict[int, pb.ActivatedJob] = {}

    def poll() -> int:
        for job in activate_now(stub, job_type, 50):  # at most 16 of these jobs fit one response
            polled[job.processInstanceKey] = job
        return len(polled)

    with contextlib.ExitStack() as stack:
        address = node.address if gateway == "embedded" else stack.enter_context(separate_gateway(node, tmp_path))
        channel = stack.enter_context(grpc.insecure_channel(address))
        stalled = Stub(channel).StreamActivatedJobs(
            pb.StreamActivatedJobsRequest(type=job_type, worker="stalled", timeout=600_000), timeout=120
        )
        # the stream is open once it has received a first job; from then on its client reads nothing (a job
        # created before a separate gateway has registered the stream with the broker is not pushed: wait a moment)
        time.sleep(2)
        first = create(stub, d.pid(), {"i": -1})
        assert next(stalled).processInstanceKey == first
        # It takes what HTTP/2 flow control lets through to the client's buffers (delivered, as far as a server can
        # tell: those come back at their timeout) and at most MAX_PENDING_PUSHES (32) more waiting in the gateway.
        # Before the bound it took every job of its type for as long as it stayed connected.
        count = 100
        for i in range(count):
            create(stub, d.pid(), {"i": i, "pad": "x" * 250_000})
        eventually(lambda: poll() >= 20, timeout=30, what=f"the stalled stream to leave some of {count} jobs to others")
        time.sleep(1)
        left_to_others = poll()
        while poll() > left_to_others:
            left_to_others = len(polled)
        print(f"{count - left_to_others} of {count} jobs held by the stream that stopped reading ({gateway} gateway)")
        stalled.cancel()
    # the jobs that waited in the gateway come back at once, and the stream takes no more jobs
    time.sleep(1)
    after_close = {create(stub, d.pid(), {"i": count + i}) for i in range(10)}
    eventually(lambda: poll() and after_close <= set(polled), timeout=10, what="jobs created after the stream went")
    print(f"{len(polled) - left_to_others - 10} came back when it went")
    for job in polled.values():
        complete(stub, job.key)
    assert_workflow_completes(stub)


# -- item 6: models nested too deeply ------------------------------------------------------------------------


def nested_model(process_id: str, depth: int, job_type: str, source: str = "= true") -> bytes:
    """A process whose only task sits ``depth`` sub-processes deep; the task maps ``source`` to a variable."""
    inner = (
        f'<bpmn:startEvent id="s{depth}"/><bpmn:sequenceFlow id="f{depth}a" sourceRef="s{depth}" targetRef="task"/>'
        f'<bpmn:serviceTask id="task"><bpmn:extensionElements><zeebe:taskDefinition type="{job_type}"/>'
        f'<zeebe:ioMapping><zeebe:input source="{source}" target="mapped"/></zeebe:ioMapping>'
        "</bpmn:extensionElements></bpmn:serviceTask>"
        f'<bpmn:sequenceFlow id="f{depth}b" sourceRef="task" targetRef="e{depth}"/>'
        f'<bpmn:endEvent id="e{depth}"/>'
    )
    for d in reversed(range(depth)):
        inner = (
            f'<bpmn:startEvent id="s{d}"/><bpmn:sequenceFlow id="f{d}a" sourceRef="s{d}" targetRef="sub{d}"/>'
            f'<bpmn:subProcess id="sub{d}">{inner}</bpmn:subProcess>'
            f'<bpmn:sequenceFlow id="f{d}b" sourceRef="sub{d}" targetRef="e{d}"/><bpmn:endEvent id="e{d}"/>'
        )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" '
        'xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="defs" targetNamespace="http://bpmn.io/schema/bpmn">'
        f'<bpmn:process id="{process_id}" isExecutable="true">{inner}</bpmn:process></bpmn:definitions>'
    ).encode()


def test_deeply_nested_models_and_expressions_are_refused_naming_the_element(stub: Stub) -> None:
    suffix = uuid.uuid4().hex[:8]
    cases = [
        (nested_model(f"deep-{suffix}", 51, "deep"), "'sub50'"),
        (nested_model(f"deeper-{suffix}", 1500, "deep"), "'sub50'"),
        (nested_model(f"feel-{suffix}", 1, "deep", "= " + "(" * 3000 + "true" + ")" * 3000), "'task'"),
        (nested_model(f"feel2-{suffix}", 1, "deep", "= " + "[" * 3000 + "]" * 3000 + " = []"), "'task'"),
    ]
    for content, element in cases:
        request = pb.DeployResourceRequest(resources=[pb.Resource(name="deep.bpmn", content=content)])
        err = rpc_error(stub.DeployResource, request)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()[:300]
        assert element in err.details(), err.details()[:500]
        assert "nested" in err.details(), err.details()[:500]

    # the deepest nesting allowed deploys and runs to its end
    job_type = f"deep-{suffix}"
    content = nested_model(f"deepest-{suffix}", 50, job_type)
    stub.DeployResource(pb.DeployResourceRequest(resources=[pb.Resource(name="ok.bpmn", content=content)]), timeout=10)
    future = stub.CreateProcessInstanceWithResult.future(
        pb.CreateProcessInstanceWithResultRequest(
            request=pb.CreateProcessInstanceRequest(bpmnProcessId=f"deepest-{suffix}", version=-1),
            requestTimeout=20_000,
        ),
        timeout=25,
    )
    (job,) = activate(stub, job_type, within=15)
    complete(stub, job.key, {"deep": True})
    assert json.loads(future.result().variables) == {"deep": True}
    cancelled = create(stub, f"deepest-{suffix}")
    activate(stub, job_type, within=15)
    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=cancelled), timeout=10)
    assert not is_active(stub, cancelled)
    assert_workflow_completes(stub)


# -- item 5: names and keys longer than an index key ---------------------------------------------------------


def test_long_names_and_correlation_keys_work_like_short_ones(stub: Stub) -> None:
    """LMDB keys hold 511 bytes: longer names, job types, ids and correlation keys work all the same."""
    check_long_names(stub)
    assert_workflow_completes(stub)


def test_long_names_work_across_partitions(tmp_path: Path) -> None:
    """With several partitions the subscription travels to the message's partition and back (the outbox)."""
    w = WeirProcess(tmp_path / "data", extra_args=["--partitions", "3"])
    w.start()
    channel = grpc.insecure_channel(w.address)
    try:
        for _ in range(3):  # instances start round-robin: some surely live apart from their message
            check_long_names(Stub(channel))
    finally:
        channel.close()
        w.kill()


def check_long_names(stub: Stub) -> None:
    suffix = uuid.uuid4().hex[:8]
    message_name = f"approved-{suffix}-" + "n" * 1500
    job_type = f"approved-{suffix}-" + "t" * 700
    text = (BPMN / "message-catch.bpmn").read_text()
    text = text.replace('id="message-catch"', f'id="long-{suffix}"')
    text = text.replace('name="approved"', f'name="{message_name}"')
    text = text.replace('type="approved"', f'type="{job_type}"')
    stub.DeployResource(
        pb.DeployResourceRequest(resources=[pb.Resource(name="long.bpmn", content=text.encode())]), timeout=10
    )
    long_key = "k" * 5000
    long_variable = "v" * 800
    # with several partitions the deployment reaches the others a moment later
    waiting = eventually(
        lambda: create(stub, f"long-{suffix}", {"requestId": long_key, long_variable: 1}), what="a first instance"
    )
    other = eventually(lambda: create(stub, f"long-{suffix}", {"requestId": long_key + "-other"}), what="an instance")

    published = pb.PublishMessageRequest(
        name=message_name, correlationKey=long_key, messageId="i" * 3000, timeToLive=60_000, variables='{"m": 1}'
    )
    stub.PublishMessage(published, timeout=10)
    err = rpc_error(stub.PublishMessage, published)
    assert err.code() == grpc.StatusCode.ALREADY_EXISTS, err.details()[:200]

    (job,) = activate(stub, job_type)
    assert job.processInstanceKey == waiting
    assert variables_of(job) == {"requestId": long_key, long_variable: 1, "m": 1}
    complete(stub, job.key)
    assert not is_active(stub, waiting)
    assert is_active(stub, other), "a different correlation key did not correlate"
    stub.PublishMessage(
        pb.PublishMessageRequest(name=message_name, correlationKey=long_key + "-other", timeToLive=0), timeout=10
    )
    (job,) = activate(stub, job_type)
    assert job.processInstanceKey == other
    complete(stub, job.key)


# -- item 4: activations larger than a message ----------------------------------------------------------------

SMALL_MESSAGE = 256 * 1024  # the broker under test sends and takes messages of at most this size


@pytest.fixture
def small_node(tmp_path: Path) -> Iterator[WeirProcess]:
    """A broker whose max message size is 256 KiB, so the limits are reached with small documents."""
    w = WeirProcess(tmp_path / "data", command_api=True, extra_args=["--max-message-size", str(SMALL_MESSAGE)])
    w.start()
    try:
        yield w
    finally:
        w.kill()


def test_activations_never_exceed_the_message_size_and_oversized_jobs_raise_incidents(small_node: WeirProcess) -> None:
    channel = grpc.insecure_channel(small_node.address)
    stub = Stub(channel)
    try:
        d = deploy(stub, "one-task.bpmn")
        job_type = d.type("test")
        big = "x" * (100 * 1024)
        batch = [create(stub, d.pid(), {"big": big, "n": n}) for n in range(3)]

        # two of these jobs together exceed a message: each request gets what fits, the rest stays for the next
        delivered: list[pb.ActivatedJob] = []
        for _ in range(3):
            request = pb.ActivateJobsRequest(
                type=job_type, worker="w", timeout=60_000, maxJobsToActivate=3, requestTimeout=-1
            )
            responses = list(stub.ActivateJobs(request, timeout=10))
            assert sum(len(r.jobs) for r in responses) == 1
            delivered.extend(job for r in responses for job in r.jobs)
        assert sorted(job.processInstanceKey for job in delivered) == sorted(batch)
        for job in delivered:
            complete(stub, job.key)

        # a job whose variables alone exceed a message fails with an incident; the type's other jobs keep flowing
        oversized = create(stub, d.pid(), {"big": "y" * (150 * 1024)})
        stub.SetVariables(
            pb.SetVariablesRequest(elementInstanceKey=oversized, variables=json.dumps({"more": "z" * (150 * 1024)})),
            timeout=10,
        )
        small = create(stub, d.pid(), {"small": True})
        (job,) = activate(stub, job_type)
        assert job.processInstanceKey == small
        complete(stub, job.key)
        assert activate_now(stub, job_type) == [], "the oversized job is parked, not activated"

        # a document larger than a message cannot come in through the broker's command API either
        value = {"bpmnProcessId": d.pid(), "version": -1, "processDefinitionKey": -1, "variables": {"b": big * 3}}
        answers = command_api(
            small_node, [{"id": 1, "p": 1, "vt": int(ValueType.PROCESS_INSTANCE_CREATION), "i": 0, "k": -1, "v": value}]
        )
        assert answers[1].get("err") == "invalid" and "larger than" in answers[1]["msg"], answers[1]

        small_node.stop()
        (incident,) = [r for r in open_incidents(small_node) if r.value["processInstanceKey"] == oversized]
        small_node.start()
        assert incident.value["errorType"] == "MESSAGE_SIZE_EXCEEDED"
        assert "bytes" in incident.value["errorMessage"]

        # fixing the variables and resolving lets the job through
        stub.SetVariables(
            pb.SetVariablesRequest(elementInstanceKey=oversized, variables='{"big": "fixed", "more": "fixed"}'),
            timeout=10,
        )
        stub.UpdateJobRetries(pb.UpdateJobRetriesRequest(jobKey=incident.value["jobKey"], retries=1), timeout=10)
        stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
        (job,) = activate(stub, job_type)
        assert job.processInstanceKey == oversized
        assert variables_of(job) == {"big": "fixed", "more": "fixed"}
        complete(stub, job.key)
        assert_workflow_completes(stub)
    finally:
        channel.close()


def test_a_pushed_job_too_large_to_send_fails_and_the_stream_keeps_serving(small_node: WeirProcess) -> None:
    channel = grpc.insecure_channel(small_node.address)
    stub = Stub(channel)
    try:
        d = deploy(stub, "two-tasks.bpmn")
        ship = d.type("ship")
        stream = stub.StreamActivatedJobs(
            pb.StreamActivatedJobsRequest(type=ship, worker="streamer", timeout=60_000), timeout=30
        )
        received: list[pb.ActivatedJob] = []
        reader = threading.Thread(target=lambda: received.extend(itertools.islice(stream, 1)), daemon=True)
        reader.start()
        time.sleep(0.3)  # the stream is registered at the broker

        # together with what the first task adds, the second task's variables exceed a message
        big = create(stub, d.pid(), {"a": "x" * (150 * 1024)})
        (prepare,) = activate(stub, d.type("prepare"))
        complete(stub, prepare.key, {"b": "y" * (110 * 1024)})
        small = create(stub, d.pid(), {"small": True})
        (prepare,) = activate(stub, d.type("prepare"))
        assert prepare.processInstanceKey == small
        complete(stub, prepare.key)

        reader.join(timeout=15)
        assert [job.processInstanceKey for job in received] == [small], "the stream survived the oversized job"
        stream.cancel()
        complete(stub, received[0].key)

        small_node.stop()
        (incident,) = [r for r in open_incidents(small_node) if r.value["processInstanceKey"] == big]
        small_node.start()
        assert incident.value["errorType"] == "JOB_NO_RETRIES"
        assert "bytes" in incident.value["errorMessage"], incident.value["errorMessage"]
        assert_workflow_completes(stub)
    finally:
        channel.close()
