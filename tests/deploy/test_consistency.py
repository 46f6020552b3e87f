"""The manifests agree with each other and with Weir's configuration, in every rendering.

Each pod's configuration is what Weir itself would load from the pod's mounted weir.yaml and environment
(`broker.config.load`), so the checks compare ports, sizes and addresses with what the processes really use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker.config import ConfigError, load
from exporters import validate_exporter_configs
from tests.deploy.manifests import (
    RENDERINGS,
    Doc,
    Manifests,
    MissingReference,
    Peer,
    PodView,
    broker_dns_name,
    container,
    container_ports,
    labels_match,
    parse_containerfile,
    pod_names,
    pod_view,
    reachable_ports,
    render,
)

# Secrets the operator creates by hand in a rendering (as its kustomization.yaml says), with sample values.
OPERATOR_SECRETS: dict[str, dict[str, dict[str, str]]] = {
    "base": {},
    "dev": {},
    "production": {
        "weir-raft": {"raft-password": "a-password-made-by-the-operator"},
        "weir-command-api": {"secret": "a-secret-made-by-the-operator"},
        "weir-command-tls": {"tls.crt": "PEM", "tls.key": "PEM", "ca.crt": "PEM"},
        "weir-gateway-tls": {"tls.crt": "PEM", "tls.key": "PEM"},
    },
}

renderings = pytest.mark.parametrize("rendering", sorted(RENDERINGS))


def config_of(pod: PodView, tmp_path: Path) -> dict[str, Any]:
    """What Weir loads in this pod: the file named by --config (as mounted) plus the pod's environment."""
    config_path = pod.argv[pod.argv.index("--config") + 1]
    local = tmp_path / pod.name / "weir.yaml"
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_text(pod.files[config_path])
    return load(local, pod.env)


def broker_pods(rendering: str) -> tuple[Manifests, list[PodView]]:
    m = render(rendering)
    image = parse_containerfile()
    pods = [
        pod_view(m, m.broker_set, "broker", name, image, OPERATOR_SECRETS[rendering])
        for name in pod_names(m.broker_set)
    ]
    return m, pods


def gateway_pod(rendering: str) -> tuple[Manifests, PodView]:
    m = render(rendering)
    (name,) = pod_names(m.gateway)
    return m, pod_view(m, m.gateway, "gateway", name, parse_containerfile(), OPERATOR_SECRETS[rendering])


def probe_port(c: Doc, probe: str) -> tuple[str, int]:
    get = c[probe]["httpGet"]
    port = get["port"]
    return get["path"], container_ports(c)[port] if isinstance(port, str) else port


@renderings
def test_replicas_equal_cluster_size_and_node_ids_follow_ordinals(rendering: str, tmp_path: Path) -> None:
    m, pods = broker_pods(rendering)
    replicas = m.broker_set["spec"]["replicas"]
    assert len(pods) == replicas >= 1
    for ordinal, pod in enumerate(pods):
        cluster = config_of(pod, tmp_path)["broker"]["cluster"]
        assert cluster["clusterSize"] == replicas, f"{pod.name}: clusterSize differs from replicas"
        assert cluster["nodeId"] == ordinal, f"{pod.name} would run as node {cluster['nodeId']}"
        assert 1 <= cluster["replicationFactor"] <= replicas


@renderings
def test_initial_contact_points_list_every_broker_in_node_id_order(rendering: str, tmp_path: Path) -> None:
    m, pods = broker_pods(rendering)
    for pod in pods:
        broker = config_of(pod, tmp_path)["broker"]
        raft = broker["ports"]["raft"]
        expected = [f"{broker_dns_name(m, i)}:{raft}" for i in range(len(pods))]
        assert broker["cluster"]["initialContactPoints"] == expected


@renderings
def test_gateway_contact_points_cover_every_broker_command_api(rendering: str, tmp_path: Path) -> None:
    m, brokers = broker_pods(rendering)
    _, gateway = gateway_pod(rendering)
    command_ports = {config_of(b, tmp_path)["broker"]["ports"]["command"] for b in brokers}
    (command,) = command_ports
    points = config_of(gateway, tmp_path)["gateway"]["contactPoints"]
    assert sorted(points) == sorted(f"{broker_dns_name(m, i)}:{command}" for i in range(len(brokers)))


@renderings
def test_broker_ports_probes_and_services_agree_with_the_config(rendering: str, tmp_path: Path) -> None:
    m, pods = broker_pods(rendering)
    config = config_of(pods[0], tmp_path)["broker"]
    c = container(m.broker_set, "broker")
    ports = container_ports(c)
    assert ports["command"] == config["ports"]["command"]
    assert ports["monitoring"] == config["ports"]["monitoring"]
    partitions = config["cluster"]["partitionsCount"]
    raft_ports = sorted(v for k, v in ports.items() if k.startswith("raft-"))
    assert raft_ports == list(range(config["ports"]["raft"], config["ports"]["raft"] + len(raft_ports)))
    assert len(raft_ports) >= partitions, f"{partitions} partitions need {partitions} Raft ports"
    for probe, path in (
        ("startupProbe", "/startup"),
        ("readinessProbe", "/ready"),
        ("livenessProbe", "/health"),
    ):
        assert probe_port(c, probe) == (path, config["ports"]["monitoring"]), probe
    template = m.broker_set["spec"]["template"]["metadata"]
    assert template["annotations"]["prometheus.io/port"] == str(config["ports"]["monitoring"])
    service = m.one("Service", m.broker_set["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert labels_match(service["spec"]["selector"], template["labels"])
    for p in service["spec"]["ports"]:
        assert p["port"] == ports[p["targetPort"]], p
    assert {p["targetPort"] for p in service["spec"]["ports"]} == set(ports)


@renderings
def test_gateway_ports_probes_and_service_agree_with_the_config(rendering: str, tmp_path: Path) -> None:
    m, pod = gateway_pod(rendering)
    config = config_of(pod, tmp_path)["gateway"]
    c = container(m.gateway, "gateway")
    ports = container_ports(c)
    assert ports == {"grpc": config["port"], "http": config["rest"]["port"], "monitoring": config["monitoringPort"]}
    for probe, path in (
        ("startupProbe", "/startup"),
        ("readinessProbe", "/ready"),
        ("livenessProbe", "/health"),
    ):
        assert probe_port(c, probe) == (path, config["monitoringPort"]), probe
    template = m.gateway["spec"]["template"]["metadata"]
    assert template["annotations"]["prometheus.io/port"] == str(config["monitoringPort"])
    service = m.one("Service", "weir-gateway")
    assert labels_match(service["spec"]["selector"], template["labels"])
    broker_labels = m.broker_set["spec"]["template"]["metadata"]["labels"]
    assert not labels_match(service["spec"]["selector"], broker_labels)
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {
        "grpc": config["port"],
        "http": config["rest"]["port"],
        "monitoring": config["monitoringPort"],
    }
    for p in service["spec"]["ports"]:
        assert ports[p["targetPort"]] == p["port"]


@renderings
def test_pods_bind_all_interfaces_and_keep_data_on_the_volume(rendering: str, tmp_path: Path) -> None:
    _, pods = broker_pods(rendering)
    _, gateway = gateway_pod(rendering)
    broker = config_of(pods[0], tmp_path)["broker"]
    assert broker["host"] == "0.0.0.0"
    assert config_of(gateway, tmp_path)["gateway"]["host"] == "0.0.0.0"
    assert broker["embeddedGateway"] is False
    assert "--embedded-gateway" not in pods[0].argv
    claim = pods[0].mounts[broker["dataDir"]]
    assert "persistentVolumeClaim" in claim, f"dataDir {broker['dataDir']} is not the PVC mount"
    storage = claim["persistentVolumeClaim"]["spec"]["resources"]["requests"]["storage"]
    assert broker["minFreeDiskBytes"] < quantity(storage) / 2, "minFreeDiskBytes leaves no room on the volume"


@renderings
def test_pdb_selects_exactly_the_broker_pods(rendering: str) -> None:
    m = render(rendering)
    pdb = m.one("PodDisruptionBudget", "weir-broker")
    assert pdb["spec"]["maxUnavailable"] == 1
    selector = pdb["spec"]["selector"]["matchLabels"]
    assert labels_match(selector, m.broker_set["spec"]["template"]["metadata"]["labels"])
    assert not labels_match(selector, m.gateway["spec"]["template"]["metadata"]["labels"])


@renderings
def test_everything_runs_as_non_root_without_privileges(rendering: str) -> None:
    m = render(rendering)
    image_uid = int(parse_containerfile().user.split(":")[0])
    for workload in (m.broker_set, m.gateway):
        spec = workload["spec"]["template"]["spec"]
        pod_security = spec["securityContext"]
        assert pod_security["runAsNonRoot"] is True
        assert pod_security["runAsUser"] == image_uid != 0
        assert pod_security["seccompProfile"]["type"] == "RuntimeDefault"
        assert spec.get("hostNetwork") is not True and spec.get("hostPID") is not True
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc.get("privileged") is not True
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert sc["readOnlyRootFilesystem"] is True
            assert sc.get("runAsUser", image_uid) != 0
    assert m.broker_set["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == image_uid


@renderings
def test_brokers_are_a_parallel_statefulset_with_room_to_flush(rendering: str) -> None:
    m = render(rendering)
    spec = m.broker_set["spec"]
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] >= 60
    assert [t["metadata"]["name"] for t in spec["volumeClaimTemplates"]] == ["data"]
    anti = spec["template"]["spec"]["affinity"]["podAntiAffinity"]
    terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution") or [
        t["podAffinityTerm"] for t in anti["preferredDuringSchedulingIgnoredDuringExecution"]
    ]
    assert any(
        t["topologyKey"] == "kubernetes.io/hostname"
        and labels_match(t["labelSelector"]["matchLabels"], spec["template"]["metadata"]["labels"])
        for t in terms
    )


@renderings
def test_every_container_has_requests_and_limits_sized_for_one_core(rendering: str) -> None:
    m = render(rendering)
    for workload in (m.broker_set, m.gateway):
        for c in workload["spec"]["template"]["spec"]["containers"]:
            res = c["resources"]
            for what in ("cpu", "memory"):
                assert quantity(res["requests"][what]) <= quantity(res["limits"][what]), (c["name"], what)
    broker_cpu = quantity(container(m.broker_set, "broker")["resources"]["requests"]["cpu"])
    if rendering == "dev":
        assert broker_cpu < 1
    else:
        assert broker_cpu == 1, "the stream processor is one GIL-bound core: request exactly one"


@renderings
def test_every_reference_resolves_and_the_configuration_loads(rendering: str, tmp_path: Path) -> None:
    """ConfigMaps and Secrets named by the pods exist (or are documented as made by hand), and Weir accepts
    the resulting configuration, exporters included."""
    _, pods = broker_pods(rendering)
    for pod in pods:
        config = config_of(pod, tmp_path)
        validate_exporter_configs(config["broker"]["exporters"])
        if config["broker"]["cluster"]["clusterSize"] > 1:
            assert pod.env.get("WEIR_BROKER_CLUSTER_RAFT_PASSWORD"), "a cluster needs the Raft password"
    _, gateway = gateway_pod(rendering)
    config_of(gateway, tmp_path)
    # A Deployment's pod name can end in digits: the gateway must not take a node id from it.
    assert "WEIR_NODE_ID_FROM_HOSTNAME" not in gateway.env


@renderings
def test_service_links_are_off_as_weir_would_read_them_as_configuration(rendering: str, tmp_path: Path) -> None:
    """Kubernetes would set WEIR_GATEWAY_PORT=tcp://<ip>:26500 for the weir-gateway Service: a Weir variable."""
    m = render(rendering)
    for workload in (m.broker_set, m.gateway):
        assert workload["spec"]["template"]["spec"]["enableServiceLinks"] is False
        workload["spec"]["template"]["spec"]["enableServiceLinks"] = True
    _, pod = gateway_pod(rendering)
    linked = pod_view(m, m.gateway, "gateway", pod.name, parse_containerfile(), OPERATOR_SECRETS[rendering])
    assert linked.env["WEIR_GATEWAY_PORT"].startswith("tcp://")
    with pytest.raises(ConfigError, match=r"gateway\.port"):
        config_of(linked, tmp_path)


def test_production_needs_the_raft_secret_created_by_hand() -> None:
    m = render("production")
    assert m.get("Secret", "weir-raft") is None, "production must not ship the placeholder password"
    others = {name: data for name, data in OPERATOR_SECRETS["production"].items() if name != "weir-raft"}
    with pytest.raises(MissingReference, match="weir-raft"):
        pod_view(m, m.broker_set, "broker", "weir-broker-0", parse_containerfile(), others)


def test_production_runs_three_replicated_brokers_two_gateways_and_exports_to_elasticsearch(
    tmp_path: Path,
) -> None:
    m, pods = broker_pods("production")
    config = config_of(pods[0], tmp_path)["broker"]
    assert (len(pods), config["cluster"]["partitionsCount"], config["cluster"]["replicationFactor"]) == (
        3,
        3,
        3,
    )
    assert m.gateway["spec"]["replicas"] == 2
    anti = m.broker_set["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" in anti
    assert "preferredDuringSchedulingIgnoredDuringExecution" not in anti
    (exporter,) = config["exporters"].values()
    assert exporter["className"] == "exporters.elasticsearch.ElasticsearchExporter"
    assert {"url", "indexPrefix", "bulkSize", "bulkDelay"} <= set(exporter["args"])
    assert quantity(container(m.gateway, "gateway")["resources"]["requests"]["cpu"]) > quantity(
        container(render("dev").gateway, "gateway")["resources"]["requests"]["cpu"]
    )


def test_production_turns_on_tls_and_authentication_for_clients_and_the_command_api(tmp_path: Path) -> None:
    """Every path the configuration names is a file of a mounted Secret; the secrets themselves are made by hand."""
    _, pods = broker_pods("production")
    _, gateway = gateway_pod("production")
    gateway_config = config_of(gateway, tmp_path)
    security = gateway_config["gateway"]["security"]
    assert security["tls"]["enabled"] and security["authentication"]["methods"] == ["oauth"]
    oauth = security["authentication"]["oauth"]
    assert oauth["jwksUrl"].startswith("https://") and oauth["issuer"] and oauth["audience"]
    gateway_paths = [security["tls"]["certificateChainPath"], security["tls"]["privateKeyPath"]]
    for pod, config in [(gateway, gateway_config)] + [(b, config_of(b, tmp_path)) for b in pods]:
        command_api = config["commandApi"]
        assert command_api["secret"] == OPERATOR_SECRETS["production"]["weir-command-api"]["secret"], pod.name
        tls = command_api["tls"]
        assert tls["enabled"], pod.name
        paths = [tls["certificateChainPath"], tls["privateKeyPath"], tls["caPath"]]
        if pod is gateway:
            paths += gateway_paths
        for path in paths:
            assert path in pod.files, f"{pod.name}: {path} is not in a mounted Secret"
    for name in ("weir-command-api", "weir-command-tls", "weir-gateway-tls"):
        assert render("production").get("Secret", name) is None, f"production must not ship {name}"


def test_dev_stays_open_for_a_laptop_cluster(tmp_path: Path) -> None:
    _, pods = broker_pods("dev")
    _, gateway = gateway_pod("dev")
    config = config_of(gateway, tmp_path)
    assert config["gateway"]["security"]["authentication"]["methods"] == []
    assert config["commandApi"]["secret"] == "" and not config_of(pods[0], tmp_path)["commandApi"]["tls"]["enabled"]


def test_dev_runs_one_broker_with_one_partition(tmp_path: Path) -> None:
    _, pods = broker_pods("dev")
    assert len(pods) == 1
    cluster = config_of(pods[0], tmp_path)["broker"]["cluster"]
    assert (cluster["clusterSize"], cluster["partitionsCount"], cluster["replicationFactor"]) == (1, 1, 1)


PROMETHEUS = Peer({"app.kubernetes.io/name": "prometheus"}, "monitoring")


@renderings
def test_network_policy_lets_only_gateways_and_brokers_reach_the_command_api_and_only_brokers_raft(
    rendering: str, tmp_path: Path
) -> None:
    """Evaluated as Kubernetes would: which broker and gateway ports each kind of pod may open, in numbers that
    must equal the containers' ports and Weir's own configuration of them."""
    m, pods = broker_pods(rendering)
    _, gateway_view = gateway_pod(rendering)
    broker_config = config_of(pods[0], tmp_path)["broker"]
    gateway_config = config_of(gateway_view, tmp_path)["gateway"]
    namespace = m.broker_set["metadata"]["namespace"]
    namespace_labels = m.one("Namespace", namespace)["metadata"]["labels"]

    def in_weir(workload: Doc) -> Peer:
        return Peer(workload["spec"]["template"]["metadata"]["labels"], namespace, namespace_labels)

    command, monitoring = broker_config["ports"]["command"], broker_config["ports"]["monitoring"]
    raft_ports = {
        p for name, p in container_ports(container(m.broker_set, "broker")).items() if name.startswith("raft")
    }
    first_raft = broker_config["ports"]["raft"]
    partitions = broker_config["cluster"]["partitionsCount"]
    assert set(range(first_raft, first_raft + partitions)) <= raft_ports, "a partition's Raft port is not allowed"

    def broker_ports(source: Peer) -> set[int]:
        return reachable_ports(m, m.broker_set, "broker", source)

    def gateway_ports(source: Peer) -> set[int]:
        return reachable_ports(m, m.gateway, "gateway", source)

    assert broker_ports(in_weir(m.gateway)) == {command}
    assert broker_ports(in_weir(m.broker_set)) == {command} | raft_ports
    assert broker_ports(PROMETHEUS) == {monitoring}
    stranger = Peer({"app.kubernetes.io/name": "something-else"}, namespace, namespace_labels)
    elsewhere = Peer(m.gateway["spec"]["template"]["metadata"]["labels"], "default")  # a lookalike elsewhere
    assert broker_ports(stranger) == set()
    assert broker_ports(elsewhere) == set()
    assert broker_ports(Peer({"app.kubernetes.io/name": "prometheus"}, namespace, namespace_labels)) == set()
    client_ports = {gateway_config["port"], gateway_config["rest"]["port"]}
    assert gateway_ports(PROMETHEUS) == client_ports | {gateway_config["monitoringPort"]}
    for source in (stranger, elsewhere, in_weir(m.broker_set)):
        assert gateway_ports(source) == client_ports


@renderings
def test_brokers_take_the_admin_token_from_an_optional_secret(rendering: str, tmp_path: Path) -> None:
    """Without the Secret weir-admin the pods start and admin POSTs are refused (the monitoring port listens on
    0.0.0.0); with it, broker.adminToken is its value."""
    m, pods = broker_pods(rendering)
    assert config_of(pods[0], tmp_path / "without")["broker"]["adminToken"] == ""
    secrets = {**OPERATOR_SECRETS[rendering], "weir-admin": {"admin-token": "made-by-the-operator"}}
    pod = pod_view(m, m.broker_set, "broker", "weir-broker-0", parse_containerfile(), secrets)
    assert config_of(pod, tmp_path / "with")["broker"]["adminToken"] == "made-by-the-operator"


def quantity(text: str | int | float) -> float:
    """A Kubernetes resource quantity ("500m", "2Gi", "1") as a number."""
    value = str(text)
    suffixes = {
        "m": 1e-3,
        "k": 1e3,
        "M": 1e6,
        "G": 1e9,
        "T": 1e12,
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "Ti": 2**40,
    }
    for suffix in sorted(suffixes, key=len, reverse=True):
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * suffixes[suffix]
    return float(value)
