"""A broker process: its partitions, an optional embedded gateway, and the monitoring server.

``weir start`` runs one node with the gateway embedded: the single-node Weir a newcomer starts first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from broker import monitoring
from broker.engine.behaviors import DEFAULT_MAX_PROCESS_DEPTH
from broker.engine.deployment_limits import DeploymentLimits
from broker.feel import DEFAULT_LIMITS, Limits
from broker.identity_init import IdentityInitializer, InitialIdentity
from broker.stream.backpressure import BackpressureConfig
from broker.stream.partition import Partition, PartitionConfig
from broker.stream.step_budget import DEFAULT_MAX_CHAIN_INSTANCES, DEFAULT_MAX_STEPS_PER_INSTANCE

if TYPE_CHECKING:
    from broker.command_api import CommandApiSecurity
    from gateway.auth import GatewaySecurity
    from gateway.rest.policy import RestPolicy

log = logging.getLogger("weir.node")

VERSION = "0.1.0"


@dataclass(slots=True)
class NodeConfig:
    data_dir: Path = Path("data")
    node_id: int = 0
    partitions: int = 1
    host: str = "127.0.0.1"
    gateway_port: int = 26500
    # The embedded gateway's REST API (gateway.rest.port); 0: a free port, negative: off.
    rest_port: int = 8080
    # The history store REST searches read (gateway.history.url); None: searching answers 503.
    history_url: str | None = None
    # What the REST port accepts and bounds (gateway.rest.*, clock.controlled); None: the defaults.
    rest_policy: RestPolicy | None = None
    command_port: int = 26501
    monitoring_port: int = 9600
    embedded_gateway: bool = True
    command_api: bool = False
    max_message_size: int = 4 * 1024 * 1024
    long_poll_ms: int = 10_000
    request_timeout_ms: int = 15_000
    snapshot_period_s: float = 300.0
    exporters: dict = field(default_factory=dict)
    min_free_disk_bytes: int = 256 << 20
    max_steps_per_instance: int = DEFAULT_MAX_STEPS_PER_INSTANCE
    max_process_depth: int = DEFAULT_MAX_PROCESS_DEPTH
    business_id_uniqueness: bool = False
    # Whether commands of authenticated callers need granted permissions (broker.security.authorizations.enabled).
    authorizations: bool = False
    # The identity created at start where missing (broker.security.initialization).
    initial_identity: InitialIdentity = field(default_factory=InitialIdentity)
    # Whether the embedded gateway's requests name their tenant (gateway.multiTenancy.enabled).
    multi_tenancy: bool = False
    max_instances_per_signal_chain: int = DEFAULT_MAX_CHAIN_INSTANCES
    max_recursive_instances_per_chain: int = DEFAULT_MAX_CHAIN_INSTANCES
    # The FEEL budget of one evaluation (broker.expressions.maxSteps / maxSize, see broker.feel.Limits).
    expression_max_steps: int = DEFAULT_LIMITS.max_steps
    expression_max_size: int = DEFAULT_LIMITS.max_size
    # What checking one deployment may spend (broker.deployments.*).
    deployment_limits: DeploymentLimits = field(default_factory=DeploymentLimits)
    log_segment_size: int = 64 << 20
    # Cluster mode: the brokers' Raft addresses (host:raftBasePort) in node-id order; empty runs alone.
    contact_points: list[str] = field(default_factory=list)
    replication_factor: int = 1
    raft_password: str = ""
    # Bearer token for admin POSTs on the monitoring port; empty: accepted on a loopback-bound port only.
    admin_token: str = ""
    backpressure: BackpressureConfig | None = field(default_factory=BackpressureConfig)
    # The embedded gateway's TLS and authentication (gateway.auth.GatewaySecurity); None: open, as on loopback.
    gateway_security: GatewaySecurity | None = None
    max_concurrent_streams: int = 2048
    # TLS and shared secret of the command API, served here and used to call other brokers; None: open.
    command_api_security: CommandApiSecurity | None = None

    @property
    def clustered(self) -> bool:
        return len(self.contact_points) > 1 or self.replication_factor > 1


class BrokerNode:
    """Owns the partitions hosted here and the servers in front of them."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.partitions: dict[int, Partition] = {}
        self.gateway_server: grpc.aio.Server | None = None
        self.gateway_port = 0
        self.rest_server: Any = None
        self.rest_port = 0
        self.command_server: grpc.aio.Server | None = None
        self.inter_partition: Any = None
        self.command_port = 0
        self.monitoring: monitoring.MonitoringServer | None = None
        self.identity_initializer: IdentityInitializer | None = None
        self.started = False

    async def start(self) -> None:
        cfg = self.config
        # Only the broker's user may read the state, log and history it keeps (an existing folder is left as it is).
        cfg.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        layout = None
        hosted = list(range(1, cfg.partitions + 1))
        if cfg.clustered:
            from broker.cluster.node import build_layout

            layout = build_layout(
                node_id=cfg.node_id,
                contact_points=cfg.contact_points,
                partitions_count=cfg.partitions,
                replication_factor=cfg.replication_factor,
            )
            hosted = layout.partitions_of(cfg.node_id)
        opened: dict[int, Partition] = {}
        # Every partition recovers before any starts: recovery decodes blocks on a worker thread, and a started
        # partition decodes the blocks Raft delivers on the event loop; the block codec's zstd (de)compressor is
        # shared and not thread-safe, so the two at once corrupt each other's output.
        for pid in hosted:
            pconf = PartitionConfig(
                partition_id=pid,
                partitions_count=cfg.partitions,
                snapshot_period_s=cfg.snapshot_period_s,
                exporters=cfg.exporters,
                min_free_disk_bytes=cfg.min_free_disk_bytes,
                segment_size=cfg.log_segment_size,
                backpressure=cfg.backpressure,
                max_message_size=cfg.max_message_size,
                max_steps_per_instance=cfg.max_steps_per_instance,
                max_process_depth=cfg.max_process_depth,
                business_id_uniqueness=cfg.business_id_uniqueness,
                authorizations=cfg.authorizations,
                max_instances_per_signal_chain=cfg.max_instances_per_signal_chain,
                max_recursive_instances_per_chain=cfg.max_recursive_instances_per_chain,
                expression_limits=Limits(max_steps=cfg.expression_max_steps, max_size=cfg.expression_max_size),
                deployment_limits=cfg.deployment_limits,
            )
            directory = cfg.data_dir / "partitions" / str(pid)
            partition = Partition(directory, pconf)
            await asyncio.get_running_loop().run_in_executor(None, partition.open)
            opened[pid] = partition
        for pid, partition in opened.items():
            directory = partition.directory
            if layout is None:
                partition.start()
            else:
                from broker.cluster.node import raft_config

                partition.start(raft_config(layout, cfg.node_id, pid, directory, cfg.raft_password, cfg.host))
            self.partitions[pid] = partition
        first = self.partitions.get(1)
        if first is not None and not cfg.initial_identity.empty:
            from gateway.auth import hash_password

            self.identity_initializer = IdentityInitializer(first, cfg.initial_identity, hash_password)
            self.identity_initializer.attach()
        if layout is not None and cfg.partitions > 1:
            from broker.transport.remote import RemoteBrokerClient

            peers = [m.command_address(cfg.command_port) for m in layout.members]
            self.inter_partition = RemoteBrokerClient(
                peers, max_message_size=cfg.max_message_size, security=cfg.command_api_security
            )
            await self.inter_partition.start()
        elif cfg.partitions > 1:
            from broker.transport.broker_client import LocalBrokerClient

            # Every partition is here: commands between partitions go straight to their inboxes.
            self.inter_partition = LocalBrokerClient(
                self.partitions, node_id=cfg.node_id, host=cfg.host, port=cfg.command_port, version=VERSION
            )
        for partition in self.partitions.values():
            partition.inter_partition = self.inter_partition
        self.monitoring = monitoring.MonitoringServer(
            cfg.host,
            cfg.monitoring_port,
            health=self._health,
            ready=self._ready,
            startup=self._startup,
            on_scrape=self._refresh_metrics,
            actions={
                ("GET", "/admin/partitions"): self._admin_partitions,
                ("POST", "/admin/snapshot"): self._admin_snapshot,
                ("POST", "/admin/exporting/pause"): lambda: self._admin_exporting(pause=True),
                ("POST", "/admin/exporting/resume"): lambda: self._admin_exporting(pause=False),
            },
            admin_token=cfg.admin_token,
        )
        if cfg.monitoring_port >= 0:
            port = await self.monitoring.start()
            log.info("monitoring on http://%s:%d (/metrics /health /ready /startup)", cfg.host, port)
        if cfg.command_api:
            from broker.command_api import CommandApi, start_command_api

            api = CommandApi(self.partitions, self.topology)
            self.command_server, self.command_port = await start_command_api(
                api, cfg.host, cfg.command_port, cfg.max_message_size, cfg.command_api_security
            )
            log.info("command API listening on %s:%d", cfg.host, self.command_port)
        if cfg.embedded_gateway and cfg.clustered:
            raise ValueError(
                "an embedded gateway serves a single broker only; in a cluster run `weir gateway` in front of the "
                "brokers (broker.embeddedGateway: false)"
            )
        if cfg.embedded_gateway:
            from broker.transport.broker_client import LocalBrokerClient
            from gateway.directory import Directory
            from gateway.server import start_gateway_server
            from gateway.service import GatewayService

            client = LocalBrokerClient(
                self.partitions, node_id=cfg.node_id, host=cfg.host, port=cfg.command_port, version=VERSION
            )
            # one view of the callers for both APIs: a sign-in on one is remembered for the other
            security = cfg.gateway_security
            callers = Directory(client, ttl_s=security.auth.identity_cache_ttl_s if security else 10.0)
            service = GatewayService(
                client,
                long_poll_ms=cfg.long_poll_ms,
                request_timeout_ms=cfg.request_timeout_ms,
                max_message_size=cfg.max_message_size,
                deployment_limits=cfg.deployment_limits,
                multi_tenancy=cfg.multi_tenancy,
            )
            self.gateway_server, self.gateway_port = await start_gateway_server(
                service,
                cfg.host,
                cfg.gateway_port,
                max_message_size=cfg.max_message_size,
                max_concurrent_streams=cfg.max_concurrent_streams,
                security=cfg.gateway_security,
                directory=callers,
            )
            log.info("gateway listening on %s:%d (gateway_protocol.Gateway)", cfg.host, self.gateway_port)
            if cfg.rest_port >= 0:
                from gateway.rest.policy import RestPolicy
                from gateway.rest.server import RestConfig, RestServer
                from gateway.service import VERSION as GATEWAY_VERSION

                rest = RestConfig(
                    host=cfg.host,
                    port=cfg.rest_port,
                    history_url=cfg.history_url,
                    max_request_bytes=cfg.max_message_size,
                    policy=cfg.rest_policy or RestPolicy(),
                )
                self.rest_server = RestServer(
                    service.commands,
                    rest,
                    security=cfg.gateway_security,
                    gateway_version=GATEWAY_VERSION,
                    directory=callers,
                )
                self.rest_port = await self.rest_server.start()
                log.info(
                    "REST API on http://%s:%d/v2 (Camunda Orchestration Cluster API, level 8.9)",
                    cfg.host,
                    self.rest_port,
                )
        self.started = True

    def topology(self) -> dict:
        """This broker's view of its partitions, as the command API reports it to gateways."""
        return {
            "nodeId": self.config.node_id,
            "version": VERSION,
            "partitionsCount": self.config.partitions,
            "replicationFactor": self.config.replication_factor,
            "partitions": [
                {
                    "id": pid,
                    "role": p.role if p.healthy else "INACTIVE",
                    "healthy": p.healthy,
                    "term": p.term,
                }
                for pid, p in sorted(self.partitions.items())
            ],
        }

    async def stop(self) -> None:
        if self.identity_initializer is not None:
            await self.identity_initializer.close()
        if self.rest_server is not None:
            await self.rest_server.close()
        if self.gateway_server is not None:
            await self.gateway_server.stop(grace=1.0)
        if self.command_server is not None:
            await self.command_server.stop(grace=1.0)
        for partition in self.partitions.values():
            await partition.close()
        if self.inter_partition is not None and hasattr(self.inter_partition, "close"):
            await self.inter_partition.close()
        if self.monitoring is not None:
            await self.monitoring.close()
        log.info("broker %d stopped", self.config.node_id)

    # -- metrics and admin actions ---------------------------------------------------------------------------

    def _refresh_metrics(self) -> None:
        """Gauges that describe state rather than events are read when Prometheus scrapes."""
        self._health()
        now = time.monotonic()
        for pid, p in self.partitions.items():
            label = str(pid)
            if p.term:
                monitoring.RAFT_TERM.labels(label).set(p.term)
            log_dir = p.directory / "log"
            size = sum(f.stat().st_size for f in log_dir.glob("*.log")) if log_dir.exists() else 0
            monitoring.LOG_BYTES.labels(label).set(size)
            monitoring.SNAPSHOT_AGE.labels(label).set(now - p.last_snapshot_time)

    def _admin_partitions(self) -> tuple[int, dict]:
        """Positions of every partition here: what an operator checks before and after maintenance."""
        out = {}
        for pid, p in sorted(self.partitions.items()):
            storage = p.log_storage
            out[str(pid)] = {
                "role": p.role,
                "healthy": p.healthy,
                "term": p.term,
                "processedPosition": p.processed_position,
                "appliedPosition": p.applied_position,
                "commitPosition": storage.commit_position if storage else 0,
                "firstLogPosition": storage.first_position if storage else 0,
                "exporterPositions": p.exporters.positions() if p.exporters else {},
                "exportingPaused": bool(p.exporters and p.exporters.paused),
                "backlog": p.backlog,
            }
        return 200, {"partitions": out}

    def _admin_snapshot(self) -> tuple[int, dict]:
        taken: dict[str, int] = {}
        failed: dict[str, str] = {}
        for pid, p in self.partitions.items():
            if p.healthy and p.db is not None:
                try:
                    taken[str(pid)] = p.take_snapshot().applied_position
                except OSError as e:
                    failed[str(pid)] = str(e)
        if failed:
            return 503, {"snapshots": taken, "failed": failed}
        return 200, {"snapshots": taken}

    def _admin_exporting(self, *, pause: bool) -> tuple[int, dict]:
        changed = []
        for pid, p in self.partitions.items():
            if p.exporters is not None:
                p.exporters.pause() if pause else p.exporters.resume()
                changed.append(pid)
        return 200, {"exporting": "paused" if pause else "resumed", "partitions": changed}

    # -- probes ----------------------------------------------------------------------------------------------

    def _partition_details(self) -> dict:
        return {
            "partitions": {
                str(pid): {
                    "role": p.role if p.healthy else "INACTIVE",
                    "healthy": p.healthy,
                    "processedPosition": getattr(p, "processed_position", 0),
                    "backlog": p.backlog,
                    "instancesStoppedByStepBudget": p.instances_stopped_by_budget,
                    **({"failure": p.failure} if p.failure else {}),
                    **({"problem": p.problem} if p.problem else {}),
                    **({"diskFull": p.disk_full_reason} if p.disk_full else {}),
                }
                for pid, p in self.partitions.items()
            }
        }

    def _health(self) -> tuple[bool, dict]:
        ok = all(p.healthy and p.problem is None for p in self.partitions.values())
        for pid, p in self.partitions.items():
            monitoring.PARTITION_HEALTH.labels(str(pid)).set(1 if p.healthy and p.problem is None else 0)
            monitoring.PARTITION_ROLE.labels(str(pid)).set({"LEADER": 0, "FOLLOWER": 1}.get(p.role, 2))
            monitoring.BACKLOG.labels(str(pid)).set(p.backlog)
        return ok, self._partition_details()

    def _ready(self) -> tuple[bool, dict]:
        """Ready: every partition here has a role, and where this broker leads, it is processing."""
        ok, details = self._health()
        roles_known = all(p.role in ("LEADER", "FOLLOWER") for p in self.partitions.values())
        leading = all(p.processing for p in self.partitions.values() if p.role == "LEADER")
        return ok and self.started and roles_known and leading, details

    def _startup(self) -> tuple[bool, dict]:
        return self.started, {}
