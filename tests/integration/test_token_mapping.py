"""OAuth callers mapped to identities by their token's claims: a real `weir start` with OAuth (offline JWKS),
multi-tenancy and authorizations on. The admin is a client configured at start (`defaultRoles.admin.clients`); it maps
the claim `groups: team-a` to the tenant team-a and grants the mapping rule what a team needs. A token carrying that
claim then works in team-a over gRPC and REST and sees only team-a's instances; a token without it is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import aiohttp
import grpc
import pytest
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import BPMN, WeirProcess, running
from tests.integration.clients import Stub
from tests.integration.test_rest_api import call
from tests.security import TokenIssuer, make_certificates

AUDIENCE = "weir"


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> TokenIssuer:
    """Only its keys and tokens are used: the gateway reads the JWKS from a file, no token is fetched."""
    return TokenIssuer(make_certificates(tmp_path_factory.mktemp("certs")), {})


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, issuer: TokenIssuer) -> Iterator[WeirProcess]:
    folder = tmp_path_factory.mktemp("weir")
    env = {
        "WEIR_GATEWAY_MULTI_TENANCY_ENABLED": "true",
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "oauth",
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_JWKS_PATH": str(issuer.write_jwks(folder / "jwks.json")),
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_ISSUER": issuer.issuer,
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_AUDIENCE": AUDIENCE,
        "WEIR_GATEWAY_SECURITY_AUTHENTICATION_IDENTITY_CACHE_TTL": "0.2",
        "WEIR_BROKER_SECURITY_AUTHORIZATIONS_ENABLED": "true",
        "WEIR_BROKER_SECURITY_INITIALIZATION_DEFAULT_ROLES_ADMIN_CLIENTS": "ops-bot",
    }
    with running(WeirProcess(folder / "data", extra_args=["--partitions", "2"], env=env)) as w:
        yield w


def bearer(issuer: TokenIssuer, subject: str, **claims: object) -> str:
    return "Bearer " + issuer.token(subject, audience=AUDIENCE, claims=claims)


async def _as(node: WeirProcess, authorization: str, method: str, path: str, body: object = None) -> tuple[int, dict]:
    async with aiohttp.ClientSession(node.rest_url, headers={"Authorization": authorization}) as http:
        return await call(http, method, path, body)  # type: ignore[no-any-return]


async def _set_up(node: WeirProcess, admin: str) -> None:
    writes = [
        ("POST", "/v2/tenants", {"tenantId": "team-a", "name": "Team A"}),
        ("POST", "/v2/tenants", {"tenantId": "team-b", "name": "Team B"}),
        (
            "POST",
            "/v2/mapping-rules",
            {"mappingRuleId": "team-a-members", "claimName": "groups", "claimValue": "team-a", "name": "Team A"},
        ),
        ("PUT", "/v2/tenants/team-a/mapping-rules/team-a-members", None),
        ("PUT", "/v2/tenants/team-a/clients/ops-bot", None),  # the admin's client works in both tenants
        ("PUT", "/v2/tenants/team-b/clients/ops-bot", None),
    ]
    for owner_type, resource_type, permissions in (
        ("MAPPING_RULE", "PROCESS_DEFINITION", ["CREATE_PROCESS_INSTANCE", "READ_PROCESS_INSTANCE"]),
        ("MAPPING_RULE", "RESOURCE", ["CREATE"]),
    ):
        grant = {"ownerId": "team-a-members", "ownerType": owner_type, "resourceType": resource_type}
        writes.append(("POST", "/v2/authorizations", {**grant, "resourceId": "*", "permissionTypes": permissions}))
    for method, path, body in writes:
        status, answer = await _as(node, admin, method, path, body)
        assert status in (201, 204), (path, status, answer)


def test_a_tokens_claim_maps_it_to_a_tenant_and_its_grants(node: WeirProcess, issuer: TokenIssuer) -> None:
    admin = bearer(issuer, "service-account-ops-bot", azp="ops-bot")
    asyncio.run(_set_up(node, admin))
    carol = bearer(issuer, "carol", groups=["sales", "team-a"])
    dave = bearer(issuer, "dave", groups=["sales"])
    stub = Stub(grpc.insecure_channel(node.address))
    resource = pb.Resource(name="one-task.bpmn", content=(BPMN / "one-task.bpmn").read_bytes())

    def deploy(who: str, tenant: str) -> pb.DeployResourceResponse:
        request = pb.DeployResourceRequest(resources=[resource], tenantId=tenant)
        return stub.DeployResource(request, metadata=[("authorization", who)])

    def create(who: str, tenant: str) -> int:
        request = pb.CreateProcessInstanceRequest(bpmnProcessId="one-task", version=-1, tenantId=tenant)
        return int(stub.CreateProcessInstance(request, metadata=[("authorization", who)]).processInstanceKey)

    deploy(admin, "team-b")
    theirs = create(admin, "team-b")
    assert deploy(carol, "team-a").deployments[0].process.tenantId == "team-a"
    mine = create(carol, "team-a")
    for who, tenant in ((carol, "team-b"), (dave, "team-a")):
        with pytest.raises(grpc.RpcError) as refused:
            deploy(who, tenant)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED, refused.value.details()

    async def reads() -> None:
        status, me = await _as(node, carol, "GET", "/v2/authentication/me")
        assert status == 200 and [t["tenantId"] for t in me["tenants"]] == ["team-a"], me
        deadline = asyncio.get_running_loop().time() + 15
        while True:
            status, admins = await _as(node, admin, "POST", "/v2/process-instances/search", {"filter": {}})
            if status == 200 and {str(mine), str(theirs)} <= {i["processInstanceKey"] for i in admins["items"]}:
                break
            assert asyncio.get_running_loop().time() < deadline, admins
            await asyncio.sleep(0.1)
        status, found = await _as(node, carol, "POST", "/v2/process-instances/search", {"filter": {}})
        assert status == 200 and [i["processInstanceKey"] for i in found["items"]] == [str(mine)], found
        assert (await _as(node, carol, "GET", f"/v2/process-instances/{theirs}"))[0] == 404

    asyncio.run(reads())


def test_without_the_claim_a_token_is_no_member(node: WeirProcess, issuer: TokenIssuer) -> None:
    status, me = asyncio.run(_as(node, bearer(issuer, "erin", groups="team-b"), "GET", "/v2/authentication/me"))
    assert status == 200 and me["tenants"] == [], me
