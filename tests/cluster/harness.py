"""A real Weir cluster for tests: ``weir cluster up`` as a subprocess, its probes, and fault injection by pid.

Everything goes through what an operator has: the CLI (``weir cluster up|restart-broker|down``), ``cluster.json``
for pids, ports and data directories, the brokers' ``/health`` probes, and signals sent to one pid at a time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from broker.cluster.topology import distribute_partitions
from client.cluster import write_cluster
from tests.harness import REPO, check_starting, eventually, retry_on_taken_port

LEADER = "LEADER"


class Cluster:
    """N brokers and one gateway started by ``weir cluster up`` on 127.0.0.1, data under ``data_dir``."""

    def __init__(
        self,
        data_dir: Path,
        *,
        brokers: int = 3,
        partitions: int = 3,
        replication: int = 3,
        broker_args: list[str] | None = None,
        broker_hosts: list[str] | None = None,
        broker_netns: list[str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.broker_hosts = broker_hosts
        self.broker_netns = broker_netns
        self.brokers = brokers
        self.partitions = partitions
        self.replication = replication
        self.broker_args = broker_args or []
        self.supervisor: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}
        self.stopped_pids: set[int] = set()

    # -- lifecycle -------------------------------------------------------------------------------------------

    def _cli(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "client.cli", "cluster", *args, "--data-dir", str(self.data_dir)]

    def up(self, timeout: float = 60.0) -> Cluster:
        """``weir cluster up``; again on newly planned ports when a process exits because one was taken (the data
        folder of that attempt moves aside to ``DATA_DIR.attempt-N``)."""

        def attempt(n: int) -> Cluster:
            if n > 0:
                self.data_dir.rename(self.data_dir.with_name(f"{self.data_dir.name}.attempt-{n}"))
            self._up(timeout)
            return self

        return retry_on_taken_port(attempt)

    def _up(self, timeout: float) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        extra = [a for arg in self.broker_args for a in ("--broker-arg", arg)]
        command = self._cli(
            "up",
            "--brokers",
            str(self.brokers),
            "--partitions",
            str(self.partitions),
            "--replication",
            str(self.replication),
            "--timeout",
            str(timeout),
            *extra,
            *(["--broker-hosts", ",".join(self.broker_hosts)] if self.broker_hosts else []),
            *(["--broker-netns", ",".join(self.broker_netns)] if self.broker_netns else []),
        )
        out = (self.data_dir / "supervisor.log").open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.supervisor = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env)
        out.close()

        def is_up() -> bool:
            assert self.supervisor is not None
            if self.supervisor.poll() is not None:  # it stopped every process it started before it exited
                check_starting(self.supervisor, self.logs(tail=20000), "weir cluster up")
            return "is up" in (self.data_dir / "supervisor.log").read_text(errors="replace")

        eventually(is_up, timeout=timeout + 5, interval=0.1, what="weir cluster up")
        self.reload()

    def reload(self) -> dict[str, Any]:
        self.info = json.loads((self.data_dir / "cluster.json").read_text())
        return self.info

    def restart_broker(self, node_id: int, timeout: float = 60.0) -> float:
        """``weir cluster restart-broker``; returns the seconds it took until the broker was ready."""
        started = time.monotonic()
        done = subprocess.run(
            self._cli("restart-broker", str(node_id), "--timeout", str(timeout)),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout + 30,
        )
        self.reload()
        assert done.returncode == 0, f"restart-broker {node_id} failed: {done.stdout}{done.stderr}\n{self.logs()}"
        return time.monotonic() - started

    def restart_brokers(self, node_ids: list[int], timeout: float = 60.0) -> float:
        """Restart several brokers at once (each must reach the others to become ready)."""
        errors: list[BaseException] = []
        lock = threading.Lock()

        def one(node_id: int) -> None:
            done = subprocess.run(
                self._cli("restart-broker", str(node_id), "--timeout", str(timeout)),
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=timeout + 30,
            )
            if done.returncode != 0:
                with lock:
                    errors.append(AssertionError(f"restart-broker {node_id}: {done.stdout}{done.stderr}"))

        started = time.monotonic()
        threads = [threading.Thread(target=one, args=(n,)) for n in node_ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # Each restart rewrote cluster.json from what it read: put every new pid back from the brokers themselves.
        self._record_pids(node_ids)
        assert not errors, f"{errors}\n{self.logs()}"
        return time.monotonic() - started

    def _record_pids(self, node_ids: list[int]) -> None:
        """cluster.json after concurrent restarts may hold a stale pid: find each broker's by its data dir."""
        info = self.reload()
        for broker in info["brokers"]:
            if broker["nodeId"] not in node_ids:
                continue
            pid = _pid_of(broker["command"])
            if pid:
                broker["pid"] = pid
        write_cluster(self.data_dir, info)

    def down(self, timeout: float = 60.0) -> None:
        """``weir cluster down`` (graceful: every broker snapshots and closes its logs)."""
        self.resume_all()
        done = subprocess.run(self._cli("down"), cwd=REPO, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"cluster down failed: {done.stdout}{done.stderr}"
        if self.supervisor is not None:
            self.supervisor.wait(timeout=timeout)
        for broker in self.reload()["brokers"]:
            eventually(lambda b=broker: not _running(b["pid"]), timeout=30, what=f"broker {broker['nodeId']} to exit")

    def kill_everything(self) -> None:
        """Last resort in ``finally``: SIGKILL every pid this cluster recorded (and only those)."""
        if not (self.data_dir / "cluster.json").exists():
            if self.supervisor is not None and self.supervisor.poll() is None:
                self.supervisor.kill()
            return
        info = self.reload()
        pids = [b["pid"] for b in info["brokers"]] + [info["gateway"]["pid"]]
        if self.supervisor is not None and self.supervisor.poll() is None:
            pids.append(self.supervisor.pid)
        for pid in pids:
            if pid and _running(pid):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
        if self.supervisor is not None:
            self.supervisor.wait(timeout=10)

    # -- brokers ---------------------------------------------------------------------------------------------

    @property
    def gateway(self) -> str:
        return str(self.info["gateway"]["address"])

    def broker(self, node_id: int) -> dict[str, Any]:
        (found,) = [b for b in self.info["brokers"] if b["nodeId"] == node_id]
        return found

    def pid(self, node_id: int) -> int:
        return int(self.broker(node_id)["pid"])

    def kill(self, node_id: int, sig: int = signal.SIGKILL) -> None:
        pid = self.pid(node_id)
        os.kill(pid, sig)
        if sig == signal.SIGSTOP:
            self.stopped_pids.add(pid)
        elif sig == signal.SIGCONT:
            self.stopped_pids.discard(pid)
        elif sig == signal.SIGKILL:
            eventually(lambda: not _running(pid), timeout=10, what=f"broker {node_id} (pid {pid}) to die")

    def resume_all(self) -> None:
        for pid in list(self.stopped_pids):
            if _running(pid):
                os.kill(pid, signal.SIGCONT)
        self.stopped_pids.clear()

    def stop_broker(self, node_id: int) -> None:
        """Graceful stop of one broker (SIGTERM), e.g. before touching its files."""
        pid = self.pid(node_id)
        os.kill(pid, signal.SIGTERM)
        eventually(lambda: not _running(pid), timeout=30, what=f"broker {node_id} to stop")

    def health(self, node_id: int) -> dict[str, Any] | None:
        """The broker's /health document (its partitions, roles, positions), or None when it does not answer."""
        broker = self.broker(node_id)
        url = f"http://{broker.get('host', '127.0.0.1')}:{broker['monitoringPort']}/health"
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            try:
                return json.loads(e.read() or b"{}")
            except ValueError:
                return None
        except (OSError, ValueError):
            return None

    def replicas(self, partition: int) -> list[int]:
        return distribute_partitions(self.brokers, self.partitions, self.replication)[partition]

    def leader_of(self, partition: int, exclude: set[int] | frozenset[int] = frozenset()) -> int | None:
        """The broker whose partition reports LEADER and healthy (first found), ignoring ``exclude``."""
        for node_id in self.replicas(partition):
            if node_id in exclude:
                continue
            h = self.health(node_id)
            p = (h or {}).get("partitions", {}).get(str(partition))
            if p and p["role"] == LEADER and p["healthy"]:
                return node_id
        return None

    def wait_leader(
        self, partition: int, exclude: set[int] | frozenset[int] = frozenset(), timeout: float = 20.0
    ) -> int:
        return _wait_int(lambda: self.leader_of(partition, exclude), timeout, f"a leader for partition {partition}")

    def positions(self, partition: int) -> dict[int, int | None]:
        """processedPosition of each replica of ``partition`` (None when the broker does not answer)."""
        out: dict[int, int | None] = {}
        for node_id in self.replicas(partition):
            p = ((self.health(node_id) or {}).get("partitions") or {}).get(str(partition))
            out[node_id] = None if p is None else int(p["processedPosition"])
        return out

    def wait_replicas_equal(self, timeout: float = 30.0) -> None:
        """Quiescence: every replica of every partition reports the same processed position."""

        def equal() -> bool:
            for partition in range(1, self.partitions + 1):
                values = set(self.positions(partition).values())
                if len(values) != 1 or None in values:
                    return False
            return True

        eventually(equal, timeout=timeout, interval=0.2, what="every replica to reach the same position")

    def partition_dir(self, node_id: int, partition: int) -> Path:
        return Path(self.broker(node_id)["dataDir"]) / "partitions" / str(partition)

    def broker_log(self, node_id: int) -> str:
        try:
            return Path(self.broker(node_id)["log"]).read_text(errors="replace")
        except OSError:
            return ""

    def logs(self, tail: int = 3000) -> str:
        parts = []
        for path in sorted(self.data_dir.glob("*.log")):
            parts.append(f"== {path.name} ==\n{path.read_text(errors='replace')[-tail:]}")
        return "\n".join(parts)


def _wait_int(check: Any, timeout: float, what: str) -> int:
    found = eventually(lambda: (v := check()) is not None and (v,), timeout=timeout, interval=0.05, what=what)
    return int(found[0])


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed broker may wait for its parent to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _pid_of(command: list[str]) -> int | None:
    """The live process running exactly ``command`` (brokers differ by their --data-dir)."""
    wanted = "\0".join(command) + "\0"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_text()
        except OSError:
            continue
        if cmdline == wanted and _running(int(entry.name)):
            return int(entry.name)
    return None
