"""The broker's command API: how a gateway in another process reaches this broker's partitions.

An internal gRPC service, ``weir.broker.CommandApi``, whose messages are msgpack documents (records travel in the same
compact list form as in log blocks). It is not a public API: only gateways talk to it.

- ``Commands`` (bidirectional stream): the gateway's path for commands. Each message is a run of msgpack documents,
  one per command (with a request id); each reply message a run of answers by id. A gateway keeps one stream per
  broker and packs every command of an event-loop turn into one message, and this side answers every command
  decided in a turn in one message, so the cost of a gRPC message is shared by many commands.
- ``Execute`` (unary): one command for one partition → the response record, or an error kind
  (``unavailable`` / ``backpressure`` / ``not_leader``) the gateway maps to a gRPC status.
- ``Subscribe`` (server stream): "jobs of these types are available" notices, for long-polling gateways.
- ``StreamJobs`` (server stream): a job push stream; activated jobs arrive as JOB_BATCH records.
- ``Topology`` (unary): the partitions here, their roles and health.
- ``Identity`` (unary): what the first partition's identity state says about a caller (tenants, grants, user, groups,
  roles, and on request the password hash), read between rounds from any replica of it (:func:`identity_answer`).

Whoever reaches it can run any command, skip admission control (``internal``) and take jobs from any stream, so
off loopback it must be closed: ``commandApi.secret`` (a shared secret every caller sends in metadata, compared in
constant time) and/or ``commandApi.tls`` (TLS, with ``requireClientCertificate`` for mTLS). See
:class:`CommandApiSecurity`; gateways and brokers (which call each other between partitions) read the same settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import msgpack

from broker.engine.caller_info import caller_of, describe
from broker.grpc_guard import MetadataCheckInterceptor, SecurityConfigError, Unauthenticated
from broker.http_guard import is_loopback
from broker.protocol.codec import record_to_list
from broker.protocol.documents import InvalidDocumentError
from broker.protocol.enums import JobIntent, ValueType
from broker.protocol.limits import duration_problem
from broker.protocol.record import Record
from broker.protocol.values import TENANT
from broker.stream.partition import BackpressureError, NotLeaderError, Partition, PartitionUnavailableError

log = logging.getLogger("weir.command_api")

SERVICE = "weir.broker.CommandApi"
# The metadata entry that carries the shared secret.
SECRET_HEADER = "weir-command-secret"
#: Pushed jobs a StreamJobs caller may have waiting; more are refused and made activatable again (JOB YIELD), for
#: polling workers. Far above what a reading caller has waiting; WEIR_MAX_PENDING_PUSHES sets it.
MAX_PENDING_PUSHES = int(os.environ.get("WEIR_MAX_PENDING_PUSHES", "1024"))


@dataclass(frozen=True, slots=True)
class CommandApiSecurity:
    """Transport security of the command API, for both ends: brokers serve with it, gateways and brokers call with it.

    - ``secret``: sent by callers in ``weir-command-secret`` metadata; brokers refuse calls without it
      (UNAUTHENTICATED). Empty: no check.
    - TLS (``tls``): brokers serve ``certificate_chain_path``/``private_key_path``; callers trust ``ca_path`` and
      present the same certificate and key, which brokers require when ``require_client_certificate`` (mTLS).
    - ``server_name``: the name callers check in brokers' certificates when it differs from the address dialled.
    """

    secret: str = ""
    tls: bool = False
    certificate_chain_path: str = ""
    private_key_path: str = ""
    ca_path: str = ""
    require_client_certificate: bool = False
    server_name: str = ""

    @classmethod
    def from_config(cls, section: dict[str, Any]) -> CommandApiSecurity:
        """From the ``commandApi`` section of the configuration (broker/config.py)."""
        tls = section["tls"]
        return cls(
            secret=section["secret"],
            tls=bool(tls["enabled"]),
            certificate_chain_path=tls["certificateChainPath"],
            private_key_path=tls["privateKeyPath"],
            ca_path=tls["caPath"],
            require_client_certificate=bool(tls["requireClientCertificate"]),
            server_name=tls["serverName"],
        )

    @property
    def closed(self) -> bool:
        """Whether an arbitrary caller is kept out (a secret or client certificates are required)."""
        return bool(self.secret) or (self.tls and self.require_client_certificate)

    def _pem(self, path: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except OSError as e:
            raise SecurityConfigError(f"commandApi.tls: cannot read {path}: {e.strerror}") from None

    def server_credentials(self) -> grpc.ServerCredentials | None:
        if not self.tls:
            return None
        return grpc.ssl_server_credentials(
            [(self._pem(self.private_key_path), self._pem(self.certificate_chain_path))],
            root_certificates=self._pem(self.ca_path) if self.require_client_certificate else None,
            require_client_auth=self.require_client_certificate,
        )

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        if not self.tls:
            return None
        return grpc.ssl_channel_credentials(
            root_certificates=self._pem(self.ca_path),
            private_key=self._pem(self.private_key_path) if self.private_key_path else None,
            certificate_chain=self._pem(self.certificate_chain_path) if self.certificate_chain_path else None,
        )

    def channel_options(self) -> list[tuple[str, Any]]:
        return [("grpc.ssl_target_name_override", self.server_name)] if self.tls and self.server_name else []

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((SECRET_HEADER, self.secret),) if self.secret else ()

    def check(self, given: str | None) -> None:
        """Raises Unauthenticated unless ``given`` is the secret (compared in constant time)."""
        if not given:
            raise Unauthenticated(
                "this broker's command API requires the shared secret: set commandApi.secret "
                "(WEIR_COMMAND_API_SECRET) of the gateway or broker calling it to the brokers' value"
            )
        if not hmac.compare_digest(given.encode(), self.secret.encode()):
            raise Unauthenticated("the command API secret does not match this broker's (commandApi.secret)")

    def interceptors(self) -> list[grpc.aio.ServerInterceptor]:
        if not self.secret:
            return []
        return [MetadataCheckInterceptor(SECRET_HEADER, self.check)]


def pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False, unicode_errors="surrogatepass")


IDENTITY_PARTITION = 1
"""The partition identity commands go to first: every partition has the identity, and its replicas have it first."""


def identity_answer(partitions: dict[int, Partition], request: Any) -> dict[str, Any]:
    """The ``Identity`` lookup: ``{"caller": {"username", "clientId", "claims"}, "password": bool}`` →
    ``{"ok": <broker.engine.caller_info.describe>}``, or ``{"err": "unavailable" | "invalid", "msg"}``.

    Read from this broker's replica of the first partition, leader or follower, on the committed state: processing
    is never waited for or held up."""
    if not isinstance(request, dict) or not isinstance(request.get("caller"), dict):
        return {"err": "invalid", "msg": "malformed identity lookup: expected {'caller': {...}, 'password': bool}"}
    partition = partitions.get(IDENTITY_PARTITION)
    if partition is None:
        return {"err": "unavailable", "msg": f"partition {IDENTITY_PARTITION} is not hosted by this broker"}
    caller = caller_of(request["caller"])
    enabled, with_password = partition.config.authorizations, bool(request.get("password"))
    try:
        found = partition.read(
            lambda state: describe(state.identity, caller, authorizations_enabled=enabled, with_password=with_password)
        )
    except PartitionUnavailableError as e:
        return {"err": "unavailable", "msg": str(e)}
    return {"ok": found}


class CommandApi:
    """Serves the partitions of one broker to remote gateways."""

    def __init__(self, partitions: dict[int, Partition], topology: Callable[[], dict]) -> None:
        self._partitions = partitions
        self._topology = topology
        self._subscribers: list[asyncio.Queue[tuple[int, list[str]]]] = []
        for pid, partition in partitions.items():
            partition.jobs_available_listeners.append(functools.partial(self._notify, pid))

    def _notify(self, pid: int, types: set[str]) -> None:
        for q in self._subscribers:
            if q.qsize() < 10_000:
                q.put_nowait((pid, sorted(types)))

    def _submit(self, msg: Any) -> asyncio.Future[Record] | dict[str, Any]:
        """Hand one command to its partition: the future of its response, or the answer when it was refused."""
        try:
            pid, value_type, intent = int(msg["p"]), ValueType(msg["vt"]), int(msg["i"])
            key, value = int(msg.get("k", -1)), msg.get("v") or {}
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            return {"err": "invalid", "msg": f"malformed command: {e!r}"}
        partition = self._partitions.get(pid)
        if partition is None:
            return {"err": "unavailable", "msg": f"partition {pid} is not hosted by this broker"}
        try:
            caller = msg.get("a")
            authorization = caller if isinstance(caller, dict) else None
            return partition.execute(
                value_type, intent, value, key, internal=bool(msg.get("internal")), authorization=authorization
            )
        except InvalidDocumentError as e:
            return {"err": "invalid", "msg": str(e)}
        except BackpressureError as e:
            return {"err": "backpressure", "msg": str(e)}
        except NotLeaderError as e:
            return {"err": "not_leader", "msg": str(e)}
        except PartitionUnavailableError as e:
            return {"err": "unavailable", "msg": str(e)}

    @staticmethod
    def _answer(future: asyncio.Future[Record]) -> dict[str, Any]:
        if future.cancelled():
            return {"err": "unavailable", "msg": "the command was cancelled"}
        error = future.exception()
        if error is None:
            return {"ok": record_to_list(future.result())}
        if isinstance(error, BackpressureError):
            return {"err": "backpressure", "msg": str(error)}
        if isinstance(error, NotLeaderError):
            return {"err": "not_leader", "msg": str(error)}
        return {"err": "unavailable", "msg": str(error)}

    async def execute(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            msg = unpack(request)
        except (ValueError, msgpack.UnpackException) as e:
            return pack({"err": "invalid", "msg": f"malformed command: {e}"})
        submitted = self._submit(msg)
        if isinstance(submitted, dict):
            return pack(submitted)
        await asyncio.wait([submitted])
        return pack(self._answer(submitted))

    async def commands(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        """Many commands per message in, many answers per message out (see the module docstring)."""
        loop = asyncio.get_running_loop()
        replies: asyncio.Queue[bytes | None] = asyncio.Queue()
        batch: list[bytes] = []
        outstanding = 0  # commands handed to partitions and not answered yet
        reading = True

        def flush() -> None:
            if batch:
                replies.put_nowait(b"".join(batch))
                batch.clear()
            if not reading and outstanding == 0:
                replies.put_nowait(None)  # the gateway closed its side and every command is answered

        def reply(request_id: Any, answer: dict[str, Any]) -> None:
            answer["id"] = request_id
            if not batch:
                loop.call_soon(flush)
            batch.append(pack(answer))

        def answered(request_id: Any, future: asyncio.Future[Record]) -> None:
            nonlocal outstanding
            outstanding -= 1
            reply(request_id, self._answer(future))

        async def read() -> None:
            nonlocal outstanding, reading
            try:
                async for message in requests:
                    # Strings that are not valid UTF-8 still decode (as lone surrogates), so the command is refused
                    # by its partition with a reason naming the field, instead of ending the whole stream.
                    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, unicode_errors="surrogatepass")
                    unpacker.feed(message)
                    for msg in unpacker:
                        request_id = msg.get("id") if isinstance(msg, dict) else None
                        submitted = self._submit(msg)
                        if isinstance(submitted, dict):
                            reply(request_id, submitted)
                        else:
                            outstanding += 1
                            submitted.add_done_callback(functools.partial(answered, request_id))
            except (ValueError, msgpack.UnpackException) as e:
                log.warning("closing a command stream that sent a malformed message: %s", e)
            except Exception as e:  # the gateway went away mid-message: its answers have nowhere to go
                log.debug("command stream closed by the gateway: %r", e)
            finally:
                reading = False
                loop.call_soon(flush)

        reader = asyncio.create_task(read())
        try:
            while (message := await replies.get()) is not None:
                yield message
        finally:
            reader.cancel()

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

    async def stream_jobs(self, request: bytes, context: grpc.aio.ServicerContext) -> None:
        """A job push stream, written with ``context.write`` so that its ``finally`` runs as soon as the caller
        goes, even while a write waits on flow control (an abandoned generator's would wait for collection)."""
        try:
            msg = unpack(request)
            job_type, worker, timeout = str(msg["type"]), str(msg["worker"]), int(msg["timeout"])
            fetch = [str(name) for name in msg.get("fetch") or []]
            tenants = [str(tenant) for tenant in msg.get("tenantIds") or [TENANT]]
            caller = msg.get("caller")
            if caller is not None and not isinstance(caller, dict):
                raise TypeError("caller: expected a map")
        except Exception as e:  # not msgpack, not a map, a field missing or of the wrong type
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed job stream request: {e!r}")
            return
        problem = duration_problem("timeout", timeout, minimum=1)
        if problem:  # jobs pushed with it could never be sent (their deadline would leave int64)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        queue: asyncio.Queue[Record] = asyncio.Queue()
        is_open = True
        writing: Record | None = None

        def sink(record: Record) -> bool:
            # a caller that stops reading holds at most MAX_PENDING_PUSHES; later pushes are yielded back at once
            if not is_open or queue.qsize() >= MAX_PENDING_PUSHES:
                return False
            queue.put_nowait(record)
            return True

        registrations = []
        for partition in self._partitions.values():
            stream = partition.job_streams.add(job_type, worker, timeout, fetch, tenants, caller)
            partition.job_stream_sinks[stream.stream_id] = sink
            registrations.append((partition, stream.stream_id))
        try:
            await context.write(pack({"hello": True}))
            while True:
                writing = await queue.get()
                await context.write(pack({"ok": record_to_list(writing)}))
                writing = None
        except Exception as e:  # the stream broke: the caller went while a write waited
            log.debug("job stream of %r closed while sending: %r", job_type, e)
        finally:
            is_open = False
            for partition, stream_id in registrations:
                partition.job_streams.remove(stream_id)
                partition.job_stream_sinks.pop(stream_id, None)
            left = [] if writing is None else [writing]  # a write that failed: the caller never got it
            while not queue.empty():
                left.append(queue.get_nowait())
            for record in left:
                owner = self._partitions.get(record.partition_id)
                if owner is None:
                    continue
                for key, job in zip(record.value["jobKeys"], record.value["jobs"], strict=True):
                    with contextlib.suppress(Exception):
                        owner.write_internal(ValueType.JOB, JobIntent.YIELD, job, key)

    async def topology(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return pack(self._topology())

    async def identity(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            msg = unpack(request)
        except (ValueError, msgpack.UnpackException) as e:
            return pack({"err": "invalid", "msg": f"malformed identity lookup: {e}"})
        return pack(identity_answer(self._partitions, msg))

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Commands": grpc.stream_stream_rpc_method_handler(self.commands),
                "Execute": grpc.unary_unary_rpc_method_handler(self.execute),
                "Subscribe": grpc.unary_stream_rpc_method_handler(self.subscribe),
                "StreamJobs": grpc.unary_stream_rpc_method_handler(self.stream_jobs),
                "Topology": grpc.unary_unary_rpc_method_handler(self.topology),
                "Identity": grpc.unary_unary_rpc_method_handler(self.identity),
            },
        )


async def start_command_api(
    api: CommandApi, host: str, port: int, max_message_size: int, security: CommandApiSecurity | None = None
) -> tuple[grpc.aio.Server, int]:
    security = security or CommandApiSecurity()
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", max_message_size + 65536),
            ("grpc.max_send_message_length", max_message_size + 65536),
            ("grpc.so_reuseport", 0),
        ],
        interceptors=security.interceptors(),
    )
    server.add_generic_rpc_handlers((api.handler(),))
    credentials = security.server_credentials()
    try:  # grpc raises RuntimeError("Failed to bind …") where older versions returned 0
        if credentials is None:
            bound = server.add_insecure_port(f"{host}:{port}")
        else:
            bound = server.add_secure_port(f"{host}:{port}", credentials)
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise OSError(f"could not bind the command API to {host}:{port} (is the port in use?)")
    await server.start()
    if not is_loopback(host) and not security.closed:
        log.warning(
            "the command API on %s:%d lets any caller run commands; set commandApi.secret (with commandApi.tls) or "
            "commandApi.tls.requireClientCertificate",
            host,
            bound,
        )
    elif security.secret and not security.tls and not is_loopback(host):
        log.warning("the command API secret travels in clear text on %s:%d; turn on commandApi.tls", host, bound)
    return server, bound
