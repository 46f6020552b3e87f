"""``GET /v2/authentication/me``: who the signed-in caller is (Camunda's CamundaUserResult), from the directory.

The caller is the one the authentication middleware checked (:data:`gateway.caller.CALLER`); its user fields,
tenants, groups and roles are the cluster's identity as the directory has it (at most ``identityCacheTtl`` old).
Without authentication every caller is the same anonymous one, who may use everything and cannot sign out.
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from broker.stream.partition import PartitionUnavailableError
from gateway.caller import CALLER
from gateway.commands import CommandError, ErrorCode
from gateway.directory import CallerInfo, Directory
from gateway.rest.endpoints import STRING, Endpoint, obj
from gateway.rest.routes import json_response

NULLABLE_STRING: Final = {"oneOf": [STRING, {"type": "null"}]}
STRINGS: Final = {"type": "array", "items": STRING}
TENANT: Final = obj(
    {"tenantId": STRING, "name": STRING, "description": NULLABLE_STRING}, required=["tenantId", "name", "description"]
)
CAMUNDA_USER: Final = obj(
    {
        "username": STRING,
        "displayName": NULLABLE_STRING,
        "email": NULLABLE_STRING,
        "authorizedComponents": STRINGS,
        "tenants": {"type": "array", "items": TENANT},
        "groups": STRINGS,
        "roles": STRINGS,
        "salesPlanType": NULLABLE_STRING,
        "c8Links": {"type": "object", "additionalProperties": STRING},
        "canLogout": {"type": "boolean"},
    },
    "The signed-in caller",
    required=["username", "displayName", "email", "authorizedComponents", "tenants", "groups", "roles",
              "salesPlanType", "c8Links", "canLogout"],
)  # fmt: skip
ANONYMOUS: Final = "anonymous"


def _user(username: str, display_name: str | None, email: str | None, **rest: Any) -> dict[str, Any]:
    return {
        "username": username,
        "displayName": display_name,
        "email": email,
        "authorizedComponents": rest.get("components", ["*"]),
        "tenants": rest.get("tenants", []),
        "groups": rest.get("groups", []),
        "roles": rest.get("roles", []),
        "salesPlanType": None,
        "c8Links": {},
        "canLogout": rest.get("can_logout", False),
    }


def components(info: CallerInfo) -> list[str]:
    """The web components the caller may use: those a COMPONENT ACCESS grant names ("*": all); all of them when
    authorizations are off."""
    if not info.authorizations_enabled:
        return ["*"]
    named = {rid for rt, rid, permission in info.grants if rt == "COMPONENT" and permission == "ACCESS"}
    return ["*"] if "*" in named else sorted(named)


def describe(caller: dict[str, Any], info: CallerInfo) -> dict[str, Any]:
    """The CamundaUserResult of an authenticated caller."""
    username = str(caller.get("username") or caller.get("clientId") or "")
    user = info.user
    return _user(
        username,
        (user.name or user.username) if user is not None else username,
        (user.email or None) if user is not None else None,
        components=components(info),
        tenants=[{"tenantId": t.tenant_id, "name": t.name, "description": t.description or None} for t in info.tenants],
        groups=list(info.groups),
        roles=list(info.roles),
        # basic credentials are sent with every request: nothing to sign out of (a token's holder signs out at its
        # identity provider)
        can_logout=False,
    )


class AuthenticationRoutes:
    def __init__(self, directory: Directory | None) -> None:
        self.directory = directory

    def endpoints(self) -> list[Endpoint]:
        return [
            Endpoint("GET", "/v2/authentication/me", "Get the signed-in caller", self._me, "Authentication",
                     responses={200: ("The signed-in caller", CAMUNDA_USER)}, errors=(403,),
                     description="The caller's user fields, tenants, groups and roles, from the cluster's identity "
                                 "(up to gateway.security.authentication.identityCacheTtl seconds old). Without "
                                 "authentication: an anonymous caller who may use everything."),
        ]  # fmt: skip

    async def _me(self, request: web.Request) -> web.Response:
        caller = CALLER.get()
        if caller is None:
            return json_response(_user(ANONYMOUS, None, None))
        if self.directory is None:
            raise CommandError(ErrorCode.UNAVAILABLE, "This gateway cannot look up the cluster's identity")
        try:
            info = await self.directory.lookup(caller)
        except PartitionUnavailableError as e:
            raise CommandError(ErrorCode.UNAVAILABLE, str(e)) from None
        return json_response(describe(caller, info))
