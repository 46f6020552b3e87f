"""Waiting states across a real 3-broker cluster (3 partitions, replication 3): messages and timers under faults.

A message lives on the partition its correlation key hashes to, its subscriber on its instance's partition; the two
talk through commands resent from an outbox until answered. Killing the message partition's leader right after a
publish must still correlate the message exactly once. Timers are fired by the leader's checker; one due during a
failover fires once, on the new leader, and never before its due date. The offline logs, read after a graceful
``weir cluster down``, are the judge: counts are taken on the prefix a majority of the replicas holds.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import grpc
import pytest
from pyzeebe.proto import gateway_pb2 as pb
from pyzeebe.proto import gateway_pb2_grpc

from broker.engine.partitioning import subscription_partition
from broker.protocol.enums import (
    MessageIntent,
    MessageSubscriptionIntent,
    ProcessInstanceIntent,
    ProcessMessageSubscriptionIntent,
    RecordType,
    TimerIntent,
    ValueType,
)
from broker.protocol.record import Record
from tests.cluster.audit import ReplicaLogs, committed, divergence, partition_of, read_replica_logs
from tests.cluster.harness import Cluster
from tests.harness import eventually
from tests.integration.clients import (
    Deployed,
    Stub,
    activate,
    activate_now,
    complete,
    create,
    deploy,
    is_active,
    variables_of,
)

ALL = {1, 2, 3}
MS = MessageSubscriptionIntent
PMS = ProcessMessageSubscriptionIntent
CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 300),
]


@pytest.fixture
def stub(cluster: Cluster) -> Iterator[Stub]:
    channel = grpc.insecure_channel(cluster.gateway, options=CHANNEL_OPTIONS)
    try:
        yield gateway_pb2_grpc.GatewayStub(channel)
    finally:
        channel.close()


# -- helpers --------------------------------------------------------------------------------------------------


def deploy_everywhere(stub: Stub, fixture: str, probe_variables: dict) -> Deployed:
    """Deploy, then wait until every partition creates instances of it (deployments travel from partition 1).

    Probe instances are cancelled at once: they close their subscriptions before anything reaches them.
    """
    d = deploy(stub, fixture)
    seen: set[int] = set()

    def known_everywhere() -> bool:
        request = pb.CreateProcessInstanceRequest(bpmnProcessId=d.pid(), version=-1, variables=_json(probe_variables))
        try:
            key = stub.CreateProcessInstance(request, timeout=10).processInstanceKey
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAVAILABLE):
                return False
            raise
        stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=key), timeout=10)
        seen.add(partition_of(key))
        return seen == ALL

    eventually(known_everywhere, timeout=30, interval=0.02, what=f"{d.pid()} on every partition")
    return d


def _json(document: dict) -> str:
    return json.dumps(document)


def publish(stub: Stub, name: str, correlation_key: str, variables: dict, ttl: int = 60_000) -> int:
    """Publish once (an acknowledged publish is never repeated here: the test counts what one publish causes)."""
    request = pb.PublishMessageRequest(
        name=name, correlationKey=correlation_key, timeToLive=ttl, variables=_json(variables)
    )
    return stub.PublishMessage(request, timeout=15).key


def with_retries(call: object, *args: object, attempts: int = 60, **kw: object) -> object:
    """A read or an idempotent call through a failover: UNAVAILABLE and deadlines are retried for a while."""
    for attempt in range(attempts):
        try:
            return call(*args, **kw)  # type: ignore[operator]
        except grpc.RpcError as e:
            retryable = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNKNOWN)
            if e.code() not in retryable or attempt == attempts - 1:
                raise
            time.sleep(0.25)
    raise AssertionError("unreachable")


def wait_finished(stub: Stub, keys: list[int], timeout: float = 20.0) -> None:
    for key in keys:
        eventually(
            lambda k=key: not with_retries(is_active, stub, k), timeout=timeout, what=f"instance {key} to complete"
        )


def down_and_read(cluster: Cluster) -> dict[int, list[Record]]:
    """Graceful down, then the committed prefix of every partition (replicas must agree record by record)."""
    cluster.down()
    logs: ReplicaLogs = read_replica_logs(cluster)
    problems = divergence(logs)
    assert not problems, "replica logs diverge:\n" + "\n".join(problems)
    return committed(logs, cluster.replication)


def events_of(records: list[Record], value_type: ValueType, intent: int) -> list[Record]:
    return [
        r for r in records if r.record_type == RecordType.EVENT and r.value_type == value_type and r.intent == intent
    ]


# -- messages from one partition reach instances on the others ----------------------------------------------


def test_messages_correlate_to_instances_on_other_partitions(cluster: Cluster, stub: Stub) -> None:
    run = uuid.uuid4().hex[:6]
    d = deploy_everywhere(stub, "message-catch.bpmn", {"requestId": f"probe-{run}"})
    requests: dict[int, str] = {}

    def crossing_expected() -> bool:  # correlation keys hash at random: make sure at least one crosses partitions
        return any(subscription_partition(r, cluster.partitions) != partition_of(k) for k, r in requests.items())

    while {partition_of(k) for k in requests} != ALL or len(requests) < 6 or not crossing_expected():
        assert len(requests) < 30, f"instances landed on partitions {sorted({partition_of(k) for k in requests})}"
        # Random ids, not a counter: a key's hash (Java's) steps by one with its last digit, in lockstep with the
        # gateway's round robin, so counted ids can land every message on its own instance's partition.
        request_id = f"req-{uuid.uuid4().hex[:10]}"
        requests[create(stub, d.pid(), {"requestId": request_id})] = request_id

    message_partitions: dict[int, int] = {}
    for key, request_id in requests.items():
        message_key = publish(stub, "approved", request_id, {"approvedFor": request_id})
        assert message_key > 0
        message_partitions[key] = partition_of(message_key)
        assert message_partitions[key] == subscription_partition(request_id, cluster.partitions), (
            f"message for {request_id} buffered on partition {message_partitions[key]}, not where its key hashes to"
        )

    jobs = activate(stub, d.type("approved"), len(requests), within=15)
    for job in jobs:
        assert partition_of(job.key) == partition_of(job.processInstanceKey)
        assert variables_of(job)["approvedFor"] == requests[job.processInstanceKey], "a message reached another key"
        complete(stub, job.key)
    assert sorted(j.processInstanceKey for j in jobs) == sorted(requests)
    assert activate_now(stub, d.type("approved"), wait_ms=300) == [], "each message correlated once"
    wait_finished(stub, list(requests))

    crossing = [k for k in requests if message_partitions[k] != partition_of(k)]
    print(
        f"{len(requests)} instances on partitions {sorted({partition_of(k) for k in requests})}; "
        f"{len(crossing)} correlated from a message on another partition"
    )
    assert crossing, "every message happened to live on its instance's partition: nothing crossed partitions"


# -- kill -9 of the message partition's leader right after the publish -----------------------------------------


def _instance_off_partition(stub: Stub, d: Deployed, run: str) -> tuple[int, str, int]:
    """An instance whose message will live on another partition: (instance key, correlation key, partition)."""
    for _ in range(30):
        correlation_key = f"pay-{run}-{uuid.uuid4().hex[:8]}"  # random: a counter can step in lockstep with routing
        message_partition = subscription_partition(correlation_key, 3)
        key = create(stub, d.pid(), {"requestId": correlation_key})
        if partition_of(key) != message_partition:
            return key, correlation_key, message_partition
        stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=key), timeout=10)
    raise AssertionError("no instance landed off its message's partition")


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_message_partition_leader_killed_after_publish_correlates_once(cluster: Cluster, stub: Stub) -> None:
    run = uuid.uuid4().hex[:6]
    d = deploy_everywhere(stub, "message-catch.bpmn", {"requestId": f"probe-{run}"})
    instance, correlation_key, message_partition = _instance_off_partition(stub, d, run)
    time.sleep(1.0)  # the subscription reaches the message partition: the publish correlates in its own round
    leader = cluster.wait_leader(message_partition)

    message_key = publish(stub, "approved", correlation_key, {"approvedFor": correlation_key})
    cluster.kill(leader)
    assert partition_of(message_key) == message_partition
    successor = cluster.wait_leader(message_partition, exclude={leader})
    cluster.restart_broker(leader)

    (job,) = with_retries(activate, stub, d.type("approved"), 1, within=20)  # type: ignore[misc]
    assert job.processInstanceKey == instance
    assert variables_of(job)["approvedFor"] == correlation_key
    with_retries(complete, stub, job.key)
    wait_finished(stub, [instance])
    time.sleep(1.5)  # a duplicate would need an outbox resend (every second) to show up
    assert activate_now(stub, d.type("approved"), wait_ms=300) == [], "the message was correlated twice"
    print(f"broker {leader} led partition {message_partition} when killed; broker {successor} took over")

    log = down_and_read(cluster)
    instance_log, message_log = log[partition_of(instance)], log[message_partition]

    def mine(records: list[Record]) -> list[Record]:
        return [
            r
            for r in records
            if r.value.get("messageKey") == message_key and r.value.get("processInstanceKey") == instance
        ]

    assert len(events_of(message_log, ValueType.MESSAGE, MessageIntent.PUBLISHED)) >= 1
    assert [r.key for r in events_of(message_log, ValueType.MESSAGE, MessageIntent.PUBLISHED)].count(message_key) == 1
    assert len(mine(events_of(message_log, ValueType.MESSAGE_SUBSCRIPTION, MS.CORRELATING))) == 1
    assert len(mine(events_of(message_log, ValueType.MESSAGE_SUBSCRIPTION, MS.CORRELATED))) == 1
    assert mine(events_of(message_log, ValueType.MESSAGE_SUBSCRIPTION, MS.REJECTED)) == [], "correlation forgotten"
    (correlated,) = mine(events_of(instance_log, ValueType.PROCESS_MESSAGE_SUBSCRIPTION, PMS.CORRELATED))
    catch_completions = [
        r
        for r in events_of(instance_log, ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.ELEMENT_COMPLETED)
        if r.key == correlated.value["elementInstanceKey"]
    ]
    assert len(catch_completions) == 1, f"the catch event completed {len(catch_completions)} times"
    assert catch_completions[0].value["elementId"] == "wait-message"
    process_completions = [
        r
        for r in events_of(instance_log, ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.ELEMENT_COMPLETED)
        if r.key == instance
    ]
    assert len(process_completions) == 1


# -- timers due during a failover --------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_timers_due_during_a_failover_fire_once_and_never_early(cluster: Cluster, stub: Stub) -> None:
    delay_s = 3.0
    d = deploy_everywhere(stub, "timer-catch.bpmn", {"delay": "PT1H"})
    created_at: dict[int, float] = {}
    while {partition_of(k) for k in created_at} != ALL or len(created_at) < 6:
        assert len(created_at) < 15, "instances did not reach every partition"
        created_at[create(stub, d.pid(), {"delay": f"PT{delay_s:g}S"})] = time.monotonic()
    partition = partition_of(next(iter(created_at)))
    leader = cluster.wait_leader(partition)
    first = min(created_at.values())
    time.sleep(max(0.0, first + delay_s - 0.5 - time.monotonic()))  # half a second before the first is due
    cluster.kill(leader)
    killed_at = time.monotonic()
    successor = cluster.wait_leader(partition, exclude={leader})
    elected = time.monotonic() - killed_at
    cluster.restart_broker(leader)

    jobs = with_retries(activate, stub, d.type("after-wait"), len(created_at), within=20)
    assert sorted(j.processInstanceKey for j in jobs) == sorted(created_at)  # type: ignore[union-attr]
    for job in jobs:  # type: ignore[union-attr]
        with_retries(complete, stub, job.key)
    time.sleep(1.0)
    assert activate_now(stub, d.type("after-wait"), wait_ms=300) == [], "a timer fired twice"
    print(
        f"broker {leader} led partition {partition}, killed 0.5s before the first due date; "
        f"broker {successor} led after {elected:.2f}s"
    )

    log = down_and_read(cluster)
    late: list[int] = []
    for key in created_at:
        records = log[partition_of(key)]
        (timer,) = [
            r for r in events_of(records, ValueType.TIMER, TimerIntent.CREATED) if r.value["processInstanceKey"] == key
        ]
        triggered = [r for r in events_of(records, ValueType.TIMER, TimerIntent.TRIGGERED) if r.key == timer.key]
        assert len(triggered) == 1, f"timer {timer.key} of instance {key} triggered {len(triggered)} times"
        due = timer.value["dueDate"]
        assert triggered[0].timestamp >= due, f"timer {timer.key} fired {due - triggered[0].timestamp} ms early"
        late.append(triggered[0].timestamp - due)
    on_failed = [ms for key, ms in zip(created_at, late, strict=True) if partition_of(key) == partition]
    print(f"trigger lag after the due date: max {max(late)} ms overall, {max(on_failed)} ms on partition {partition}")
