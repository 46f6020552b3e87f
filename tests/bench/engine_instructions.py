"""The engine's cost per process instance in machine instructions: a figure that does not move with machine load.

Method: the same fixed workload as ``engine_bench.py`` (one-task instances through one in-process partition: create,
activate in batches of 32, complete), but a fixed number of instances instead of a fixed time, run under
``valgrind --tool=callgrind``, which counts the instructions executed. It runs twice, with ``--small`` and
``--large`` instances; the difference divided by the difference in instances is the cost of one instance, with
start-up (imports, deployment, opening the state) cancelled out. Instruction counts repeat to within a fraction of a
percent however busy the machine is, so two trees can be compared on a loaded machine where instances/s cannot.

Under valgrind the state database's default 64 GiB LMDB map cannot be reserved (valgrind limits the address space),
so the workload opens it with a 1 GiB map; the map size does not change the instructions executed per instance.

    .venv/bin/python tests/bench/engine_instructions.py --small 160 --large 480
    .venv/bin/python tests/bench/engine_instructions.py --exporter history  # what exporting costs the partition

Needs valgrind (``apt-get install valgrind``). It takes a few minutes: valgrind runs Python some 50 times slower
(the two runs go side by side).
"""

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BATCH = 32


async def workload(directory: Path, instances: int, exporter: str = "none") -> None:
    from broker.engine.job_processors import activation_request
    from broker.protocol.enums import JobBatchIntent, JobIntent, ProcessInstanceCreationIntent, ValueType
    from tests.bench.engine_bench import CREATE_ONE_TASK, exporter_configs, one_task_partition

    exporters = exporter_configs([exporter], directory)[exporter] or {}
    partition = await one_task_partition(directory / "partition", exporters)
    create = CREATE_ONE_TASK
    for start in range(0, instances, BATCH):
        count = min(BATCH, instances - start)
        await asyncio.gather(
            *(
                partition.execute(ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, create)
                for _ in range(count)
            )
        )
        request = activation_request("test", "bench", 60_000, BATCH)
        batch = await partition.execute(ValueType.JOB_BATCH, JobBatchIntent.ACTIVATE, request)
        keys = batch.value["jobKeys"]
        completions = (partition.execute(ValueType.JOB, JobIntent.COMPLETE, {"variables": {}}, key) for key in keys)
        await asyncio.gather(*completions)
    await partition.close(snapshot=False)


def run_workload(instances: int, exporter: str) -> None:
    import broker.state.db as db

    # valgrind cannot reserve the default 64 GiB map: every StateDb the partition opens gets 1 GiB instead
    db.StateDb.__init__.__kwdefaults__ = {"map_size": 1 << 30}
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(workload(Path(tmp), instances, exporter))


def start_counting(instances: int, exporter: str) -> subprocess.Popen[str]:
    """The workload with ``instances`` instances under callgrind, which counts the instructions it executes."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(Path(__file__).resolve()),
        "--workload",
        str(instances),
        "--exporter",
        exporter,
    ]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def instructions(run: subprocess.Popen[str]) -> int:
    _, stderr = run.communicate()
    found = re.search(r"(?:Collected|I\s+refs):\s*([\d,]+)", stderr)
    if run.returncode != 0 or found is None:
        raise RuntimeError(f"the workload under valgrind failed:\n{stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=160, help="instances in the first run")
    parser.add_argument("--large", type=int, default=480, help="instances in the second run")
    parser.add_argument(
        "--exporter",
        default="none",
        help="none, history (SQLite; its writer process is not counted) or an exporter class path",
    )
    parser.add_argument("--workload", type=int, help=argparse.SUPPRESS)  # the run valgrind measures
    args = parser.parse_args()
    if args.workload is not None:
        run_workload(args.workload, args.exporter)
        return
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind): no instruction count")
        return
    if args.large <= args.small:
        parser.error("--large must be more than --small")
    runs = start_counting(args.small, args.exporter), start_counting(args.large, args.exporter)  # side by side
    small, large = (instructions(run) for run in runs)
    per_instance = (large - small) / (args.large - args.small)
    print(f"{args.small} instances: {small:,} instructions")
    print(f"{args.large} instances: {large:,} instructions")
    print(f"per instance: {per_instance / 1e6:.3f} M instructions")


if __name__ == "__main__":
    main()
