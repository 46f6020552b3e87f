"""What a caller may do, from the identity the engine keeps (Camunda 8.8's rules): the tenants it is assigned to and
the permissions granted to it, directly or through the groups, roles and mapping rules it belongs to.

A caller is a user (by username), a client (an OAuth client id) or both, with the claims of its token. Mapping rules
whose claim the token carries make the caller a member of whatever the rule is a member of. Resolution reads only
the partition's state, so every partition decides alike and a replay decides as the first processing did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a type only: the state package imports its repositories in its own order
    from broker.state.identity_state import IdentityState


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sends a command: a username and/or client id, and its token's claims (empty for basic auth)."""

    username: str = ""
    client_id: str = ""
    claims: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, authorization: Mapping[str, Any]) -> Caller:
        """The caller a command carries (``Record.authorization``: username, clientId, claims; any may be missing)."""
        claims = authorization.get("claims")
        return cls(
            username=str(authorization.get("username") or ""),
            client_id=str(authorization.get("clientId") or ""),
            claims=claims if isinstance(claims, dict) else {},
        )


@dataclass(frozen=True, slots=True)
class Access:
    """A caller's tenants and grants (resource type, resource id or "*", permission), its user name (if a user)
    and the groups it is in (user tasks offered to a candidate group are its to take)."""

    tenants: frozenset[str]
    grants: frozenset[tuple[str, str, str]]
    username: str = ""
    groups: frozenset[str] = frozenset()

    def allows(self, resource_type: str, resource_id: str, permission: str) -> bool:
        """Whether a grant covers ``permission`` on the resource (its own id or every resource of the type)."""
        grants = self.grants
        return (resource_type, resource_id, permission) in grants or (resource_type, "*", permission) in grants

    def allows_any(self, resource_type: str, resource_ids: Iterable[str], permissions: Iterable[str]) -> bool:
        """Whether a grant covers one of ``permissions`` on every resource of the type or on one of ``resource_ids``
        (no ids: only a grant on every resource does)."""
        grants = self.grants
        ids = ("*", *resource_ids)
        return any((resource_type, i, p) in grants for p in permissions for i in ids)

    def resource_ids(self, resource_type: str, permissions: Iterable[str]) -> frozenset[str]:
        """The resource ids of the type the caller holds one of ``permissions`` on ("*" among them: all)."""
        wanted = set(permissions)
        return frozenset(i for t, i, p in self.grants if t == resource_type and p in wanted)


def forbidden_message(operation: str, resource_type: str, resource_ids: Iterable[str]) -> str:
    """Camunda's reason for a missing permission: what was needed, on which resource type and ids."""
    ids = sorted(set(resource_ids))
    reason = f"Insufficient permissions to perform operation '{operation}' on resource '{resource_type}'"
    if ids:
        reason += f", required resource identifiers are one of '[*, {', '.join(ids)}]'"
    return reason


def hidden_message(operation: str, resource_type: str, tenant: str) -> str:
    """Camunda's reason for an existing resource in a tenant the caller is not assigned to: as if it did not
    exist (NOT_FOUND), so another team cannot learn which keys are in use."""
    return (
        f"Expected to perform operation '{operation}' on resource '{resource_type}', but no resource was found for "
        f"tenant '{tenant}'"
    )


def _claim_matches(claims: Mapping[str, Any], name: str, value: str) -> bool:
    """A claim holds the value itself, or a list that contains it (a token's groups, roles, …)."""
    given = claims.get(name)
    if isinstance(given, list):
        return value in [str(v) for v in given]
    return given is not None and str(given) == value


def principals(identity: IdentityState, caller: Caller) -> set[tuple[str, str]]:
    """Every (kind, id) the caller acts as: itself, its matching mapping rules, the groups of those, and the roles
    of all of them (roles hold groups; groups hold no roles)."""
    own: set[tuple[str, str]] = set()
    if caller.username:
        own.add(("USER", caller.username))
    if caller.client_id:
        own.add(("CLIENT", caller.client_id))
    if caller.claims:
        for rule in identity.all("MAPPING_RULE"):
            if _claim_matches(caller.claims, rule["claimName"], rule["claimValue"]):
                own.add(("MAPPING_RULE", rule["mappingRuleId"]))
    groups = {g for p in own for g in identity.memberships(*p) if g[0] == "GROUP"}
    members = own | groups
    roles = {r for p in members for r in identity.memberships(*p) if r[0] == "ROLE"}
    return members | roles


def resolve(identity: IdentityState, caller: Caller) -> Access:
    """The caller's tenants and grants, through every principal it acts as."""
    acting = principals(identity, caller)
    tenants = frozenset(t[1] for p in acting for t in identity.memberships(*p) if t[0] == "TENANT")
    grants = frozenset(_grants(identity, acting))
    groups = frozenset(p[1] for p in acting if p[0] == "GROUP")
    return Access(tenants, grants, caller.username, groups)


def _grants(identity: IdentityState, acting: Iterable[tuple[str, str]]) -> Iterable[tuple[str, str, str]]:
    for owner_type, owner_id in acting:
        for _, grant in identity.authorizations_of(owner_type, owner_id):
            for permission in grant["permissionTypes"]:
                yield grant["resourceType"], grant["resourceId"], permission
