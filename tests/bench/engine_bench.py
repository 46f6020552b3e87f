"""The engine alone: one-task instances/s through one in-process partition, with no gRPC in the way.

Drives ``Partition.execute`` the way the gateway does (create, activate in batches, complete), with fsync on, so the
figure is what processing, state and the log cost per instance; the difference to ``weir bench`` is the gRPC share.
``--profile FILE`` writes a cProfile of the busiest run.

    .venv/bin/python tests/bench/engine_bench.py --seconds 5 --runs 3
"""

import argparse
import asyncio
import cProfile
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker.engine.behaviors import TENANT
from broker.engine.job_processors import activation_request
from broker.protocol.enums import DeploymentIntent, JobBatchIntent, JobIntent, ProcessInstanceCreationIntent, ValueType
from broker.stream.partition import Partition, PartitionConfig
from tests.harness import BPMN


async def run_once(directory: Path, seconds: float, concurrency: int) -> float:
    partition = Partition(directory, PartitionConfig(backpressure=None))
    partition.open()
    partition.start()
    resource = {"resourceName": "one-task.bpmn", "resource": (BPMN / "one-task.bpmn").read_bytes()}
    await partition.execute(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": [resource]})
    create = {
        "bpmnProcessId": "one-task",
        "version": -1,
        "processDefinitionKey": -1,
        "variables": {"n": 1},
        "fetchVariables": [],
        "tenantId": TENANT,
    }
    stop_at = time.monotonic() + seconds
    created = completed = 0

    async def starter() -> None:
        nonlocal created
        while time.monotonic() < stop_at:
            await partition.execute(ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, create)
            created += 1

    async def worker() -> None:
        nonlocal completed
        while time.monotonic() < stop_at:
            value = activation_request("test", "bench", 60_000, 32)
            batch = await partition.execute(ValueType.JOB_BATCH, JobBatchIntent.ACTIVATE, value)
            keys = list(batch.value["jobKeys"])
            if not keys:
                await asyncio.sleep(0.001)
                continue
            await asyncio.gather(
                *(partition.execute(ValueType.JOB, JobIntent.COMPLETE, {"variables": {}}, k) for k in keys)
            )
            completed += len(keys)

    started = time.monotonic()
    await asyncio.gather(*(starter() for _ in range(concurrency)), worker(), worker())
    elapsed = time.monotonic() - started
    await partition.close(snapshot=False)
    return completed / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--profile", type=Path, help="write a cProfile of the last run here")
    args = parser.parse_args()
    rates = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="weir-engine-") as tmp:
            profiler = cProfile.Profile() if args.profile and run == args.runs - 1 else None
            if profiler:
                profiler.enable()
            rate = asyncio.run(run_once(Path(tmp), args.seconds, args.concurrency))
            if profiler:
                profiler.disable()
                profiler.dump_stats(args.profile)
        rates.append(rate)
        print(f"run {run + 1}: {rate:.0f} completed one-task instances/s (engine only, fsync on)", flush=True)
    print(f"median of {args.runs}: {statistics.median(rates):.0f} instances/s")


if __name__ == "__main__":
    main()
