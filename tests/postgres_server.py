"""A real PostgreSQL server for tests: Debian's ``postgresql`` binaries on 127.0.0.1 with a fresh data directory.

``initdb`` and ``postgres`` refuse to run as root, so when the tests run as root (CI does) the server runs as the
``postgres`` system user the Debian package creates (or ``nobody``) in a data folder made for it under the system
temporary directory. The server is stopped by its pid (fast shutdown), and can be started again on the same data
to simulate an outage.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness import free_port

USER = "weir"


def postgres_bin() -> Path:
    """The newest installed PostgreSQL's bin folder (make test installs Debian's postgresql when missing)."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    if not candidates:
        found = shutil.which("postgres")
        if found is None:
            pytest.fail("PostgreSQL is not installed: `make test` installs Debian's postgresql package (as root)")
        return Path(found).parent
    return Path(candidates[-1]).parent


def _run_as() -> dict[str, Any]:
    """Popen arguments that drop root to an unprivileged user (nothing when not root)."""
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    pytest.fail("running as root, and there is neither a postgres nor a nobody user to run PostgreSQL as")


class PostgresServer:
    """One PostgreSQL server process on a free loopback port; ``url`` is a psycopg connection URL."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="weir-pg-"))
        self.data_dir = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log_path = self.root / "postgres.log"
        self.port = free_port()
        self.url = f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"
        self.process: subprocess.Popen[bytes] | None = None
        self._as = _run_as()
        self.socket_dir.mkdir()
        if self._as:
            for path in (self.root, self.socket_dir):
                os.chown(path, self._as["user"], self._as["group"])
        bin_dir = postgres_bin()
        command = [str(bin_dir / "initdb"), "-D", str(self.data_dir), "-U", USER, "--auth=trust", "-E", "UTF8"]
        result = subprocess.run(command, capture_output=True, text=True, **self._as, check=False)
        if result.returncode != 0:
            pytest.fail(f"initdb failed ({result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")

    def start(self, timeout: float = 30.0) -> PostgresServer:
        bin_dir = postgres_bin()
        command = [
            str(bin_dir / "postgres"),
            "-D",
            str(self.data_dir),
            "-k",
            str(self.socket_dir),
            "-p",
            str(self.port),
            "-h",
            "127.0.0.1",
            "-c",
            "fsync=off",  # a test server: a crash of the machine is not what these tests are about
            "-c",
            "max_connections=50",
        ]
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, **self._as, start_new_session=True
            )
        finally:
            os.close(log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"postgres exited with {self.process.returncode}:\n{self.log_path.read_text()[-2000:]}")
            if self.answers():
                return self
            time.sleep(0.05)
        self.stop()
        pytest.fail(f"postgres did not answer on port {self.port} within {timeout}s")

    def answers(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url, connect_timeout=2) as connection:
                connection.execute("SELECT 1")
        except psycopg.OperationalError:
            return False
        return True

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Fast shutdown (SIGINT: sessions are ended, data kept); killed if it does not stop within 20 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url, connect_timeout=5) as connection:
            return connection.execute(sql, params).fetchall()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
