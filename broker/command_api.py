"""The broker's command API: how a gateway in another process reaches this broker's partitions.

An internal gRPC service, ``weir.broker.CommandApi``, whose messages are msgpack documents (records travel in the same
compact list form as in log blocks). It is not a public API: only gateways talk to it.

- ``Execute`` (unary): one command for one partition → the response record, or an error kind
  (``unavailable`` / ``backpressure``) the gateway maps to a gRPC status.
- ``Subscribe`` (server stream): "jobs of these types are available" notices, for long-polling gateways.
- ``StreamJobs`` (server stream): a job push stream; activated jobs arrive as JOB_BATCH records.
- ``Topology`` (unary): the partitions here, their roles and health.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import msgpack

from broker.protocol.codec import record_to_list
from broker.protocol.enums import JobIntent, ValueType
from broker.protocol.record import Record
from broker.stream.partition import BackpressureError, NotLeaderError, Partition, PartitionUnavailableError

log = logging.getLogger("weir.command_api")

SERVICE = "weir.broker.CommandApi"


def pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


class CommandApi:
    """Serves the partitions of one broker to remote gateways."""

    def __init__(self, partitions: dict[int, Partition], topology: Callable[[], dict]) -> None:
        self._partitions = partitions
        self._topology = topology
        self._subscribers: list[asyncio.Queue[tuple[int, list[str]]]] = []
        for pid, partition in partitions.items():
            partition.jobs_available_listeners.append(lambda types, pid=pid: self._notify(pid, types))

    def _notify(self, pid: int, types: set[str]) -> None:
        for q in self._subscribers:
            if q.qsize() < 10_000:
                q.put_nowait((pid, sorted(types)))

    async def execute(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            msg = unpack(request)
            pid, value_type, intent = int(msg["p"]), ValueType(msg["vt"]), int(msg["i"])
            key, value = int(msg.get("k", -1)), msg.get("v") or {}
        except (ValueError, KeyError, TypeError, msgpack.UnpackException) as e:
            return pack({"err": "invalid", "msg": f"malformed command: {e}"})
        partition = self._partitions.get(pid)
        if partition is None:
            return pack({"err": "unavailable", "msg": f"partition {pid} is not hosted by this broker"})
        try:
            record = await partition.execute(value_type, intent, value, key, internal=bool(msg.get("internal")))
        except BackpressureError as e:
            return pack({"err": "backpressure", "msg": str(e)})
        except NotLeaderError as e:
            return pack({"err": "not_leader", "msg": str(e)})
        except PartitionUnavailableError as e:
            return pack({"err": "unavailable", "msg": str(e)})
        return pack({"ok": record_to_list(record)})

    async def subscribe(self, request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        q: asyncio.Queue[tuple[int, list[str]]] = asyncio.Queue()
        self._subscribers.append(q)
        try:
            yield pack({"hello": True})
            while True:
                pid, types = await q.get()
                yield pack({"p": pid, "types": types})
        finally:
            self._subscribers.remove(q)

    async def stream_jobs(self, request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        msg = unpack(request)
        queue: asyncio.Queue[Record] = asyncio.Queue()
        is_open = True

        def sink(record: Record) -> bool:
            if not is_open:
                return False
            queue.put_nowait(record)
            return True

        registrations = []
        for partition in self._partitions.values():
            stream = partition.job_streams.add(msg["type"], msg["worker"], int(msg["timeout"]), msg.get("fetch") or [])
            partition.job_stream_sinks[stream.stream_id] = sink
            registrations.append((partition, stream.stream_id))
        try:
            yield pack({"hello": True})
            while True:
                record = await queue.get()
                yield pack({"ok": record_to_list(record)})
        finally:
            is_open = False
            for partition, stream_id in registrations:
                partition.job_streams.remove(stream_id)
                partition.job_stream_sinks.pop(stream_id, None)
            while not queue.empty():
                record = queue.get_nowait()
                partition = self._partitions.get(record.partition_id)
                if partition is None:
                    continue
                for key, job in zip(record.value["jobKeys"], record.value["jobs"], strict=True):
                    with contextlib.suppress(Exception):
                        partition.write_internal(ValueType.JOB, JobIntent.YIELD, job, key)

    async def topology(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return pack(self._topology())

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Execute": grpc.unary_unary_rpc_method_handler(self.execute),
                "Subscribe": grpc.unary_stream_rpc_method_handler(self.subscribe),
                "StreamJobs": grpc.unary_stream_rpc_method_handler(self.stream_jobs),
                "Topology": grpc.unary_unary_rpc_method_handler(self.topology),
            },
        )


async def start_command_api(
    api: CommandApi, host: str, port: int, max_message_size: int
) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", max_message_size + 65536),
            ("grpc.max_send_message_length", max_message_size + 65536),
            ("grpc.so_reuseport", 0),
        ]
    )
    server.add_generic_rpc_handlers((api.handler(),))
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"could not bind the command API to {host}:{port} (is the port in use?)")
    await server.start()
    return server, bound
