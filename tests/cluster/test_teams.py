"""Two teams on one 3-broker cluster (`weir cluster up`, three partitions replicated three times): basic sign-in
against the cluster's own users, multi-tenancy and authorizations on, an admin created from the configuration, the
history in PostgreSQL.

The admin sets up team A with `@camunda8/orchestration-cluster-api` and team B with the official Python SDK (tenant,
user, its grants); each team then works in its own tenant with the same client. Over gRPC, REST and the CLI, neither
team can see or touch the other's definitions, instances, jobs, variables or history; the admin can; a worker
assigned to both tenants takes both teams' jobs, a team's worker only its own.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from pyzeebe.proto import gateway_pb2 as pb

from tests.cluster.harness import Cluster
from tests.exporters.conftest import fresh_database
from tests.harness import BPMN, REPO
from tests.integration.clients import Stub
from tests.integration.node_clients import CLIENTS, run_node_script
from tests.integration.test_rest_api import call
from tests.postgres_server import PostgresServer

ADMIN = ("admin", "admin-secret")
TEAMS = {"team-a": ("ann", "ann-secret"), "team-b": ("bob", "bob-secret")}
WORK = [
    "CREATE_PROCESS_INSTANCE",
    "READ_PROCESS_DEFINITION",
    "READ_PROCESS_INSTANCE",
    "UPDATE_PROCESS_INSTANCE",
    "CANCEL_PROCESS_INSTANCE",
]

pytestmark = pytest.mark.skipif(
    not (CLIENTS / "@camunda8" / "orchestration-cluster-api").is_dir(),
    reason="@camunda8/orchestration-cluster-api not installed (run `make node-clients`)",
)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def team_of(user: str) -> str:
    return next(team for team, (name, _) in TEAMS.items() if name == user)


def credentials(user: str) -> tuple[str, str]:
    return ADMIN if user == ADMIN[0] else TEAMS[team_of(user)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    server = PostgresServer().start()
    history = fresh_database(server)
    env = {
        "WEIR_GATEWAY_MULTI_TENANCY_ENABLED": "true",
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "basic",
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_IDENTITY_CACHE_TTL": "0.5",
        "WEIR_GATEWAY_HISTORY_URL": history,
        "WEIR_BROKER_SECURITY_AUTHORIZATIONS_ENABLED": "true",
        "WEIR_BROKER_SECURITY_INITIALIZATION_USERS_0_USERNAME": ADMIN[0],
        "WEIR_BROKER_SECURITY_INITIALIZATION_USERS_0_PASSWORD": ADMIN[1],
        "WEIR_BROKER_SECURITY_INITIALIZATION_DEFAULT_ROLES_ADMIN_USERS": ADMIN[0],
        "WEIR_BROKER_EXPORTERS_HISTORY_CLASSNAME": "exporters.history.HistoryExporter",
        "WEIR_BROKER_EXPORTERS_HISTORY_ARGS_URL": history,
        "WEIR_BROKER_EXPORTERS_HISTORY_ARGS_FLUSH_DELAY": "0.1",
    }
    c = Cluster(tmp_path_factory.mktemp("teams") / "cluster")
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            c.up()
        yield c
    finally:
        c.kill_everything()
        server.stop()
        server.remove()


@pytest.fixture(scope="module")
def rest_url(cluster: Cluster) -> str:
    return str(cluster.info["gateway"]["restUrl"])


# -- setting the teams up, each with an official client ------------------------------------------------------

NODE_TEAM = r"""
const { createCamundaClient } = require('@camunda8/orchestration-cluster-api');
const [rest, adminUser, adminPassword, tenantId, user, password, bpmn, permissions] = process.argv.slice(2);
const client = (username, secret) => createCamundaClient({
  config: {
    CAMUNDA_REST_ADDRESS: rest,
    CAMUNDA_AUTH_STRATEGY: 'BASIC',
    CAMUNDA_BASIC_AUTH_USERNAME: username,
    CAMUNDA_BASIC_AUTH_PASSWORD: secret,
    CAMUNDA_SDK_VALIDATION: 'req:strict,res:strict',
    CAMUNDA_SDK_LOG_LEVEL: 'silent',
  },
});

async function main() {
  const admin = client(adminUser, adminPassword);
  await admin.createTenant({ tenantId, name: `Team ${tenantId}` });
  await admin.createUser({ username: user, password, name: user, email: `${user}@example.com` });
  await admin.assignUserToTenant({ tenantId, username: user });
  await admin.createAuthorization({
    ownerId: user, ownerType: 'USER', resourceType: 'PROCESS_DEFINITION', resourceId: '*',
    permissionTypes: JSON.parse(permissions),
  });
  await admin.createAuthorization({
    ownerId: user, ownerType: 'USER', resourceType: 'RESOURCE', resourceId: '*', permissionTypes: ['CREATE'],
  });
  const me = client(user, password);
  const deployed = await me.deployResourcesFromFiles([bpmn], { tenantId });
  const created = await me.createProcessInstance({
    processDefinitionId: 'one-task', tenantId, variables: { team: tenantId },
  });
  let refused = null;
  try {
    await me.createUser({ username: `${user}-friend`, password: 'x', name: 'x', email: 'x@example.com' });
  } catch (e) {
    refused = e.status ?? e.statusCode ?? String(e);
  }
  console.log(JSON.stringify({
    tenant: deployed.processes[0].tenantId,
    instance: String(created.processInstanceKey),
    refused,
  }));
}
"""


def node_team(rest_url: str, tenant: str, tmp_path: Path) -> dict[str, Any]:
    user, password = TEAMS[tenant]
    args = [rest_url, *ADMIN, tenant, user, password, str(BPMN / "one-task.bpmn"), str(WORK).replace("'", '"')]
    return run_node_script(NODE_TEAM, args, tmp_path)


def sdk_team(rest_url: str, tenant: str) -> dict[str, Any]:
    sdk = pytest.importorskip("camunda_orchestration_sdk", reason="camunda-orchestration-sdk not installed")
    from camunda_orchestration_sdk.models import (
        AuthorizationIdBasedRequest,
        TenantCreateRequest,
        UserRequest,
    )

    user, password = TEAMS[tenant]

    def client(username: str, secret: str) -> Any:
        configuration = {
            "CAMUNDA_REST_ADDRESS": rest_url,
            "CAMUNDA_AUTH_STRATEGY": "BASIC",
            "CAMUNDA_BASIC_AUTH_USERNAME": username,
            "CAMUNDA_BASIC_AUTH_PASSWORD": secret,
        }
        return sdk.CamundaClient(configuration=configuration)

    with client(*ADMIN) as admin:
        admin.create_tenant(data=TenantCreateRequest(tenant_id=tenant, name=f"Team {tenant}"))
        admin.create_user(data=UserRequest(username=user, password=password, name=user, email=f"{user}@example.com"))
        admin.assign_user_to_tenant(tenant, user)
        for resource_type, permissions in (("PROCESS_DEFINITION", WORK), ("RESOURCE", ["CREATE"])):
            grant = {
                "ownerId": user,
                "ownerType": "USER",
                "resourceType": resource_type,
                "resourceId": "*",
                "permissionTypes": permissions,
            }
            admin.create_authorization(data=AuthorizationIdBasedRequest.from_dict(grant))
    with client(user, password) as me:
        deployed = me.deploy_resources_from_files([BPMN / "one-task.bpmn"], tenant_id=tenant)
        created = me.create_process_instance(
            data=sdk.models.ProcessCreationById.from_dict(
                {"processDefinitionId": "one-task", "tenantId": tenant, "variables": {"team": tenant}}
            )
        )
        refused = None
        try:
            me.create_user(data=UserRequest(username=f"{user}-friend", password="x", name="x", email="x@example.com"))
        except Exception as e:  # the SDK raises its ForbiddenError
            refused = type(e).__name__
    return {
        "tenant": deployed.processes[0].tenant_id,
        "instance": str(created.process_instance_key),
        "refused": refused,
    }


@pytest.fixture(scope="module")
def teams(rest_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Team A set up and working through the TypeScript client, team B through the Python SDK."""
    a = node_team(rest_url, "team-a", tmp_path_factory.mktemp("node"))
    b = sdk_team(rest_url, "team-b")
    assert a["tenant"] == "team-a" and b["tenant"] == "team-b", (a, b)
    assert a["refused"] == 403 and b["refused"] == "ForbiddenError", "a team member manages no users"
    return {"team-a": a, "team-b": b}


# -- what each team can do over gRPC -------------------------------------------------------------------------


def metadata(user: str) -> list[tuple[str, str]]:
    return [("authorization", basic(*credentials(user)))]


def test_over_grpc_a_team_cannot_touch_the_other_teams_instances_or_jobs(
    cluster: Cluster, teams: dict[str, dict[str, Any]]
) -> None:
    channel = grpc.insecure_channel(cluster.gateway)
    stub = Stub(channel)
    ann_instance = int(teams["team-a"]["instance"])
    with pytest.raises(grpc.RpcError) as hidden:
        stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=ann_instance),
                                   metadata=metadata("bob"))  # fmt: skip
    assert hidden.value.code() == grpc.StatusCode.NOT_FOUND, hidden.value.details()
    with pytest.raises(grpc.RpcError) as refused:
        request = pb.CreateProcessInstanceRequest(bpmnProcessId="one-task", version=-1, tenantId="team-a")
        stub.CreateProcessInstance(request, metadata=metadata("bob"))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as refused:
        stream = stub.StreamActivatedJobs(
            pb.StreamActivatedJobsRequest(type="test", worker="bob", timeout=60_000, tenantIds=["team-a"]),
            metadata=metadata("bob"),
        )
        next(iter(stream))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "tenant identifier 'team-a'" in (refused.value.details() or "")

    def activate(user: str, tenants: list[str]) -> list[tuple[str, int]]:
        request = pb.ActivateJobsRequest(
            type="test", worker=user, timeout=60_000, maxJobsToActivate=10, requestTimeout=2_000, tenantIds=tenants
        )
        return [(j.tenantId, j.processInstanceKey) for r in stub.ActivateJobs(request, metadata=metadata(user))
                for j in r.jobs]  # fmt: skip

    with pytest.raises(grpc.RpcError) as refused:
        activate("bob", ["team-a", "team-b"])
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    # each team's worker takes its own team's job; the admin's worker, in both tenants, would take either
    deadline = time.monotonic() + 15
    got: dict[str, list[tuple[str, int]]] = {"ann": [], "bob": []}
    while not (got["ann"] and got["bob"]):
        assert time.monotonic() < deadline, got
        for user in got:
            got[user] += activate(user, [team_of(user)])
    assert got["ann"] == [("team-a", ann_instance)]
    assert got["bob"] == [("team-b", int(teams["team-b"]["instance"]))]
    channel.close()


def test_a_worker_in_both_tenants_takes_both_teams_jobs(cluster: Cluster, teams: dict[str, dict[str, Any]]) -> None:
    channel = grpc.insecure_channel(cluster.gateway)
    stub = Stub(channel)
    for tenant, user in (("team-a", "ann"), ("team-b", "bob")):
        request = pb.CreateProcessInstanceRequest(bpmnProcessId="one-task", version=-1, tenantId=tenant)
        stub.CreateProcessInstance(request, metadata=metadata(user))
    asyncio.run(_admin_joins_both_tenants(cluster))
    tenants = set()
    deadline = time.monotonic() + 15
    while tenants != {"team-a", "team-b"}:
        assert time.monotonic() < deadline, tenants
        request = pb.ActivateJobsRequest(type="test", worker="admin", timeout=60_000, maxJobsToActivate=10,
                                         requestTimeout=1_000, tenantIds=["team-a", "team-b"])  # fmt: skip
        tenants |= {j.tenantId for r in stub.ActivateJobs(request, metadata=metadata("admin")) for j in r.jobs}
    channel.close()


async def _admin_joins_both_tenants(cluster: Cluster) -> None:
    url = str(cluster.info["gateway"]["restUrl"])
    async with aiohttp.ClientSession(url, headers={"Authorization": basic(*ADMIN)}) as admin:
        for tenant in TEAMS:
            status, answer = await call(admin, "PUT", f"/v2/tenants/{tenant}/users/{ADMIN[0]}")
            assert status == 204, answer
    await asyncio.sleep(1.0)  # the gateways' identity cache (identityCacheTtl 0.5 s) forgets what it knew


# -- what each team can see over REST and the CLI ------------------------------------------------------------


async def _instances(rest_url: str, user: str) -> set[str]:
    """The tenants of the process instances ``user`` finds, once the history has what it waits for."""
    async with aiohttp.ClientSession(rest_url, headers={"Authorization": basic(*credentials(user))}) as http:
        deadline = asyncio.get_running_loop().time() + 20
        while True:
            status, found = await call(http, "POST", "/v2/process-instances/search", {"filter": {}})
            assert status == 200, found
            tenants = {item["tenantId"] for item in found["items"]}
            if tenants >= (set(TEAMS) if user == ADMIN[0] else {team_of(user)}):
                return tenants
            assert asyncio.get_running_loop().time() < deadline, found
            await asyncio.sleep(0.2)


def test_over_rest_and_the_cli_a_team_sees_only_its_own_history(
    rest_url: str, teams: dict[str, dict[str, Any]]
) -> None:
    async def check() -> None:
        for user, tenant in (("ann", "team-a"), ("bob", "team-b")):
            seen = await _instances(rest_url, user)
            assert seen == {tenant}, (user, seen)
            other = teams["team-b" if tenant == "team-a" else "team-a"]["instance"]
            async with aiohttp.ClientSession(rest_url, headers={"Authorization": basic(*credentials(user))}) as http:
                status, _ = await call(http, "GET", f"/v2/process-instances/{other}")
                assert status == 404, (user, status)
                status, found = await call(http, "POST", "/v2/variables/search", {"filter": {}})
                assert status == 200 and {v["tenantId"] for v in found["items"]} == {tenant}, found
                status, found = await call(http, "POST", "/v2/process-definitions/search", {"filter": {}})
                assert status == 200 and {d["tenantId"] for d in found["items"]} == {tenant}, found
        assert await _instances(rest_url, ADMIN[0]) >= set(TEAMS)

    asyncio.run(check())
    env = {**os.environ, "ZEEBE_BASIC_AUTH_USERNAME": "bob", "ZEEBE_BASIC_AUTH_PASSWORD": TEAMS["team-b"][1]}
    listed = subprocess.run(
        [sys.executable, "-m", "client.cli", "instances", "--output", "json", "--rest-address", rest_url],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert teams["team-b"]["instance"] in listed.stdout and teams["team-a"]["instance"] not in listed.stdout
