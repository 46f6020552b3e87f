"""``weir bench``: a load generator for any Zeebe-protocol gateway, measuring what users feel.

A starter creates instances — open loop at a target rate, or closed loop with a bounded number in flight — with
CreateProcessInstanceWithResult, so every instance's create→complete latency is measured exactly. Workers complete the
jobs, streamed (StreamActivatedJobs) or polled (ActivateJobs), with a configurable completion delay. Built-in models
are Zeebe's benchmark shapes: ``one-task`` and ``ten-tasks``; ``--bpmn FILE`` runs your own (its tasks' job types
must be ``bench-task``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from gateway.api import gateway_pb2 as pb
from gateway.api import gateway_pb2_grpc as pb_grpc

JOB_TYPE = "bench-task"
PROCESS_ID = "weir-bench"


def chain_bpmn(tasks: int) -> bytes:
    """A process of ``tasks`` service tasks in a row, all of job type ``bench-task``."""
    nodes = ['<bpmn:startEvent id="start"/>']
    flows = []
    previous = "start"
    for i in range(tasks):
        nodes.append(
            f'<bpmn:serviceTask id="task{i}"><bpmn:extensionElements>'
            f'<zeebe:taskDefinition type="{JOB_TYPE}"/></bpmn:extensionElements></bpmn:serviceTask>'
        )
        flows.append(f'<bpmn:sequenceFlow id="f{i}" sourceRef="{previous}" targetRef="task{i}"/>')
        previous = f"task{i}"
    nodes.append('<bpmn:endEvent id="end"/>')
    flows.append(f'<bpmn:sequenceFlow id="fend" sourceRef="{previous}" targetRef="end"/>')
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" '
        'xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="bench" targetNamespace="http://weir.bench">'
        f'<bpmn:process id="{PROCESS_ID}" isExecutable="true">{"".join(nodes)}{"".join(flows)}</bpmn:process>'
        "</bpmn:definitions>"
    ).encode()


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


@dataclass
class Stats:
    started: float = field(default_factory=time.monotonic)
    created: int = 0
    completed: int = 0
    tasks: int = 0
    backpressure: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    activation: list[float] = field(default_factory=list)
    last_error: str = ""
    # Per second since the start: [completed instances, backpressure rejections] (shows overload and recovery).
    timeline: dict[int, list[int]] = field(default_factory=dict)

    errors_by_kind: dict[str, int] = field(default_factory=dict)

    def error(self, call: str, e: grpc.aio.AioRpcError) -> None:
        self.errors += 1
        self.last_error = f"{e.code().name}: {e.details()}"
        kind = f"{call} {e.code().name}"
        self.errors_by_kind[kind] = self.errors_by_kind.get(kind, 0) + 1

    def count(self, index: int) -> None:
        second = int(time.monotonic() - self.started)
        self.timeline.setdefault(second, [0, 0])[index] += 1

    def summary(self, elapsed: float, broker_rss_mb: float | None, broker_cpu_s: float | None = None) -> dict[str, Any]:
        lat = sorted(self.latencies)
        act = sorted(self.activation)
        return {
            "seconds": round(elapsed, 2),
            "completedInstances": self.completed,
            "instancesPerSecond": round(self.completed / elapsed, 1) if elapsed else 0.0,
            "tasksPerSecond": round(self.tasks / elapsed, 1) if elapsed else 0.0,
            "latencyMs": {
                "p50": round(percentile(lat, 0.50) * 1000, 1),
                "p95": round(percentile(lat, 0.95) * 1000, 1),
                "p99": round(percentile(lat, 0.99) * 1000, 1),
            },
            "jobActivationLatencyMs": {
                "p50": round(percentile(act, 0.50) * 1000, 1),
                "p99": round(percentile(act, 0.99) * 1000, 1),
            },
            "backpressureRejections": self.backpressure,
            "errors": self.errors,
            "lastError": self.last_error,
            "errorsByKind": self.errors_by_kind,
            "brokerPeakRssMb": broker_rss_mb,
            # Broker CPU (all its threads and child processes, e.g. history writers) per completed instance: what a
            # configuration costs, even on a busy machine.
            "brokerCpuMsPerInstance": (
                round(broker_cpu_s * 1000 / self.completed, 2) if broker_cpu_s is not None and self.completed else None
            ),
            "timeline": [[second, *self.timeline[second]] for second in sorted(self.timeline)],
        }


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stats = Stats()
        self.stop_at = 0.0
        self.payload = json.dumps({"payload": "x" * args.payload_size}) if args.payload_size else "{}"
        self._created_at: dict[int, float] = {}

    async def deploy(self) -> None:
        if self.args.bpmn:
            content, name = Path(self.args.bpmn).read_bytes(), Path(self.args.bpmn).name
        else:
            content, name = chain_bpmn(10 if self.args.process == "ten-tasks" else 1), f"{self.args.process}.bpmn"
        request = pb.DeployResourceRequest(resources=[pb.Resource(name=name, content=content)])
        reply = await self.stub.DeployResource(request)
        self.process_id = reply.deployments[0].process.bpmnProcessId

    async def create_one(self) -> None:
        t0 = time.monotonic()
        request = pb.CreateProcessInstanceWithResultRequest(
            request=pb.CreateProcessInstanceRequest(bpmnProcessId=self.process_id, version=-1, variables=self.payload),
            requestTimeout=60_000,
            fetchVariables=["none"],
        )
        try:
            self.stats.created += 1
            await self.stub.CreateProcessInstanceWithResult(request, timeout=90)
            self.stats.completed += 1
            self.stats.count(0)
            self.stats.latencies.append(time.monotonic() - t0)
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                self.stats.backpressure += 1
                self.stats.count(1)
                await asyncio.sleep(0.01)
            else:
                self.stats.error("create", e)

    async def closed_loop(self) -> None:
        async def one_slot() -> None:
            while time.monotonic() < self.stop_at:
                await self.create_one()

        await asyncio.gather(*(one_slot() for _ in range(self.args.concurrency)))

    async def open_loop(self) -> None:
        interval = 1.0 / self.args.rate
        in_flight: set[asyncio.Task[None]] = set()
        next_at = time.monotonic()
        while time.monotonic() < self.stop_at:
            if len(in_flight) < self.args.max_in_flight:
                task = asyncio.create_task(self.create_one())
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        if in_flight:
            await asyncio.wait(in_flight, timeout=60)

    async def complete(self, job: pb.ActivatedJob) -> None:
        # The broker activated the job at deadline - timeout (its clock; same host or synchronized clocks).
        self.stats.activation.append(max(0.0, time.time() - (job.deadline - self.args.job_timeout_ms) / 1000))
        if self.args.completion_delay_ms:
            await asyncio.sleep(self.args.completion_delay_ms / 1000)
        try:
            await self.stub.CompleteJob(pb.CompleteJobRequest(jobKey=job.key, variables="{}"), timeout=30)
            self.stats.tasks += 1
        except grpc.aio.AioRpcError as e:
            self.stats.error("complete", e)

    async def stream_worker(self) -> None:
        request = pb.StreamActivatedJobsRequest(type=JOB_TYPE, worker="weir-bench", timeout=self.args.job_timeout_ms)
        pending: set[asyncio.Task[None]] = set()
        while time.monotonic() < self.stop_at + 5:
            try:
                async for job in self.stub.StreamActivatedJobs(request):
                    task = asyncio.create_task(self.complete(job))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.2)

    async def poll_worker(self) -> None:
        request = pb.ActivateJobsRequest(
            type=JOB_TYPE,
            worker="weir-bench",
            timeout=self.args.job_timeout_ms,
            maxJobsToActivate=self.args.max_jobs,
            requestTimeout=1000,
        )
        while time.monotonic() < self.stop_at + 5:
            try:
                async for batch in self.stub.ActivateJobs(request, timeout=10):
                    await asyncio.gather(*(self.complete(job) for job in batch.jobs))
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.2)

    async def progress(self) -> None:
        last_completed, last_time = 0, time.monotonic()
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            rate = (self.stats.completed - last_completed) / (now - last_time)
            last_completed, last_time = self.stats.completed, now
            print(
                f"\r[{now - self.stats.started:5.0f}s] {rate:7.0f} instances/s  completed {self.stats.completed}"
                f"  backpressure {self.stats.backpressure}  errors {self.stats.errors}   ",
                end="",
                file=sys.stderr,
                flush=True,
            )

    async def run(self) -> dict[str, Any]:
        self.channel = grpc.aio.insecure_channel(
            self.args.address, options=[("grpc.max_receive_message_length", 16 * 1024 * 1024)]
        )
        self.stub = pb_grpc.GatewayStub(self.channel)
        role = self.args.role
        if role != "worker":
            await self.deploy()
        self.stop_at = time.monotonic() + self.args.duration
        worker = self.stream_worker if self.args.worker == "stream" else self.poll_worker
        workers = [asyncio.create_task(worker()) for _ in range(self.args.workers)] if role != "starter" else []
        if self.args.worker == "stream" and workers:
            await asyncio.sleep(0.3)  # streams registered before the first job is created
        progress = asyncio.create_task(self.progress()) if not self.args.json else None
        self.stats = Stats()
        cpu_at_start = cpu_seconds(self.args.broker_pid)
        if role == "worker":
            await asyncio.sleep(max(0.0, self.stop_at - time.monotonic()))
        else:
            await (self.open_loop() if self.args.rate else self.closed_loop())
        elapsed = time.monotonic() - self.stats.started
        for t in [*workers, *([progress] if progress else [])]:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await self.channel.close()
        if progress:
            print(file=sys.stderr)
        cpu_at_end = cpu_seconds(self.args.broker_pid)
        cpu = cpu_at_end - cpu_at_start if cpu_at_start is not None and cpu_at_end is not None else None
        return self.stats.summary(elapsed, peak_rss_mb(self.args.broker_pid), cpu)


def _process_tree(pid: int) -> list[int]:
    """``pid`` and its live descendants (e.g. the broker's history writer processes), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, ()))
    return tree


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds the process and its child processes have used so far (Linux /proc; else None)."""
    if not pid:
        return None
    try:
        total = 0
        for member in _process_tree(pid):
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        return total / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def peak_rss_mb(pid: int | None) -> float | None:
    """The peak resident memory of the process plus that of each of its live child processes."""
    if not pid:
        return None
    total_kb = 0
    for member in _process_tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total_kb += int(line.split()[1])
    return round(total_kb / 1024, 1) if total_kb else None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--address", default=os.environ.get("ZEEBE_ADDRESS", "127.0.0.1:26500"))
    p.add_argument("--process", choices=("one-task", "ten-tasks"), default="one-task", help="built-in model")
    p.add_argument("--bpmn", help="your own model (tasks of job type 'bench-task')")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of load (30)")
    p.add_argument("--rate", type=float, default=0.0, help="open loop: instances/s to start (0 = closed loop)")
    p.add_argument("--concurrency", type=int, default=64, help="closed loop: instances in flight (64)")
    p.add_argument("--max-in-flight", type=int, default=2000, help="open loop: bound on instances in flight")
    p.add_argument("--worker", choices=("stream", "poll"), default="stream", help="job streams or long polling")
    p.add_argument("--workers", type=int, default=1, help="worker connections (1)")
    p.add_argument("--max-jobs", type=int, default=32, help="polling: maxJobsToActivate (32)")
    p.add_argument("--job-timeout-ms", type=int, default=30_000)
    p.add_argument("--completion-delay-ms", type=float, default=0.0, help="simulated work per job")
    p.add_argument("--payload-size", type=int, default=0, help="bytes of variables per instance")
    p.add_argument(
        "--broker-pid", type=int, help="report this local broker's peak RSS and CPU (with its child processes)"
    )
    p.add_argument(
        "--role",
        choices=("both", "starter", "worker"),
        default="both",
        help="start instances, complete jobs, or both (run starters and workers as separate processes)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON only")


def run(args: argparse.Namespace) -> int:
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    summary = asyncio.run(Bench(args).run())
    if args.json:
        print(json.dumps(summary))
        return 0
    print(
        f"completed instances/s: {summary['instancesPerSecond']}   tasks/s: {summary['tasksPerSecond']}\n"
        f"create→complete latency ms: p50 {summary['latencyMs']['p50']}  p95 {summary['latencyMs']['p95']}"
        f"  p99 {summary['latencyMs']['p99']}\n"
        f"job activation → worker latency ms: p50 {summary['jobActivationLatencyMs']['p50']}"
        f"  p99 {summary['jobActivationLatencyMs']['p99']}\n"
        f"backpressure rejections: {summary['backpressureRejections']}   errors: {summary['errors']}"
        + (f" (last: {summary['lastError']})" if summary["lastError"] else "")
        + (f"\nbroker peak RSS: {summary['brokerPeakRssMb']} MiB" if summary["brokerPeakRssMb"] else "")
    )
    return 0 if summary["completedInstances"] or args.role == "worker" else 1
