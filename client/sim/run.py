"""``weir sim``: one seeded run of a whole cluster on simulated time, network and disk, with faults and checks.

A run has three phases, all on the simulated clock:

1. **Load and faults** for ``ticks`` ticks of 10 ms: the workload starts instances and works them; the fault
   schedule (``--faults``) crashes and restarts brokers, cuts links, drops, duplicates and delays messages, fills
   disks, slows fsyncs and jumps clocks, each fault healed after a while.
2. **Heal and drain**: every fault is healed; clients stop starting instances and finish the ones started (up to
   ``DRAIN_S`` simulated seconds).
3. **Check**: the invariants of :mod:`client.sim.checks` over the committed logs, the replicas and the sink.

Every event goes into the transcript: its notable lines are printed, all of it is hashed. The same seed gives the
same transcript, byte for byte (``transcript sha256``); a violation exits non-zero naming the seed, the invariant
and the transcript's tail.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from broker import gc_policy, logs
from broker.protocol.enums import RecordType, ValueType
from broker.raft.sim_world import world_switch
from client.sim import checks
from client.sim.bugs import injected
from client.sim.cluster import SimCluster
from client.sim.loop import SimLoop
from client.sim.options import FAULTS
from client.sim.sink import SINKS
from client.sim.workload import Workload

_RUNS = itertools.count(1)  # runs of this process, naming their sinks

TICK_S = 0.01
DRAIN_S = 120.0
# The drain ends early once the cluster has been quiet this long and will stay so until the drain's end: no event
# exported anywhere but empty job batches (every client call that changes something writes one, and this is as long
# as a client waits for an answer), every partition led, and none with work scheduled before then or a command to
# send. An instance still
# waiting then has nothing left that could move it: waiting out the rest of the drain would show nothing new.
QUIET_S = 5.0
# A leader writes due work within a checker interval (0.1 s): on a quiet cluster, a timer, job deadline or message
# time to live that fell due longer ago than this and still waits will never be written (a liveness violation).
OVERDUE_S = 10.0
CANARY_BOUND_S = 30.0
FSYNC_S = (0.0002, 0.003)
FAULT_RATE = 0.01  # chance per tick that a fault starts  # how long an fsync takes, simulated seconds


@dataclass(slots=True)
class SimConfig:
    seed: int
    ticks: int = 3000
    brokers: int = 1
    partitions: int = 1
    replication: int = 1
    faults: tuple[str, ...] = ()


@dataclass(slots=True)
class SimResult:
    seed: int
    transcript: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    @property
    def sha256(self) -> str:
        return hashlib.sha256("\n".join(self.transcript).encode()).hexdigest()


class _Faults:
    """The fault schedule: at random ticks a fault from the allowed list starts, and heals a while later."""

    def __init__(self, cluster: SimCluster, rng: random.Random, allowed: tuple[str, ...], note: Callable[[str], None]):
        self.cluster = cluster
        self.rng = rng
        self.allowed = allowed
        self.note = note
        self.active: dict[str, float] = {}  # fault → simulated time it heals
        self.crashed: set[int] = set()
        # Every fsync takes a little simulated time, so a crash can fall between a round's append and its commit.
        self.normal_fsync = lambda: rng.uniform(*FSYNC_S)
        assert isinstance(cluster.loop, SimLoop)
        cluster.loop.executor_delay = self.normal_fsync
        self.windows: list[tuple[float, float]] = []  # (started, healed) of every fault, in simulated time
        self._started: dict[str, float] = {}

    @property
    def quiet(self) -> bool:
        return not self.active

    async def step(self, now: float) -> None:
        for fault, heal_at in sorted(self.active.items()):
            if now >= heal_at:
                await self._heal(fault)
        if self.allowed and self.rng.random() < FAULT_RATE:
            fault = self.rng.choice(self.allowed)
            if fault not in self.active:
                await asyncio.sleep(self.rng.uniform(0, TICK_S))  # faults strike between ticks too, mid-round
                await self._start(fault)
                self.active[fault] = now + self.rng.uniform(0.5, 5.0)
                self._started[fault] = now

    async def _start(self, fault: str) -> None:
        cluster, rng = self.cluster, self.rng
        network = cluster.network
        if fault == "crash":
            node = rng.choice(sorted(cluster.brokers))
            if node in self.crashed:
                return
            self.crashed.add(node)
            await cluster.crash_broker(node)
            self.note(f"fault crash broker {node}")
        elif fault == "cut":
            a, b = rng.sample([0, *sorted(cluster.brokers)], 2)
            cluster.cut_brokers(a, b)
            if rng.random() < 0.5:
                cluster.cut_brokers(b, a)
            self.note(f"fault cut {sorted(network.cut)}")
        elif fault == "isolate-leader":
            # the broker leading a partition loses its links to the other brokers (not to the gateway): the others
            # elect a leader without it (or, with two replicas, none), and it steps down once it hears of the new
            # term; its due work handed out meanwhile is never written, and it may well lead again after the heal
            leaders = [lead[0] for pid in sorted(cluster.replicas_of) if (lead := cluster.leader(pid)) is not None]
            if not leaders:
                return
            node = rng.choice(leaders)
            for other in sorted(cluster.brokers):
                if other != node:
                    cluster.cut_brokers(node, other)
                    cluster.cut_brokers(other, node)
            self.note(f"fault isolate broker {node} (a partition leader) from the other brokers")
        elif fault == "drop":
            network.drop_rate = rng.choice([0.01, 0.05, 0.2])
            cluster.set_raft_link_faults(drop=network.drop_rate, duplicate=network.duplicate_rate)
            self.note(f"fault drop {network.drop_rate}")
        elif fault == "duplicate":
            network.duplicate_rate = rng.choice([0.01, 0.1])
            cluster.set_raft_link_faults(drop=network.drop_rate, duplicate=network.duplicate_rate)
            self.note(f"fault duplicate {network.duplicate_rate}")
        elif fault == "delay":
            network.max_delay_s = rng.choice([0.005, 0.05, 0.5])
            self.note(f"fault delay up to {network.max_delay_s}s")
        elif fault == "disk-full":
            node = rng.choice(sorted(cluster.brokers))
            cluster.brokers[node].disk.free_bytes = 1 << 20
            self.note(f"fault disk full on broker {node}")
        elif fault == "slow-fsync":
            assert isinstance(cluster.loop, SimLoop)
            delay = rng.choice([0.01, 0.1, 0.5])
            cluster.loop.executor_delay = lambda: rng.uniform(FSYNC_S[0], delay)
            self.note(f"fault slow fsync up to {delay}s")
        elif fault == "clock-jump":
            node = rng.choice(sorted(cluster.brokers))
            # bounded so that work scheduled by a jumped clock still falls due within the drain
            jump = rng.choice([-60_000, -10_000, -1_000, 1_000, 10_000, 60_000])
            cluster.brokers[node].clock_skew_ms += jump
            self.note(f"fault clock of broker {node} jumps {jump:+d} ms")

    async def _heal(self, fault: str) -> None:
        del self.active[fault]
        self.windows.append((self._started.pop(fault, 0.0), self.cluster.loop.time()))
        cluster = self.cluster
        if fault == "crash":
            for node in sorted(self.crashed):
                cluster.start_broker(node)
                self.note(f"heal restart broker {node}")
            self.crashed.clear()
        elif fault in ("cut", "isolate-leader", "drop", "duplicate", "delay"):
            cluster.heal_network()
            self.note(f"heal network ({fault})")
        elif fault == "disk-full":
            for broker in cluster.brokers.values():
                broker.disk.free_bytes = 1 << 40
            self.note("heal disk space")
        elif fault == "slow-fsync":
            assert isinstance(cluster.loop, SimLoop)
            cluster.loop.executor_delay = self.normal_fsync
            self.note("heal fsync")
        elif fault == "clock-jump":
            for broker in cluster.brokers.values():
                broker.clock_skew_ms = 0
            self.note("heal clocks (set right again, as NTP would)")

    async def heal_all(self) -> None:
        for fault in sorted(self.active):
            await self._heal(fault)


async def _simulate(config: SimConfig, result: SimResult, root: Path, out: TextIO | None) -> None:
    loop = asyncio.get_running_loop()
    rng = random.Random(config.seed)

    def note(line: str, *, show: bool = True) -> None:
        text = f"{loop.time():10.3f} {line}"
        result.transcript.append(text)
        if show and out is not None:
            print(text, file=out, flush=True)

    # a name no other run of this process had: an exporter task of an earlier run that outlived it (SINKS is a
    # defaultdict) must not leave records where this run reads (id() of a result is reused once it is freed)
    sink = f"sim-{config.seed}-{next(_RUNS)}"
    SINKS.pop(sink, None)
    cluster = SimCluster(
        loop,
        rng,
        root,
        brokers=config.brokers,
        partitions=config.partitions,
        replication=config.replication,
        sink=sink,
    )
    for node in sorted(cluster.brokers):
        cluster.start_broker(node)
    note(
        f"cluster up: {config.brokers} brokers, {config.partitions} partitions, replication {config.replication}, "
        f"{cluster.max_commands_per_round} commands per round"
    )
    workload = Workload(cluster, random.Random(rng.getrandbits(64)), note)
    faults = _Faults(cluster, random.Random(rng.getrandbits(64)), config.faults, note)
    try:
        for tick in range(config.ticks):
            await faults.step(loop.time())
            workload.step(tick)
            if tick % 1000 == 999:
                note(f"progress {_outcomes(workload)}")
            await asyncio.sleep(TICK_S)
        await faults.heal_all()
        note("load stopped; draining")
        workload.starting = False
        drained_at = loop.time() + DRAIN_S
        tick = config.ticks
        quiet = _Quiet(cluster)
        while loop.time() < drained_at and not _all_done(cluster, workload):
            workload.step(tick)
            tick += 1
            await asyncio.sleep(TICK_S)
            if quiet.lasting(drained_at):
                if quiet.stuck:
                    note(f"quiet for {QUIET_S:g}s while scheduled work waits: drain stopped")
                else:
                    note(f"quiet for {QUIET_S:g}s with nothing scheduled before the drain ends: drain stopped")
                break
        await workload.drain()
        note(f"drained: {_outcomes(workload)}")
        for line in sorted(f"{k}={v}" for k, v in workload.history.outcomes.items()):
            note(line, show=False)
        result.violations += quiet.stuck
        result.violations += _check(cluster, workload, SINKS[sink], faults.windows)
        if result.violations:
            for line in cluster.describe():
                note(line, show=False)
        await cluster.stop()
        result.violations += _check_replay(cluster)
    finally:
        await cluster.stop()
        SINKS.pop(sink, None)
    for violation in result.violations:
        note(f"VIOLATION {violation}")


class _Quiet:
    """Tells when the draining cluster has gone quiet for good (see ``QUIET_S``), or quiet while scheduled work
    waits past its time (``OVERDUE_S``: ``stuck`` names the partitions); asked once per tick.

    Progress is the events the exporters saw, less job batches: clients keep trying (workers poll, a completion
    refused is tried again), and a poll that finds nothing still writes its (empty) batch, a refused command its
    rejection; but a command that changes anything writes other events (a poll that finds jobs, the jobs' own).
    """

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.seen: dict[int, int] = {}  # sink records looked at, by partition
        self.progress = 0
        self.since: float | None = None
        self.stuck: list[str] = []  # partitions whose due work waits too long (a liveness violation)

    def _moved(self) -> bool:
        before = self.progress
        for pid, exported in SINKS[self.cluster.sink].items():
            start = self.seen.get(pid, 0)
            self.progress += sum(
                1
                for _, record in exported[start:]
                if record.record_type == RecordType.EVENT and record.value_type != ValueType.JOB_BATCH
            )
            self.seen[pid] = len(exported)
        return self.progress != before

    def lasting(self, until: float) -> bool:
        now = self.cluster.loop.time()
        if self._moved() or self.since is None:
            self.since = now
            return False
        if now - self.since < QUIET_S:
            return False
        if self.cluster.idle_for(int((until - now) * 1000) + 1):
            return True
        self.stuck = self.cluster.overdue_by(int(OVERDUE_S * 1000))
        if self.stuck:
            return True
        self.since = now  # still waiting for what is scheduled: look again after another quiet span
        return False


def _outcomes(workload: Workload) -> str:
    history = workload.history
    return (
        f"instances={len(history.instances)} completed={len(workload.finished & history.instances.keys())} "
        f"jobs={len(history.completed_jobs)} pushed={history.outcomes['pushed']} "
        f"canaries={len(history.canary_done)}/{len(history.canaries)} identity={len(history.identity)}"
    )


def _all_done(cluster: SimCluster, workload: Workload) -> bool:
    workload.read_sink()
    return bool(workload.history.instances) and workload.history.instances.keys() <= workload.finished


def _check(cluster: SimCluster, workload: Workload, sink: dict, faults: list[tuple[float, float]]) -> list[str]:
    history = workload.history
    replica_blocks = {pid: cluster.committed(pid) for pid in range(1, cluster.partitions_count + 1)}
    logs = {pid: list(checks.records(max(replicas, key=len))) for pid, replicas in replica_blocks.items() if replicas}
    violations = []
    violations += checks.acknowledged_lost(history, logs)
    violations += checks.double_completion(logs)
    violations += checks.pushed_committed(history, logs)
    violations += checks.duplicate_keys(logs)
    violations += checks.replicas_agree(replica_blocks)
    violations += checks.exported_once_in_order(sink, logs)
    violations += checks.deployments_everywhere(history, logs)
    violations += checks.deployments_usable(history)
    violations += checks.tenants_kept(history, logs)
    violations += checks.identity_everywhere(history, logs)
    violations += checks.completed_instances(history, logs)
    violations += checks.canaries_in_time(history, CANARY_BOUND_S, faults)
    return violations


def _check_replay(cluster: SimCluster) -> list[str]:
    """After the cluster stopped: each replica's live state equals a replay of its log."""
    out = []
    for pid in range(1, cluster.partitions_count + 1):
        for node in cluster.replicas_of[pid]:
            broker = cluster.brokers[node]
            log = broker.disk.logs.get(pid)
            if log is not None:
                directory = broker.disk.root / "partitions" / str(pid)
                found = checks.replay_equals_live(pid, log.survivor(), directory, cluster.partitions_count)
                out += [f"broker {node}: {line}" for line in found]
    return out


def run(config: SimConfig, out: TextIO | None = sys.stdout) -> SimResult:
    """One seeded run; prints notable lines to ``out`` and returns the transcript and the violations."""
    result = SimResult(config.seed)
    loop = SimLoop()
    asyncio.set_event_loop(loop)
    try:
        with world_switch(), tempfile.TemporaryDirectory(prefix=f"weir-sim-{config.seed}-") as root:
            loop.run_until_complete(_simulate(config, result, Path(root), out))
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    return result


def parse_faults(text: str) -> tuple[str, ...]:
    if text == "all":
        return FAULTS
    faults = tuple(f for f in text.split(",") if f)
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        raise SystemExit(f"weir sim: unknown fault(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}")
    return faults


def main(args: argparse.Namespace) -> int:
    """Run ``--seeds`` seeds; exit 1 at the first violation, naming the seed, the invariant and the tail."""
    if not 1 <= args.replication <= args.brokers:
        raise SystemExit("weir sim: --replication must be between 1 and --brokers")
    faults = parse_faults(args.faults)
    logs.configure(args.log_level)
    gc_policy.apply_after_startup()  # a long run of production code, like a node's
    for seed in range(args.seed, args.seed + args.seeds):
        config = SimConfig(seed, args.ticks, args.brokers, args.partitions, args.replication, faults)
        started = time.monotonic()
        with injected(args.inject_bug):
            result = run(config, None if args.quiet else sys.stdout)
        counts = [line for line in result.transcript if " drained: " in line]
        print(
            f"seed {seed}: {counts[-1].split(' drained: ')[-1] if counts else 'no drain'}; "
            f"{len(result.transcript)} transcript lines, {len(result.violations)} violations, "
            f"{time.monotonic() - started:.1f}s"
        )
        print(f"transcript sha256 {result.sha256}")
        if result.violations:
            print(f"seed {seed} violated:", file=sys.stderr)
            for violation in result.violations:
                print(f"  {violation}", file=sys.stderr)
            print("transcript tail:", file=sys.stderr)
            for line in result.transcript[-20:]:
                print(f"  {line}", file=sys.stderr)
            print(f"reproduce: weir sim --seed {seed} {_flags(args)}", file=sys.stderr)
            return 1
    return 0


def _flags(args: argparse.Namespace) -> str:
    flags = f"--ticks {args.ticks} --brokers {args.brokers} --partitions {args.partitions}"
    if args.faults:
        flags += f" --faults {args.faults}"
    if args.inject_bug:
        flags += f" --inject-bug {args.inject_bug}"
    return flags
