"""The gateway's gRPC server: the Zeebe gateway service plus the standard gRPC health service."""

from __future__ import annotations

import asyncio
import logging

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from broker.http_guard import is_loopback
from gateway.api import gateway_pb2_grpc as pb_grpc
from gateway.auth import Authenticator, GatewaySecurity, gateway_interceptors
from gateway.decoding import RequestDecodingInterceptor
from gateway.directory import Directory, directory_for
from gateway.service import GatewayService

log = logging.getLogger("weir.gateway")

SERVICE_NAME = "gateway_protocol.Gateway"
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
# HTTP/2 streams one client connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). Clients queue calls
# beyond it instead of failing them, so it bounds one connection's share of the gateway without errors.
DEFAULT_MAX_CONCURRENT_STREAMS = 2048
_BACKGROUND: set[asyncio.Task[None]] = set()


def server_options(
    max_message_size: int, max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS
) -> list[tuple[str, int]]:
    """HTTP/2 settings that keep long polls and job streams alive under clients' keepalive pings."""
    return [
        ("grpc.max_receive_message_length", max_message_size),
        ("grpc.max_send_message_length", max_message_size),
        ("grpc.max_concurrent_streams", max_concurrent_streams),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.http2.max_ping_strikes", 0),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        ("grpc.so_reuseport", 0),
    ]


async def start_gateway_server(
    service: GatewayService,
    host: str,
    port: int,
    *,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS,
    security: GatewaySecurity | None = None,
    directory: Directory | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Bind and start; returns the server and the port it listens on (useful when ``port`` is 0).

    With ``security`` the port speaks TLS (and requires client certificates when a client CA is set) and every call
    but health checks must carry valid credentials; basic credentials are checked against the cluster's users through
    ``directory`` (one made over the service's broker client when not given). Raises SecurityConfigError for settings
    that cannot work.
    """
    security = security or GatewaySecurity()
    credentials = security.tls.server_credentials() if security.tls.enabled else None
    if directory is None:
        directory = directory_for(service.commands.client, security.auth.identity_cache_ttl_s)
    authenticator = Authenticator(security.auth, directory)
    service.directory = directory
    await authenticator.start()
    server = grpc.aio.server(
        options=server_options(max_message_size, max_concurrent_streams),
        interceptors=[RequestDecodingInterceptor(), *gateway_interceptors(authenticator)],
    )
    pb_grpc.add_GatewayServicer_to_server(service, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    address = f"{host}:{port}"
    try:  # grpc raises RuntimeError("Failed to bind …") where older versions returned 0
        if credentials is not None:
            bound = server.add_secure_port(address, credentials)
        else:
            bound = server.add_insecure_port(address)
    except RuntimeError:
        bound = 0
    if bound == 0:
        await authenticator.close()
        raise OSError(f"could not bind the gateway to {host}:{port} (is the port in use?)")
    await server.start()
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    if not is_loopback(host) and not authenticator.enabled:
        log.warning(
            "the gateway on %s:%d accepts every call without credentials; turn on gateway.security.authentication "
            "(and TLS) unless a network policy keeps untrusted clients away",
            host,
            bound,
        )
    task = asyncio.get_running_loop().create_task(_close_when_stopped(server, authenticator))
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)
    return server, bound


async def _close_when_stopped(server: grpc.aio.Server, authenticator: Authenticator) -> None:
    """The authenticator's JWKS refresh lives as long as the server."""
    await server.wait_for_termination()
    await authenticator.close()
