"""REST endpoints that change the cluster's identity (Camunda 8.8 v2): users, groups, roles, tenants, mapping rules,
their members, and authorizations, through gateway/identity.py. Each answers once every partition has the change.

The shapes are Camunda's: creations answer 201 with the entity (an authorization with its key), updates of an entity
200 with it, deletions, member changes and authorization updates 204. Reading them back is the searches' job.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

from gateway import identity
from gateway.commands import GatewayCommands
from gateway.rest.endpoints import KEY, STRING, Endpoint, obj
from gateway.rest.routes import json_response, no_content, path_key, read_json
from gateway.rest.schema import Body, Field

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

NAME = Field("string", "A display name", required=True)
DESCRIPTION = Field("string", "What it is for")
USER_CREATE = Body(
    {
        "username": Field("string", "The user's login name", required=True, min_length=1),
        "password": Field("string", "The password (hashed before it leaves the gateway)", required=True, min_length=1),
        "name": Field("string", "The user's name"),
        "email": Field("string", "The user's email address"),
    }
)
USER_UPDATE = Body(
    {
        "password": Field("string", "A new password (left as it is when not given)", min_length=1),
        "name": Field("string", "The user's name"),
        "email": Field("string", "The user's email address"),
    }
)
MAPPING_RULE_FIELDS: Final = {
    "claimName": Field("string", "The token claim to look at", required=True, min_length=1),
    "claimValue": Field("string", "The value the claim must have", required=True, min_length=1),
    "name": NAME,
}
MAPPING_RULE_CREATE = Body(
    {"mappingRuleId": Field("string", "The rule's id", required=True, min_length=1), **MAPPING_RULE_FIELDS}
)
MAPPING_RULE_UPDATE = Body(MAPPING_RULE_FIELDS)
UPDATE = Body({"name": NAME, "description": DESCRIPTION})
AUTHORIZATION = Body(
    {
        "ownerId": Field("string", "Who is granted the permissions", required=True, min_length=1),
        "ownerType": Field("string", "USER, CLIENT, GROUP, ROLE or MAPPING_RULE", required=True),
        "resourceId": Field("string", "The resource's id, or * for every resource of the type", required=True),
        "resourceType": Field("string", "The kind of resource (PROCESS_DEFINITION, TENANT, …)", required=True),
        "permissionTypes": Field("strings", "The permissions granted", required=True),
        "resourcePropertyName": Field("string", "Not supported: grants by resource property"),
    }
)

# Each identity with members: its path, id field and kind, and the members it may have (path segment, kind).
_CONTAINERS: Final = (
    ("groups", "groupId", "GROUP", (("users", "username", "USER"), ("clients", "clientId", "CLIENT"),
                                   ("mapping-rules", "mappingRuleId", "MAPPING_RULE"))),
    ("roles", "roleId", "ROLE", (("users", "username", "USER"), ("clients", "clientId", "CLIENT"),
                                 ("groups", "groupId", "GROUP"), ("mapping-rules", "mappingRuleId", "MAPPING_RULE"))),
    ("tenants", "tenantId", "TENANT", (("users", "username", "USER"), ("clients", "clientId", "CLIENT"),
                                       ("groups", "groupId", "GROUP"), ("roles", "roleId", "ROLE"),
                                       ("mapping-rules", "mappingRuleId", "MAPPING_RULE"))),
)  # fmt: skip
ERRORS = (400, 404, 409, 504)


NULLABLE_STRING: Final = {"oneOf": [STRING, {"type": "null"}]}


def _entity(kind: str, id_field: str) -> dict[str, Any]:
    if kind == "USER":
        fields = {"username": STRING, "name": NULLABLE_STRING, "email": NULLABLE_STRING}
    elif kind == "MAPPING_RULE":
        fields = {"claimName": STRING, "claimValue": STRING, "name": STRING, "mappingRuleId": STRING}
    else:
        fields = {id_field: STRING, "name": STRING, "description": NULLABLE_STRING}
    return obj(fields, required=list(fields))


def _shown(kind: str, id_field: str, value: dict[str, Any]) -> dict[str, Any]:
    """The entity as Camunda answers it (no key; an absent text is null)."""
    if kind == "USER":
        return {"username": value["username"], "name": value.get("name") or None, "email": value.get("email") or None}
    if kind == "MAPPING_RULE":
        return {name: value.get(name) for name in ("claimName", "claimValue", "name", "mappingRuleId")}
    return {id_field: value[id_field], "name": value.get("name") or "", "description": value.get("description") or None}


class IdentityRoutes:
    def __init__(self, commands: GatewayCommands) -> None:
        self.commands = commands

    # -- users, groups, roles, tenants, mapping rules --------------------------------------------------------

    def _create(self, kind: str, id_field: str, body: Body) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            value = await read_json(request, body)
            rec = await identity.create(self.commands, kind, value)
            return json_response(_shown(kind, id_field, rec.value), status=201)

        return handle

    def _update(self, kind: str, id_field: str, body: Body) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            value = await read_json(request, body, optional=kind == "USER")
            rec = await identity.update(self.commands, kind, request.match_info[id_field], value)
            return json_response(_shown(kind, id_field, rec.value))

        return handle

    def _delete(self, kind: str, id_field: str) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            await identity.delete(self.commands, kind, request.match_info[id_field])
            return no_content()

        return handle

    def _member(self, kind: str, id_field: str, member_type: str, member_field: str, *, add: bool) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            entity_id, member_id = request.match_info[id_field], request.match_info[member_field]
            await identity.membership(self.commands, kind, entity_id, member_type, member_id, add=add)
            return no_content()

        return handle

    # -- authorizations ----------------------------------------------------------------------------------------

    async def create_authorization(self, request: web.Request) -> web.Response:
        rec = await identity.create_authorization(self.commands, await read_json(request, AUTHORIZATION))
        return json_response({"authorizationKey": str(rec.key)}, status=201)

    async def update_authorization(self, request: web.Request) -> web.Response:
        key = path_key(request, "authorizationKey")
        await identity.update_authorization(self.commands, key, await read_json(request, AUTHORIZATION))
        return no_content()

    async def delete_authorization(self, request: web.Request) -> web.Response:
        await identity.delete_authorization(self.commands, path_key(request, "authorizationKey"))
        return no_content()

    # -- the registry ------------------------------------------------------------------------------------------

    def endpoints(self) -> list[Endpoint]:
        done: dict[int, tuple[str, dict[str, Any] | None]] = {204: ("Done", None)}
        out: list[Endpoint] = []
        entities = (
            ("users", "username", "USER", "User", "a user", USER_CREATE, USER_UPDATE),
            ("groups", "groupId", "GROUP", "Group", "a group", None, UPDATE),
            ("roles", "roleId", "ROLE", "Role", "a role", None, UPDATE),
            ("tenants", "tenantId", "TENANT", "Tenant", "a tenant", None, UPDATE),
            ("mapping-rules", "mappingRuleId", "MAPPING_RULE", "Mapping rule", "a mapping rule", MAPPING_RULE_CREATE,
             MAPPING_RULE_UPDATE),
        )  # fmt: skip
        for segment, id_field, kind, tag, noun, create_body, update_body in entities:
            create_body = create_body or Body(
                {id_field: Field("string", f"The id of {noun}", required=True, min_length=1), **UPDATE.fields}
            )
            shape = _entity(kind, id_field)
            out += [
                Endpoint("POST", f"/v2/{segment}", f"Create {noun}", self._create(kind, id_field, create_body), tag,
                         body=create_body, responses={201: (f"The new {tag.lower()}", shape)}, errors=ERRORS),
                Endpoint("PUT", f"/v2/{segment}/{{{id_field}}}", f"Update {noun}",
                         self._update(kind, id_field, update_body), tag, body=update_body,
                         body_optional=kind == "USER", responses={200: (f"The {tag.lower()}", shape)},
                         errors=ERRORS),
                Endpoint("DELETE", f"/v2/{segment}/{{{id_field}}}", f"Delete {noun}", self._delete(kind, id_field),
                         tag, responses=done, errors=ERRORS),
            ]  # fmt: skip
        for segment, id_field, kind, members in _CONTAINERS:
            tag = kind.capitalize()
            for member_segment, member_field, member_type in members:
                path = f"/v2/{segment}/{{{id_field}}}/{member_segment}/{{{member_field}}}"
                what = member_type.lower().replace("_", " ")
                out += [
                    Endpoint("PUT", path, f"Assign a {what} to a {kind.lower()}",
                             self._member(kind, id_field, member_type, member_field, add=True), tag,
                             responses=done, errors=ERRORS),
                    Endpoint("DELETE", path, f"Unassign a {what} from a {kind.lower()}",
                             self._member(kind, id_field, member_type, member_field, add=False), tag,
                             responses=done, errors=ERRORS),
                ]  # fmt: skip
        key_shape = obj({"authorizationKey": KEY}, required=["authorizationKey"])
        created: dict[int, tuple[str, dict[str, Any] | None]] = {201: ("The authorization's key", key_shape)}
        out += [
            Endpoint("POST", "/v2/authorizations", "Create an authorization", self.create_authorization,
                     "Authorization", body=AUTHORIZATION, responses=created, errors=ERRORS),
            Endpoint("PUT", "/v2/authorizations/{authorizationKey}", "Update an authorization",
                     self.update_authorization, "Authorization", body=AUTHORIZATION, responses=done, errors=ERRORS),
            Endpoint("DELETE", "/v2/authorizations/{authorizationKey}", "Delete an authorization",
                     self.delete_authorization, "Authorization", responses=done, errors=ERRORS),
        ]  # fmt: skip
        return out
