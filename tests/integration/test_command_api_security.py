"""The brokers' command API closed to strangers: a shared secret and TLS (or mTLS), carried by `weir gateway`.

Without the secret a caller gets UNAUTHENTICATED from every method (commands, job streams, topology); a gateway with
the brokers' settings routes a workflow as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import msgpack
import pytest
from pyzeebe import ZeebeClient, ZeebeWorker, create_insecure_channel
from pyzeebe.errors import ProcessDefinitionNotFoundError

from tests.cluster.harness import Cluster
from tests.harness import BPMN, REPO, CliProcess, eventually, free_port, retry_on_taken_port
from tests.security import Certificates, make_certificates

SECRET = "the-brokers-secret"
_IDENTITY = lambda b: b  # noqa: E731


def _broker(tmp_path: Path, env: dict[str, str]) -> tuple[CliProcess, int]:
    """A ready `weir broker` alone: (its process, its command port)."""

    def start(_attempt: int) -> tuple[CliProcess, int]:
        command_port, monitoring_port = free_port(), free_port()
        args = ["broker", "--data-dir", str(tmp_path / "b"), "--command-port", str(command_port)]
        proc = CliProcess([*args, "--monitoring-port", str(monitoring_port)], tmp_path / "broker.log", env)
        return proc.wait_running(monitoring_port), command_port

    return retry_on_taken_port(start)


def _gateway(tmp_path: Path, command_port: int, env: dict[str, str], *, ready: bool = True) -> tuple[CliProcess, int]:
    """A running `weir gateway` in front of the broker at ``command_port`` (with ``ready``: that knows its leader):
    (its process, its gateway port)."""

    def start(_attempt: int) -> tuple[CliProcess, int]:
        gateway_port, monitoring_port = free_port(), free_port()
        args = ["gateway", "--broker", f"127.0.0.1:{command_port}", "--gateway-port", str(gateway_port)]
        args += ["--rest-port", "0", "--monitoring-port", str(monitoring_port)]
        proc = CliProcess(args, tmp_path / "gateway.log", env)
        return proc.wait_running(monitoring_port if ready else None), gateway_port

    return retry_on_taken_port(start)


def _tls_env(certs: Certificates, *, mtls: bool = False) -> dict[str, str]:
    """The same settings serve brokers (server side) and gateways (caller side)."""
    env = {
        "WEIR_COMMAND_API_TLS_ENABLED": "true",
        "WEIR_COMMAND_API_TLS_CERTIFICATE_CHAIN_PATH": str(certs.server_cert),
        "WEIR_COMMAND_API_TLS_PRIVATE_KEY_PATH": str(certs.server_key),
        "WEIR_COMMAND_API_TLS_CA_PATH": str(certs.ca),
    }
    if mtls:
        env["WEIR_COMMAND_API_TLS_REQUIRE_CLIENT_CERTIFICATE"] = "true"
    return env


@contextlib.contextmanager
def _split(tmp_path: Path, env: dict[str, str], gateway_env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """A `weir broker` and a `weir gateway` in front of it: yields (gateway address, command port)."""
    broker, command_port = _broker(tmp_path, env)
    gateway = None
    try:
        gateway, gateway_port = _gateway(tmp_path, command_port, gateway_env)
        yield f"127.0.0.1:{gateway_port}", command_port
    finally:
        if gateway is not None:
            gateway.stop()
        broker.stop()


def _workflow(address: str, instances: int = 1) -> dict:
    """Deploy one-task, run ``instances`` instances to completion; the variables of the last.

    A deployment reaches other partitions after its response (as in Zeebe): creation retries NOT_FOUND briefly.
    """

    async def scenario() -> dict:
        channel = create_insecure_channel(grpc_address=address)
        client, worker = ZeebeClient(channel), ZeebeWorker(channel)
        await client.deploy_resource(str(BPMN / "one-task.bpmn"))

        @worker.task(task_type="test")
        async def handler(n: int) -> dict:
            return {"seen": n}

        work = asyncio.create_task(worker.work())
        deadline = asyncio.get_running_loop().time() + 30
        try:
            for _ in range(instances):
                while True:
                    try:
                        result = await client.run_process_with_result("one-task", {"n": 3}, timeout=10_000)
                        break
                    except ProcessDefinitionNotFoundError:
                        if asyncio.get_running_loop().time() > deadline:
                            raise
                        await asyncio.sleep(0.1)
        finally:
            await worker.stop()
            work.cancel()
        return result.variables

    return asyncio.run(scenario())


async def _call(channel: grpc.aio.Channel, method: str, metadata: tuple[tuple[str, str], ...] = ()) -> grpc.StatusCode:
    """The status a command API method ends with (OK when it answers).

    When the broker refuses a bidirectional call while the client is still sending its first message, the client's
    gRPC core now and then reports "Internal error from Core" instead of the broker's status (a race in the client,
    not an answer of the broker): the call is then made again, up to three times.
    """
    for _ in range(3):
        code, details = await _call_once(channel, method, metadata)
        if not (code == grpc.StatusCode.INTERNAL and details == "Internal error from Core"):
            return code
    return code


async def _call_once(
    channel: grpc.aio.Channel, method: str, metadata: tuple[tuple[str, str], ...]
) -> tuple[grpc.StatusCode, str]:
    path = "/weir.broker.CommandApi/" + method
    try:
        if method == "Topology":
            await channel.unary_unary(path, _IDENTITY, _IDENTITY)(b"", metadata=metadata, timeout=5)
        elif method == "StreamJobs":
            request = msgpack.packb({"type": "test", "worker": "thief", "timeout": 60_000, "fetch": []})
            call = channel.unary_stream(path, _IDENTITY, _IDENTITY)(request, metadata=metadata, timeout=5)
            await call.read()  # the hello
        else:  # Commands: one command asking to skip admission control
            command = {"id": 1, "p": 1, "vt": 19, "i": 0, "k": -1, "v": {}, "internal": True}

            async def requests():  # type: ignore[no-untyped-def]
                yield msgpack.packb(command)

            call = channel.stream_stream(path, _IDENTITY, _IDENTITY)(requests(), metadata=metadata, timeout=5)
            await call.read()
    except grpc.aio.AioRpcError as e:
        return e.code(), e.details() or ""
    return grpc.StatusCode.OK, ""


def _statuses(address: str, certs: Certificates | None, metadata: tuple[tuple[str, str], ...] = ()) -> set:
    async def run() -> set:
        if certs is None:
            channel = grpc.aio.insecure_channel(address)
        else:
            channel = grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(certs.ca.read_bytes()))
        async with channel:
            return {await _call(channel, m, metadata) for m in ("Topology", "StreamJobs", "Commands")}

    return asyncio.run(run())


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def test_tls_and_secret_keep_strangers_out_and_let_the_gateway_in(tmp_path: Path, certs: Certificates) -> None:
    env = {**_tls_env(certs), "WEIR_COMMAND_API_SECRET": SECRET}
    with _split(tmp_path, env, env) as (gateway_address, command_port):
        address = f"127.0.0.1:{command_port}"
        assert _statuses(address, certs) == {grpc.StatusCode.UNAUTHENTICATED}
        assert _statuses(address, certs, (("weir-command-secret", "guess"),)) == {grpc.StatusCode.UNAUTHENTICATED}
        assert _statuses(address, None, (("weir-command-secret", SECRET),)) == {grpc.StatusCode.UNAVAILABLE}
        assert _statuses(address, certs, (("weir-command-secret", SECRET),)) == {grpc.StatusCode.OK}
        assert _workflow(gateway_address) == {"n": 3, "seen": 3}

        async def message() -> str:
            async with grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(certs.ca.read_bytes())) as ch:
                try:
                    await ch.unary_unary("/weir.broker.CommandApi/Topology", _IDENTITY, _IDENTITY)(b"", timeout=5)
                except grpc.aio.AioRpcError as e:
                    return e.details() or ""
            return ""

        assert "WEIR_COMMAND_API_SECRET" in asyncio.run(message())


def test_a_secret_alone_on_loopback(tmp_path: Path) -> None:
    """No TLS: the secret still keeps other local users' processes out."""
    env = {"WEIR_COMMAND_API_SECRET": SECRET}
    with _split(tmp_path, env, env) as (gateway_address, command_port):
        assert _statuses(f"127.0.0.1:{command_port}", None) == {grpc.StatusCode.UNAUTHENTICATED}
        assert _workflow(gateway_address) == {"n": 3, "seen": 3}


def test_mtls_refuses_callers_without_a_certificate(tmp_path: Path, certs: Certificates) -> None:
    env = _tls_env(certs, mtls=True)
    with _split(tmp_path, env, env) as (gateway_address, command_port):
        assert _statuses(f"127.0.0.1:{command_port}", certs) == {grpc.StatusCode.UNAVAILABLE}  # no handshake
        assert _workflow(gateway_address) == {"n": 3, "seen": 3}


def test_a_gateway_without_the_secret_is_refused(tmp_path: Path) -> None:
    """It starts, but never learns a leader: its log says why."""
    gateway_log = tmp_path / "gateway.log"
    broker, command_port = _broker(tmp_path, {"WEIR_COMMAND_API_SECRET": SECRET})
    gateway = None
    try:
        gateway, gateway_port = _gateway(tmp_path, command_port, {}, ready=False)
        from pyzeebe.proto import gateway_pb2 as pb
        from pyzeebe.proto import gateway_pb2_grpc

        stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(f"127.0.0.1:{gateway_port}"))
        topology = eventually(
            lambda: stub.Topology(pb.TopologyRequest(), timeout=2), timeout=30, what="the gateway to answer"
        )
        assert list(topology.brokers) == []  # the broker turned it away
        eventually(lambda: "refuses our calls" in gateway_log.read_text(), what="the gateway to say why")
        assert "WEIR_COMMAND_API_SECRET" in gateway_log.read_text()
    finally:
        if gateway is not None:
            gateway.stop()
        broker.stop()


def test_cluster_up_carries_a_secret_to_brokers_and_gateway(
    tmp_path: Path, certs: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two brokers, two partitions: deployments cross brokers over the command API with TLS and the secret.

    The secret is kept in an owner-only file, out of cluster.json; a broker restarted from a shell without any
    WEIR_… setting comes back with the same TLS and secret.
    """
    for name, value in _tls_env(certs).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("WEIR_COMMAND_API_SECRET", raising=False)
    cluster = Cluster(tmp_path / "cluster", brokers=2, partitions=2, replication=1).up()
    try:
        info = cluster.reload()
        secrets_file = Path(info["secretsFile"])
        secret = json.loads(secrets_file.read_text())["WEIR_COMMAND_API_SECRET"]
        assert all("WEIR_COMMAND_API_SECRET" in p["secretEnv"] for p in [*info["brokers"], info["gateway"]])
        assert secret not in (cluster.data_dir / "cluster.json").read_text()
        assert {_mode(secrets_file), _mode(cluster.data_dir / "cluster.json")} == {0o600}
        for broker in info["brokers"]:
            assert _statuses(f"127.0.0.1:{broker['commandPort']}", certs) == {grpc.StatusCode.UNAUTHENTICATED}
        assert _workflow(cluster.gateway, instances=4) == {"n": 3, "seen": 3}  # round-robin: both partitions

        clean = {name: value for name, value in os.environ.items() if not name.startswith("WEIR_")}
        restart = [sys.executable, "-m", "client.cli", "cluster", "restart-broker", "0"]
        done = subprocess.run(
            [*restart, "--data-dir", str(cluster.data_dir)], cwd=REPO, env=clean, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        address = f"127.0.0.1:{cluster.reload()['brokers'][0]['commandPort']}"
        assert _statuses(address, certs) == {grpc.StatusCode.UNAUTHENTICATED}  # TLS, and the secret is required
        assert _statuses(address, None, (("weir-command-secret", secret),)) == {grpc.StatusCode.UNAVAILABLE}
        assert _statuses(address, certs, (("weir-command-secret", secret),)) == {grpc.StatusCode.OK}
        assert _workflow(cluster.gateway, instances=4) == {"n": 3, "seen": 3}
    finally:
        cluster.down()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)
