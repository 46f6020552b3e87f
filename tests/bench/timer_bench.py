"""Timers at scale on one in-process partition: how fast due timers fire, and what pending ones cost the rest.

Drives a :class:`Partition` in a temporary directory the way the gateway does (``Partition.execute``), fsync on:

1. one-task instances/s (create, activate, complete in batches) and the latency of a lone create, with no timer;
2. ``--pending`` instances of timer-catch.bpmn waiting on a timer an hour away, created in big batches
   (``--control``: two-tasks.bpmn instances waiting on a job instead, to tell the timers' cost from the state's);
3. the same one-task figures again, now with those timers pending;
4. ``--due`` more instances whose timers all fall due at the same instant: the clock is held still while they are
   created, so every one gets the same due date. The TIMER TRIGGERED records written then give the checker's rate
   (timers fired per second from the due date to the last trigger) and the lag of each trigger behind its due date.

Steps 1, 3 and 4 repeat ``--runs`` times; the median of the runs is printed last.

    .venv/bin/python tests/bench/timer_bench.py --pending 100000 --due 20000 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker.engine.behaviors import TENANT
from broker.engine.job_processors import activation_request
from broker.protocol.codec import decode_block
from broker.protocol.enums import (
    DeploymentIntent,
    JobBatchIntent,
    JobIntent,
    ProcessInstanceCreationIntent,
    RecordType,
    TimerIntent,
    ValueType,
)
from broker.protocol.record import Record
from broker.state.repositories import PartitionState
from broker.stream.partition import Partition, PartitionConfig
from tests.harness import BPMN

BATCH = 2000  # commands in flight at once (the inbox takes 10,000)


class HoldableClock:
    """The wall clock, except while held: then it stands still, and afterwards it goes on from where it stood.

    Holding it while a batch of instances is created gives them one creation time, hence one due date.
    """

    def __init__(self) -> None:
        self._offset = 0
        self._held: int | None = None

    def __call__(self) -> int:
        return self._held if self._held is not None else int(time.time() * 1000) + self._offset

    def hold(self) -> int:
        self._held = self()
        return self._held

    def release(self) -> None:
        assert self._held is not None
        self._offset = self._held - int(time.time() * 1000)
        self._held = None


class Bench:
    def __init__(self, directory: Path) -> None:
        self.clock = HoldableClock()
        config = PartitionConfig(
            backpressure=None,  # measure the processor, not admission control
            snapshot_min_records=10**9,  # no snapshot pauses in the middle of a measurement
            snapshot_period_s=10**6,
        )
        self.partition = Partition(directory, config, clock=self.clock)

    async def start(self) -> None:
        self.partition.open()
        self.partition.start()
        resources = [
            {"resourceName": name, "resource": (BPMN / name).read_bytes()}
            for name in ("one-task.bpmn", "timer-catch.bpmn", "two-tasks.bpmn")
        ]
        rec = await self.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources})
        assert rec.record_type == RecordType.EVENT, rec.rejection_reason

    async def send(self, value_type: ValueType, intent: int, value: dict, key: int = -1) -> Record:
        return await asyncio.wait_for(self.partition.execute(value_type, intent, value, key), 120)

    def create(self, process_id: str, variables: dict) -> Awaitable[Record]:
        value = {
            "bpmnProcessId": process_id,
            "version": -1,
            "processDefinitionKey": -1,
            "variables": variables,
            "fetchVariables": [],
            "tenantId": TENANT,
        }
        return self.send(ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, value)

    async def in_batches(self, calls: Iterable[Awaitable[Record]], count: int) -> list[Record]:
        """Await ``count`` calls, at most BATCH in flight; every one must succeed."""
        out: list[Record] = []
        it = iter(calls)
        while len(out) < count:
            chunk = [next(it) for _ in range(min(BATCH, count - len(out)))]
            results = await asyncio.gather(*chunk)
            for rec in results:
                assert rec.record_type == RecordType.EVENT, rec.rejection_reason
            out.extend(results)
        return out

    async def create_many(self, process_id: str, variables: dict, count: int) -> list[int]:
        records = await self.in_batches((self.create(process_id, variables) for _ in range(count)), count)
        return [r.value["processInstanceKey"] for r in records]

    async def activate(self, job_type: str, max_jobs: int) -> list[int]:
        value = activation_request(job_type, "bench", 300_000, max_jobs)
        rec = await self.send(ValueType.JOB_BATCH, JobBatchIntent.ACTIVATE, value)
        assert rec.record_type == RecordType.EVENT, rec.rejection_reason
        return list(rec.value["jobKeys"])

    # -- measurements ----------------------------------------------------------------------------------------

    async def one_task_rate(self, count: int) -> float:
        """Completed one-task instances/s: create ``count``, activate their jobs, complete them, in batches."""
        started = time.monotonic()
        await self.create_many("one-task", {}, count)
        jobs: list[int] = []
        while len(jobs) < count:
            got = await self.activate("test", min(500, count - len(jobs)))
            assert got, f"only {len(jobs)} of {count} one-task jobs could be activated"
            jobs.extend(got)
        completions = (self.send(ValueType.JOB, JobIntent.COMPLETE, {"variables": {}}, key) for key in jobs)
        await self.in_batches(completions, len(jobs))
        return count / (time.monotonic() - started)

    async def lone_create_ms(self, count: int) -> float:
        """Median latency of a create sent alone (one round: process, append, fsync, respond)."""
        took = []
        for _ in range(count):
            t0 = time.perf_counter()
            rec = await self.create("one-task", {})
            took.append((time.perf_counter() - t0) * 1000)
            assert rec.record_type == RecordType.EVENT
        return statistics.median(took)

    def pending_timers(self, due_before: int) -> tuple[int, int]:
        """(timers stored, timers due at ``due_before``) read from the live state, beside the processor."""
        assert self.partition.db is not None
        view = PartitionState(self.partition.db)
        with self.partition.db.begin() as txn:
            view.bind(txn)
            stored = txn.stat(view.timers._db)["entries"]
            due = len(view.timers.due_before(due_before, 10**9))
        return stored, due

    async def fire_batch(self, count: int, lead_ms: int = 1500) -> tuple[float, float, float, float]:
        """``count`` timers due at one instant; (fired/s from the due date, lag p50 ms, p99 ms, max ms)."""
        due_at = self.clock.hold() + lead_ms
        keys = set(await self.create_many("timer-catch", {"delay": f"PT{lead_ms / 1000:g}S"}, count))
        self.clock.release()
        assert self.partition.log_storage is not None
        from_position = self.partition.log_storage.last_position + 1
        while self.clock() <= due_at:
            await asyncio.sleep(0.05)
        deadline = time.monotonic() + 300
        while True:
            await asyncio.sleep(0.2)
            _stored, due = self.pending_timers(due_at)
            if due == 0 and self.partition.backlog == 0:
                break
            assert time.monotonic() < deadline, f"{due} timers still due after 300s"
        lags: list[int] = []
        last = 0
        for block in self.partition.log_storage.read(from_position):
            for r in decode_block(block.payload)[1]:
                if (
                    r.record_type == RecordType.EVENT
                    and r.value_type == ValueType.TIMER
                    and r.intent == TimerIntent.TRIGGERED
                    and r.value["processInstanceKey"] in keys
                ):
                    lags.append(r.timestamp - r.value["dueDate"])
                    last = max(last, r.timestamp - r.value["dueDate"])
        assert len(lags) == count, f"{len(lags)} of {count} timers triggered"
        assert min(lags) >= 0, f"a timer fired {-min(lags)} ms early"
        lags.sort()
        rate = count / max(last / 1000, 1e-3)
        return rate, lags[len(lags) // 2], lags[min(len(lags) - 1, int(len(lags) * 0.99))], lags[-1]


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp) / "partition")
        await bench.start()
        try:
            await bench.one_task_rate(500)  # warm-up: models cached, LMDB pages touched

            before_rate, before_lat = [], []
            for i in range(args.runs):
                before_rate.append(await bench.one_task_rate(args.instances))
                before_lat.append(await bench.lone_create_ms(100))
                print(
                    f"0 waiting instances, run {i + 1}: {before_rate[-1]:6.0f} one-task instances/s, "
                    f"lone create {before_lat[-1]:.2f} ms",
                    flush=True,
                )

            started = time.monotonic()
            if args.control:  # as many waiting instances, each waiting on a job instead of a timer
                await bench.create_many("two-tasks", {}, args.pending)
            else:
                await bench.create_many("timer-catch", {"delay": "PT1H"}, args.pending)
            took = time.monotonic() - started
            stored, due = bench.pending_timers(bench.clock())
            assert stored == (0 if args.control else args.pending) and due == 0
            print(
                f"created {args.pending} waiting instances in {took:.1f}s "
                f"({args.pending / took:.0f}/s); {stored} timers pending",
                flush=True,
            )

            after_rate, after_lat, fired, p50s, p99s, maxes = [], [], [], [], [], []
            for i in range(args.runs):
                after_rate.append(await bench.one_task_rate(args.instances))
                after_lat.append(await bench.lone_create_ms(100))
                print(
                    f"{args.pending} waiting ({stored} timers), run {i + 1}: "
                    f"{after_rate[-1]:6.0f} one-task instances/s, lone create {after_lat[-1]:.2f} ms",
                    flush=True,
                )
                rate, p50, p99, worst = await bench.fire_batch(args.due)
                fired.append(rate)
                p50s.append(p50)
                p99s.append(p99)
                maxes.append(worst)
                print(
                    f"{args.due} timers due at once, run {i + 1}: {rate:6.0f} fired/s; trigger lag after the due "
                    f"date p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {worst:.0f} ms",
                    flush=True,
                )
        finally:
            await bench.partition.close(snapshot=False)

    med = statistics.median
    kind = "waiting on a job (control)" if args.control else "waiting on a timer"
    print(
        f"\nmedians of {args.runs} runs:\n"
        f"  one-task instances/s: {med(before_rate):.0f} with 0 waiting instances, {med(after_rate):.0f} with "
        f"{args.pending} {kind} ({(med(after_rate) / med(before_rate) - 1) * 100:+.1f}%)\n"
        f"  lone create latency: {med(before_lat):.2f} ms with 0 waiting instances, {med(after_lat):.2f} ms with "
        f"{args.pending} {kind}\n"
        f"  {args.due} timers due at once: {med(fired):.0f} fired/s; lag p50 {med(p50s):.0f} ms, "
        f"p99 {med(p99s):.0f} ms, max {med(maxes):.0f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pending", type=int, default=100_000, help="timers pending an hour away")
    parser.add_argument("--due", type=int, default=20_000, help="timers made due at one instant, per run")
    parser.add_argument("--instances", type=int, default=2000, help="one-task instances per throughput run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--control",
        action="store_true",
        help="the pending instances wait on a job, not a timer: what the state's size alone costs",
    )
    asyncio.run(main(parser.parse_args()))
