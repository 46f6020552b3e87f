"""Test harness: a Raft group of `member_runner` processes on 127.0.0.1 that tests kill, pause and query."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
BAD_LOG_MARKERS = ("truncating already-applied", "IndexError", "failed _onTick", "raft member")


def free_ports(count: int) -> list[int]:
    """Distinct free ports outside the ephemeral range (members connecting to each other cannot take them first)."""
    from client.cluster import free_port

    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port())
    return sorted(ports)


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    """Poll `condition` until it returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class Member:
    """One runner process; its data directory outlives restarts."""

    def __init__(self, address: str, partners: list[str], data_dir: Path, config: dict[str, Any]) -> None:
        self.address = address
        self.partners = partners
        self.dir = data_dir
        self.config = config
        self.proc: subprocess.Popen[str] | None = None
        self.replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self.dir.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        stderr = open(self.dir / "runner.log", "a")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.raft.member_runner",
                "--self",
                self.address,
                "--partners",
                ",".join(self.partners),
                "--dir",
                str(self.dir),
                "--config",
                json.dumps(self.config),
            ],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            bufsize=1,
        )
        stderr.close()
        replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self.replies = replies
        proc = self.proc

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                replies.put(json.loads(line))

        threading.Thread(target=read, daemon=True).start()
        self.expect("started", timeout=20)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, **cmd: Any) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def expect(self, op: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                reply = self.replies.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{self.address}: no {op!r} reply within {timeout}s") from None
            if reply["op"] == op:
                return reply

    def request(self, timeout: float = 60, **cmd: Any) -> dict[str, Any]:
        self.send(**cmd)
        return self.expect(cmd["op"], timeout)

    def kill(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if not self.alive:
            return
        assert self.proc is not None
        try:
            self.resume()
            self.send(op="exit")
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()

    def status(self) -> dict[str, Any]:
        try:
            return json.loads((self.dir / "status.json").read_text())  # type: ignore[no-any-return]
        except (OSError, ValueError):
            return {}

    def commits(self) -> list[tuple[int, str, int]]:
        path = self.dir / "commits.log"
        if not path.exists():
            return []
        rows = []
        for line in path.read_text().splitlines():
            index, payload_id, crc = line.split("\t")
            rows.append((int(index), payload_id, int(crc)))
        return rows

    def acks(self) -> list[tuple[str, int, float]]:
        path = self.dir / "acks.log"
        if not path.exists():
            return []
        rows = []
        for line in path.read_text().splitlines():
            payload_id, index, at = line.split("\t")
            rows.append((payload_id, int(index), float(at)))
        return rows

    def log_text(self) -> str:
        path = self.dir / "runner.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def bad_log_lines(self) -> list[str]:
        return [line for line in self.log_text().splitlines() if any(m in line for m in BAD_LOG_MARKERS)]


class Cluster:
    """A Raft group of `size` runner processes under `root`."""

    def __init__(self, root: Path, size: int = 3, config: dict[str, Any] | None = None) -> None:
        addresses = [f"127.0.0.1:{port}" for port in free_ports(size)]
        self.members = [
            Member(a, [p for p in addresses if p != a], root / f"m{i}", dict(config or {}))
            for i, a in enumerate(addresses)
        ]

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        for member in self.members:
            member.start()

    def stop(self) -> None:
        for member in self.members:
            member.stop()

    def leader(self, timeout: float = 15, among: list[Member] | None = None) -> Member:
        """The one live member that reports itself leader in the highest term seen (waits for it)."""
        candidates = among if among is not None else self.members

        def find() -> Member | None:
            live = [(m, m.status()) for m in candidates if m.alive]
            leaders = [(s.get("term", 0), m) for m, s in live if s.get("role") == "leader"]
            if len(leaders) != 1:
                return None
            return leaders[0][1]

        return wait_until(find, timeout, "a single leader")  # type: ignore[no-any-return]

    def wait_converged(self, blocks: int, timeout: float = 60, members: list[Member] | None = None) -> None:
        chosen = members if members is not None else self.members

        def done() -> bool:
            return all(m.status().get("committed_blocks", -1) >= blocks for m in chosen)

        wait_until(done, timeout, f"{blocks} committed blocks on {[m.address for m in chosen]}")

    def wait_settled(self, timeout: float = 30, members: list[Member] | None = None) -> int:
        """Wait until the chosen members report the same last delivered index in fresh status files (call it
        once no proposal is in flight); returns the number of committed blocks."""
        chosen = members if members is not None else self.members
        since = time.time()

        def settled() -> int | None:
            statuses = [m.status() for m in chosen]
            if any(s.get("time", 0) < since + 0.1 for s in statuses):
                return None
            if len({(s.get("last_delivered"), s.get("committed_blocks")) for s in statuses}) != 1:
                return None
            return int(statuses[0]["committed_blocks"]) or None

        try:
            return wait_until(settled, timeout, "members to settle on one commit index")  # type: ignore[no-any-return]
        except AssertionError as e:
            keys = ("role", "term", "leader", "commit_index", "last_applied", "last_delivered", "committed_blocks",
                    "in_flight", "fatal", "time")  # fmt: skip
            seen = [{k: m.status().get(k) for k in keys} for m in chosen]
            raise AssertionError(f"{e}; members report {seen}") from None

    def assert_identical_commits(self, members: list[Member] | None = None) -> list[tuple[int, str, int]]:
        """Every member's delivered sequence is the same, strictly increasing in index, without duplicates."""
        chosen = members if members is not None else self.members
        sequences = [m.commits() for m in chosen]
        reference = sequences[0]
        for member, sequence in zip(chosen, sequences, strict=True):
            indexes = [row[0] for row in sequence]
            assert indexes == sorted(set(indexes)), f"{member.address}: indexes not strictly increasing"
            assert len({row[1] for row in sequence}) == len(sequence), f"{member.address}: duplicate payload"
            assert sequence == reference, f"{member.address} diverges from {chosen[0].address}"
        return reference


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
