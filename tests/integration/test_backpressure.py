"""Under a flood, the broker refuses some commands with RESOURCE_EXHAUSTED instead of falling over; every command
it accepted completes (job completions are never refused), and its memory stays bounded."""

import asyncio
from pathlib import Path

import grpc
from pyzeebe.proto import gateway_pb2, gateway_pb2_grpc

from tests.harness import BPMN, WeirProcess

FLOOD = 3000
WAVE = 250  # calls in flight at once, far above the limit


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_a_flood_is_partly_refused_and_everything_accepted_completes(tmp_path: Path) -> None:
    weir = WeirProcess(
        tmp_path / "data",
        extra_args=["--no-exporter"],
        # A fixed, small limit makes the flood exceed it for sure; the adaptive algorithms are unit-tested.
        env={
            "WEIR_BROKER_BACKPRESSURE_ALGORITHM": "fixed",
            "WEIR_BROKER_BACKPRESSURE_INITIAL_LIMIT": "2",
            "WEIR_BROKER_BACKPRESSURE_MIN_LIMIT": "1",
        },
    )
    weir.start()
    try:
        accepted, refused, other, peak_rss = asyncio.run(flood(weir))
        assert refused, "a flood far above the limit must be partly refused"
        assert not other, other[:5]
        assert accepted, "some commands must still be accepted"
        assert peak_rss < 400, f"broker RSS grew to {peak_rss:.0f} MiB under the flood"
        metrics = weir.probe("/metrics")[1]["text"]
        assert 'weir_backpressure_dropped_total{partition="1"}' in metrics
        assert asyncio.run(completed_after_work(weir, accepted)) == set(accepted)
    finally:
        weir.stop()


async def flood(weir: WeirProcess) -> tuple[list[int], int, list[str], float]:
    async with grpc.aio.insecure_channel(weir.address) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        resource = gateway_pb2.Resource(name="one-task.bpmn", content=(BPMN / "one-task.bpmn").read_bytes())
        await stub.DeployResource(gateway_pb2.DeployResourceRequest(resources=[resource]))
        request = gateway_pb2.CreateProcessInstanceRequest(bpmnProcessId="one-task", version=-1, variables="{}")
        accepted: list[int] = []
        refused = 0
        other: list[str] = []
        peak = 0.0

        async def one() -> None:
            nonlocal refused
            try:
                reply = await stub.CreateProcessInstance(request, timeout=60)
                accepted.append(reply.processInstanceKey)
            except grpc.aio.AioRpcError as e:
                if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    refused += 1
                    assert "overloaded" in (e.details() or "")
                else:
                    other.append(f"{e.code().name}: {e.details()}")

        for _ in range(FLOOD // WAVE):
            tasks = [asyncio.create_task(one()) for _ in range(WAVE)]
            while not all(t.done() for t in tasks):
                peak = max(peak, rss_mb(weir.pid))
                await asyncio.sleep(0.02)
            await asyncio.gather(*tasks)
        return accepted, refused, other, peak


async def completed_after_work(weir: WeirProcess, instances: list[int]) -> set[int]:
    """Work every job of the accepted instances; return the instances whose job completed."""
    done: set[int] = set()
    async with grpc.aio.insecure_channel(weir.address) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        wanted = set(instances)
        for _ in range(200):
            if done >= wanted:
                break
            request = gateway_pb2.ActivateJobsRequest(
                type="test", worker="flood", timeout=60_000, maxJobsToActivate=500, requestTimeout=1000
            )
            async for batch in stub.ActivateJobs(request, timeout=10):
                # All at once, far above the limit: completions finish admitted work and are never refused.
                completions = [gateway_pb2.CompleteJobRequest(jobKey=j.key, variables="{}") for j in batch.jobs]
                await asyncio.gather(*(stub.CompleteJob(c) for c in completions))
                done.update(job.processInstanceKey for job in batch.jobs)
    return done
