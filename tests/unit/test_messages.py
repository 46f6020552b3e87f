"""Messages on one partition: publish, buffer for the TTL, correlate once per instance, ids, start events."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

from broker.engine.partitioning import correlation_hash, subscription_partition
from broker.protocol.enums import MessageCorrelationIntent, MessageIntent, RecordType, RejectionType, ValueType
from broker.protocol.record import Record
from broker.protocol.values import TENANT
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live


def test_correlation_keys_hash_like_java_strings() -> None:
    # well-known Java values: "hello".hashCode() == 99162322, "Hello World".hashCode() == -862545276
    assert correlation_hash("") == 0
    assert correlation_hash("hello") == 99162322
    assert correlation_hash("Hello World") == -862545276
    # Java's remainder keeps the dividend's sign: abs(-862545276 % 7) + 1
    assert subscription_partition("Hello World", 7) == int(abs(math.fmod(-862545276, 7))) + 1
    assert {subscription_partition(f"k{i}", 4) for i in range(100)} == {1, 2, 3, 4}
    assert subscription_partition("anything", 1) == 1


async def publish(
    d: Driver, name: str, key: str, *, ttl: int = 60_000, message_id: str = "", variables: dict | None = None
) -> Record:
    value = {
        "name": name,
        "correlationKey": key,
        "timeToLive": ttl,
        "messageId": message_id,
        "variables": variables or {},
        "tenantId": "<default>",
    }
    return await d.send(ValueType.MESSAGE, MessageIntent.PUBLISH, value)


async def wait_for_jobs(d: Driver, job_type: str, expected: int) -> list[int]:
    jobs: list[int] = []
    for _ in range(150):
        jobs += await d.activate(job_type)
        if len(jobs) >= expected:
            break
        await asyncio.sleep(0.02)
    return jobs


async def test_a_message_reaches_the_waiting_instance_with_its_variables(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("message-catch.bpmn"))
    accepted(await d.create("message-catch", {"requestId": "r-1"}))
    accepted(await d.create("message-catch", {"requestId": "r-2"}))
    await asyncio.sleep(0.1)
    accepted(await publish(d, "approved", "r-1", variables={"approvedBy": "ann"}))
    jobs = await wait_for_jobs(d, "approved", 1)
    assert len(jobs) == 1
    await asyncio.sleep(0.1)
    assert await d.activate("approved") == [], "only the instance with the matching correlation key continues"
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_a_buffered_message_correlates_within_its_ttl_but_not_after(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("message-catch.bpmn"))
    accepted(await publish(d, "approved", "early", ttl=10_000))
    accepted(await publish(d, "approved", "late", ttl=10_000))
    d.clock.now += 5_000
    accepted(await d.create("message-catch", {"requestId": "early"}))
    assert len(await wait_for_jobs(d, "approved", 1)) == 1
    d.clock.now += 6_000  # "late" expires now
    for _ in range(50):
        await asyncio.sleep(0.02)
        if not d.read(lambda s: s.messages.keys_for(TENANT, "approved", "late")):
            break
    accepted(await d.create("message-catch", {"requestId": "late"}))
    await asyncio.sleep(0.3)
    assert await d.activate("approved") == []
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_a_message_correlates_at_most_once_per_instance(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("message-catch.bpmn"))
    accepted(await publish(d, "approved", "same"))
    for _ in range(2):
        accepted(await d.create("message-catch", {"requestId": "same"}))
    assert len(await wait_for_jobs(d, "approved", 2)) == 2, "one message reaches every instance once"
    await d.close()


async def test_a_duplicate_message_id_is_rejected_while_buffered(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await publish(d, "approved", "k", ttl=1_000, message_id="m-1"))
    dup = await publish(d, "approved", "k", ttl=1_000, message_id="m-1")
    assert dup.record_type == RecordType.COMMAND_REJECTION
    assert dup.rejection_type == RejectionType.ALREADY_EXISTS
    accepted(await publish(d, "approved", "other-key", message_id="m-1"))
    d.clock.now += 2_000
    for _ in range(50):
        await asyncio.sleep(0.02)
        if not d.read(lambda s: s.messages.keys_for(TENANT, "approved", "k")):
            break
    accepted(await publish(d, "approved", "k", ttl=1_000, message_id="m-1"))  # the first one expired
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_message_start_event_runs_one_instance_per_correlation_key(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("start-events/message-start.bpmn"))
    accepted(await publish(d, "order-placed", "o-1", ttl=0, variables={"orderId": "o-1"}))
    accepted(await publish(d, "order-placed", "o-1", ttl=0))  # o-1 still runs: no second instance
    accepted(await publish(d, "order-placed", "o-2", ttl=0))
    await d.settle()
    jobs = await wait_for_jobs(d, "handle-order", 2)
    assert len(jobs) == 2
    accepted(await d.complete(jobs[0]))
    await d.settle()
    accepted(await publish(d, "order-placed", "o-1", ttl=0))
    assert len(await wait_for_jobs(d, "handle-order", 1)) == 1
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_payment_message_wins_over_the_timeout(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("order-payment.bpmn"))
    accepted(await d.create("order-payment", {"orderId": "o-9", "paymentTimeout": "PT30S"}))
    await asyncio.sleep(0.05)
    accepted(await publish(d, "payment", "o-9", variables={"paid": 10}))
    assert len(await wait_for_jobs(d, "ship", 1)) == 1
    d.clock.now += 60_000
    await asyncio.sleep(0.1)
    assert await d.activate("cancel-order") == []
    assert d.read(lambda s: list(s.iter_all("timers"))) == []
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def correlate(d: Driver, name: str, key: str, variables: dict | None = None) -> Record:
    value = {"name": name, "correlationKey": key, "variables": variables or {}, "tenantId": "<default>"}
    return await d.send(ValueType.MESSAGE_CORRELATION, MessageCorrelationIntent.CORRELATE, value)


async def subscribed(d: Driver, name: str, correlation_key: str) -> None:
    """Wait until the message partition holds the subscription: it is opened by a command sent after the round that
    activated the catch event, which an empty backlog does not yet show."""
    for _ in range(500):
        if d.read(lambda s: list(s.message_subscriptions.for_correlation(TENANT, name, correlation_key))):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no subscription for message '{name}' with correlation key '{correlation_key}'")


async def test_correlate_answers_with_the_instance_that_took_the_message_and_buffers_nothing(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("message-catch.bpmn"))
    nothing = await correlate(d, "approved", "r-1")
    assert nothing.record_type == RecordType.COMMAND_REJECTION and nothing.rejection_type == RejectionType.NOT_FOUND
    assert "'approved' and correlation key 'r-1', but none was found" in nothing.rejection_reason
    created = accepted(await d.create("message-catch", {"requestId": "r-1"}))
    await d.settle()
    await subscribed(d, "approved", "r-1")
    answer = await correlate(d, "approved", "r-1", {"approvedBy": "ann"})
    assert answer.value_type == ValueType.MESSAGE_CORRELATION and answer.intent == MessageCorrelationIntent.CORRELATED
    assert answer.value["processInstanceKey"] == created.value["processInstanceKey"]
    assert len(await wait_for_jobs(d, "approved", 1)) == 1
    await d.settle()
    assert d.read(lambda s: s.messages.keys_for(TENANT, "approved", "r-1")) == [], (
        "a correlated message is not buffered"
    )
    assert d.read(lambda s: s.async_requests.get(answer.key)) is None, "the answered request is forgotten"
    accepted(await d.deploy("start-events/message-start.bpmn"))
    started = await correlate(d, "order-placed", "o-1", {"orderId": "o-1"})
    assert started.intent == MessageCorrelationIntent.CORRELATED and started.value["processInstanceKey"] > 0
    blocked = await correlate(d, "order-placed", "o-1")
    assert blocked.rejection_type == RejectionType.NOT_FOUND and "already active" in blocked.rejection_reason
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_a_correlation_racing_the_instance_away_is_always_answered(tmp_path: Path) -> None:
    """The instance is cancelled while the message is on its way to it: the request learns either that the instance
    took the message or that nothing did (NOT_FOUND) — never nothing."""
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("message-catch.bpmn"))
    outcomes = set()
    for i in range(10):
        created = accepted(await d.create("message-catch", {"requestId": f"race-{i}"}))
        await d.settle()
        answer, _ = await asyncio.gather(
            correlate(d, "approved", f"race-{i}"), d.cancel(created.value["processInstanceKey"])
        )
        if answer.record_type == RecordType.COMMAND_REJECTION:
            assert answer.rejection_type == RejectionType.NOT_FOUND, answer.rejection_reason
            outcomes.add("not found" + (" on the way" if answer.key > 0 else " at once"))
        else:
            assert answer.value["processInstanceKey"] == created.value["processInstanceKey"]
            outcomes.add("correlated")
        await d.settle()
        if answer.key > 0:
            assert d.read(lambda s, key=answer.key: s.async_requests.get(key)) is None
    print(f"outcomes of the race: {sorted(outcomes)}")
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)
