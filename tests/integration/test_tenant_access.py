"""Tenant access over the wire: a real `weir start` with basic authentication and multi-tenancy; the engine lets an
authenticated caller act only in the tenants it is assigned to (through the identity records the REST API manages),
over gRPC (PERMISSION_DENIED) and REST (403)."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import aiohttp
import grpc
import pytest
from pyzeebe.proto import gateway_pb2 as pb

from gateway.auth import hash_password
from tests.harness import BPMN, WeirProcess, running
from tests.integration.clients import Stub
from tests.integration.test_rest_api import assert_problem, call

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}


def basic(user: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{PASSWORDS[user]}".encode()).decode()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    folder = tmp_path_factory.mktemp("weir")
    users = folder / "users"
    users.write_text("".join(f"{user}:{hash_password(password)}\n" for user, password in PASSWORDS.items()))
    env = {
        "WEIR_GATEWAY_MULTI_TENANCY_ENABLED": "true",
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "basic",
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_BASIC_USERS_FILE": str(users),
    }
    with running(WeirProcess(folder / "data", extra_args=["--partitions", "2"], env=env)) as w:
        yield w


async def test_a_caller_acts_only_in_its_tenants(guarded: WeirProcess) -> None:
    async with aiohttp.ClientSession(guarded.rest_url, headers={"Authorization": basic("alice")}) as alice:
        assert (await call(alice, "POST", "/v2/tenants", {"tenantId": "team-a", "name": "Team A"}))[0] == 201
        assert (await call(alice, "PUT", "/v2/tenants/team-a/users/alice"))[0] == 204

    channel = grpc.insecure_channel(guarded.address)
    stub = Stub(channel)
    resource = pb.Resource(name="one-task.bpmn", content=(BPMN / "one-task.bpmn").read_bytes())
    deploy = pb.DeployResourceRequest(resources=[resource], tenantId="team-a")
    deployed = stub.DeployResource(deploy, metadata=[("authorization", basic("alice"))])
    assert deployed.tenantId == "team-a"
    with pytest.raises(grpc.RpcError) as refused:
        stub.DeployResource(deploy, metadata=[("authorization", basic("bob"))])
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "tenant identifier 'team-a', but tenant is not authorized" in (refused.value.details() or "")
    # the default tenant is everyone's
    shared = pb.DeployResourceRequest(resources=[resource], tenantId="<default>")
    assert stub.DeployResource(shared, metadata=[("authorization", basic("bob"))]).tenantId == "<default>"

    activation = pb.ActivateJobsRequest(
        type="test", worker="w", timeout=60_000, maxJobsToActivate=5, requestTimeout=-1, tenantIds=["team-a"]
    )
    with pytest.raises(grpc.RpcError) as refused:
        list(stub.ActivateJobs(activation, metadata=[("authorization", basic("bob"))]))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    answers = stub.ActivateJobs(activation, metadata=[("authorization", basic("alice"))])
    assert [job for answer in answers for job in answer.jobs] == [], "alice may ask; team-a has no instance yet"
    channel.close()

    async with aiohttp.ClientSession(guarded.rest_url, headers={"Authorization": basic("bob")}) as bob:
        body = {"processDefinitionId": "one-task", "tenantId": "team-a"}
        assert_problem(await call(bob, "POST", "/v2/process-instances", body), 403, "not authorized", title="FORBIDDEN")
    async with aiohttp.ClientSession(guarded.rest_url, headers={"Authorization": basic("alice")}) as alice:
        status, created = await call(alice, "POST", "/v2/process-instances", body)
        assert status == 200 and created["tenantId"] == "team-a", created
