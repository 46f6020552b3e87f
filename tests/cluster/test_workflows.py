"""The single-node workflows, through the gateway of a 3-broker cluster (3 partitions, replication 3).

Instances are created round-robin over the partitions, so each scenario starts several at once and checks that their
keys (partition id in bits 51 and up) land on every partition, and that jobs live on their instance's partition.
"""

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from pyzeebe import Job, ZeebeClient, ZeebeWorker, create_insecure_channel
from pyzeebe.proto import gateway_pb2 as pb
from pyzeebe.proto import gateway_pb2_grpc

from tests.cluster.audit import partition_of
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
)

ALL = {1, 2, 3}


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(Path(tmp_path_factory.mktemp("cluster")) / "cluster")
    try:
        c.up()
        yield c
        c.down()
    finally:
        c.kill_everything()


@pytest.fixture(scope="module")
def stub(shared_cluster: Cluster) -> Iterator[Stub]:
    channel = grpc.insecure_channel(shared_cluster.gateway)
    try:
        yield gateway_pb2_grpc.GatewayStub(channel)
    finally:
        channel.close()


def deploy_everywhere(stub: Stub, fixture: str) -> Deployed:
    """Deploy, then wait until every partition knows the process (deployments are distributed from partition 1).

    Probe instances are cancelled at once, which also removes their jobs before anyone activates them.
    """
    d = deploy(stub, fixture)
    seen: set[int] = set()

    def known_everywhere() -> bool:
        request = pb.CreateProcessInstanceRequest(bpmnProcessId=d.pid(), version=-1, variables="{}")
        try:
            key = stub.CreateProcessInstance(request, timeout=10).processInstanceKey
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                return False
            raise
        stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=key), timeout=10)
        seen.add(partition_of(key))
        return seen == ALL

    eventually(known_everywhere, timeout=20, interval=0.02, what=f"{d.pid()} on every partition")
    return d


def create_on_every_partition(stub: Stub, process_id: str, variables: Callable[[int], dict]) -> list[int]:
    """Create instances until every partition holds one (the round-robin is shared with other requests)."""
    keys: list[int] = []
    while {partition_of(k) for k in keys} != ALL:
        assert len(keys) < 12, f"creations landed on partitions {sorted({partition_of(k) for k in keys})} only"
        keys.append(create(stub, process_id, variables(len(keys))))
    return keys


def wait_finished(stub: Stub, keys: list[int]) -> None:
    for key in keys:
        eventually(lambda k=key: not is_active(stub, k), timeout=10, what=f"instance {key} to complete")


def test_one_task_with_a_pyzeebe_worker_and_create_with_result_on_every_partition(
    shared_cluster: Cluster, stub: Stub
) -> None:
    d = deploy_everywhere(stub, "one-task.bpmn")
    served: list[int] = []

    async def scenario() -> list:
        channel = create_insecure_channel(grpc_address=shared_cluster.gateway)
        client = ZeebeClient(channel)
        worker = ZeebeWorker(channel, name="cluster-worker")

        # pyzeebe finds the Job parameter by its annotation object: no postponed annotations in this module.
        @worker.task(task_type=d.type("test"))
        async def handle(job: Job) -> dict:
            assert partition_of(job.key) == partition_of(job.process_instance_key)
            served.append(job.process_instance_key)
            return {"doubled": job.variables["n"] * 2}

        work = asyncio.create_task(worker.work())
        results: list = []
        try:
            while {partition_of(r.process_instance_key) for r in results} != ALL:
                assert len(results) < 12, "instances did not reach every partition"
                n = len(results)
                results += await asyncio.gather(
                    *(client.run_process_with_result(d.pid(), {"n": n + i}, timeout=20_000) for i in range(3))
                )
            return results
        finally:
            await worker.stop()
            work.cancel()

    results = asyncio.run(scenario())
    assert [r.variables for r in results] == [{"n": n, "doubled": 2 * n} for n in range(len(results))]
    keys = [r.process_instance_key for r in results]
    assert len(set(keys)) == len(keys)
    assert {partition_of(k) for k in keys} == ALL
    assert sorted(served) == sorted(keys), "each instance's job was handled exactly once"


def test_exclusive_gateway_on_every_partition(stub: Stub) -> None:
    d = deploy_everywhere(stub, "exclusive-gateway.bpmn")
    amounts = [150, 50, 100] * 4
    keys = create_on_every_partition(stub, d.pid(), lambda n: {"amount": amounts[n]})
    expected = {k: "approve-large" if a > 100 else "approve-small" for k, a in zip(keys, amounts, strict=False)}
    large = sum(1 for taken in expected.values() if taken == "approve-large")
    jobs = activate(stub, d.type("approve-large"), large) + activate(stub, d.type("approve-small"), len(keys) - large)
    assert activate_now(stub, d.type("approve-large")) == []
    assert activate_now(stub, d.type("approve-small")) == []
    for job in jobs:
        assert partition_of(job.key) == partition_of(job.processInstanceKey)
        assert job.elementId == expected[job.processInstanceKey]
        complete(stub, job.key, {"approvedBy": job.elementId})
    wait_finished(stub, keys)


def test_parallel_fork_and_join_on_every_partition(stub: Stub) -> None:
    d = deploy_everywhere(stub, "parallel-join.bpmn")
    keys = create_on_every_partition(stub, d.pid(), lambda n: {"order": n})
    for branch in ("branch-a", "branch-b"):
        for job in activate(stub, d.type(branch), len(keys)):
            assert partition_of(job.key) == partition_of(job.processInstanceKey)
            complete(stub, job.key, {branch[-1]: True})
    assert activate_now(stub, d.type("summarize"), wait_ms=300) == [], "the join waits for every branch"
    for job in activate(stub, d.type("branch-c"), len(keys)):
        complete(stub, job.key, {"c": True})
    summaries = activate(stub, d.type("summarize"), len(keys))
    assert activate_now(stub, d.type("summarize"), wait_ms=300) == [], "each join fires exactly once"
    assert sorted(job.processInstanceKey for job in summaries) == sorted(keys)
    for job in summaries:
        order = keys.index(job.processInstanceKey)
        assert json.loads(job.variables) == {"order": order, "a": True, "b": True, "c": True}
        complete(stub, job.key)
    wait_finished(stub, keys)
