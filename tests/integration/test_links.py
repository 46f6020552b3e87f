"""Link events through a real ``weir start``: a throw continues at the catch of the same name in its scope."""

import asyncio
import json
import uuid
from typing import Any

import grpc
from pyzeebe import Job, ZeebeClient, ZeebeWorker, create_insecure_channel
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import BPMN, WeirProcess
from tests.integration.clients import (
    Stub,
    activate,
    activate_now,
    complete,
    create_with_result,
    deploy,
    rpc_error,
    variables_of,
)


def test_an_instance_passes_through_the_link_and_completes(stub: Stub) -> None:
    d = deploy(stub, "link-events.bpmn")
    result = create_with_result(stub, d.pid(), {"orderId": "o-1"})
    (a,) = activate(stub, d.type("link-a"))
    assert a.elementId == "task-a"
    complete(stub, a.key, {"fromA": "yes"})
    (b,) = activate(stub, d.type("link-b"))
    assert b.elementId == "task-b" and b.processInstanceKey == a.processInstanceKey
    assert variables_of(b) == {"orderId": "o-1", "fromA": "yes"}
    complete(stub, b.key, {"fromB": 2})
    response = result.result(timeout=15)
    assert response.processInstanceKey == a.processInstanceKey
    assert json.loads(response.variables) == {"orderId": "o-1", "fromA": "yes", "fromB": 2}
    assert activate_now(stub, d.type("link-a")) == [] and activate_now(stub, d.type("link-b")) == []


def test_a_link_loops_back_until_the_counter_says_stop(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "link-loop.bpmn")
    seen: list[int] = []

    async def scenario() -> dict[str, Any]:
        channel = create_insecure_channel(grpc_address=weir.address)
        client = ZeebeClient(channel)
        worker = ZeebeWorker(channel, name="link-loop-worker")

        @worker.task(task_type=d.type("link-loop"))
        async def work(job: Job) -> dict:
            seen.append(job.variables["round"])
            return {}

        running = asyncio.create_task(worker.work())
        try:
            result = await client.run_process_with_result(d.pid(), {"round": 0, "rounds": 4}, timeout=15_000)
        finally:
            await worker.stop()
            running.cancel()
        return result.variables

    final = asyncio.run(scenario())
    assert seen == [0, 1, 2, 3], "the task ran once per round, looping back through the link"
    assert final == {"round": 4, "rounds": 4}


def test_a_throw_without_a_matching_catch_is_refused_naming_the_element(stub: Stub) -> None:
    content = (BPMN / "invalid" / "link-without-catch.bpmn").read_bytes()
    suffix = uuid.uuid4().hex[:8]
    content = content.replace(b'id="link-without-catch"', f'id="link-without-catch-{suffix}"'.encode())
    request = pb.DeployResourceRequest(resources=[pb.Resource(name=f"{suffix}-link.bpmn", content=content)])
    error = rpc_error(stub.DeployResource, request)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    message = error.details()
    assert "'jump': Can't find a catch link event for the throw link event with the name 'nowhere'" in message
    assert "not supported" not in message
    missing = rpc_error(
        stub.CreateProcessInstance,
        pb.CreateProcessInstanceRequest(bpmnProcessId=f"link-without-catch-{suffix}", version=-1),
    )
    assert missing.code() == grpc.StatusCode.NOT_FOUND
