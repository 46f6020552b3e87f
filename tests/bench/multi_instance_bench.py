"""A parallel multi-instance activity over large collections, against a real single-node Weir.

For each ``--items`` size, a fresh ``weir start`` (fsync on) runs one instance whose multi-instance activity loops
over that many items, created with CreateProcessInstanceWithResult, and reports the seconds from create to result,
items/s, the broker's peak RSS and the partition log's size. Two inner activities:

- ``pass``: a manual task (the engine alone: body, instances, loop variables, completion);
- ``jobs``: a service task whose jobs a worker of this script activates and completes in batches of 1,000.

``--output`` adds an output collection (``outputElement = item * 2``): each completion rewrites the whole list, as
in Zeebe, so its cost grows with the square of the size. Prints one line per run and the median of ``--runs``.

    .venv/bin/python tests/bench/multi_instance_bench.py --items 1000 10000 --runs 3
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import grpc
from pyzeebe.proto import gateway_pb2 as pb
from pyzeebe.proto import gateway_pb2_grpc

from tests.harness import WeirProcess

MODEL = """<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
  xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="http://weir.bench">
  <bpmn:process id="mi-bench" isExecutable="true">
    <bpmn:startEvent id="start" />
    <bpmn:{tag} id="each">
      {job}
      <bpmn:multiInstanceLoopCharacteristics>
        <bpmn:extensionElements>
          <zeebe:loopCharacteristics inputCollection="=items" inputElement="item" {output} />
        </bpmn:extensionElements>
      </bpmn:multiInstanceLoopCharacteristics>
    </bpmn:{tag}>
    <bpmn:endEvent id="end" />
    <bpmn:sequenceFlow id="f0" sourceRef="start" targetRef="each" />
    <bpmn:sequenceFlow id="f1" sourceRef="each" targetRef="end" />
  </bpmn:process>
</bpmn:definitions>
"""


def model(inner: str, output: bool) -> bytes:
    job = '<bpmn:extensionElements><zeebe:taskDefinition type="mi-bench" /></bpmn:extensionElements>'
    return MODEL.format(
        tag="serviceTask" if inner == "jobs" else "manualTask",
        job=job if inner == "jobs" else "",
        output='outputCollection="results" outputElement="=item * 2"' if output else "",
    ).encode()


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def log_mb(data_dir: Path) -> float:
    return sum(p.stat().st_size for p in (data_dir / "partitions").rglob("*") if p.is_file()) / 2**20


def work_jobs(stub: gateway_pb2_grpc.GatewayStub, expected: int, done: threading.Event) -> None:
    """Activate and complete ``expected`` jobs in batches (the worker of the ``jobs`` variant)."""
    completed = 0
    while completed < expected and not done.is_set():
        request = pb.ActivateJobsRequest(
            type="mi-bench",
            worker="bench",
            timeout=300_000,
            maxJobsToActivate=1000,
            requestTimeout=1000,
            fetchVariable=["item"],  # as a real worker would: not the whole collection with every job
        )
        keys = [job.key for response in stub.ActivateJobs(request, timeout=60) for job in response.jobs]
        futures = [stub.CompleteJob.future(pb.CompleteJobRequest(jobKey=k), timeout=120) for k in keys]
        for f in futures:
            f.result()
        completed += len(keys)


def run_once(items: int, inner: str, output: bool) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        weir = WeirProcess(data, extra_args=["--log-level", "WARNING", "--no-exporter"])
        weir.start()
        try:
            channel = grpc.insecure_channel(weir.address, options=[("grpc.max_receive_message_length", 64 << 20)])
            stub = gateway_pb2_grpc.GatewayStub(channel)
            stub.DeployResource(
                pb.DeployResourceRequest(resources=[pb.Resource(name="mi.bpmn", content=model(inner, output))]),
                timeout=30,
            )
            done = threading.Event()
            worker = None
            if inner == "jobs":
                worker = threading.Thread(target=work_jobs, args=(stub, items, done), daemon=True)
                worker.start()
            started = time.monotonic()
            request = pb.CreateProcessInstanceWithResultRequest(
                request=pb.CreateProcessInstanceRequest(
                    bpmnProcessId="mi-bench", version=-1, variables=json.dumps({"items": list(range(items))})
                ),
                requestTimeout=600_000,
            )
            result = stub.CreateProcessInstanceWithResult(request, timeout=660)
            elapsed = time.monotonic() - started
            done.set()
            if output:
                assert json.loads(result.variables)["results"] == [i * 2 for i in range(items)]
            channel.close()
            return elapsed, peak_rss_mb(weir.pid), log_mb(data)
        finally:
            weir.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--inner", choices=["pass", "jobs"], nargs="+", default=["pass", "jobs"])
    parser.add_argument("--output", action="store_true", help="also collect an output collection")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}; output collection: {'yes' if args.output else 'no'}", flush=True)
    for inner in args.inner:
        for items in args.items:
            results = []
            for run in range(args.runs):
                elapsed, rss, size = run_once(items, inner, args.output)
                results.append((elapsed, rss, size))
                print(
                    f"{inner:4} {items:6} items run {run + 1}: {elapsed:7.2f} s, {items / elapsed:7.0f} items/s, "
                    f"broker peak RSS {rss:6.0f} MiB, log {size:6.1f} MiB",
                    flush=True,
                )
            print(
                f"{inner:4} {items:6} items median: {statistics.median(r[0] for r in results):.2f} s, "
                f"{items / statistics.median(r[0] for r in results):.0f} items/s, "
                f"peak RSS {statistics.median(r[1] for r in results):.0f} MiB",
                flush=True,
            )


if __name__ == "__main__":
    main()
