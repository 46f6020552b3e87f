"""The identity configured at start (Camunda's IDENTITY_SETUP): users, the ``admin`` role with every permission, and
the role's configured members, created in one command by the first partition wherever they are missing.

- The node submits IDENTITY_SETUP INITIALIZE to the first partition when its state lacks what is configured
  (``broker/identity_init.py``), with the users' passwords already hashed: the processor stays deterministic.
- What exists is skipped (a user, the role, a membership), so the command may run any number of times; a restart
  changes nothing. The role's authorizations are granted when the role is created here, not added to a role that
  someone made or changed since.
- Each creation is the event the regular identity processor writes (so history and exporters see users, roles,
  authorizations and memberships as usual) and reaches the other partitions as that processor's distributed command,
  in the order identity distributions keep.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from broker.engine import behaviors as b
from broker.engine.context import ProcessingContext
from broker.engine.identity import PERMISSIONS, ROLE, USER, authorization_value, distribute_change, public, record_value
from broker.protocol.enums import AuthorizationIntent, IdentitySetupIntent, RoleIntent, UserIntent, ValueType
from broker.protocol.record import Record

ADMIN_ROLE: Final = "admin"
ADMIN_ROLE_NAME: Final = "Admin"
MEMBER_TYPES: Final = ("USER", "CLIENT")


def initialize(ctx: ProcessingContext, cmd: Record) -> None:
    """Create what the command names and the state lacks; answer (if anyone asks) with what was created."""
    v = cmd.value
    identity = ctx.state.identity
    users = [u for u in v.get("users") or [] if isinstance(u, dict)]
    members = [m for m in v.get("roleMembers") or [] if isinstance(m, dict)]
    created: dict[str, list[str]] = {"users": [], "roles": [], "roleMembers": []}
    for user in users:
        username, password = user.get("username"), user.get("password")
        if not isinstance(username, str) or not username or not isinstance(password, str) or not password:
            continue  # the node sends only complete users; anything else is no user to create
        if identity.get(USER.name, username) is not None:
            continue
        key = ctx.keys.next_key()
        fields = {name: user.get(name) if isinstance(user.get(name), str) else "" for name in USER.fields}
        value = record_value(USER, {**fields, "username": username, "_key": key})
        _distributed(ctx, ctx.event(ValueType.USER, UserIntent.CREATED, key, value), UserIntent.CREATE)
        created["users"].append(username)
    role = identity.get(ROLE.name, ADMIN_ROLE)
    if role is None:
        key = ctx.keys.next_key()
        role = record_value(ROLE, {"roleId": ADMIN_ROLE, "name": ADMIN_ROLE_NAME, "_key": key})
        _distributed(ctx, ctx.event(ValueType.ROLE, RoleIntent.CREATED, key, role), RoleIntent.CREATE)
        created["roles"].append(ADMIN_ROLE)
        for resource_type, permissions in sorted(PERMISSIONS.items()):
            grant_key = ctx.keys.next_key()
            grant = authorization_value(
                {
                    "_key": grant_key,
                    "ownerId": ADMIN_ROLE,
                    "ownerType": "ROLE",
                    "resourceId": "*",
                    "resourceType": resource_type,
                    "permissionTypes": sorted(permissions),
                }
            )
            event = ctx.event(ValueType.AUTHORIZATION, AuthorizationIntent.CREATED, grant_key, grant)
            _distributed(ctx, event, AuthorizationIntent.CREATE)
    for member in members:
        member_type, member_id = member.get("entityType"), member.get("entityId")
        if member_type not in MEMBER_TYPES or not isinstance(member_id, str) or not member_id:
            continue
        if identity.is_member(ROLE.name, ADMIN_ROLE, member_type, member_id):
            continue
        value = record_value(ROLE, {**public(role), "entityId": member_id, "entityType": member_type})
        event = ctx.event(ValueType.ROLE, RoleIntent.ENTITY_ADDED, role[ROLE.key_field], value)
        _distributed(ctx, event, RoleIntent.ADD_ENTITY)
        created["roleMembers"].append(f"{member_type}:{member_id}")
    done = ctx.event(ValueType.IDENTITY_SETUP, IdentitySetupIntent.INITIALIZED, ctx.keys.next_key(), created)
    ctx.respond(done)


def _distributed(ctx: ProcessingContext, event: Record, command_intent: Any) -> None:
    if b.services(ctx).partitions_count > 1:
        distribute_change(ctx, event, command_intent)


PROCESSORS: Final[dict[tuple[int, int], Callable[[ProcessingContext, Record], None]]] = {
    (ValueType.IDENTITY_SETUP, IdentitySetupIntent.INITIALIZE): initialize,
}
"""The command processor of the identity setup, registered in the engine's table."""
