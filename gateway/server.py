"""The gateway's gRPC server: the Zeebe gateway service plus the standard gRPC health service."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from gateway.api import gateway_pb2_grpc as pb_grpc
from gateway.service import GatewayService

SERVICE_NAME = "gateway_protocol.Gateway"
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024


def server_options(max_message_size: int) -> list[tuple[str, int]]:
    """HTTP/2 settings that keep long polls and job streams alive under clients' keepalive pings."""
    return [
        ("grpc.max_receive_message_length", max_message_size),
        ("grpc.max_send_message_length", max_message_size),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.http2.max_ping_strikes", 0),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        ("grpc.so_reuseport", 0),
    ]


async def start_gateway_server(
    service: GatewayService, host: str, port: int, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
) -> tuple[grpc.aio.Server, int]:
    """Bind and start; returns the server and the port it listens on (useful when ``port`` is 0)."""
    server = grpc.aio.server(options=server_options(max_message_size))
    pb_grpc.add_GatewayServicer_to_server(service, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"could not bind the gateway to {host}:{port} (is the port in use?)")
    await server.start()
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, bound
