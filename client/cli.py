"""The ``weir`` command: run brokers and gateways, and talk to a running Weir like zbctl does.

Client commands reach the gateway at ``--address`` (default: ``ZEEBE_ADDRESS`` or ``127.0.0.1:26500``) over the Zeebe
gateway protocol, so they work against any compatible gateway.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

DEFAULT_ADDRESS = "127.0.0.1:26500"
# The broker reads its admin token from the same variable (broker.adminToken), so `weir admin` run beside a
# broker (e.g. `kubectl exec`) sends the right one without a flag.
ADMIN_TOKEN_ENV = "WEIR_BROKER_ADMIN_TOKEN"


def _address(args: argparse.Namespace) -> str:
    return args.address or os.environ.get("ZEEBE_ADDRESS") or DEFAULT_ADDRESS


def setup_logging(level: str, fmt: str) -> None:
    from broker.logs import configure

    configure(level, fmt)


# -- server commands -----------------------------------------------------------------------------------------


def _pick(cli_value: Any, configured: Any) -> Any:
    return configured if cli_value is None else cli_value


def _rest_policy(cfg: dict[str, Any]) -> Any:
    from gateway.rest.policy import RestPolicy

    return RestPolicy.from_config(cfg)


def _load_config(args: argparse.Namespace) -> dict[str, Any]:
    from broker.config import load

    return load(Path(args.config) if getattr(args, "config", None) else None)


def _node_config(args: argparse.Namespace, *, embedded_gateway: bool) -> Any:
    from broker.identity_init import InitialIdentity
    from broker.node import NodeConfig

    cfg = _load_config(args)
    b, g = cfg["broker"], cfg["gateway"]
    return NodeConfig(
        data_dir=Path(_pick(args.data_dir, b["dataDir"])),
        node_id=_pick(args.node_id, b["cluster"]["nodeId"]),
        partitions=_pick(args.partitions, b["cluster"]["partitionsCount"]),
        host=_pick(args.host, b["host"]),
        gateway_port=_pick(args.gateway_port, g["port"]),
        rest_port=_pick(args.rest_port, g["rest"]["port"]),
        history_url=_history_url(args, b, g),
        rest_policy=_rest_policy(cfg),
        command_port=_pick(args.command_port, b["ports"]["command"]),
        monitoring_port=_pick(args.monitoring_port, b["ports"]["monitoring"]),
        embedded_gateway=embedded_gateway,
        command_api=getattr(args, "command_api", False),
        max_message_size=_pick(args.max_message_size, g["maxMessageSize"]),
        long_poll_ms=g["longPollTimeout"],
        request_timeout_ms=g["requestTimeout"],
        snapshot_period_s=_pick(args.snapshot_period, b["snapshotPeriod"]),
        exporters=_exporters(args, b),
        contact_points=list(b["cluster"]["initialContactPoints"]),
        replication_factor=b["cluster"]["replicationFactor"],
        raft_password=b["cluster"]["raftPassword"],
        admin_token=b["adminToken"],
        backpressure=_backpressure(b["backpressure"]),
        min_free_disk_bytes=b["minFreeDiskBytes"],
        max_steps_per_instance=b["maxStepsPerInstance"],
        max_process_depth=b["maxProcessDepth"],
        business_id_uniqueness=b["businessIdUniqueness"],
        authorizations=b["security"]["authorizations"]["enabled"],
        initial_identity=InitialIdentity.from_config(b["security"]["initialization"]),
        multi_tenancy=g["multiTenancy"]["enabled"],
        max_instances_per_signal_chain=b["maxInstancesPerSignalChain"],
        max_recursive_instances_per_chain=b["maxRecursiveInstancesPerChain"],
        expression_max_steps=b["expressions"]["maxSteps"],
        expression_max_size=b["expressions"]["maxSize"],
        deployment_limits=_deployment_limits(b["deployments"]),
        log_segment_size=b["logSegmentSize"],
        gateway_security=_gateway_security(g),
        max_concurrent_streams=g["maxConcurrentStreams"],
        command_api_security=_command_api_security(cfg),
    )


def _history_url(args: argparse.Namespace, broker_cfg: dict[str, Any], gateway_cfg: dict[str, Any]) -> str | None:
    """gateway.history.url, else the database of a history exporter this node runs, else for `weir start` the
    history database in its data folder (where its default exporter writes)."""
    if gateway_cfg["history"]["url"]:
        return str(gateway_cfg["history"]["url"])
    for exporter in broker_cfg["exporters"].values():
        if exporter.get("className") == "exporters.history.HistoryExporter" and (exporter.get("args") or {}).get("url"):
            return str(exporter["args"]["url"])
    if getattr(args, "command", "") == "start":
        data_dir = Path(_pick(args.data_dir, broker_cfg["dataDir"]))
        return f"sqlite:///{(data_dir / 'history.db').resolve()}"
    return None


def _deployment_limits(deployments: dict[str, Any]) -> Any:
    from broker.engine.deployment_limits import DeploymentLimits

    return DeploymentLimits(
        max_resources=deployments["maxResources"],
        max_elements=deployments["maxElements"],
        max_invalid_resources=deployments["maxInvalidResources"],
    )


def _command_api_security(cfg: dict[str, Any]) -> Any:
    from broker.command_api import CommandApiSecurity

    return CommandApiSecurity.from_config(cfg["commandApi"])


def _gateway_security(gateway_cfg: dict[str, Any]) -> Any:
    from gateway.auth import GatewaySecurity

    return GatewaySecurity.from_config(gateway_cfg["security"])


def _backpressure(cfg: dict[str, Any]) -> Any:
    from broker.stream.backpressure import BackpressureConfig

    if not cfg["enabled"]:
        return None
    return BackpressureConfig(
        algorithm=cfg["algorithm"],
        initial_limit=cfg["initialLimit"],
        min_limit=cfg["minLimit"],
        max_limit=cfg["maxLimit"],
        expected_rtt_s=cfg["expectedRtt"],
    )


def _exporters(args: argparse.Namespace, broker_cfg: dict[str, Any]) -> dict[str, Any]:
    """Configured exporters; `weir start` adds the history exporter (SQLite, DATA_DIR/history.db) so what runs can
    be searched at once."""
    from exporters import validate_exporter_configs

    exporters = dict(broker_cfg["exporters"])
    if getattr(args, "command", "") == "start" and not exporters and not args.no_exporter:
        data_dir = Path(_pick(args.data_dir, broker_cfg["dataDir"]))
        exporters["history"] = {
            "className": "exporters.history.HistoryExporter",
            "args": {"url": f"sqlite:///{(data_dir / 'history.db').resolve()}"},
        }
    validate_exporter_configs(exporters)
    return exporters


def _run_node(args: argparse.Namespace, *, embedded_gateway: bool) -> int:
    from broker import gc_policy
    from broker.config import ConfigError
    from broker.node import BrokerNode
    from exporters import ExporterConfigurationError

    try:
        node_config = _node_config(args, embedded_gateway=embedded_gateway)
        logging_cfg = _load_config(args)["logging"]
    except (ConfigError, ExporterConfigurationError) as e:
        print(f"error: invalid configuration: {e}", file=sys.stderr)
        return 2
    setup_logging(_pick(args.log_level, logging_cfg["level"]), _pick(args.log_format, logging_cfg["format"]))
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep running without it
        pass

    async def main() -> int:
        node = BrokerNode(node_config)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await node.start()
        except Exception as e:
            logging.getLogger("weir").error("failed to start: %s", e)
            await node.stop()
            return 1
        gc_policy.apply_after_startup()
        print(
            f"Weir is running: gateway {node_config.host}:{node.gateway_port}, "
            + (f"REST API http://{node_config.host}:{node.rest_port}/v2, " if node.rest_server is not None else "")
            + f"data in {node_config.data_dir.resolve()}, "
            f"monitoring http://{node_config.host}:{node.monitoring.port if node.monitoring else '-'}",
            flush=True,
        )
        await stop.wait()
        await node.stop()
        return 0

    return asyncio.run(main())


def cmd_start(args: argparse.Namespace) -> int:
    return _run_node(args, embedded_gateway=True)


def cmd_broker(args: argparse.Namespace) -> int:
    from broker.config import ConfigError

    args.command_api = True
    try:
        embedded = args.embedded_gateway or bool(_load_config(args)["broker"]["embeddedGateway"])
    except ConfigError as e:
        print(f"error: invalid configuration: {e}", file=sys.stderr)
        return 2
    return _run_node(args, embedded_gateway=embedded)


def cmd_gateway(args: argparse.Namespace) -> int:
    from broker.config import ConfigError
    from gateway.auth import SecurityConfigError
    from gateway.main import GatewayConfig, main

    try:
        cfg = _load_config(args)
    except ConfigError as e:
        print(f"error: invalid configuration: {e}", file=sys.stderr)
        return 2
    g = cfg["gateway"]
    setup_logging(_pick(args.log_level, cfg["logging"]["level"]), _pick(args.log_format, cfg["logging"]["format"]))
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    config = GatewayConfig(
        contact_points=args.broker or g["contactPoints"],
        host=_pick(args.host, g["host"]),
        port=_pick(args.gateway_port, g["port"]),
        rest_port=_pick(args.rest_port, g["rest"]["port"]),
        history_url=g["history"]["url"] or None,
        rest_policy=_rest_policy(cfg),
        monitoring_port=_pick(args.monitoring_port, g["monitoringPort"]),
        max_message_size=_pick(args.max_message_size, g["maxMessageSize"]),
        long_poll_ms=g["longPollTimeout"],
        request_timeout_ms=g["requestTimeout"],
        max_concurrent_streams=g["maxConcurrentStreams"],
        security=_gateway_security(g),
        command_api_security=_command_api_security(cfg),
        multi_tenancy=g["multiTenancy"]["enabled"],
    )
    try:
        return main(config)
    except SecurityConfigError as e:
        print(f"error: invalid configuration: {e}", file=sys.stderr)
        return 2


def cmd_hash_password(args: argparse.Namespace) -> int:
    """A line for the gateway's basic-auth users file; the password is read without echo (or from stdin)."""
    import getpass

    from gateway.auth import hash_password

    password = getpass.getpass("password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    if not password:
        print("error: empty password", file=sys.stderr)
        return 2
    print(f"{args.user}:{hash_password(password)}")
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    from broker.config import ConfigError, dump

    try:
        print(dump(_load_config(args)), end="")
    except ConfigError as e:
        print(f"error: invalid configuration: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_debug(args: argparse.Namespace) -> int:
    """Offline inspection of a stopped broker's partition: its records, or a full replay compared with its state."""
    from broker.tools.inspect import main as inspect_main

    partition_dir = str(Path(args.data_dir) / "partitions" / str(args.partition))
    argv = [args.debug_command, partition_dir]
    if args.debug_command == "records":
        argv += ["--from", str(args.from_position), "--limit", str(args.limit)] + (["--json"] if args.json else [])
    elif args.compare:
        argv += ["--compare", args.compare]
    return inspect_main(argv)


def cmd_admin(args: argparse.Namespace) -> int:
    """Broker operations over its monitoring port (positions, snapshot, pause/resume exporting)."""
    import urllib.error
    import urllib.request

    method, path = {
        "partitions": ("GET", "/admin/partitions"),
        "snapshot": ("POST", "/admin/snapshot"),
        "pause-exporting": ("POST", "/admin/exporting/pause"),
        "resume-exporting": ("POST", "/admin/exporting/resume"),
    }[args.admin_command]
    body = b"" if method == "POST" else None
    request = urllib.request.Request(f"http://{args.monitoring}{path}", method=method, data=body)
    token = args.token or os.environ.get(ADMIN_TOKEN_ENV, "")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=args.timeout) as r:
            print(json.dumps(json.loads(r.read()), indent=2))
    except urllib.error.HTTPError as e:
        try:
            reason = json.loads(e.read()).get("error", e.reason)
        except ValueError:
            reason = e.reason
        print(f"error: the broker refused {args.admin_command} ({e.code}): {reason}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as e:
        print(f"error: cannot reach the broker's monitoring port {args.monitoring}: {e}", file=sys.stderr)
        return 1
    return 0


# -- client commands -----------------------------------------------------------------------------------------


def _stub(args: argparse.Namespace) -> Any:
    """A gateway stub with the TLS and credentials the flags (or ZEEBE_… variables, as zbctl reads them) ask for."""
    import grpc

    from gateway.api import gateway_pb2_grpc

    ca_cert = getattr(args, "ca_cert", None) or os.environ.get("ZEEBE_CA_CERTIFICATE_PATH")
    client_cert, client_key = getattr(args, "client_cert", None), getattr(args, "client_key", None)
    authorization = authorization_header(args)
    tls = bool(ca_cert or client_cert or getattr(args, "tls", False))
    if tls:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=Path(ca_cert).read_bytes() if ca_cert else None,
            private_key=Path(client_key).read_bytes() if client_key else None,
            certificate_chain=Path(client_cert).read_bytes() if client_cert else None,
        )
        if authorization:
            call = grpc.metadata_call_credentials(
                lambda _context, callback: callback((("authorization", authorization),), None)
            )
            credentials = grpc.composite_channel_credentials(credentials, call)
        channel = grpc.secure_channel(_address(args), credentials)
    else:
        channel = grpc.insecure_channel(_address(args))
        if authorization:
            channel = grpc.intercept_channel(channel, _header_interceptor(("authorization", authorization)))
    return gateway_pb2_grpc.GatewayStub(channel)


def authorization_header(args: argparse.Namespace) -> str:
    """The authorization header value the flags (or ZEEBE_… variables) ask for: OAuth bearer, basic, or none."""
    env = os.environ.get
    ca_cert = getattr(args, "ca_cert", None) or env("ZEEBE_CA_CERTIFICATE_PATH")
    client_id = getattr(args, "client_id", None) or env("ZEEBE_CLIENT_ID")
    client_secret = getattr(args, "client_secret", None) or env("ZEEBE_CLIENT_SECRET")
    username = getattr(args, "username", None) or env("ZEEBE_BASIC_AUTH_USERNAME")
    password = getattr(args, "password", None) or env("ZEEBE_BASIC_AUTH_PASSWORD") or ""
    authorization = ""
    if client_id or client_secret:
        token_url = getattr(args, "authz_url", None) or env("ZEEBE_AUTHORIZATION_SERVER_URL")
        audience = getattr(args, "audience", None) or env("ZEEBE_TOKEN_AUDIENCE") or ""
        if not (client_id and client_secret and token_url):
            raise SystemExit("error: OAuth needs --client-id, --client-secret and --authz-url (or ZEEBE_… variables)")
        authorization = "Bearer " + _fetch_token(token_url, client_id, client_secret, audience, ca_cert, args.timeout)
    elif username:
        import base64

        authorization = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
    return authorization


def _fetch_token(url: str, client_id: str, secret: str, audience: str, ca_cert: str | None, timeout: float) -> str:
    """An access token by the client-credentials grant, as zbctl gets one."""
    import ssl
    import urllib.error
    import urllib.parse
    import urllib.request

    form = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret}
    if audience:
        form["audience"] = audience
    request = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(), method="POST")
    request.add_header("content-type", "application/x-www-form-urlencoded")
    context = ssl.create_default_context(cafile=ca_cert) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return str(json.loads(response.read())["access_token"])
    except (urllib.error.URLError, OSError, ValueError, KeyError) as e:
        raise SystemExit(f"error: cannot get an access token from {url}: {e}") from None


def _header_interceptor(header: tuple[str, str]) -> Any:
    """Adds one metadata entry to every call of a plaintext channel (call credentials need TLS)."""
    import collections

    import grpc

    class Details(
        collections.namedtuple(
            "Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")
        ),
        grpc.ClientCallDetails,
    ):
        pass

    class Interceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
        def _details(self, d: Any) -> Any:
            metadata = [*(d.metadata or []), header]
            return Details(d.method, d.timeout, metadata, d.credentials, d.wait_for_ready, d.compression)

        def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
            return continuation(self._details(details), request)

        def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
            return continuation(self._details(details), request)

    return Interceptor()


def _print(obj: Any) -> None:
    from google.protobuf.json_format import MessageToDict

    print(json.dumps(MessageToDict(obj, preserving_proto_field_name=True), indent=2))


def cmd_deploy(args: argparse.Namespace) -> int:
    from gateway.api import gateway_pb2 as pb

    resources = []
    for f in args.files:
        path = Path(f)
        try:
            resources.append(pb.Resource(name=path.name, content=path.read_bytes()))
        except OSError as e:
            print(f"error: cannot read {f}: {e.strerror}", file=sys.stderr)
            return 2
    _print(_stub(args).DeployResource(pb.DeployResourceRequest(resources=resources), timeout=args.timeout))
    return 0


def cmd_create(args: argparse.Namespace) -> int:
    from gateway.api import gateway_pb2 as pb

    request = pb.CreateProcessInstanceRequest(
        bpmnProcessId=args.process_id, version=args.version, variables=args.variables or ""
    )
    stub = _stub(args)
    if args.with_result:
        wr = pb.CreateProcessInstanceWithResultRequest(
            request=request, requestTimeout=args.request_timeout, fetchVariables=args.fetch or []
        )
        _print(stub.CreateProcessInstanceWithResult(wr, timeout=args.request_timeout / 1000 + 5))
    else:
        _print(stub.CreateProcessInstance(request, timeout=args.timeout))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from client.bench import run

    return run(args)


def cmd_sim(args: argparse.Namespace) -> int:
    from client.sim.run import main

    return main(args)


def cmd_status(args: argparse.Namespace) -> int:
    from gateway.api import gateway_pb2 as pb

    topo = _stub(args).Topology(pb.TopologyRequest(), timeout=args.timeout)
    if args.output == "json":
        _print(topo)
        return 0
    print(f"Cluster size: {topo.clusterSize}")
    print(f"Partitions count: {topo.partitionsCount}")
    print(f"Replication factor: {topo.replicationFactor}")
    print(f"Gateway version: {topo.gatewayVersion}")
    print("Brokers:")
    for b in topo.brokers:
        print(f"  Broker {b.nodeId} - {b.host}:{b.port}")
        print(f"    Version: {b.version}")
        for p in b.partitions:
            role = pb.Partition.PartitionBrokerRole.Name(p.role).capitalize()
            health = pb.Partition.PartitionBrokerHealth.Name(p.health).capitalize()
            print(f"    Partition {p.partitionId} : {role}, {health}")
    return 0


# -- parser --------------------------------------------------------------------------------------------------


def _add_node_args(p: argparse.ArgumentParser) -> None:
    """Flags override the configuration file and WEIR_… variables; unset flags leave them be."""
    p.add_argument("--config", help="YAML configuration file")
    p.add_argument("--data-dir", help="data folder (./data)")
    p.add_argument("--host", help="address to bind (127.0.0.1)")
    p.add_argument("--gateway-port", type=int, help="client gRPC port (26500)")
    p.add_argument("--rest-port", type=int, help="REST API port (8080; 0: a free one, -1: off)")
    p.add_argument("--command-port", type=int, help="broker command port (26501)")
    p.add_argument("--monitoring-port", type=int, help="metrics and probes port (9600)")
    p.add_argument("--partitions", type=int, help="partitions on this node (1)")
    p.add_argument("--node-id", type=int, help="node id (0)")
    p.add_argument("--max-message-size", type=int, help="max gRPC message in bytes (4 MiB)")
    p.add_argument("--snapshot-period", type=float, help="seconds between snapshots (300)")
    _add_logging_args(p)


def _add_logging_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log-level", help="DEBUG, INFO, WARNING, ERROR (INFO)")
    p.add_argument("--log-format", choices=("text", "json"), help="text or json (text)")


def _add_client_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--address", help=f"gateway address (ZEEBE_ADDRESS or {DEFAULT_ADDRESS})")
    p.add_argument("--timeout", type=float, default=10.0, help="request timeout in seconds (10)")
    p.add_argument("--tls", action="store_true", help="use TLS, trusting the system's CAs (plaintext by default)")
    p.add_argument("--ca-cert", help="use TLS, trusting this CA (ZEEBE_CA_CERTIFICATE_PATH)")
    p.add_argument("--client-cert", help="client certificate for mTLS (PEM)")
    p.add_argument("--client-key", help="its private key (PEM)")
    p.add_argument("--client-id", help="OAuth client id (ZEEBE_CLIENT_ID)")
    p.add_argument("--client-secret", help="OAuth client secret (ZEEBE_CLIENT_SECRET)")
    p.add_argument("--authz-url", help="OAuth token endpoint (ZEEBE_AUTHORIZATION_SERVER_URL)")
    p.add_argument("--audience", help="OAuth audience of the token (ZEEBE_TOKEN_AUDIENCE)")
    p.add_argument("--username", help="basic-auth user (ZEEBE_BASIC_AUTH_USERNAME)")
    p.add_argument("--password", help="basic-auth password (ZEEBE_BASIC_AUTH_PASSWORD)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="weir", description="Weir workflow broker")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("start", help="run a single-node Weir: one broker with an embedded gateway")
    _add_node_args(p)
    p.add_argument(
        "--no-exporter", action="store_true", help="do not add the default history exporter (DATA_DIR/history.db)"
    )
    p.set_defaults(fn=cmd_start)

    p = sub.add_parser("broker", help="run a broker serving its command API to gateways")
    _add_node_args(p)
    p.add_argument("--embedded-gateway", action="store_true", help="also serve the client API on --gateway-port")
    p.set_defaults(fn=cmd_broker)

    p = sub.add_parser("gateway", help="run a stateless gateway in front of brokers")
    p.add_argument("--config", help="YAML configuration file")
    p.add_argument("--broker", action="append", help="broker command API address (repeatable; 127.0.0.1:26501)")
    p.add_argument("--host", help="address to bind (127.0.0.1)")
    p.add_argument("--gateway-port", type=int, help="client gRPC port (26500)")
    p.add_argument("--rest-port", type=int, help="REST API port (8080; 0: a free one, -1: off)")
    p.add_argument("--monitoring-port", type=int, help="metrics and probes port (9600)")
    p.add_argument("--max-message-size", type=int, help="max gRPC message in bytes (4 MiB)")
    _add_logging_args(p)
    p.set_defaults(fn=cmd_gateway)

    p = sub.add_parser("hash-password", help="print a line for the gateway's basic-auth users file")
    p.add_argument("user")
    p.set_defaults(fn=cmd_hash_password)

    p = sub.add_parser("config", help="configuration")
    config_sub = p.add_subparsers(dest="config_command", required=True)
    show = config_sub.add_parser("show", help="print the effective configuration (defaults, file, WEIR_… variables)")
    show.add_argument("--config", help="YAML configuration file")
    show.set_defaults(fn=cmd_config_show)

    p = sub.add_parser("admin", help="operate a running broker through its monitoring port")
    admin_sub = p.add_subparsers(dest="admin_command", required=True)
    for name, text in (
        ("partitions", "show every partition's role, term and positions"),
        ("snapshot", "take a snapshot of every partition now (and compact the log)"),
        ("pause-exporting", "pause the exporters of the partitions this broker leads"),
        ("resume-exporting", "resume them"),
    ):
        q = admin_sub.add_parser(name, help=text)
        q.add_argument("--monitoring", default="127.0.0.1:9600", help="the broker's monitoring address")
        q.add_argument(
            "--token",
            help=f"admin token (broker.adminToken) for snapshot and exporting; default: ${ADMIN_TOKEN_ENV}, "
            "which keeps it out of the process list",
        )
        q.add_argument("--timeout", type=float, default=30.0)
        q.set_defaults(fn=cmd_admin)

    p = sub.add_parser("debug", help="inspect a stopped broker's data offline")
    debug_sub = p.add_subparsers(dest="debug_command", required=True)
    rec = debug_sub.add_parser("records", help="print a partition's records, one per line")
    rec.add_argument("--json", action="store_true", help="Zeebe-shaped JSON, one record per line")
    rec.add_argument("--from", dest="from_position", type=int, default=1, help="first position to show")
    rec.add_argument("--limit", type=int, default=0, help="show at most this many records (0 = all)")
    rep = debug_sub.add_parser("replay", help="rebuild state from the whole log and compare it with the broker's")
    rep.add_argument("--compare", choices=("runtime", "snapshot"), default="runtime")
    for q in (rec, rep):
        q.add_argument("--data-dir", default="./data", help="the broker's data folder (./data)")
        q.add_argument("--partition", type=int, default=1, help="partition id (1)")
        q.set_defaults(fn=cmd_debug)

    from client.cluster import add_parser as add_cluster_parser

    add_cluster_parser(sub)

    p = sub.add_parser("deploy", help="deploy BPMN resources")
    p.add_argument("files", nargs="+")
    _add_client_args(p)
    p.set_defaults(fn=cmd_deploy)

    p = sub.add_parser("create", help="create a process instance")
    p.add_argument("process_id")
    p.add_argument("--variables", help="JSON object of variables")
    p.add_argument("--version", type=int, default=-1, help="process version (-1 = latest)")
    p.add_argument("--with-result", action="store_true", help="wait for the instance to complete")
    p.add_argument("--request-timeout", type=int, default=15000, help="with --with-result: ms to wait (15000)")
    p.add_argument("--fetch", nargs="*", help="with --with-result: variables to return")
    _add_client_args(p)
    p.set_defaults(fn=cmd_create)

    p = sub.add_parser("bench", help="generate load and report throughput and latency")
    from client.bench import add_arguments as add_bench_arguments

    add_bench_arguments(p)
    p.set_defaults(fn=cmd_bench)

    p = sub.add_parser("sim", help="simulate a whole cluster on simulated time, network and disk, with faults")
    from client.sim.options import add_arguments as add_sim_arguments

    add_sim_arguments(p)
    p.set_defaults(fn=cmd_sim)

    p = sub.add_parser("status", help="show brokers, partitions and roles")
    p.add_argument("--output", choices=("text", "json"), default="text")
    _add_client_args(p)
    p.set_defaults(fn=cmd_status)

    from client.inspect_cli import add_parsers as add_inspect_parsers

    add_inspect_parsers(sub, _add_client_args)

    from client.jobs_cli import add_parsers as add_job_parsers

    add_job_parsers(sub, _add_client_args)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        import grpc

        from client.inspect_cli import RestError

        if isinstance(e, RestError):
            print(f"error: {e}", file=sys.stderr)
            return 1
        if isinstance(e, grpc.RpcError):
            print(f"error: {e.code().name}: {e.details()}", file=sys.stderr)  # type: ignore[attr-defined]
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
