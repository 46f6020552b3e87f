"""What the gateway knows of its callers: the cluster's identity as the brokers keep it, asked for per caller and
remembered for a bounded time.

- :meth:`Directory.lookup` answers a :class:`CallerInfo` (tenants, grants, user fields, groups, roles, and for basic
  sign-ins the stored password hash) from the first partition's state, through the broker client's ``identity``.
- Answers are remembered per caller for ``ttl_s`` seconds (``gateway.security.authentication.identityCacheTtl``),
  at most ``size`` callers (least recently used go first); callers asking at once share one lookup; a sign-in's "no
  such user" at most :data:`UNKNOWN_USER_TTL_S`. So a changed
  password, a revoked grant or a removed tenant reaches this gateway's sign-ins and reads within ``ttl_s``; the
  brokers check every command against their own state at once.
- Search and read code asks :meth:`Directory.access` (see :class:`CallerAccess`) what a caller may see, and hands
  its :meth:`CallerAccess.scope` to the history reader, which keeps every query to it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from broker.protocol.values import TENANT
from exporters.history.scope import EVERYTHING, Grant, Scope

DEFAULT_TTL_S: Final = 10.0
DEFAULT_SIZE: Final = 10_000
#: How long "no such user" is remembered, at most. Short, so that sign-ins right after a cluster starts (before its
#: configured users are written) or a user is created are not refused for a whole ttl; not zero, so that a storm of
#: sign-ins with one unknown name still asks the brokers about once a second.
UNKNOWN_USER_TTL_S: Final = 1.0


@runtime_checkable
class IdentitySource(Protocol):
    """Where answers come from: the broker clients' ``identity`` (``broker.command_api.identity_answer``)."""

    async def identity(self, caller: dict[str, Any], *, password: bool = False) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class TenantInfo:
    tenant_id: str
    name: str
    description: str


@dataclass(frozen=True, slots=True)
class UserInfo:
    username: str
    name: str
    email: str


@dataclass(frozen=True, slots=True)
class CallerAccess:
    """What a caller may see, for filtering reads and searches:

    - ``authenticated`` False (authentication is off): everything; ``sees_tenant`` says yes.
    - ``tenants``: the tenants it is assigned to; the default tenant ``<default>`` is open to every caller.
    - ``authorizations_enabled`` (``broker.security.authorizations.enabled``): whether ``grants`` decide too; when
      False, any permission is allowed in a tenant the caller sees.
    - ``username`` and ``groups``: the user tasks assigned or offered to the user or one of its groups are readable
      without a grant (Camunda 8.9's property-based access), in the caller's tenants.
    """

    authenticated: bool
    authorizations_enabled: bool
    tenants: frozenset[str]
    grants: frozenset[Grant]
    username: str = ""
    groups: frozenset[str] = frozenset()

    def sees_tenant(self, tenant_id: str) -> bool:
        return not self.authenticated or tenant_id == TENANT or tenant_id in self.tenants

    def scope(self) -> Scope:
        """The history rows this caller may read (`exporters.history.scope`): its tenants and the default one, and
        with authorizations enabled its grants, user name and groups."""
        if not self.authenticated:
            return EVERYTHING
        return Scope(
            tenants=self.tenants | {TENANT},
            grants=self.grants if self.authorizations_enabled else None,
            username=self.username,
            groups=self.groups,
        )


UNRESTRICTED: Final = CallerAccess(False, False, frozenset(), frozenset())
"""The access of every caller when authentication is off."""


@dataclass(frozen=True, slots=True)
class CallerInfo:
    """What the cluster's identity says about one caller (``user`` None: no user of that name is stored)."""

    authorizations_enabled: bool
    tenants: tuple[TenantInfo, ...]
    grants: frozenset[Grant]
    user: UserInfo | None
    groups: tuple[str, ...]
    roles: tuple[str, ...]
    password_hash: str | None = field(default=None, repr=False)

    @classmethod
    def from_answer(cls, answer: Mapping[str, Any]) -> CallerInfo:
        user = answer.get("user")
        return cls(
            authorizations_enabled=bool(answer.get("authorizationsEnabled")),
            tenants=tuple(TenantInfo(t["tenantId"], t["name"], t["description"]) for t in answer["tenants"]),
            grants=frozenset((str(g[0]), str(g[1]), str(g[2])) for g in answer["grants"]),
            user=None if not user else UserInfo(user["username"], user["name"], user["email"]),
            groups=tuple(answer["groups"]),
            roles=tuple(answer["roles"]),
            password_hash=answer.get("passwordHash"),
        )

    @property
    def access(self) -> CallerAccess:
        return self.access_of("")

    def access_of(self, username: str) -> CallerAccess:
        """The access of the caller this answer describes, signed in as ``username`` ("" for a client)."""
        tenants = frozenset(t.tenant_id for t in self.tenants)
        groups = frozenset(self.groups)
        return CallerAccess(True, self.authorizations_enabled, tenants, self.grants, username, groups)


def caller_key(caller: Mapping[str, Any]) -> str:
    """The cache key of a caller: its user, client and claims (a token's claims may map it to other rules)."""
    return json.dumps(
        [caller.get("username") or "", caller.get("clientId") or "", caller.get("claims") or {}],
        sort_keys=True,
        default=str,
    )


class Directory:
    """The gateway's cached view of who its callers are (see the module docstring)."""

    def __init__(self, source: IdentitySource, *, ttl_s: float = DEFAULT_TTL_S, size: int = DEFAULT_SIZE) -> None:
        self._source = source
        self.ttl_s = ttl_s
        self._size = size
        # (caller key, with password) → (until, the lookup: done or in flight)
        self._cache: OrderedDict[tuple[str, bool], tuple[float, asyncio.Future[CallerInfo]]] = OrderedDict()

    async def lookup(self, caller: Mapping[str, Any], *, password: bool = False) -> CallerInfo:
        """The caller as the cluster knows it (``{"username", "clientId", "claims"}``, each optional); with
        ``password`` the stored hash too. Raises what the broker client raises (PartitionUnavailableError) when no
        broker can answer; a failure is not remembered."""
        key = (caller_key(caller), password)
        now = time.monotonic()
        entry = self._cache.get(key)
        if entry is not None and (now < entry[0] or not entry[1].done()):
            self._cache.move_to_end(key)
            return await asyncio.shield(entry[1])
        request = {k: caller[k] for k in ("username", "clientId", "claims") if caller.get(k)}
        future: asyncio.Future[CallerInfo] = asyncio.ensure_future(self._ask(request, password))

        def settle(done: asyncio.Future[CallerInfo]) -> None:
            """A failure is forgotten at once, an unknown user soon (see UNKNOWN_USER_TTL_S)."""
            held = self._cache.get(key)
            if held is None or held[1] is not done:
                return
            if done.cancelled() or done.exception() is not None:
                del self._cache[key]
            elif done.result().user is None and caller.get("username"):
                self._cache[key] = (min(held[0], time.monotonic() + UNKNOWN_USER_TTL_S), done)

        future.add_done_callback(settle)
        self._cache[key] = (now + self.ttl_s, future)
        self._cache.move_to_end(key)
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return await asyncio.shield(future)

    async def _ask(self, request: dict[str, Any], password: bool) -> CallerInfo:
        return CallerInfo.from_answer(await self._source.identity(request, password=password))

    async def access(self, caller: Mapping[str, Any] | None) -> CallerAccess:
        """What ``caller`` may see (None, as :data:`gateway.caller.CALLER` holds when authentication is off: all)."""
        if caller is None:
            return UNRESTRICTED
        return (await self.lookup(caller)).access_of(str(caller.get("username") or ""))

    def forget(self) -> None:
        """Drop every remembered answer (the next lookups ask the brokers)."""
        self._cache.clear()


def directory_for(client: object, ttl_s: float = DEFAULT_TTL_S) -> Directory | None:
    """A directory over a broker client that answers identity lookups (the local and remote ones do), else None."""
    return Directory(client, ttl_s=ttl_s) if isinstance(client, IdentitySource) else None
