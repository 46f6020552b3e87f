"""``weir gateway``: a stateless gateway process in front of brokers' command APIs."""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker import gc_policy
from broker.monitoring import MonitoringServer
from broker.transport.remote import RemoteBrokerClient
from gateway.directory import Directory
from gateway.rest.policy import RestPolicy
from gateway.rest.server import RestConfig, RestServer
from gateway.server import start_gateway_server
from gateway.service import VERSION, GatewayService

if TYPE_CHECKING:
    from broker.command_api import CommandApiSecurity
    from gateway.auth import GatewaySecurity

log = logging.getLogger("weir.gateway")


@dataclass(slots=True)
class GatewayConfig:
    contact_points: list[str] = field(default_factory=lambda: ["127.0.0.1:26501"])
    host: str = "127.0.0.1"
    port: int = 26500
    monitoring_port: int = 9600
    max_message_size: int = 4 * 1024 * 1024
    long_poll_ms: int = 10_000
    request_timeout_ms: int = 15_000
    max_concurrent_streams: int = 2048
    # The REST API (gateway.rest.port); 0: a free port, negative: off.
    rest_port: int = 8080
    # The history store REST searches read (gateway.history.url); None: searching answers 503.
    history_url: str | None = None
    # What the REST port accepts and bounds (gateway.rest.*, clock.controlled).
    rest_policy: RestPolicy = field(default_factory=RestPolicy)
    # TLS and authentication of the client API (gateway.auth.GatewaySecurity); None: open, as on loopback.
    security: GatewaySecurity | None = None
    # How to reach the brokers' command API; None: plaintext, no secret.
    command_api_security: CommandApiSecurity | None = None
    # Whether requests name their tenant (gateway.multiTenancy.enabled).
    multi_tenancy: bool = False


async def run_gateway(config: GatewayConfig, stop: asyncio.Event) -> int:
    client = RemoteBrokerClient(
        config.contact_points, max_message_size=config.max_message_size, security=config.command_api_security
    )
    await client.start()
    service = GatewayService(
        client,
        long_poll_ms=config.long_poll_ms,
        request_timeout_ms=config.request_timeout_ms,
        max_message_size=config.max_message_size,
        multi_tenancy=config.multi_tenancy,
    )
    # one view of the callers for both APIs: a sign-in on one is remembered for the other
    ttl_s = config.security.auth.identity_cache_ttl_s if config.security is not None else 10.0
    directory = Directory(client, ttl_s=ttl_s)
    server, port = await start_gateway_server(
        service,
        config.host,
        config.port,
        max_message_size=config.max_message_size,
        max_concurrent_streams=config.max_concurrent_streams,
        security=config.security,
        directory=directory,
    )

    rest: RestServer | None = None
    rest_port = 0
    if config.rest_port >= 0:
        rest_config = RestConfig(
            host=config.host,
            port=config.rest_port,
            history_url=config.history_url,
            max_request_bytes=config.max_message_size,
            policy=config.rest_policy,
        )
        rest = RestServer(
            service.commands, rest_config, security=config.security, gateway_version=VERSION, directory=directory
        )
        try:
            rest_port = await rest.start()
        except OSError:
            await server.stop(grace=None)
            await client.close()
            raise

    def ready() -> tuple[bool, dict]:
        return client.knows_all_leaders(), {"leaders": len(client.partition_ids)}

    monitoring = MonitoringServer(
        config.host, config.monitoring_port, health=lambda: (True, {}), ready=ready, startup=lambda: (True, {})
    )
    if config.monitoring_port >= 0:
        await monitoring.start()
    gc_policy.apply_after_startup()
    rest_note = f", REST API http://{config.host}:{rest_port}/v2" if rest is not None else ""
    print(
        f"Weir gateway is running on {config.host}:{port}{rest_note}, brokers {', '.join(config.contact_points)}",
        flush=True,
    )
    await stop.wait()
    if rest is not None:
        await rest.close()
    await server.stop(grace=1.0)
    await monitoring.close()
    await client.close()
    return 0


def main(config: GatewayConfig) -> int:
    async def amain() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await run_gateway(config, stop)

    return asyncio.run(amain())
