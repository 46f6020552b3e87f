"""The shortest path a newcomer takes: deploy, start, work, get the result — with pyzeebe."""

import asyncio

from pyzeebe import Job, ZeebeClient, ZeebeWorker, create_insecure_channel

from tests.harness import BPMN, WeirProcess


def test_one_task_with_result(weir: WeirProcess) -> None:
    async def scenario() -> dict:
        channel = create_insecure_channel(grpc_address=weir.address)
        client = ZeebeClient(channel)
        await client.deploy_resource(str(BPMN / "one-task.bpmn"))
        worker = ZeebeWorker(channel)

        @worker.task(task_type="test")
        async def handler(job: Job) -> dict:
            return {"doubled": job.variables["n"] * 2}

        work = asyncio.create_task(worker.work())
        try:
            result = await client.run_process_with_result("one-task", {"n": 21}, timeout=10_000)
        finally:
            await worker.stop()
            work.cancel()
        return result.variables

    assert asyncio.run(scenario()) == {"n": 21, "doubled": 42}
