"""Deployed DMN decisions, decision requirements graphs (DRGs) and forms.

Each is kept by key and indexed by (tenant, id, version) so the latest version is one cursor step away; decisions
are also indexed by (DRG key, decision id), which is how a required decision is found in the graph it was deployed
with.
Only event appliers call the ``put`` methods.
"""

from __future__ import annotations

from typing import Any

from broker.protocol.values import tenant_of as _tenant
from broker.state.db import StateDb, pack, prefix_scan, read_u64, u64, unpack
from broker.state.repositories import (
    Bindings,
    _hashed,
    _latest_version,
    _Repository,
    _scoped,
    _text,
    _version_key,
)


class _Versioned(_Repository):
    """Records by key, plus an index (id, version) -> key over the id field ``id_field``.

    As in Zeebe, a new deployment gets the latest stored version plus one (after a deletion of the latest
    version, the previous one is the latest again).
    """

    __slots__ = ("_id_field", "_version_field", "_versions")

    def __init__(self, sdb: StateDb, name: str, versions: str, id_field: str, version_field: str = "version") -> None:
        super().__init__(sdb, name)
        self._versions = sdb.dbs[versions]
        self._id_field = id_field
        self._version_field = version_field

    def next_version(self, tenant_id: str, resource_id: str) -> int:
        """The version a new deployment of ``resource_id`` in the tenant gets."""
        latest = self.latest(tenant_id, resource_id)
        return latest[self._version_field] + 1 if latest is not None else 1

    def _remove(self, key: int, value: dict[str, Any]) -> None:
        self.txn.delete(u64(key), db=self._db)
        index = _version_key(_tenant(value), value[self._id_field], value[self._version_field])
        v = self.txn.get(index, db=self._versions)
        if v is not None and read_u64(v) == key:
            self.txn.delete(index, db=self._versions)

    def get(self, key: int) -> dict[str, Any] | None:
        v = self.txn.get(u64(key), db=self._db)
        return unpack(v) if v else None

    def key_of(self, tenant_id: str, resource_id: str, version: int) -> int | None:
        v = self.txn.get(_version_key(tenant_id, resource_id, version), db=self._versions)
        if v is None:
            return None
        key = read_u64(v)
        if _hashed(resource_id) and (self.get(key) or {}).get(self._id_field) != resource_id:
            return None
        return key

    def latest(self, tenant_id: str, resource_id: str) -> dict[str, Any] | None:
        return _latest_version(self, self._versions, _scoped(tenant_id, resource_id), self._id_field, resource_id)

    def _put(self, key: int, value: dict[str, Any]) -> None:
        self.txn.put(u64(key), pack(value), db=self._db)
        index = _version_key(_tenant(value), value[self._id_field], value[self._version_field])
        self.txn.put(index, u64(key), db=self._versions)


class DecisionState(_Versioned):
    """Decisions by key, by (decision id, version), by (DRG key, decision id), and for business rule tasks' bindings
    by (decision id, version tag) (the latest version carrying the tag) and (decision id, deployment key)."""

    __slots__ = ("_bindings", "_by_drg")

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "decisions", "decision_versions", "decisionId")
        self._by_drg = sdb.dbs["decisions_by_drg"]
        self._bindings = Bindings(self, sdb.dbs["decision_bindings"], "decisionId")

    def with_version_tag(self, tenant_id: str, decision_id: str, version_tag: str) -> dict[str, Any] | None:
        """The latest version of ``decision_id`` in the tenant deployed with ``version_tag``."""
        return self._bindings.with_version_tag(tenant_id, decision_id, version_tag)

    def in_deployment(self, tenant_id: str, decision_id: str, deployment_key: int) -> dict[str, Any] | None:
        """The version of ``decision_id`` in the tenant that deployment ``deployment_key`` created."""
        return self._bindings.in_deployment(tenant_id, decision_id, deployment_key)

    def of_drg(self, drg_key: int) -> list[dict[str, Any]]:
        """Every decision deployed with the DRG ``drg_key``."""
        found = (self.get(read_u64(v)) for _k, v in prefix_scan(self.txn, self._by_drg, u64(drg_key)))
        return [d for d in found if d is not None]

    def in_drg(self, drg_key: int, decision_id: str) -> dict[str, Any] | None:
        v = self.txn.get(u64(drg_key) + _text(decision_id), db=self._by_drg)
        found = self.get(read_u64(v)) if v is not None else None
        return found if found is not None and found["decisionId"] == decision_id else None

    def put(self, decision: dict[str, Any]) -> None:
        key = decision["decisionKey"]
        self._put(key, decision)
        drg_key = decision["decisionRequirementsKey"]
        self.txn.put(u64(drg_key) + _text(decision["decisionId"]), u64(key), db=self._by_drg)
        self._bindings.add(key, decision)

    def remove(self, decision: dict[str, Any]) -> None:
        key, decision_id = decision["decisionKey"], decision["decisionId"]
        self._remove(key, decision)
        self.txn.delete(u64(decision["decisionRequirementsKey"]) + _text(decision_id), db=self._by_drg)
        self._bindings.remove(key, decision)


class DecisionRequirementsState(_Versioned):
    """DRGs (with their resource) by key and by (DRG id, version)."""

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(
            sdb,
            "decision_requirements",
            "decision_requirements_versions",
            "decisionRequirementsId",
            "decisionRequirementsVersion",
        )

    def put(self, drg: dict[str, Any]) -> None:
        key = drg["decisionRequirementsKey"]
        self._put(key, drg)

    def remove(self, drg: dict[str, Any]) -> None:
        key = drg["decisionRequirementsKey"]
        self._remove(key, drg)


class FormState(_Versioned):
    """Forms (with their resource) by key and by (form id, version)."""

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "forms", "form_versions", "formId")

    def put(self, form: dict[str, Any]) -> None:
        self._put(form["formKey"], form)

    def remove(self, form: dict[str, Any]) -> None:
        self._remove(form["formKey"], form)
