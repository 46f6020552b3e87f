"""Weir's own gateway messages (Zeebe 8.8 fields that pyzeebe's bundled protocol lacks) next to pyzeebe.

Both define ``gateway_protocol.*``, which one descriptor pool cannot hold twice; Weir's descriptor is read from its
generated module's source into a pool of its own, so a test can use pyzeebe and these messages in one process.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from typing import Any

import grpc
from google.protobuf import descriptor_pool, message_factory

from tests.harness import REPO


@cache
def _pool() -> descriptor_pool.DescriptorPool:
    source = (REPO / "gateway" / "api" / "gateway_pb2.py").read_text()
    found = re.search(r"AddSerializedFile\((b'.*?')\)\n", source, re.DOTALL)
    assert found, "the generated module's serialized descriptor"
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(ast.literal_eval(found.group(1)))
    return pool


def message(name: str) -> Any:
    """The class of ``gateway_protocol.<name>`` as Weir's .proto defines it."""
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"gateway_protocol.{name}"))


def enum_name(message_name: str, enum: str, number: int) -> str:
    descriptor = _pool().FindMessageTypeByName(f"gateway_protocol.{message_name}")
    return descriptor.enum_types_by_name[enum].values_by_number[number].name


def activate_jobs(channel: grpc.Channel, job_type: str, *, wait_ms: int = 5_000) -> list[Any]:
    """ActivateJobs with Weir's messages: the jobs carry kind, listenerEventType and userTask."""
    request_cls, response_cls = message("ActivateJobsRequest"), message("ActivateJobsResponse")
    call = channel.unary_stream(
        "/gateway_protocol.Gateway/ActivateJobs",
        request_serializer=request_cls.SerializeToString,
        response_deserializer=response_cls.FromString,
    )
    request = request_cls(type=job_type, worker="tests", timeout=30_000, maxJobsToActivate=1, requestTimeout=wait_ms)
    return [job for response in call(request, timeout=wait_ms / 1000 + 10) for job in response.jobs]


def complete_job(channel: grpc.Channel, job_key: int, result: Any = None, variables: str = "") -> None:
    """CompleteJob with a JobResult (``message("JobResult")(...)``)."""
    request_cls = message("CompleteJobRequest")
    call = channel.unary_unary(
        "/gateway_protocol.Gateway/CompleteJob",
        request_serializer=request_cls.SerializeToString,
        response_deserializer=message("CompleteJobResponse").FromString,
    )
    request = request_cls(jobKey=job_key, variables=variables)
    if result is not None:
        request.result.CopyFrom(result)
    call(request, timeout=10)
