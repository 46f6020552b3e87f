"""Identity commands as a gateway sends them: create, update and delete users, groups, roles, tenants, mapping rules
and authorizations, and add or remove the members of groups, roles and tenants.

Every identity command goes to the first partition, which decides it and hands it to the others; the answer comes
once every partition has applied it (see ``broker/engine/identity.py``), so it may take longer than other commands.
A password is hashed here (scrypt, as the basic-auth users file) before it leaves the gateway: no log, state or export
ever holds it in clear. Failures are :class:`~gateway.commands.CommandError` (the API layer maps them to its errors).
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from broker.protocol.enums import (
    AuthorizationIntent,
    GroupIntent,
    MappingRuleIntent,
    RoleIntent,
    TenantIntent,
    UserIntent,
    ValueType,
)
from broker.protocol.record import Record
from gateway.auth import hash_password
from gateway.commands import GatewayCommands, invalid

#: How long an identity command may wait for every partition to apply it, in milliseconds.
REQUEST_TIMEOUT_MS: Final = 30_000

#: Each identity kind's records and id field, by the kind's name in paths and entity types.
KINDS: Final = {
    "USER": (ValueType.USER, UserIntent, "username"),
    "GROUP": (ValueType.GROUP, GroupIntent, "groupId"),
    "ROLE": (ValueType.ROLE, RoleIntent, "roleId"),
    "TENANT": (ValueType.TENANT, TenantIntent, "tenantId"),
    "MAPPING_RULE": (ValueType.MAPPING_RULE, MappingRuleIntent, "mappingRuleId"),
}


async def _send(commands: GatewayCommands, value_type: ValueType, intent: int, value: dict, key: int = -1) -> Record:
    pid = commands.client.partition_ids[0]
    return await commands.execute(pid, value_type, intent, value, key, timeout_ms=REQUEST_TIMEOUT_MS)


async def _hashed(value: dict[str, Any]) -> dict[str, Any]:
    """The value with its password hashed (off the event loop: scrypt takes tens of milliseconds)."""
    password = value.get("password")
    if password is None:
        return value
    if not isinstance(password, str) or not password:
        invalid("Expected a non-empty password")
    return {**value, "password": await asyncio.to_thread(hash_password, password)}


async def create(commands: GatewayCommands, kind: str, value: dict[str, Any]) -> Record:
    """Create a user, group, role, tenant or mapping rule (``value`` holds its id and fields)."""
    value_type, intents, _ = KINDS[kind]
    return await _send(commands, value_type, intents["CREATE"], await _hashed(value))


async def update(commands: GatewayCommands, kind: str, entity_id: str, value: dict[str, Any]) -> Record:
    """Change what ``value`` names; the rest stays (a user's password only when a new one is given)."""
    value_type, intents, id_field = KINDS[kind]
    return await _send(commands, value_type, intents["UPDATE"], {**await _hashed(value), id_field: entity_id})


async def delete(commands: GatewayCommands, kind: str, entity_id: str) -> Record:
    value_type, intents, id_field = KINDS[kind]
    return await _send(commands, value_type, intents["DELETE"], {id_field: entity_id})


async def membership(
    commands: GatewayCommands, kind: str, entity_id: str, member_type: str, member_id: str, *, add: bool
) -> Record:
    """Add a member to (or remove one from) a group, role or tenant."""
    value_type, intents, id_field = KINDS[kind]
    intent = intents["ADD_ENTITY" if add else "REMOVE_ENTITY"]
    value = {id_field: entity_id, "entityId": member_id, "entityType": member_type}
    return await _send(commands, value_type, intent, value)


async def create_authorization(commands: GatewayCommands, grant: dict[str, Any]) -> Record:
    return await _send(commands, ValueType.AUTHORIZATION, AuthorizationIntent.CREATE, _grant(grant))


async def update_authorization(commands: GatewayCommands, key: int, grant: dict[str, Any]) -> Record:
    value = {**_grant(grant), "_key": key}
    return await _send(commands, ValueType.AUTHORIZATION, AuthorizationIntent.UPDATE, value, key)


async def delete_authorization(commands: GatewayCommands, key: int) -> Record:
    return await _send(commands, ValueType.AUTHORIZATION, AuthorizationIntent.DELETE, {"_key": key}, key)


def _grant(grant: dict[str, Any]) -> dict[str, Any]:
    """An authorization as the engine takes it: a resource id "*" means every resource of the type."""
    if "resourcePropertyName" in grant:
        invalid("Authorizations by resource property (resourcePropertyName) are not supported; name a resourceId")
    resource_id = grant.get("resourceId", "")
    return {**grant, "resourceMatcher": "ANY" if resource_id == "*" else "ID"}
