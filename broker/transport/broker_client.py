"""How callers reach partitions: the seam between the stateless gateway and the brokers (brokers use it between
partitions too).

``LocalBrokerClient`` serves the broker the gateway is embedded in (``weir start``). A remote client for a gateway
in its own process implements the same methods over the broker's command API.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker.protocol.enums import ValueType
from broker.protocol.record import Record
from broker.protocol.values import TENANT
from broker.stream.partition import Partition, PartitionUnavailableError

JobsAvailableListener = Callable[[int, set[str]], None]
JobSink = Callable[[Record], bool]


@dataclass(slots=True)
class PartitionInfo:
    partition_id: int
    role: str  # LEADER | FOLLOWER | INACTIVE
    healthy: bool


@dataclass(slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    version: str
    partitions: list[PartitionInfo] = field(default_factory=list)


@dataclass(slots=True)
class Topology:
    brokers: list[BrokerInfo]
    cluster_size: int
    partitions_count: int
    replication_factor: int


class JobStreamHandle(Protocol):
    def close(self) -> None: ...


class BrokerClient(Protocol):
    @property
    def partition_ids(self) -> list[int]: ...

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
    ) -> Record: ...

    def add_jobs_available_listener(self, listener: JobsAvailableListener) -> None: ...

    def open_job_stream(
        self,
        job_type: str,
        worker: str,
        timeout: int,
        fetch_variables: list[str],
        sink: JobSink,
        tenant_ids: Sequence[str] = (TENANT,),
        caller: dict[str, Any] | None = None,
    ) -> JobStreamHandle: ...

    def topology(self) -> Topology: ...


class _LocalStream:
    def __init__(self, registrations: list[tuple[Partition, int]]) -> None:
        self._registrations = registrations

    def close(self) -> None:
        for partition, stream_id in self._registrations:
            partition.job_streams.remove(stream_id)
            partition.job_stream_sinks.pop(stream_id, None)
        self._registrations = []


class LocalBrokerClient:
    """Calls the partitions of the broker in this process directly."""

    def __init__(self, partitions: dict[int, Partition], *, node_id: int, host: str, port: int, version: str) -> None:
        self._partitions = partitions
        self._node_id = node_id
        self._host = host
        self._port = port
        self._version = version

    @property
    def partition_ids(self) -> list[int]:
        return sorted(self._partitions)

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
        partition = self._partitions.get(partition_id)
        if partition is None:
            raise PartitionUnavailableError(f"partition {partition_id} does not exist")
        command = partition.execute(value_type, intent, value, key, internal=internal, authorization=authorization)
        return await asyncio.shield(command)

    def add_jobs_available_listener(self, listener: JobsAvailableListener) -> None:
        for pid, partition in self._partitions.items():
            partition.jobs_available_listeners.append(functools.partial(listener, pid))

    def open_job_stream(
        self,
        job_type: str,
        worker: str,
        timeout: int,
        fetch_variables: list[str],
        sink: JobSink,
        tenant_ids: Sequence[str] = (TENANT,),
        caller: dict[str, Any] | None = None,
    ) -> JobStreamHandle:
        registrations = []
        for partition in self._partitions.values():
            stream = partition.job_streams.add(job_type, worker, timeout, fetch_variables, tenant_ids, caller)
            partition.job_stream_sinks[stream.stream_id] = sink
            registrations.append((partition, stream.stream_id))
        return _LocalStream(registrations)

    async def identity(self, caller: dict[str, Any], *, password: bool = False) -> dict[str, Any]:
        """What the first partition's identity says about ``caller`` (see ``broker.command_api.identity_answer``);
        raises PartitionUnavailableError when it cannot be read here."""
        from broker.command_api import identity_answer

        answer = identity_answer(self._partitions, {"caller": caller, "password": password})
        if "ok" not in answer:
            raise PartitionUnavailableError(answer.get("msg", "the identity cannot be read"))
        return answer["ok"]  # type: ignore[no-any-return]

    def topology(self) -> Topology:
        infos = [
            PartitionInfo(pid, p.role if p.healthy else "INACTIVE", p.healthy)
            for pid, p in sorted(self._partitions.items())
        ]
        broker = BrokerInfo(self._node_id, self._host, self._port, self._version, infos)
        return Topology([broker], 1, len(self._partitions), 1)
