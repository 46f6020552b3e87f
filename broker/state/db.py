"""The partition's state store: one LMDB environment, one named sub-database per entity or index.

LMDB is opened without sync: durability comes from the fsynced log (state is rebuilt from a snapshot plus replay
after a crash), so syncing LMDB too would only cost time. Keys are fixed-width big-endian where order matters, so
range scans over due dates and deadlines are natural.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, TypeAlias

import lmdb
import msgpack

U64 = struct.Struct(">Q")
U32 = struct.Struct(">I")

SUB_DATABASES = (
    "meta",
    "processes",
    "process_versions",
    "process_bindings",
    "process_highest_versions",
    "process_running_instances",
    "element_instances",
    "element_children",
    "variables",
    "jobs",
    "activatable_jobs",
    "job_deadlines",
    "job_backoffs",
    "incidents",
    "incidents_by_element",
    "incidents_by_job",
    "event_triggers",
    "join_flows",
    "awaiting_results",
    "distributions",
    "timers",
    "timer_due_dates",
    "timers_by_scope",
    "messages",
    "message_deadlines",
    "messages_by_name",
    "message_ids",
    "message_correlations",
    "message_subscriptions",
    "message_subscriptions_by_name",
    "process_message_subscriptions",
    "message_start_subscriptions",
    "message_start_instances",
    "subscription_outbox",
    "signal_subscriptions",
    "signal_subscriptions_by_owner",
    "signal_receipts",
    "signal_receipt_times",
    "compensation_subscriptions",
    "decisions",
    "decision_versions",
    "decisions_by_drg",
    "decision_bindings",
    "decision_requirements",
    "decision_requirements_versions",
    "forms",
    "form_versions",
    "user_tasks",
    "user_tasks_by_element",
    "async_requests",
    "business_ids",
    "batch_operations",
    "batch_operation_chunks",
    "identities",
    "identity_members",
    "identity_memberships",
    "authorizations",
    "authorizations_by_owner",
)

DEFAULT_MAP_SIZE = 64 << 30

Txn: TypeAlias = "lmdb.Transaction[bytes]"
"""A state transaction. Weir never opens one with ``buffers=True``, so every read gives ``bytes`` (lmdb's bare
``Transaction`` type also admits memoryviews). A string: lmdb's classes are not subscriptable at run time."""

SubDb: TypeAlias = "lmdb._Database"
"""The handle of one named sub-database."""


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


unpack: Final[Callable[[bytes], Any]] = functools.partial(msgpack.unpackb, raw=False, strict_map_key=False)
"""A stored value decoded (a partial rather than a function: no Python frame for each of the many reads)."""


u64: Final[Callable[[int], bytes]] = U64.pack
"""An unsigned integer as an 8-byte big-endian key (sorted like the number); the struct's own method, since keys
are built dozens of times per command and a Python wrapper would double the cost of each."""


def read_u64(b: bytes, offset: int = 0) -> int:
    return U64.unpack_from(b, offset)[0]


class StateDb:
    """Owns the LMDB environment and the handles of its sub-databases."""

    def __init__(self, directory: Path, *, map_size: int = DEFAULT_MAP_SIZE) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.env = lmdb.open(
            str(directory),
            map_size=map_size,
            max_dbs=len(SUB_DATABASES) + 4,
            sync=False,
            metasync=False,
            readahead=False,
            writemap=False,
            lock=True,
        )
        self.dbs: dict[str, SubDb] = {}
        with self.env.begin(write=True) as txn:
            existing = {name for name in SUB_DATABASES if txn.get(name.encode()) is not None}
            for name in SUB_DATABASES:
                self.dbs[name] = self.env.open_db(name.encode(), txn=txn)
            if existing:  # state written by an older Weir: fill the indexes it did not keep yet
                for name, backfill in _BACKFILLS.items():
                    if name not in existing:
                        backfill(txn, self.dbs)

    def begin(self, *, write: bool = False, parent: Txn | None = None) -> Txn:
        return self.env.begin(write=write, parent=parent)

    def close(self) -> None:
        self.env.close()

    def dump(self) -> dict[str, list[tuple[bytes, bytes]]]:
        """Every sub-database's content, for replay-equals-processing checks."""
        out: dict[str, list[tuple[bytes, bytes]]] = {}
        with self.env.begin() as txn:
            for name, db in self.dbs.items():
                out[name] = list(txn.cursor(db=db).iternext())
        return out


def _count_running_instances(txn: Txn, dbs: dict[str, SubDb]) -> None:
    """``process_running_instances`` from the process instances a state already holds (their root element
    instances), so that a definition with instances started before the index existed still cannot be deleted."""
    counts: dict[int, int] = {}
    for _, raw in txn.cursor(db=dbs["element_instances"]).iternext():
        value = unpack(raw)["value"]
        if value.get("flowScopeKey", -1) <= 0:
            key = value["processDefinitionKey"]
            counts[key] = counts.get(key, 0) + 1
    for key, n in counts.items():
        txn.put(u64(key), u64(n), db=dbs["process_running_instances"])


# Sub-databases added after states were first written, with how to fill each from what such a state holds.
_BACKFILLS: dict[str, Callable[[Txn, dict[str, SubDb]], None]] = {"process_running_instances": _count_running_instances}


def prefix_scan(txn: Txn, db: SubDb, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """All entries whose key starts with ``prefix``, in key order."""
    cur = txn.cursor(db=db)
    if not cur.set_range(prefix):
        return
    for k, v in cur:
        if not k.startswith(prefix):
            return
        yield k, v


def prefix_keys(txn: Txn, db: SubDb, prefix: bytes) -> Iterator[bytes]:
    cur = txn.cursor(db=db)
    if not cur.set_range(prefix):
        return
    for k in cur.iternext(keys=True, values=False):
        if not k.startswith(prefix):
            return
        yield k
