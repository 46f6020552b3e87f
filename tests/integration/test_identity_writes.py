"""Identity over REST against a real `weir start` with two partitions: users, groups, roles, tenants, mapping rules
and authorizations are created, changed, assigned and deleted with Camunda 8.8's shapes and errors, and every change
reaches both partitions' logs."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from broker.protocol.enums import RecordType, ValueType
from tests.harness import WeirProcess, running
from tests.integration.clients import logged_records
from tests.integration.test_rest_api import assert_problem, call


async def test_identity_changes_over_rest_reach_every_partition(tmp_path: Path) -> None:
    with running(WeirProcess(tmp_path / "data", extra_args=["--partitions", "2"])) as w:
        async with aiohttp.ClientSession(w.rest_url) as http:
            await _scenario(http)
        w.stop()
        for partition in (1, 2):
            events = {
                (r.value_type.name, r.intent_enum.name)
                for r in logged_records(w, partition)
                if r.record_type == RecordType.EVENT
                and r.value_type in (ValueType.USER, ValueType.TENANT, ValueType.GROUP, ValueType.AUTHORIZATION)
            }
            assert {
                ("USER", "CREATED"),
                ("USER", "UPDATED"),
                ("TENANT", "CREATED"),
                ("TENANT", "ENTITY_ADDED"),
                ("GROUP", "ENTITY_ADDED"),
                ("GROUP", "DELETED"),
                ("AUTHORIZATION", "CREATED"),
                ("AUTHORIZATION", "DELETED"),
            } <= events, f"partition {partition}: {sorted(events)}"
            for record in logged_records(w, partition):
                if record.value_type == ValueType.USER:
                    assert "s3cret" not in str(record.value), "only the password's hash is logged"
                    if record.record_type == RecordType.EVENT:
                        assert record.value["password"].startswith("scrypt$")


async def _scenario(http: aiohttp.ClientSession) -> None:
    status, user = await call(http, "POST", "/v2/users", {"username": "ann", "password": "s3cret", "name": "Ann"})
    assert (status, user) == (201, {"username": "ann", "name": "Ann", "email": None})
    status, user = await call(http, "PUT", "/v2/users/ann", {"email": "ann@example.com"})
    assert (status, user) == (200, {"username": "ann", "name": "Ann", "email": "ann@example.com"})
    assert_problem(
        await call(http, "POST", "/v2/users", {"username": "ann", "password": "x"}),
        409,
        "Expected to create user with ID 'ann', but a user with this ID already exists.",
    )
    assert_problem(await call(http, "POST", "/v2/users", {"username": "bob"}), 400, "password")

    status, tenant = await call(http, "POST", "/v2/tenants", {"tenantId": "team-a", "name": "Team A"})
    assert (status, tenant) == (201, {"tenantId": "team-a", "name": "Team A", "description": None})
    assert_problem(await call(http, "POST", "/v2/tenants", {"tenantId": "team a", "name": "x"}), 400, "valid ID")
    status, group = await call(http, "POST", "/v2/groups", {"groupId": "devs", "name": "Developers"})
    assert status == 201 and group["groupId"] == "devs", group
    assert (await call(http, "PUT", "/v2/groups/devs/users/ann"))[0] == 204
    assert_problem(await call(http, "PUT", "/v2/groups/devs/users/ann"), 409, "already assigned to this group")
    assert (await call(http, "PUT", "/v2/tenants/team-a/groups/devs"))[0] == 204
    assert_problem(await call(http, "PUT", "/v2/tenants/team-a/roles/nobody"), 404, "the role does not exist")
    assert_problem(await call(http, "PUT", "/v2/tenants/team-z/users/ann"), 404, "tenant with ID 'team-z'")

    grant = {
        "ownerId": "devs",
        "ownerType": "GROUP",
        "resourceId": "*",
        "resourceType": "PROCESS_DEFINITION",
        "permissionTypes": ["CREATE_PROCESS_INSTANCE"],
    }
    status, created = await call(http, "POST", "/v2/authorizations", grant)
    assert status == 201 and created["authorizationKey"].isdigit(), created
    assert_problem(
        await call(http, "POST", "/v2/authorizations", {**grant, "permissionTypes": ["ACCESS"]}),
        400,
        "these permissions are not supported",
    )
    key = created["authorizationKey"]
    changed = {**grant, "permissionTypes": ["CREATE_PROCESS_INSTANCE", "READ_PROCESS_INSTANCE"]}
    assert (await call(http, "PUT", f"/v2/authorizations/{key}", changed))[0] == 204
    # deleting the group takes its grant and its place in the tenant with it
    assert (await call(http, "DELETE", "/v2/groups/devs"))[0] == 204
    assert_problem(await call(http, "DELETE", f"/v2/authorizations/{key}"), 404, f"key '{key}'")
    assert_problem(await call(http, "DELETE", "/v2/groups/devs"), 404, "does not exist")
    assert (await call(http, "PUT", "/v2/tenants/team-a/users/ann"))[0] == 204
