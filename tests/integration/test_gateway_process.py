"""A gateway in its own process in front of a broker (``weir broker`` + ``weir gateway``)."""

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyzeebe import Job, ZeebeClient, ZeebeWorker, create_insecure_channel

from tests.harness import BPMN, CliProcess, eventually, free_port, retry_on_taken_port


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """A ``weir broker`` alone: (command API port, monitoring port)."""

    def start(_attempt: int) -> tuple[CliProcess, int, int]:
        command_port, monitoring_port = free_port(), free_port()
        args = ["broker", "--data-dir", str(tmp_path / "b"), "--command-port", str(command_port)]
        proc = CliProcess([*args, "--monitoring-port", str(monitoring_port)], tmp_path / "broker.log")
        return proc.wait_running(), command_port, monitoring_port

    proc, command_port, monitoring_port = retry_on_taken_port(start)
    try:
        yield command_port, monitoring_port
    finally:
        proc.stop()


@pytest.fixture
def split(tmp_path: Path, broker: tuple[int, int]) -> Iterator[tuple[str, str]]:
    """A ``weir gateway`` in front of ``broker``: (gRPC address, REST API base URL)."""

    def start(_attempt: int) -> tuple[CliProcess, int, int]:
        gateway_port, rest_port, monitoring_port = free_port(), free_port(), free_port()
        args = ["gateway", "--broker", f"127.0.0.1:{broker[0]}", "--gateway-port", str(gateway_port)]
        args += ["--rest-port", str(rest_port), "--monitoring-port", str(monitoring_port)]
        # ready: the gateway knows the partition leader
        return CliProcess(args, tmp_path / "gateway.log").wait_running(monitoring_port), gateway_port, rest_port

    gateway, gateway_port, rest_port = retry_on_taken_port(start)
    try:
        yield f"127.0.0.1:{gateway_port}", f"http://127.0.0.1:{rest_port}"
    finally:
        gateway.stop()


def test_workflow_through_a_separate_gateway(split: tuple[str, str]) -> None:
    async def scenario() -> tuple[dict, int]:
        channel = create_insecure_channel(grpc_address=split[0])
        client = ZeebeClient(channel)
        topology = await client.topology()
        await client.deploy_resource(str(BPMN / "one-task.bpmn"))
        worker = ZeebeWorker(channel)

        @worker.task(task_type="test")
        async def handler(job: Job) -> dict:
            return {"seen": job.variables["n"]}

        work = asyncio.create_task(worker.work())
        try:
            result = await client.run_process_with_result("one-task", {"n": 5}, timeout=10_000)
        finally:
            await worker.stop()
            work.cancel()
        return result.variables, topology.partitions_count

    variables, partitions = asyncio.run(scenario())
    assert variables == {"n": 5, "seen": 5}
    assert partitions == 1


def test_rest_api_through_a_separate_gateway(split: tuple[str, str]) -> None:
    """The standalone gateway serves the REST API too; without gateway.history.url its searches say so."""
    import aiohttp

    async def scenario() -> None:
        async with aiohttp.ClientSession(base_url=split[1]) as http:
            async with http.get("/v2/topology") as r:
                assert r.status == 200 and (await r.json())["brokers"][0]["partitions"][0]["role"] == "leader"
            form = aiohttp.FormData()
            form.add_field("resources", (BPMN / "one-task.bpmn").read_bytes(), filename="one-task.bpmn")
            async with http.post("/v2/deployments", data=form) as r:
                assert r.status == 200
            async with http.post("/v2/process-instances", json={"processDefinitionId": "one-task"}) as r:
                created = await r.json()
            activation = {"type": "test", "timeout": 10_000, "maxJobsToActivate": 1, "requestTimeout": 10_000}
            async with http.post("/v2/jobs/activation", json=activation) as r:
                [job] = (await r.json())["jobs"]
            assert job["processInstanceKey"] == created["processInstanceKey"]
            async with http.post(f"/v2/jobs/{job['jobKey']}/completion", json={}) as r:
                assert r.status == 204
            async with http.post("/v2/process-instances/search", json={}) as r:
                problem = await r.json(content_type=None)
                assert r.status == 503 and "gateway.history.url" in problem["detail"], problem

    asyncio.run(scenario())


def test_the_command_stream_answers_a_batch_by_id_and_survives_garbage(broker: tuple[int, int]) -> None:
    """Several commands in one message get one answer each, matched by id; a malformed message ends only its stream."""
    import urllib.request

    import grpc
    import msgpack

    def ready() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{broker[1]}/ready", timeout=1) as r:
            return r.status == 200

    eventually(ready, timeout=30, what="the broker to lead its partition")
    identity = lambda b: b  # noqa: E731
    create = {"bpmnProcessId": "nowhere", "version": -1, "processDefinitionKey": -1, "variables": {}}
    commands = [
        {"id": 7, "p": 1, "vt": 19, "i": 0, "k": -1, "v": create},  # PROCESS_INSTANCE_CREATION CREATE: rejected
        {"id": 8, "p": 9, "vt": 19, "i": 0, "k": -1, "v": create},  # no such partition here
        {"id": 9, "vt": 19},  # no partition at all
    ]

    async def exchange(messages: list[bytes]) -> list[dict]:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{broker[0]}") as channel:
            call = channel.stream_stream("/weir.broker.CommandApi/Commands", identity, identity)

            async def requests():  # type: ignore[no-untyped-def]
                for m in messages:
                    yield m

            answers: list[dict] = []
            async for reply in call(requests(), timeout=20):
                unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
                unpacker.feed(reply)
                answers.extend(unpacker)
            return answers

    batch = b"".join(msgpack.packb(c, use_bin_type=True) for c in commands)
    answers = {a["id"]: a for a in asyncio.run(exchange([batch]))}
    assert set(answers) == {7, 8, 9}
    rejection = answers[7]["ok"]
    assert rejection[2] == 2 and "nowhere" in rejection[9]  # COMMAND_REJECTION naming the process id
    assert answers[8]["err"] == "unavailable" and "partition 9" in answers[8]["msg"]
    assert answers[9]["err"] == "invalid"

    assert asyncio.run(exchange([b"\xc1\xc1 not msgpack"])) == []  # the stream ends, nothing answered
    again = asyncio.run(exchange([msgpack.packb(commands[0], use_bin_type=True)]))
    assert [a["id"] for a in again] == [7]  # the broker serves the next stream as before
