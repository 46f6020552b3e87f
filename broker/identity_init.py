"""The identity configured at start (``broker.security.initialization``, as Camunda's
``camunda.security.initialization``): users, and the users and clients of the ``admin`` role.

Whenever this broker's replica of the first partition becomes its leader, it reads the identity state; if a configured
user, the admin role or one of its configured members is missing, it hashes the missing users' passwords (here, off
the event loop: the engine's processors stay deterministic) and submits one IDENTITY_SETUP INITIALIZE command, which
creates what is still missing when it is processed (``broker/engine/identity_setup.py``). With everything present it
submits nothing, so a restart changes nothing.

The configuration only adds: a password changed in it later does not change a stored user's, and a configured user
deleted through the API comes back at the next start unless it is removed from the configuration too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.engine.identity_setup import ADMIN_ROLE
from broker.protocol.enums import IdentitySetupIntent, ValueType
from broker.state.identity_state import IdentityState
from broker.stream.partition import BackpressureError, NotLeaderError, Partition, PartitionUnavailableError

log = logging.getLogger("weir.identity")

# How long to wait before trying again when the command could not be taken (inbox full, disk full, a restart).
RETRY_S = 1.0


@dataclass(frozen=True, slots=True)
class InitialUser:
    username: str
    password: str
    name: str = ""
    email: str = ""


@dataclass(frozen=True, slots=True)
class InitialIdentity:
    """What ``broker.security.initialization`` asks for (validated by ``broker/config.py``)."""

    users: tuple[InitialUser, ...] = ()
    admin_users: tuple[str, ...] = ()
    admin_clients: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> InitialIdentity:
        admin = section["defaultRoles"]["admin"]
        users = tuple(
            InitialUser(u["username"], u["password"], u.get("name") or "", u.get("email") or "")
            for u in section["users"]
        )
        return cls(users, tuple(admin["users"]), tuple(admin["clients"]))

    @property
    def empty(self) -> bool:
        return not (self.users or self.admin_users or self.admin_clients)

    def members(self) -> list[tuple[str, str]]:
        return [("USER", u) for u in self.admin_users] + [("CLIENT", c) for c in self.admin_clients]

    def missing(self, identity: IdentityState) -> tuple[list[InitialUser], bool]:
        """The configured users the state lacks, and whether the admin role or one of its members is missing."""
        users = [u for u in self.users if identity.get("USER", u.username) is None]
        role_missing = identity.get("ROLE", ADMIN_ROLE) is None
        members_missing = any(not identity.is_member("ROLE", ADMIN_ROLE, t, i) for t, i in self.members())
        return users, role_missing or members_missing


class IdentityInitializer:
    """Submits the identity setup each time ``partition`` (the first) starts leading here, when it is needed."""

    def __init__(self, partition: Partition, wanted: InitialIdentity, hash_password: Callable[[str], str]) -> None:
        self._partition = partition
        self._wanted = wanted
        self._hash = hash_password
        self._task: asyncio.Task[None] | None = None

    def attach(self) -> None:
        """Listen for leadership (and act now if the partition already leads)."""
        if self._wanted.empty:
            return
        self._partition.lead_listeners.append(self._on_lead)
        if self._partition.processing:
            self._on_lead()

    def _on_lead(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._initialize())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _initialize(self) -> None:
        partition = self._partition
        while partition.processing and not partition.closing:
            users, role_or_members = partition.read(lambda state: self._wanted.missing(state.identity))
            if not users and not role_or_members:
                return
            hashed = await asyncio.gather(*(asyncio.to_thread(self._hash, u.password) for u in users))
            value = {
                "users": [
                    {"username": u.username, "password": h, "name": u.name, "email": u.email}
                    for u, h in zip(users, hashed, strict=True)
                ],
                "roleMembers": [{"entityType": t, "entityId": i} for t, i in self._wanted.members()],
            }
            try:
                done = await partition.execute(ValueType.IDENTITY_SETUP, IdentitySetupIntent.INITIALIZE, value,
                                               internal=True)  # fmt: skip
            except NotLeaderError:
                return  # the next leader checks again
            except (BackpressureError, PartitionUnavailableError) as e:
                log.warning("identity setup not taken yet (%s); trying again in %.0f s", e, RETRY_S)
                await asyncio.sleep(RETRY_S)
                continue
            created = done.value
            log.info(
                "identity setup: created users %s, roles %s, admin members %s",
                created.get("users") or "none",
                created.get("roles") or "none",
                created.get("roleMembers") or "none",
            )
            return
