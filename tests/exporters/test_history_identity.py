"""Identity in the history (SQLite and PostgreSQL): users, groups, roles, tenants, mapping rules, authorizations and
memberships from the records two real partitions write for the same identity commands.

Partition 1's records go through the history exporter; its later records (deletions, re-creations) are written in
one batch; partition 2's copies of the same events, written last as a slow partition would, change nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from broker.protocol.enums import (
    AuthorizationIntent,
    GroupIntent,
    MappingRuleIntent,
    RecordType,
    RoleIntent,
    TenantIntent,
    UserIntent,
    ValueType,
)
from broker.protocol.record import Record
from exporters.history import schema
from exporters.history.backends import open_backend
from exporters.history.reader import HistoryReader, InvalidQuery, open_reader
from exporters.history.rows import Batch, changes_history
from tests.exporters.history_check import query
from tests.exporters.scenario import read_log
from tests.exporters.test_history_exporter import export_all, record_log
from tests.unit.test_replay import Driver, accepted, distributed, routed_partitions

HASH = "scrypt$16384$8$1$c2FsdA==$not-a-real-hash"


async def _send(d: Driver, value_type: ValueType, intent: int, key: int = -1, **value: Any) -> Record:
    return accepted(await d.send(value_type, intent, value, key))


async def _build(d: Driver) -> int:
    """A tenant, users, a group, a role, a mapping rule, their memberships and two grants; bob's grant's key."""
    await _send(d, ValueType.TENANT, TenantIntent.CREATE, tenantId="team-a", name="Team A", description="The A team")
    await _send(d, ValueType.USER, UserIntent.CREATE, username="ann", name="Ann", email="ann@a.example", password=HASH)
    await _send(d, ValueType.USER, UserIntent.CREATE, username="bob", name="Bob", email="", password=HASH)
    await _send(d, ValueType.GROUP, GroupIntent.CREATE, groupId="devs", name="Developers")
    await _send(d, ValueType.ROLE, RoleIntent.CREATE, roleId="ops", name="Operators", description="Runs things")
    rule = {"mappingRuleId": "eng", "claimName": "dept", "claimValue": "eng", "name": "Engineering"}
    await _send(d, ValueType.MAPPING_RULE, MappingRuleIntent.CREATE, **rule)
    members = {
        (ValueType.GROUP, GroupIntent.ADD_ENTITY, "groupId", "devs"): [
            ("ann", "USER"),
            ("eng", "MAPPING_RULE"),
            ("worker-1", "CLIENT"),
        ],
        (ValueType.ROLE, RoleIntent.ADD_ENTITY, "roleId", "ops"): [
            ("devs", "GROUP"),
            ("ann", "USER"),
            ("eng", "MAPPING_RULE"),
            ("worker-2", "CLIENT"),
        ],
        (ValueType.TENANT, TenantIntent.ADD_ENTITY, "tenantId", "team-a"): [
            ("devs", "GROUP"),
            ("bob", "USER"),
            ("worker-1", "CLIENT"),
            ("ops", "ROLE"),
            ("eng", "MAPPING_RULE"),
        ],
    }
    for (value_type, intent, id_field, container), entities in members.items():
        for entity_id, entity_type in entities:
            value = {id_field: container, "entityId": entity_id, "entityType": entity_type}
            await _send(d, value_type, intent, **value)
    grant = {"ownerType": "GROUP", "ownerId": "devs", "resourceType": "PROCESS_DEFINITION", "resourceId": "order"}
    grant |= {"resourceMatcher": "ID", "permissionTypes": ["READ_PROCESS_INSTANCE", "CREATE_PROCESS_INSTANCE"]}
    await _send(d, ValueType.AUTHORIZATION, AuthorizationIntent.CREATE, **grant)
    bobs = {"ownerType": "USER", "ownerId": "bob", "resourceType": "USER", "resourceId": "*", "resourceMatcher": "ANY"}
    key = (await _send(d, ValueType.AUTHORIZATION, AuthorizationIntent.CREATE, **bobs, permissionTypes=["READ"])).key
    await _send(d, ValueType.USER, UserIntent.UPDATE, username="ann", email="ann@example.com")
    return key


async def _change(d: Driver, bobs_grant: int) -> None:
    """Removals, deletions with their cascades, and ids taken again."""
    member = {"tenantId": "team-a", "entityId": "bob", "entityType": "USER"}
    await _send(d, ValueType.TENANT, TenantIntent.REMOVE_ENTITY, **member)
    await _send(d, ValueType.GROUP, GroupIntent.DELETE, groupId="devs")
    await _send(d, ValueType.MAPPING_RULE, MappingRuleIntent.DELETE, mappingRuleId="eng")
    await _send(d, ValueType.GROUP, GroupIntent.CREATE, groupId="devs", name="Developers again")
    await _send(d, ValueType.USER, UserIntent.CREATE, username="cy", name="Cy", email="", password=HASH)
    await _send(d, ValueType.USER, UserIntent.DELETE, username="cy")
    bobs = {"ownerType": "USER", "ownerId": "bob", "resourceType": "USER", "resourceId": "*", "resourceMatcher": "ANY"}
    await _send(d, ValueType.AUTHORIZATION, AuthorizationIntent.UPDATE, bobs_grant, **bobs,
                permissionTypes=["UPDATE", "READ"])  # fmt: skip


@pytest.fixture(scope="module")
def identity_logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Record], list[Record]]:
    """The records of partitions 1 and 2 of a two-partition cluster after `_build` and `_change`."""
    directory = tmp_path_factory.mktemp("identity")

    async def run() -> None:
        first, second = routed_partitions(directory)
        try:
            await _change(first, await _build(first))
            await distributed(first)
            await second.settle()
        finally:
            await first.close(snapshot=False)
            await second.close(snapshot=False)

    asyncio.run(run())
    return list(read_log(directory / "p" / "1" / "log")), list(read_log(directory / "p" / "2" / "log"))


def _write(url: str, records: list[Record], partition_id: int) -> None:
    """Write ``records`` in one batch, as the writer of ``partition_id`` would."""
    batch = Batch()
    for record in records:
        batch.add(record)
    backend = open_backend(url)
    backend.connect()
    try:
        backend.migrate(0)
        backend.write(batch, partition_id)
    finally:
        backend.close()


async def _ids(result: dict[str, Any] | None, field: str) -> list[str] | None:
    return None if result is None else [item[field] for item in result["items"]]


async def _seen(reader: HistoryReader) -> dict[str, Any]:
    """Everything the history tells about the identities (members by id, in the searches' default order)."""
    seen: dict[str, Any] = {}
    for entity, field in (("users", "username"), ("groups", "groupId"), ("roles", "roleId"), ("tenants", "tenantId")):
        seen[entity] = {i[field]: i for i in (await reader.search(entity, {}))["items"]}
    seen["mapping-rules"] = await _ids(await reader.search("mapping-rules", {}), "mappingRuleId")
    grants = (await reader.search("authorizations", {"sort": [{"field": "ownerId"}]}))["items"]
    seen["authorizations"] = [(a["ownerType"], a["ownerId"], a["resourceId"], a["permissionTypes"]) for a in grants]
    ids = {"USER": "username", "CLIENT": "clientId", "GROUP": "groupId", "ROLE": "roleId"}
    ids["MAPPING_RULE"] = "mappingRuleId"
    for kind, container, types in (
        ("GROUP", "devs", ("USER", "CLIENT", "MAPPING_RULE")),
        ("ROLE", "ops", ("USER", "CLIENT", "GROUP", "MAPPING_RULE")),
        ("TENANT", "team-a", ("USER", "CLIENT", "GROUP", "ROLE", "MAPPING_RULE")),
    ):
        for member_type in types:
            found = await reader.search_members(kind, container, member_type, {})
            seen[f"{kind}:{container}:{member_type}"] = await _ids(found, ids[member_type])
    seen["roles of devs"] = await _ids(await reader.search_containers("ROLE", "GROUP", "devs", {}), "roleId")
    return seen


AFTER_BUILD = {
    "users": {
        "ann": {"username": "ann", "name": "Ann", "email": "ann@example.com"},
        "bob": {"username": "bob", "name": "Bob", "email": ""},
    },
    "groups": {"devs": {"groupId": "devs", "name": "Developers", "description": ""}},
    "roles": {"ops": {"roleId": "ops", "name": "Operators", "description": "Runs things"}},
    "tenants": {"team-a": {"tenantId": "team-a", "name": "Team A", "description": "The A team"}},
    "mapping-rules": ["eng"],
    "authorizations": [
        ("USER", "bob", "*", ["READ"]),
        ("GROUP", "devs", "order", ["CREATE_PROCESS_INSTANCE", "READ_PROCESS_INSTANCE"]),
    ],
    "GROUP:devs:USER": ["ann"],
    "GROUP:devs:CLIENT": ["worker-1"],
    "GROUP:devs:MAPPING_RULE": ["eng"],
    "ROLE:ops:USER": ["ann"],
    "ROLE:ops:CLIENT": ["worker-2"],
    "ROLE:ops:GROUP": ["devs"],
    "ROLE:ops:MAPPING_RULE": ["eng"],
    "TENANT:team-a:USER": ["bob"],
    "TENANT:team-a:CLIENT": ["worker-1"],
    "TENANT:team-a:GROUP": ["devs"],
    "TENANT:team-a:ROLE": ["ops"],
    "TENANT:team-a:MAPPING_RULE": ["eng"],
    "roles of devs": ["ops"],
}
AFTER_CHANGE = {
    **AFTER_BUILD,
    "groups": {"devs": {"groupId": "devs", "name": "Developers again", "description": ""}},
    "mapping-rules": [],
    "authorizations": [("USER", "bob", "*", ["READ", "UPDATE"])],
    # the group was deleted and made again: none of its members, nor its memberships, came back with it
    "GROUP:devs:USER": [],
    "GROUP:devs:CLIENT": [],
    "GROUP:devs:MAPPING_RULE": [],
    "ROLE:ops:GROUP": [],
    "ROLE:ops:MAPPING_RULE": [],
    "TENANT:team-a:USER": [],
    "TENANT:team-a:GROUP": [],
    "TENANT:team-a:MAPPING_RULE": [],
    "roles of devs": [],
}


def _first_change(records: list[Record]) -> int:
    """The position of `_change`'s first command on a partition."""
    return next(
        r.position
        for r in records
        if r.record_type == RecordType.COMMAND
        and r.value_type == ValueType.TENANT
        and r.intent == TenantIntent.REMOVE_ENTITY
    )


async def test_identities_memberships_and_grants_follow_the_first_partition(
    history_url: str, identity_logs: tuple[list[Record], list[Record]]
) -> None:
    first, second = identity_logs
    split = _first_change(first)
    assert await export_all(record_log(first), history_url, split - 1, flushDelay=0.05) == split - 1
    reader = open_reader(history_url)
    try:
        assert await _seen(reader) == AFTER_BUILD
        _write(history_url, [r for r in first if r.position >= split], 1)  # deletions and re-creations, one batch
        assert await _seen(reader) == AFTER_CHANGE
        # partition 2 exports late: its copies of the events before the change (the group's members among them)
        # bring nothing back
        late = second[: _first_change(second) - 1]
        assert any(r.value_type == ValueType.GROUP and r.record_type == RecordType.EVENT for r in late)
        assert not any(changes_history(r) for r in second)
        _write(history_url, late, 2)
        assert await _seen(reader) == AFTER_CHANGE
    finally:
        await reader.close()
    stored = [row for table in schema.TABLES if table.name.startswith("identity_") for row in _rows(history_url, table)]
    assert stored and not any("scrypt" in str(value) for row in stored for value in row), "no password hash is kept"


def _rows(url: str, table: schema.Table) -> list[tuple[Any, ...]]:
    return query(url, f"SELECT * FROM {table.name}")


async def test_identity_searches_filter_sort_page_and_get(
    history_url: str, identity_logs: tuple[list[Record], list[Record]]
) -> None:
    first, _ = identity_logs
    _write(history_url, first[: _first_change(first) - 1], 1)
    reader = open_reader(history_url)
    try:
        by_name = await reader.search("users", {"sort": [{"field": "name", "order": "DESC"}], "page": {"limit": 1}})
        assert [u["username"] for u in by_name["items"]] == ["bob"] and by_name["page"]["totalItems"] == 2
        after = {"sort": [{"field": "name", "order": "DESC"}], "page": {"after": by_name["page"]["endCursor"]}}
        assert [u["username"] for u in (await reader.search("users", after))["items"]] == ["ann"]
        like = await reader.search("users", {"filter": {"email": {"$like": "*@example.com"}}})
        assert [u["username"] for u in like["items"]] == ["ann"]
        assert await reader.get("users", "ann") == {"username": "ann", "name": "Ann", "email": "ann@example.com"}
        assert await reader.get("users", "nobody") is None
        assert (await reader.get("mapping-rules", "eng")) == {
            "mappingRuleId": "eng",
            "claimName": "dept",
            "claimValue": "eng",
            "name": "Engineering",
        }
        by_key = await reader.search("tenants", {"sort": [{"field": "key"}], "filter": {"name": {"$like": "Team*"}}})
        assert [t["tenantId"] for t in by_key["items"]] == ["team-a"]

        everyone = await reader.search("authorizations", {"filter": {"resourceIds": ["*", "order"]}})
        assert everyone["page"]["totalItems"] == 2
        (bobs,) = (await reader.search("authorizations", {"filter": {"resourceIds": ["*"]}}))["items"]
        assert bobs["resourcePropertyName"] is None and bobs["resourceType"] == "USER"
        assert await reader.get("authorizations", bobs["authorizationKey"]) == bobs
        none = {"filter": {"resourcePropertyNames": ["name"]}, "sort": [{"field": "resourcePropertyName"}]}
        assert (await reader.search("authorizations", none))["items"] == []
        mine = await reader.search("authorizations", {"filter": {"ownerType": "GROUP", "ownerId": "devs"}})
        assert [a["resourceId"] for a in mine["items"]] == ["order"]

        members = await reader.search_members("ROLE", "ops", "USER", {"filter": {"username": {"$neq": "ann"}}})
        assert members is not None and members["items"] == []
        assert await reader.search_members("GROUP", "nobody", "USER", {}) is None
        assert await reader.search_containers("ROLE", "GROUP", "nobody", {}) is None
        for entity, request in (
            ("users", {"sort": [{"field": "password"}]}),
            ("users", {"filter": {"userKey": "1"}}),
            ("authorizations", {"filter": {"resourceIds": "order"}}),
            ("authorizations", {"sort": [{"field": "permissionTypes"}]}),
        ):
            with pytest.raises(InvalidQuery):
                await reader.search(entity, request)
        with pytest.raises(InvalidQuery):
            await reader.search_members("GROUP", "devs", "USER", {"sort": [{"field": "name"}]})
    finally:
        await reader.close()


def test_only_the_first_partitions_identity_events_change_the_history() -> None:
    value = {"groupKey": 9, "groupId": "devs", "name": "", "description": "", "entityId": "", "entityType": ""}
    created = Record(3, 9, RecordType.EVENT, ValueType.GROUP, int(GroupIntent.CREATED), 0, value, partition_id=1)
    assert changes_history(created)
    copy = Record(3, 9, RecordType.EVENT, ValueType.GROUP, int(GroupIntent.CREATED), 0, value, partition_id=2)
    assert not changes_history(copy)
    batch = Batch()
    batch.add(copy)
    assert batch.rows[schema.GROUPS.name] == {}
    batch.add(created)
    assert list(batch.rows[schema.GROUPS.name]) == ["devs"]


def test_a_deletion_drops_the_batchs_own_rows_and_later_ones_stay(tmp_path: Path) -> None:
    def event(position: int, intent: GroupIntent, **value: Any) -> Record:
        full = {"groupKey": 9, "groupId": "devs", "name": "", "description": "", "entityId": "", "entityType": ""}
        return Record(position, 9, RecordType.EVENT, ValueType.GROUP, int(intent), 0, {**full, **value}, partition_id=1)

    batch = Batch()
    batch.add(event(1, GroupIntent.CREATED, name="one"))
    batch.add(event(2, GroupIntent.ENTITY_ADDED, entityId="ann", entityType="USER"))
    batch.add(event(3, GroupIntent.DELETED))
    assert batch.rows[schema.GROUPS.name] == {} and batch.rows[schema.MEMBERSHIPS.name] == {}
    batch.add(event(4, GroupIntent.CREATED, name="two"))
    batch.add(event(5, GroupIntent.ENTITY_ADDED, entityId="bob", entityType="USER"))
    url = f"sqlite:///{tmp_path / 'history.db'}"
    _write(url, [], 1)
    backend = open_backend(url)
    backend.connect()
    try:
        backend.write(batch, 1)
    finally:
        backend.close()
    assert query(url, "SELECT group_id, name FROM identity_groups") == [("devs", "two")]
    assert query(url, "SELECT member_id FROM identity_memberships") == [("bob",)]
