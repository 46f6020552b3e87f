"""Run a rendered overlay's pods as local processes, exactly as the manifests describe them.

Each pod gets the environment and argv Kubernetes would give it (see `manifests.pod_view`) and its ConfigMap
and Secret files written under a folder of its own. Only what a laptop cannot offer is translated: cluster DNS names
become 127.0.0.1, every declared container port a free local port (consecutive ports stay consecutive: the
Raft ports are base + partition - 1), bind-all addresses 127.0.0.1, and mount paths local folders.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.manifests import (
    CLUSTER_DOMAIN,
    Doc,
    Manifests,
    PodView,
    broker_dns_name,
    container,
    container_ports,
    parse_containerfile,
    pod_names,
    pod_view,
)
from tests.harness import REPO, eventually

_ADDRESS = re.compile(r"(?P<host>[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+):(?P<port>\d+)")


def free_block(count: int) -> int:
    """The first of ``count`` consecutive ports free on 127.0.0.1."""
    for _ in range(500):
        base = random.randint(20_000, 60_000 - count)
        sockets: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise AssertionError(f"no {count} consecutive free ports on 127.0.0.1")


def local_ports(declared: list[int]) -> dict[int, int]:
    """A free local port for each declared port; runs of consecutive ports map to consecutive ports."""
    mapping: dict[int, int] = {}
    run: list[int] = []
    for port in [*sorted(set(declared)), -1]:
        if run and port != run[-1] + 1:
            base = free_block(len(run))
            mapping.update({p: base + i for i, p in enumerate(run)})
            run = []
        run.append(port)
    return mapping


@dataclass
class LocalPod:
    """One pod's process; stopped with SIGTERM as the kubelet does."""

    view: PodView
    ports: dict[int, int]
    root: Path
    grace_seconds: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.root / "pod.log"

    def local_port(self, container_port: int) -> int:
        return self.ports[container_port]

    def start(self, argv: list[str], env: dict[str, str]) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)

    def probe(self, monitoring_port: int, path: str) -> tuple[int, dict[str, Any]]:
        url = f"http://127.0.0.1:{self.local_port(monitoring_port)}{path}"
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, {}

    def wait_for(self, monitoring_port: int, path: str, timeout: float) -> None:
        def up() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"{self.view.name} exited with {self.process.returncode}:\n{self.log()}")
            return self.probe(monitoring_port, path)[0] == 200

        try:
            eventually(up, timeout=timeout, interval=0.1, what=f"{self.view.name} {path}")
        except AssertionError as e:
            raise AssertionError(f"{e}\n--- {self.view.name} log ---\n{self.log()}") from None

    def terminate(self) -> None:
        """One SIGTERM, as the kubelet sends (a second one could hit the default handler during shutdown)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait(self) -> int | None:
        """The exit code, or None when the process outlived terminationGracePeriodSeconds and was killed."""
        if self.process is None:
            return None
        try:
            return self.process.wait(timeout=self.grace_seconds)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""


class LocalCluster:
    """The brokers and a gateway of one rendering, as local processes."""

    def __init__(
        self,
        manifests: Manifests,
        root: Path,
        *,
        operator_secrets: dict[str, dict[str, str]] | None = None,
        external_addresses: dict[str, str] | None = None,
    ) -> None:
        self.manifests = manifests
        self.root = root
        self.image = parse_containerfile()
        self.secrets = operator_secrets or {}
        self.external = external_addresses or {}
        brokers = manifests.broker_set
        self.brokers = [self._pod(brokers, "broker", name) for name in pod_names(brokers)]
        (gateway_name,) = pod_names(manifests.gateway)
        self.gateway = self._pod(manifests.gateway, "gateway", gateway_name)

    def _pod(self, workload: Doc, container_name: str, name: str) -> LocalPod:
        view = pod_view(self.manifests, workload, container_name, name, self.image, self.secrets)
        declared = list(container_ports(container(workload, container_name)).values())
        root = self.root / name
        root.mkdir(parents=True)
        grace = workload["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        return LocalPod(view, local_ports(declared), root, grace)

    # -- translation ---------------------------------------------------------------------------------------

    def address(self, host: str, port: int) -> str:
        for ordinal, broker in enumerate(self.brokers):
            if host == broker_dns_name(self.manifests, ordinal):
                return f"127.0.0.1:{broker.local_port(port)}"
        if f"{host}:{port}" in self.external:
            return self.external[f"{host}:{port}"]
        if host.endswith(CLUSTER_DOMAIN):
            raise AssertionError(f"{host}:{port} is no pod of the manifests and no stand-in was given for it")
        return f"{host}:{port}"

    def _addresses(self, value: str) -> str:
        return _ADDRESS.sub(lambda m: self.address(m.group("host"), int(m.group("port"))), value)

    def _local_path(self, pod: LocalPod, path: str) -> str:
        for mount in sorted(pod.view.mounts, key=len, reverse=True):
            if path == mount or path.startswith(mount.rstrip("/") + "/"):
                return str(pod.root / "mounts" / path.lstrip("/"))
        return path

    def _config_file(self, pod: LocalPod, text: str) -> str:
        """weir.yaml as this pod's process should read it: its local ports, 127.0.0.1 and local folders."""
        config = yaml.safe_load(text)
        broker, gateway = config.get("broker", {}), config.get("gateway", {})
        for section in (broker, gateway):
            if section.get("host") == "0.0.0.0":
                section["host"] = "127.0.0.1"
        for name, port in broker.get("ports", {}).items():
            broker["ports"][name] = pod.ports.get(port, port)
        for key in ("port", "monitoringPort"):
            if key in gateway:
                gateway[key] = pod.ports.get(gateway[key], gateway[key])
        if "dataDir" in broker:
            broker["dataDir"] = self._local_path(pod, broker["dataDir"])
        if "contactPoints" in gateway:
            gateway["contactPoints"] = [self._addresses(p) for p in gateway["contactPoints"]]
        return yaml.safe_dump(config, sort_keys=False)

    def launch(self, pod: LocalPod) -> None:
        for path, content in pod.view.files.items():
            local = Path(self._local_path(pod, path))
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text(self._config_file(pod, content) if path.endswith("weir.yaml") else content)
        for mount in pod.view.mounts:
            Path(self._local_path(pod, mount)).mkdir(parents=True, exist_ok=True)
        entrypoint, *args = pod.view.argv
        assert entrypoint == "weir", f"{pod.view.name} runs {entrypoint!r}, not the weir console script"
        argv = [sys.executable, "-m", "client.cli", *(self._local_path(pod, a) for a in args)]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        # Addresses become local ones; paths into mounted volumes (certificates, say) the pod's local folders.
        env.update({name: self._local_path(pod, self._addresses(value)) for name, value in pod.view.env.items()})
        pod.start(argv, env)

    def stop(self) -> dict[str, int | None]:
        """Gateway first, then the brokers (in parallel, as `kubectl delete` would)."""
        self.gateway.terminate()
        codes = {self.gateway.view.name: self.gateway.wait()}
        for broker in self.brokers:
            broker.terminate()
        for broker in self.brokers:
            codes[broker.view.name] = broker.wait()
        return codes
