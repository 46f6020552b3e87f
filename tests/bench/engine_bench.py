"""The engine alone: one-task instances/s through one in-process partition, with no gRPC in the way.

Drives ``Partition.execute`` the way the gateway does (create, activate in batches, complete), with fsync on, so the
figure is what processing, state and the log cost per instance; the difference to ``weir bench`` is the gRPC share.
``--profile FILE`` writes a cProfile of the busiest run.

    .venv/bin/python tests/bench/engine_bench.py --seconds 5 --runs 3
    .venv/bin/python tests/bench/engine_bench.py --runs 4 --exporters none history noopexp.NoopExporter

``--exporters`` runs the partition with each exporter configuration in turn (its exporter director on the partition's
event loop, as on a leader), to show what exporting costs the partition.
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

# The command value that starts one instance of one-task.bpmn (as the gateway sends it).
CREATE_ONE_TASK = {
    "bpmnProcessId": "one-task",
    "version": -1,
    "processDefinitionKey": -1,
    "variables": {"n": 1},
    "fetchVariables": [],
    "tenantId": TENANT,
}


async def one_task_partition(directory: Path, exporters: dict | None = None) -> Partition:
    """A started partition in ``directory`` (fsync on, no back-pressure) with one-task.bpmn deployed."""
    partition = Partition(directory, PartitionConfig(backpressure=None, exporters=exporters or {}))
    partition.open()
    partition.start()
    resource = {"resourceName": "one-task.bpmn", "resource": (BPMN / "one-task.bpmn").read_bytes()}
    await partition.execute(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": [resource]})
    return partition


async def run_once(
    directory: Path, seconds: float, concurrency: int, exporters: dict | None = None
) -> tuple[float, float]:
    """(completed instances/s, this process's CPU ms per instance)."""
    partition = await one_task_partition(directory, exporters)
    create = CREATE_ONE_TASK
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

    started, cpu_started = time.monotonic(), time.process_time()
    await asyncio.gather(*(starter() for _ in range(concurrency)), worker(), worker())
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu_started
    await partition.close(snapshot=False)
    return completed / elapsed, cpu * 1000 / max(1, completed)


def exporter_configs(names: list[str], directory: Path) -> dict[str, dict | None]:
    """The exporters to compare: ``none``, ``history`` (SQLite in the run's folder) or an exporter class path."""
    configs: dict[str, dict | None] = {}
    for name in names:
        if name == "none":
            configs[name] = None
        elif name == "history":
            url = f"sqlite:///{directory / 'history.db'}"
            configs[name] = {"history": {"className": "exporters.history.HistoryExporter", "args": {"url": url}}}
        else:
            configs[name] = {"x": {"className": name}}
    return configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--profile", type=Path, help="write a cProfile of the last run here")
    parser.add_argument(
        "--exporters",
        nargs="+",
        default=["none"],
        help="compare, interleaved: none, history (SQLite), or exporter class paths (default: none)",
    )
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in args.exporters}
    for run in range(args.runs):
        for name in args.exporters if run % 2 == 0 else args.exporters[::-1]:
            with tempfile.TemporaryDirectory(prefix="weir-engine-") as tmp:
                exporters = exporter_configs([name], Path(tmp))[name]
                profiler = cProfile.Profile() if args.profile and run == args.runs - 1 else None
                if profiler:
                    profiler.enable()
                rate, cpu_ms = asyncio.run(run_once(Path(tmp) / "partition", args.seconds, args.concurrency, exporters))
                if profiler:
                    profiler.disable()
                    profiler.dump_stats(args.profile)
            results[name].append((rate, cpu_ms))
            print(
                f"run {run + 1} {name}: {rate:.0f} completed one-task instances/s, {cpu_ms:.3f} ms CPU per instance "
                "(engine only, fsync on; CPU of this process, not of a history writer)",
                flush=True,
            )
    for name, runs in results.items():
        rate = statistics.median(r for r, _ in runs)
        cpu_ms = statistics.median(c for _, c in runs)
        print(f"median of {args.runs} ({name}): {rate:.0f} instances/s, {cpu_ms:.3f} ms CPU per instance")


if __name__ == "__main__":
    main()
