"""Message correlation over REST (``POST /v2/messages/correlation``) against a real three-partition ``weir start``:
the message goes at once to what waits for it — on whichever partition the instance lives — and is never buffered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from broker.engine.partitioning import subscription_partition
from broker.protocol.keys import partition_of
from tests.harness import BPMN, WeirProcess, running
from tests.integration.test_rest_api import activate, assert_problem, call, deploy

PARTITIONS = 3
CORRELATE = "/v2/messages/correlation"


@pytest.fixture(scope="module")
def weir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    """Three partitions: a subscription often lives on another partition than its message."""
    with running(
        WeirProcess(tmp_path_factory.mktemp("weir") / "data", extra_args=["--partitions", str(PARTITIONS)])
    ) as w:
        yield w


@pytest.fixture
async def http(weir: WeirProcess) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=weir.rest_url) as session:
        yield session


async def create_when_deployed(http: aiohttp.ClientSession, body: dict) -> dict[str, Any]:
    """Create an instance once the deployment reached the partition the request lands on (distribution is
    asynchronous: until then that partition knows no such process)."""
    for _ in range(200):
        status, answer = await call(http, "POST", "/v2/process-instances", body)
        if status == 200:
            return answer
        assert_problem((status, answer), 404, "Expected to find process definition")
        await asyncio.sleep(0.05)
    raise AssertionError(f"{body} never found its process")


async def correlate_when_waiting(http: aiohttp.ClientSession, message: dict) -> dict[str, Any]:
    """Correlate once the subscription reached the message's partition (opening it, like distributing a deployment,
    crosses partitions asynchronously; until then nothing waits and the answer is 404, which buffers nothing)."""
    for _ in range(200):
        status, answer = await call(http, "POST", CORRELATE, message)
        if status == 200:
            return answer
        assert_problem((status, answer), 404, "but none was found")
        await asyncio.sleep(0.05)
    raise AssertionError(f"no subscription for {message} ever waited")


def _keys_in_pairs() -> list[str]:
    """Correlation keys, two for each message partition in turn (1, 1, 2, 2, 3, 3)."""
    wanted = [i // 2 % PARTITIONS + 1 for i in range(2 * PARTITIONS)]
    keys: list[str] = []
    for n in range(10_000):
        if subscription_partition(f"c-{n}", PARTITIONS) == wanted[len(keys)]:
            keys.append(f"c-{n}")
            if len(keys) == len(wanted):
                return keys
    raise AssertionError("no keys for every partition")


async def test_correlates_to_waiting_catch_events_on_every_partition(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "message-catch.bpmn")
    # two correlation keys per message partition, one after the other: instances created one after the other land on
    # different partitions (or all on the deployment's, while the others wait for it), so some must cross
    keys = _keys_in_pairs()
    created = [
        await create_when_deployed(http, {"processDefinitionId": "message-catch", "variables": {"requestId": key}})
        for key in keys
    ]
    crossing = [
        i
        for i, c in enumerate(created)
        if partition_of(int(c["processInstanceKey"])) != subscription_partition(keys[i], PARTITIONS)
    ]
    assert crossing, "every subscription landed on its instance's partition: the test would not cross partitions"
    for i, instance in enumerate(created):
        message = {"name": "approved", "correlationKey": keys[i], "variables": {"approvedBy": f"u-{i}"}}
        answer = await correlate_when_waiting(http, message)
        assert answer["processInstanceKey"] == instance["processInstanceKey"], (i, answer)
        assert answer["messageKey"].isdigit() and answer["tenantId"] == "<default>"
    jobs = await activate(http, "approved", n=len(created))
    assert len(jobs) == len(created)
    by_instance = {job["processInstanceKey"]: job for job in jobs}
    for i, instance in enumerate(created):
        assert by_instance[instance["processInstanceKey"]]["variables"]["approvedBy"] == f"u-{i}"
    for job in jobs:
        assert await call(http, "POST", f"/v2/jobs/{job['jobKey']}/completion") == (204, None)


async def test_starts_an_instance_at_a_message_start_event(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "start-events" / "message-start.bpmn")
    message = {"name": "order-placed", "correlationKey": "o-1", "variables": {"orderId": "o-1", "total": 12}}
    answer = await correlate_when_waiting(http, message)  # once the deployment reached the message's partition
    [job] = await activate(http, "handle-order")
    assert job["processInstanceKey"] == answer["processInstanceKey"]
    assert job["processDefinitionId"] == "message-start"
    assert job["variables"] == {"orderId": "o-1", "total": 12}
    # the instance started for "o-1" still runs: a second message for the key has nowhere to go
    assert_problem(
        await call(http, "POST", CORRELATE, message), 404, "already active for a message start event", "message-start"
    )
    assert await call(http, "POST", f"/v2/jobs/{job['jobKey']}/completion") == (204, None)


async def test_nothing_waiting_is_not_found_and_buffers_nothing(http: aiohttp.ClientSession) -> None:
    await deploy(http, BPMN / "message-catch.bpmn")
    early = {"name": "approved", "correlationKey": "late-1", "variables": {"which": "early"}}
    assert_problem(
        await call(http, "POST", CORRELATE, early),
        404,
        "Expected to find subscription for message with name 'approved' and correlation key 'late-1', "
        "but none was found.",
        title="NOT_FOUND",
    )
    instance = await create_when_deployed(
        http, {"processDefinitionId": "message-catch", "variables": {"requestId": "late-1"}}
    )
    # had the early message been buffered, the new subscription would have taken it; it takes the later one
    answer = await correlate_when_waiting(http, {**early, "variables": {"which": "later"}})
    assert answer["processInstanceKey"] == instance["processInstanceKey"]
    [job] = await activate(http, "approved")
    assert job["processInstanceKey"] == instance["processInstanceKey"] and job["variables"]["which"] == "later"
    assert await call(http, "POST", f"/v2/jobs/{job['jobKey']}/completion") == (204, None)


async def test_bad_requests_are_problems(http: aiohttp.ClientSession) -> None:
    assert_problem(await call(http, "POST", CORRELATE, {"correlationKey": "x"}), 400, "'name'")
    assert_problem(await call(http, "POST", CORRELATE, {"name": ""}), 400, "message name")
    assert_problem(await call(http, "POST", CORRELATE, {"name": "m", "variables": [1]}), 400, "'variables'")
    assert_problem(await call(http, "POST", CORRELATE, {"name": "m", "tenantId": "other"}), 400, "tenant")
