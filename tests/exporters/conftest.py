"""Fixtures of the exporter tests: a real Elasticsearch-compatible server (see tests/search_server.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.search_server import NoidaServer


@pytest.fixture(scope="module")
def noida(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NoidaServer]:
    """One server for a test module."""
    server = NoidaServer(tmp_path_factory.mktemp("noida") / "data")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_noida(tmp_path: Path) -> Iterator[NoidaServer]:
    """A server of the test's own, for tests that stop and restart it."""
    server = NoidaServer(tmp_path / "noida-data")
    server.start()
    try:
        yield server
    finally:
        server.stop()
