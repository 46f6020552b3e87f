"""What a command value may hold: every kind of value that cannot be logged or shown as JSON is named precisely."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from broker.protocol.documents import MAX_DEPTH, InvalidDocumentError, check_command_value, find_problem


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"n": value}
    return value


@pytest.mark.parametrize(
    ("document", "named", "reason"),
    [
        ({"a": "\ud800"}, "'a'", "surrogate"),
        ({"a": {"b": [1, {"c": "ok\udfff"}]}}, "'a.b[1].c'", "surrogate"),
        ({"ok": {"\udc00key": 1}}, "name 'ok.\\udc00key'", "surrogate"),
        ({"a": float("nan")}, "'a'", "JSON cannot represent"),
        ({"a": [float("-inf")]}, "'a[0]'", "JSON cannot represent"),
        ({"a": 2**64}, "'a'", "outside"),
        ({"a": -(2**63) - 1}, "'a'", "outside"),
        ({"a": msgpack.ExtType(3, b"")}, "'a'", "ExtType"),
        ({"a": b"bytes"}, "'a'", "bytes"),
        ({"a": {1: "int key"}}, "'a'", "not a string"),
        ({"deep": nested(MAX_DEPTH + 5)}, "'deep.n.n", "nested more than"),
    ],
)
def test_each_problem_names_the_variable(document: dict, named: str, reason: str) -> None:
    with pytest.raises(InvalidDocumentError) as info:
        check_command_value({"variables": document})
    assert named in str(info.value) and reason in str(info.value), str(info.value)


def test_valid_documents_pass_and_other_fields_may_hold_bytes() -> None:
    good = {"s": "ünïcode ✓", "i": 2**64 - 1, "f": 1.5, "b": True, "n": None, "l": [1, "x", {"k": []}], "e": {}}
    check_command_value({"variables": good, "resources": [{"resource": b"<xml/>"}], "variables_list": ["a"]})
    check_command_value({"variables": ["fetch", "names"]})  # a job batch's list of variable names
    assert find_problem(nested(MAX_DEPTH - 1), json_only=True) is None


def test_size_limit_names_the_variable_that_crosses_it() -> None:
    with pytest.raises(InvalidDocumentError, match="'big' makes it larger than 1000 bytes"):
        check_command_value({"variables": {"small": "x", "big": "y" * 2000}}, max_bytes=1000)


def test_fields_outside_variables_are_checked_too() -> None:
    with pytest.raises(InvalidDocumentError, match="field 'name' contains a lone UTF-16 surrogate"):
        check_command_value({"name": "x\ud800", "variables": {}})
