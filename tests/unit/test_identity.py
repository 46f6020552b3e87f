"""Identity as replicated state: users, groups, roles, tenants, mapping rules and authorizations processed by the
engine (Camunda 8.8's records and rejections), distributed to every partition, answered once every partition has
them, and rebuilt by replay.

Partitions run in-process (as in test_replay.py); two routed partitions stand for a cluster.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from broker.engine.access import Access, Caller, resolve
from broker.engine.job_processors import activation_request
from broker.protocol.codec import decode_block, encode_block, record_to_list
from broker.protocol.enums import (
    AuthorizationIntent,
    DeploymentIntent,
    GroupIntent,
    JobBatchIntent,
    MappingRuleIntent,
    ProcessInstanceCreationIntent,
    RecordType,
    RejectionType,
    RoleIntent,
    TenantIntent,
    UserIntent,
    ValueType,
)
from broker.protocol.record import Record
from broker.protocol.values import TENANT
from tests.harness import BPMN
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live, distributed, routed_partitions


def rejected(rec: Record, rejection: RejectionType, *fragments: str) -> None:
    assert rec.record_type == RecordType.COMMAND_REJECTION, rec.describe()
    assert rec.rejection_type == rejection, rec.rejection_reason
    for fragment in fragments:
        assert fragment in rec.rejection_reason, rec.rejection_reason


def identity(d: Driver) -> dict[str, Any]:
    """What a partition knows: identities by kind, memberships, authorizations (owner, resource, permissions)."""

    def read(s: Any) -> dict[str, Any]:
        kinds = {
            kind: sorted(v[field] for v in s.identity.all(kind))
            for kind, field in (
                ("USER", "username"),
                ("GROUP", "groupId"),
                ("ROLE", "roleId"),
                ("TENANT", "tenantId"),
                ("MAPPING_RULE", "mappingRuleId"),
            )
        }
        members = {
            f"{kind}:{entity_id}": sorted(s.identity.members(kind, entity_id))
            for kind, ids in kinds.items()
            if kind in ("GROUP", "ROLE", "TENANT")
            for entity_id in ids
        }
        grants = sorted(
            (a["ownerType"], a["ownerId"], a["resourceType"], a["resourceId"], tuple(a["permissionTypes"]))
            for owner_type, ids in (("USER", ["ann", "bob"]), ("GROUP", kinds["GROUP"]), ("ROLE", kinds["ROLE"]))
            for owner_id in ids
            for _, a in s.identity.authorizations_of(owner_type, owner_id)
        )
        return {"kinds": kinds, "members": members, "grants": grants}

    return d.read(read)  # type: ignore[no-any-return]


async def send(d: Driver, value_type: ValueType, intent: int, key: int = -1, **value: Any) -> Record:
    return await d.send(value_type, intent, value, key)


async def build_team(d: Driver) -> int:
    """Team A: a tenant, two users, a group, a role, a mapping rule and a grant; the authorization's key."""
    accepted(await send(d, ValueType.TENANT, TenantIntent.CREATE, tenantId="team-a", name="Team A"))
    for user in ("ann", "bob"):
        accepted(await send(d, ValueType.USER, UserIntent.CREATE, username=user, password="scrypt$x", email=""))
    accepted(await send(d, ValueType.GROUP, GroupIntent.CREATE, groupId="devs", name="Developers"))
    accepted(await send(d, ValueType.ROLE, RoleIntent.CREATE, roleId="ops", name="Operators"))
    rule = {"mappingRuleId": "eng", "claimName": "dept", "claimValue": "eng", "name": "Engineering"}
    accepted(await send(d, ValueType.MAPPING_RULE, MappingRuleIntent.CREATE, **rule))
    for intent, value in (
        (GroupIntent.ADD_ENTITY, {"groupId": "devs", "entityId": "ann", "entityType": "USER"}),
        (GroupIntent.ADD_ENTITY, {"groupId": "devs", "entityId": "eng", "entityType": "MAPPING_RULE"}),
    ):
        accepted(await send(d, ValueType.GROUP, intent, **value))
    accepted(await send(d, ValueType.ROLE, RoleIntent.ADD_ENTITY, roleId="ops", entityId="devs", entityType="GROUP"))
    for entity_id, entity_type in (("devs", "GROUP"), ("bob", "USER"), ("worker-1", "CLIENT")):
        value = {"tenantId": "team-a", "entityId": entity_id, "entityType": entity_type}
        accepted(await send(d, ValueType.TENANT, TenantIntent.ADD_ENTITY, **value))
    grant = {
        "ownerType": "GROUP",
        "ownerId": "devs",
        "resourceType": "PROCESS_DEFINITION",
        "resourceMatcher": "ID",
        "resourceId": "order",
        "permissionTypes": ["CREATE_PROCESS_INSTANCE", "READ_PROCESS_INSTANCE"],
    }
    return accepted(await send(d, ValueType.AUTHORIZATION, AuthorizationIntent.CREATE, **grant)).key


async def test_identities_memberships_and_grants_are_engine_state(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    grant_key = await build_team(d)
    seen = identity(d)
    assert seen["kinds"] == {
        "USER": ["ann", "bob"],
        "GROUP": ["devs"],
        "ROLE": ["ops"],
        "TENANT": ["team-a"],
        "MAPPING_RULE": ["eng"],
    }
    assert seen["members"] == {
        "GROUP:devs": [("MAPPING_RULE", "eng"), ("USER", "ann")],
        "ROLE:ops": [("GROUP", "devs")],
        "TENANT:team-a": [("CLIENT", "worker-1"), ("GROUP", "devs"), ("USER", "bob")],
    }
    assert seen["grants"] == [
        ("GROUP", "devs", "PROCESS_DEFINITION", "order", ("CREATE_PROCESS_INSTANCE", "READ_PROCESS_INSTANCE"))
    ]
    assert d.read(lambda s: s.identity.memberships("USER", "ann")) == [("GROUP", "devs")]

    # updates change what they name and keep the rest (a user's password stays unless a new one is given)
    updated = accepted(await send(d, ValueType.USER, UserIntent.UPDATE, username="ann", email="ann@example.com"))
    assert (updated.value["email"], updated.value["password"]) == ("ann@example.com", "scrypt$x")
    grant = {"ownerType": "GROUP", "ownerId": "devs", "resourceType": "PROCESS_DEFINITION", "resourceId": "*"}
    grant |= {"resourceMatcher": "ANY", "permissionTypes": ["READ_PROCESS_DEFINITION"]}
    accepted(await send(d, ValueType.AUTHORIZATION, AuthorizationIntent.UPDATE, grant_key, **grant))
    assert identity(d)["grants"] == [("GROUP", "devs", "PROCESS_DEFINITION", "*", ("READ_PROCESS_DEFINITION",))]

    # deleting a group takes its memberships (both ways) and its grants with it
    accepted(await send(d, ValueType.GROUP, GroupIntent.DELETE, groupId="devs"))
    after = identity(d)
    assert after["kinds"]["GROUP"] == [] and after["grants"] == []
    assert after["members"] == {"ROLE:ops": [], "TENANT:team-a": [("CLIENT", "worker-1"), ("USER", "bob")]}
    assert d.read(lambda s: s.identity.memberships("USER", "ann")) == []
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_identity_commands_are_checked_with_camundas_rejections(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await build_team(d)
    rejected(
        await send(d, ValueType.TENANT, TenantIntent.CREATE, tenantId="team-a", name="again"),
        RejectionType.ALREADY_EXISTS,
        "Expected to create tenant with ID 'team-a', but a tenant with this ID already exists.",
    )
    rejected(await send(d, ValueType.TENANT, TenantIntent.CREATE, tenantId="team a"), RejectionType.INVALID_ARGUMENT)
    rejected(
        await send(d, ValueType.USER, UserIntent.CREATE, username="cy"), RejectionType.INVALID_ARGUMENT, "password"
    )
    rejected(
        await send(d, ValueType.GROUP, GroupIntent.UPDATE, groupId="nobody", name="x"),
        RejectionType.NOT_FOUND,
        "Expected to update group with ID 'nobody', but a group with this ID does not exist.",
    )
    rejected(
        await send(d, ValueType.MAPPING_RULE, MappingRuleIntent.CREATE, mappingRuleId="eng2", claimName="dept",
                   claimValue="eng"),
        RejectionType.ALREADY_EXISTS,
        "mapping rule 'eng' already maps this claim",
    )  # fmt: skip
    member = {"tenantId": "team-a", "entityId": "devs", "entityType": "GROUP"}
    rejected(
        await send(d, ValueType.TENANT, TenantIntent.ADD_ENTITY, **member),
        RejectionType.ALREADY_EXISTS,
        "is already assigned to this tenant",
    )
    rejected(
        await send(d, ValueType.TENANT, TenantIntent.ADD_ENTITY, **{**member, "entityId": "ghosts"}),
        RejectionType.NOT_FOUND,
        "but the group does not exist",
    )
    rejected(
        await send(d, ValueType.GROUP, GroupIntent.ADD_ENTITY, groupId="devs", entityId="ops", entityType="ROLE"),
        RejectionType.INVALID_ARGUMENT,
        "CLIENT, MAPPING_RULE, USER",
    )
    rejected(
        await send(d, ValueType.ROLE, RoleIntent.REMOVE_ENTITY, roleId="ops", entityId="bob", entityType="USER"),
        RejectionType.NOT_FOUND,
        "is not assigned to this role",
    )
    bad_grant = {"ownerType": "USER", "ownerId": "ann", "resourceType": "TENANT", "resourceId": "team-a"}
    rejected(
        await send(d, ValueType.AUTHORIZATION, AuthorizationIntent.CREATE, **bad_grant, permissionTypes=["ACCESS"]),
        RejectionType.INVALID_ARGUMENT,
        "but these permissions are not supported",
    )
    rejected(
        await send(d, ValueType.AUTHORIZATION, AuthorizationIntent.CREATE, **{**bad_grant, "resourceType": "CAKE"},
                   permissionTypes=["READ"]),
        RejectionType.INVALID_ARGUMENT,
        "resource types",
    )  # fmt: skip
    rejected(
        await send(d, ValueType.AUTHORIZATION, AuthorizationIntent.DELETE, 12345),
        RejectionType.NOT_FOUND,
        "authorization with key '12345'",
    )
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


class _Gate:
    """A route to the second partition that holds deliveries until opened."""

    def __init__(self, target: Driver) -> None:
        self.target = target
        self.open = asyncio.Event()

    async def execute(self, partition_id: int, value_type: ValueType, intent: int, value: dict, key: int = -1,
                      **_options: Any) -> Record:  # fmt: skip
        await self.open.wait()
        return await self.target.send(value_type, intent, value, key)


async def test_a_change_is_answered_once_every_partition_applied_it_in_order(tmp_path: Path) -> None:
    first, second = routed_partitions(tmp_path)
    assert first.partition is not None
    gate = _Gate(second)
    first.partition.inter_partition = gate
    answer = asyncio.ensure_future(build_team(first))
    await asyncio.sleep(0.3)
    assert not answer.done(), "nothing is acknowledged before the other partition has it"
    assert identity(second)["kinds"]["TENANT"] == []
    gate.open.set()
    await asyncio.wait_for(answer, 20)
    # a revocation made after a grant reaches the other partition after it
    accepted(await send(first, ValueType.GROUP, GroupIntent.REMOVE_ENTITY, groupId="devs", entityId="ann",
                        entityType="USER"))  # fmt: skip
    await distributed(first)
    await second.settle()
    assert identity(second) == identity(first)
    assert ("USER", "ann") not in identity(second)["members"]["GROUP:devs"]
    await first.close()
    await second.close()
    check_replay_equals_live(first.directory, tmp_path)
    check_replay_equals_live(second.directory, tmp_path)


def test_exports_leave_a_users_password_hash_out() -> None:
    value = {"userKey": 7, "username": "ann", "name": "", "email": "", "password": "scrypt$secret"}
    record = Record(5, 7, RecordType.EVENT, ValueType.USER, int(UserIntent.CREATED), 0, value)
    assert record.to_json_dict()["value"]["password"] == ""
    assert record.value["password"] == "scrypt$secret", "the log and the state keep it"


async def test_a_callers_tenants_and_grants_come_through_its_groups_roles_and_mapping_rules(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await build_team(d)
    ops_grant = {"ownerType": "ROLE", "ownerId": "ops", "resourceType": "TENANT", "resourceMatcher": "ANY"}
    ops_grant |= {"resourceId": "*", "permissionTypes": ["READ"]}
    accepted(await send(d, ValueType.AUTHORIZATION, AuthorizationIntent.CREATE, **ops_grant))

    def access(caller: Caller) -> Access:
        return d.read(lambda s: resolve(s.identity, caller))  # type: ignore[no-any-return]

    devs = {
        ("PROCESS_DEFINITION", "order", "CREATE_PROCESS_INSTANCE"),
        ("PROCESS_DEFINITION", "order", "READ_PROCESS_INSTANCE"),
        ("TENANT", "*", "READ"),  # the role of the group
    }
    ann = access(Caller(username="ann"))  # in group devs, which is in tenant team-a and role ops
    assert ann.tenants == {"team-a"} and ann.grants == devs
    assert ann.allows("PROCESS_DEFINITION", "order", "CREATE_PROCESS_INSTANCE")
    assert ann.allows("TENANT", "team-b", "READ"), "a grant on * covers every resource of the type"
    assert not ann.allows("PROCESS_DEFINITION", "invoice", "CREATE_PROCESS_INSTANCE")
    bob = access(Caller(username="bob"))  # a direct member of the tenant, in no group
    assert bob.tenants == {"team-a"} and bob.grants == frozenset()
    assert access(Caller(client_id="worker-1")).tenants == {"team-a"}
    by_claim = access(Caller(claims={"dept": ["sales", "eng"]}))  # mapping rule eng is in group devs
    assert by_claim.tenants == {"team-a"} and by_claim.grants == devs
    assert access(Caller(username="eve", claims={"dept": "hr"})) == Access(frozenset(), frozenset(), "eve")
    await d.close()


async def test_an_authenticated_caller_acts_only_in_the_tenants_it_is_assigned_to(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await build_team(d)  # team-a: group devs (ann, mapping rule eng), user bob, client worker-1
    assert d.partition is not None
    one_task = (BPMN / "one-task.bpmn").read_bytes()

    async def as_caller(caller: dict | None, value_type: ValueType, intent: int, value: dict) -> Record:
        assert d.partition is not None
        return await d.partition.execute(value_type, intent, value, authorization=caller)

    def deployment(tenant: str) -> dict:
        return {"resources": [{"resourceName": "one-task.bpmn", "resource": one_task}], "tenantId": tenant}

    rejected(
        await as_caller({"username": "eve"}, ValueType.DEPLOYMENT, DeploymentIntent.CREATE, deployment("team-a")),
        RejectionType.FORBIDDEN,
        "Expected to handle request DeployResource with tenant identifier 'team-a', but tenant is not authorized",
    )
    accepted(await as_caller({"username": "eve"}, ValueType.DEPLOYMENT, DeploymentIntent.CREATE, deployment(TENANT)))
    for caller in ({"username": "ann"}, {"username": "bob"}, {"clientId": "worker-1"}, {"claims": {"dept": "eng"}}):
        accepted(await as_caller(caller, ValueType.DEPLOYMENT, DeploymentIntent.CREATE, deployment("team-a")))
    accepted(await as_caller(None, ValueType.DEPLOYMENT, DeploymentIntent.CREATE, deployment("team-b")))

    create = {"bpmnProcessId": "one-task", "version": -1, "variables": {}, "tenantId": "team-a"}
    intent = ProcessInstanceCreationIntent.CREATE
    rejected(await as_caller({"username": "eve"}, ValueType.PROCESS_INSTANCE_CREATION, intent, create),
             RejectionType.FORBIDDEN)  # fmt: skip
    accepted(await as_caller({"username": "ann"}, ValueType.PROCESS_INSTANCE_CREATION, intent, create))
    await d.settle()
    both = activation_request("test", "w", 60_000, 10, tenant_ids=["team-a", "team-b"])
    rejected(
        await as_caller({"username": "ann"}, ValueType.JOB_BATCH, JobBatchIntent.ACTIVATE, both),
        RejectionType.FORBIDDEN,
        "'team-b'",
    )
    mine = activation_request("test", "w", 60_000, 10, tenant_ids=["team-a"])
    jobs = accepted(await as_caller({"username": "ann"}, ValueType.JOB_BATCH, JobBatchIntent.ACTIVATE, mine))
    assert [j["tenantId"] for j in jobs.value["jobs"]] == ["team-a"]
    # taken out of the group, ann is no longer in the tenant
    accepted(await send(d, ValueType.GROUP, GroupIntent.REMOVE_ENTITY, groupId="devs", entityId="ann",
                        entityType="USER"))  # fmt: skip
    rejected(await as_caller({"username": "ann"}, ValueType.PROCESS_INSTANCE_CREATION, intent, create),
             RejectionType.FORBIDDEN)  # fmt: skip
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


def test_a_commands_caller_travels_in_the_log_and_records_without_one_read_as_before() -> None:
    caller = {"username": "ann", "claims": {"dept": "eng"}}
    command = Record(1, -1, RecordType.COMMAND, ValueType.USER, int(UserIntent.CREATE), 0, {}, authorization=caller)
    event = Record(2, 7, RecordType.EVENT, ValueType.USER, int(UserIntent.CREATED), 0, {})
    _, (logged_command, logged_event) = decode_block(encode_block(2, [command, event]))
    assert logged_command.authorization == caller
    assert logged_event.authorization is None and len(record_to_list(event)) == 13, "the layout logs had before"
    assert "authorization" not in command.to_json_dict(), "never exported"
