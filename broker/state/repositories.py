"""Typed repositories over the state's sub-databases.

Processors read through these; only event appliers (broker/engine/appliers.py) call the mutating methods, so replay
and live processing change state in exactly the same way. Every repository keeps its own indexes consistent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any

from broker.protocol.values import TENANT
from broker.protocol.values import tenant_of as _tenant
from broker.state.db import StateDb, SubDb, Txn, pack, prefix_keys, prefix_scan, read_u64, u64, unpack
from broker.state.element_instance import ElementInstance

_META_APPLIED = b"last_applied_position"
_META_PROCESSED = b"last_processed_position"
_META_KEYS = b"key_counter"
_META_EXPORTERS = b"exporter_positions"
_META_PINNED_CLOCK = b"pinned_clock"


MAX_TEXT_KEY_BYTES = 160
"""Longest text (a name, type, id or correlation key) used as it is inside an index key. LMDB keys hold at most 511
bytes, and a key may combine three texts: longer texts are replaced by a fixed-width digest (see :func:`_text`)."""
_DIGEST = b"\xff"  # never starts (nor appears in) UTF-8 text, so a digest cannot equal or prefix a plain text


def _text(text: str) -> bytes:
    """A text as part of an index key: as it is when short, else a marker and its SHA-256 digest (33 bytes).

    Any length works that way. Where a lookup through a digest finds entries, callers compare the stored value's own
    text (:func:`_hashed`), so two texts with the same digest are never confused.
    """
    raw = text.encode()
    if len(raw) <= MAX_TEXT_KEY_BYTES:
        return raw
    return _DIGEST + hashlib.sha256(raw).digest()


_TENANT = b"\xfe"  # never in UTF-8 text either: another tenant's entry cannot equal or prefix the default tenant's


def _scoped(tenant_id: str, text: str) -> bytes:
    """A text that names something within a tenant (a process id, a message name, a job type), as part of an index key.

    The default tenant's texts are kept as they are (the layout of states written before tenants existed); another
    tenant's come behind a marker and the tenant id (letters, digits, ``_``, ``.``, ``-``: checked by the gateway), so
    two tenants never share an entry and a prefix scan within one tenant never reaches another's.
    """
    if tenant_id == TENANT:
        return _text(text)
    return _TENANT + tenant_id.encode() + b"\0" + _text(text)


def _hashed(*texts: str) -> bool:
    """Whether any of these texts is stored as a digest (so a lookup must compare the stored value too)."""
    return any(len(t) > MAX_TEXT_KEY_BYTES // 4 and len(t.encode()) > MAX_TEXT_KEY_BYTES for t in texts)


def due_entries(txn: Txn, db: SubDb, timestamp: int, limit: int) -> list[tuple[int, int]]:
    """``(due time, key)`` of an index keyed by (u64 due time, u64 key), due at or before ``timestamp``, earliest first.

    The index is ordered by due time, so this reads only what is due (plus one entry), however many are pending.
    """
    out: list[tuple[int, int]] = []
    cur = txn.cursor(db=db)
    if not cur.first():
        return out
    for k in cur.iternext(keys=True, values=False):
        due = read_u64(k)
        if due > timestamp or len(out) >= limit:
            break
        out.append((due, read_u64(k, 8)))
    return out


class _Repository:
    __slots__ = ("_db", "_sdb", "txn")

    def __init__(self, sdb: StateDb, name: str) -> None:
        self._sdb = sdb
        self._db = sdb.dbs[name]
        self.txn: Txn = None  # type: ignore[assignment]


class MetaState(_Repository):
    """Positions, the key counter and the pinned clock: written in the same transaction as the state they describe."""

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "meta")

    def _get(self, name: bytes) -> int:
        v = self.txn.get(name, db=self._db)
        return read_u64(v) if v else 0

    def last_applied_position(self) -> int:
        return self._get(_META_APPLIED)

    def last_processed_position(self) -> int:
        return self._get(_META_PROCESSED)

    def key_counter(self) -> int:
        return self._get(_META_KEYS)

    def exporter_positions(self) -> dict[str, int]:
        """Acknowledged position per exporter id, persisted with the state (and so with every snapshot)."""
        v = self.txn.get(_META_EXPORTERS, db=self._db)
        return dict(unpack(v)) if v else {}

    def set_exporter_positions(self, positions: dict[str, int]) -> None:
        self.txn.put(_META_EXPORTERS, pack(positions), db=self._db)

    def set_positions(self, applied: int, processed: int, key_counter: int) -> None:
        self.txn.put(_META_APPLIED, u64(applied), db=self._db)
        self.txn.put(_META_PROCESSED, u64(processed), db=self._db)
        self.txn.put(_META_KEYS, u64(key_counter), db=self._db)

    def pinned_clock(self) -> int | None:
        """The time (epoch ms) the stream clock is pinned at by a CLOCK PINNED event; None: it follows the leader."""
        v = self.txn.get(_META_PINNED_CLOCK, db=self._db)
        return read_u64(v) if v else None

    def pin_clock(self, time_ms: int) -> None:
        self.txn.put(_META_PINNED_CLOCK, u64(time_ms), db=self._db)

    def reset_clock(self) -> None:
        self.txn.delete(_META_PINNED_CLOCK, db=self._db)


def _version_key(tenant_id: str, resource_id: str, version: int) -> bytes:
    """The key of a versions index: (tenant-scoped id, u32 version) → the version's key."""
    return _scoped(tenant_id, resource_id) + b"\0" + version.to_bytes(4, "big")


def _latest_version(
    owner: Any, versions: SubDb, scoped_id: bytes, id_field: str, resource_id: str, below: int = 0xFFFFFFFF
) -> dict[str, Any] | None:
    """The highest version under ``below`` in an index keyed by (scoped id, u32 version) → key, read through
    ``owner.get`` (deleted versions leave gaps)."""
    cur = owner.txn.cursor(db=versions)
    prefix = scoped_id + b"\0"
    if cur.set_range(prefix + max(below, 0).to_bytes(4, "big")):
        if not cur.prev():
            return None
    elif not cur.last():
        return None
    k = cur.key()
    if not k.startswith(prefix) or len(k) != len(prefix) + 4:
        return None
    found: dict[str, Any] | None = owner.get(read_u64(cur.value()))
    if found is not None and found[id_field] != resource_id:
        return None
    return found


class Bindings:
    """The binding indexes of a versioned resource (processes for call activities, decisions for business rule
    tasks): (id, version tag) → the latest version carrying the tag, (id, deployment key) → the version that
    deployment created. ``owner`` is the repository of the resources (its ``txn`` and ``get``)."""

    __slots__ = ("_db", "_id_field", "_owner")

    def __init__(self, owner: Any, db: SubDb, id_field: str) -> None:
        self._owner = owner
        self._db = db
        self._id_field = id_field

    @staticmethod
    def _tag_key(tenant_id: str, resource_id: str, version_tag: str) -> bytes:
        return b"T" + _scoped(tenant_id, resource_id) + b"\0" + _text(version_tag)

    @staticmethod
    def _deployment_key(tenant_id: str, resource_id: str, deployment_key: int) -> bytes:
        return b"D" + _scoped(tenant_id, resource_id) + b"\0" + u64(deployment_key)

    def _bound(self, index_key: bytes, resource_id: str) -> dict[str, Any] | None:
        v = self._owner.txn.get(index_key, db=self._db)
        found = self._owner.get(read_u64(v)) if v is not None else None
        return found if found is not None and found[self._id_field] == resource_id else None

    def with_version_tag(self, tenant_id: str, resource_id: str, version_tag: str) -> dict[str, Any] | None:
        """The latest version of ``resource_id`` in the tenant deployed with ``version_tag``."""
        found = self._bound(self._tag_key(tenant_id, resource_id, version_tag), resource_id)
        return found if found is not None and found.get("versionTag") == version_tag else None

    def in_deployment(self, tenant_id: str, resource_id: str, deployment_key: int) -> dict[str, Any] | None:
        """The version of ``resource_id`` in the tenant that deployment ``deployment_key`` created."""
        return self._bound(self._deployment_key(tenant_id, resource_id, deployment_key), resource_id)

    def add(self, key: int, value: dict[str, Any]) -> None:
        """Index a newly stored version."""
        resource_id, tenant_id, txn = value[self._id_field], _tenant(value), self._owner.txn
        if value.get("deploymentKey", -1) > 0:
            txn.put(self._deployment_key(tenant_id, resource_id, value["deploymentKey"]), u64(key), db=self._db)
        tag = value.get("versionTag")
        if tag:
            tagged = self.with_version_tag(tenant_id, resource_id, tag)
            if tagged is None or tagged["version"] <= value["version"]:
                txn.put(self._tag_key(tenant_id, resource_id, tag), u64(key), db=self._db)

    def remove(self, key: int, value: dict[str, Any]) -> None:
        """Drop the indexes that point at this (deleted) version."""
        resource_id, tenant_id, txn = value[self._id_field], _tenant(value), self._owner.txn
        indexes = [self._tag_key(tenant_id, resource_id, value.get("versionTag") or "")]
        if value.get("deploymentKey", -1) > 0:
            indexes.append(self._deployment_key(tenant_id, resource_id, value["deploymentKey"]))
        for index in indexes:
            v = txn.get(index, db=self._db)
            if v is not None and read_u64(v) == key:
                txn.delete(index, db=self._db)


class ProcessState(_Repository):
    """Deployed process definitions, by key, by (tenant, process id, version), and for call activities' bindings by
    (tenant, process id, version tag) (the latest version carrying the tag) and (tenant, process id, deployment key).

    Also kept: the highest version each process id of a tenant ever had (as in Zeebe, a version is never given twice,
    even after its definition was deleted) and how many process instances of each definition run (a definition with
    running instances cannot be deleted). Each tenant has its own versions of a process id.
    """

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "processes")
        self._versions = sdb.dbs["process_versions"]
        self._bindings = Bindings(self, sdb.dbs["process_bindings"], "bpmnProcessId")
        self._highest = sdb.dbs["process_highest_versions"]
        self._running = sdb.dbs["process_running_instances"]

    def with_version_tag(self, tenant_id: str, process_id: str, version_tag: str) -> dict[str, Any] | None:
        """The latest version of ``process_id`` deployed with ``version_tag``."""
        return self._bindings.with_version_tag(tenant_id, process_id, version_tag)

    def in_deployment(self, tenant_id: str, process_id: str, deployment_key: int) -> dict[str, Any] | None:
        """The version of ``process_id`` that deployment ``deployment_key`` created."""
        return self._bindings.in_deployment(tenant_id, process_id, deployment_key)

    def get(self, key: int) -> dict[str, Any] | None:
        v = self.txn.get(u64(key), db=self._db)
        return unpack(v) if v else None

    def key_of(self, tenant_id: str, process_id: str, version: int) -> int | None:
        v = self.txn.get(_version_key(tenant_id, process_id, version), db=self._versions)
        if v is None:
            return None
        key = read_u64(v)
        if _hashed(process_id) and (self.get(key) or {}).get("bpmnProcessId") != process_id:
            return None
        return key

    def latest(self, tenant_id: str, process_id: str) -> dict[str, Any] | None:
        return _latest_version(self, self._versions, _scoped(tenant_id, process_id), "bpmnProcessId", process_id)

    def version_before(self, tenant_id: str, process_id: str, version: int) -> dict[str, Any] | None:
        """The highest stored version of ``process_id`` below ``version`` (deleted versions leave gaps)."""
        scoped = _scoped(tenant_id, process_id)
        return _latest_version(self, self._versions, scoped, "bpmnProcessId", process_id, below=version)

    def next_version(self, tenant_id: str, process_id: str) -> int:
        """The version a new deployment of ``process_id`` in the tenant gets: one above any it ever had."""
        latest = self.latest(tenant_id, process_id)
        return max(self._highest_version(tenant_id, process_id), latest["version"] if latest is not None else 0) + 1

    def _highest_version(self, tenant_id: str, process_id: str) -> int:
        v = self.txn.get(_scoped(tenant_id, process_id), db=self._highest)
        highest = unpack(v) if v else None
        return highest[1] if highest is not None and highest[0] == process_id else 0

    def put(self, process: dict[str, Any]) -> None:
        key, process_id = process["processDefinitionKey"], process["bpmnProcessId"]
        tenant_id = _tenant(process)
        self.txn.put(u64(key), pack(process), db=self._db)
        self.txn.put(_version_key(tenant_id, process_id, process["version"]), u64(key), db=self._versions)
        self._bindings.add(key, process)
        if process["version"] > self._highest_version(tenant_id, process_id):
            self.txn.put(_scoped(tenant_id, process_id), pack([process_id, process["version"]]), db=self._highest)

    def remove(self, process: dict[str, Any]) -> None:
        """Forget a deleted definition; its version stays taken."""
        key = process["processDefinitionKey"]
        self.txn.delete(u64(key), db=self._db)
        index = _version_key(_tenant(process), process["bpmnProcessId"], process["version"])
        v = self.txn.get(index, db=self._versions)
        if v is not None and read_u64(v) == key:
            self.txn.delete(index, db=self._versions)
        self._bindings.remove(key, process)
        self.txn.delete(u64(key), db=self._running)

    def running_instances(self, key: int) -> int:
        """How many process instances of definition ``key`` run on this partition (called ones included)."""
        v = self.txn.get(u64(key), db=self._running)
        return read_u64(v) if v else 0

    def count_instance(self, key: int, delta: int) -> None:
        n = self.running_instances(key) + delta
        if n > 0:
            self.txn.put(u64(key), u64(n), db=self._running)
        else:
            self.txn.delete(u64(key), db=self._running)


_ABSENT: Any = object()


class ElementInstanceState(_Repository):
    """Element instances (process instances are the root ones) and their parent/child index.

    Every command reads and rewrites the same few instances several times (each applied event changes one counter or
    state), so decoded instances are kept for the processing round and written back once per command by
    :meth:`flush`. Instances are frozen, so callers can share them. The parent/child index is written through.
    Whoever commits a transaction these writes belong in calls :meth:`PartitionState.flush` first.
    """

    __slots__ = ("_cache", "_children", "_dirty")

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "element_instances")
        self._children = sdb.dbs["element_children"]
        self._cache: dict[int, ElementInstance | None] = {}
        self._dirty: set[int] = set()

    def get(self, key: int) -> ElementInstance | None:
        instance = self._cache.get(key, _ABSENT)
        if instance is _ABSENT:
            v = self.txn.get(u64(key), db=self._db)
            instance = ElementInstance.from_dict(unpack(v)) if v else None
            self._cache[key] = instance
        return instance  # type: ignore[return-value]

    def children(self, key: int) -> list[int]:
        return [read_u64(k, 8) for k in prefix_keys(self.txn, self._children, u64(key))]

    def put(self, instance: ElementInstance) -> None:
        self._cache[instance.key] = instance
        self._dirty.add(instance.key)

    def add(self, instance: ElementInstance) -> None:
        self.put(instance)
        parent = instance.value.flow_scope_key
        if parent > 0:
            self.txn.put(u64(parent) + u64(instance.key), b"", db=self._children)

    def remove(self, key: int) -> ElementInstance | None:
        instance = self.get(key)
        if instance is None:
            return None
        self._cache[key] = None
        self._dirty.add(key)
        parent = instance.value.flow_scope_key
        if parent > 0:
            self.txn.delete(u64(parent) + u64(key), db=self._children)
        return instance

    def flush(self) -> None:
        """Write the instances changed since the last flush into the bound transaction."""
        cache, txn, db = self._cache, self.txn, self._db
        for key in self._dirty:
            instance = cache[key]
            if instance is None:
                txn.delete(u64(key), db=db)
            else:
                txn.put(u64(key), pack(instance.to_dict()), db=db)
        self._dirty.clear()

    def discard(self) -> None:
        """Forget cached instances (the transaction they came from was aborted or ended)."""
        self._cache.clear()
        self._dirty.clear()

    @property
    def has_unflushed_writes(self) -> bool:
        return bool(self._dirty)


class VariableState(_Repository):
    """Variables by (scope key, name); values stored as decoded JSON values."""

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "variables")

    def get_local(self, scope_key: int, name: str) -> tuple[int, Any] | None:
        """``(variable key, value)`` of a variable defined exactly at this scope."""
        v = self.txn.get(u64(scope_key) + _text(name), db=self._db)
        if v is None:
            return None
        stored = unpack(v)
        if len(stored) > 2 and stored[2] != name:
            return None  # another name with the same digest
        return stored[0], stored[1]

    def local(self, scope_key: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in prefix_scan(self.txn, self._db, u64(scope_key)):
            stored = unpack(v)
            out[stored[2] if len(stored) > 2 else k[8:].decode()] = stored[1]
        return out

    def put(self, scope_key: int, name: str, var_key: int, value: Any) -> None:
        # a long name is keyed by its digest, so the entry keeps the name itself
        entry = [var_key, value, name] if _hashed(name) else [var_key, value]
        self.txn.put(u64(scope_key) + _text(name), pack(entry), db=self._db)

    def remove_scope(self, scope_key: int) -> None:
        for k in list(prefix_keys(self.txn, self._db, u64(scope_key))):
            self.txn.delete(k, db=self._db)


class JobState(_Repository):
    """Jobs with their lifecycle state, plus the activatable, deadline and back-off indexes."""

    ACTIVATABLE = "ACTIVATABLE"
    ACTIVATED = "ACTIVATED"
    FAILED = "FAILED"
    ERROR_THROWN = "ERROR_THROWN"

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "jobs")
        self._activatable = sdb.dbs["activatable_jobs"]
        self._deadlines = sdb.dbs["job_deadlines"]
        self._backoffs = sdb.dbs["job_backoffs"]

    def get(self, key: int) -> dict[str, Any] | None:
        """``{"state": ..., "value": job record value}`` or None."""
        v = self.txn.get(u64(key), db=self._db)
        return unpack(v) if v else None

    def activatable_keys(
        self,
        tenant_id: str,
        job_type: str,
        limit: int,
        accept: Callable[[dict], bool] | None = None,
        max_scanned: int = 0,
    ) -> list[int]:
        """Up to ``limit`` activatable jobs of ``job_type`` in the tenant, oldest first; with ``accept``, only jobs
        it accepts, looking at no more than ``max_scanned`` entries (0: no bound)."""
        out: list[int] = []
        exact = _hashed(job_type)
        scanned = 0
        for k in prefix_keys(self.txn, self._activatable, _scoped(tenant_id, job_type) + b"\0"):
            key = read_u64(k, len(k) - 8)
            if exact or accept is not None:
                scanned += 1
                if max_scanned and scanned > max_scanned:
                    break
                job = self.get(key)
                if job is None or job["value"]["type"] != job_type:
                    continue
                if accept is not None and not accept(job["value"]):
                    continue
            out.append(key)
            if len(out) >= limit:
                break
        return out

    def deadlines_before(self, timestamp: int, limit: int) -> list[tuple[int, int]]:
        """``(deadline, job key)`` pairs due at or before ``timestamp``, earliest first."""
        return self._due(self._deadlines, timestamp, limit)

    def backoffs_before(self, timestamp: int, limit: int) -> list[tuple[int, int]]:
        return self._due(self._backoffs, timestamp, limit)

    def _due(self, db: SubDb, timestamp: int, limit: int) -> list[tuple[int, int]]:
        return due_entries(self.txn, db, timestamp, limit)

    @staticmethod
    def _index_key(value: dict[str, Any], key: int) -> bytes:
        return _scoped(_tenant(value), value["type"]) + b"\0" + u64(key)

    def _clear_indexes(self, key: int, job: dict[str, Any]) -> None:
        value = job["value"]
        self.txn.delete(self._index_key(value, key), db=self._activatable)
        if value.get("deadline", -1) > 0:
            self.txn.delete(u64(value["deadline"]) + u64(key), db=self._deadlines)
        if value.get("recurringTime", -1) > 0:
            self.txn.delete(u64(value["recurringTime"]) + u64(key), db=self._backoffs)

    def put(self, key: int, state: str, value: dict[str, Any]) -> None:
        """Store the job in ``state``, moving it between indexes as the state requires."""
        old = self.get(key)
        if old is not None:
            self._clear_indexes(key, old)
        self.txn.put(u64(key), pack({"state": state, "value": value}), db=self._db)
        if state == self.ACTIVATABLE:
            self.txn.put(self._index_key(value, key), b"", db=self._activatable)
        elif state == self.ACTIVATED and value.get("deadline", -1) > 0:
            self.txn.put(u64(value["deadline"]) + u64(key), b"", db=self._deadlines)
        elif state == self.FAILED and value.get("recurringTime", -1) > 0:
            self.txn.put(u64(value["recurringTime"]) + u64(key), b"", db=self._backoffs)

    def remove(self, key: int) -> None:
        old = self.get(key)
        if old is None:
            return
        self._clear_indexes(key, old)
        self.txn.delete(u64(key), db=self._db)


class IncidentState(_Repository):
    """Open incidents, findable by key, by element instance and by job."""

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "incidents")
        self._by_element = sdb.dbs["incidents_by_element"]
        self._by_job = sdb.dbs["incidents_by_job"]

    def get(self, key: int) -> dict[str, Any] | None:
        v = self.txn.get(u64(key), db=self._db)
        return unpack(v) if v else None

    def for_element(self, element_instance_key: int) -> int | None:
        v = self.txn.get(u64(element_instance_key), db=self._by_element)
        return read_u64(v) if v else None

    def for_job(self, job_key: int) -> int | None:
        v = self.txn.get(u64(job_key), db=self._by_job)
        return read_u64(v) if v else None

    def put(self, key: int, value: dict[str, Any]) -> None:
        self.txn.put(u64(key), pack(value), db=self._db)
        if value.get("jobKey", -1) > 0:
            self.txn.put(u64(value["jobKey"]), u64(key), db=self._by_job)
        else:
            self.txn.put(u64(value["elementInstanceKey"]), u64(key), db=self._by_element)

    def remove(self, key: int) -> None:
        value = self.get(key)
        if value is None:
            return
        self.txn.delete(u64(key), db=self._db)
        if value.get("jobKey", -1) > 0:
            self.txn.delete(u64(value["jobKey"]), db=self._by_job)
        else:
            self.txn.delete(u64(value["elementInstanceKey"]), db=self._by_element)


class KeyedBlobState(_Repository):
    """A small map from an entity key to a msgpack value (event triggers, awaited results)."""

    def get(self, key: int) -> Any:
        v = self.txn.get(u64(key), db=self._db)
        return unpack(v) if v else None

    def put(self, key: int, value: Any) -> None:
        self.txn.put(u64(key), pack(value), db=self._db)

    def remove(self, key: int) -> None:
        self.txn.delete(u64(key), db=self._db)


class BusinessIdState(_Repository):
    """The active root process instances that carry a business id, by (tenant, process id, business id, instance
    key): what the uniqueness check of instance creation reads. Every such instance is indexed, so switching the check
    on later sees the duplicates created while it was off. Children started by call activities are not indexed (as in
    Zeebe)."""

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "business_ids")

    @staticmethod
    def _prefix(tenant_id: str, process_id: str, business_id: str) -> bytes:
        return b"\x00".join((_text(tenant_id), _text(process_id), _text(business_id), b""))

    def active(self, tenant_id: str, process_id: str, business_id: str) -> int | None:
        """The key of an active root instance with this business id, or None."""
        wanted = [tenant_id, process_id, business_id]
        for k, v in prefix_scan(self.txn, self._db, self._prefix(tenant_id, process_id, business_id)):
            if unpack(v) == wanted:  # the stored texts decide (digests, separators inside texts)
                return read_u64(k, len(k) - 8)
        return None

    def put(self, tenant_id: str, process_id: str, business_id: str, instance_key: int) -> None:
        key = self._prefix(tenant_id, process_id, business_id) + u64(instance_key)
        self.txn.put(key, pack([tenant_id, process_id, business_id]), db=self._db)

    def remove(self, tenant_id: str, process_id: str, business_id: str, instance_key: int) -> None:
        self.txn.delete(self._prefix(tenant_id, process_id, business_id) + u64(instance_key), db=self._db)


class UserTaskState(_Repository):
    """Native user tasks by key, findable by their element instance.

    An entry is ``{"state": lifecycle state, "value": the task as last settled, "transition": None or {"value": what
    the transition moves it to (with listener corrections; at creation, with the modelled assignee, assigned once the
    task is created), "listener": how many of the transition's listeners completed}}``.
    """

    CREATING = "CREATING"
    CREATED = "CREATED"
    ASSIGNING = "ASSIGNING"
    CLAIMING = "CLAIMING"
    UPDATING = "UPDATING"
    COMPLETING = "COMPLETING"
    CANCELING = "CANCELING"

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "user_tasks")
        self._by_element = sdb.dbs["user_tasks_by_element"]

    def get(self, key: int) -> dict[str, Any] | None:
        v = self.txn.get(u64(key), db=self._db)
        return unpack(v) if v else None

    def for_element(self, element_instance_key: int) -> int | None:
        v = self.txn.get(u64(element_instance_key), db=self._by_element)
        return read_u64(v) if v else None

    def put(self, key: int, entry: dict[str, Any]) -> None:
        self.txn.put(u64(key), pack(entry), db=self._db)
        self.txn.put(u64(entry["value"]["elementInstanceKey"]), u64(key), db=self._by_element)

    def remove(self, key: int) -> None:
        entry = self.get(key)
        if entry is None:
            return
        self.txn.delete(u64(key), db=self._db)
        self.txn.delete(u64(entry["value"]["elementInstanceKey"]), db=self._by_element)


class SignalReceiptState(_Repository):
    """Keys of signals broadcast elsewhere and received here, so a redelivery triggers nothing twice.

    Redeliveries stop once the broadcasting partition has the acknowledgement, so a receipt is only needed for a while;
    receipts are indexed by the record time they were written at and dropped after a retention period.
    """

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "signal_receipts")
        self._by_time = sdb.dbs["signal_receipt_times"]

    def get(self, key: int) -> Any:
        """The partition the signal came from, or None when it was not received here (or long ago)."""
        v = self.txn.get(u64(key), db=self._db)
        if not v:
            return None
        value = unpack(v)
        return value[0] if isinstance(value, list) else value  # receipts written before the index kept the origin only

    def put(self, key: int, origin: int, timestamp: int) -> None:
        self.txn.put(u64(key), pack([origin, timestamp]), db=self._db)
        self.txn.put(u64(max(timestamp, 0)) + u64(key), b"", db=self._by_time)

    def prune(self, before: int) -> None:
        """Forget receipts written before record time ``before``."""
        for due, key in due_entries(self.txn, self._by_time, before - 1, 10_000):
            self.txn.delete(u64(key), db=self._db)
            self.txn.delete(u64(due) + u64(key), db=self._by_time)


class DistributionState(_Repository):
    """Commands this partition still has to deliver to other partitions, by (distribution key, partition)."""

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "distributions")

    @staticmethod
    def _key(distribution_key: int, partition_id: int) -> bytes:
        return u64(distribution_key) + partition_id.to_bytes(4, "big")

    def put(self, distribution_key: int, partition_id: int, value: dict[str, Any]) -> None:
        self.txn.put(self._key(distribution_key, partition_id), pack(value), db=self._db)

    def get(self, distribution_key: int, partition_id: int) -> dict[str, Any] | None:
        v = self.txn.get(self._key(distribution_key, partition_id), db=self._db)
        return unpack(v) if v else None

    def remove(self, distribution_key: int, partition_id: int) -> None:
        self.txn.delete(self._key(distribution_key, partition_id), db=self._db)

    def pending_for(self, distribution_key: int) -> bool:
        """Whether some partition still waits for the distribution ``distribution_key``."""
        return next(prefix_keys(self.txn, self._db, u64(distribution_key)), None) is not None

    def pending(self, limit: int = 1000) -> list[tuple[int, int, dict[str, Any]]]:
        """``(distribution key, partition, value)`` still waiting for their acknowledgement, oldest first."""
        out = []
        for k, v in self.txn.cursor(db=self._db):
            out.append((read_u64(k), int.from_bytes(k[8:12], "big"), unpack(v)))
            if len(out) >= limit:
                break
        return out


class JoinState(_Repository):
    """Sequence flows taken into a parallel join, counted per flow-scope instance, join and flow."""

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "join_flows")

    def _key(self, scope_key: int, gateway_id: str, flow_id: str) -> bytes:
        return u64(scope_key) + _text(gateway_id) + b"\0" + _text(flow_id)

    def count(self, scope_key: int, gateway_id: str, flow_id: str) -> int:
        v = self.txn.get(self._key(scope_key, gateway_id, flow_id), db=self._db)
        return int.from_bytes(v, "big") if v else 0

    def add(self, scope_key: int, gateway_id: str, flow_id: str, delta: int) -> None:
        k = self._key(scope_key, gateway_id, flow_id)
        n = self.count(scope_key, gateway_id, flow_id) + delta
        if n <= 0:
            self.txn.delete(k, db=self._db)
        else:
            self.txn.put(k, n.to_bytes(4, "big"), db=self._db)

    def remove_scope(self, scope_key: int) -> None:
        for k in list(prefix_keys(self.txn, self._db, u64(scope_key))):
            self.txn.delete(k, db=self._db)


class TimerState(_Repository):
    """Pending timers by key, by due date (for the leader's checker) and by the scope that owns them.

    A timer's owner is the element instance it waits in (catch event, activity with boundary timers) or, for timer
    start events, the process definition.
    """

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "timers")
        self._due = sdb.dbs["timer_due_dates"]
        self._by_scope = sdb.dbs["timers_by_scope"]

    @staticmethod
    def owner(value: dict[str, Any]) -> int:
        key = value.get("elementInstanceKey", -1)
        return key if key > 0 else value["processDefinitionKey"]

    def get(self, key: int) -> dict[str, Any] | None:
        v = self.txn.get(u64(key), db=self._db)
        return unpack(v) if v else None

    def put(self, key: int, value: dict[str, Any]) -> None:
        self.txn.put(u64(key), pack(value), db=self._db)
        self.txn.put(u64(value["dueDate"]) + u64(key), b"", db=self._due)
        self.txn.put(u64(self.owner(value)) + u64(key), b"", db=self._by_scope)

    def remove(self, key: int) -> None:
        value = self.get(key)
        if value is None:
            return
        self.txn.delete(u64(key), db=self._db)
        self.txn.delete(u64(value["dueDate"]) + u64(key), db=self._due)
        self.txn.delete(u64(self.owner(value)) + u64(key), db=self._by_scope)

    def of_owner(self, owner_key: int) -> list[int]:
        return [read_u64(k, 8) for k in prefix_keys(self.txn, self._by_scope, u64(owner_key))]

    def due_before(self, timestamp: int, limit: int) -> list[tuple[int, int]]:
        """``(due date, timer key)`` pairs due at or before ``timestamp``, earliest first."""
        return due_entries(self.txn, self._due, timestamp, limit)


def _name_key(tenant_id: str, name: str, correlation_key: str) -> bytes:
    return _scoped(tenant_id, name) + b"\0" + _text(correlation_key) + b"\0"


def _same_message(value: dict[str, Any] | None, name: str, correlation_key: str) -> bool:
    return value is not None and value["name"] == name and value["correlationKey"] == correlation_key


class MessageState(_Repository):
    """Buffered messages (on the partition their correlation key hashes to), their TTL deadlines and ids.

    ``message_correlations`` remembers which process instances (and, for start events, which process ids) a message
    already reached, so it reaches each at most once.
    """

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "messages")
        self._deadlines = sdb.dbs["message_deadlines"]
        self._by_name = sdb.dbs["messages_by_name"]
        self._ids = sdb.dbs["message_ids"]
        self._correlations = sdb.dbs["message_correlations"]

    def get(self, key: int) -> dict[str, Any] | None:
        v = self.txn.get(u64(key), db=self._db)
        return unpack(v) if v else None

    @staticmethod
    def _id_key(value: dict[str, Any]) -> bytes:
        return _name_key(_tenant(value), value["name"], value["correlationKey"]) + _text(value["messageId"])

    def key_of_id(self, tenant_id: str, name: str, correlation_key: str, message_id: str) -> int | None:
        v = self.txn.get(_name_key(tenant_id, name, correlation_key) + _text(message_id), db=self._ids)
        if v is None:
            return None
        key = read_u64(v)
        if _hashed(name, correlation_key, message_id):
            found = self.get(key)
            if found is None or (found["name"], found["correlationKey"], found["messageId"]) != (
                name,
                correlation_key,
                message_id,
            ):
                return None
        return key

    def put(self, key: int, value: dict[str, Any]) -> None:
        self.txn.put(u64(key), pack(value), db=self._db)
        self.txn.put(u64(value["deadline"]) + u64(key), b"", db=self._deadlines)
        by_name = _name_key(_tenant(value), value["name"], value["correlationKey"]) + u64(key)
        self.txn.put(by_name, b"", db=self._by_name)
        if value.get("messageId"):
            self.txn.put(self._id_key(value), u64(key), db=self._ids)

    def remove(self, key: int) -> None:
        value = self.get(key)
        if value is None:
            return
        self.txn.delete(u64(key), db=self._db)
        self.txn.delete(u64(value["deadline"]) + u64(key), db=self._deadlines)
        self.txn.delete(_name_key(_tenant(value), value["name"], value["correlationKey"]) + u64(key), db=self._by_name)
        if value.get("messageId"):
            self.txn.delete(self._id_key(value), db=self._ids)
        for k in list(prefix_keys(self.txn, self._correlations, u64(key))):
            self.txn.delete(k, db=self._correlations)

    def keys_for(self, tenant_id: str, name: str, correlation_key: str) -> list[int]:
        """Buffered messages of the tenant with this name and correlation key, oldest first."""
        prefix = _name_key(tenant_id, name, correlation_key)
        keys = [read_u64(k, len(prefix)) for k in prefix_keys(self.txn, self._by_name, prefix)]
        if _hashed(name, correlation_key):
            keys = [k for k in keys if _same_message(self.get(k), name, correlation_key)]
        return keys

    def deadlines_before(self, timestamp: int, limit: int) -> list[tuple[int, int]]:
        return due_entries(self.txn, self._deadlines, timestamp, limit)

    def correlated(self, key: int, target: str) -> bool:
        """Whether the message already reached ``target`` (a process instance key or a process id, as text)."""
        return self.txn.get(u64(key) + _text(target), db=self._correlations) is not None

    def mark_correlated(self, key: int, target: str) -> None:
        if self.get(key) is not None:
            self.txn.put(u64(key) + _text(target), b"", db=self._correlations)

    def unmark_correlated(self, key: int, target: str) -> None:
        self.txn.delete(u64(key) + _text(target), db=self._correlations)


class MessageSubscriptionState(_Repository):
    """The message partition's copy of subscriptions, by (element instance, message name) and by correlation key."""

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "message_subscriptions")
        self._by_name = sdb.dbs["message_subscriptions_by_name"]

    @staticmethod
    def _key(element_instance_key: int, name: str) -> bytes:
        return u64(element_instance_key) + _text(name)

    def get(self, element_instance_key: int, name: str) -> dict[str, Any] | None:
        v = self.txn.get(self._key(element_instance_key, name), db=self._db)
        found = unpack(v) if v else None
        return found if found is not None and found["messageName"] == name else None

    def put(self, value: dict[str, Any]) -> None:
        eik, name = value["elementInstanceKey"], value["messageName"]
        self.txn.put(self._key(eik, name), pack(value), db=self._db)
        self.txn.put(_name_key(_tenant(value), name, value["correlationKey"]) + u64(eik), b"", db=self._by_name)

    def remove(self, element_instance_key: int, name: str) -> None:
        value = self.get(element_instance_key, name)
        if value is None:
            return
        self.txn.delete(self._key(element_instance_key, name), db=self._db)
        index = _name_key(_tenant(value), name, value["correlationKey"]) + u64(element_instance_key)
        self.txn.delete(index, db=self._by_name)

    def for_correlation(self, tenant_id: str, name: str, correlation_key: str) -> list[dict[str, Any]]:
        """The tenant's subscriptions waiting for a message with this name and correlation key."""
        prefix = _name_key(tenant_id, name, correlation_key)
        out = []
        for k in prefix_keys(self.txn, self._by_name, prefix):
            found = self.get(read_u64(k, len(prefix)), name)
            if found is not None and found["correlationKey"] == correlation_key:
                out.append(found)
        return out


class ProcessMessageSubscriptionState(_Repository):
    """The instance partition's subscriptions of waiting elements, by (element instance, message name)."""

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "process_message_subscriptions")

    def get(self, element_instance_key: int, name: str) -> dict[str, Any] | None:
        v = self.txn.get(u64(element_instance_key) + _text(name), db=self._db)
        found = unpack(v) if v else None
        return found if found is not None and found["messageName"] == name else None

    def put(self, value: dict[str, Any]) -> None:
        key = u64(value["elementInstanceKey"]) + _text(value["messageName"])
        self.txn.put(key, pack(value), db=self._db)

    def remove(self, element_instance_key: int, name: str) -> None:
        self.txn.delete(u64(element_instance_key) + _text(name), db=self._db)

    def of_element(self, element_instance_key: int) -> list[dict[str, Any]]:
        return [unpack(v) for _, v in prefix_scan(self.txn, self._db, u64(element_instance_key))]


class MessageStartState(_Repository):
    """Message start event subscriptions of deployed processes, and the instance each correlation key runs."""

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "message_start_subscriptions")
        self._instances = sdb.dbs["message_start_instances"]

    @staticmethod
    def _key(value: dict[str, Any]) -> bytes:
        return _scoped(_tenant(value), value["messageName"]) + b"\0" + u64(value["processDefinitionKey"])

    def put(self, value: dict[str, Any]) -> None:
        self.txn.put(self._key(value), pack(value), db=self._db)

    def remove(self, value: dict[str, Any]) -> None:
        self.txn.delete(self._key(value), db=self._db)

    def for_name(self, tenant_id: str, name: str) -> list[dict[str, Any]]:
        """The tenant's processes that a message with this name starts."""
        found = [unpack(v) for _, v in prefix_scan(self.txn, self._db, _scoped(tenant_id, name) + b"\0")]
        return [f for f in found if f["messageName"] == name]

    def for_process(self, tenant_id: str, process_id: str) -> list[dict[str, Any]]:
        found = (unpack(v) for _, v in self.txn.cursor(db=self._db))
        return [f for f in found if f["bpmnProcessId"] == process_id and _tenant(f) == tenant_id]

    @staticmethod
    def _lock(tenant_id: str, process_id: str, correlation_key: str) -> bytes:
        return b"K" + _scoped(tenant_id, process_id) + b"\0" + _text(correlation_key)

    def active_instance(self, tenant_id: str, process_id: str, correlation_key: str) -> int | None:
        v = self.txn.get(self._lock(tenant_id, process_id, correlation_key), db=self._instances)
        if v is None:
            return None
        key = read_u64(v)
        if _hashed(process_id, correlation_key):
            held = self.txn.get(b"I" + u64(key), db=self._instances)
            if held is None or unpack(held)[:2] != [process_id, correlation_key]:
                return None
        return key

    def lock(self, tenant_id: str, process_id: str, correlation_key: str, instance_key: int) -> None:
        self.txn.put(self._lock(tenant_id, process_id, correlation_key), u64(instance_key), db=self._instances)
        held = [process_id, correlation_key] if tenant_id == TENANT else [process_id, correlation_key, tenant_id]
        self.txn.put(b"I" + u64(instance_key), pack(held), db=self._instances)

    def correlation_key_of(self, instance_key: int) -> str | None:
        """The correlation key of the message that started this instance at a message start event, if it holds one."""
        v = self.txn.get(b"I" + u64(instance_key), db=self._instances)
        return None if v is None else unpack(v)[1]

    def unlock(self, instance_key: int) -> None:
        v = self.txn.get(b"I" + u64(instance_key), db=self._instances)
        if v is None:
            return
        process_id, correlation_key, *tenant = unpack(v)
        self.txn.delete(b"I" + u64(instance_key), db=self._instances)
        self.txn.delete(self._lock(tenant[0] if tenant else TENANT, process_id, correlation_key), db=self._instances)


class OutboxState(_Repository):
    """Commands for other partitions (or this one) that must arrive: resent by the leader until acknowledged."""

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "subscription_outbox")

    @staticmethod
    def _fit(key: bytes) -> bytes:
        """Keys are a side, an element instance key and a message name: a long name goes in as its digest."""
        if len(key) <= 9 + MAX_TEXT_KEY_BYTES:
            return key
        return key[:9] + _DIGEST + hashlib.sha256(key[9:]).digest()

    def put(self, key: bytes, value: dict[str, Any]) -> None:
        self.txn.put(self._fit(key), pack(value), db=self._db)

    def get(self, key: bytes) -> dict[str, Any] | None:
        v = self.txn.get(self._fit(key), db=self._db)
        return unpack(v) if v else None

    def remove(self, key: bytes) -> None:
        self.txn.delete(self._fit(key), db=self._db)

    def pending(self, limit: int = 1000) -> list[tuple[bytes, dict[str, Any]]]:
        out = []
        for k, v in self.txn.cursor(db=self._db):
            out.append((bytes(k), unpack(v)))
            if len(out) >= limit:
                break
        return out


class SignalSubscriptionState(_Repository):
    """Signal subscriptions by signal name, and by owner to close them.

    The owner is the element instance that waits (catch event, activity with boundary events, event-based gateway,
    scope with event sub-processes) or, for signal start events, the process definition. Stored values carry the
    subscription record's key under ``key``.
    """

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "signal_subscriptions")
        self._by_owner = sdb.dbs["signal_subscriptions_by_owner"]

    @staticmethod
    def owner(value: dict[str, Any]) -> int:
        key = value.get("catchEventInstanceKey", -1)
        return key if key > 0 else value["processDefinitionKey"]

    @staticmethod
    def _key(tenant_id: str, name: str, owner: int, element_id: str) -> bytes:
        return _scoped(tenant_id, name) + b"\0" + u64(owner) + _text(element_id)

    def put(self, value: dict[str, Any]) -> None:
        owner = self.owner(value)
        key = self._key(_tenant(value), value["signalName"], owner, value["catchEventId"])
        self.txn.put(key, pack(value), db=self._db)
        self.txn.put(u64(owner) + key, b"", db=self._by_owner)

    def remove(self, value: dict[str, Any]) -> None:
        owner = self.owner(value)
        key = self._key(_tenant(value), value["signalName"], owner, value["catchEventId"])
        self.txn.delete(key, db=self._db)
        self.txn.delete(u64(owner) + key, db=self._by_owner)

    def get(self, tenant_id: str, name: str, owner: int, element_id: str) -> dict[str, Any] | None:
        v = self.txn.get(self._key(tenant_id, name, owner, element_id), db=self._db)
        found = unpack(v) if v else None
        return found if found is not None and found["signalName"] == name else None

    def for_name(self, tenant_id: str, name: str) -> list[dict[str, Any]]:
        """The tenant's subscriptions to the signal ``name``."""
        found = [unpack(v) for _, v in prefix_scan(self.txn, self._db, _scoped(tenant_id, name) + b"\0")]
        return [f for f in found if f["signalName"] == name]

    def of_owner(self, owner: int) -> list[dict[str, Any]]:
        out = []
        for k in prefix_keys(self.txn, self._by_owner, u64(owner)):
            v = self.txn.get(k[8:], db=self._db)
            if v is not None:
                out.append(unpack(v))
        return out


class CompensationSubscriptionState(_Repository):
    """Compensation subscriptions by (process instance, subscription key): one per completed compensable activity
    instance (and per completed sub-process or multi-instance body holding some), in creation order.

    Values are COMPENSATION_SUBSCRIPTION record values; a triggered one carries its throw event.
    """

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "compensation_subscriptions")

    def put(self, key: int, value: dict[str, Any]) -> None:
        self.txn.put(u64(value["processInstanceKey"]) + u64(key), pack(value), db=self._db)

    def remove(self, process_instance_key: int, key: int) -> None:
        self.txn.delete(u64(process_instance_key) + u64(key), db=self._db)

    def of_instance(self, process_instance_key: int) -> list[tuple[int, dict[str, Any]]]:
        """``(key, value)`` of the process instance's subscriptions, oldest first."""
        return [(read_u64(k, 8), unpack(v)) for k, v in prefix_scan(self.txn, self._db, u64(process_instance_key))]


from broker.state.batch_state import BatchOperationState  # noqa: E402
from broker.state.decision_state import DecisionRequirementsState, DecisionState, FormState  # noqa: E402
from broker.state.identity_state import IdentityState  # noqa: E402


class PartitionState:
    """All repositories of one partition, bound together to the current transaction."""

    def __init__(self, sdb: StateDb) -> None:
        self.db = sdb
        self.meta = MetaState(sdb)
        self.processes = ProcessState(sdb)
        self.elements = ElementInstanceState(sdb)
        self.variables = VariableState(sdb)
        self.jobs = JobState(sdb)
        self.incidents = IncidentState(sdb)
        self.event_triggers = KeyedBlobState(sdb, "event_triggers")
        self.awaiting_results = KeyedBlobState(sdb, "awaiting_results")
        self.joins = JoinState(sdb)
        self.distributions = DistributionState(sdb)
        self.timers = TimerState(sdb)
        self.messages = MessageState(sdb)
        self.message_subscriptions = MessageSubscriptionState(sdb)
        self.process_message_subscriptions = ProcessMessageSubscriptionState(sdb)
        self.message_starts = MessageStartState(sdb)
        self.outbox = OutboxState(sdb)
        self.signal_subscriptions = SignalSubscriptionState(sdb)
        self.signal_receipts = SignalReceiptState(sdb)
        self.compensation_subscriptions = CompensationSubscriptionState(sdb)
        self.decisions = DecisionState(sdb)
        self.decision_requirements = DecisionRequirementsState(sdb)
        self.forms = FormState(sdb)
        self.user_tasks = UserTaskState(sdb)
        # client requests answered later, by the scope (element instance) they wait on
        self.async_requests = KeyedBlobState(sdb, "async_requests")
        self.business_ids = BusinessIdState(sdb)
        self.batch_operations = BatchOperationState(sdb)
        self.identity = IdentityState(sdb)
        self._repos: tuple[_Repository, ...] = (
            self.meta,
            self.processes,
            self.elements,
            self.variables,
            self.jobs,
            self.incidents,
            self.event_triggers,
            self.awaiting_results,
            self.joins,
            self.distributions,
            self.timers,
            self.messages,
            self.message_subscriptions,
            self.process_message_subscriptions,
            self.message_starts,
            self.outbox,
            self.signal_subscriptions,
            self.signal_receipts,
            self.compensation_subscriptions,
            self.decisions,
            self.decision_requirements,
            self.forms,
            self.user_tasks,
            self.async_requests,
            self.business_ids,
            self.batch_operations,
            self.identity,
        )
        self.txn: Txn | None = None

    def bind(self, txn: Txn | None) -> None:
        """Point every repository at ``txn`` (a nested transaction keeps the parent's cached instances).

        Unbinding forgets the cache; writes not flushed by then would be lost, so that is an error.
        """
        if txn is None:
            if self.elements.has_unflushed_writes:
                self.elements.discard()
                raise RuntimeError("element instance writes were not flushed before the transaction ended")
            self.elements.discard()
        self.txn = txn
        for r in self._repos:
            r.txn = txn  # type: ignore[assignment]

    def flush(self) -> None:
        """Write cached changes into the bound transaction: call before committing it."""
        self.elements.flush()

    def discard(self) -> None:
        """Drop cached changes: call when the bound transaction is aborted."""
        self.elements.discard()

    def iter_all(self, name: str) -> Iterator[tuple[bytes, bytes]]:
        assert self.txn is not None
        return iter(self.txn.cursor(db=self.db.dbs[name]))
