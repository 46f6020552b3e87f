"""Reaching brokers through their command API (``weir.broker.CommandApi``): a gateway in its own process, and the
brokers of a cluster for commands between partitions.

It learns from each contact point which partitions the broker leads, keeps that fresh, and routes every command to
the partition's leader. A command whose broker cannot be reached fails with UNAVAILABLE; the gateway never resends a
command that may have been delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import grpc
import msgpack

from broker.command_api import IDENTITY_PARTITION, CommandApiSecurity
from broker.protocol.codec import record_from_list
from broker.protocol.documents import InvalidDocumentError
from broker.protocol.enums import JobIntent, ValueType
from broker.protocol.keys import partition_of
from broker.protocol.record import Record
from broker.protocol.values import TENANT
from broker.stream.partition import BackpressureError, PartitionUnavailableError
from broker.transport.broker_client import (
    BrokerInfo,
    JobsAvailableListener,
    JobSink,
    PartitionInfo,
    Topology,
)

log = logging.getLogger("weir.transport.remote")

_SERVICE = "/weir.broker.CommandApi/"
# How long a command waits for a partition leader to be known (elections take well under a second).
NOT_LEADER_RETRY_S = 3.0
# A broker that does not describe its partitions within this time is left out of the routing until it does.
TOPOLOGY_TIMEOUT_S = 1.0
REFRESH_INTERVAL_S = 0.5
# An identity lookup waits this long for one broker before asking the next replica.
IDENTITY_TIMEOUT_S = 2.0
_IDENTITY: Callable[[bytes], bytes] = lambda b: b  # noqa: E731


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


class _CommandStream:
    """One multiplexed ``Commands`` stream to a broker: many commands per message, answers matched by request id.

    Commands sent in one event-loop turn travel in one message. If the stream breaks, every command still waiting
    fails with PartitionUnavailableError (its outcome is unknown, so it is not resent); the next command opens a new
    stream.
    """

    # A message is sent early once this many bytes of commands are waiting (far below the message size limit).
    MAX_BATCH_BYTES = 1024 * 1024

    def __init__(self, broker: _Broker) -> None:
        self._broker = broker
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._batch: list[bytes] = []
        self._batch_bytes = 0
        self._outgoing: asyncio.Queue[bytes | None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)

    def send(self, message: dict[str, Any]) -> asyncio.Future[Any]:
        """Queue ``message`` for the broker; the future resolves with its answer (a dict)."""
        loop = asyncio.get_running_loop()
        if self._outgoing is None:
            self._open()
        request_id = next(self._ids)
        future: asyncio.Future[Any] = loop.create_future()
        self._waiting[request_id] = future
        packed = _pack({**message, "id": request_id})
        if not self._batch:
            loop.call_soon(self._flush)
        self._batch.append(packed)
        self._batch_bytes += len(packed)
        if self._batch_bytes >= self.MAX_BATCH_BYTES:
            self._flush()
        return future

    def _flush(self) -> None:
        if self._batch and self._outgoing is not None:
            self._outgoing.put_nowait(b"".join(self._batch))
        self._batch.clear()
        self._batch_bytes = 0

    def _open(self) -> None:
        outgoing: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._outgoing = outgoing

        async def requests() -> AsyncIterator[bytes]:
            while (message := await outgoing.get()) is not None:
                yield message

        call = self._broker.commands(requests())
        self._reader = asyncio.create_task(self._read(call, outgoing))

    async def _read(self, call: Any, outgoing: asyncio.Queue[bytes | None]) -> None:
        reason = "the command stream ended"
        try:
            async for message in call:
                unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
                unpacker.feed(message)
                for answer in unpacker:
                    future = self._waiting.pop(answer.pop("id", None), None)
                    if future is not None and not future.done():
                        future.set_result(answer)
        except grpc.aio.AioRpcError as e:
            reason = e.details() or e.code().name
        except asyncio.CancelledError:
            reason = "the gateway is closing"
            raise
        finally:
            if self._outgoing is outgoing:
                self._outgoing = None
                self._batch.clear()
                self._batch_bytes = 0
            outgoing.put_nowait(None)
            waiting, self._waiting = self._waiting, {}
            for future in waiting.values():
                if not future.done():
                    future.set_exception(
                        PartitionUnavailableError(f"broker {self._broker.address} is unreachable: {reason}")
                    )

    async def close(self) -> None:
        if self._outgoing is not None:
            self._outgoing.put_nowait(None)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader


class _Broker:
    """One broker's channel and the callables of its command API."""

    def __init__(self, address: str, max_message_size: int, security: CommandApiSecurity) -> None:
        self.address = address
        options = [
            ("grpc.max_receive_message_length", max_message_size + 65536),
            ("grpc.max_send_message_length", max_message_size + 65536),
            *security.channel_options(),
        ]
        credentials = security.channel_credentials()
        if credentials is None:
            self.channel = grpc.aio.insecure_channel(address, options=options)
        else:
            self.channel = grpc.aio.secure_channel(address, credentials, options=options)
        # Every call carries the shared secret, when there is one.
        metadata = security.metadata()

        def bind(multicallable: Any) -> Any:
            return functools.partial(multicallable, metadata=metadata) if metadata else multicallable

        self.execute = bind(self.channel.unary_unary(_SERVICE + "Execute", _IDENTITY, _IDENTITY))
        self.topology = bind(self.channel.unary_unary(_SERVICE + "Topology", _IDENTITY, _IDENTITY))
        self.identity = bind(self.channel.unary_unary(_SERVICE + "Identity", _IDENTITY, _IDENTITY))
        self.subscribe = bind(self.channel.unary_stream(_SERVICE + "Subscribe", _IDENTITY, _IDENTITY))
        self.stream_jobs = bind(self.channel.unary_stream(_SERVICE + "StreamJobs", _IDENTITY, _IDENTITY))
        self.commands = bind(self.channel.stream_stream(_SERVICE + "Commands", _IDENTITY, _IDENTITY))
        self.command_stream = _CommandStream(self)
        self.info: dict | None = None
        self.refused = False  # the broker answered UNAUTHENTICATED (wrong or missing commandApi.secret)


class _RemoteStream:
    def __init__(self, tasks: list[asyncio.Task[None]]) -> None:
        self._tasks = tasks

    def close(self) -> None:
        for t in self._tasks:
            t.cancel()


class RemoteBrokerClient:
    """Routes gateway commands to brokers over their command API."""

    def __init__(
        self,
        contact_points: list[str],
        *,
        max_message_size: int = 4 * 1024 * 1024,
        security: CommandApiSecurity | None = None,
    ) -> None:
        security = security or CommandApiSecurity()
        self._brokers = [_Broker(a, max_message_size, security) for a in contact_points]
        self._leaders: dict[int, _Broker] = {}
        self._leader_terms: dict[int, int] = {}
        self._partition_count = 0
        self._listeners: list[JobsAvailableListener] = []
        self._giving_back: set[asyncio.Task[None]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._refreshed_at = -1.0

    async def start(self) -> None:
        await self.refresh()
        for broker in self._brokers:
            self._tasks.append(asyncio.create_task(self._subscribe(broker)))
        self._tasks.append(asyncio.create_task(self._refresh_loop()))

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for b in self._brokers:
            await b.command_stream.close()
            await b.channel.close()

    # -- topology ---------------------------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Ask every broker which partitions it leads (at most every 100 ms however many callers ask)."""
        now = asyncio.get_running_loop().time()
        if now - self._refreshed_at < 0.1:
            return
        self._refreshed_at = now
        # All brokers at once, each answer used as it comes: a broker that hangs (paused, overloaded) must not
        # delay learning the other brokers' leaderships.
        await asyncio.gather(*(self._ask(broker) for broker in self._brokers))

    async def _ask(self, broker: _Broker) -> None:
        try:
            info = _unpack(await broker.topology(b"", timeout=TOPOLOGY_TIMEOUT_S))
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.UNAUTHENTICATED and not broker.refused:
                # Not a passing fault: say once why this broker is left out, so the operator can fix the settings.
                log.error("broker %s refuses our calls: %s", broker.address, e.details())
            broker.refused = e.code() == grpc.StatusCode.UNAUTHENTICATED
            broker.info = None
            for pid, leader in list(self._leaders.items()):
                if leader is broker:
                    del self._leaders[pid]
            return
        broker.info = info
        broker.refused = False
        self._partition_count = max(self._partition_count, info.get("partitionsCount", 0))
        for p in info["partitions"]:
            if p["role"] == "LEADER" and p["healthy"]:
                # Two brokers may both claim a partition around an election: the higher Raft term is the leader.
                term = p.get("term", 0)
                if self._leader_terms.get(p["id"], -1) <= term or self._leaders.get(p["id"]) is broker:
                    self._leaders[p["id"]] = broker
                    self._leader_terms[p["id"]] = term
            elif self._leaders.get(p["id"]) is broker:
                del self._leaders[p["id"]]

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_INTERVAL_S)
            await self.refresh()

    @property
    def partition_ids(self) -> list[int]:
        return list(range(1, self._partition_count + 1))

    def knows_all_leaders(self) -> bool:
        return self._partition_count > 0 and all(p in self._leaders for p in self.partition_ids)

    def topology(self) -> Topology:
        brokers = []
        replication = 1
        for b in self._brokers:
            if b.info is None:
                continue
            host, _, port = b.address.rpartition(":")
            parts = [PartitionInfo(p["id"], p["role"], p["healthy"]) for p in b.info["partitions"]]
            brokers.append(BrokerInfo(b.info["nodeId"], host, int(port), b.info["version"], parts))
            replication = max(replication, b.info.get("replicationFactor", 1))
        return Topology(brokers, max(len(brokers), 1), self._partition_count, replication)

    # -- commands ---------------------------------------------------------------------------------------------

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
        """Send to the partition's leader; retried only when the command was certainly not taken.

        That is: no leader known yet, or the broker answered that it does not lead the partition. A command whose
        delivery is unknown (connection lost mid-call) is never resent: the client gets UNAVAILABLE.
        """
        message = {"p": partition_id, "vt": int(value_type), "i": int(intent), "k": key, "v": value}
        if internal:
            message["internal"] = True  # from another partition: never refused by admission control
        if authorization is not None:
            message["a"] = authorization  # the authenticated caller, for the engine's checks
        deadline = asyncio.get_running_loop().time() + NOT_LEADER_RETRY_S
        while True:
            broker = self._leaders.get(partition_id)
            if broker is not None:
                try:
                    reply = await broker.command_stream.send(message)
                except PartitionUnavailableError as e:
                    self._leaders.pop(partition_id, None)
                    raise PartitionUnavailableError(f"{e} (partition {partition_id})") from e
                if "ok" in reply:
                    return record_from_list(reply["ok"])
                if reply.get("err") == "backpressure":
                    raise BackpressureError(reply.get("msg", "overloaded"))
                if reply.get("err") == "invalid":
                    raise InvalidDocumentError(reply.get("msg", "invalid command"))
                if reply.get("err") != "not_leader":
                    raise PartitionUnavailableError(reply.get("msg", "partition unavailable"))
                self._leaders.pop(partition_id, None)
            if asyncio.get_running_loop().time() >= deadline:
                raise PartitionUnavailableError(f"no leader known for partition {partition_id}")
            await asyncio.sleep(0.1)
            await self.refresh()

    # -- identity lookups -------------------------------------------------------------------------------------

    async def identity(self, caller: dict[str, Any], *, password: bool = False) -> dict[str, Any]:
        """What the first partition's identity says about ``caller`` (``broker.command_api.identity_answer``), from
        its leader when known, else from any broker with a replica of it; raises PartitionUnavailableError."""
        request = _pack({"caller": caller, "password": password})
        leader = self._leaders.get(IDENTITY_PARTITION)
        replicas = [
            b
            for b in self._brokers
            if b.info is not None and any(p["id"] == IDENTITY_PARTITION for p in b.info["partitions"])
        ]
        ordered = [leader] if leader is not None else []
        ordered += [b for b in replicas if b is not leader]
        problems: list[str] = []
        for broker in ordered:
            try:
                answer = _unpack(await broker.identity(request, timeout=IDENTITY_TIMEOUT_S))
            except grpc.aio.AioRpcError as e:
                problems.append(f"{broker.address}: {e.details() or e.code().name}")
                continue
            if "ok" in answer:
                return answer["ok"]  # type: ignore[no-any-return]
            problems.append(f"{broker.address}: {answer.get('msg')}")
        raise PartitionUnavailableError(
            f"no broker could answer who the caller is ({'; '.join(problems) or 'no replica of partition 1 known'})"
        )

    # -- notifications and job streams ------------------------------------------------------------------------

    def add_jobs_available_listener(self, listener: JobsAvailableListener) -> None:
        self._listeners.append(listener)

    async def _subscribe(self, broker: _Broker) -> None:
        while True:
            try:
                async for raw in broker.subscribe(b""):
                    msg = _unpack(raw)
                    if "types" in msg:
                        for listener in self._listeners:
                            listener(msg["p"], set(msg["types"]))
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.5)

    def open_job_stream(
        self,
        job_type: str,
        worker: str,
        timeout: int,
        fetch_variables: list[str],
        sink: JobSink,
        tenant_ids: Sequence[str] = (TENANT,),
        caller: dict[str, Any] | None = None,
    ) -> _RemoteStream:
        request = _pack(
            {
                "type": job_type,
                "worker": worker,
                "timeout": timeout,
                "fetch": fetch_variables,
                "tenantIds": list(tenant_ids),
                "caller": caller,
            }
        )

        async def pump(broker: _Broker) -> None:
            while True:
                try:
                    async for raw in broker.stream_jobs(request):
                        msg = _unpack(raw)
                        if "ok" in msg:
                            record = record_from_list(msg["ok"])
                            if not sink(record):  # the stream is full or closed: never leave the jobs activated
                                self._give_back(record)
                except grpc.aio.AioRpcError:
                    pass
                await asyncio.sleep(0.5)

        return _RemoteStream([asyncio.create_task(pump(b)) for b in self._brokers])

    def _give_back(self, record: Record) -> None:
        """Make the jobs of a push the gateway could not take activatable again (JOB YIELD), in a task of its own."""

        async def give_back() -> None:
            for key, job in zip(record.value["jobKeys"], record.value["jobs"], strict=True):
                try:
                    await self.execute(partition_of(key), ValueType.JOB, JobIntent.YIELD, job, key)
                except Exception as e:  # the job times out and becomes activatable then
                    log.debug("could not give back job %d: %r", key, e)

        task = asyncio.get_running_loop().create_task(give_back())
        self._giving_back.add(task)
        task.add_done_callback(self._giving_back.discard)
