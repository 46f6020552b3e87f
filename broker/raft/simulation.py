"""Deterministic whole-cluster simulation of Weir's Raft replication: one thread, one seed, faults, checkers.

`SimulatedReplicatedLog` is `ReplicatedLog` (same contract, same code) around the production `RaftMember`,
with only transport, clock, randomness and disk swapped for those of `broker.raft.sim_world`, and ticked by
the caller. `Simulation` runs N of them for a seed: random proposals and random faults (crash and restart
with or without losing what was not synced, symmetric and one-way partitions, lost, duplicated, reordered
and delayed messages, slow syncs, forward clock jumps), then heals everything and checks:

- agreement: no two deliveries (any members, any lifetimes, snapshots included) differ at the same index;
- acknowledged means durable: when a `replicate` future resolves, the entry is in the synced journal (or the
  synced snapshot) of a majority, and after healing every member holds it;
- at most one leader per term; no member stops on a fatal error (e.g. truncating applied entries);
- liveness: after healing, a new proposal commits and reaches every member within `heal_seconds`.

Every notable event is a line of the transcript; the same seed and options give the same lines in any
process (see `SimNode` for why that needs care), so a failing seed replays exactly.

Many seeds: `python -m broker.raft.simulation --seeds 1000` (see `--help`).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import heapq
import logging
import pickle
import random
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.raft._member import RaftMember, RaftRole
from broker.raft.config import RaftConfig
from broker.raft.errors import ReplicationError
from broker.raft.replicated_log import (
    CommitCallback,
    ReplicatedLog,
    RoleCallback,
    SnapshotInstaller,
    SnapshotProvider,
)
from broker.raft.sim_world import LinkFaults, NodeEnv, SimNetwork, SimNode, SimTransport, world_switch

BUGS = ("skip-journal-sync", "no-load-fixes")
"""Bugs the simulator's self-test injects: acknowledge appends without syncing the journal; pysyncobj 0.3.17
without Weir's load fixes."""


PAUSES: dict[str, Any] = {
    "pause_rate": 0.01,
    "batch_size_bytes": 1200,
    "link_bytes_per_second": 100_000.0,
    "lossy_share": 0.0,
}
"""`--pauses`: members are paused now and then; AppendEntries messages are small, so a follower that lagged behind
for a pause gets many per heartbeat, and links have a bandwidth, so the answers reach the leader over several of
its ticks, as over TCP on a busy machine. Links are FIFO (pysyncobj's chunked snapshot transfer needs TCP's
order, and a paused process is still on TCP)."""


class SimulatedReplicatedLog(ReplicatedLog):
    """`ReplicatedLog` on a simulated member: call `tick()` (and `deliver()`) instead of running a thread."""

    def __init__(
        self,
        config: RaftConfig,
        env: NodeEnv,
        *,
        on_commit: CommitCallback,
        snapshot_provider: SnapshotProvider,
        snapshot_installer: SnapshotInstaller,
        on_role_change: RoleCallback | None = None,
    ) -> None:
        self._env = env
        with env.active():
            super().__init__(
                config,
                on_commit=on_commit,
                snapshot_provider=snapshot_provider,
                snapshot_installer=snapshot_installer,
                on_role_change=on_role_change,
            )

    def _make_member(self, config: RaftConfig) -> RaftMember:
        overrides: dict[str, object] = {"autoTick": False, "password": None}
        return RaftMember(
            config,
            self,
            disk=self._env.disk,
            transport_class=SimTransport,
            node_class=SimNode,
            syncobj_overrides=overrides,
        )

    def _now(self) -> float:  # type: ignore[override]
        return self._env.monotonic()

    def replicate(self, payload: bytes, timeout: float | None = None) -> Future[int]:
        with self._env.active():
            return super().replicate(payload, timeout)

    def tick(self) -> None:
        """One pass of the member's loop (what pysyncobj's tick thread does every `tick_seconds`)."""
        member = self._member
        if member is None or self._stopped:
            return
        with self._env.active():
            member.doTick(0.0)

    def deliver(self, source: str, message: Any) -> None:
        """Hand a message from `source` to the member, as its transport would."""
        transport = self._env.transport
        if transport is None or self._stopped:
            return
        with self._env.active():
            transport.deliver(source, message)

    def refresh_connections(self) -> None:
        if self._env.transport is not None and not self._stopped:
            with self._env.active():
                self._env.transport.refresh_connections()

    def close(self, timeout: float = 5.0) -> None:
        with self._env.active():
            super().close(timeout)


# ------------------------------------------------------------------------------------------------ options


@dataclass(frozen=True, slots=True)
class SimOptions:
    """What one run does. Rates are per simulated tick (10 ms by default)."""

    members: int = 3
    ticks: int = 1500
    propose_rate: float = 0.3
    crash_rate: float = 0.004
    partition_rate: float = 0.004
    clock_jump_rate: float = 0.002
    slow_disk_rate: float = 0.003
    lossy_share: float = 0.5
    """Share of seeds whose links also lose, duplicate and reorder single messages (pysyncobj runs on TCP,
    which does none of that within a connection; the other seeds model TCP: FIFO, loss only by reset)."""
    compaction_min_entries: int = 40
    pause_rate: float = 0.0
    """A member stops (SIGSTOP: no ticks, messages to it queue) for 0.3–3 s. Off by default so that the seeds
    of earlier findings keep their runs; `--pauses` and the pause tests turn it on."""
    batch_size_bytes: int | None = None
    """Bytes per AppendEntries message (default: production's). Small batches make a leader pipeline many
    messages per heartbeat to a lagging follower, as large blocks do in production."""
    link_bytes_per_second: float | None = None
    """Bandwidth of every link (None: unlimited). Limited, a burst of messages arrives over several ticks."""
    heal_seconds: float = 30.0
    bug: str | None = None
    check_durable_majority: bool = True

    def config(self, address: str, partners: list[str]) -> RaftConfig:
        batches: dict[str, Any] = {}
        if self.batch_size_bytes is not None:  # simulated blocks are tiny
            batches = {"batch_size_bytes": self.batch_size_bytes, "max_payload_bytes": 64}
        return RaftConfig(
            self_address=address,
            partner_addresses=tuple(partners),
            password="simulated",
            data_dir=Path("/simulated") / address.replace(":", "_"),
            compaction_min_entries=self.compaction_min_entries,
            compaction_min_seconds=5.0,
            apply_load_fixes=self.bug != "no-load-fixes",
            max_in_flight=64,
            **batches,
        ).validate()


@dataclass(slots=True)
class Violation:
    at: float
    invariant: str
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant} at t={self.at:.3f}s: {self.detail}"


@dataclass(slots=True)
class SimResult:
    seed: int
    options: SimOptions
    violations: list[Violation]
    transcript: list[str]
    stats: dict[str, int]

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def sha256(self) -> str:
        return hashlib.sha256("\n".join(self.transcript).encode()).hexdigest()


# ----------------------------------------------------------------------------------------------- a member


class _StateMachine:
    """What the partition layer would hold: every delivered block by index, rebuilt from Raft after a restart."""

    def __init__(self) -> None:
        self.blocks: dict[int, bytes] = {}
        self.position = 0

    def snapshot(self, index: int) -> bytes:
        return pickle.dumps(sorted((i, b) for i, b in self.blocks.items() if i <= index))

    def install(self, index: int, data: bytes) -> bool:
        if index <= self.position:
            return False
        self.blocks = dict(pickle.loads(data))
        self.position = index
        return True


@dataclass(slots=True)
class _Member:
    address: str
    env: NodeEnv
    log: SimulatedReplicatedLog | None = None
    state: _StateMachine = field(default_factory=_StateMachine)
    lifetime: int = 0
    tick_while_paused: bool = False
    """Paused in the middle of a tick: that tick still runs, its messages leave when the pause ends."""


# ------------------------------------------------------------------------------------------------- the run


class Simulation:
    """One seeded run; `run()` returns the result. See the module docstring."""

    def __init__(self, seed: int, options: SimOptions | None = None) -> None:
        self.seed = seed
        self.options = options = options or SimOptions()
        self.rng = random.Random(f"weir-sim-{seed}")
        self.addresses = [f"m{i}:{7000 + i}" for i in range(1, options.members + 1)]
        self.network = SimNetwork(self.addresses, random.Random(self.rng.random()))
        self.now = 0.0
        self.tick_seconds = options.config(self.addresses[0], self.addresses[1:]).tick_seconds
        self.transcript: list[str] = []
        self.violations: list[Violation] = []
        self.members = {
            a: _Member(a, NodeEnv(a, self._world_now, self.network, self.rng.randrange(2**32))) for a in self.addresses
        }
        self._snapshot_paths = {a: str(options.config(a, []).snapshot_path) for a in self.addresses}
        self.committed: dict[int, tuple[bytes, str]] = {}
        self.acked: dict[int, bytes] = {}
        self.leaders: dict[int, str] = {}
        self._events: list[tuple[float, int, str, Callable[[], None]]] = []
        self._event_seq = 0
        self._proposals = 0
        self._partitioned = False
        self.stats = {"proposed": 0, "acked": 0, "failed": 0, "rejected": 0, "crashes": 0, "partitions": 0, "pauses": 0}
        self.pause_rng = random.Random(f"weir-sim-pauses-{seed}")  # its own stream: pauses off leave runs as they were
        self.lossy = self.rng.random() < options.lossy_share
        if options.link_bytes_per_second:
            for pair in self.network.faults:
                self.network.faults[pair] = LinkFaults(bytes_per_second=options.link_bytes_per_second)
        if self.lossy:
            for pair in self.network.faults:
                self.network.faults[pair] = LinkFaults(
                    drop=self.rng.uniform(0.0, 0.1),
                    duplicate=self.rng.uniform(0.0, 0.1),
                    fifo=False,
                    bytes_per_second=options.link_bytes_per_second,
                )
        if options.bug == "skip-journal-sync":
            for member in self.members.values():
                member.env.disk.skip_journal_sync = True

    def _world_now(self) -> float:
        return self.now

    def record(self, line: str) -> None:
        self.transcript.append(f"{self.now:.3f} {line}")

    def violate(self, invariant: str, detail: str) -> None:
        violation = Violation(self.now, invariant, detail)
        self.violations.append(violation)
        self.record(f"VIOLATION {violation}")

    # ----------------------------------------------------------------------------------------- lifecycle

    def run(self) -> SimResult:
        with world_switch():
            self.start()
            for _ in range(self.options.ticks):
                if self.violations:
                    break
                self._inject_faults()
                self.step()
            if not self.violations:
                self._heal_and_check()
            self.close()
        return self.result()

    def start(self) -> None:
        """Start every member (inside `world_switch()`, as every call that runs members)."""
        self.record(f"seed {self.seed} members {len(self.addresses)} lossy {self.lossy}")
        for address in self.addresses:
            self._start(address)

    def close(self) -> None:
        for member in self.members.values():
            if member.log is not None:
                member.log.close()

    def result(self) -> SimResult:
        stats = dict(self.stats, sent=self.network.sent, dropped=self.network.dropped)
        stats["duplicated"] = self.network.duplicated
        return SimResult(self.seed, self.options, self.violations, self.transcript, stats)

    def _start(self, address: str) -> None:
        member = self.members[address]
        member.lifetime += 1
        member.state = _StateMachine()
        member.env.busy_until = 0.0
        member.env.inbox.clear()
        self.network.up.add(address)
        self.network.reset_links_of(address)
        partners = [a for a in self.addresses if a != address]
        member.log = SimulatedReplicatedLog(
            self.options.config(address, partners),
            member.env,
            on_commit=lambda index, block: self._on_commit(member, index, block),
            snapshot_provider=lambda index: member.state.snapshot(index),
            snapshot_installer=lambda index, data: self._on_install(member, index, data),
            on_role_change=lambda role, term, leader: self._on_role(member, role, term, leader),
        )
        self._refresh_connections()
        self.record(f"{address} start lifetime {member.lifetime}")

    def _crash(self, address: str, lose_unsynced: bool) -> None:
        member = self.members[address]
        if member.log is None:
            return
        member.log = None  # the process is gone: no close, no callbacks, pending calls never resolve
        member.env.transport = None
        member.env.inbox.clear()
        member.env.disk.crash(lose_unsynced)
        self.network.up.discard(address)
        self.network.reset_links_of(address)
        self._refresh_connections()
        self.stats["crashes"] += 1
        self.record(f"{address} crash {'power-loss' if lose_unsynced else 'kill'}")

    def _refresh_connections(self) -> None:
        for member in self.members.values():
            if member.log is not None:
                member.log.refresh_connections()

    # ------------------------------------------------------------------------------------------- callbacks

    def _on_commit(self, member: _Member, index: int, block: bytes) -> None:
        member.state.blocks[index] = block
        member.state.position = index
        self.record(f"{member.address} commit {index} {block.decode()}")
        self._check_agreement(member.address, index, block)

    def _on_install(self, member: _Member, index: int, data: bytes) -> None:
        if member.state.install(index, data):
            self.record(f"{member.address} install snapshot {index}")
            for i, block in member.state.blocks.items():
                self._check_agreement(member.address, i, block)

    def _on_role(self, member: _Member, role: RaftRole, term: int, leader: str | None) -> None:
        self.record(f"{member.address} role {role.value} term {term} leader {leader}")
        if role is RaftRole.LEADER:
            first = self.leaders.setdefault(term, member.address)
            if first != member.address:
                self.violate("one leader per term", f"{first} and {member.address} both lead term {term}")

    def _check_agreement(self, address: str, index: int, block: bytes) -> None:
        seen = self.committed.setdefault(index, (block, address))
        if seen[0] != block:
            self.violate("agreement", f"index {index}: {seen[1]} has {seen[0]!r}, {address} has {block!r}")

    # ------------------------------------------------------------------------------------------- proposals

    def _propose(self, member: _Member) -> Future[int] | None:
        assert member.log is not None
        self._proposals += 1
        block = f"s{self.seed}p{self._proposals}".encode()
        try:
            future = member.log.replicate(block)
        except ReplicationError as exc:
            self.stats["rejected"] += 1
            self.record(f"{member.address} propose {block.decode()} rejected {type(exc).__name__}")
            return None
        self.stats["proposed"] += 1
        self.record(f"{member.address} propose {block.decode()}")
        future.add_done_callback(lambda f: self._on_outcome(member.address, block, f))
        return future

    def _on_outcome(self, address: str, block: bytes, future: Future[int]) -> None:
        error = future.exception()
        if error is not None:
            self.stats["failed"] += 1
            self.record(f"{address} {block.decode()} failed {type(error).__name__}")
            return
        index = future.result()
        self.stats["acked"] += 1
        self.record(f"{address} {block.decode()} acked at {index}")
        seen = self.committed.get(index)
        if seen is None or seen[0] != block:
            self.violate("acknowledged means committed", f"{block!r} acked at {index}, committed there: {seen}")
        self.acked[index] = block
        if self.options.check_durable_majority:
            self._check_durable_majority(address, index)

    def _check_durable_majority(self, leader: str, index: int) -> None:
        disk = self.members[leader].env.disk
        first = disk.entries[0][1] if disk.entries else 0
        if not first <= index < first + len(disk.entries):
            return  # compacted on the leader already: the snapshot checks below cover it
        entry = disk.entries[index - first]
        holders = []
        for member in self.members.values():
            member_disk = member.env.disk
            synced = member_disk.synced_entries
            start = synced[0][1] if synced else 0
            in_journal = start <= index < start + len(synced) and synced[index - start] == entry
            snapshot = member_disk.durable_snapshot_index(self._snapshot_paths[member.address])
            if in_journal or snapshot >= index:
                holders.append(member.address)
        if len(holders) <= len(self.members) // 2:
            self.violate("acknowledged means durable on a majority", f"index {index} synced only on {holders}")

    # ---------------------------------------------------------------------------------------------- faults

    def _schedule(self, delay: float, what: str, action: Callable[[], None]) -> None:
        self._event_seq += 1
        heapq.heappush(self._events, (self.now + delay, self._event_seq, what, action))

    def _inject_faults(self) -> None:
        rng, options = self.rng, self.options
        up = [m for m in self.members.values() if m.log is not None]
        if up and rng.random() < options.propose_rate:
            leaders = [m for m in up if m.log is not None and m.log.is_leader]
            self._propose(rng.choice(leaders if leaders and rng.random() < 0.9 else up))
        if up and rng.random() < options.crash_rate:
            victim = rng.choice(up)
            self._crash(victim.address, lose_unsynced=rng.random() < 0.5)
            self._schedule(rng.uniform(0.1, 3.0), f"restart {victim.address}", self._restarter(victim.address))
        if not self._partitioned and rng.random() < options.partition_rate:
            self._partition()
        if rng.random() < options.clock_jump_rate:
            member = rng.choice(list(self.members.values()))
            jump = rng.uniform(0.05, 2.0)
            member.env.clock_offset += jump
            self.record(f"{member.address} clock jumps {jump:.3f}s")
        if options.pause_rate and up and self.pause_rng.random() < options.pause_rate:
            self._pause(up)
        if rng.random() < options.slow_disk_rate:
            member = rng.choice(list(self.members.values()))
            member.env.slow_sync_seconds = rng.uniform(0.005, 0.4)
            self.record(f"{member.address} disk slow {member.env.slow_sync_seconds:.3f}s per sync")
            self._schedule(rng.uniform(0.5, 4.0), f"{member.address} disk normal", self._disk_normal(member))

    def _pause(self, up: list[_Member]) -> None:
        """SIGSTOP, mostly of a leader under load: a burst of proposals reaches it, then it stops in the middle of
        its next tick: it appends them, but what it sends leaves only when it resumes (a kernel buffer)."""
        rng = self.pause_rng
        leaders = [m for m in up if m.log is not None and m.log.is_leader]
        member = rng.choice(leaders if leaders and rng.random() < 0.8 else up)
        if member in leaders:
            for _ in range(rng.randint(1, 20)):
                self._propose(member)
        pause = rng.uniform(0.3, 3.0)
        member.env.busy_until = max(member.env.busy_until, self.now) + pause
        member.tick_while_paused = True
        self.stats["pauses"] += 1
        self.record(f"{member.address} paused {pause:.3f}s")

    def _restarter(self, address: str) -> Callable[[], None]:
        return lambda: self._start(address) if self.members[address].log is None else None

    def _disk_normal(self, member: _Member) -> Callable[[], None]:
        def normal() -> None:
            member.env.slow_sync_seconds = 0.0

        return normal

    def _partition(self) -> None:
        rng, addresses = self.rng, self.addresses
        kind = rng.choice(("isolate", "split", "one-way", "one-way-many"))
        cuts: list[tuple[str, str]] = []
        if kind == "isolate":
            lonely = rng.choice(addresses)
            cuts = [(a, b) for a in addresses for b in addresses if a != b and lonely in (a, b)]
        elif kind == "split":
            shuffled = addresses[:]
            rng.shuffle(shuffled)
            side = set(shuffled[: rng.randint(1, len(addresses) - 1)])
            cuts = [(a, b) for a in addresses for b in addresses if a != b and (a in side) != (b in side)]
        elif kind == "one-way":
            a, b = rng.sample(addresses, 2)
            cuts = [(a, b)]
        else:
            cuts = [(a, b) for a in addresses for b in addresses if a != b and rng.random() < 0.4]
        for a, b in cuts:
            self.network.set_cut(a, b, True)
        self._partitioned = True
        self.stats["partitions"] += 1
        self.record(f"partition {kind}: {' '.join(f'{a}->{b}' for a, b in cuts) or 'none'}")
        self._refresh_connections()
        self._schedule(rng.uniform(0.2, 4.0), "heal", self._heal_network)

    def _heal_network(self) -> None:
        for a, b in self.network.links:
            self.network.set_cut(a, b, False)
        self._partitioned = False
        self._refresh_connections()

    # ------------------------------------------------------------------------------------------------ step

    def step(self) -> None:
        """Advance the world by one tick: due events, due messages, then one tick of each member."""
        self.now += self.tick_seconds
        while self._events and self._events[0][0] <= self.now:
            _, _, what, action = heapq.heappop(self._events)
            self.record(what)
            action()
        for source, target, message in self.network.due(self.now):
            self.members[target].env.inbox.append((source, message))
        order = self.addresses[:]
        self.rng.shuffle(order)
        for address in order:
            member = self.members[address]
            env = member.env
            while member.log is not None and env.inbox and not env.busy():
                source, message = env.inbox.popleft()
                member.log.deliver(source, message)
            if member.log is not None and (not env.busy() or member.tick_while_paused):
                member.tick_while_paused = False
                member.log.tick()
                if member.log._fatal is not None:
                    self.violate("no fatal error", f"{address}: {member.log._fatal}")
                    member.log._fatal = None  # reported once; the member is stopped by its own tick

    def _members_up(self) -> Iterator[_Member]:
        return (m for m in self.members.values() if m.log is not None)

    # ---------------------------------------------------------------------------------------- heal & check

    def _heal_and_check(self) -> None:
        self.record("heal everything")
        self._events.clear()
        self._heal_network()
        for pair in self.network.faults:
            self.network.faults[pair] = LinkFaults()
        for member in self.members.values():
            member.env.slow_sync_seconds = 0.0
            if member.log is None:
                self._start(member.address)
        deadline = self.now + self.options.heal_seconds
        probe: Future[int] | None = None
        while self.now < deadline and not self.violations:
            self.step()
            if probe is not None and probe.done() and probe.exception() is not None:
                probe = None
            if probe is None:
                leaders = [m for m in self._members_up() if m.log is not None and m.log.is_leader]
                if leaders:
                    probe = self._propose(leaders[0])
            elif probe.done():
                index = probe.result()
                if all(index in m.state.blocks for m in self.members.values()):
                    break
        else:
            if not self.violations:
                self.violate(
                    "liveness after healing", f"no proposal reached every member in {self.options.heal_seconds}s"
                )
        if self.violations:
            return
        for member in self.members.values():
            if member.log is not None and member.log.status().role is RaftRole.STOPPED:
                self.violate("no fatal error", f"{member.address} is stopped")
            for index, block in sorted(self.acked.items()):
                held = member.state.blocks.get(index)
                if held != block:
                    self.violate("acknowledged survives", f"{member.address} has {held!r} at {index}, acked {block!r}")
                    break
        self.record(f"done: {len(self.acked)} acked, {len(self.committed)} committed indexes")


def run_seed(seed: int, options: SimOptions | None = None) -> SimResult:
    return Simulation(seed, options).run()


def main(argv: list[str] | None = None) -> int:
    defaults = SimOptions()
    parser = argparse.ArgumentParser(prog="python -m broker.raft.simulation", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds to run")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--ticks", type=int, default=defaults.ticks, help="simulated ticks of faults per seed")
    parser.add_argument("--members", type=int, default=defaults.members)
    parser.add_argument("--pauses", action="store_true", help="also pause members (SIGSTOP), with small batches")
    parser.add_argument("--bug", choices=BUGS, help="inject a known bug (the checkers must catch it)")
    parser.add_argument("--transcript", action="store_true", help="print the transcript of failing seeds")
    args = parser.parse_args(argv)
    logging.getLogger("pysyncobj").setLevel(logging.ERROR)  # its warnings about expected crash effects are noise here
    options = SimOptions(ticks=args.ticks, members=args.members, bug=args.bug)
    if args.pauses:
        options = dataclasses.replace(options, **PAUSES)
    failed = 0
    started = time.perf_counter()
    for seed in range(args.start, args.start + args.seeds):
        result = run_seed(seed, options)
        if not result.ok:
            failed += 1
            print(f"seed {seed} FAILED ({result.sha256[:16]}): {result.violations[0]}")
            if args.transcript:
                print("\n".join(result.transcript))
    elapsed = time.perf_counter() - started
    print(f"{args.seeds} seeds, {failed} failed, {elapsed:.1f}s, {args.seeds / elapsed:.2f} seeds/s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
