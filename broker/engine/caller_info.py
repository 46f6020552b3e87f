"""What the identity state says about one caller, for gateways: its tenants and grants (the engine's own resolution,
:mod:`broker.engine.access`), its user's fields, groups and roles, and on request its password hash.

Gateways ask through the command API (``Identity``) instead of reading state themselves, and cache the answer for a
bounded time (``gateway/directory.py``). The answer is plain data (msgpack-able); it is read, never written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from broker.engine.access import Caller, principals, resolve

if TYPE_CHECKING:
    from broker.state.identity_state import IdentityState


def caller_of(request: Mapping[str, Any]) -> Caller:
    """The caller a lookup names (``{"username", "clientId", "claims"}``, each optional); odd types count as absent."""
    username, client_id, claims = request.get("username"), request.get("clientId"), request.get("claims")
    return Caller(
        username=username if isinstance(username, str) else "",
        client_id=client_id if isinstance(client_id, str) else "",
        claims=claims if isinstance(claims, dict) else {},
    )


def describe(
    identity: IdentityState, caller: Caller, *, authorizations_enabled: bool, with_password: bool = False
) -> dict[str, Any]:
    """The caller as a gateway needs it:

    - ``authorizationsEnabled``: whether grants decide what the caller may do (else only tenants do);
    - ``tenants``: ``{tenantId, name, description}`` of the tenants it is assigned to (directly or through groups,
      roles and mapping rules); ``grants``: ``[resourceType, resourceId or "*", permission]``;
    - ``user``: ``{username, name, email}`` when the caller's user is stored here, else None;
      ``groups`` and ``roles``: the ids it acts through;
    - ``passwordHash``: only with ``with_password`` and a stored user.
    """
    access = resolve(identity, caller)
    acting = principals(identity, caller)
    tenants = []
    for tenant_id in sorted(access.tenants):
        stored = identity.get("TENANT", tenant_id)
        if stored is not None:
            tenants.append({"tenantId": tenant_id, "name": stored.get("name") or "",
                            "description": stored.get("description") or ""})  # fmt: skip
    user = identity.get("USER", caller.username) if caller.username else None
    answer: dict[str, Any] = {
        "authorizationsEnabled": authorizations_enabled,
        "tenants": tenants,
        "grants": sorted(list(grant) for grant in access.grants),
        "user": None
        if user is None
        else {"username": caller.username, "name": user.get("name") or "", "email": user.get("email") or ""},
        "groups": sorted(entity_id for kind, entity_id in acting if kind == "GROUP"),
        "roles": sorted(entity_id for kind, entity_id in acting if kind == "ROLE"),
    }
    if with_password and user is not None:
        answer["passwordHash"] = user.get("password") or ""
    return answer
