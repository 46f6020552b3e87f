"""Business ids and tags (Camunda 8.9) over gRPC and REST against a real `weir start`: uniqueness on (three
partitions, so only routing by business id lets one partition decide) and off (the default), tags handed to workers,
validation errors, and searches by business id and tags."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import aiohttp
import grpc
import pytest

from tests.harness import WeirProcess, eventually, running
from tests.integration.clients import Stub, activate, complete, deploy, rpc_error, weir_message
from tests.integration.test_message_correlation import create_when_deployed
from tests.integration.test_rest_api import assert_problem, call

PARTITIONS = 3


@pytest.fixture(scope="module")
def unique_weir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    with running(
        WeirProcess(
            tmp_path_factory.mktemp("weir") / "data",
            extra_args=["--partitions", str(PARTITIONS)],
            env={"WEIR_BROKER_BUSINESS_ID_UNIQUENESS": "true"},
        )
    ) as w:
        yield w


class Creations:
    """CreateProcessInstance(WithResult) with Weir's own messages (pyzeebe's know no business ids nor tags)."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.request = weir_message("CreateProcessInstanceRequest")
        self.create = self._method(channel, "CreateProcessInstance")
        self.create_with_result = self._method(channel, "CreateProcessInstanceWithResult")

    @staticmethod
    def _method(channel: grpc.Channel, name: str) -> Any:
        answer = weir_message(f"{name}Response")
        return channel.unary_unary(
            f"/gateway_protocol.Gateway/{name}",
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=answer.FromString,
        )

    def of(self, process_id: str, business_id: str | None = None, tags: list[str] | None = None) -> Any:
        return self.request(bpmnProcessId=process_id, version=-1, variables="{}", businessId=business_id, tags=tags)

    def with_result(self, process_id: str, business_id: str) -> Any:
        request = weir_message("CreateProcessInstanceWithResultRequest")(requestTimeout=5000)
        request.request.CopyFrom(self.of(process_id, business_id))
        return request


def when_deployed(create: Callable[[], Any]) -> Any:
    """Create once the deployment reached the partition the creation goes to (distribution is asynchronous)."""
    for _ in range(200):
        try:
            return create()
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND, e.details()
        time.sleep(0.05)
    raise AssertionError("the process never reached the partition")


def job_tags(job: Any) -> list[str]:
    """ActivatedJob.tags (field 18, unknown to pyzeebe's message but kept with it)."""
    return list(weir_message("ActivatedJob").FromString(job.SerializeToString()).tags)


@pytest.fixture(scope="module")
def unique_channel(unique_weir: WeirProcess) -> Iterator[grpc.Channel]:
    channel = grpc.insecure_channel(unique_weir.address)
    try:
        yield channel
    finally:
        channel.close()


@pytest.fixture(scope="module")
def unique_stub(unique_channel: grpc.Channel) -> Stub:
    return Stub(unique_channel)


@pytest.fixture(scope="module")
def unique_creations(unique_channel: grpc.Channel) -> Creations:
    return Creations(unique_channel)


@pytest.fixture(scope="module")
def creations(weir: WeirProcess) -> Iterator[Creations]:
    channel = grpc.insecure_channel(weir.address)
    try:
        yield Creations(channel)
    finally:
        channel.close()


@pytest.fixture
async def unique_http(unique_weir: WeirProcess) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=unique_weir.rest_url) as session:
        yield session


@pytest.fixture
async def http(weir: WeirProcess) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=weir.rest_url) as session:
        yield session


async def test_with_uniqueness_one_active_root_instance_per_business_id(
    unique_stub: Stub, unique_creations: Creations, unique_http: aiohttp.ClientSession
) -> None:
    c = unique_creations
    app = deploy(unique_stub, "one-task.bpmn")
    first = when_deployed(lambda: c.create(c.of(app.pid(), "order-1", ["vip", "shop:eu"]), timeout=10))
    assert first.businessId == "order-1" and list(first.tags) == ["vip", "shop:eu"]
    # more times than there are partitions: round robin would have reached another partition
    for _ in range(PARTITIONS + 1):
        error = rpc_error(c.create, c.of(app.pid(), "order-1"))
        assert error.code() == grpc.StatusCode.ALREADY_EXISTS, error.details()
        assert f"'{first.processInstanceKey}'" in error.details()
    error = rpc_error(c.create_with_result, c.with_result(app.pid(), "order-1"))
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS
    body = {"processDefinitionId": app.pid(), "businessId": "order-1"}
    assert_problem(await call(unique_http, "POST", "/v2/process-instances", body), 409, "order-1")
    other = await create_when_deployed(unique_http, {**body, "businessId": "order-2"})
    assert other["businessId"] == "order-2" and other["tags"] == []

    jobs = activate(unique_stub, app.type("test"), 2)
    tagged = [j for j in jobs if j.processInstanceKey == first.processInstanceKey]
    assert [job_tags(j) for j in tagged] == [["vip", "shop:eu"]]
    complete(unique_stub, tagged[0].key)  # the instance ends: its business id is free again

    def created_again() -> bool:
        try:
            c.create(c.of(app.pid(), "order-1"), timeout=10)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.ALREADY_EXISTS, e.details()
            return False
        return True

    eventually(created_again, timeout=20, what="the business id free once its instance completed")


async def test_tags_and_business_ids_out_of_bounds_are_refused(
    unique_stub: Stub, unique_creations: Creations, unique_http: aiohttp.ClientSession
) -> None:
    c = unique_creations
    app = deploy(unique_stub, "one-task.bpmn")
    for tags in (["9lives"], [f"t{i}" for i in range(11)], ["a" * 101]):
        error = rpc_error(c.create, c.of(app.pid(), tags=tags))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "tag" in error.details()
    body = {"processDefinitionId": app.pid(), "businessId": "b" * 257}
    assert_problem(await call(unique_http, "POST", "/v2/process-instances", body), 400, "256")
    body = {"processDefinitionId": app.pid(), "tags": ["has space"]}
    assert_problem(await call(unique_http, "POST", "/v2/process-instances", body), 400, "has space")


async def test_without_uniqueness_instances_share_a_business_id_and_are_found_by_it(
    stub: Stub, creations: Creations, http: aiohttp.ClientSession
) -> None:
    c = creations
    app = deploy(stub, "one-task.bpmn")
    keys = [c.create(c.of(app.pid(), "order-1", ["vip"]), timeout=10).processInstanceKey for _ in range(2)]
    status, created = await call(
        http, "POST", "/v2/process-instances", {"processDefinitionId": app.pid(), "businessId": "order-1"}
    )
    assert status == 200 and created["businessId"] == "order-1"
    keys.append(int(created["processInstanceKey"]))

    async def found(request: dict) -> list[int]:
        status, page = await call(http, "POST", "/v2/process-instances/search", request)
        assert status == 200, page
        return sorted(int(i["processInstanceKey"]) for i in page["items"])

    by_id = {"filter": {"processDefinitionId": app.pid(), "businessId": "order-1"}}
    for _ in range(200):
        if await found(by_id) == sorted(keys):
            break
        await asyncio.sleep(0.1)
    assert await found(by_id) == sorted(keys)
    assert await found({"filter": {"processDefinitionId": app.pid(), "tags": ["vip"]}}) == sorted(keys[:2])
    page = await found({"filter": {"processDefinitionId": app.pid()}, "sort": [{"field": "businessId"}]})
    assert sorted(page) == sorted(keys)
    status, item = await call(http, "GET", f"/v2/process-instances/{keys[0]}")
    assert status == 200 and item["businessId"] == "order-1" and item["tags"] == ["vip"]


async def test_a_running_instance_gets_a_business_id_later_when_ids_are_not_unique(
    stub: Stub, http: aiohttp.ClientSession, unique_stub: Stub, unique_http: aiohttp.ClientSession
) -> None:
    app = deploy(stub, "one-task.bpmn")
    status, created = await call(http, "POST", "/v2/process-instances", {"processDefinitionId": app.pid()})
    assert status == 200 and created["businessId"] is None
    key = created["processInstanceKey"]
    path = f"/v2/process-instances/{key}/business-id-assignment"
    assert await call(http, "POST", path, {"businessId": "late-1"}) == (204, None)
    assert await call(http, "POST", path, {"businessId": "late-1"}) == (204, None), "the same id again: no change"
    assert_problem(await call(http, "POST", path, {"businessId": "late-2"}), 409, "'late-1'")
    assert_problem(await call(http, "POST", path, {}), 400, "businessId")
    missing = f"/v2/process-instances/{int(key) + 1_000_000}/business-id-assignment"
    assert_problem(await call(http, "POST", missing, {"businessId": "late-1"}), 404)

    async def found() -> list[str]:
        status, page = await call(http, "POST", "/v2/process-instances/search", {"filter": {"businessId": "late-1"}})
        assert status == 200, page
        return [i["processInstanceKey"] for i in page["items"]]

    for _ in range(200):
        if await found() == [key]:
            break
        await asyncio.sleep(0.1)
    assert await found() == [key]

    # with uniqueness on, ids are given on creation only
    unique_app = deploy(unique_stub, "one-task.bpmn")
    other = await create_when_deployed(unique_http, {"processDefinitionId": unique_app.pid()})
    unique_path = f"/v2/process-instances/{other['processInstanceKey']}/business-id-assignment"
    assert_problem(await call(unique_http, "POST", unique_path, {"businessId": "late-3"}), 409, "businessIdUniqueness")
