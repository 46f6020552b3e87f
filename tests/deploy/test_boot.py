"""Boot the rendered overlays' pods as local processes and run a workflow through their gateway.

The brokers and the gateway get the command line, environment and configuration file the manifests give them
(see `local_pods`); only addresses, ports and folders are made local. A workflow then goes through the gateway
with pyzeebe: deploy, a worker, create-with-result.
"""

from __future__ import annotations

import asyncio
import importlib.util
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from pyzeebe import ZeebeClient, ZeebeWorker, create_insecure_channel, create_oauth2_client_credentials_channel
from pyzeebe.errors import ProcessDefinitionNotFoundError
from pyzeebe.grpc_internals.types import TopologyResponse

from tests.deploy.local_pods import LocalCluster
from tests.deploy.manifests import Manifests, container, container_ports, render
from tests.harness import BPMN, eventually
from tests.security import Certificates, TokenIssuer, make_certificates

# Multi-broker clusters (Raft between brokers) live in broker.cluster.node.
CLUSTER_MODE_AVAILABLE = importlib.util.find_spec("broker.cluster.node") is not None

ELASTICSEARCH_HOST = "elasticsearch.elastic.svc.cluster.local:9200"
# The production overlay's authorization server (a Keycloak realm).
AUTHORIZATION_HOST = "keycloak.identity.svc.cluster.local:8443"


def monitoring_port(workload: dict) -> int:
    return container_ports(workload["spec"]["template"]["spec"]["containers"][0])["monitoring"]


def grpc_port(cluster: LocalCluster) -> int:
    return cluster.gateway.local_port(
        container_ports(cluster.manifests.gateway["spec"]["template"]["spec"]["containers"][0])["grpc"]
    )


@pytest.fixture
def started() -> Iterator[list[LocalCluster]]:
    """Clusters started by a test, stopped (and checked to stop cleanly) at its end."""
    clusters: list[LocalCluster] = []
    yield clusters
    for cluster in clusters:
        cluster.stop()


def boot(cluster: LocalCluster, timeout: float) -> None:
    broker_monitoring = monitoring_port(cluster.manifests.broker_set)
    for broker in cluster.brokers:
        cluster.launch(broker)
    cluster.launch(cluster.gateway)
    for broker in cluster.brokers:
        broker.wait_for(broker_monitoring, "/startup", timeout)
        broker.wait_for(broker_monitoring, "/ready", timeout)
        assert broker.probe(broker_monitoring, "/health")[0] == 200
    cluster.gateway.wait_for(monitoring_port(cluster.manifests.gateway), "/ready", timeout)


def run_workflow(
    address: str, brokers: int, connect: Callable[[str], grpc.aio.Channel] | None = None
) -> tuple[dict, TopologyResponse]:
    """The variables of one-task created with result, and the topology once it lists ``brokers`` brokers.

    A ready gateway knows every partition's leader; brokers leading nothing may join its topology later. As in
    Zeebe, a deployment reaches the other partitions after its response: creation retries NOT_FOUND briefly.
    ``connect`` makes the client's channel (plaintext by default).
    """

    async def scenario() -> tuple[dict, TopologyResponse]:
        channel = (connect or (lambda a: create_insecure_channel(grpc_address=a)))(address)
        client, worker = ZeebeClient(channel), ZeebeWorker(channel)

        @worker.task(task_type="test")  # type: ignore[arg-type]
        async def double(n: int) -> dict[str, int]:
            return {"doubled": n * 2}

        deadline = asyncio.get_running_loop().time() + 30
        topology = await client.topology()
        while len(topology.brokers) < brokers and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.2)
            topology = await client.topology()
        await client.deploy_resource(str(BPMN / "one-task.bpmn"))
        work = asyncio.create_task(worker.work())
        try:
            while True:
                try:
                    result = await asyncio.wait_for(client.run_process_with_result("one-task", {"n": 21}), 30)
                    break
                except ProcessDefinitionNotFoundError:
                    if asyncio.get_running_loop().time() > deadline:
                        raise
                    await asyncio.sleep(0.1)
        finally:
            await worker.stop()
            work.cancel()
        return dict(result.variables), topology

    return asyncio.run(scenario())


def assert_topology(topology: TopologyResponse, cluster: LocalCluster) -> None:
    """Every pod joined as the node its ordinal names, with the partitions and replication of the overlay."""
    env = cluster.brokers[0].view.env
    assert sorted(b.node_id for b in topology.brokers) == list(range(len(cluster.brokers)))
    assert topology.cluster_size == int(env["WEIR_BROKER_CLUSTER_CLUSTER_SIZE"])
    assert topology.partitions_count == int(env["WEIR_BROKER_CLUSTER_PARTITIONS_COUNT"])
    assert topology.replication_factor == int(env["WEIR_BROKER_CLUSTER_REPLICATION_FACTOR"])


def assert_stops_cleanly(cluster: LocalCluster) -> None:
    codes = cluster.stop()
    logs = "\n".join(f"--- {p.view.name} ---\n{p.log()}" for p in [*cluster.brokers, cluster.gateway])
    assert all(code == 0 for code in codes.values()), f"not stopped within the grace period: {codes}\n{logs}"


@pytest.mark.timeout(120)
def test_dev_overlay_boots_and_runs_a_workflow(tmp_path: Path, started: list[LocalCluster]) -> None:
    manifests = render("dev")
    cluster = LocalCluster(manifests, tmp_path)
    started.append(cluster)
    boot(cluster, timeout=60)
    variables, topology = run_workflow(f"127.0.0.1:{grpc_port(cluster)}", len(cluster.brokers))
    assert variables == {"n": 21, "doubled": 42}
    assert_topology(topology, cluster)
    assert list((tmp_path / "weir-broker-0" / "mounts" / "var" / "lib" / "weir" / "partitions").iterdir())
    assert_stops_cleanly(cluster)


@pytest.mark.skipif(not CLUSTER_MODE_AVAILABLE, reason="cluster mode (broker.cluster.node) is not there yet")
@pytest.mark.timeout(180)
def test_production_overlay_boots_three_brokers_and_runs_a_workflow(
    tmp_path: Path, started: list[LocalCluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With TLS and OAuth on the gateway and TLS plus the secret on the command API, as production has them."""
    from tests.search_server import NoidaServer

    certs = make_certificates(tmp_path / "certs")
    search = NoidaServer(tmp_path / "search")
    search.start()
    try:
        with TokenIssuer(certs, {"worker-app": "worker-secret"}, path="/realms/camunda-platform") as issuer:
            manifests = render("production")
            trust_test_ca_for_the_jwks(manifests)
            cluster = LocalCluster(
                manifests,
                tmp_path / "pods",
                # Made by hand in production, as its kustomization.yaml says.
                operator_secrets=production_secrets(certs),
                external_addresses={
                    ELASTICSEARCH_HOST: f"127.0.0.1:{search.port}",
                    AUTHORIZATION_HOST: f"127.0.0.1:{issuer.port}",
                },
            )
            started.append(cluster)
            assert len(cluster.brokers) == 3
            boot(cluster, timeout=120)
            audience = cluster.gateway.view.env["WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_AUDIENCE"]
            monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certs.ca))  # the client's token request

            def connect(address: str) -> grpc.aio.Channel:
                return create_oauth2_client_credentials_channel(
                    grpc_address=address,
                    client_id="worker-app",
                    client_secret="worker-secret",
                    authorization_server=issuer.token_url,
                    audience=audience,
                    channel_credentials=grpc.ssl_channel_credentials(root_certificates=certs.ca.read_bytes()),
                )

            address = f"127.0.0.1:{grpc_port(cluster)}"
            variables, topology = run_workflow(address, len(cluster.brokers), connect)
            assert variables == {"n": 21, "doubled": 42}
            assert_topology(topology, cluster)
            assert issuer.requests, "the client got its token from the authorization server"
            assert call_without_token(address, certs) == grpc.StatusCode.UNAUTHENTICATED
            prefix = cluster.brokers[0].view.env["WEIR_BROKER_EXPORTERS_ELASTICSEARCH_ARGS_INDEX_PREFIX"]
            eventually(lambda: search.count(f"{prefix}*") > 0, timeout=30, what="records in Elasticsearch")
            assert_stops_cleanly(cluster)
    finally:
        search.stop()


def production_secrets(certs: Certificates) -> dict[str, dict[str, str]]:
    """The Secrets production's kustomization.yaml asks the operator to create, with test certificates.

    One certificate (names 127.0.0.1, where the pods run here) serves the gateway and every broker.
    """
    command_tls = {
        "tls.crt": certs.server_cert.read_text(),
        "tls.key": certs.server_key.read_text(),
        "ca.crt": certs.ca.read_text(),
    }
    return {
        "weir-raft": {"raft-password": secrets.token_urlsafe(32)},
        "weir-command-api": {"secret": secrets.token_urlsafe(32)},
        "weir-command-tls": command_tls,
        "weir-gateway-tls": command_tls,
    }


def trust_test_ca_for_the_jwks(manifests: Manifests) -> None:
    """A real authorization server has a publicly trusted certificate; the stand-in's is from the test CA.

    The CA travels in the gateway's TLS Secret (as cert-manager's ca.crt would).
    """
    (env_from,) = [e for e in container(manifests.gateway, "gateway")["envFrom"] if "configMapRef" in e]
    config_map = manifests.one("ConfigMap", env_from["configMapRef"]["name"])
    tls_dir = config_map["data"]["WEIR_GATEWAY_SECURITY_TLS_CERTIFICATE_CHAIN_PATH"].rpartition("/")[0]
    config_map["data"]["WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_JWKS_CA_PATH"] = f"{tls_dir}/ca.crt"


def call_without_token(address: str, certs: Certificates) -> grpc.StatusCode:
    from pyzeebe.proto import gateway_pb2, gateway_pb2_grpc

    credentials = grpc.ssl_channel_credentials(root_certificates=certs.ca.read_bytes())
    with grpc.secure_channel(address, credentials) as channel:
        try:
            gateway_pb2_grpc.GatewayStub(channel).Topology(gateway_pb2.TopologyRequest(), timeout=10)
        except grpc.RpcError as e:
            return e.code()
    return grpc.StatusCode.OK
