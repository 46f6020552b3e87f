"""DeleteResource of process definitions against a real ``weir start`` with three partitions: refused while
instances run, the deletion reaching every partition (and waiting on one where instances still run), the previous
version the latest again — created by id, its timer and message start events listening again — and creating by the
deleted key NOT_FOUND everywhere. The last test drives it with pyzeebe."""

import asyncio
import itertools
import json
import urllib.error
import urllib.request
import uuid

import grpc
import pytest
from pyzeebe import ZeebeClient, create_insecure_channel
from pyzeebe.proto import gateway_pb2 as pb

from broker.engine.partitioning import subscription_partition
from broker.protocol.keys import partition_of
from tests.harness import WeirProcess, eventually, running
from tests.integration.clients import Stub, activate, activate_now, complete, rpc_error

PARTITIONS = 3


@pytest.fixture(scope="module")
def weir(tmp_path_factory: pytest.TempPathFactory):  # definitions are distributed: deletions must reach all three
    with running(
        WeirProcess(tmp_path_factory.mktemp("weir") / "data", extra_args=["--partitions", str(PARTITIONS)])
    ) as w:
        yield w


def _model(process_id: str, job_type: str, start: str = "") -> bytes:
    """A process with a none start event (unless ``start`` replaces it) and one job of ``job_type``."""
    start = start or '<bpmn:startEvent id="start" />'
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="x">
  <bpmn:process id="{process_id}" isExecutable="true">
    {start}
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="work" />
    <bpmn:serviceTask id="work">
      <bpmn:extensionElements><zeebe:taskDefinition type="{job_type}" /></bpmn:extensionElements>
    </bpmn:serviceTask>
  </bpmn:process>
  <bpmn:message id="m" name="start-{process_id}" />
</bpmn:definitions>""".encode()


def _deploy(stub: Stub, process_id: str, content: bytes) -> pb.ProcessMetadata:
    request = pb.DeployResourceRequest(resources=[pb.Resource(name=f"{process_id}.bpmn", content=content)])
    (deployment,) = stub.DeployResource(request, timeout=10).deployments
    return deployment.process


def _create(stub: Stub, **kw: object) -> pb.CreateProcessInstanceResponse:
    return stub.CreateProcessInstance(pb.CreateProcessInstanceRequest(variables="{}", **kw), timeout=10)


def _on_every_partition(check: object) -> bool:
    """Creations go round-robin over the partitions: ``check`` holds for as many calls in a row as there are."""
    return all(check() for _ in range(PARTITIONS))  # type: ignore[operator]


def _created_version(stub: Stub, process_id: str) -> int | None:
    try:
        created = _create(stub, bpmnProcessId=process_id)
    except grpc.RpcError:
        return None
    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=created.processInstanceKey))
    return created.version


def _probe_business_id(partition: int) -> str:
    """A business id that hashes to ``partition``."""
    return next(
        f"probe-{n}" for n in itertools.count() if subscription_partition(f"probe-{n}", PARTITIONS) == partition
    )


def _there(weir: WeirProcess, stub: Stub, definition_key: int, partition: int) -> bool:
    """Whether ``partition`` holds the definition. A creation with a business id is answered by the partition the id
    hashes to alone (the gateway sends a creation another partition refused as NOT_FOUND to the deployment partition
    only when it has none); an instance created is cancelled. A process without a none start event is there too when
    the creation is refused for that (not NOT_FOUND)."""
    body = {"processDefinitionKey": str(definition_key), "businessId": _probe_business_id(partition)}
    request = urllib.request.Request(
        f"{weir.rest_url}/v2/process-instances",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            created = json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code != 404
    key = int(created["processInstanceKey"])
    stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=key), timeout=10)
    return True


def _everywhere(weir: WeirProcess, stub: Stub, definition_key: int) -> bool:
    return all(_there(weir, stub, definition_key, p) for p in range(1, PARTITIONS + 1))


def _gone_everywhere(weir: WeirProcess, stub: Stub, definition_key: int) -> bool:
    return not any(_there(weir, stub, definition_key, p) for p in range(1, PARTITIONS + 1))


def _one_on_each_partition(stub: Stub, definition_key: int) -> list[int] | None:
    """Instances of the definition, one on each partition; None (and the instances cancelled) while the gateway
    still answers a creation from the deployment partition because the definition has not reached every partition."""
    keys = [_create(stub, processDefinitionKey=definition_key).processInstanceKey for _ in range(PARTITIONS)]
    if {partition_of(k) for k in keys} == set(range(1, PARTITIONS + 1)):
        return keys
    for key in keys:
        stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=key), timeout=10)
    return None


def test_deleting_a_version_with_running_instances_waits_on_the_partitions_that_run_them(
    weir: WeirProcess, stub: Stub
) -> None:
    process_id = f"deleted-{uuid.uuid4().hex[:8]}"
    v1 = _deploy(stub, process_id, _model(process_id, f"work-{process_id}"))
    v2 = _deploy(stub, process_id, _model(process_id, f"work2-{process_id}"))
    assert (v1.version, v2.version) == (1, 2)
    instances = eventually(lambda: _one_on_each_partition(stub, v2.processDefinitionKey), what="v2 everywhere")

    # partition 1 (which deployed it) runs an instance: refused, as in Zeebe 8.8
    error = rpc_error(stub.DeleteResource, pb.DeleteResourceRequest(resourceKey=v2.processDefinitionKey))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    expected = f"Expected to delete resource with key `{v2.processDefinitionKey}` but there are still running instances"
    assert expected in (error.details() or "")

    # only partition 3 still runs one: the deletion is taken, and reaches partition 3 once its instance ended
    waiting = next(k for k in instances if partition_of(k) == 3)
    for key in instances:
        if key != waiting:
            stub.CancelProcessInstance(pb.CancelProcessInstanceRequest(processInstanceKey=key), timeout=10)
    stub.DeleteResource(pb.DeleteResourceRequest(resourceKey=v2.processDefinitionKey), timeout=10)
    eventually(lambda: _created_version(stub, process_id) == 1, what="version 1 latest again somewhere")
    (job,) = activate(stub, f"work2-{process_id}")
    assert job.processInstanceKey == waiting  # the instance still runs on its version
    complete(stub, job.key)
    eventually(lambda: _gone_everywhere(weir, stub, v2.processDefinitionKey), what="v2 gone everywhere")
    eventually(lambda: _on_every_partition(lambda: _created_version(stub, process_id) == 1), what="v1 everywhere")
    again = rpc_error(stub.DeleteResource, pb.DeleteResourceRequest(resourceKey=v2.processDefinitionKey))
    assert again.code() == grpc.StatusCode.NOT_FOUND
    # the deleted version's number is not given again
    v3 = _deploy(stub, process_id, _model(process_id, f"work3-{process_id}"))
    assert v3.version == 3


def test_unknown_resource_key_is_not_found(stub: Stub) -> None:
    error = rpc_error(stub.DeleteResource, pb.DeleteResourceRequest(resourceKey=(1 << 51) + 12345))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert "no resource found with key" in (error.details() or "")


def test_the_previous_versions_message_start_event_listens_again(weir: WeirProcess, stub: Stub) -> None:
    process_id = f"msg-{uuid.uuid4().hex[:8]}"
    start = '<bpmn:startEvent id="start"><bpmn:messageEventDefinition messageRef="m" /></bpmn:startEvent>'
    v1 = _deploy(stub, process_id, _model(process_id, f"v1-{process_id}", start))
    v2 = _deploy(stub, process_id, _model(process_id, f"v2-{process_id}", start))
    assert v2.version == 2
    eventually(lambda: _everywhere(weir, stub, v2.processDefinitionKey), what="v2 everywhere")
    stub.DeleteResource(pb.DeleteResourceRequest(resourceKey=v2.processDefinitionKey), timeout=10)
    eventually(lambda: _gone_everywhere(weir, stub, v2.processDefinitionKey), what="v2 gone everywhere")
    for n in range(PARTITIONS):  # correlation keys spread over the partitions
        message = pb.PublishMessageRequest(name=f"start-{process_id}", correlationKey=f"order-{n}", timeToLive=0)
        stub.PublishMessage(message, timeout=10)
    jobs = activate(stub, f"v1-{process_id}", PARTITIONS)
    assert {job.processDefinitionKey for job in jobs} == {v1.processDefinitionKey}
    assert activate_now(stub, f"v2-{process_id}") == []


def test_the_previous_versions_timer_start_event_is_scheduled_again(stub: Stub) -> None:
    process_id = f"timer-{uuid.uuid4().hex[:8]}"
    once = (
        '<bpmn:startEvent id="start"><bpmn:timerEventDefinition><bpmn:timeCycle>R1/PT2S</bpmn:timeCycle>'
        "</bpmn:timerEventDefinition></bpmn:startEvent>"
    )
    never = once.replace("R1/PT2S", "R/PT1H")
    v1 = _deploy(stub, process_id, _model(process_id, f"v1-{process_id}", once))
    v2 = _deploy(stub, process_id, _model(process_id, f"v2-{process_id}", never))  # v1's timer is cancelled
    before = {job.processInstanceKey for job in activate_now(stub, f"v1-{process_id}")}
    stub.DeleteResource(pb.DeleteResourceRequest(resourceKey=v2.processDefinitionKey), timeout=10)
    (job,) = activate(stub, f"v1-{process_id}", within=15)  # v1's timer, scheduled again at the deletion
    assert job.processDefinitionKey == v1.processDefinitionKey and job.processInstanceKey not in before


def test_pyzeebe_creates_the_previous_version_after_a_deletion(weir: WeirProcess, stub: Stub) -> None:
    process_id = f"py-{uuid.uuid4().hex[:8]}"
    paths = []
    for version in (1, 2):
        path = weir.data_dir.parent / f"{process_id}-v{version}.bpmn"
        path.write_bytes(_model(process_id, f"py{version}-{process_id}"))
        paths.append(path)

    async def deploy(path: object) -> int:
        client = ZeebeClient(create_insecure_channel(grpc_address=weir.address))
        deployed = await client.deploy_resource(str(path))
        (process,) = deployed.deployments
        return process.process_definition_key  # type: ignore[union-attr]

    async def versions_created() -> set[int]:
        client = ZeebeClient(create_insecure_channel(grpc_address=weir.address))
        created = [await client.run_process(process_id) for _ in range(PARTITIONS)]
        for c in created:
            await client.cancel_process_instance(c.process_instance_key)
        return {c.version for c in created}

    asyncio.run(deploy(paths[0]))
    v2 = asyncio.run(deploy(paths[1]))
    eventually(lambda: _everywhere(weir, stub, v2), what="v2 everywhere")
    stub.DeleteResource(pb.DeleteResourceRequest(resourceKey=v2), timeout=10)
    eventually(lambda: _gone_everywhere(weir, stub, v2), what="v2 gone everywhere")
    assert asyncio.run(versions_created()) == {1}
