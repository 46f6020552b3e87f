"""What each caller reads, over the wire: a real `weir start` with basic authentication, authorizations and
multi-tenancy on, and an admin from its configuration. The admin sets up two teams through the REST API — ann in
team-a, granted READ_PROCESS_INSTANCE on one-task; bob in team-b, granted it on every process — and starts instances
in both; each then searches and gets only its own team's, the admin both. A get by key of another team's instance is
a 404 like a missing one; a task offered to ann is hers to read without READ_USER_TASK."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from tests.harness import BPMN, WeirProcess, running
from tests.integration.test_batch_operations import until
from tests.integration.test_rest_api import call

PASSWORDS = {"admin": "admin-secret", "ann": "ann-secret", "bob": "bob-secret"}
ENV = {
    "WEIR_GATEWAY_MULTI_TENANCY_ENABLED": "true",
    "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "basic",
    "WEIR_GATEWAY_SECURITY_AUTHENTICATION_IDENTITY_CACHE_TTL": "0.2",
    "WEIR_BROKER_SECURITY_AUTHORIZATIONS_ENABLED": "true",
    "WEIR_BROKER_SECURITY_INITIALIZATION_USERS_0_USERNAME": "admin",
    "WEIR_BROKER_SECURITY_INITIALIZATION_USERS_0_PASSWORD": PASSWORDS["admin"],
    "WEIR_BROKER_SECURITY_INITIALIZATION_DEFAULT_ROLES_ADMIN_USERS": "admin",
}


def basic(user: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{PASSWORDS[user]}".encode()).decode()}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    folder = tmp_path_factory.mktemp("weir")
    with running(WeirProcess(folder / "data", extra_args=["--partitions", "2"], env=ENV)) as w:
        yield w


async def set_up_teams(node: WeirProcess) -> dict[str, Any]:
    """The identities, deployments and instances of both teams: {"a": [keys], "b": [keys], "task": instance key}."""
    async with aiohttp.ClientSession(node.rest_url, headers=basic("admin")) as admin:
        # the configured admin exists once the first partition's leader has run the identity setup, a moment after
        # the node is up (a sign-in before that is refused, and the gateway remembers the answer for its cache ttl)
        deadline = asyncio.get_running_loop().time() + 30
        while (await call(admin, "GET", "/v2/authentication/me"))[0] != 200:
            assert asyncio.get_running_loop().time() < deadline, "the configured admin cannot sign in"
            await asyncio.sleep(0.5)

        async def ok(method: str, path: str, body: Any = None) -> Any:
            status, answer = await call(admin, method, path, body)
            assert status in (200, 201, 204), (path, answer)
            return answer

        for tenant in ("team-a", "team-b"):
            await ok("POST", "/v2/tenants", {"tenantId": tenant, "name": tenant})
            await ok("PUT", f"/v2/tenants/{tenant}/users/admin")
        for user, tenant, process in (("ann", "team-a", "one-task"), ("bob", "team-b", "*")):
            await ok("POST", "/v2/users", {"username": user, "password": PASSWORDS[user]})
            await ok("PUT", f"/v2/tenants/{tenant}/users/{user}")
            grant = {"ownerId": user, "ownerType": "USER", "resourceType": "PROCESS_DEFINITION"}
            await ok("POST", "/v2/authorizations", {**grant, "resourceId": process,
                                                   "permissionTypes": ["READ_PROCESS_INSTANCE"]})  # fmt: skip

        async def deploy(tenant: str, *names: str) -> None:
            form = aiohttp.FormData()
            for name in names:
                form.add_field("resources", (BPMN / name).read_bytes(), filename=name, content_type="application/xml")
            form.add_field("tenantId", tenant)
            async with admin.post("/v2/deployments", data=form) as response:
                assert response.status == 200, await response.text()

        async def start(tenant: str, process_id: str, variables: dict[str, Any] | None = None) -> str:
            body = {"processDefinitionId": process_id, "tenantId": tenant, "variables": variables or {}}
            return str((await ok("POST", "/v2/process-instances", body))["processInstanceKey"])

        await deploy("team-a", "one-task.bpmn", "user-task-native.bpmn")
        await deploy("team-b", "one-task.bpmn")
        made = {
            "a": [await start("team-a", "one-task"), await start("team-a", "one-task")],
            "b": [await start("team-b", "one-task")],
            "task": await start("team-a", "user-task-native", {"reviewers": ["ann"], "due": "2031-01-01T00:00:00Z"}),
        }
        # the history follows the log a little behind: wait until the admin sees everything
        everything = {"filter": {"processDefinitionId": "one-task"}}
        await until(admin, "POST", "/v2/process-instances/search", everything, lambda a: a["page"]["totalItems"] == 3)
        await until(admin, "POST", "/v2/user-tasks/search", {}, lambda a: a["page"]["totalItems"] == 1)
        return made


async def instance_keys(http: aiohttp.ClientSession, request: dict[str, Any] | None = None) -> tuple[int, set[str]]:
    status, found = await call(http, "POST", "/v2/process-instances/search", request or {})
    assert status == 200, found
    return found["page"]["totalItems"], {i["processInstanceKey"] for i in found["items"]}


async def test_each_team_reads_its_own_and_the_admin_both(node: WeirProcess) -> None:
    teams = await set_up_teams(node)
    a, b = set(teams["a"]), set(teams["b"])
    async with aiohttp.ClientSession(node.rest_url, headers=basic("admin")) as admin:
        assert await instance_keys(admin) == (4, a | b | {teams["task"]})
    async with aiohttp.ClientSession(node.rest_url, headers=basic("ann")) as ann:
        assert await instance_keys(ann) == (2, a), "team-a's one-task: not team-b's, nor another process of team-a"
        assert await instance_keys(ann, {"filter": {"tenantId": "team-b"}}) == (0, set())
        total, first = await instance_keys(ann, {"page": {"limit": 1}})
        assert total == 2 and len(first) == 1 and first <= a, "a page of one counts both"
        mine, theirs = teams["a"][0], teams["b"][0]
        assert (await call(ann, "GET", f"/v2/process-instances/{mine}"))[0] == 200
        status, problem = await call(ann, "GET", f"/v2/process-instances/{theirs}")
        assert status == 404 and "not in the history" in problem["detail"], "hidden like a missing one"
        assert (await call(ann, "GET", f"/v2/process-instances/{theirs}/sequence-flows"))[1]["items"] == []
        assert (await call(ann, "GET", f"/v2/process-instances/{mine}/sequence-flows"))[1]["items"]
        assert (await call(ann, "GET", f"/v2/process-instances/{theirs}/call-hierarchy"))[0] == 404
        status, jobs = await call(ann, "POST", "/v2/jobs/search", {})
        assert status == 200 and {j["processInstanceKey"] for j in jobs["items"]} == a
        status, definitions = await call(ann, "POST", "/v2/process-definitions/search", {})
        assert status == 200 and definitions["items"] == [], "READ_PROCESS_DEFINITION is not hers"
        # the task offered to her (candidateUsers) is hers to read, though its process is not
        status, tasks = await call(ann, "POST", "/v2/user-tasks/search", {})
        assert status == 200 and [t["processInstanceKey"] for t in tasks["items"]] == [teams["task"]]
        assert (await call(ann, "GET", f"/v2/process-instances/{teams['task']}"))[0] == 404
    async with aiohttp.ClientSession(node.rest_url, headers=basic("bob")) as bob:
        assert await instance_keys(bob) == (1, b), "every process, in team-b only"
        assert (await call(bob, "GET", f"/v2/process-instances/{teams['a'][0]}"))[0] == 404
        status, tasks = await call(bob, "POST", "/v2/user-tasks/search", {})
        assert status == 200 and tasks["items"] == [] and tasks["page"]["totalItems"] == 0
        status, incidents = await call(bob, "POST", "/v2/incidents/search", {"filter": {"tenantId": "team-a"}})
        assert status == 200 and incidents["page"]["totalItems"] == 0
