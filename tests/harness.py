"""Real Weir processes for tests: start, wait until ready, kill -9, restart, read probes.

Every test talks to Weir the way users do: over sockets on 127.0.0.1, to processes started from the ``weir`` CLI.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
BPMN = FIXTURES / "bpmn"


def free_port() -> int:
    """A free port outside the range the kernel gives outgoing connections, so none takes it before Weir binds it."""
    from client.cluster import free_port as planned_port

    return planned_port()


# What Weir's processes say when a port they were given is held by another socket (their own messages, and the
# errno text of Python's and aiohttp's bind errors).
PORT_TAKEN = re.compile(r"address already in use|\(is the port in use\?\)", re.IGNORECASE)
START_ATTEMPTS = 3

T = TypeVar("T")


class LazyModule:
    """A module imported when a test first reads one of its names, the test skipped (with ``reason``) when it is not
    installed: for a heavy library a test module uses only in its tests, which every pytest-xdist worker would
    otherwise import while collecting (the official Python SDK takes 1.5 s and more)."""

    def __init__(self, name: str, reason: str) -> None:
        self._name = name
        self._reason = reason

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_"):  # pytest looks for fixtures and markers among a module's names: not yet
            raise AttributeError(attribute)
        import pytest

        return getattr(pytest.importorskip(self._name, reason=self._reason), attribute)


class StartupFailed(AssertionError):
    """A process exited while starting: waiting longer cannot help (:func:`eventually` gives up at once)."""


class PortTaken(StartupFailed):
    """A process exited while starting because a port picked for it was taken in between (by another test run's
    server, say): it can start on other ports (:func:`retry_on_taken_port`)."""


def check_starting(proc: subprocess.Popen[bytes], output: str, what: str) -> None:
    """Raise if ``proc`` has exited: PortTaken when ``output`` (what it printed while starting) says a port was in
    use, StartupFailed otherwise."""
    code = proc.poll()
    if code is None:
        return
    failure = PortTaken if PORT_TAKEN.search(output) else StartupFailed
    raise failure(f"{what} exited with {code} while starting; output:\n{output[-20000:]}")


def retry_on_taken_port(start: Callable[[int], T], attempts: int = START_ATTEMPTS) -> T:
    """``start(attempt)`` picks ports (it may keep the ones it was given on attempt 0), starts its processes and waits
    until they are ready. When one exits because a port was taken (PortTaken), ``start`` runs again, up to
    ``attempts`` times; any other failure fails at once."""
    taken: list[PortTaken] = []
    for attempt in range(attempts):
        try:
            return start(attempt)
        except PortTaken as e:
            taken.append(e)
    raise PortTaken(f"a port was taken on each of {attempts} attempts; the last: {taken[-1]}")


def eventually(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05, what: str = "") -> Any:
    """Poll ``check`` until it returns a truthy value; fail with ``what`` after ``timeout`` seconds (at once when it
    raises StartupFailed)."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except StartupFailed:
            raise
        except Exception as e:  # keep polling; report the last error on timeout
            last_error = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or check}: last error {last_error!r}")


class CliProcess:
    """One ``weir`` command of a test (``weir gateway``, ``weir broker`` …) on ports picked for it, output to a log.

    For callers that start on the ports they pick inside ``retry_on_taken_port``: :meth:`wait_running` raises
    PortTaken when the process exits because one was taken.
    """

    def __init__(self, args: list[str], log_path: Path, env: dict[str, str] | None = None, cwd: Path = REPO) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.log_path = log_path
        with log_path.open("ab") as log:
            self._log_start = log.tell()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "client.cli", *args], cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env
            )

    def output(self) -> str:
        """What the process printed since it started."""
        with self.log_path.open("rb") as f:
            f.seek(self._log_start)
            return f.read().decode(errors="replace")

    def wait_running(self, monitoring_port: int | None = None, timeout: float = 30.0) -> CliProcess:
        """Until the process says it is running (every port bound) and, given its monitoring port, is ready; stops it
        when it does not get there."""

        def running() -> bool:
            output = self.output()
            check_starting(self.proc, output, "weir")
            if "is running" not in output:
                return False
            if monitoring_port is None:
                return True
            with urllib.request.urlopen(f"http://127.0.0.1:{monitoring_port}/ready", timeout=2) as r:
                return bool(r.status == 200)

        try:
            eventually(running, timeout=timeout, interval=0.1, what="weir to be running")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> int:
        """Graceful stop (SIGTERM), then SIGKILL after 20 s; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)


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
        self.command_api = command_api
        self.repo = repo  # whose code runs (benchmarks compare a checkout of another commit)
        self.pick_ports()
        self.extra_args = extra_args or []
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        self._run: CliProcess | None = None  # the current start

    def pick_ports(self) -> None:
        """Free ports for everything the process binds."""
        self.command_port = free_port() if self.command_api else None
        self.gateway_port = free_port()
        self.rest_port = free_port()
        self.monitoring_port = free_port()

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
        """Start the process; with ``wait``, until it is ready, on newly picked ports when one of its ports was taken
        before it could bind it. (Without ``wait`` it starts once, on the ports it has.)"""
        if not wait:
            self._launch()
            return self

        def attempt(n: int) -> WeirProcess:
            if n > 0:
                self.pick_ports()
            self._launch()
            self.wait_ready(timeout)
            return self

        return retry_on_taken_port(attempt)

    def _launch(self) -> None:
        args = [
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
        self._run = CliProcess(args, self.log_path, self.env, cwd=self.repo)
        self.proc = self._run.proc

    def probe(self, path: str, timeout: float = 2.0) -> tuple[int, dict[str, Any]]:
        url = f"http://127.0.0.1:{self.monitoring_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                body = r.read()
                return r.status, json.loads(body) if path != "/metrics" else {"text": body.decode()}
        except urllib.error.HTTPError as e:
            body = e.read()
            try:
                return e.code, json.loads(body or b"{}")
            except ValueError:
                return e.code, {"text": body.decode(errors="replace")}

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until the process has said it is running (so every port it was given is its own: a neighbour's monitoring
        port must not answer for it) and its readiness probe says yes; raises StartupFailed (PortTaken when a port
        was in use) as soon as the process exits."""
        assert self._run is not None
        self._run.wait_running(self.monitoring_port, timeout)

    def output(self) -> str:
        """What the process printed since it was last started."""
        return self._run.output() if self._run is not None else ""

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


@contextlib.contextmanager
def running(process: WeirProcess) -> Iterator[WeirProcess]:
    """Start ``process`` and stop it on the way out, printing its log if it did not exit cleanly (pytest shows it
    with a failure): the body of every module's own Weir fixture."""
    process.start()
    try:
        yield process
    finally:
        code = process.stop()
        if code not in (0, None):
            print(process.log())
