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
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker.log import LogBlock, LogStorage, MemoryLog
from broker.protocol.enums import ValueType
from broker.protocol.record import Record
from broker.stream.backpressure import BackpressureConfig
from broker.stream.partition import Partition, PartitionConfig, PartitionUnavailableError
from gateway.broker_client import BrokerInfo, JobsAvailableListener, JobSink, PartitionInfo, Topology
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
    """A broker: its disk, and its partition replicas while it runs."""

    def __init__(self, node_id: int, disk: SimDisk, partition_ids: list[int]) -> None:
        self.node_id = node_id
        self.disk = disk
        self.partition_ids = partition_ids
        self.partitions: dict[int, Partition] = {}
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
        sink: str,
    ) -> None:
        self.loop = loop
        self.rng = rng
        self.root = root
        self.partitions_count = partitions
        self.sink = sink
        self.network = SimNetwork(random.Random(rng.getrandbits(64)))
        self.brokers = {
            n: SimBroker(
                n, SimDisk(root / f"broker-{n}"), [p for p in range(1, partitions + 1) if (p - 1) % brokers == n - 1]
            )
            for n in range(1, brokers + 1)
        }
        self.jobs_listeners: list[JobsAvailableListener] = []
        # Round sizes vary by run: small rounds leave follow-ups queued across rounds (and so across crashes).
        self.max_commands_per_round = rng.choice([2, 8, 64, 500])
        self.gateway = GatewayCommands(SimBrokerClient(self), long_poll_ms=0, request_timeout_ms=15_000)

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
                partition.jobs_available_listeners.append(lambda types, p=pid, f=listener: f(p, types))
            partition.start()
            broker.partitions[pid] = partition

    async def crash_broker(self, node_id: int) -> None:
        """kill -9 and a power cut: replicas stop mid-round, unflushed log blocks are lost."""
        broker = self.brokers[node_id]
        broker.disk.crash()  # at once: nothing the replicas do while they are torn down reaches the disk
        partitions, broker.partitions = broker.partitions, {}
        for partition in partitions.values():
            await partition.abandon()

    async def stop(self) -> None:
        """Stop every replica cleanly (no snapshot: the state on disk stays what processing and replay made)."""
        for broker in self.brokers.values():
            partitions, broker.partitions = broker.partitions, {}
            for partition in partitions.values():
                await partition.close(snapshot=False)

    # -- routing ---------------------------------------------------------------------------------------------

    def broker_of(self, partition_id: int) -> SimBroker:
        return self.brokers[(partition_id - 1) % len(self.brokers) + 1]

    def leader(self, partition_id: int) -> Partition | None:
        partition = self.broker_of(partition_id).partitions.get(partition_id)
        return partition if partition is not None and partition.processing else None

    def replicas(self, partition_id: int) -> list[Partition]:
        partition = self.broker_of(partition_id).partitions.get(partition_id)
        return [partition] if partition is not None else []

    def committed(self, partition_id: int) -> list[list[LogBlock]]:
        """Every replica's committed blocks of the partition, compacted ones included (see SimDisk.archive)."""
        blocks = self.broker_of(partition_id).disk.archive.get(partition_id)
        return [blocks] if blocks is not None else []

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
    ) -> Record:
        """A command from ``source`` to the partition's leader through the network; its response comes back."""
        target = self.broker_of(partition_id).node_id
        if not self.network.reachable(source, target):
            raise PartitionUnavailableError(f"node {target} is unreachable from node {source}")
        await asyncio.sleep(self.network.delay())
        if self.network.dropped():
            await asyncio.sleep(3600)  # lost on the way: the sender's timeout decides
        partition = self.leader(partition_id)
        if partition is None:
            raise PartitionUnavailableError(f"no leader for partition {partition_id}")
        future = partition.execute(value_type, intent, value, key, internal=internal)
        if self.network.duplicated():
            # the same command delivered twice (a retry the network made): the second is processed on its own
            with contextlib.suppress(Exception):  # refused at the door (backpressure): as if the copy was lost
                partition.execute(value_type, intent, dict(value), key, internal=internal).add_done_callback(_ignore)
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
    """The gateway's view of the cluster (``gateway.broker_client.BrokerClient``), through the simulated network."""

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
    ) -> Record:
        return await self.cluster.send(GATEWAY, partition_id, value_type, intent, value, key, internal=internal)

    def add_jobs_available_listener(self, listener: JobsAvailableListener) -> None:
        self.cluster.jobs_listeners.append(listener)

    def open_job_stream(
        self, job_type: str, worker: str, timeout: int, fetch_variables: list[str], sink: JobSink
    ) -> None:
        raise NotImplementedError("the simulated workers activate jobs; job streams are not simulated")

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
        return Topology(brokers, len(self.cluster.brokers), self.cluster.partitions_count, 1)
