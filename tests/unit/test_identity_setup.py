"""The identity configured at start: one IDENTITY_SETUP command creates the users, the admin role with every
permission and its members where missing, on every partition; run again it changes nothing. The configuration it
comes from, and the gateway's cached view of callers (gateway/directory.py).

Partitions run in-process (as in test_identity.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from broker.config import ConfigError, dump, load
from broker.engine.access import Caller
from broker.engine.caller_info import describe
from broker.engine.identity import PERMISSIONS
from broker.identity_init import InitialIdentity
from broker.protocol.enums import IdentitySetupIntent, RecordType, ValueType
from broker.protocol.record import Record
from gateway import directory as directory_module
from gateway.directory import Directory
from tests.unit.test_identity import identity
from tests.unit.test_replay import accepted, check_replay_equals_live, distributed, routed_partitions

SETUP = {
    "users": [{"username": "demo", "password": "scrypt$hash", "name": "Demo", "email": "demo@example.com"}],
    "roleMembers": [{"entityType": "USER", "entityId": "demo"}, {"entityType": "CLIENT", "entityId": "ops-bot"}],
}


async def test_setup_creates_what_is_missing_on_every_partition_once(tmp_path: Path) -> None:
    first, second = routed_partitions(tmp_path)
    done = accepted(await first.send(ValueType.IDENTITY_SETUP, IdentitySetupIntent.INITIALIZE, SETUP))
    assert done.value == {"users": ["demo"], "roles": ["admin"], "roleMembers": ["USER:demo", "CLIENT:ops-bot"]}
    await distributed(first)
    await second.settle()
    seen = identity(first)
    assert seen["kinds"]["USER"] == ["demo"] and seen["kinds"]["ROLE"] == ["admin"]
    assert seen["members"]["ROLE:admin"] == [("CLIENT", "ops-bot"), ("USER", "demo")]
    assert identity(second) == seen, "the other partition has the same identity"
    # the admin role holds every permission of every resource type
    grants = first.read(lambda s: describe(s.identity, Caller(username="demo"), authorizations_enabled=True))
    assert {tuple(g) for g in grants["grants"]} == {(t, "*", p) for t, ps in PERMISSIONS.items() for p in ps}
    assert grants["roles"] == ["admin"] and grants["user"]["name"] == "Demo"

    # again (a restart's check raced a change, another leader): nothing new, the stored password stays
    changed = {**SETUP, "users": [{**SETUP["users"][0], "password": "scrypt$other"}]}
    again = accepted(await first.send(ValueType.IDENTITY_SETUP, IdentitySetupIntent.INITIALIZE, changed))
    assert again.value == {"users": [], "roles": [], "roleMembers": []}
    assert first.read(lambda s: (s.identity.get("USER", "demo") or {}).get("password")) == "scrypt$hash"
    await distributed(first)
    assert identity(second) == seen
    await first.close()
    await second.close()
    check_replay_equals_live(first.directory, tmp_path)
    check_replay_equals_live(second.directory, tmp_path)


def test_the_setup_command_is_exported_without_password_hashes() -> None:
    record = Record(5, 7, RecordType.COMMAND, ValueType.IDENTITY_SETUP, int(IdentitySetupIntent.INITIALIZE), 0, SETUP)
    assert record.to_json_dict()["value"]["users"][0]["password"] == ""
    assert record.value["users"][0]["password"] == "scrypt$hash"


def test_initialization_from_file_and_environment(tmp_path: Path) -> None:
    config = tmp_path / "weir.yaml"
    config.write_text(
        "broker:\n  security:\n    initialization:\n      users:\n        - {username: demo, name: Demo}\n"
        "      defaultRoles: {admin: {users: [demo]}}\n"
    )
    with pytest.raises(ConfigError, match=r"users\[0\].password: required"):
        load(config, env={})
    env = {
        "WEIR_BROKER_SECURITY_INITIALIZATION_USERS_0_PASSWORD": "from-env",
        "WEIR_BROKER_SECURITY_INITIALIZATION_USERS_1_USERNAME": "ann",
        "WEIR_BROKER_SECURITY_INITIALIZATION_USERS_1_PASSWORD": "1234",
        "WEIR_BROKER_SECURITY_INITIALIZATION_DEFAULT_ROLES_ADMIN_CLIENTS": "ops-bot,ci",
    }
    loaded = load(config, env=env)
    wanted = InitialIdentity.from_config(loaded["broker"]["security"]["initialization"])
    assert [(u.username, u.password, u.name) for u in wanted.users] == [("demo", "from-env", "Demo"),
                                                                        ("ann", "1234", "")]  # fmt: skip
    assert wanted.members() == [("USER", "demo"), ("CLIENT", "ops-bot"), ("CLIENT", "ci")]
    assert "from-env" not in dump(loaded) and "1234" not in dump(loaded)


class _Source:
    """Identity answers counted, one per call, held until ``release`` is set."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = asyncio.Event()
        self.release.set()
        self.unknown_calls = 0  # this many first calls answer that the user is not stored

    async def identity(self, caller: dict[str, Any], *, password: bool = False) -> dict[str, Any]:
        self.calls += 1
        await self.release.wait()
        user = {"username": caller["username"], "name": "", "email": ""} if self.calls > self.unknown_calls else None
        return {"authorizationsEnabled": True, "tenants": [{"tenantId": "t1", "name": "T", "description": ""}],
                "grants": [["PROCESS_DEFINITION", "order", "READ_PROCESS_INSTANCE"]], "user": user, "groups": [],
                "roles": [], **({"passwordHash": "scrypt$h"} if password else {})}  # fmt: skip


async def test_the_directory_remembers_callers_for_its_ttl_and_shares_lookups() -> None:
    source = _Source()
    directory = Directory(source, ttl_s=0.2)
    source.release.clear()
    both = asyncio.gather(directory.lookup({"username": "ann"}), directory.lookup({"username": "ann"}))
    await asyncio.sleep(0.01)
    source.release.set()
    one, two = await both
    assert one is two and source.calls == 1, "callers asking at once share one lookup"
    access = await directory.access({"username": "ann"})
    assert source.calls == 1
    assert access.sees_tenant("t1") and access.sees_tenant("<default>") and not access.sees_tenant("t2")
    assert access.scope().ids("PROCESS_DEFINITION", "READ_PROCESS_INSTANCE") == {"order"}
    assert access.scope().tenants == {"t1", "<default>"}
    assert (await directory.lookup({"username": "ann"}, password=True)).password_hash == "scrypt$h"
    assert one.password_hash is None, "the hash only when asked for"
    await asyncio.sleep(0.25)
    await directory.lookup({"username": "ann"})
    assert source.calls == 3, "asked again once the answer is older than the ttl"
    unrestricted = await directory.access(None)
    assert unrestricted.sees_tenant("any")


async def test_the_directory_forgets_an_unknown_user_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after a cluster starts its configured users are not written yet: a sign-in refused then must not be
    refused for a whole ttl once they are."""
    monkeypatch.setattr(directory_module, "UNKNOWN_USER_TTL_S", 0.1)
    source = _Source()
    source.unknown_calls = 1  # the first answer comes before the user is written
    directory = Directory(source, ttl_s=60)
    assert (await directory.lookup({"username": "demo"}, password=True)).user is None
    assert (await directory.lookup({"username": "demo"}, password=True)).user is None, "remembered for a moment"
    assert source.calls == 1
    await asyncio.sleep(0.15)
    assert (await directory.lookup({"username": "demo"}, password=True)).user is not None
    await directory.lookup({"username": "demo"}, password=True)
    assert source.calls == 2, "a known user is remembered for the ttl"
