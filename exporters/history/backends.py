"""Where history is written: SQLite (a file, one broker) or PostgreSQL (shared by a cluster's brokers).

Both speak the same SQL; a backend only knows how to connect, its placeholder and how a transaction is run. Every
write of a batch happens in one transaction together with the partition's exported position, so after a crash the
database holds either the whole batch and its position or neither: records up to that position are skipped when
they are offered again, and the history never holds a record twice.

When the database rejects a value (not the connection: `Backend.rejects_data`), the batch is written again row by
row, each row behind a savepoint, still in one transaction with the position: the rejected rows are left out and
returned (`RejectedRow`), every other row is written.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from exporters.history import schema
from exporters.history.rows import Batch

# Rows per INSERT statement: one statement runs in one go (the sqlite3 module releases and retakes the GIL per
# statement step, so row-by-row executemany would contend with the event loop for the GIL on every row).
_ROWS_PER_STATEMENT = 100
_MIGRATION_LOCK = 0x5745_4952  # PostgreSQL advisory lock id held while migrating ("WEIR")


class HistoryUrlError(ValueError):
    """A history database URL that names no supported database."""


@dataclass(frozen=True, slots=True)
class RejectedRow:
    """A row the database refused to store, and why (its message)."""

    table: str
    key: Any
    position: int
    message: str


def sqlite_path(url: str) -> Path | None:
    """The file of a ``sqlite:///abs/path`` URL (None for another scheme)."""
    if not url.startswith("sqlite:"):
        return None
    path = url[len("sqlite:") :]
    if path.startswith("///"):
        path = path[2:]
    elif path.startswith("//"):
        raise HistoryUrlError(f"{url!r}: expected sqlite:///absolute/path or sqlite:relative/path")
    if not path:
        raise HistoryUrlError(f"{url!r}: the SQLite URL names no file")
    return Path(path)


def file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a database file, None when it does not exist: a deleted or replaced file shows as a change."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def check_url(url: str) -> None:
    """Raise `HistoryUrlError` unless ``url`` is a SQLite or PostgreSQL URL."""
    if sqlite_path(url) is not None:
        return
    if urlsplit(url).scheme not in ("postgresql", "postgres"):
        raise HistoryUrlError(f"{url!r}: expected sqlite:///path/history.db or postgresql://user@host:port/db")


def upsert_sql(table: schema.Table, placeholder: str, rows: int = 1) -> str:
    """Insert ``rows`` rows or, where a key exists, set the columns a row knows (None keeps the stored value).

    Rows of one statement must have distinct keys (a batch merges changes per key, so they do).
    """
    columns = ", ".join(table.columns)
    one = "(" + ", ".join(placeholder for _ in table.columns) + ")"
    values = ", ".join(one for _ in range(rows))
    updates = ", ".join(f"{c} = COALESCE(excluded.{c}, {table.name}.{c})" for c in table.columns if c != table.key)
    return f"INSERT INTO {table.name} ({columns}) VALUES {values} ON CONFLICT ({table.key}) DO UPDATE SET {updates}"


# An instance has an incident when it or an instance it called (call activities, at any depth) has an active one,
# as Camunda flags every process instance of the incident's tree path: its own incidents, or a child's flag.
_INSTANCE_INCIDENT_FLAG = (
    "UPDATE process_instances SET has_incident = CASE WHEN EXISTS (SELECT 1 FROM incidents i WHERE "
    "i.process_instance_key = process_instances.process_instance_key AND i.state = 'ACTIVE') OR EXISTS (SELECT 1 "
    "FROM process_instances c WHERE c.parent_process_instance_key = process_instances.process_instance_key AND "
    "c.has_incident = 1) THEN 1 ELSE 0 END WHERE process_instance_key = {p}"
)
_PARENT_INSTANCE = "SELECT parent_process_instance_key FROM process_instances WHERE process_instance_key = {p}"
_ELEMENT_INCIDENT_KEY = (
    "UPDATE element_instances SET incident_key = (SELECT MAX(i.incident_key) FROM incidents i WHERE "
    "i.element_instance_key = element_instances.element_instance_key AND i.state = 'ACTIVE') "
    "WHERE element_instance_key = {p}"
)
_FINISHED = "SELECT process_instance_key FROM process_instances WHERE end_date < {p}"
_INSTANCE_CHILDREN = ("element_instances", "variables", "incidents", "jobs", "user_tasks", "sequence_flows")


class Backend:
    """The SQL both databases share; subclasses connect and run transactions."""

    placeholder = "?"
    key_type = "BIGINT PRIMARY KEY"

    def __init__(self) -> None:
        self._upserts: dict[tuple[str, int], str] = {}
        p = self.placeholder
        self._position_sql = (
            f"INSERT INTO exported_positions (partition_id, position) VALUES ({p}, {p}) "
            "ON CONFLICT (partition_id) DO UPDATE SET position = excluded.position"
        )

    def _upsert(self, table: schema.Table, rows: int) -> str:
        sql = self._upserts.get((table.name, rows))
        if sql is None:
            sql = self._upserts[(table.name, rows)] = upsert_sql(table, self.placeholder, rows)
        return sql

    # -- what subclasses provide ---------------------------------------------------------------------------------

    def connect(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """A cursor inside one transaction: committed on exit, rolled back on an exception."""
        raise NotImplementedError
        yield

    def _lock_for_migration(self, cursor: Any) -> None:
        """Keep other brokers from migrating the same database at the same time."""

    def rejects_data(self, error: BaseException) -> bool:
        """Whether ``error`` is the database (or its driver) refusing a value, not a lost connection or a fault of
        the database itself: retrying the same row would fail forever."""
        # Values Python's drivers cannot send: a string UTF-8 cannot encode, an integer wider than 64 bits (sqlite3).
        return isinstance(error, UnicodeEncodeError | OverflowError)

    # -- shared ----------------------------------------------------------------------------------------------

    def migrate(self, now_ms: int) -> list[int]:
        """Apply the migrations the database lacks, in order; returns the versions applied."""
        applied: list[int] = []
        with self.transaction() as cursor:
            self._lock_for_migration(cursor)
            cursor.execute(schema.SCHEMA_VERSION_TABLE)
            cursor.execute("SELECT version FROM schema_version")
            done = {row[0] for row in cursor.fetchall()}
            for migration in schema.MIGRATIONS:
                if migration.version in done:
                    continue
                for statement in migration.statements:
                    cursor.execute(statement.replace("{KEY}", self.key_type))
                p = self.placeholder
                cursor.execute(
                    f"INSERT INTO schema_version (version, description, applied_at) VALUES ({p}, {p}, {p})",
                    (migration.version, migration.description, now_ms),
                )
                applied.append(migration.version)
        return applied

    def schema_versions(self) -> list[int]:
        with self.transaction() as cursor:
            cursor.execute("SELECT version FROM schema_version ORDER BY version")
            return [row[0] for row in cursor.fetchall()]

    def exported_position(self, partition_id: int) -> int:
        """The last position written for ``partition_id`` (0: none)."""
        with self.transaction() as cursor:
            p = self.placeholder
            cursor.execute(f"SELECT position FROM exported_positions WHERE partition_id = {p}", (partition_id,))
            row = cursor.fetchone()
            return int(row[0]) if row else 0

    def write(self, batch: Batch, partition_id: int) -> None:
        """Write a batch's rows and its last position in one transaction."""
        with self.transaction() as cursor:
            self._delete_rows(cursor, batch)
            for table in schema.TABLES:
                rows = list(batch.rows[table.name].values())
                columns = table.columns
                for start in range(0, len(rows), _ROWS_PER_STATEMENT):
                    chunk = rows[start : start + _ROWS_PER_STATEMENT]
                    cursor.execute(self._upsert(table, len(chunk)), [row.get(c) for row in chunk for c in columns])
            self._finish_batch(cursor, batch, partition_id)

    def _delete_rows(self, cursor: Any, batch: Batch) -> None:
        """The batch's deletions (identities and memberships that are gone), before its rows: a row the batch sets
        again after deleting it is written after the deletion."""
        p = self.placeholder
        for table, match in batch.deletions:
            where = " AND ".join(f"{column} = {p}" for column, _ in match)
            cursor.execute(f"DELETE FROM {table} WHERE {where}", [value for _, value in match])

    def _finish_batch(self, cursor: Any, batch: Batch, partition_id: int) -> None:
        """After a batch's rows: recompute the incident flags they change, and store the partition's position."""
        if batch.incident_instances:
            self._flag_instance_incidents(cursor, batch.incident_instances)
        if batch.incident_elements:
            sql = _ELEMENT_INCIDENT_KEY.format(p=self.placeholder)
            cursor.executemany(sql, [(k,) for k in sorted(batch.incident_elements)])
        cursor.execute(self._position_sql, (partition_id, batch.last_position))

    def _flag_instance_incidents(self, cursor: Any, instances: set[int]) -> None:
        """Recompute the incident flag of ``instances`` and of every instance above them (their callers), deepest
        first: a caller's flag follows from its own incidents and its called instances' flags."""
        parent_sql = _PARENT_INSTANCE.format(p=self.placeholder)
        depth: dict[int, int] = {}  # instance → the most levels it lies above a changed instance
        for key in instances:
            chain = [key]
            while True:
                cursor.execute(parent_sql, (chain[-1],))
                row = cursor.fetchone()
                parent = row[0] if row else None
                if parent is None or parent in chain:
                    break
                chain.append(parent)
            for height, instance in enumerate(chain):
                depth[instance] = max(depth.get(instance, 0), height)
        flag_sql = _INSTANCE_INCIDENT_FLAG.format(p=self.placeholder)
        for instance in sorted(depth, key=lambda k: (depth[k], k)):
            cursor.execute(flag_sql, (instance,))

    def write_row_by_row(self, batch: Batch, partition_id: int) -> list[RejectedRow]:
        """Write a batch as `write` does, one row at a time, leaving out the rows the database rejects (returned).

        Each row has a savepoint of its own, so a rejected row undoes only itself; the rest and the position are
        committed together. Any other error (the connection) aborts the whole transaction as in `write`.
        """
        rejected: list[RejectedRow] = []
        with self.transaction() as cursor:
            self._delete_rows(cursor, batch)
            for table in schema.TABLES:
                sql = self._upsert(table, 1)
                for key, row in batch.rows[table.name].items():
                    cursor.execute("SAVEPOINT history_row")
                    try:
                        cursor.execute(sql, [row.get(c) for c in table.columns])
                    except Exception as e:
                        if not self.rejects_data(e):
                            raise
                        cursor.execute("ROLLBACK TO SAVEPOINT history_row")
                        position = batch.row_positions.get((table.name, key), batch.last_position)
                        rejected.append(RejectedRow(table.name, key, position, str(e).strip()))
                    cursor.execute("RELEASE SAVEPOINT history_row")
            self._finish_batch(cursor, batch, partition_id)
        return rejected

    def purge(self, cutoff_ms: int) -> int:
        """Remove instances that ended before ``cutoff_ms`` (with all their rows) and older decision instances."""
        p = self.placeholder
        removed = 0
        with self.transaction() as cursor:
            finished = _FINISHED.format(p=p)
            for table in _INSTANCE_CHILDREN:
                cursor.execute(f"DELETE FROM {table} WHERE process_instance_key IN ({finished})", (cutoff_ms,))
            cursor.execute(f"DELETE FROM process_instances WHERE end_date < {p}", (cutoff_ms,))
            removed += max(0, cursor.rowcount)
            cursor.execute(f"DELETE FROM decision_instances WHERE evaluation_date < {p}", (cutoff_ms,))
            removed += max(0, cursor.rowcount)
        return removed


class SqliteBackend(Backend):
    """A SQLite file in WAL mode: readers (the gateway) never wait for the writer."""

    placeholder = "?"
    key_type = "INTEGER PRIMARY KEY"

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._connection: sqlite3.Connection | None = None

    def connect(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Created private: SQLite gives its -wal and -shm files the database file's permissions.
        os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        connection.execute("PRAGMA journal_mode=WAL")
        # WAL with synchronous=NORMAL survives a killed process; only a power loss may drop the last batches,
        # which are then exported again (the position is in the same transaction).
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute("PRAGMA cache_size=-32000")  # 32 MB: the indexes' working set stays in memory
        self._connection = connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Cursor]:
        assert self._connection is not None, "not connected"
        cursor = self._connection.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        try:
            yield cursor
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")

    def rejects_data(self, error: BaseException) -> bool:
        # "database is locked", a full disk, a missing table are OperationalError: waited out and retried.
        data = (sqlite3.DataError, sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError)
        return isinstance(error, data) or super().rejects_data(error)


class PostgresBackend(Backend):
    """A PostgreSQL database (psycopg 3), shared by every broker of a cluster."""

    placeholder = "%s"
    key_type = "BIGINT PRIMARY KEY"

    def __init__(self, url: str, connect_timeout_s: float = 5.0) -> None:
        super().__init__()
        self.url = url
        self.connect_timeout_s = connect_timeout_s
        self._connection: Any = None

    def connect(self) -> None:
        import psycopg

        self._connection = psycopg.connect(
            self.url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s))
        )

    def close(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection.close()
            self._connection = None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        assert self._connection is not None, "not connected"
        with self._connection.transaction(), self._connection.cursor() as cursor:
            yield cursor

    def _lock_for_migration(self, cursor: Any) -> None:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))

    def rejects_data(self, error: BaseException) -> bool:
        import psycopg

        if isinstance(error, psycopg.DataError | psycopg.IntegrityError):
            return True  # SQLSTATE classes 22 and 23, and values psycopg refuses to send (a NUL in text)
        sqlstate = getattr(error, "sqlstate", None) or ""
        if isinstance(error, psycopg.ProgrammingError):
            # Class 42 (an undefined table or column, a missing privilege) is the schema's or the role's fault,
            # not the row's: it is retried until fixed rather than skipping every row.
            return not sqlstate.startswith("42")
        if sqlstate.startswith("54"):
            return True  # program limit exceeded: e.g. an index row larger than a btree page allows
        return super().rejects_data(error)


def open_backend(url: str) -> Backend:
    """The backend for a history URL (not yet connected)."""
    check_url(url)
    path = sqlite_path(url)
    return SqliteBackend(path) if path is not None else PostgresBackend(url)
