"""Fixtures of the exporter tests: a real Elasticsearch-compatible server (see tests/search_server.py) and a real
PostgreSQL server (tests/postgres_server.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres_server import PostgresServer
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


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL server for a test module (each test gets a database of its own: `history_url`)."""
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the test's own, for tests that stop and restart it."""
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.remove()


def fresh_database(server: PostgresServer) -> str:
    """A new empty database on ``server``; returns its URL."""
    import psycopg

    name = f"history_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.url, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return server.url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty history database: a SQLite file, or a fresh database on the module's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.db'}"
    return fresh_database(request.getfixturevalue("postgres"))
