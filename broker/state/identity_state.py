"""The cluster's identity (Camunda 8.8 keeps it in the engine): users, groups, roles, tenants and mapping rules by
their ids, who is a member of which group, role and tenant, and the authorizations granted to owners.

Every partition holds all of it (identity commands are distributed to every partition), so any partition can decide
what a caller may do from its own state. Only event appliers call the mutating methods.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from broker.state.db import StateDb, pack, prefix_keys, prefix_scan, read_u64, u64, unpack
from broker.state.repositories import _Repository, _text

# The identities and their one-letter tags in index keys.
KINDS: Final = {"USER": b"U", "GROUP": b"G", "ROLE": b"R", "TENANT": b"T", "MAPPING_RULE": b"M"}
# Members that are not identities kept here: OIDC clients (and users, when they come from an identity provider).
MEMBER_TYPES: Final = ("USER", "CLIENT", "MAPPING_RULE", "GROUP", "ROLE")
# Who may own an authorization: the same (as Camunda's owner types).
OWNER_TYPES: Final = MEMBER_TYPES
_MEMBER_TAGS: Final = {**KINDS, "CLIENT": b"C"}


def _entity(kind: str, entity_id: str) -> bytes:
    return _MEMBER_TAGS[kind] + _text(entity_id) + b"\0"


class IdentityState(_Repository):
    """Identities by (kind, id); memberships both ways; authorizations by key and by owner."""

    __slots__ = ("_authorizations", "_by_member", "_by_owner", "_members")

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "identities")
        self._members = sdb.dbs["identity_members"]
        self._by_member = sdb.dbs["identity_memberships"]
        self._authorizations = sdb.dbs["authorizations"]
        self._by_owner = sdb.dbs["authorizations_by_owner"]

    # -- identities ------------------------------------------------------------------------------------------

    def get(self, kind: str, entity_id: str) -> dict[str, Any] | None:
        """The stored value of an identity (its record value, key included), or None."""
        v = self.txn.get(_entity(kind, entity_id), db=self._db)
        found = unpack(v) if v else None
        return found if found is not None and found.get("_id") == entity_id else None

    def put(self, kind: str, entity_id: str, value: dict[str, Any]) -> None:
        self.txn.put(_entity(kind, entity_id), pack({**value, "_id": entity_id}), db=self._db)

    def remove(self, kind: str, entity_id: str) -> None:
        """Forget the identity and every membership it has or holds (its authorizations go by their own events)."""
        self.txn.delete(_entity(kind, entity_id), db=self._db)
        for member_type, member_id in self.members(kind, entity_id):
            self.remove_member(kind, entity_id, member_type, member_id)
        for container_kind, container_id in self.memberships(kind, entity_id):
            self.remove_member(container_kind, container_id, kind, entity_id)

    def all(self, kind: str) -> Iterator[dict[str, Any]]:
        for _, v in prefix_scan(self.txn, self._db, KINDS[kind]):
            yield unpack(v)

    # -- memberships ------------------------------------------------------------------------------------------

    def add_member(self, kind: str, entity_id: str, member_type: str, member_id: str) -> None:
        container, member = _entity(kind, entity_id), _entity(member_type, member_id)
        self.txn.put(container + member, pack([member_type, member_id]), db=self._members)
        self.txn.put(member + container, pack([kind, entity_id]), db=self._by_member)

    def remove_member(self, kind: str, entity_id: str, member_type: str, member_id: str) -> None:
        container, member = _entity(kind, entity_id), _entity(member_type, member_id)
        self.txn.delete(container + member, db=self._members)
        self.txn.delete(member + container, db=self._by_member)

    def is_member(self, kind: str, entity_id: str, member_type: str, member_id: str) -> bool:
        key = _entity(kind, entity_id) + _entity(member_type, member_id)
        v = self.txn.get(key, db=self._members)
        return v is not None and unpack(v) == [member_type, member_id]

    def members(self, kind: str, entity_id: str) -> list[tuple[str, str]]:
        """(member type, member id) of a group, role or tenant."""
        prefix = _entity(kind, entity_id)
        return [(t, i) for t, i in (unpack(v) for _, v in prefix_scan(self.txn, self._members, prefix))]

    def memberships(self, member_type: str, member_id: str) -> list[tuple[str, str]]:
        """(kind, id) of the groups, roles and tenants an entity is a direct member of."""
        prefix = _entity(member_type, member_id)
        found = [(k, i) for k, i in (unpack(v) for _, v in prefix_scan(self.txn, self._by_member, prefix))]
        return [(k, i) for k, i in found if self.is_member(k, i, member_type, member_id)]

    # -- authorizations ----------------------------------------------------------------------------------------

    @staticmethod
    def _owner(owner_type: str, owner_id: str) -> bytes:
        return _entity(owner_type, owner_id)

    def authorization(self, key: int) -> dict[str, Any] | None:
        v = self.txn.get(u64(key), db=self._authorizations)
        return unpack(v) if v else None

    def put_authorization(self, key: int, value: dict[str, Any]) -> None:
        old = self.authorization(key)
        if old is not None:
            self.txn.delete(self._owner(old["ownerType"], old["ownerId"]) + u64(key), db=self._by_owner)
        self.txn.put(u64(key), pack(value), db=self._authorizations)
        self.txn.put(self._owner(value["ownerType"], value["ownerId"]) + u64(key), b"", db=self._by_owner)

    def remove_authorization(self, key: int) -> None:
        old = self.authorization(key)
        if old is None:
            return
        self.txn.delete(u64(key), db=self._authorizations)
        self.txn.delete(self._owner(old["ownerType"], old["ownerId"]) + u64(key), db=self._by_owner)

    def authorizations_of(self, owner_type: str, owner_id: str) -> list[tuple[int, dict[str, Any]]]:
        """(key, value) of the authorizations granted to an owner."""
        prefix = self._owner(owner_type, owner_id)
        out = []
        for k in prefix_keys(self.txn, self._by_owner, prefix):
            key = read_u64(k, len(k) - 8)
            found = self.authorization(key)
            if found is not None and (found["ownerType"], found["ownerId"]) == (owner_type, owner_id):
                out.append((key, found))
        return out
