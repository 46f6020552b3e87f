"""``weir cluster up|down|restart-broker``: a local cluster of brokers and a gateway, for development and tests.

``up`` starts N ``weir broker`` processes and one ``weir gateway`` on loopback with free ports, waits until every
partition has a leader, writes ``DIR/cluster.json`` (gateway address; per broker: node id, pid, ports, data
directory, the exact command and environment) and keeps running until interrupted, then stops everything.
``restart-broker ID`` restarts one broker from ``cluster.json`` (after a ``kill -9`` in a test, say);
``down`` stops the cluster.

Every process's ``WEIR_…`` settings are recorded at ``up`` (those of the environment it ran in, TLS paths
included), so a restart from any shell brings the broker back exactly as it was: its own environment's ``WEIR_…``
variables are not used. Settings that are secrets (the Raft password, the command API secret, anything named like a
password, token, secret or key, exporter arguments and URLs, which may carry credentials) go to
``DIR/cluster-secrets.json`` instead, which only its owner can read; ``cluster.json`` names the file and which
variables each process takes from it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

CLUSTER_FILE = "cluster.json"
SECRETS_FILE = "cluster-secrets.json"
# Parts of a WEIR_… variable's name that make its value a secret (see the module docstring).
_SECRET_PARTS = ("SECRET", "PASSWORD", "PASSPHRASE", "TOKEN", "CREDENTIAL", "KEY", "_URL", "_ARGS_")


def _ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands to outgoing connections (Linux; the usual default elsewhere)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    """Whether a plain bind (without SO_REUSEADDR) succeeds: false for a port in use, and for a port in TIME_WAIT,
    which is how :func:`_reserve` marks a planned port."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _reserve(port: int) -> None:
    """Leave ``port`` in TIME_WAIT for a minute: one connection to it, closed first on the listening side.

    Until then a plain bind fails there, so another planner (this process's next pick, or another program's,
    concurrently) passes it by, while the server it was planned for binds it at once: servers set SO_REUSEADDR,
    which TIME_WAIT does not stop.
    """
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen(1)
        with socket.socket() as client:
            client.connect(("127.0.0.1", port))
            accepted, _ = server.accept()
            accepted.close()


def free_port_range(count: int = 1) -> int:
    """A base port with ``count`` consecutive free ports (one Raft member per partition), outside the ephemeral range.

    Ports are planned before the processes that bind them start; a port from the ephemeral range can meanwhile be
    taken by any outgoing connection (brokers already started connect to each other), so planned ports come from
    below that range whenever it leaves room, at random, and are reserved (:func:`_reserve`) until their server
    binds them. A port can still be taken in between by a program that binds without looking: test harnesses
    start again on newly planned ports when a process says so (tests/harness.py).
    """
    pool_low, pool_high = 10_000, _ephemeral_range()[0] - count - 1
    for _ in range(500):
        base = random.randint(pool_low, pool_high) if pool_high > pool_low else _any_free_port()
        if base + count < 65535 and all(_bindable(port) for port in range(base, base + count)):
            try:
                for port in range(base, base + count):
                    _reserve(port)
            except OSError:  # taken since it was checked
                continue
            return base
    raise RuntimeError(f"no {count} consecutive free ports found")


def _any_free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port() -> int:
    """One free port to plan for a process started later (see :func:`free_port_range`)."""
    return free_port_range(1)


def is_secret(name: str) -> bool:
    """Whether the value of setting ``name`` must stay out of ``cluster.json``; paths (``…_PATH``, ``…_FILE``) are
    not secrets, what they point to is protected by its own mode."""
    if name.endswith(("_PATH", "_FILE")):
        return False
    return any(part in name for part in _SECRET_PARTS)


def _weir_settings() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name.startswith("WEIR_")}


def _record_env(process: dict[str, Any], env: dict[str, str], secrets: dict[str, str]) -> None:
    """Split ``env`` into the process's plain ``env`` and the names it takes from the secrets file."""
    process["env"] = {name: value for name, value in env.items() if not is_secret(name)}
    process["secretEnv"] = sorted(name for name in env if is_secret(name))
    secrets.update((name, env[name]) for name in process["secretEnv"])


def process_env(cluster: dict[str, Any], process: dict[str, Any]) -> dict[str, str]:
    """The ``WEIR_…`` settings ``process`` was started with: its ``env`` plus its secrets, read from their file."""
    env = dict(process.get("env", {}))
    names = process.get("secretEnv", [])
    if names:
        path = Path(cluster["secretsFile"])
        try:
            secrets = json.loads(path.read_text())
        except OSError as e:
            raise SystemExit(f"error: cannot read the cluster's secrets {path}: {e.strerror}") from None
        env.update((name, secrets[name]) for name in names)
    return env


def _spawn(command: list[str], env: dict[str, str], log_path: Path) -> int:
    """Start ``command`` with the ``WEIR_…`` settings ``env`` only (none of this process's own)."""
    base = {name: value for name, value in os.environ.items() if not name.startswith("WEIR_")}
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            command,
            env={**base, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return proc.pid


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as gone
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        pass
    # Someone else's zombie (a broker killed with -9 whose supervisor has not reaped it yet) is gone as well.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _reap_children() -> None:
    """Collect brokers that died (kill -9 in a test): a zombie keeps its pid looking alive to other processes."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _host(broker: dict[str, Any]) -> str:
    return str(broker.get("host", "127.0.0.1"))


def read_cluster(data_dir: Path) -> dict[str, Any]:
    path = data_dir / CLUSTER_FILE
    try:
        return json.loads(path.read_text())
    except OSError:
        raise SystemExit(
            f"error: no cluster at {data_dir} ({path} is missing); start one with `weir cluster up`"
        ) from None


def write_cluster(data_dir: Path, cluster: dict[str, Any]) -> None:
    """Replace ``cluster.json`` atomically (readable by its owner only, like the secrets file it names)."""
    _write_private(data_dir / CLUSTER_FILE, json.dumps(cluster, indent=2))


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` atomically with a file readable by its owner only: mode 0600 from the start, never a window
    with the umask's mode. A leftover temporary file is removed first, since ``O_CREAT`` would keep its mode."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def plan(args: argparse.Namespace) -> dict[str, Any]:
    data_dir = Path(args.data_dir).resolve()
    brokers = []
    raft_bases = [free_port_range(args.partitions) for _ in range(args.brokers)]
    command_ports = [free_port() for _ in range(args.brokers)]
    hosts = args.broker_hosts.split(",") if args.broker_hosts else ["127.0.0.1"] * args.brokers
    if len(hosts) != args.brokers:
        raise SystemExit(f"error: --broker-hosts lists {len(hosts)} addresses for {args.brokers} brokers")
    contact_points = ",".join(
        f"{host}:{base}:{cmd}" for host, base, cmd in zip(hosts, raft_bases, command_ports, strict=True)
    )
    password = os.environ.get("WEIR_BROKER_CLUSTER_RAFT_PASSWORD") or os.urandom(16).hex()
    # Gateways and brokers prove themselves to brokers' command APIs with it (TLS settings, if any, come from the
    # WEIR_COMMAND_API_TLS_… variables of this environment, recorded for every process).
    command_secret = os.environ.get("WEIR_COMMAND_API_SECRET") or os.urandom(16).hex()
    settings = _weir_settings()
    secrets: dict[str, str] = {}
    for node_id in range(args.brokers):
        command_port, monitoring_port = command_ports[node_id], free_port()
        broker_dir = data_dir / f"broker-{node_id}"
        env = {
            **settings,
            "WEIR_BROKER_CLUSTER_NODE_ID": str(node_id),
            "WEIR_BROKER_CLUSTER_CLUSTER_SIZE": str(args.brokers),
            "WEIR_BROKER_CLUSTER_PARTITIONS_COUNT": str(args.partitions),
            "WEIR_BROKER_CLUSTER_REPLICATION_FACTOR": str(args.replication),
            "WEIR_BROKER_CLUSTER_INITIAL_CONTACT_POINTS": contact_points,
            "WEIR_BROKER_CLUSTER_RAFT_PASSWORD": password,
            "WEIR_COMMAND_API_SECRET": command_secret,
            "WEIR_BROKER_PORTS_RAFT": str(raft_bases[node_id]),
            "WEIR_BROKER_EMBEDDED_GATEWAY": "false",
        }
        netns = args.broker_netns.split(",")[node_id] if args.broker_netns else ""
        command = [
            *(["ip", "netns", "exec", netns] if netns else []),
            sys.executable,
            "-m",
            "client.cli",
            "broker",
            "--data-dir",
            str(broker_dir),
            "--command-port",
            str(command_port),
            "--monitoring-port",
            str(monitoring_port),
            "--host",
            hosts[node_id],
            *args.broker_args,
        ]
        broker = {
            "nodeId": node_id,
            "host": hosts[node_id],
            "pid": 0,
            "commandPort": command_port,
            "monitoringPort": monitoring_port,
            "raftBasePort": raft_bases[node_id],
            "dataDir": str(broker_dir),
            "log": str(data_dir / f"broker-{node_id}.log"),
            "command": command,
        }
        _record_env(broker, env, secrets)
        brokers.append(broker)
    gateway_port = args.gateway_port or free_port()
    gateway_monitoring = free_port()
    rest_port = free_port()
    gateway_command = [
        sys.executable,
        "-m",
        "client.cli",
        "gateway",
        "--gateway-port",
        str(gateway_port),
        "--rest-port",
        str(rest_port),
        "--monitoring-port",
        str(gateway_monitoring),
        *[a for b in brokers for a in ("--broker", f"{b['host']}:{b['commandPort']}")],
    ]
    gateway = {
        "address": f"127.0.0.1:{gateway_port}",
        "restUrl": f"http://127.0.0.1:{rest_port}",
        "monitoringPort": gateway_monitoring,
        "pid": 0,
        "log": str(data_dir / "gateway.log"),
        "command": gateway_command,
    }
    _record_env(gateway, {**settings, "WEIR_COMMAND_API_SECRET": command_secret}, secrets)
    secrets_file = data_dir / SECRETS_FILE
    _write_private(secrets_file, json.dumps(secrets, indent=2))
    return {
        "dataDir": str(data_dir),
        "secretsFile": str(secrets_file),
        "brokers": brokers,
        "partitionsCount": args.partitions,
        "replicationFactor": args.replication,
        "gateway": gateway,
        "supervisorPid": os.getpid(),
    }


def start_broker(cluster: dict[str, Any], broker: dict[str, Any]) -> None:
    # owner only, as a broker makes its own (it leaves a folder that exists as it is): the state, log and history
    Path(broker["dataDir"]).mkdir(parents=True, exist_ok=True, mode=0o700)
    broker["pid"] = _spawn(broker["command"], process_env(cluster, broker), Path(broker["log"]))


def wait_ready(cluster: dict[str, Any], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    gateway_ready = f"http://127.0.0.1:{cluster['gateway']['monitoringPort']}/ready"
    while time.monotonic() < deadline:
        brokers_ready = all(_http_ok(f"http://{_host(b)}:{b['monitoringPort']}/ready") for b in cluster["brokers"])
        if brokers_ready and _http_ok(gateway_ready):
            return
        for b in cluster["brokers"]:
            if not _alive(b["pid"]):
                raise SystemExit(f"error: broker {b['nodeId']} exited during start-up; see {b['log']}")
        if not _alive(cluster["gateway"]["pid"]):
            raise SystemExit(f"error: the gateway exited during start-up; see {cluster['gateway']['log']}")
        time.sleep(0.2)
    raise SystemExit(f"error: the cluster was not ready within {timeout:.0f}s; see the logs in {cluster['dataDir']}")


def stop_pids(pids: list[int], timeout: float = 20.0) -> None:
    for pid in pids:
        if pid and _alive(pid):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid and _alive(pid) for pid in pids):
        time.sleep(0.1)
    for pid in pids:
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)


def cmd_up(args: argparse.Namespace) -> int:
    if args.replication > args.brokers:
        print("error: --replication cannot exceed --brokers", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    cluster = plan(args)
    for broker in cluster["brokers"]:
        start_broker(cluster, broker)
    gw = cluster["gateway"]
    gw["pid"] = _spawn(gw["command"], process_env(cluster, gw), Path(gw["log"]))
    write_cluster(data_dir, cluster)
    stop = False

    def on_signal(_signum: int, _frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        wait_ready(cluster, args.timeout)
        print(
            f"Weir cluster is up: {args.brokers} brokers, {args.partitions} partitions, replication "
            f"{args.replication}; gateway {gw['address']}; {data_dir / CLUSTER_FILE}",
            flush=True,
        )
        while not stop:
            time.sleep(0.2)
            _reap_children()
    finally:
        current = json.loads((data_dir / CLUSTER_FILE).read_text())
        stop_pids([current["gateway"]["pid"]] + [b["pid"] for b in current["brokers"]])
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    cluster = read_cluster(Path(args.data_dir))
    supervisor = cluster.get("supervisorPid", 0)
    stop_pids([supervisor] if supervisor and _alive(supervisor) else [])
    stop_pids([cluster["gateway"]["pid"]] + [b["pid"] for b in cluster["brokers"]])
    print("Weir cluster is down")
    return 0


def cmd_restart_broker(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir)
    cluster = read_cluster(data_dir)
    matches = [b for b in cluster["brokers"] if b["nodeId"] == args.node_id]
    if not matches:
        print(f"error: no broker {args.node_id} in {data_dir / CLUSTER_FILE}", file=sys.stderr)
        return 2
    broker = matches[0]
    stop_pids([broker["pid"]])
    start_broker(cluster, broker)
    write_cluster(data_dir, cluster)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if _http_ok(f"http://{_host(broker)}:{broker['monitoringPort']}/ready"):
            print(f"broker {args.node_id} restarted (pid {broker['pid']})")
            return 0
        if not _alive(broker["pid"]):
            print(f"error: broker {args.node_id} exited; see {broker['log']}", file=sys.stderr)
            return 1
        time.sleep(0.2)
    print(f"error: broker {args.node_id} not ready within {args.timeout:.0f}s", file=sys.stderr)
    return 1


def add_parser(sub: Any) -> None:
    p = sub.add_parser("cluster", help="a local cluster of brokers and a gateway on loopback")
    csub = p.add_subparsers(dest="cluster_command", required=True)
    up = csub.add_parser("up", help="start brokers and a gateway, wait until every partition has a leader")
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--partitions", type=int, default=3)
    up.add_argument("--replication", type=int, default=3)
    up.add_argument("--data-dir", required=True)
    up.add_argument("--gateway-port", type=int, default=0, help="client gRPC port (default: a free one)")
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for readiness (60)")
    up.add_argument("--broker-arg", dest="broker_args", action="append", default=[], help="extra `weir broker` flag")
    up.add_argument("--broker-hosts", help="comma-separated addresses, one per broker (default 127.0.0.1 for all)")
    up.add_argument(
        "--broker-netns", help="comma-separated network namespaces to run the brokers in (fault tests, as root)"
    )
    up.set_defaults(fn=cmd_up)
    down = csub.add_parser("down", help="stop the cluster described by DATA_DIR/cluster.json")
    down.add_argument("--data-dir", required=True)
    down.set_defaults(fn=cmd_down)
    rb = csub.add_parser("restart-broker", help="restart one broker from DATA_DIR/cluster.json")
    rb.add_argument("node_id", type=int)
    rb.add_argument("--data-dir", required=True)
    rb.add_argument("--timeout", type=float, default=60.0)
    rb.set_defaults(fn=cmd_restart_broker)
