"""A gateway in its own process in front of a broker (``weir broker`` + ``weir gateway``)."""

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyzeebe import Job, ZeebeClient, ZeebeWorker, create_insecure_channel

from tests.harness import BPMN, REPO, eventually, free_port


class Proc:
    def __init__(self, args: list[str], log: Path) -> None:
        with log.open("ab") as f:
            self.proc = subprocess.Popen([sys.executable, "-m", "client.cli", *args], cwd=REPO, stdout=f, stderr=f)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def split(tmp_path: Path) -> Iterator[str]:
    command_port, gateway_port = free_port(), free_port()
    broker = Proc(
        [
            "broker",
            "--data-dir",
            str(tmp_path / "b"),
            "--command-port",
            str(command_port),
            "--monitoring-port",
            str(free_port()),
        ],
        tmp_path / "broker.log",
    )
    gw_monitoring = free_port()
    gateway = Proc(
        [
            "gateway",
            "--broker",
            f"127.0.0.1:{command_port}",
            "--gateway-port",
            str(gateway_port),
            "--monitoring-port",
            str(gw_monitoring),
        ],
        tmp_path / "gateway.log",
    )
    import urllib.request

    def ready() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{gw_monitoring}/ready", timeout=1) as r:
            return r.status == 200

    try:
        eventually(ready, timeout=30, what="the gateway to know the partition leader")
        yield f"127.0.0.1:{gateway_port}"
    finally:
        gateway.stop()
        broker.stop()


def test_workflow_through_a_separate_gateway(split: str) -> None:
    async def scenario() -> tuple[dict, int]:
        channel = create_insecure_channel(grpc_address=split)
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
