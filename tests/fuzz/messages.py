"""Gateway requests with random field values, built from the descriptor of Weir's committed stubs (so every field
of every RPC is covered, and a field added to the .proto is fuzzed without a change here).

The descriptor is loaded into a pool of its own: the other tests import pyzeebe's stubs, which define the same
message names in the default pool."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

from tests.fuzz.values import BIG_TEXT, ODD_TEXT, keys, variables_documents

FD = FieldDescriptor
STUBS = Path(__file__).resolve().parents[2] / "gateway" / "api" / "gateway_pb2.py"


def _gateway_service() -> ServiceDescriptor:
    """The Gateway service of ``gateway/api/gateway_pb2.py``, from the serialised descriptor it registers."""
    for node in ast.walk(ast.parse(STUBS.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile":
            serialised = ast.literal_eval(node.args[0])
            break
    else:
        raise AssertionError(f"no serialised descriptor in {STUBS}")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(serialised))
    return pool.FindServiceByName("gateway_protocol.Gateway")


GATEWAY = _gateway_service()
_WIDTH = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FD.TYPE_INT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1),
    FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1),
    FD.TYPE_FIXED64: (0, 2**64 - 1),
}


def _repeated(field: FieldDescriptor) -> bool:
    flag = getattr(field, "is_repeated", None)  # newer protobuf; ``label`` is deprecated there
    return bool(flag) if flag is not None else field.label == FD.LABEL_REPEATED


class Requests:
    """Strategies for the requests of each Gateway RPC; ``names`` and ``known_keys`` are what exists on the node
    (process ids, job types, message names; instance, job and definition keys), mixed with random values."""

    def __init__(self, names: list[str], known_keys: list[int], resources: list[bytes]) -> None:
        self.names = names
        self.known_keys = known_keys
        self.resources = resources

    def for_method(self, method_name: str) -> st.SearchStrategy[Message]:
        return self.message(GATEWAY.methods_by_name[method_name].input_type, depth=0)

    def message(self, descriptor: Descriptor, depth: int) -> st.SearchStrategy[Message]:
        cls = message_factory.GetMessageClass(descriptor)
        if depth > 2:
            return st.just(cls())
        fields = {
            f.name: st.one_of(st.none(), self._field(f, depth)) for f in descriptor.fields if f.message_type is None
        }
        nested = {f.name: self._field(f, depth) for f in descriptor.fields if f.message_type is not None}

        def build(values: dict[str, Any], messages: dict[str, Any]) -> Message:
            message = cls()
            for name, value in values.items():
                if value is None:
                    continue
                if isinstance(value, list):
                    getattr(message, name).extend(value)
                else:
                    setattr(message, name, value)
            for name, value in messages.items():
                if isinstance(value, list):
                    getattr(message, name).extend(value)
                elif value is not None:
                    getattr(message, name).CopyFrom(value)
            return message

        return st.builds(build, st.fixed_dictionaries(fields), st.fixed_dictionaries(nested))

    def _field(self, field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
        one = self._scalar(field, depth)
        if _repeated(field):
            return st.lists(one, max_size=3)
        return st.one_of(st.none(), one) if field.message_type is not None else one

    def _scalar(self, field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
        if field.message_type is not None:
            return self.message(field.message_type, depth + 1)
        name = field.name.lower()
        if field.type == FD.TYPE_STRING:
            if "variables" in name:
                return variables_documents()
            known = st.sampled_from(self.names)
            return st.one_of(known, known, ODD_TEXT, BIG_TEXT, st.sampled_from(["", "=x", "-1", "\u0000"]))
        if field.type == FD.TYPE_BYTES:
            return st.one_of(st.binary(max_size=300), st.sampled_from(self.resources))
        if field.type == FD.TYPE_BOOL:
            return st.booleans()
        if field.type == FD.TYPE_ENUM:
            return st.integers(-3, 20)
        if field.type in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
            return st.floats(width=32 if field.type == FD.TYPE_FLOAT else 64)
        low, high = _WIDTH[field.type]
        numbers = st.one_of(st.integers(low, high), st.sampled_from([low, high, 0, -1, 1]))
        if name.endswith("key"):
            numbers = st.one_of(keys(self.known_keys), numbers)
        elif "timeout" in name:  # long polls and waits: a short wait mostly, any value sometimes
            numbers = st.one_of(st.integers(-1, 1500), st.integers(-1, 1500), numbers)
        else:
            numbers = st.one_of(st.integers(-2, 10), numbers)
        return numbers.filter(lambda n: low <= n <= high)
