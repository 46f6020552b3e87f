"""Real Weir processes for tests: start, wait until ready, kill -9, restart, read probes.

Every test talks to Weir the way users do: over sockets on 127.0.0.1, to processes started from the ``weir`` CLI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
BPMN = FIXTURES / "bpmn"


def free_port() -> int:
    """A free port outside the range the kernel gives outgoing connections, so none takes it before Weir binds it."""
    from client.cluster import free_port as planned_port

    return planned_port()


def eventually(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05, what: str = "") -> Any:
    """Poll ``check`` until it returns a truthy value; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as e:  # keep polling; report the last error on timeout
            last_error = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or check}: last error {last_error!r}")


class WeirProcess:
    """One ``weir start`` process (broker + embedded gateway) with its own data folder and ports."""

    def __init__(
        self,
        data_dir: Path,
        *,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
        repo: Path = REPO,
        command_api: bool = False,
    ):
        self.data_dir = data_dir
        # ``weir broker --embedded-gateway`` instead of ``weir start``: the same node, plus its broker command API
        self.command_port = free_port() if command_api else None
        self.repo = repo  # whose code runs (benchmarks compare a checkout of another commit)
        self.gateway_port = free_port()
        self.rest_port = free_port()
        self.monitoring_port = free_port()
        self.extra_args = extra_args or []
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.gateway_port}"

    @property
    def rest_url(self) -> str:
        """The REST API's base URL (``…/v2/topology`` etc. below it)."""
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, wait: bool = True, timeout: float = 30.0) -> WeirProcess:
        cmd = [
            sys.executable,
            "-m",
            "client.cli",
            *(["start"] if self.command_port is None else ["broker", "--embedded-gateway"]),
            *([] if self.command_port is None else ["--command-port", str(self.command_port)]),
            "--data-dir",
            str(self.data_dir),
            "--gateway-port",
            str(self.gateway_port),
            # (a checkout of an older commit, run by benchmarks, may predate the REST API)
            *(["--rest-port", str(self.rest_port)] if (self.repo / "gateway" / "rest").is_dir() else []),
            "--monitoring-port",
            str(self.monitoring_port),
            *self.extra_args,
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(cmd, cwd=self.repo, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        if wait:
            self.wait_ready(timeout)
        return self

    def probe(self, path: str) -> tuple[int, dict[str, Any]]:
        url = f"http://127.0.0.1:{self.monitoring_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                body = r.read()
                return r.status, json.loads(body) if path != "/metrics" else {"text": body.decode()}
        except urllib.error.HTTPError as e:
            body = e.read()
            try:
                return e.code, json.loads(body or b"{}")
            except ValueError:
                return e.code, {"text": body.decode(errors="replace")}

    def wait_ready(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"weir exited with {self.proc.returncode}; log:\n{self.log()}")
            return self.probe("/ready")[0] == 200

        try:
            eventually(ready, timeout=timeout, interval=0.1, what="weir to become ready")
        except RuntimeError as e:
            raise AssertionError(str(e)) from None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except OSError:
            return ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
                self.proc.wait(timeout=30)

    def stop(self) -> int | None:
        """Graceful stop (SIGTERM), as Kubernetes does; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def restart(self, timeout: float = 60.0) -> None:
        self.stop()
        self.start(timeout=timeout)
