"""The gateway protocol: Weir's .proto must stay wire-compatible with what Zeebe clients speak.

The reference is the descriptor that pyzeebe 4.7.0 bundles. Weir's stubs and pyzeebe's both define
``gateway_protocol.*`` and cannot share one process's default descriptor pool, so neither is imported
here: ours is compiled with protoc into a descriptor set, pyzeebe's is serialised in a child process, and
both are compared as plain ``FileDescriptorProto`` messages.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from google.protobuf import descriptor_pb2

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = REPO_ROOT / "proto"
PACKAGE = "gateway_protocol"

FieldProto = descriptor_pb2.FieldDescriptorProto

# Entries (see ``flatten``) that Weir's .proto may have beyond pyzeebe's. Each must be a documented,
# deliberate extension that pyzeebe 4.7.0 predates, numbered as in Zeebe 8.8's gateway.proto: the job kind, listener
# event type and user task of an activated job (ActivatedJob.kind, .listenerEventType, .userTask), and a job
# completion's result (CompleteJobRequest.result: a task listener's denial or corrections, an ad-hoc sub-process's
# choice of elements).
_JOB_RESULT_FIELDS = {
    "JobResult": (
        "denied",
        "corrections",
        "deniedReason",
        "type",
        "activateElements",
        "isCompletionConditionFulfilled",
        "isCancelRemainingInstances",
    ),
    "JobResultCorrections": ("assignee", "dueDate", "followUpDate", "candidateUsers", "candidateGroups", "priority"),
    "JobResultActivateElement": ("elementId", "variables"),
    "StringList": ("values",),
}
_USER_TASK_PROPERTIES = (
    "action",
    "assignee",
    "candidateGroups",
    "candidateUsers",
    "changedAttributes",
    "dueDate",
    "followUpDate",
    "formKey",
    "priority",
    "userTaskKey",
)
_LISTENER_EVENT_TYPES = ("ASSIGNING", "CANCELING", "COMPLETING", "CREATING", "END", "START", "UNSPECIFIED", "UPDATING")
# Camunda 8.9's fields and their numbers.
_BUSINESS_ID_AND_TAGS: dict[str, int] = {
    "ActivatedJob.tags": 18,
    "CreateProcessInstanceRequest.tags": 9,
    "CreateProcessInstanceRequest.businessId": 10,
    "CreateProcessInstanceResponse.tags": 6,
    "CreateProcessInstanceResponse.businessId": 7,
    "CreateProcessInstanceWithResultResponse.tags": 7,
    "CreateProcessInstanceWithResultResponse.businessId": 8,
}
DOCUMENTED_ADDITIONS: frozenset[str] = frozenset(
    {
        "field .gateway_protocol.ActivatedJob.kind",
        "enum .gateway_protocol.ActivatedJob.JobKind",
        *(
            f"enum_value .gateway_protocol.ActivatedJob.JobKind.{name}"
            for name in ("BPMN_ELEMENT", "EXECUTION_LISTENER", "TASK_LISTENER", "AD_HOC_SUB_PROCESS")
        ),
        "field .gateway_protocol.ActivatedJob.listenerEventType",
        "enum .gateway_protocol.ActivatedJob.ListenerEventType",
        *(f"enum_value .gateway_protocol.ActivatedJob.ListenerEventType.{name}" for name in _LISTENER_EVENT_TYPES),
        "field .gateway_protocol.ActivatedJob.userTask",
        "message .gateway_protocol.UserTaskProperties",
        *(f"field .gateway_protocol.UserTaskProperties.{field}" for field in _USER_TASK_PROPERTIES),
        "field .gateway_protocol.CompleteJobRequest.result",
        # Camunda 8.9's business ids and tags
        *(f"field .gateway_protocol.{name}" for name in _BUSINESS_ID_AND_TAGS),
        *(
            f"oneof .gateway_protocol.{name.replace('.businessId', '._businessId')}"
            for name in _BUSINESS_ID_AND_TAGS
            if name.endswith(".businessId")
        ),
        # the synthetic oneofs of proto3 optional fields
        "oneof .gateway_protocol.ActivatedJob._userTask",
        "oneof .gateway_protocol.CompleteJobRequest._result",
        *(f"message .gateway_protocol.{message}" for message in _JOB_RESULT_FIELDS),
        *(
            f"field .gateway_protocol.{message}.{field}"
            for message, fields in _JOB_RESULT_FIELDS.items()
            for field in fields
        ),
    }
)
# Zeebe's numbers for the additions: a renumbered one would not be understood by Zeebe's clients.
ADDITION_NUMBERS = {
    "ActivatedJob.userTask": 15,
    "ActivatedJob.kind": 16,
    "ActivatedJob.listenerEventType": 17,
    "CompleteJobRequest.result": 3,
    **_BUSINESS_ID_AND_TAGS,
    **{
        f"{message}.{field}": number
        for message, fields in _JOB_RESULT_FIELDS.items()
        for number, field in enumerate(fields, start=1)
    },
}

# Facts from the gateway API fact sheet, checked independently of the reference descriptor.
EXPECTED_RPCS = (
    "ActivateJobs",
    "StreamActivatedJobs",
    "CancelProcessInstance",
    "CompleteJob",
    "CreateProcessInstance",
    "CreateProcessInstanceWithResult",
    "EvaluateDecision",
    "DeployProcess",
    "DeployResource",
    "FailJob",
    "ThrowError",
    "PublishMessage",
    "ResolveIncident",
    "SetVariables",
    "Topology",
    "UpdateJobRetries",
    "ModifyProcessInstance",
    "MigrateProcessInstance",
    "UpdateJobTimeout",
    "DeleteResource",
    "BroadcastSignal",
)
SERVER_STREAMING_RPCS = frozenset({"ActivateJobs", "StreamActivatedJobs"})
OPERATION_REFERENCE_FIELDS = {
    "CancelProcessInstanceRequest": 2,
    "CreateProcessInstanceRequest": 7,
    "ResolveIncidentRequest": 2,
    "UpdateJobRetriesRequest": 3,
    "UpdateJobTimeoutRequest": 3,
    "SetVariablesRequest": 4,
    "ModifyProcessInstanceRequest": 4,
    "MigrateProcessInstanceRequest": 3,
    "DeleteResourceRequest": 2,
}


# --------------------------------------------------------------------------------------------------
# Loading the two descriptors without touching the default pool
# --------------------------------------------------------------------------------------------------


def compile_ours(tmp_dir: Path) -> descriptor_pb2.FileDescriptorProto:
    """Compile proto/gateway.proto with protoc (in a child process) into a descriptor set."""
    descriptor_set = tmp_dir / "gateway.pb"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"--proto_path={PROTO_DIR}",
            f"--descriptor_set_out={descriptor_set}",
            "gateway.proto",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    file_set = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set.read_bytes())
    assert len(file_set.file) == 1
    return file_set.file[0]


def load_pyzeebe_reference() -> descriptor_pb2.FileDescriptorProto:
    """pyzeebe's bundled descriptor, serialised by a child process that imports it."""
    script = (
        "import base64, sys\n"
        "from pyzeebe.proto import gateway_pb2\n"
        "sys.stdout.write(base64.b64encode(gateway_pb2.DESCRIPTOR.serialized_pb).decode())\n"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert completed.returncode == 0, completed.stderr
    return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(completed.stdout))


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> descriptor_pb2.FileDescriptorProto:
    return compile_ours(tmp_path_factory.mktemp("proto"))


@pytest.fixture(scope="module")
def reference() -> descriptor_pb2.FileDescriptorProto:
    return load_pyzeebe_reference()


# --------------------------------------------------------------------------------------------------
# A flat, comparable view of a descriptor
# --------------------------------------------------------------------------------------------------


def _field_entry(field: descriptor_pb2.FieldDescriptorProto, message: descriptor_pb2.DescriptorProto) -> dict:
    oneof = message.oneof_decl[field.oneof_index].name if field.HasField("oneof_index") else None
    return {
        "number": field.number,
        "type": FieldProto.Type.Name(field.type),
        "label": FieldProto.Label.Name(field.label),
        "type_name": field.type_name,
        "proto3_optional": field.proto3_optional,
        "oneof": oneof,
        "default_value": field.default_value,
        "deprecated": field.options.deprecated,
    }


def _flatten_enum(enum: descriptor_pb2.EnumDescriptorProto, scope: str, out: dict[str, dict]) -> None:
    path = f"{scope}.{enum.name}"
    out[f"enum {path}"] = {"values": [value.name for value in enum.value]}
    for value in enum.value:
        out[f"enum_value {path}.{value.name}"] = {"number": value.number}


def _flatten_message(message: descriptor_pb2.DescriptorProto, scope: str, out: dict[str, dict]) -> None:
    path = f"{scope}.{message.name}"
    out[f"message {path}"] = {
        "fields": [field.name for field in message.field],
        "oneofs": [oneof.name for oneof in message.oneof_decl],
        "nested": [nested.name for nested in message.nested_type],
        "enums": [enum.name for enum in message.enum_type],
        "deprecated": message.options.deprecated,
    }
    for field in message.field:
        out[f"field {path}.{field.name}"] = _field_entry(field, message)
    for nested in message.nested_type:
        _flatten_message(nested, path, out)
    for enum in message.enum_type:
        _flatten_enum(enum, path, out)


def flatten(file: descriptor_pb2.FileDescriptorProto) -> dict[str, dict]:
    """Every structural fact of the file, keyed by a readable path such as
    ``field .gateway_protocol.Partition.role`` or ``method gateway_protocol.Gateway.ActivateJobs``."""
    out: dict[str, dict] = {
        f"file .{file.package}": {
            "package": file.package,
            "syntax": file.syntax,
            "dependencies": list(file.dependency),
            "java_package": file.options.java_package,
            "java_multiple_files": file.options.java_multiple_files,
            "go_package": file.options.go_package,
            "messages": [message.name for message in file.message_type],
            "enums": [enum.name for enum in file.enum_type],
            "services": [service.name for service in file.service],
        }
    }
    scope = f".{file.package}"
    for message in file.message_type:
        _flatten_message(message, scope, out)
    for enum in file.enum_type:
        _flatten_enum(enum, scope, out)
    for service in file.service:
        service_path = f"{file.package}.{service.name}"
        out[f"service {service_path}"] = {"methods": [method.name for method in service.method]}
        for method in service.method:
            out[f"method {service_path}.{method.name}"] = {
                "input_type": method.input_type,
                "output_type": method.output_type,
                "client_streaming": method.client_streaming,
                "server_streaming": method.server_streaming,
                "deprecated": method.options.deprecated,
            }
    return out


def differences(ours: dict[str, dict], reference: dict[str, dict], kind: str | None = None) -> list[str]:
    """Human-readable mismatches; ``kind`` restricts to keys starting with that word.

    Lists of child names (fields of a message, methods of a service…) are compared as sets when a
    documented addition explains the surplus, and exactly otherwise.
    """
    problems: list[str] = []
    keys = sorted(set(ours) | set(reference))
    for key in keys:
        if kind is not None and key.split(" ", 1)[0] != kind:
            continue
        if key not in ours:
            problems.append(f"missing in Weir's proto: {key} {reference[key]}")
            continue
        if key not in reference:
            if key not in DOCUMENTED_ADDITIONS:
                problems.append(f"not in the reference (undocumented addition): {key} {ours[key]}")
            continue
        for attribute in sorted(set(ours[key]) | set(reference[key])):
            mine, theirs = ours[key].get(attribute), reference[key].get(attribute)
            if mine == theirs:
                continue
            if isinstance(mine, list) and isinstance(theirs, list) and _only_documented_extras(key, mine, theirs):
                continue
            problems.append(f"{key}: {attribute} is {mine!r}, reference has {theirs!r}")
    return problems


def _only_documented_extras(key: str, mine: list[str], theirs: list[str]) -> bool:
    """True when ``mine`` is ``theirs`` in the same order plus children listed as documented additions."""
    parent = key.split(" ", 1)[1]
    extras = [name for name in mine if name not in theirs]
    documented = all(any(addition.endswith(f"{parent}.{name}") for addition in DOCUMENTED_ADDITIONS) for name in extras)
    return documented and [name for name in mine if name in theirs] == theirs


# --------------------------------------------------------------------------------------------------
# Structure compared with the reference
# --------------------------------------------------------------------------------------------------


def test_reference_is_the_expected_pyzeebe_descriptor(reference: descriptor_pb2.FileDescriptorProto) -> None:
    assert reference.package == PACKAGE
    assert [service.name for service in reference.service] == ["Gateway"]
    assert len(reference.service[0].method) == len(EXPECTED_RPCS)


def test_file_level_facts_match(ours: descriptor_pb2.FileDescriptorProto, reference) -> None:
    assert ours.name == "gateway.proto"
    assert differences(flatten(ours), flatten(reference), kind="file") == []


@pytest.mark.parametrize("kind", ["message", "field"])
def test_messages_and_fields_match(ours, reference, kind: str) -> None:
    assert differences(flatten(ours), flatten(reference), kind=kind) == []


@pytest.mark.parametrize("kind", ["enum", "enum_value"])
def test_enums_match(ours, reference, kind: str) -> None:
    assert differences(flatten(ours), flatten(reference), kind=kind) == []


@pytest.mark.parametrize("kind", ["service", "method"])
def test_service_and_methods_match(ours, reference, kind: str) -> None:
    assert differences(flatten(ours), flatten(reference), kind=kind) == []


def test_identical_in_structure_with_pyzeebe_4_7_but_for_the_documented_additions(ours, reference) -> None:
    """Everything pyzeebe's descriptor has is in ours unchanged; what ours adds is exactly the documented list."""
    assert differences(flatten(ours), flatten(reference)) == []
    entries = {addition for addition in DOCUMENTED_ADDITIONS if not addition.startswith("oneof ")}
    assert set(flatten(ours)) - set(flatten(reference)) == entries


def test_additions_carry_zeebes_field_numbers(ours: descriptor_pb2.FileDescriptorProto) -> None:
    flat = flatten(ours)
    numbers = {name: flat[f"field .gateway_protocol.{name}"]["number"] for name in ADDITION_NUMBERS}
    assert numbers == ADDITION_NUMBERS
    kinds = {
        name: flat[f"enum_value .gateway_protocol.ActivatedJob.JobKind.{name}"]["number"]
        for name in ("BPMN_ELEMENT", "EXECUTION_LISTENER", "TASK_LISTENER", "AD_HOC_SUB_PROCESS")
    }
    assert kinds == {"BPMN_ELEMENT": 0, "EXECUTION_LISTENER": 1, "TASK_LISTENER": 2, "AD_HOC_SUB_PROCESS": 3}
    events = {
        name: flat[f"enum_value .gateway_protocol.ActivatedJob.ListenerEventType.{name}"]["number"]
        for name in _LISTENER_EVENT_TYPES
    }
    assert events == {name: n for n, name in enumerate(_LISTENER_EVENT_TYPES)}


def test_comparison_notices_a_renumbered_field(reference) -> None:
    """Guards the comparator itself: a single changed field number must be reported."""
    tampered = descriptor_pb2.FileDescriptorProto()
    tampered.CopyFrom(reference)
    job = next(message for message in tampered.message_type if message.name == "ActivatedJob")
    next(field for field in job.field if field.name == "deadline").number = 99
    reported = differences(flatten(tampered), flatten(reference))
    assert reported == ["field .gateway_protocol.ActivatedJob.deadline: number is 99, reference has 12"]


def test_comparison_notices_an_undocumented_addition(reference) -> None:
    extended = descriptor_pb2.FileDescriptorProto()
    extended.CopyFrom(reference)
    extended.message_type.add(name="Surplus")
    reported = differences(flatten(extended), flatten(reference))
    assert any(line.startswith("not in the reference (undocumented addition): message") for line in reported)


# --------------------------------------------------------------------------------------------------
# Facts from the fact sheet, independent of the reference
# --------------------------------------------------------------------------------------------------


def test_rpcs_and_streaming_kinds(ours: descriptor_pb2.FileDescriptorProto) -> None:
    (service,) = ours.service
    assert service.name == "Gateway"
    assert tuple(method.name for method in service.method) == EXPECTED_RPCS
    for method in service.method:
        assert not method.client_streaming, method.name
        assert method.server_streaming == (method.name in SERVER_STREAMING_RPCS), method.name


def test_operation_reference_and_decision_instance_key(ours: descriptor_pb2.FileDescriptorProto) -> None:
    messages = {message.name: message for message in ours.message_type}
    for message_name, number in OPERATION_REFERENCE_FIELDS.items():
        field = next(field for field in messages[message_name].field if field.name == "operationReference")
        assert field.number == number, message_name
        assert field.type == FieldProto.TYPE_UINT64, message_name
        assert field.proto3_optional, message_name
    decision_instance_key = next(
        field for field in messages["EvaluateDecisionResponse"].field if field.name == "decisionInstanceKey"
    )
    assert (decision_instance_key.number, decision_instance_key.type) == (12, FieldProto.TYPE_INT64)


def test_stream_request_leaves_field_four_unused(ours: descriptor_pb2.FileDescriptorProto) -> None:
    request = next(message for message in ours.message_type if message.name == "StreamActivatedJobsRequest")
    assert [field.number for field in request.field] == [1, 2, 3, 5, 6]


# --------------------------------------------------------------------------------------------------
# Committed stubs
# --------------------------------------------------------------------------------------------------


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("weir_proto_generate", PROTO_DIR / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_stubs_match_the_proto() -> None:
    completed = subprocess.run(
        [sys.executable, str(PROTO_DIR / "generate.py"), "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr


@pytest.fixture
def stub_copy(tmp_path: Path) -> Iterator[Path]:
    committed = REPO_ROOT / "gateway" / "api"
    for name in ("gateway_pb2.py", "gateway_pb2.pyi", "gateway_pb2_grpc.py"):
        shutil.copy(committed / name, tmp_path / name)
    yield tmp_path


def test_check_detects_a_stale_stub(stub_copy: Path) -> None:
    generator = _load_generator()
    assert generator.stale_files(stub_copy) == {}
    grpc_module = stub_copy / "gateway_pb2_grpc.py"
    grpc_module.write_text(grpc_module.read_text(encoding="utf-8") + "# edited by hand\n", encoding="utf-8")
    assert set(generator.stale_files(stub_copy)) == {"gateway_pb2_grpc.py"}


def test_generated_grpc_module_uses_a_package_import() -> None:
    text = (REPO_ROOT / "gateway" / "api" / "gateway_pb2_grpc.py").read_text(encoding="utf-8")
    assert "from gateway.api import gateway_pb2 as gateway__pb2" in text
    assert "\nimport gateway_pb2" not in text


def test_stubs_import_and_name_the_service() -> None:
    script = """
import json
from gateway.api import gateway_pb2, gateway_pb2_grpc
service = gateway_pb2.DESCRIPTOR.services_by_name["Gateway"]
stub_methods = [name for name in dir(gateway_pb2_grpc.GatewayServicer) if not name.startswith("_")]
print(json.dumps({
    "file": gateway_pb2.DESCRIPTOR.name,
    "service": service.full_name,
    "methods": [method.name for method in service.methods],
    "servicer_methods": sorted(stub_methods),
    "has_stub": hasattr(gateway_pb2_grpc, "GatewayStub"),
    "has_registration": hasattr(gateway_pb2_grpc, "add_GatewayServicer_to_server"),
}))
"""
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    facts = json.loads(completed.stdout)
    assert facts["file"] == "gateway.proto"
    assert facts["service"] == "gateway_protocol.Gateway"
    assert tuple(facts["methods"]) == EXPECTED_RPCS
    assert facts["servicer_methods"] == sorted(EXPECTED_RPCS)
    assert facts["has_stub"] and facts["has_registration"]
