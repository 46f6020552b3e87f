"""Signing in with the cluster's own users: a real `weir broker --embedded-gateway` (two partitions, authorizations
on) whose configuration creates an admin user at start, and a separate `weir gateway` in front of its command API.
Basic credentials are checked against the stored users (no users file) over gRPC and REST on both gateways; the admin
creates a user who can then sign in (and, holding no grant, manage no users); /v2/authentication/me describes the
caller; a restart sets nothing up again."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import aiohttp
import grpc
import pytest
from pyzeebe.proto import gateway_pb2 as pb

from broker.protocol.enums import RecordType, ValueType
from tests.harness import CliProcess, WeirProcess, free_port, retry_on_taken_port, running
from tests.integration.clients import Stub, logged_records
from tests.integration.test_rest_api import call

AUTH = {
    "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "basic",
    "WEIR_GATEWAY_SECURITY_AUTHENTICATION_IDENTITY_CACHE_TTL": "0.2",
}
SETUP = {
    "WEIR_BROKER_SECURITY_INITIALIZATION_USERS_0_USERNAME": "demo",
    "WEIR_BROKER_SECURITY_INITIALIZATION_USERS_0_PASSWORD": "demo-secret",
    "WEIR_BROKER_SECURITY_INITIALIZATION_USERS_0_NAME": "Demo",
    "WEIR_BROKER_SECURITY_INITIALIZATION_USERS_0_EMAIL": "demo@example.com",
    "WEIR_BROKER_SECURITY_INITIALIZATION_DEFAULT_ROLES_ADMIN_USERS": "demo",
    # the admin role's grants are what lets demo manage users
    "WEIR_BROKER_SECURITY_AUTHORIZATIONS_ENABLED": "true",
}


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    folder = tmp_path_factory.mktemp("weir")
    w = WeirProcess(folder / "data", extra_args=["--partitions", "2"], env={**AUTH, **SETUP}, command_api=True)
    with running(w):
        yield w


@pytest.fixture(scope="module")
def separate(node: WeirProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A `weir gateway` in front of the node's command API: (gRPC address, REST base URL)."""
    folder = tmp_path_factory.mktemp("gateway")

    def start(_attempt: int) -> tuple[CliProcess, int, int]:
        gateway_port, rest_port, monitoring_port = free_port(), free_port(), free_port()
        args = ["gateway", "--broker", f"127.0.0.1:{node.command_port}", "--gateway-port", str(gateway_port)]
        args += ["--rest-port", str(rest_port), "--monitoring-port", str(monitoring_port)]
        proc = CliProcess(args, folder / "gateway.log", AUTH)
        return proc.wait_running(monitoring_port), gateway_port, rest_port

    gateway, gateway_port, rest_port = retry_on_taken_port(start)
    try:
        yield f"127.0.0.1:{gateway_port}", f"http://127.0.0.1:{rest_port}"
    finally:
        gateway.stop()


def topology(address: str, authorization: str) -> grpc.StatusCode:
    with grpc.insecure_channel(address) as channel:
        try:
            Stub(channel).Topology(pb.TopologyRequest(), metadata=[("authorization", authorization)])
        except grpc.RpcError as e:
            return e.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


async def me(rest_url: str, authorization: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession(rest_url, headers={"Authorization": authorization}) as http:
        return await call(http, "GET", "/v2/authentication/me")


async def test_the_configured_admin_signs_in_and_adds_a_user_who_can_sign_in(
    node: WeirProcess, separate: tuple[str, str]
) -> None:
    demo, wrong = basic("demo", "demo-secret"), basic("demo", "not-it")
    for address in (node.address, separate[0]):
        assert topology(address, demo) == grpc.StatusCode.OK
        assert topology(address, wrong) == grpc.StatusCode.UNAUTHENTICATED
    for rest_url in (node.rest_url, separate[1]):
        status, seen = await me(rest_url, demo)
        assert status == 200, seen
        assert (seen["username"], seen["displayName"], seen["email"]) == ("demo", "Demo", "demo@example.com")
        assert (seen["roles"], seen["groups"], seen["tenants"], seen["canLogout"]) == (["admin"], [], [], False)
        assert seen["authorizedComponents"] == ["*"]
        assert (await me(rest_url, wrong))[0] == 401

    async with aiohttp.ClientSession(node.rest_url, headers={"Authorization": demo}) as http:
        assert (await call(http, "POST", "/v2/users", {"username": "ann", "password": "ann-secret"}))[0] == 201
        assert (await call(http, "POST", "/v2/tenants", {"tenantId": "team-a", "name": "Team A"}))[0] == 201
        assert (await call(http, "PUT", "/v2/tenants/team-a/users/ann"))[0] == 204
    ann = basic("ann", "ann-secret")
    for address in (node.address, separate[0]):
        assert topology(address, ann) == grpc.StatusCode.OK
        assert topology(address, basic("ann", "demo-secret")) == grpc.StatusCode.UNAUTHENTICATED
    async with aiohttp.ClientSession(node.rest_url, headers={"Authorization": ann}) as http:
        status, _ = await call(http, "POST", "/v2/users", {"username": "eve", "password": "x"})
        assert status == 403, "ann holds no grant: only the admin role's members manage users"
    status, seen = await me(separate[1], ann)
    assert status == 200, seen
    assert (seen["username"], seen["roles"], seen["authorizedComponents"]) == ("ann", [], [])
    assert seen["tenants"] == [{"tenantId": "team-a", "name": "Team A", "description": None}]


async def test_a_restart_sets_nothing_up_again(node: WeirProcess) -> None:
    node.restart()
    assert topology(node.address, basic("demo", "demo-secret")) == grpc.StatusCode.OK
    node.stop()
    records = logged_records(node, 1)
    setups = [r for r in records if r.value_type == ValueType.IDENTITY_SETUP and r.record_type == RecordType.COMMAND]
    assert len(setups) == 1, "the second start found everything configured in place"
    assert "demo-secret" not in str(setups[0].value), "the password is hashed before the command is written"
    created = [
        r.value["username"]
        for r in records
        if r.value_type == ValueType.USER and r.record_type == RecordType.EVENT and r.intent_enum.name == "CREATED"
    ]
    assert created.count("demo") == 1
    on_second = {(r.value_type.name, r.intent_enum.name) for r in logged_records(node, 2) if r.is_event}
    assert {("USER", "CREATED"), ("ROLE", "CREATED"), ("AUTHORIZATION", "CREATED"), ("ROLE", "ENTITY_ADDED")} <= (
        on_second
    ), "the setup reached the other partition"
