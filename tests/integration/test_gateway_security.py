"""The client API with TLS and authentication on: Zeebe clients connect with their own TLS and OAuth settings.

A token issuer of our own (tests/security.py) runs on 127.0.0.1 over HTTPS; `weir start` trusts its JWKS (fetched
from its URL, or read from a file) and serves TLS with a certificate from a CA made for the test.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from pyzeebe import ZeebeClient, ZeebeWorker, create_oauth2_client_credentials_channel
from pyzeebe.proto import gateway_pb2 as pb
from pyzeebe.proto import gateway_pb2_grpc

from gateway.auth import hash_password, verify_password
from tests.harness import BPMN, REPO, WeirProcess
from tests.security import Certificates, TokenIssuer, _key, make_certificates

AUDIENCE = "weir-gateway"
CLIENT_ID, CLIENT_SECRET = "worker-app", "s3cret-worker"
USER, PASSWORD = "alice", "correct horse battery staple"
CLIENTS = Path(__file__).resolve().parents[2] / ".cache" / "node-clients" / "node_modules"
ZBCTL = CLIENTS / "zbctl" / "bin" / "zbctl-cli.linux"
needs_node_clients = pytest.mark.skipif(
    not ZBCTL.exists() and os.environ.get("CI") != "true",
    reason="node clients not installed (run `make node-clients`)",
)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def issuer(certs: Certificates) -> Iterator[TokenIssuer]:
    with TokenIssuer(certs, {CLIENT_ID: CLIENT_SECRET}) as token_issuer:
        yield token_issuer


def _tls_env(certs: Certificates) -> dict[str, str]:
    return {
        "WEIR_GATEWAY_SECURITY_TLS_ENABLED": "true",
        "WEIR_GATEWAY_SECURITY_TLS_CERTIFICATE_CHAIN_PATH": str(certs.server_cert),
        "WEIR_GATEWAY_SECURITY_TLS_PRIVATE_KEY_PATH": str(certs.server_key),
    }


@pytest.fixture(scope="module")
def secured(
    tmp_path_factory: pytest.TempPathFactory, certs: Certificates, issuer: TokenIssuer
) -> Iterator[WeirProcess]:
    """`weir start` with TLS, OAuth (JWKS fetched from the issuer's URL) and basic auth."""
    folder = tmp_path_factory.mktemp("secured")
    users = folder / "users"
    users.write_text(f"# user:hash\n{USER}:{hash_password(PASSWORD)}\n")
    env = {
        **_tls_env(certs),
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "oauth,basic",
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_JWKS_URL": issuer.jwks_url,
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_JWKS_CA_PATH": str(certs.ca),
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_ISSUER": issuer.issuer,
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_AUDIENCE": AUDIENCE,
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_BASIC_USERS_FILE": str(users),
    }
    w = WeirProcess(folder / "data", env=env)
    w.start()
    try:
        yield w
    finally:
        w.stop()


def _stub(weir: WeirProcess, certs: Certificates, *, client_cert: bool = False) -> gateway_pb2_grpc.GatewayStub:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=certs.ca.read_bytes(),
        private_key=certs.client_key.read_bytes() if client_cert else None,
        certificate_chain=certs.client_cert.read_bytes() if client_cert else None,
    )
    return gateway_pb2_grpc.GatewayStub(grpc.secure_channel(weir.address, credentials))


def test_pyzeebe_with_tls_and_oauth_runs_a_workflow(
    secured: WeirProcess, certs: Certificates, issuer: TokenIssuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certs.ca))  # pyzeebe's token request trusts our CA

    async def scenario() -> dict:
        channel = create_oauth2_client_credentials_channel(
            grpc_address=secured.address,
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
            authorization_server=issuer.token_url,
            audience=AUDIENCE,
            channel_credentials=grpc.ssl_channel_credentials(root_certificates=certs.ca.read_bytes()),
        )
        client, worker = ZeebeClient(channel), ZeebeWorker(channel)
        await client.deploy_resource(str(BPMN / "one-task.bpmn"))

        @worker.task(task_type="test")
        async def handler(n: int) -> dict:
            return {"seen": n}

        work = asyncio.create_task(worker.work())
        try:
            result = await client.run_process_with_result("one-task", {"n": 7}, timeout=10_000)
        finally:
            await worker.stop()
            work.cancel()
        await channel.close()
        return result.variables

    before = len(issuer.requests)
    assert asyncio.run(scenario()) == {"n": 7, "seen": 7}
    fetched = issuer.requests[before:]
    assert fetched and fetched[0]["client_id"] == CLIENT_ID and fetched[0]["audience"] == AUDIENCE


def _refusal(stub: gateway_pb2_grpc.GatewayStub, metadata: list[tuple[str, str]]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        stub.Topology(pb.TopologyRequest(), metadata=metadata, timeout=10)
    return info.value


def test_calls_without_valid_credentials_are_unauthenticated(
    secured: WeirProcess, certs: Certificates, issuer: TokenIssuer
) -> None:
    stub = _stub(secured, certs)
    bearer = lambda token: [("authorization", f"Bearer {token}")]  # noqa: E731
    cases = {
        "absent": ([], "requires credentials"),
        "not a JWT": (bearer("not-a-jwt"), "not a JWT"),
        "expired": (bearer(issuer.token(audience=AUDIENCE, lifetime_s=-120)), "expired at"),
        "wrong audience": (bearer(issuer.token(audience="someone-else")), f"ZEEBE_TOKEN_AUDIENCE={AUDIENCE}"),
        "wrong issuer": (bearer(issuer.token(audience=AUDIENCE, issuer="https://evil.example/")), "issued by"),
        "forged": (bearer(issuer.token(audience=AUDIENCE, key=_key())), "signature"),
        "unknown key": (bearer(issuer.token(audience=AUDIENCE, key=_key(), key_id="rotated")), "not in the"),
        "wrong password": (
            [("authorization", "Basic " + base64.b64encode(f"{USER}:nope".encode()).decode())],
            "wrong user name or password",
        ),
        "other scheme": ([("authorization", "Digest abc")], "not accepted"),
    }
    for name, (metadata, text) in cases.items():
        error = _refusal(stub, metadata)
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, name
        assert text in (error.details() or ""), (name, error.details())

    # Streaming calls are refused the same way.
    request = pb.ActivateJobsRequest(type="test", worker="w", timeout=1000, maxJobsToActivate=1, requestTimeout=100)
    with pytest.raises(grpc.RpcError) as info:
        list(stub.ActivateJobs(request, timeout=10))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED

    # Valid credentials of either kind pass; the health service needs none.
    ok = stub.Topology(pb.TopologyRequest(), metadata=bearer(issuer.token(audience=AUDIENCE)), timeout=10)
    assert ok.partitionsCount == 1
    basic = [("authorization", "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())]
    assert stub.Topology(pb.TopologyRequest(), metadata=basic, timeout=10).partitionsCount == 1
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    channel = grpc.secure_channel(secured.address, grpc.ssl_channel_credentials(certs.ca.read_bytes()))
    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert health.status == health_pb2.HealthCheckResponse.SERVING


def test_a_plaintext_client_cannot_use_the_tls_port(secured: WeirProcess) -> None:
    stub = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(secured.address))
    with pytest.raises(grpc.RpcError) as info:
        stub.Topology(pb.TopologyRequest(), timeout=5)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE


def test_mtls_refuses_clients_without_a_certificate(tmp_path: Path, certs: Certificates, issuer: TokenIssuer) -> None:
    """Client CA set: the TLS handshake needs a client certificate; the JWKS comes from a file here."""
    env = {
        **_tls_env(certs),
        "WEIR_GATEWAY_SECURITY_TLS_CLIENT_CA_PATH": str(certs.ca),
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "oauth",
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_JWKS_PATH": str(issuer.write_jwks(tmp_path / "jwks.json")),
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_AUDIENCE": AUDIENCE,
    }
    w = WeirProcess(tmp_path / "data", env=env).start()
    try:
        token = [("authorization", f"Bearer {issuer.token(audience=AUDIENCE)}")]
        with pytest.raises(grpc.RpcError) as info:
            _stub(w, certs).Topology(pb.TopologyRequest(), metadata=token, timeout=5)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE  # the handshake fails: no call is made
        with_cert = _stub(w, certs, client_cert=True)
        assert with_cert.Topology(pb.TopologyRequest(), metadata=token, timeout=10).partitionsCount == 1
        assert _refusal(with_cert, []).code() == grpc.StatusCode.UNAUTHENTICATED  # a certificate is not a token
    finally:
        w.stop()


def test_bad_security_settings_stop_start_up_with_a_message(tmp_path: Path) -> None:
    w = WeirProcess(
        tmp_path / "data",
        env={
            "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "oauth",
            "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_JWKS_PATH": str(tmp_path / "missing.json"),
            "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_AUDIENCE": AUDIENCE,
        },
    ).start(wait=False)
    assert w.proc is not None
    assert w.proc.wait(timeout=60) != 0
    assert "cannot read the JWKS file" in w.log()


# -- zbctl and zeebe-node --------------------------------------------------------------------------------------


def _zbctl(weir: WeirProcess, certs: Certificates, issuer: TokenIssuer, *args: str, secret: str = CLIENT_SECRET):
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ZEEBE_")},
        "SSL_CERT_FILE": str(certs.ca),  # the Go client's token request trusts our CA
        "HOME": str(certs.directory),  # zbctl caches tokens under $HOME/.camunda
    }
    flags = [
        "--address",
        weir.address,
        "--certPath",
        str(certs.ca),
        "--clientId",
        CLIENT_ID,
        "--clientSecret",
        secret,
        "--authzUrl",
        issuer.token_url,
        "--audience",
        AUDIENCE,
    ]
    return subprocess.run([str(ZBCTL), *args, *flags], capture_output=True, text=True, env=env, timeout=60)


@needs_node_clients
def test_zbctl_with_tls_and_oauth(secured: WeirProcess, certs: Certificates, issuer: TokenIssuer) -> None:
    before = len(issuer.requests)
    deployed = _zbctl(secured, certs, issuer, "deploy", "resource", str(BPMN / "one-task.bpmn"))
    assert deployed.returncode == 0, deployed.stderr
    created = _zbctl(secured, certs, issuer, "create", "instance", "one-task", "--variables", '{"n": 1}')
    assert created.returncode == 0, created.stderr
    instance = json.loads(created.stdout)["processInstanceKey"]
    activated = _zbctl(secured, certs, issuer, "activate", "jobs", "test", "--maxJobsToActivate", "50")
    assert activated.returncode == 0, activated.stderr
    mine = [j for j in json.loads(activated.stdout)["jobs"] if j["processInstanceKey"] == instance]
    assert len(mine) == 1
    completed = _zbctl(secured, certs, issuer, "complete", "job", mine[0]["key"])
    assert completed.returncode == 0, completed.stderr
    assert any(r.get("client_id") == CLIENT_ID for r in issuer.requests[before:])  # it fetched its own token

    # The same settings from ZEEBE_* variables alone.
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ZEEBE_")},
        "SSL_CERT_FILE": str(certs.ca),
        "HOME": str(certs.directory),
        "ZEEBE_ADDRESS": secured.address,
        "ZEEBE_CA_CERTIFICATE_PATH": str(certs.ca),
        "ZEEBE_CLIENT_ID": CLIENT_ID,
        "ZEEBE_CLIENT_SECRET": CLIENT_SECRET,
        "ZEEBE_AUTHORIZATION_SERVER_URL": issuer.token_url,
        "ZEEBE_TOKEN_AUDIENCE": AUDIENCE,
    }
    status = subprocess.run([str(ZBCTL), "status"], capture_output=True, text=True, env=env, timeout=60)
    assert status.returncode == 0 and "Partition 1 : Leader, Healthy" in status.stdout, status.stderr

    # zbctl without credentials reaches the gateway over TLS and is turned away.
    env = {**os.environ, "ZEEBE_ADDRESS": secured.address, "ZEEBE_CA_CERTIFICATE_PATH": str(certs.ca)}
    env = {k: v for k, v in env.items() if k not in ("ZEEBE_INSECURE_CONNECTION", "ZEEBE_CLIENT_ID")}
    anonymous = subprocess.run([str(ZBCTL), "status"], capture_output=True, text=True, env=env, timeout=60)
    assert anonymous.returncode != 0 and "Unauthenticated" in anonymous.stderr, anonymous.stderr


NODE_SCRIPT = r"""
const fs = require('fs');
const { ZBClient } = require('zeebe-node');
(async () => {
  // 'env': everything from ZEEBE_* variables, as a deployed worker would be configured.
  const options = process.env.WEIR_AUTH === 'env' ? { retry: false, loglevel: 'NONE' } : {
    retry: false, loglevel: 'NONE', useTLS: true,
    customSSL: { rootCerts: fs.readFileSync(process.env.WEIR_CA) },
  };
  if (process.env.WEIR_AUTH === 'oauth') {
    options.oAuth = {
      url: process.env.WEIR_TOKEN_URL, audience: process.env.WEIR_AUDIENCE, clientId: process.env.WEIR_CLIENT_ID,
      clientSecret: process.env.WEIR_CLIENT_SECRET, cacheOnDisk: false,
    };
  } else if (process.env.WEIR_AUTH === 'basic') {
    options.basicAuth = { username: process.env.WEIR_USER, password: process.env.WEIR_PASSWORD };
  }
  const zbc = new ZBClient(process.env.WEIR_ADDRESS, options);
  try {
    const topology = await zbc.topology();
    await zbc.deployResource({ processFilename: process.env.WEIR_BPMN });
    const worker = zbc.createWorker({
      taskType: 'test', taskHandler: (job) => job.complete({ fromNode: job.variables.n + 1 }), loglevel: 'NONE',
    });
    const result = await zbc.createProcessInstanceWithResult({
      bpmnProcessId: 'one-task', variables: { n: 41 }, requestTimeout: 10000,
    });
    await worker.close();
    console.log(JSON.stringify({ partitions: topology.partitionsCount, variables: result.variables }));
  } catch (e) {
    console.log(JSON.stringify({ code: e.code, message: e.details || e.message }));
  }
  await zbc.close();
})().catch((e) => { console.error(e); process.exit(1); });
"""


def _node(weir: WeirProcess, certs: Certificates, issuer: TokenIssuer, tmp_path: Path, **env: str) -> dict:
    node = shutil.which("node")
    assert node is not None, "node is required for the zeebe-node client test"
    script = tmp_path / "client.js"
    script.write_text(NODE_SCRIPT)
    run_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ZEEBE_")},
        "NODE_PATH": str(CLIENTS),
        "WEIR_ADDRESS": weir.address,
        "WEIR_CA": str(certs.ca),
        "WEIR_BPMN": str(BPMN / "one-task.bpmn"),
        "WEIR_TOKEN_URL": issuer.token_url,
        "WEIR_AUDIENCE": AUDIENCE,
        "WEIR_CLIENT_ID": CLIENT_ID,
        "WEIR_CLIENT_SECRET": CLIENT_SECRET,
        "WEIR_USER": USER,
        "WEIR_PASSWORD": PASSWORD,
        "ZEEBE_NODE_LOG_LEVEL": "NONE",
        **env,
    }
    out = subprocess.run([node, str(script)], capture_output=True, text=True, env=run_env, timeout=90)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_node_clients
def test_zeebe_node_with_tls_and_oauth(
    secured: WeirProcess, certs: Certificates, issuer: TokenIssuer, tmp_path: Path
) -> None:
    expected = {"partitions": 1, "variables": {"n": 41, "fromNode": 42}}
    assert _node(secured, certs, issuer, tmp_path, WEIR_AUTH="oauth") == expected
    assert _node(secured, certs, issuer, tmp_path, WEIR_AUTH="basic") == expected
    from_env = {
        "WEIR_AUTH": "env",
        "ZEEBE_CLIENT_ID": CLIENT_ID,
        "ZEEBE_CLIENT_SECRET": CLIENT_SECRET,
        "ZEEBE_AUTHORIZATION_SERVER_URL": issuer.token_url,
        "ZEEBE_TOKEN_AUDIENCE": AUDIENCE,
        "ZEEBE_CLIENT_SSL_ROOT_CERTS_PATH": str(certs.ca),  # zeebe-node 8.3's name for the CA file
        "ZEEBE_TOKEN_CACHE_DIR": str(tmp_path / "tokens"),
    }
    assert _node(secured, certs, issuer, tmp_path, **from_env) == expected
    refused = _node(secured, certs, issuer, tmp_path, WEIR_AUTH="none")
    assert refused["code"] == grpc.StatusCode.UNAUTHENTICATED.value[0], refused
    assert "requires credentials" in refused["message"]


def _weir_cli(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ZEEBE_")}
    return subprocess.run(
        [sys.executable, "-m", "client.cli", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env={**clean, **(env or {})},
        cwd=REPO,
        timeout=60,
    )


def test_weir_client_commands_use_tls_oauth_and_basic_auth(
    secured: WeirProcess, certs: Certificates, issuer: TokenIssuer
) -> None:
    tls = ["--address", secured.address, "--ca-cert", str(certs.ca)]
    oauth = ["--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET, "--authz-url", issuer.token_url]
    status = _weir_cli("status", *tls, *oauth, "--audience", AUDIENCE)
    assert status.returncode == 0 and "Partition 1 : Leader, Healthy" in status.stdout, status.stderr
    by_env = _weir_cli(
        "status",
        "--address",
        secured.address,
        env={"ZEEBE_CA_CERTIFICATE_PATH": str(certs.ca), "ZEEBE_BASIC_AUTH_USERNAME": USER},
    )
    assert by_env.returncode == 1 and "UNAUTHENTICATED" in by_env.stderr  # no password given
    basic = _weir_cli("status", *tls, "--username", USER, "--password", PASSWORD)
    assert basic.returncode == 0, basic.stderr
    wrong_audience = _weir_cli("status", *tls, *oauth, "--audience", "elsewhere")
    assert wrong_audience.returncode == 1 and f"ZEEBE_TOKEN_AUDIENCE={AUDIENCE}" in wrong_audience.stderr


def test_hash_password_makes_a_users_file_line() -> None:
    out = _weir_cli("hash-password", "bob", stdin="hunter2\n")
    assert out.returncode == 0, out.stderr
    user, _, stored = out.stdout.strip().partition(":")
    assert user == "bob" and verify_password("hunter2", stored) and not verify_password("hunter3", stored)


def test_the_gateway_bounds_concurrent_streams_per_connection(tmp_path: Path) -> None:
    """With maxConcurrentStreams 1, a second call on a connection waits for the first; another connection does not."""
    import threading
    import time

    w = WeirProcess(tmp_path / "data", env={"WEIR_GATEWAY_MAX_CONCURRENT_STREAMS": "1"}).start()
    own_pool = [("grpc.use_local_subchannel_pool", 1)]
    try:
        busy = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(w.address, options=own_pool))
        other = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(w.address, options=own_pool))
        busy.Topology(pb.TopologyRequest(), timeout=10)  # connected
        poll = pb.ActivateJobsRequest(
            type="nothing", worker="w", timeout=1000, maxJobsToActivate=1, requestTimeout=4000
        )
        poller = threading.Thread(target=lambda: list(busy.ActivateJobs(poll, timeout=10)))
        poller.start()
        time.sleep(0.3)  # the long poll holds the connection's only stream
        started = time.monotonic()
        other.Topology(pb.TopologyRequest(), timeout=10)
        assert time.monotonic() - started < 2.0  # not held up by the other connection
        started = time.monotonic()
        busy.Topology(pb.TopologyRequest(), timeout=10)
        assert time.monotonic() - started > 2.5  # queued behind the long poll
        poller.join()
    finally:
        w.stop()


# -- the REST API: the same TLS and credentials ------------------------------------------------------------------


def _rest(
    weir: WeirProcess,
    certs: Certificates,
    path: str,
    *,
    method: str = "GET",
    authorization: str | None = None,
    body: dict | None = None,
) -> tuple[int, dict, dict]:
    """(status, JSON body, headers) of one HTTPS call to the REST API, trusting the test CA."""
    import ssl

    import aiohttp

    async def go() -> tuple[int, dict, dict]:
        context = ssl.create_default_context(cafile=str(certs.ca))
        headers = {"Authorization": authorization} if authorization else {}
        async with aiohttp.ClientSession() as session:
            url = f"https://127.0.0.1:{weir.rest_port}{path}"
            async with session.request(method, url, headers=headers, ssl=context, json=body) as response:
                return response.status, await response.json(content_type=None), dict(response.headers)

    return asyncio.run(go())


def test_rest_api_requires_credentials_over_tls(secured: WeirProcess, certs: Certificates) -> None:
    status, body, headers = _rest(secured, certs, "/v2/topology")
    assert status == 401 and body["title"] == "UNAUTHORIZED" and "requires credentials" in body["detail"]
    assert headers["Content-Type"].startswith("application/problem+json")
    assert "Bearer" in headers["WWW-Authenticate"] and "Basic" in headers["WWW-Authenticate"]
    wrong = "Basic " + base64.b64encode(f"{USER}:wrong".encode()).decode()
    assert _rest(secured, certs, "/v2/topology", authorization=wrong)[0] == 401
    garbage = _rest(secured, certs, "/v2/process-instances/1/cancellation", method="POST", authorization="Bearer x.y")
    assert garbage[0] == 401, "a bad token is refused before the request is looked at"
    # The OpenAPI document is open, and says how to authenticate.
    status, doc, _ = _rest(secured, certs, "/v2/openapi.json")
    assert status == 200 and set(doc["components"]["securitySchemes"]) == {"basicAuth", "bearerAuth"}


def test_rest_api_accepts_basic_credentials_and_bearer_tokens(
    secured: WeirProcess, certs: Certificates, issuer: TokenIssuer
) -> None:
    basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    status, topology, _ = _rest(secured, certs, "/v2/topology", authorization=basic)
    assert status == 200 and topology["partitionsCount"] == 1
    bearer = "Bearer " + issuer.token(audience=AUDIENCE)
    status, topology, _ = _rest(secured, certs, "/v2/topology", authorization=bearer)
    assert status == 200 and topology["brokers"][0]["partitions"][0]["role"] == "leader"
    expired = "Bearer " + issuer.token(audience=AUDIENCE, lifetime_s=-120)
    status, body, _ = _rest(secured, certs, "/v2/topology", authorization=expired)
    assert status == 401 and "expired" in body["detail"]


# -- basic-auth guessing, malformed tokens, huge echoed inputs ----------------------------------------------------


def _basic(user: str, password: str) -> list[tuple[str, str]]:
    return [("authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())]


def test_basic_auth_failures_are_limited_per_client_address(tmp_path: Path, certs: Certificates) -> None:
    """Over the limit, new credentials from the address are refused without a check; remembered ones still pass.
    Unknown users and wrong passwords are refused alike."""
    users = tmp_path / "users"
    users.write_text(f"{USER}:{hash_password(PASSWORD)}\nbob:{hash_password('bobs password')}\n")
    env = {
        **_tls_env(certs),
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "basic",
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_BASIC_USERS_FILE": str(users),
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_BASIC_FAILURES_PER_MINUTE": "4",
    }
    w = WeirProcess(tmp_path / "data", env=env).start()
    try:
        stub = _stub(w, certs)
        assert stub.Topology(pb.TopologyRequest(), metadata=_basic(USER, PASSWORD), timeout=10).partitionsCount == 1
        wrong, unknown = _refusal(stub, _basic(USER, "guess")), _refusal(stub, _basic("mallory", "guess"))
        assert wrong.details() == f"wrong user name or password for '{USER}'"
        assert unknown.details() == "wrong user name or password for 'mallory'"
        for n in range(2):
            assert "wrong user name or password" in (_refusal(stub, _basic(USER, f"guess {n}")).details() or "")
        over = _refusal(stub, _basic(USER, "one more"))
        assert over.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "too many failed sign-ins from 127.0.0.1" in (over.details() or ""), over.details()
        # Right credentials not seen before wait too (checking them would be checking a guess) …
        assert "too many failed sign-ins" in (_refusal(stub, _basic("bob", "bobs password")).details() or "")
        # … while those already checked pass (the REST API keeps counts of its own).
        assert stub.Topology(pb.TopologyRequest(), metadata=_basic(USER, PASSWORD), timeout=10).partitionsCount == 1
        status, _, _ = _rest(w, certs, "/v2/topology", authorization=_basic(USER, PASSWORD)[0][1])
        assert status == 200
    finally:
        w.stop()


def _jwt(header: object, claims: object) -> str:
    """A token of any shape, with a signature that verifies nowhere."""
    part = lambda value: base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{part(header)}.{part(claims)}.c2lnbmF0dXJl"


def test_malformed_tokens_are_unauthenticated_not_internal_errors(
    secured: WeirProcess, certs: Certificates, issuer: TokenIssuer
) -> None:
    claims = {"aud": AUDIENCE, "exp": 4_000_000_000, "iss": issuer.issuer}
    tokens = {
        "kid a list": _jwt({"alg": "RS256", "kid": ["a"]}, claims),
        "kid a number": _jwt({"alg": "RS256", "kid": 7}, claims),
        "kid an object": _jwt({"alg": "RS256", "kid": {"a": 1}}, claims),
        "alg a number": _jwt({"alg": 256, "kid": issuer.key_id}, claims),
        "alg missing": _jwt({"kid": issuer.key_id}, claims),
        "header a list": _jwt(["RS256"], claims),
        "claims a list": _jwt({"alg": "RS256", "kid": issuer.key_id}, [1]),
        "exp a string": _jwt({"alg": "RS256", "kid": issuer.key_id}, {**claims, "exp": "never"}),
        "exp huge": _jwt({"alg": "RS256", "kid": issuer.key_id}, {**claims, "exp": 10**400}),
        "header not JSON": "bm90IGpzb24." + _jwt({}, claims).split(".", 1)[1],
        "huge kid": _jwt({"alg": "RS256", "kid": "k" * 4000}, claims),  # (under gRPC's 8 KiB metadata limit)
    }
    stub = _stub(secured, certs)
    for name, token in tokens.items():
        error = _refusal(stub, [("authorization", f"Bearer {token}")])
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, (name, error.code(), error.details())
        assert len(error.details() or "") < 1000, name
        status, body, _ = _rest(secured, certs, "/v2/topology", authorization=f"Bearer {token}")
        assert status == 401 and len(body["detail"]) < 1000, (name, status, body)


def test_errors_echo_huge_inputs_shortened(secured: WeirProcess, certs: Certificates) -> None:
    """A 3 MB process id or tenant id comes back as its first characters and its length, within metadata limits."""
    stub, huge = _stub(secured, certs), "p" * 3_000_000
    calls = {
        grpc.StatusCode.NOT_FOUND: lambda: stub.CreateProcessInstance(
            pb.CreateProcessInstanceRequest(bpmnProcessId=huge), metadata=_basic(USER, PASSWORD), timeout=30
        ),
        grpc.StatusCode.INVALID_ARGUMENT: lambda: stub.PublishMessage(
            pb.PublishMessageRequest(name="m", tenantId=huge), metadata=_basic(USER, PASSWORD), timeout=30
        ),
    }
    for code, call in calls.items():
        with pytest.raises(grpc.RpcError) as info:
            call()
        assert info.value.code() == code, (code, info.value.code(), (info.value.details() or "")[:300])
        details = info.value.details() or ""
        assert "p" * 100 + "… (3000000 characters)" in details and len(details) < 1000, details
    authorization = _basic(USER, PASSWORD)[0][1]
    body = {"processDefinitionId": "p" * 1_000_000}
    status, problem, _ = _rest(
        secured, certs, "/v2/process-instances", method="POST", authorization=authorization, body=body
    )
    assert status == 404 and "… (1000000 characters)" in problem["detail"] and len(problem["detail"]) < 1000, (
        status,
        str(problem)[:300],
    )
