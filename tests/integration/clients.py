"""Helpers for integration tests that drive Weir through pyzeebe's bundled raw gateway stubs.

Each test deploys its own copy of a fixture under a unique process id and unique job types, so tests sharing a broker
never see each other's jobs. Incident keys are not returned by any RPC: ``open_incidents`` finds them the way an
operator reading an exporter would, from the (stopped) broker's partition log.
"""

import functools
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from pyzeebe.proto import gateway_pb2 as pb
from pyzeebe.proto import gateway_pb2_grpc

from broker.log import FileLog
from broker.protocol.codec import decode_block
from broker.protocol.enums import IncidentIntent, RecordType, ValueType
from broker.protocol.record import Record
from tests.harness import BPMN, WeirProcess

Stub = gateway_pb2_grpc.GatewayStub
REPO_ROOT = Path(__file__).resolve().parents[2]

# -- helpers -------------------------------------------------------------------


class Deployed:
    """A fixture deployed under unique names: ``pid(old)`` and ``type(old)`` give the names actually used."""

    def __init__(self, suffix: str, process_ids: dict[str, str], job_types: dict[str, str], response: Any) -> None:
        self.suffix = suffix
        self._process_ids = process_ids
        self._job_types = job_types
        self.response = response

    def pid(self, original: str | None = None) -> str:
        if original is None:
            (only,) = self._process_ids.values()
            return only
        return self._process_ids[original]

    def type(self, original: str) -> str:
        return self._job_types[original]

    @property
    def definition_key(self) -> int:
        (only,) = [d.process.processDefinitionKey for d in self.response.deployments]
        return only


def unique_copy(fixture: str, suffix: str) -> tuple[bytes, dict[str, str], dict[str, str]]:
    """The fixture's XML with every process id, static called process id and static job type (execution listeners'
    included) suffixed, plus the old → new name maps (a called process deployed from another fixture with the same
    suffix matches)."""
    text = (BPMN / fixture).read_text()
    process_ids: dict[str, str] = {}
    job_types: dict[str, str] = {}

    def rename_process(m: re.Match[str]) -> str:
        process_ids[m.group(2)] = f"{m.group(2)}-{suffix}"
        return f'{m.group(1)}{m.group(2)}-{suffix}"'

    def rename_type(m: re.Match[str]) -> str:
        old = m.group(2)
        if old.startswith("=") or old.startswith("io.camunda"):
            return m.group(0)
        job_types[old] = f"{old}-{suffix}"
        return f'{m.group(1)}{old}-{suffix}"'

    def rename_called(m: re.Match[str]) -> str:
        old = m.group(2)
        return m.group(0) if old.startswith("=") else f'{m.group(1)}{old}-{suffix}"'

    text = re.sub(r'(<bpmn:process id=")([^"]+)"', rename_process, text)
    text = re.sub(r'(<zeebe:calledElement processId=")([^"]+)"', rename_called, text)
    text = re.sub(r'(<zeebe:taskDefinition type=")([^"]+)"', rename_type, text)
    text = re.sub(r'(<zeebe:executionListener eventType="\w+" type=")([^"]+)"', rename_type, text)
    for old, new in process_ids.items():  # the diagram refers to the process by id
        text = text.replace(f'bpmnElement="{old}"', f'bpmnElement="{new}"')
    return text.encode(), process_ids, job_types


def deploy(stub: Stub, fixture: str, suffix: str | None = None) -> Deployed:
    suffix = suffix or uuid.uuid4().hex[:8]
    content, process_ids, job_types = unique_copy(fixture, suffix)
    response = stub.DeployResource(
        pb.DeployResourceRequest(resources=[pb.Resource(name=f"{suffix}-{Path(fixture).name}", content=content)]),
        timeout=10,
    )
    return Deployed(suffix, process_ids, job_types, response)


def create(stub: Stub, process_id: str, variables: dict[str, Any] | None = None, **kw: Any) -> int:
    request = pb.CreateProcessInstanceRequest(
        bpmnProcessId=process_id, version=kw.pop("version", -1), variables=json.dumps(variables or {}), **kw
    )
    return stub.CreateProcessInstance(request, timeout=10).processInstanceKey


def create_with_result(
    stub: Stub,
    process_id: str,
    variables: dict[str, Any] | None = None,
    *,
    fetch: list[str] | None = None,
    request_timeout: int = 10_000,
) -> grpc.Future:
    """Start an instance and return the pending with-result call (resolve it with ``.result(timeout=...)``)."""
    request = pb.CreateProcessInstanceWithResultRequest(
        request=pb.CreateProcessInstanceRequest(
            bpmnProcessId=process_id, version=-1, variables=json.dumps(variables or {})
        ),
        requestTimeout=request_timeout,
        fetchVariables=fetch or [],
    )
    return stub.CreateProcessInstanceWithResult.future(request, timeout=request_timeout / 1000 + 5)


def activate(
    stub: Stub, job_type: str, count: int = 1, *, timeout_ms: int = 30_000, within: float = 5.0, worker: str = "tests"
) -> list[pb.ActivatedJob]:
    """Activate exactly ``count`` jobs of ``job_type`` (long polling until they are there, or fail)."""
    jobs: list[pb.ActivatedJob] = []
    deadline = time.monotonic() + within
    while len(jobs) < count:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            raise AssertionError(f"expected {count} jobs of type {job_type!r} within {within}s, got {len(jobs)}")
        request = pb.ActivateJobsRequest(
            type=job_type,
            worker=worker,
            timeout=timeout_ms,
            maxJobsToActivate=count - len(jobs),
            requestTimeout=left_ms,
        )
        for response in stub.ActivateJobs(request, timeout=left_ms / 1000 + 5):
            jobs.extend(response.jobs)
    assert len(jobs) == count
    return jobs


def activate_now(stub: Stub, job_type: str, max_jobs: int = 10, *, wait_ms: int = -1) -> list[pb.ActivatedJob]:
    """One ActivateJobs call: immediate (``wait_ms=-1``) or long polling for ``wait_ms``."""
    request = pb.ActivateJobsRequest(
        type=job_type, worker="tests", timeout=30_000, maxJobsToActivate=max_jobs, requestTimeout=wait_ms
    )
    return [job for response in stub.ActivateJobs(request, timeout=wait_ms / 1000 + 10) for job in response.jobs]


def complete(stub: Stub, job_key: int, variables: dict[str, Any] | None = None) -> None:
    stub.CompleteJob(pb.CompleteJobRequest(jobKey=job_key, variables=json.dumps(variables or {})), timeout=10)


def is_active(stub: Stub, element_instance_key: int) -> bool:
    """Whether an element (or process) instance still exists: SetVariables with an empty document answers that."""
    try:
        stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=element_instance_key, variables="{}"), timeout=10)
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND:
            return False
        raise
    return True


def rpc_error(call: Any, request: Any, **kw: Any) -> grpc.RpcError:
    """The error a unary (or streaming, fully consumed) call ends with; fails if the call succeeds."""
    with pytest.raises(grpc.RpcError) as info:
        result = call(request, timeout=kw.pop("timeout", 10), **kw)
        if isinstance(result, Iterator):
            list(result)
    return info.value


def variables_of(job: pb.ActivatedJob) -> dict[str, Any]:
    return json.loads(job.variables)


def logged_records(w: WeirProcess, partition: int = 1) -> list[Record]:
    """Every record in a partition's log, read from the files of a stopped broker (what an exporter would see)."""
    assert w.proc is not None and w.proc.poll() is not None, "stop the broker before reading its log"
    records: list[Record] = []
    with FileLog(Path(w.data_dir) / "partitions" / str(partition) / "log") as log:
        if log.last_position == 0:
            return records
        for block in log.read(log.first_position):
            records.extend(decode_block(block.payload)[1])
    return records


def open_incidents(w: WeirProcess) -> list[Record]:
    """INCIDENT CREATED events not followed by a RESOLVED event for the same key, oldest first."""
    created: dict[int, Record] = {}
    for r in logged_records(w):
        if r.value_type != ValueType.INCIDENT or r.record_type != RecordType.EVENT:
            continue
        if r.intent == IncidentIntent.CREATED:
            created[r.key] = r
        elif r.intent == IncidentIntent.RESOLVED:
            created.pop(r.key, None)
    return list(created.values())


@dataclass(frozen=True)
class Incident:
    """An active incident as the REST API reports it (``POST /v2/incidents/search``)."""

    key: int
    error_type: str
    error_message: str
    element_id: str
    job_key: int | None


def incidents_of(w: WeirProcess, process_instance_key: int) -> list[Incident]:
    """The instance's active incidents, oldest first, from the running node's REST API (searches read the history,
    a moment behind the engine: poll with ``eventually``)."""
    query = {"filter": {"processInstanceKey": str(process_instance_key), "state": "ACTIVE"}, "page": {"limit": 100}}
    request = urllib.request.Request(
        f"{w.rest_url}/v2/incidents/search",
        json.dumps(query).encode(),
        {"Content-Type": "application/json", "Accept": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        items = json.load(response)["items"]
    return [
        Incident(
            key=int(item["incidentKey"]),
            error_type=item["errorType"],
            error_message=item["errorMessage"],
            element_id=item["elementId"],
            job_key=int(item["jobKey"]) if item.get("jobKey") else None,
        )
        for item in sorted(items, key=lambda item: int(item["incidentKey"]))
    ]


# -- Zeebe 8.8 fields pyzeebe 4.7 predates ---------------------------------------------------------------------


@functools.cache
def weir_message(name: str) -> Any:
    """A message class of Weir's own gateway.proto (e.g. CompleteJobRequest with its job result), from a private
    descriptor pool: pyzeebe's stubs own ``gateway_protocol`` in the default pool of the test process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "gateway.pb"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                f"--proto_path={REPO_ROOT / 'proto'}",
                f"--descriptor_set_out={out}",
                "gateway.proto",
            ],
            check=True,
            timeout=60,
        )
        (file,) = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    pool = _weir_pool(file.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"gateway_protocol.{name}"))


@functools.cache
def _weir_pool(file: bytes) -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(file))
    return pool


def complete_with_result(channel: grpc.Channel, job_key: int, result: dict[str, Any], **variables: Any) -> None:
    """CompleteJob with a job result (``result`` holds JobResult's fields, activateElements as dicts)."""
    request = weir_message("CompleteJobRequest")(jobKey=job_key, variables=json.dumps(variables))
    activate = result.pop("activateElements", [])
    request.result.SetInParent()
    for field, value in result.items():
        setattr(request.result, field, value)
    for item in activate:
        request.result.activateElements.add(
            elementId=item["elementId"], variables=json.dumps(item.get("variables", {}))
        )
    call = channel.unary_unary(
        "/gateway_protocol.Gateway/CompleteJob",
        request_serializer=lambda message: message.SerializeToString(),
        response_deserializer=lambda data: data,
    )
    call(request, timeout=10)


def job_kind(job: pb.ActivatedJob) -> str:
    """ActivatedJob.kind (field 16, unknown to pyzeebe's message but kept with it), by name."""
    ours = weir_message("ActivatedJob").FromString(job.SerializeToString())
    return ours.JobKind.Name(ours.kind)
