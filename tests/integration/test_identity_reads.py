"""Identity reads against a real ``weir start --partitions 2``: users, groups, roles, tenants, mapping rules and
authorizations written through the REST API come back from the history store in Camunda's v2 shapes (searches,
gets by id, the members of groups, roles and tenants), deletions take memberships and grants with them, unknown ids
are 404 and bad searches 400; and the official Python SDK decodes them strictly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import aiohttp
import pytest

from tests.harness import WeirProcess, running
from tests.integration.test_rest_api import assert_problem, call

USER_FIELDS = {"username", "name", "email"}
AUTHORIZATION_FIELDS = {
    "ownerId",
    "ownerType",
    "resourceType",
    "resourceId",
    "resourcePropertyName",
    "permissionTypes",
    "authorizationKey",
}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    """Two partitions: both process every identity change, the history takes it once."""
    with running(WeirProcess(tmp_path_factory.mktemp("identity") / "data", extra_args=["--partitions", "2"])) as w:
        yield w


@pytest.fixture
async def http(node: WeirProcess) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=node.rest_url) as session:
        yield session


async def _write(http: aiohttp.ClientSession, method: str, path: str, body: Any = None) -> Any:
    status, answer = await call(http, method, path, body)
    assert status in (200, 201, 204), (method, path, status, answer)
    return answer


async def build_team(http: aiohttp.ClientSession, team: str) -> str:
    """A user ``<team>-ann``, a group, a role, a tenant and a mapping rule named after ``team``, members of each
    other, and a grant to the group; the grant's key."""
    await _write(http, "POST", "/v2/users", {"username": f"{team}-ann", "password": "pw", "name": "Ann", "email": ""})
    await _write(http, "POST", "/v2/groups", {"groupId": f"{team}-devs", "name": "Developers"})
    await _write(http, "POST", "/v2/roles", {"roleId": f"{team}-ops", "name": "Operators", "description": "Ops"})
    await _write(http, "POST", "/v2/tenants", {"tenantId": f"{team}-t", "name": "Tenant"})
    rule = {"mappingRuleId": f"{team}-eng", "claimName": "dept", "claimValue": team, "name": "Engineering"}
    await _write(http, "POST", "/v2/mapping-rules", rule)
    for path in (
        f"/v2/groups/{team}-devs/users/{team}-ann",
        f"/v2/groups/{team}-devs/clients/{team}-worker",
        f"/v2/roles/{team}-ops/groups/{team}-devs",
        f"/v2/tenants/{team}-t/roles/{team}-ops",
        f"/v2/tenants/{team}-t/mapping-rules/{team}-eng",
    ):
        await _write(http, "PUT", path)
    grant = {"ownerId": f"{team}-devs", "ownerType": "GROUP", "resourceType": "PROCESS_DEFINITION"}
    grant |= {"resourceId": "order", "permissionTypes": ["READ_PROCESS_INSTANCE"]}
    return str((await _write(http, "POST", "/v2/authorizations", grant))["authorizationKey"])


async def until(http: aiohttp.ClientSession, path: str, check: Callable[[Any], Any], body: Any = None) -> Any:
    """Ask until ``check`` holds for a 200 answer: the history follows the log a little behind."""
    method = "GET" if body is None else "POST"
    deadline = asyncio.get_running_loop().time() + 15.0
    while True:
        status, answer = await call(http, method, path, body)
        if status == 200 and check(answer):
            return answer
        assert asyncio.get_running_loop().time() < deadline, f"timed out on {path}: {status} {answer}"
        await asyncio.sleep(0.1)


def items(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return answer["items"]  # type: ignore[no-any-return]


async def test_identities_and_their_members_are_read_from_the_history(http: aiohttp.ClientSession) -> None:
    key = await build_team(http, "a")
    grants = {"filter": {"ownerId": "a-devs"}}
    [grant] = items(await until(http, "/v2/authorizations/search", items, grants))
    assert set(grant) == AUTHORIZATION_FIELDS and grant["authorizationKey"] == key
    assert (grant["ownerType"], grant["resourceId"], grant["resourcePropertyName"]) == ("GROUP", "order", None)
    assert grant["permissionTypes"] == ["READ_PROCESS_INSTANCE"]
    assert await until(http, f"/v2/authorizations/{key}", bool) == grant

    users = await until(http, "/v2/users/search", items, {"filter": {"username": "a-ann"}})
    assert items(users) == [{"username": "a-ann", "name": "Ann", "email": ""}]
    assert users["page"]["totalItems"] == 1 and users["page"]["hasMoreTotalItems"] is False
    assert await until(http, "/v2/users/a-ann", bool) == {"username": "a-ann", "name": "Ann", "email": ""}
    devs = {"name": "Developers", "groupId": "a-devs", "description": ""}
    assert await until(http, "/v2/groups/a-devs", bool) == devs
    ops = {"name": "Operators", "roleId": "a-ops", "description": "Ops"}
    assert await until(http, "/v2/roles/a-ops", bool) == ops
    assert (await until(http, "/v2/tenants/a-t", bool))["tenantId"] == "a-t"
    rule = {"claimName": "dept", "claimValue": "a", "name": "Engineering", "mappingRuleId": "a-eng"}
    assert await until(http, "/v2/mapping-rules/a-eng", bool) == rule

    members = {
        "/v2/groups/a-devs/users/search": [{"username": "a-ann"}],
        "/v2/groups/a-devs/clients/search": [{"clientId": "a-worker"}],
        "/v2/groups/a-devs/mapping-rules/search": [],
        "/v2/groups/a-devs/roles/search": [ops],
        "/v2/roles/a-ops/groups/search": [{"groupId": "a-devs"}],
        "/v2/roles/a-ops/users/search": [],
        "/v2/tenants/a-t/roles/search": [ops],
        "/v2/tenants/a-t/mapping-rules/search": [rule],
        "/v2/tenants/a-t/groups/search": [],
    }
    for path, expected in members.items():
        assert items(await until(http, path, lambda answer, e=expected: items(answer) == e, {})) == expected, path

    assert_problem(await call(http, "GET", "/v2/users/nobody"), 404, "user with username 'nobody'")
    assert_problem(await call(http, "POST", "/v2/groups/nobody/users/search", {}), 404, "group with groupId 'nobody'")
    assert_problem(await call(http, "POST", "/v2/groups/nobody/roles/search", {}), 404, "group with groupId")
    assert_problem(await call(http, "GET", "/v2/authorizations/2251799813699999"), 404, "authorization")
    assert_problem(await call(http, "POST", "/v2/users/search", {"filter": {"password": "x"}}), 400, "password")
    bad_owner = {"filter": {"ownerType": "NOBODY"}}
    assert_problem(await call(http, "POST", "/v2/authorizations/search", bad_owner), 400, "ownerType")
    assert_problem(await call(http, "POST", "/v2/tenants/a-t/users/search", {"sort": [{"field": "x"}]}), 400)

    # the group goes, and with it its grant and its membership of the role; the role stays
    await _write(http, "DELETE", "/v2/groups/a-devs")
    await until(http, "/v2/groups/search", lambda answer: not items(answer), {"filter": {"groupId": "a-devs"}})
    assert items(await until(http, "/v2/authorizations/search", lambda a: True, grants)) == []
    assert items(await until(http, "/v2/roles/a-ops/groups/search", lambda a: True, {})) == []
    assert_problem(await call(http, "POST", "/v2/groups/a-devs/users/search", {}), 404)
    assert (await until(http, "/v2/roles/a-ops", bool))["roleId"] == "a-ops"


async def _team(rest_url: str, team: str) -> str:
    async with aiohttp.ClientSession(base_url=rest_url) as http:
        key = await build_team(http, team)
        await until(http, "/v2/tenants/search", items, {"filter": {"tenantId": f"{team}-t"}})
        await until(http, "/v2/authorizations/search", items, {"filter": {"ownerId": f"{team}-devs"}})
        return key


def test_the_python_sdk_decodes_the_identity_reads(node: WeirProcess) -> None:
    """The SDK's own methods, decoding strictly: a wrong or missing field would fail here."""
    sdk = pytest.importorskip("camunda_orchestration_sdk", reason="camunda-orchestration-sdk not installed")
    key = asyncio.run(_team(node.rest_url, "b"))
    configuration = {"CAMUNDA_REST_ADDRESS": node.rest_url, "CAMUNDA_AUTH_STRATEGY": "NONE"}
    with sdk.CamundaClient(configuration=configuration) as client:
        deadline = time.monotonic() + 15
        while not client.search_users_for_group("b-devs").items:  # the members follow the group a little behind
            assert time.monotonic() < deadline, "timed out waiting for b-devs's members"
            time.sleep(0.1)
        assert [u.username for u in client.search_users().items if u.username == "b-ann"] == ["b-ann"]
        assert client.get_user("b-ann").name == "Ann"
        assert client.get_group("b-devs").name == "Developers"
        assert [g.group_id for g in client.search_groups().items if g.group_id == "b-devs"] == ["b-devs"]
        assert client.get_role("b-ops").description == "Ops"
        assert client.get_tenant("b-t").name == "Tenant"
        assert client.get_mapping_rule("b-eng").claim_value == "b"
        assert [r.role_id for r in client.search_roles_for_group("b-devs").items] == ["b-ops"]
        grant = client.get_authorization(key)
        assert grant.owner_id == "b-devs" and [str(p) for p in grant.permission_types] == ["READ_PROCESS_INSTANCE"]
        assert any(str(a.authorization_key) == key for a in client.search_authorizations().items)
        assert [u.username for u in client.search_users_for_group("b-devs").items] == ["b-ann"]
        assert [c.client_id for c in client.search_clients_for_group("b-devs").items] == ["b-worker"]
        assert [m.mapping_rule_id for m in client.search_mapping_rules_for_tenant("b-t").items] == ["b-eng"]
        assert [g.group_id for g in client.search_groups_for_role("b-ops").items] == ["b-devs"]
