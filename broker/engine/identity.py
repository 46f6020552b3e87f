"""Identity as replicated state (Camunda 8.8): users, groups, roles, tenants, mapping rules and authorizations are
records the engine processes, so every partition knows them and replay rebuilds them.

How an identity command runs:

- The gateway sends it to the first partition, which checks it against its state (an id taken, an entity unknown,
  a permission a resource type does not have: rejections with Camunda's wording), writes the event and hands the
  command to every other partition (command distribution). Identity distributions reach each partition one at a
  time, in the order they were made (see ``scheduled.py``), so a later change never arrives before an earlier one.
- The answer waits until every partition has applied the change (an ASYNC_REQUEST remembers the request until the
  last acknowledgement): once a client hears that a permission was revoked, no partition still grants it.
- A partition that receives a distributed command applies it without checking again (the first partition decided)
  and answers; a command delivered twice changes nothing the second time.

Passwords arrive hashed (the gateway hashes them); the log never holds one in clear.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final

from broker.engine import behaviors as b
from broker.engine.context import EventApplier, ProcessingContext
from broker.protocol.enums import (
    AsyncRequestIntent,
    AuthorizationIntent,
    GroupIntent,
    MappingRuleIntent,
    RejectionType,
    RoleIntent,
    TenantIntent,
    UserIntent,
    ValueType,
)
from broker.protocol.record import Record, RequestMetadata
from broker.state.identity_state import OWNER_TYPES

ID_PATTERN: Final = re.compile(r"[a-zA-Z0-9_~@.+-]{1,256}")
"""The ids of users, groups, roles and mapping rules (Camunda's default id pattern)."""
TENANT_ID_PATTERN: Final = re.compile(r"[\w.-]{1,31}", re.ASCII)

PERMISSIONS: Final[dict[str, frozenset[str]]] = {
    "AUTHORIZATION": frozenset({"CREATE", "READ", "UPDATE", "DELETE"}),
    "BATCH": frozenset(
        {
            "CREATE",
            "CREATE_BATCH_OPERATION_CANCEL_PROCESS_INSTANCE",
            "CREATE_BATCH_OPERATION_DELETE_PROCESS_INSTANCE",
            "CREATE_BATCH_OPERATION_MIGRATE_PROCESS_INSTANCE",
            "CREATE_BATCH_OPERATION_MODIFY_PROCESS_INSTANCE",
            "CREATE_BATCH_OPERATION_RESOLVE_INCIDENT",
            "READ",
            "UPDATE",
        }
    ),
    "COMPONENT": frozenset({"ACCESS"}),
    "DECISION_DEFINITION": frozenset(
        {"CREATE_DECISION_INSTANCE", "READ_DECISION_DEFINITION", "READ_DECISION_INSTANCE", "DELETE_DECISION_INSTANCE"}
    ),
    "DECISION_REQUIREMENTS_DEFINITION": frozenset({"READ"}),
    "DOCUMENT": frozenset({"CREATE", "READ", "DELETE"}),
    "GROUP": frozenset({"CREATE", "READ", "UPDATE", "DELETE"}),
    "MAPPING_RULE": frozenset({"CREATE", "READ", "UPDATE", "DELETE"}),
    "MESSAGE": frozenset({"CREATE", "READ"}),
    "PROCESS_DEFINITION": frozenset(
        {
            "CREATE_PROCESS_INSTANCE",
            "READ_PROCESS_DEFINITION",
            "READ_PROCESS_INSTANCE",
            "READ_USER_TASK",
            "UPDATE_PROCESS_INSTANCE",
            "UPDATE_USER_TASK",
            "MODIFY_PROCESS_INSTANCE",
            "CANCEL_PROCESS_INSTANCE",
            "DELETE_PROCESS_INSTANCE",
        }
    ),
    "RESOURCE": frozenset({"CREATE", "READ", "DELETE_DRD", "DELETE_FORM", "DELETE_PROCESS", "DELETE_RESOURCE"}),
    "ROLE": frozenset({"CREATE", "READ", "UPDATE", "DELETE"}),
    "SYSTEM": frozenset({"READ", "READ_USAGE_METRIC", "UPDATE"}),
    "TENANT": frozenset({"CREATE", "READ", "UPDATE", "DELETE"}),
    "USER": frozenset({"CREATE", "READ", "UPDATE", "DELETE"}),
}
"""Each resource type an authorization may name, with the permissions it has (Camunda 8.8's)."""

IDENTITY_VALUE_TYPES: Final = frozenset(
    {
        ValueType.USER,
        ValueType.GROUP,
        ValueType.ROLE,
        ValueType.TENANT,
        ValueType.MAPPING_RULE,
        ValueType.AUTHORIZATION,
    }
)


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of identity: its records, its id and key fields, what an update may change, and which members it
    may have (none: it has no members)."""

    name: str  # as in the state and in entity types: USER, GROUP, ...
    noun: str  # as in messages: "user", "mapping rule"
    value_type: ValueType
    intents: type[IntEnum]
    id_field: str
    key_field: str
    fields: tuple[str, ...]
    required: tuple[str, ...] = ()
    members: frozenset[str] = frozenset()
    id_pattern: re.Pattern[str] = ID_PATTERN


USER: Final = Kind("USER", "user", ValueType.USER, UserIntent, "username", "userKey", ("name", "email", "password"),
                   required=("password",))  # fmt: skip
MAPPING_RULE: Final = Kind(
    "MAPPING_RULE",
    "mapping rule",
    ValueType.MAPPING_RULE,
    MappingRuleIntent,
    "mappingRuleId",
    "mappingRuleKey",
    ("claimName", "claimValue", "name"),
    required=("claimName", "claimValue"),
)
GROUP: Final = Kind("GROUP", "group", ValueType.GROUP, GroupIntent, "groupId", "groupKey", ("name", "description"),
                    members=frozenset({"USER", "CLIENT", "MAPPING_RULE"}))  # fmt: skip
ROLE: Final = Kind("ROLE", "role", ValueType.ROLE, RoleIntent, "roleId", "roleKey", ("name", "description"),
                   members=frozenset({"USER", "CLIENT", "MAPPING_RULE", "GROUP"}))  # fmt: skip
TENANT: Final = Kind(
    "TENANT",
    "tenant",
    ValueType.TENANT,
    TenantIntent,
    "tenantId",
    "tenantKey",
    ("name", "description"),
    members=frozenset({"USER", "CLIENT", "MAPPING_RULE", "GROUP", "ROLE"}),
    id_pattern=TENANT_ID_PATTERN,
)
KINDS: Final = {k.value_type: k for k in (USER, MAPPING_RULE, GROUP, ROLE, TENANT)}
_BY_NAME: Final = {k.name: k for k in KINDS.values()}


# -- answering: at once on a partition that received the change, after every partition applied it on the first -----


def _finish(ctx: ProcessingContext, cmd: Record, event: Record) -> None:
    """Answer ``cmd`` with ``event``: on a receiving partition at once; on the first, once every other partition
    has applied it (distributed with a fresh key, the answer parked under it)."""
    if cmd.value.get("distributedFrom") or b.services(ctx).partitions_count <= 1:
        ctx.respond(event)
        return
    distribution_key = distribute_change(ctx, event, cmd.intent_enum)
    answer = {"valueType": event.value_type.name, "intent": event.intent, "key": event.key, "value": event.value}
    b.park_request(ctx, cmd, distribution_key, answer=answer)


def distribute_change(ctx: ProcessingContext, event: Record, command_intent: IntEnum) -> int:
    """Hand the change ``event`` made to every other partition as the identity command that makes it there (its
    value, where it came from and its key); the distribution's key."""
    distribution_key = ctx.keys.next_key()
    command = {**event.value, "distributedFrom": ctx.partition_id, "_key": event.key}
    b.distribute(ctx, distribution_key, ValueType(event.value_type), command_intent, command)
    return distribution_key


def answer_when_distributed(ctx: ProcessingContext, distribution_key: int) -> None:
    """Called when a distribution was acknowledged: once no partition waits for it any more, the identity command
    it carried is answered (see :func:`_finish`)."""
    if ctx.state.distributions.pending_for(distribution_key):
        return
    request = ctx.state.async_requests.get(distribution_key)
    if request is None or "answer" not in request:
        return
    answer = request["answer"]
    asked = RequestMetadata(request["requestStreamId"], request["requestId"])
    b.answer_again(ctx, ValueType[answer["valueType"]], answer["intent"], answer["key"], answer["value"], asked)
    ctx.event(ValueType.ASYNC_REQUEST, AsyncRequestIntent.PROCESSED, request["key"], request)


def _again(ctx: ProcessingContext, cmd: Record, intent: IntEnum, key: int, value: dict) -> None:
    """Answer a distributed command delivered again (its first delivery's answer was lost) without a new event."""
    b.answer_again(ctx, ValueType(cmd.value_type), intent, key, value)


# -- users, groups, roles, tenants, mapping rules -------------------------------------------------------------


def _text_problem(value: dict, names: tuple[str, ...]) -> str | None:
    for name in names:
        if name in value and not isinstance(value[name], str):
            return f"Expected '{name}' to be a string, but it is {type(value[name]).__name__}"
    return None


def create(ctx: ProcessingContext, cmd: Record) -> None:
    kind, v = KINDS[ValueType(cmd.value_type)], cmd.value
    entity_id = v.get(kind.id_field)
    if v.get("distributedFrom"):
        stored = ctx.state.identity.get(kind.name, str(entity_id))
        if stored is not None and stored[kind.key_field] == v["_key"]:
            _again(ctx, cmd, kind.intents["CREATED"], v["_key"], public(stored))
            return
        _finish(ctx, cmd, ctx.event(kind.value_type, kind.intents["CREATED"], v["_key"], record_value(kind, v)))
        return
    if not b.authorized(ctx, kind.name, "CREATE"):
        return
    if not isinstance(entity_id, str) or kind.id_pattern.fullmatch(entity_id) is None:
        ctx.reject(RejectionType.INVALID_ARGUMENT, _bad_id(kind, entity_id))
        return
    problem = _text_problem(v, kind.fields)
    missing = [name for name in kind.required if not v.get(name)]
    if problem is None and missing:
        problem = f"Expected to create {kind.noun} with {', '.join(repr(m) for m in missing)}, but none was given"
    if problem is not None:
        ctx.reject(RejectionType.INVALID_ARGUMENT, problem)
        return
    if ctx.state.identity.get(kind.name, entity_id) is not None:
        ctx.reject(
            RejectionType.ALREADY_EXISTS,
            f"Expected to create {kind.noun} with ID '{entity_id}', but a {kind.noun} with this ID already exists.",
        )
        return
    if kind is MAPPING_RULE:
        clash = next(
            (
                m
                for m in ctx.state.identity.all(MAPPING_RULE.name)
                if (m["claimName"], m["claimValue"]) == (v["claimName"], v["claimValue"])
            ),
            None,
        )
        if clash is not None:
            ctx.reject(
                RejectionType.ALREADY_EXISTS,
                f"Expected to create mapping rule with claimName '{v['claimName']}' and claimValue "
                f"'{v['claimValue']}', but mapping rule '{clash['mappingRuleId']}' already maps this claim.",
            )
            return
    key = ctx.keys.next_key()
    _finish(ctx, cmd, ctx.event(kind.value_type, kind.intents["CREATED"], key, record_value(kind, {**v, "_key": key})))


def update(ctx: ProcessingContext, cmd: Record) -> None:
    kind, v = KINDS[ValueType(cmd.value_type)], cmd.value
    entity_id = v.get(kind.id_field)
    stored = ctx.state.identity.get(kind.name, entity_id) if isinstance(entity_id, str) else None
    if v.get("distributedFrom"):
        if stored is None:  # deleted since (a later change already reached this partition): nothing to update
            _again(ctx, cmd, kind.intents["UPDATED"], v["_key"], record_value(kind, v))
            return
        _finish(ctx, cmd, ctx.event(kind.value_type, kind.intents["UPDATED"], v["_key"], record_value(kind, v)))
        return
    if not b.authorized(ctx, kind.name, "UPDATE", [str(entity_id)]):
        return
    if stored is None:
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to update {kind.noun} with ID '{entity_id}', but a {kind.noun} with this ID does not exist.",
        )
        return
    problem = _text_problem(v, kind.fields)
    if problem is not None:
        ctx.reject(RejectionType.INVALID_ARGUMENT, problem)
        return
    # what the command leaves out stays as it was (a password that is not changed is not sent)
    changed = {**public(stored), **{name: v[name] for name in kind.fields if v.get(name) is not None}}
    key = stored[kind.key_field]
    _finish(
        ctx, cmd, ctx.event(kind.value_type, kind.intents["UPDATED"], key, record_value(kind, {**changed, "_key": key}))
    )


def delete(ctx: ProcessingContext, cmd: Record) -> None:
    kind, v = KINDS[ValueType(cmd.value_type)], cmd.value
    entity_id = v.get(kind.id_field)
    stored = ctx.state.identity.get(kind.name, entity_id) if isinstance(entity_id, str) else None
    if v.get("distributedFrom"):
        if stored is None:
            _again(ctx, cmd, kind.intents["DELETED"], v["_key"], record_value(kind, v))
            return
        _delete(ctx, cmd, kind, stored)
        return
    if not b.authorized(ctx, kind.name, "DELETE", [str(entity_id)]):
        return
    if stored is None:
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to delete {kind.noun} with ID '{entity_id}', but a {kind.noun} with this ID does not exist.",
        )
        return
    _delete(ctx, cmd, kind, stored)


def _delete(ctx: ProcessingContext, cmd: Record, kind: Kind, stored: dict) -> None:
    """The identity's authorizations go with it (as events, so exporters see them go); its memberships with the
    DELETED event's applier."""
    entity_id = stored[kind.id_field]
    if kind.name in OWNER_TYPES:
        for key, authorization in ctx.state.identity.authorizations_of(kind.name, entity_id):
            ctx.event(ValueType.AUTHORIZATION, AuthorizationIntent.DELETED, key, authorization)
    event = ctx.event(kind.value_type, kind.intents["DELETED"], stored[kind.key_field], public(stored))
    _finish(ctx, cmd, event)


def add_entity(ctx: ProcessingContext, cmd: Record) -> None:
    _membership(ctx, cmd, adding=True)


def remove_entity(ctx: ProcessingContext, cmd: Record) -> None:
    _membership(ctx, cmd, adding=False)


def _membership(ctx: ProcessingContext, cmd: Record, *, adding: bool) -> None:
    kind, v = KINDS[ValueType(cmd.value_type)], cmd.value
    entity_id, member_id, member_type = (str(v.get(name) or "") for name in (kind.id_field, "entityId", "entityType"))
    intent = kind.intents["ENTITY_ADDED" if adding else "ENTITY_REMOVED"]
    identity = ctx.state.identity
    if v.get("distributedFrom"):
        if identity.is_member(kind.name, entity_id, member_type, member_id) == adding:
            _again(ctx, cmd, intent, v["_key"], record_value(kind, v))
            return
        _finish(ctx, cmd, ctx.event(kind.value_type, intent, v["_key"], record_value(kind, v)))
        return
    if not b.authorized(ctx, kind.name, "UPDATE", [entity_id]):
        return
    stored = identity.get(kind.name, entity_id) if entity_id else None
    if stored is None:
        verb = "add an entity to" if adding else "remove an entity from"
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to {verb} {kind.noun} with ID '{entity_id}', but a {kind.noun} with this ID does not exist.",
        )
        return
    if member_type not in kind.members or not member_id:
        allowed = ", ".join(sorted(kind.members))
        ctx.reject(
            RejectionType.INVALID_ARGUMENT,
            f"Expected an entity id and one of the entity types {allowed} for a member of a {kind.noun}, but got "
            f"'{member_type}' '{member_id}'",
        )
        return
    member_kind = _BY_NAME.get(member_type)
    # users and clients may come from an identity provider: they need not exist here; the others must
    if member_kind is not None and member_kind is not USER and identity.get(member_type, member_id) is None:
        noun = member_kind.noun
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to {'add' if adding else 'remove'} {noun} with ID '{member_id}' "
            f"{'to' if adding else 'from'} {kind.noun} with ID '{entity_id}', but the {noun} does not exist.",
        )
        return
    if identity.is_member(kind.name, entity_id, member_type, member_id) == adding:
        if adding:
            ctx.reject(
                RejectionType.ALREADY_EXISTS,
                f"Expected to add entity with ID '{member_id}' to {kind.noun} with ID '{entity_id}', but the entity "
                f"is already assigned to this {kind.noun}.",
            )
        else:
            ctx.reject(
                RejectionType.NOT_FOUND,
                f"Expected to remove entity with ID '{member_id}' from {kind.noun} with ID '{entity_id}', but the "
                f"entity is not assigned to this {kind.noun}.",
            )
        return
    value = record_value(kind, {**public(stored), "entityId": member_id, "entityType": member_type})
    _finish(ctx, cmd, ctx.event(kind.value_type, intent, stored[kind.key_field], value))


def _bad_id(kind: Kind, entity_id: Any) -> str:
    rule = (
        "up to 31 letters, digits, '_', '.' and '-'"
        if kind is TENANT
        else "up to 256 letters, digits and the characters _~@.+-"
    )
    return f"Expected to create {kind.noun} with a valid ID ({rule}), but got '{entity_id}'"


def record_value(kind: Kind, v: dict) -> dict:
    """A record value of the kind: its id and key, the fields it has, and the member fields of kinds with members."""
    out = {kind.key_field: v.get("_key", v.get(kind.key_field, -1)), kind.id_field: v[kind.id_field]}
    out.update({name: v.get(name) or "" for name in kind.fields})
    if kind.members:
        out.update(entityId=v.get("entityId") or "", entityType=v.get("entityType") or "UNSPECIFIED")
    return out


def public(stored: dict) -> dict:
    """A stored identity as its record value (without the state's own bookkeeping)."""
    return {k: val for k, val in stored.items() if not k.startswith("_")}


# -- authorizations ------------------------------------------------------------------------------------------


def create_authorization(ctx: ProcessingContext, cmd: Record) -> None:
    v = cmd.value
    if v.get("distributedFrom"):
        if ctx.state.identity.authorization(v["_key"]) is not None:
            _again(ctx, cmd, AuthorizationIntent.CREATED, v["_key"], authorization_value(v))
            return
        _finish(
            ctx, cmd, ctx.event(ValueType.AUTHORIZATION, AuthorizationIntent.CREATED, v["_key"], authorization_value(v))
        )
        return
    if not b.authorized(ctx, "AUTHORIZATION", "CREATE"):
        return
    problem = _authorization_problem(ctx, v, "create")
    if problem is not None:
        ctx.reject(*problem)
        return
    key = ctx.keys.next_key()
    value = authorization_value({**v, "_key": key})
    _finish(ctx, cmd, ctx.event(ValueType.AUTHORIZATION, AuthorizationIntent.CREATED, key, value))


def update_authorization(ctx: ProcessingContext, cmd: Record) -> None:
    v = cmd.value
    key = v.get("_key", cmd.key)
    if v.get("distributedFrom"):
        if ctx.state.identity.authorization(key) is None:
            _again(ctx, cmd, AuthorizationIntent.UPDATED, key, authorization_value(v))
            return
        _finish(ctx, cmd, ctx.event(ValueType.AUTHORIZATION, AuthorizationIntent.UPDATED, key, authorization_value(v)))
        return
    if not b.authorized(ctx, "AUTHORIZATION", "UPDATE"):
        return
    if ctx.state.identity.authorization(key) is None:
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to update authorization with key '{key}', but an authorization with this key does not exist",
        )
        return
    problem = _authorization_problem(ctx, v, "update")
    if problem is not None:
        ctx.reject(*problem)
        return
    value = authorization_value({**v, "_key": key})
    _finish(ctx, cmd, ctx.event(ValueType.AUTHORIZATION, AuthorizationIntent.UPDATED, key, value))


def delete_authorization(ctx: ProcessingContext, cmd: Record) -> None:
    v = cmd.value
    key = v.get("_key", cmd.key)
    stored = ctx.state.identity.authorization(key)
    if not v.get("distributedFrom") and not b.authorized(ctx, "AUTHORIZATION", "DELETE"):
        return
    if stored is None:
        if v.get("distributedFrom"):
            _again(ctx, cmd, AuthorizationIntent.DELETED, key, authorization_value(v))
            return
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to delete authorization with key '{key}', but an authorization with this key does not exist",
        )
        return
    _finish(ctx, cmd, ctx.event(ValueType.AUTHORIZATION, AuthorizationIntent.DELETED, key, stored))


def _authorization_problem(ctx: ProcessingContext, v: dict, verb: str) -> tuple[RejectionType, str] | None:
    owner_type, owner_id = v.get("ownerType"), v.get("ownerId")
    if owner_type not in OWNER_TYPES or not isinstance(owner_id, str) or not owner_id:
        return (
            RejectionType.INVALID_ARGUMENT,
            f"Expected to {verb} authorization with an ownerId and one of the owner types {', '.join(OWNER_TYPES)}, "
            f"but got '{owner_type}' '{owner_id}'",
        )
    owner_kind = _BY_NAME.get(owner_type)
    if owner_kind is not None and owner_kind is not USER and ctx.state.identity.get(owner_type, owner_id) is None:
        return (
            RejectionType.NOT_FOUND,
            f"Expected to {verb} authorization with ownerId '{owner_id}', but a {owner_kind.noun} with this ID does "
            "not exist.",
        )
    resource_type = v.get("resourceType")
    if resource_type not in PERMISSIONS:
        return (
            RejectionType.INVALID_ARGUMENT,
            f"Expected to {verb} authorization with one of the resource types {', '.join(sorted(PERMISSIONS))}, "
            f"but got '{resource_type}'",
        )
    matcher, resource_id = v.get("resourceMatcher") or "ID", v.get("resourceId")
    if matcher not in ("ANY", "ID") or not isinstance(resource_id, str) or not resource_id:
        return (
            RejectionType.INVALID_ARGUMENT,
            f"Expected to {verb} authorization with a resourceId and resourceMatcher ANY or ID, but got '{matcher}' "
            f"'{resource_id}'",
        )
    if matcher == "ANY" and resource_id != "*":
        return RejectionType.INVALID_ARGUMENT, "Expected resourceId '*' with resourceMatcher ANY"
    permissions = v.get("permissionTypes")
    if not isinstance(permissions, list) or not permissions:
        return RejectionType.INVALID_ARGUMENT, f"Expected to {verb} authorization with permissionTypes, but none given"
    unsupported = [p for p in permissions if p not in PERMISSIONS[resource_type]]
    if unsupported:
        return (
            RejectionType.INVALID_ARGUMENT,
            f"Expected to {verb} authorization with permission types '{unsupported}' and resource type "
            f"'{resource_type}', but these permissions are not supported. Supported permission types are: "
            f"{sorted(PERMISSIONS[resource_type])}",
        )
    return None


def authorization_value(v: dict) -> dict:
    matcher = v.get("resourceMatcher") or ("ANY" if v.get("resourceId") == "*" else "ID")
    return {
        "authorizationKey": v.get("_key", v.get("authorizationKey", -1)),
        "ownerId": v.get("ownerId") or "",
        "ownerType": v.get("ownerType") or "UNSPECIFIED",
        "resourceMatcher": matcher,
        "resourceId": v.get("resourceId") or "",
        "resourceType": v.get("resourceType") or "UNSPECIFIED",
        "permissionTypes": sorted(set(v.get("permissionTypes") or [])),
    }


# -- appliers ------------------------------------------------------------------------------------------------


def _apply_put(kind: Kind) -> EventApplier:
    def apply(state: Any, r: Record) -> None:
        state.identity.put(kind.name, r.value[kind.id_field], r.value)

    return apply


def _apply_deleted(kind: Kind) -> EventApplier:
    def apply(state: Any, r: Record) -> None:
        state.identity.remove(kind.name, r.value[kind.id_field])

    return apply


def _apply_membership(kind: Kind, *, adding: bool) -> EventApplier:
    def apply(state: Any, r: Record) -> None:
        v = r.value
        if adding:
            state.identity.add_member(kind.name, v[kind.id_field], v["entityType"], v["entityId"])
        else:
            state.identity.remove_member(kind.name, v[kind.id_field], v["entityType"], v["entityId"])

    return apply


def _apply_authorization(state: Any, r: Record) -> None:
    state.identity.put_authorization(r.key, r.value)


def _apply_authorization_deleted(state: Any, r: Record) -> None:
    state.identity.remove_authorization(r.key)


APPLIERS: Final[dict[tuple[int, int], EventApplier]] = {
    (ValueType.AUTHORIZATION, AuthorizationIntent.CREATED): _apply_authorization,
    (ValueType.AUTHORIZATION, AuthorizationIntent.UPDATED): _apply_authorization,
    (ValueType.AUTHORIZATION, AuthorizationIntent.DELETED): _apply_authorization_deleted,
}
for _kind in KINDS.values():
    APPLIERS[(_kind.value_type, _kind.intents["CREATED"])] = _apply_put(_kind)
    APPLIERS[(_kind.value_type, _kind.intents["UPDATED"])] = _apply_put(_kind)
    APPLIERS[(_kind.value_type, _kind.intents["DELETED"])] = _apply_deleted(_kind)
    if _kind.members:
        APPLIERS[(_kind.value_type, _kind.intents["ENTITY_ADDED"])] = _apply_membership(_kind, adding=True)
        APPLIERS[(_kind.value_type, _kind.intents["ENTITY_REMOVED"])] = _apply_membership(_kind, adding=False)
"""The event appliers of identity records, registered in the engine's applier table."""

PROCESSORS: Final[dict[tuple[int, int], Callable[[ProcessingContext, Record], None]]] = {
    (ValueType.AUTHORIZATION, AuthorizationIntent.CREATE): create_authorization,
    (ValueType.AUTHORIZATION, AuthorizationIntent.UPDATE): update_authorization,
    (ValueType.AUTHORIZATION, AuthorizationIntent.DELETE): delete_authorization,
}
for _kind in KINDS.values():
    PROCESSORS[(_kind.value_type, _kind.intents["CREATE"])] = create
    PROCESSORS[(_kind.value_type, _kind.intents["UPDATE"])] = update
    PROCESSORS[(_kind.value_type, _kind.intents["DELETE"])] = delete
    if _kind.members:
        PROCESSORS[(_kind.value_type, _kind.intents["ADD_ENTITY"])] = add_entity
        PROCESSORS[(_kind.value_type, _kind.intents["REMOVE_ENTITY"])] = remove_entity
"""The command processors of identity records, registered in the engine's table."""
