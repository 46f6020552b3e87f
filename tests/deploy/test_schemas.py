"""Every manifest, base and rendered overlays, against Kubernetes' own JSON schemas (bundled, offline).

Strict schemas refuse unknown fields, so a misspelt key (``publishNotReadyAddress``) fails here rather than
being silently dropped by the API server. Three API versions: the oldest supported, one between, the newest.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import kubernetes_validate
import pytest

from tests.deploy.manifests import RENDERINGS, SERVICE_MONITOR, Doc, labels_match, load_file, render

KUBERNETES_VERSIONS = ("1.28", "1.32", "1.37")


def first_port(workload: Doc) -> Doc:
    return workload["spec"]["template"]["spec"]["containers"][0]["ports"][0]


def validate(doc: Doc, version: str) -> None:
    kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("rendering", sorted(RENDERINGS))
def test_rendered_manifests_match_the_kubernetes_schemas(rendering: str, version: str) -> None:
    docs = render(rendering).docs
    kinds = {d["kind"] for d in docs}
    assert {"StatefulSet", "Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "NetworkPolicy"} <= kinds
    for doc in docs:
        try:
            validate(doc, version)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            name = f"{doc['kind']}/{doc['metadata']['name']}"
            pytest.fail(f"{rendering}: {name} invalid for Kubernetes {version}: {path}: {e.message}")


@pytest.mark.parametrize(
    ("breakage", "where"),
    [
        (lambda sts: sts["spec"].update(podManagmentPolicy="Parallel"), "misspelt field"),
        (lambda sts: first_port(sts).update(containerPort="26501"), "port as a string"),
        (lambda sts: sts["spec"].pop("selector"), "required field"),
    ],
)
def test_the_schema_check_catches_broken_manifests(breakage: Callable[[Doc], object], where: str) -> None:
    """The validator is strict and wired to real schemas: a broken StatefulSet must fail it."""
    sts = copy.deepcopy(render("base").broker_set)
    validate(sts, KUBERNETES_VERSIONS[0])
    breakage(sts)
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(sts, KUBERNETES_VERSIONS[0])


def test_service_monitor_scrapes_the_monitoring_ports_of_both_services() -> None:
    """The ServiceMonitor's CRD schema is not bundled: check its shape and that it selects what it should."""
    (monitor,) = load_file(SERVICE_MONITOR)
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["kind"] == "ServiceMonitor"
    manifests = render("production")
    namespace = manifests.broker_set["metadata"]["namespace"]
    assert monitor["metadata"]["namespace"] == namespace
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [namespace]
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = manifests.all("Service")
    selected = {s["metadata"]["name"]: s for s in services if labels_match(selector, s["metadata"]["labels"])}
    assert set(selected) == {"weir-broker", "weir-gateway"}
    for endpoint in monitor["spec"]["endpoints"]:
        assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout"}
        assert endpoint["path"] == "/metrics"
        for service in selected.values():
            port_names = {p["name"] for p in service["spec"]["ports"]}
            assert endpoint["port"] in port_names, service["metadata"]["name"]
