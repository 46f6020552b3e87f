"""The heaviest bad inputs against a real broker keep its memory bounded, and it goes on serving.

Before evaluation had a budget, the regex below blocked the broker for 24 s, the nested loop grew it to gigabytes
and the doubling string stored an 84 MB variable; a document over the message size, or a message announcing a
2 GiB string, must be refused before anything that large is held. Each is sent to one fresh ``weir broker
--embedded-gateway`` while a sampler reads its resident memory from /proc every few milliseconds; the peak (the
larger of the samples and the kernel's own high-water mark, VmHWM, reset before the attack) may exceed the
resident memory before it by at most ``BOUND``. (The Raft port's 2 GiB length prefix is the same check against
``weir cluster up``: tests/cluster/test_port_hygiene.py.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import msgpack
import pytest
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import WeirProcess, eventually
from tests.integration.clients import (
    Stub,
    activate,
    complete,
    create,
    create_with_result,
    deploy,
    is_active,
    rpc_error,
)
from tests.raw_sockets import PeakMemory

pytestmark = pytest.mark.timeout(180)

MiB = 1024 * 1024
#: How far above its resident memory before the attack the broker may peak while it lasts. An evaluation may
#: produce up to broker.expressions.maxSize (16 MB) of FEEL values, which Python holds in about twice that; one
#: runs at a time per partition, and its memory is reused by the next (measured here: +33 MiB for the nested
#: loops, +24 MiB for the doubling, +17 MiB for the oversized documents, about +65 MiB in all, the same for one
#: instance of each as for three). Without the budgets one nested loop alone took gigabytes.
BOUND = 96 * MiB


@pytest.fixture
def node(tmp_path: Path) -> Iterator[WeirProcess]:
    w = WeirProcess(tmp_path / "data", command_api=True)
    w.start()
    try:
        yield w
    finally:
        w.kill()


def one_workflow(stub: Stub, pid: str, job_type: str, n: int) -> None:
    pending = create_with_result(stub, pid, {"n": n})
    (job,) = activate(stub, job_type)
    complete(stub, job.key, {"done": True})
    assert json.loads(pending.result(timeout=15).variables) == {"n": n, "done": True}


def command_api_raw(node: WeirProcess, payload: bytes) -> grpc.RpcError | list[bytes]:
    identity = lambda b: b  # noqa: E731
    with grpc.insecure_channel(f"127.0.0.1:{node.command_port}") as channel:
        call = channel.stream_stream("/weir.broker.CommandApi/Commands", identity, identity)
        try:
            return list(call(iter([payload]), timeout=20))
        except grpc.RpcError as e:
            return e


def test_heaviest_bad_inputs_keep_memory_bounded(node: WeirProcess) -> None:
    channel = grpc.insecure_channel(node.address)
    stub = Stub(channel)
    try:
        budget = deploy(stub, "expression-budget.bpmn")
        one = deploy(stub, "one-task.bpmn")
        for n in range(3):  # warm up: every code path of an ordinary workflow has run once
            one_workflow(stub, one.pid(), one.type("test"), n)
        time.sleep(0.5)

        with PeakMemory(node.pid) as memory:
            started = time.monotonic()
            # FEEL: catastrophic backtracking, a 10^10-pair nested loop, a string doubled 40 times, 20 copies of
            # a 300 kB variable; three of each
            instances = []
            for _ in range(3):
                instances.append(create(stub, budget.pid("budget-regex"), {"name": "a" * 30 + "!"}))
                instances.append(create(stub, budget.pid("budget-input")))
                instances.append(create(stub, budget.pid("budget-condition")))
                instances.append(create(stub, budget.pid("budget-output")))
            for job in activate(stub, budget.type("budget-copy"), 3):
                complete(stub, job.key, {"chunk": "x" * 300_000})

            # documents over the message size, eight at once, through the gateway
            big = json.dumps({"blob": "x" * (5 * MiB)})
            request = pb.CreateProcessInstanceRequest(bpmnProcessId=one.pid(), version=-1, variables=big)
            with ThreadPoolExecutor(8) as pool:
                errors = list(pool.map(lambda _: rpc_error(stub.CreateProcessInstance, request), range(8)))
            assert {e.code() for e in errors} == {grpc.StatusCode.RESOURCE_EXHAUSTED}, errors
            # a document nested a million levels deep
            err = rpc_error(
                stub.CreateProcessInstance,
                pb.CreateProcessInstanceRequest(bpmnProcessId=one.pid(), variables='{"a":' + "[" * 1_000_000),
            )
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()

            # the command API: a 64 MiB message, and a small one announcing a 2 GiB string
            answer = command_api_raw(node, b"\x00" * (64 * MiB))
            assert isinstance(answer, grpc.RpcError) and answer.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            announced = msgpack.packb({"id": 1, "p": 1, "vt": 0, "i": 0, "k": -1})[:-2] + b"\xa1v\xdb\x7f\xff\xff\xff"
            answer = command_api_raw(node, announced + b"x" * 1024)
            assert isinstance(answer, grpc.RpcError) or answer == [], answer

            # and an ordinary workflow right after
            one_workflow(stub, one.pid(), one.type("test"), 100)
            elapsed = time.monotonic() - started

        print(
            f"broker RSS before {memory.before / MiB:.1f} MiB, peak {memory.peak / MiB:.1f} MiB "
            f"(+{memory.grown / MiB:.1f} MiB; VmHWM reset: {memory.hwm_reset}); attack and workflow took {elapsed:.1f}s"
        )
        assert memory.grown < BOUND, f"the broker grew by {memory.grown / MiB:.0f} MiB during the attack"
        assert elapsed < 30, f"the attack held the broker for {elapsed:.0f}s"

        regex = instances[0::4]
        eventually(lambda: not any(is_active(stub, pi) for pi in regex), timeout=5, what="the regex instances")
        for pi in instances[1::4] + instances[2::4] + instances[3::4]:
            assert is_active(stub, pi), "an instance with a failed expression waits on its incident"
        one_workflow(stub, one.pid(), one.type("test"), 101)
    finally:
        channel.close()
