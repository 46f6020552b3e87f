"""A real Elasticsearch-compatible server for tests: noida-db on 127.0.0.1 with a data directory of its own.

Started from the binary inside the installed ``noida-db`` package, checked to be the process answering on its
port (not some other server that happened to be there), and stopped by its pid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.harness import free_port
from tests.raw_sockets import listening_hosts


def noida_binary() -> Path:
    import noida_db

    binary = Path(noida_db.__file__).resolve().parent / ("noida-db.exe" if os.name == "nt" else "noida-db")
    if not binary.is_file():
        pytest.fail(f"the noida-db package has no server binary at {binary}")
    if not os.access(binary, os.X_OK):
        binary.chmod(0o755)
    return binary


class NoidaServer:
    """One noida-db process serving the Elasticsearch API; can be stopped and started again on the same data."""

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}.log"

    def start(self, timeout: float = 20.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [
            str(noida_binary()),
            "start",
            "--only",
            "elasticsearch",
            "--host",
            "127.0.0.1",
            "--elasticsearch-port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
        ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"noida-db exited with {self.process.returncode}:\n{self.log_path.read_text()[-2000:]}")
            if self._answers():
                break
            time.sleep(0.05)
        else:
            self.stop()
            pytest.fail(f"noida-db did not answer on {self.url} within {timeout}s")
        if not listening_hosts(self.port, {self.process.pid}):
            self.stop()
            pytest.fail(f"the server answering on port {self.port} is not the noida-db process we started")

    def _answers(self) -> bool:
        try:
            status, body = self.request("GET", "/")
        except OSError:
            return False
        return status == 200 and isinstance(body, dict) and "version" in body

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read().decode()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            return e.code, json.loads(text) if text.startswith("{") else text

    def refresh(self) -> None:
        status, body = self.request("POST", "/_refresh")
        assert status == 200, body

    def search(self, index: str, query: dict[str, Any] | None = None, size: int = 10_000) -> list[dict[str, Any]]:
        """Every hit of ``query`` in ``index`` (an index, pattern or alias), after a refresh, by position."""
        self.refresh()
        body = {"query": query or {"match_all": {}}, "size": size, "sort": [{"position": "asc"}]}
        status, answer = self.request("POST", f"/{index}/_search", body)
        assert status == 200, answer
        return answer["hits"]["hits"]

    def all_hits(
        self,
        index: str,
        query: dict[str, Any] | None = None,
        *,
        fields: list[str] | None = None,
        page: int = 5_000,
    ) -> list[dict[str, Any]]:
        """Every hit of ``query`` in ``index`` by position, paged with ``search_after`` past the result window.

        ``fields`` narrows each hit's ``_source`` (large documents need not travel when a key is all a test reads).
        """
        self.refresh()
        hits: list[dict[str, Any]] = []
        body: dict[str, Any] = {"query": query or {"match_all": {}}, "size": page, "sort": [{"position": "asc"}]}
        if fields is not None:
            body["_source"] = fields
        while True:
            status, answer = self.request("POST", f"/{index}/_search", body)
            assert status == 200, answer
            batch = answer["hits"]["hits"]
            hits.extend(batch)
            if len(batch) < page:
                return hits
            body["search_after"] = batch[-1]["sort"]

    def count(self, index: str, query: dict[str, Any] | None = None) -> int:
        """How many documents of ``index`` match ``query`` (after a refresh)."""
        self.refresh()
        status, answer = self.request("POST", f"/{index}/_count", {"query": query or {"match_all": {}}})
        assert status == 200, answer
        return int(answer["count"])
