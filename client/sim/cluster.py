"""A whole Weir cluster in one process: brokers, partition replicas, gateway routing, exporters, a simulated network.

Every replica is the production :class:`~broker.stream.partition.Partition` (its deterministic core, its commit seam,
its scheduled work, its exporters); what is swapped is time (the :class:`~client.sim.loop.SimLoop`), the disk
(:class:`SimDisk`: logs in memory that lose unflushed blocks in a crash, a free-space figure faults can shrink) and
the network between the gateway and the brokers and between partitions (:class:`SimNetwork`: links that are cut,
drop or delay messages as the run's RNG decides). The gateway's command layer (``GatewayCommands``) is the real one,
over a broker client that routes through the simulated network.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.log import LogBlock, LogStorage, MemoryLog
from broker.protocol.enums import ValueType
from broker.protocol.record import Record
from broker.protocol.values import TENANT
from broker.raft import RaftConfig
from broker.raft.sim_world import LinkFaults, NodeEnv
from broker.raft.sim_world import SimNetwork as RaftNetwork
from broker.raft.simulation import SimulatedReplicatedLog
from broker.stream.backpressure import BackpressureConfig
from broker.stream.commit import RaftCommit
from broker.stream.partition import Partition, PartitionConfig, PartitionUnavailableError
from broker.transport.broker_client import BrokerInfo, JobsAvailableListener, JobSink, PartitionInfo, Topology
from gateway.commands import GatewayCommands

# Simulated wall clock at the start of every run: 2026-01-01T00:00:00Z, so timestamps do not depend on the day.
EPOCH_MS = 1_767_225_600_000

GATEWAY = 0  # the gateway's node id in the network (brokers are 1..N)


class SimDisk:
    """One broker's disk: partition directories under ``root`` (LMDB state, snapshots), logs in memory.

    ``archive`` keeps every block that was ever durable here, compaction or not: the checkers' record of what this
    replica committed (the log itself forgets compacted blocks).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.logs: dict[int, MemoryLog] = {}
        self.archive: dict[int, list[LogBlock]] = {}
        self.free_bytes = 1 << 40

    def log_opener(self, partition_id: int) -> Callable[[Path, int], LogStorage]:
        def open_log(directory: Path, committed: int) -> LogStorage:
            log = self.logs.get(partition_id)
            if log is None:
                log = self.logs[partition_id] = MemoryLog()
                self._archive(partition_id, log)
            return log

        return open_log

    def _archive(self, partition_id: int, log: MemoryLog) -> None:
        archive = self.archive.setdefault(partition_id, [])

        def committed(position: int) -> None:
            done = archive[-1].last_position if archive else 0
            if position > done:
                archive.extend(b for b in log.read(max(done + 1, log.first_position)) if b.last_position > done)

        log.add_commit_listener(committed)

    def free(self, directory: Path) -> int:
        return self.free_bytes

    def crash(self) -> None:
        """What a power cut leaves: every log keeps its flushed blocks only."""
        for pid, log in list(self.logs.items()):
            self.logs[pid] = log.survivor()
            self._archive(pid, self.logs[pid])


@dataclass(slots=True)
class SimNetwork:
    """Links between nodes (0 is the gateway): cut ones refuse at once; others may drop or delay messages."""

    rng: random.Random
    cut: set[tuple[int, int]] = field(default_factory=set)
    drop_rate: float = 0.0
    duplicate_rate: float = 0.0
    max_delay_s: float = 0.0

    def reachable(self, source: int, target: int) -> bool:
        return (source, target) not in self.cut

    def delay(self) -> float:
        return self.rng.uniform(0, self.max_delay_s) if self.max_delay_s > 0 else 0.0

    def dropped(self) -> bool:
        return self.drop_rate > 0 and self.rng.random() < self.drop_rate

    def duplicated(self) -> bool:
        return self.duplicate_rate > 0 and self.rng.random() < self.duplicate_rate

    def heal(self) -> None:
        self.cut.clear()
        self.drop_rate = self.duplicate_rate = self.max_delay_s = 0.0


class SimBroker:
    """A broker: its disk, its Raft members' simulated disks and clocks, and its partition replicas while it runs."""

    def __init__(self, node_id: int, disk: SimDisk, partition_ids: list[int]) -> None:
        self.node_id = node_id
        self.disk = disk
        self.partition_ids = partition_ids
        self.partitions: dict[int, Partition] = {}
        self.raft_envs: dict[int, NodeEnv] = {}  # by partition: the member's clock, disk and transport
        self.clock_skew_ms = 0

    @property
    def up(self) -> bool:
        return bool(self.partitions)


class SimCluster:
    """Brokers × partitions on one simulated loop; see the module docstring."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        rng: random.Random,
        root: Path,
        *,
        brokers: int,
        partitions: int,
        replication: int,
        sink: str,
    ) -> None:
        if not 1 <= replication <= brokers:
            raise ValueError(f"replication {replication} needs at least as many brokers ({brokers})")
        self.loop = loop
        self.rng = rng
        self.root = root
        self.partitions_count = partitions
        self.replication = replication
        self.sink = sink
        self.network = SimNetwork(random.Random(rng.getrandbits(64)))
        # Partition p's replicas lie on brokers p, p+1, … (round robin, as Zeebe lays them out).
        self.replicas_of = {
            p: [(p - 1 + i) % brokers + 1 for i in range(replication)] for p in range(1, partitions + 1)
        }
        self.brokers = {
            n: SimBroker(n, SimDisk(root / f"broker-{n}"), [p for p, nodes in self.replicas_of.items() if n in nodes])
            for n in range(1, brokers + 1)
        }
        self._raft_rng = random.Random(rng.getrandbits(64))
        self.raft_networks: dict[int, RaftNetwork] = {}
        if replication > 1:
            for pid, nodes in self.replicas_of.items():
                network = RaftNetwork([_raft_address(n, pid) for n in nodes], random.Random(rng.getrandbits(64)))
                self.raft_networks[pid] = network
                for n in nodes:
                    env = NodeEnv(_raft_address(n, pid), loop.time, network, rng.getrandbits(32))
                    self.brokers[n].raft_envs[pid] = env
        self._raft_wake = {pid: asyncio.Event() for pid in self.raft_networks}
        self._raft_proposed: dict[int, set[int]] = {pid: set() for pid in self.raft_networks}  # nodes to tick now
        self._raft_tasks = [loop.create_task(self._run_raft(pid)) for pid in sorted(self.raft_networks)]
        self.jobs_listeners: list[JobsAvailableListener] = []
        self.job_streams: list[SimJobStream] = []
        # Round sizes vary by run: small rounds leave follow-ups queued across rounds (and so across crashes).
        self.max_commands_per_round = rng.choice([2, 8, 64, 500])
        self.gateway = GatewayCommands(
            SimBrokerClient(self), long_poll_ms=0, request_timeout_ms=15_000, multi_tenancy=True
        )

    # -- brokers ---------------------------------------------------------------------------------------------

    def clock(self, broker: SimBroker) -> Callable[[], int]:
        return lambda: EPOCH_MS + int(self.loop.time() * 1000) + broker.clock_skew_ms

    def start_broker(self, node_id: int) -> None:
        broker = self.brokers[node_id]
        for pid in broker.partition_ids:
            config = PartitionConfig(
                partition_id=pid,
                partitions_count=self.partitions_count,
                max_commands_per_round=self.max_commands_per_round,
                exporters={"sim": {"className": "client.sim.sink.MemoryExporter", "args": {"sink": self.sink}}},
                backpressure=BackpressureConfig(),
                snapshot_period_s=1e9,
                snapshot_min_records=1 << 60,
                min_free_disk_bytes=64 << 20,
                checker_interval_s=0.1,
            )
            partition = Partition(
                broker.disk.root / "partitions" / str(pid),
                config,
                clock=self.clock(broker),
                free_disk=broker.disk.free,
                monotonic=self.loop.time,
                log_storage=broker.disk.log_opener(pid),
            )
            partition.open()
            partition.inter_partition = SimRoute(self, node_id)
            for listener in self.jobs_listeners:
                partition.jobs_available_listeners.append(functools.partial(listener, pid))
            broker.partitions[pid] = partition
            env = broker.raft_envs.get(pid)
            if env is None:
                partition.start()
                continue
            network = self.raft_networks[pid]
            network.up.add(env.address)
            network.reset_links_of(env.address)
            env.inbox.clear()
            env.busy_until = 0.0
            partners = [_raft_address(n, pid) for n in self.replicas_of[pid] if n != node_id]
            factory = functools.partial(_simulated_log, env, functools.partial(self._raft_propose, pid, node_id))
            partition.start(_raft_config(env.address, partners), replicated_log=factory)
            self._refresh_raft(pid)

    async def crash_broker(self, node_id: int) -> None:
        """kill -9 and a power cut: replicas stop mid-round, unflushed log blocks are lost."""
        broker = self.brokers[node_id]
        broker.disk.crash()  # at once: nothing the replicas do while they are torn down reaches the disk
        partitions, broker.partitions = broker.partitions, {}
        for pid, env in broker.raft_envs.items():
            # the Raft member dies with the process: no goodbye to its peers, its unsynced writes are lost
            seam = getattr(partitions.get(pid), "seam", None)
            if isinstance(seam, RaftCommit):
                seam.raft = None
            env.transport = None
            env.inbox.clear()
            env.disk.crash(lose_unsynced=True)
            network = self.raft_networks[pid]
            network.up.discard(env.address)
            network.reset_links_of(env.address)
            self._refresh_raft(pid)
        for partition in partitions.values():
            await partition.abandon()

    # -- Raft ------------------------------------------------------------------------------------------------

    def _member(self, pid: int, node_id: int) -> SimulatedReplicatedLog | None:
        seam = getattr(self.brokers[node_id].partitions.get(pid), "seam", None)
        raft = seam.raft if isinstance(seam, RaftCommit) else None
        return raft if isinstance(raft, SimulatedReplicatedLog) else None

    def _refresh_raft(self, pid: int) -> None:
        for node in self.replicas_of[pid]:
            member = self._member(pid, node)
            if member is not None:
                member.refresh_connections()

    def _raft_propose(self, pid: int, node_id: int) -> None:
        self._raft_proposed[pid].add(node_id)
        self._raft_wake[pid].set()

    async def _run_raft(self, pid: int) -> None:
        """What the members' tick threads and sockets do: each member ticks when a message reaches it, when it
        proposed a block, and when its tick period passes; messages are delivered as they fall due."""
        loop, network, wake = self.loop, self.raft_networks[pid], self._raft_wake[pid]
        proposed = self._raft_proposed[pid]
        nodes = {_raft_address(n, pid): n for n in self.replicas_of[pid]}
        next_tick = loop.time()
        while True:
            arrival = network.next_arrival
            until = next_tick if arrival is None else min(next_tick, arrival)
            # (within the loop's clock resolution a timer counts as due: compare with the same slack)
            if until > loop.time() + _EPSILON_S and not wake.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), until - loop.time())
            wake.clear()
            period = loop.time() + _EPSILON_S >= next_tick
            if period:
                next_tick = loop.time() + RAFT_TICK_S
            for source, target, message in network.due(loop.time() + _EPSILON_S):
                self.brokers[nodes[target]].raft_envs[pid].inbox.append((source, message))
            order = sorted(nodes)
            self._raft_rng.shuffle(order)
            for address in order:
                node = nodes[address]
                env = self.brokers[node].raft_envs[pid]
                member = self._member(pid, node)
                woken = period or node in proposed
                while member is not None and env.inbox and not env.busy():
                    source, message = env.inbox.popleft()
                    member.deliver(source, message)
                    woken = True
                if woken and member is not None and not env.busy():
                    proposed.discard(node)
                    member.tick()
            await asyncio.sleep(0)

    def cut_brokers(self, a: int, b: int) -> None:
        """Cut the link from broker ``a`` to broker ``b`` (commands between partitions and Raft messages)."""
        self.network.cut.add((a, b))
        for pid, network in self.raft_networks.items():
            if a in self.replicas_of[pid] and b in self.replicas_of[pid]:
                network.set_cut(_raft_address(a, pid), _raft_address(b, pid), True)

    def set_raft_link_faults(self, drop: float, duplicate: float) -> None:
        for network in self.raft_networks.values():
            for pair in network.faults:
                network.faults[pair] = LinkFaults(drop=drop, duplicate=duplicate, fifo=not (drop or duplicate))

    def heal_network(self) -> None:
        self.network.heal()
        for network in self.raft_networks.values():
            for source, target in network.links:
                network.set_cut(source, target, False)
            for pair in network.faults:
                network.faults[pair] = LinkFaults()

    async def stop(self) -> None:
        """Stop every replica cleanly (no snapshot: the state on disk stays what processing and replay made)."""
        pumps = [stream._pump for stream in self.job_streams]
        for stream in list(self.job_streams):
            stream.close()
        await asyncio.gather(*pumps, return_exceptions=True)
        for broker in self.brokers.values():
            partitions, broker.partitions = broker.partitions, {}
            for partition in partitions.values():
                await partition.close(snapshot=False)
        for task in self._raft_tasks:
            task.cancel()
        await asyncio.gather(*self._raft_tasks, return_exceptions=True)
        self._raft_tasks = []

    def describe(self) -> list[str]:
        """One line per replica: what it is doing (for the transcript of a failed run)."""
        lines = []
        for pid in range(1, self.partitions_count + 1):
            for node in self.replicas_of[pid]:
                p = self.brokers[node].partitions.get(pid)
                if p is None:
                    lines.append(f"partition {pid} on broker {node}: down")
                    continue
                seam = p.seam
                raft = seam.raft if isinstance(seam, RaftCommit) else None
                status = (
                    ""
                    if raft is None
                    else (
                        f" raft {raft.status().role.value} term {raft.term} commit {raft.commit_index} "
                        f"applied {raft.last_applied} in-flight {raft.in_flight}"
                    )
                )
                lines.append(
                    f"partition {pid} on broker {node}: {p.role} processing={p.processing} healthy={p.healthy} "
                    f"backlog={p.backlog} applied={p.applied_position} processed={p.processed_position} "
                    f"log={p.log_storage.commit_position if p.log_storage else 0}"
                    f"/{p.log_storage.last_position if p.log_storage else 0}"
                    f" round={getattr(seam, '_round_block', None)}{status}"
                    + (f" failure={p.failure}" if p.failure else "")
                    + (f" problem={p.problem}" if p.problem else "")
                )
        return lines

    # -- routing ---------------------------------------------------------------------------------------------

    def leader(self, partition_id: int) -> tuple[int, Partition] | None:
        """The broker whose replica of the partition processes commands now, and that replica."""
        for node in self.replicas_of[partition_id]:
            partition = self.brokers[node].partitions.get(partition_id)
            if partition is not None and partition.processing:
                return node, partition
        return None

    def idle_for(self, span_ms: int) -> bool:
        """Whether every partition has a leader and no leader sends or has work due within ``span_ms``."""
        for pid in sorted(self.replicas_of):
            lead = self.leader(pid)
            if lead is None or not lead[1].idle_for(span_ms):
                return False
        return True

    def overdue_by(self, ms: int) -> list[str]:
        """One line per partition whose leader holds scheduled work that fell due more than ``ms`` ago."""
        return [
            f"partition {pid}: scheduled work on its leader (broker {lead[0]}) fell due more than {ms} ms ago and "
            "still waits, on a quiet cluster"
            for pid in sorted(self.replicas_of)
            if (lead := self.leader(pid)) is not None and lead[1].overdue_by(ms)
        ]

    def committed(self, partition_id: int) -> list[list[LogBlock]]:
        """Every replica's committed blocks of the partition, compacted ones included (see SimDisk.archive)."""
        archives = (self.brokers[n].disk.archive.get(partition_id) for n in self.replicas_of[partition_id])
        return [blocks for blocks in archives if blocks is not None]

    async def send(
        self,
        source: int,
        partition_id: int,
        value_type: ValueType,
        intent: int,
        value: dict,
        key: int,
        *,
        internal: bool,
        authorization: dict[str, Any] | None = None,
    ) -> Record:
        """A command from ``source`` to the partition's leader through the network; its response comes back."""
        leader = self.leader(partition_id)
        if leader is None:
            raise PartitionUnavailableError(f"no leader for partition {partition_id}")
        target, partition = leader
        if not self.network.reachable(source, target):
            raise PartitionUnavailableError(f"node {target} is unreachable from node {source}")
        await asyncio.sleep(self.network.delay())
        if self.network.dropped():
            await asyncio.sleep(3600)  # lost on the way: the sender's timeout decides
        if not partition.processing:
            raise PartitionUnavailableError(f"node {target} no longer leads partition {partition_id}")
        future = partition.execute(value_type, intent, value, key, internal=internal, authorization=authorization)
        if self.network.duplicated():
            # the same command delivered twice (a retry the network made): the second is processed on its own
            with contextlib.suppress(Exception):  # refused at the door (backpressure): as if the copy was lost
                copy = partition.execute(
                    value_type, intent, dict(value), key, internal=internal, authorization=authorization
                )
                copy.add_done_callback(_ignore)
        reply = await asyncio.shield(future)
        await asyncio.sleep(self.network.delay())
        if self.network.dropped() or not self.network.reachable(target, source):
            await asyncio.sleep(3600)  # the answer is lost: the outcome is unknown to the sender
        return reply


def _ignore(future: asyncio.Future[Record]) -> None:
    if not future.cancelled():
        future.exception()


class SimRoute:
    """A partition's route to other partitions' leaders (deployment distribution, subscriptions)."""

    def __init__(self, cluster: SimCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id

    async def execute(
        self, partition_id: int, value_type: ValueType, intent: int, value: dict, key: int = -1, *, internal: bool
    ) -> Record:
        return await self.cluster.send(self.node_id, partition_id, value_type, intent, value, key, internal=internal)


class SimBrokerClient:
    """The gateway's view of the cluster (a ``broker.transport.broker_client.BrokerClient``) through the network."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster

    @property
    def partition_ids(self) -> list[int]:
        return list(range(1, self.cluster.partitions_count + 1))

    async def execute(
        self,
        partition_id: int,
        value_type: ValueType,
        intent: int,
        value: dict,
        key: int = -1,
        *,
        internal: bool = False,
        authorization: dict[str, Any] | None = None,
    ) -> Record:
        return await self.cluster.send(
            GATEWAY, partition_id, value_type, intent, value, key, internal=internal, authorization=authorization
        )

    def add_jobs_available_listener(self, listener: JobsAvailableListener) -> None:
        self.cluster.jobs_listeners.append(listener)

    def open_job_stream(
        self,
        job_type: str,
        worker: str,
        timeout: int,
        fetch_variables: list[str],
        sink: JobSink,
        tenant_ids: Sequence[str] = (TENANT,),
        caller: dict[str, Any] | None = None,
    ) -> SimJobStream:
        return SimJobStream(self.cluster, job_type, worker, timeout, fetch_variables, sink, tenant_ids, caller)

    def topology(self) -> Topology:
        brokers = [
            BrokerInfo(
                b.node_id,
                "sim",
                b.node_id,
                "sim",
                [PartitionInfo(pid, p.role, p.healthy) for pid, p in sorted(b.partitions.items())],
            )
            for b in self.cluster.brokers.values()
        ]
        return Topology(brokers, len(self.cluster.brokers), self.cluster.partitions_count, self.cluster.replication)


class SimJobStream:
    """A gateway's job stream (StreamActivatedJobs) as the remote broker client keeps it, over the simulated network.

    Each broker's command API registers the stream on every partition replica it runs (``Partition.job_streams`` and
    ``job_stream_sinks``, as ``stream_jobs`` does): the leader's engine pushes activated jobs to it after commit. A
    push crosses the network to the gateway's ``sink``; what the sink cannot take the gateway gives back (JOB YIELD).
    A broker whose link to the gateway is cut refuses the push (the partition yields the jobs) and its side of the
    stream ends; a push lost on the wire is never seen (its jobs time out). The gateway registers again every half
    second where its stream is missing (a broker restarted, a cut healed), as the remote client's pump reconnects.
    """

    REGISTER_EVERY_S = 0.5

    def __init__(
        self,
        cluster: SimCluster,
        job_type: str,
        worker: str,
        timeout: int,
        fetch_variables: list[str],
        sink: JobSink,
        tenant_ids: Sequence[str] = (TENANT,),
        caller: dict[str, Any] | None = None,
    ) -> None:
        self.cluster = cluster
        self.job_type = job_type
        self.worker = worker
        self.timeout = timeout
        self.fetch_variables = list(fetch_variables)
        self.sink = sink
        self.tenant_ids = tuple(tenant_ids)
        self.caller = caller
        self.open = True
        self.pushed = 0
        self._registered: dict[tuple[int, int], tuple[Partition, int]] = {}  # (broker, partition) → stream there
        cluster.job_streams.append(self)
        self._register()
        self._pump = cluster.loop.create_task(self._keep_registered())

    async def _keep_registered(self) -> None:
        while self.open:
            await asyncio.sleep(self.REGISTER_EVERY_S)
            self._register()

    def _register(self) -> None:
        network = self.cluster.network
        for node, broker in sorted(self.cluster.brokers.items()):
            if not (network.reachable(GATEWAY, node) and network.reachable(node, GATEWAY)):
                continue
            for pid, partition in sorted(broker.partitions.items()):
                held = self._registered.get((node, pid))
                if held is not None and held[0] is partition:
                    continue
                stream = partition.job_streams.add(
                    self.job_type, self.worker, self.timeout, self.fetch_variables, self.tenant_ids, self.caller
                )
                partition.job_stream_sinks[stream.stream_id] = functools.partial(self._push, node)
                self._registered[(node, pid)] = (partition, stream.stream_id)

    def _unregister(self, node: int | None = None) -> None:
        """The broker's side of the stream ends (``node``; None: every broker's)."""
        for (n, pid), (partition, stream_id) in sorted(self._registered.items()):
            if node is None or n == node:
                partition.job_streams.remove(stream_id)
                partition.job_stream_sinks.pop(stream_id, None)
                del self._registered[(n, pid)]

    def _push(self, node: int, record: Record) -> bool:
        """The broker's sink: False makes the partition give the jobs back (YIELD)."""
        network = self.cluster.network
        if not self.open:
            return False
        if not network.reachable(node, GATEWAY):
            self._unregister(node)
            return False
        if network.dropped():  # the connection broke with the push on the wire
            self._unregister(node)
            return True
        self.cluster.loop.call_later(network.delay(), self._arrive, record)
        return True

    def _arrive(self, record: Record) -> None:
        self.pushed += 1
        if not self.open or not self.sink(record):
            self.cluster.gateway.give_back(list(zip(record.value["jobKeys"], record.value["jobs"], strict=True)))

    def close(self) -> None:
        """The worker went: the stream is removed everywhere (pushes still on the wire are given back)."""
        if not self.open:
            return
        self.open = False
        self._unregister()
        self._pump.cancel()
        self.cluster.job_streams.remove(self)


RAFT_TICK_S = 0.01
_EPSILON_S = 1e-6


def _raft_address(node_id: int, partition_id: int) -> str:
    return f"b{node_id}-p{partition_id}:{26501 + partition_id}"


def _raft_config(address: str, partners: list[str]) -> RaftConfig:
    return RaftConfig(
        self_address=address,
        partner_addresses=tuple(partners),
        password="simulated",
        data_dir=Path("/simulated") / address.replace(":", "_"),
        # Weir does not yet bring back a replica the leader compacted its Raft log past: keep every entry
        compaction_min_entries=1 << 40,
        compaction_min_seconds=1e12,
        max_in_flight=64,
    ).validate()


class _WakingLog(SimulatedReplicatedLog):
    """Wakes its group's driver on every proposal, as Weir's member wakes its tick thread (send_on_propose)."""

    def __init__(self, config: RaftConfig, env: NodeEnv, wake: Callable[[], None], **callbacks: Any) -> None:
        self._wake = wake
        super().__init__(config, env, **callbacks)

    def replicate(self, payload: bytes, timeout: float | None = None) -> Future[int]:
        future = super().replicate(payload, timeout)
        self._wake()
        return future


def _simulated_log(
    env: NodeEnv, wake: Callable[[], None], config: RaftConfig, **callbacks: Any
) -> SimulatedReplicatedLog:
    return _WakingLog(config, env, wake, **callbacks)
