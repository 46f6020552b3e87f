"""Multi-tenancy over the wire: a real `weir start` with gateway.multiTenancy.enabled and two partitions, driven by
pyzeebe (gRPC) and over REST — requests name their tenant, each tenant sees its own processes, jobs and messages, and
Zeebe's errors for a missing or malformed tenant id."""

# (no `from __future__ import annotations`: pyzeebe finds a handler's Job parameter by its evaluated annotation)
import asyncio
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any

import aiohttp
import grpc
import pytest
from pyzeebe import Job, ZeebeClient, ZeebeWorker, create_insecure_channel
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import BPMN, WeirProcess, running
from tests.integration.test_batch_operations import until
from tests.integration.test_rest_api import assert_problem, call


@pytest.fixture(scope="module")
def tenants_weir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    with running(
        WeirProcess(
            tmp_path_factory.mktemp("weir") / "data",
            extra_args=["--partitions", "2"],
            env={"WEIR_GATEWAY_MULTI_TENANCY_ENABLED": "true"},
        )
    ) as w:
        yield w


@pytest.fixture
async def http(tenants_weir: WeirProcess) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(tenants_weir.rest_url) as session:
        yield session


async def rpc_problem(call: Awaitable[object]) -> grpc.aio.AioRpcError:
    """The gRPC error a call ends with (pyzeebe raises its own errors from them)."""
    with pytest.raises(Exception) as raised:
        await call
    error: BaseException | None = raised.value
    while error is not None and not isinstance(error, grpc.aio.AioRpcError):
        error = getattr(error, "grpc_error", None) or error.__cause__
    assert error is not None, repr(raised.value)
    return error


async def first_job(channel: grpc.aio.Channel, tenants: list[str], *, stream_enabled: bool, before: Any) -> list:
    """Run a pyzeebe worker for ``tenants`` until it handled a job of type test (``before``: awaited once it runs);
    what it handled, as (tenant, process instance key)."""
    seen: list[tuple[str, int]] = []
    done = asyncio.Event()
    worker = ZeebeWorker(channel, tenant_ids=tenants, stream_enabled=stream_enabled, poll_retry_delay=0)

    @worker.task(task_type="test")
    async def handle(job: Job) -> dict:
        seen.append((job.tenant_id, job.process_instance_key))
        done.set()
        return {}

    work = asyncio.create_task(worker.work())
    try:
        await before()
        await asyncio.wait_for(done.wait(), 15)
    finally:
        await worker.stop()
        work.cancel()
    return seen


async def test_a_tenant_worker_gets_only_its_tenants_jobs(tenants_weir: WeirProcess) -> None:
    channel = create_insecure_channel(grpc_address=tenants_weir.address)
    client = ZeebeClient(channel)
    for tenant in ("team-a", "team-b"):
        deployed = await client.deploy_resource(str(BPMN / "one-task.bpmn"), tenant_id=tenant)
        assert deployed.tenant_id == tenant
        assert [(p.version, p.tenant_id) for p in deployed.deployments] == [(1, tenant)]
    a = await client.run_process("one-task", {"n": 1}, tenant_id="team-a")
    b = await client.run_process("one-task", {"n": 2}, tenant_id="team-b")
    assert (a.tenant_id, b.tenant_id) == ("team-a", "team-b")
    assert a.process_definition_key != b.process_definition_key, "each tenant deployed its own definition"
    team_b = [b.process_instance_key]

    async def nothing() -> None:
        pass

    polled = await first_job(channel, ["team-a"], stream_enabled=False, before=nothing)
    assert polled == [("team-a", a.process_instance_key)]

    async def create_both() -> None:  # jobs created while the stream is open are pushed to it
        await asyncio.sleep(0.5)
        team_b.append((await client.run_process("one-task", {"n": 4}, tenant_id="team-b")).process_instance_key)
        team_a.append((await client.run_process("one-task", {"n": 3}, tenant_id="team-a")).process_instance_key)

    team_a: list[int] = []
    pushed = await first_job(channel, ["team-a"], stream_enabled=True, before=create_both)
    assert pushed == [("team-a", team_a[0])]

    # team-b's jobs are still there for team-b, and for nobody else
    activate = channel.unary_stream(
        "/gateway_protocol.Gateway/ActivateJobs",
        request_serializer=pb.ActivateJobsRequest.SerializeToString,
        response_deserializer=pb.ActivateJobsResponse.FromString,
    )

    def request(*tenants: str) -> pb.ActivateJobsRequest:
        return pb.ActivateJobsRequest(
            type="test", worker="t", timeout=60_000, maxJobsToActivate=10, requestTimeout=-1, tenantIds=tenants
        )

    jobs = [j async for r in activate(request("team-b")) for j in r.jobs]
    assert sorted((j.processInstanceKey, j.tenantId) for j in jobs) == [(k, "team-b") for k in sorted(team_b)]
    problem = await rpc_problem(anext(aiter(activate(request()))))
    assert problem.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "no tenant identifier was provided" in (problem.details() or "")
    await channel.close()


async def test_requests_must_name_a_valid_tenant(tenants_weir: WeirProcess) -> None:
    channel = create_insecure_channel(grpc_address=tenants_weir.address)
    client = ZeebeClient(channel)
    missing = await rpc_problem(client.deploy_resource(str(BPMN / "one-task.bpmn")))
    assert missing.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "DeployResource with multi-tenancy enabled, but no tenant identifier was provided" in (
        missing.details() or ""
    )
    illegal = await rpc_problem(client.run_process("one-task", tenant_id="team a!"))
    assert illegal.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "tenant identifier contains illegal characters" in (illegal.details() or "")
    too_long = await rpc_problem(client.publish_message("m", "k", tenant_id="t" * 32))
    assert "longer than 31 characters" in (too_long.details() or "")
    unknown = await rpc_problem(client.run_process("one-task", tenant_id="team-nobody"))
    assert unknown.code() == grpc.StatusCode.NOT_FOUND, "a tenant without the process does not find it"
    await channel.close()


async def test_rest_requests_act_in_their_tenant(http: aiohttp.ClientSession) -> None:
    form = aiohttp.FormData()
    form.add_field("resources", (BPMN / "message-catch.bpmn").read_bytes(), filename="message-catch.bpmn")
    form.add_field("tenantId", "team-rest")
    async with http.post("/v2/deployments", data=form) as response:
        deployed = await response.json()
        assert response.status == 200, deployed
    assert deployed["tenantId"] == "team-rest"
    assert deployed["deployments"][0]["processDefinition"]["tenantId"] == "team-rest"
    no_tenant = {"processDefinitionId": "message-catch"}
    assert_problem(await call(http, "POST", "/v2/process-instances", no_tenant), 400, "no tenant identifier")
    body = {"processDefinitionId": "message-catch", "tenantId": "team-rest", "variables": {"requestId": "r-1"}}
    status, created = await call(http, "POST", "/v2/process-instances", body)
    assert status == 200 and created["tenantId"] == "team-rest", created

    message = {"name": "approved", "correlationKey": "r-1", "timeToLive": 60_000}
    assert_problem(await call(http, "POST", "/v2/messages/publication", message), 400, "no tenant identifier")
    status, published = await call(http, "POST", "/v2/messages/publication", {**message, "tenantId": "other"})
    assert status == 200 and published["tenantId"] == "other"
    activation = {"type": "approved", "worker": "w", "timeout": 60_000, "maxJobsToActivate": 5, "requestTimeout": 500}
    status, answer = await call(http, "POST", "/v2/jobs/activation", {**activation, "tenantIds": ["team-rest"]})
    assert status == 200 and answer["jobs"] == [], "a message of another tenant reaches nothing here"
    status, published = await call(http, "POST", "/v2/messages/publication", {**message, "tenantId": "team-rest"})
    assert status == 200, published
    for _ in range(20):  # each waits up to its requestTimeout for the job the message brings
        status, answer = await call(http, "POST", "/v2/jobs/activation", {**activation, "tenantIds": ["team-rest"]})
        if answer["jobs"]:
            break
    assert [j["tenantId"] for j in answer["jobs"]] == ["team-rest"]
    assert answer["jobs"][0]["processInstanceKey"] == created["processInstanceKey"]

    # the history keeps the tenant: searches filter by it
    search = {"filter": {"processDefinitionId": "message-catch", "tenantId": "team-rest"}}
    page = await until(http, "POST", "/v2/process-instances/search", search, lambda a: a["items"])
    assert [(i["processInstanceKey"], i["tenantId"]) for i in page["items"]] == [
        (created["processInstanceKey"], "team-rest")
    ]
    elsewhere = {"filter": {"processDefinitionId": "message-catch", "tenantId": "other"}}
    assert (await until(http, "POST", "/v2/process-instances/search", elsewhere, lambda a: True))["items"] == []
