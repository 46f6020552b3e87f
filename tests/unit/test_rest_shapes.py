"""The 8.9 response shapes and the enum-valued filter checks of the REST API (gateway/rest/shapes.py)."""

from __future__ import annotations

import base64

import pytest

from exporters.history.query import decode_cursor, encode_cursor
from gateway.commands import CommandError
from gateway.rest.shapes import (
    ITEM_FIELDS,
    business_fields,
    check_enum_filters,
    shape_item,
    shape_page,
    standard_base64,
    utc_date_time,
)


def test_business_fields_carry_what_the_source_has() -> None:
    assert business_fields({}) == {"businessId": None, "tags": []}
    assert business_fields({"businessId": "", "tags": None}) == {"businessId": None, "tags": []}
    assert business_fields({"businessId": "order-7", "tags": ["a", "b"]}) == {
        "businessId": "order-7",
        "tags": ["a", "b"],
    }


def test_an_item_gets_every_field_with_null_or_its_typed_empty_value() -> None:
    item = shape_item("user-tasks", {"userTaskKey": "5", "customHeaders": None, "state": "CREATED"})
    assert list(item)[: len(ITEM_FIELDS["user-tasks"])] == list(ITEM_FIELDS["user-tasks"])
    assert item["customHeaders"] == {} and item["candidateUsers"] == [] and item["tags"] == []
    assert item["businessId"] is None and item["rootProcessInstanceKey"] is None and item["dueDate"] is None
    item["customHeaders"]["x"] = 1  # each item has its own empty object
    assert shape_item("user-tasks", {})["customHeaders"] == {}


def test_a_root_instance_is_its_own_root_and_values_present_stay() -> None:
    root = shape_item("process-instances", {"processInstanceKey": "7", "parentProcessInstanceKey": None})
    assert root["rootProcessInstanceKey"] == "7" and root["suspendedDate"] is None
    child = shape_item("process-instances", {"processInstanceKey": "8", "parentProcessInstanceKey": "7"})
    assert child["rootProcessInstanceKey"] is None  # a row written before the history kept a called one's root
    rooted = shape_item(
        "process-instances", {"processInstanceKey": "8", "parentProcessInstanceKey": "7", "rootProcessInstanceKey": "7"}
    )
    assert rooted["rootProcessInstanceKey"] == "7"
    tagged = shape_item("process-instances", {"processInstanceKey": "9", "businessId": "b-1", "tags": ["t"]})
    assert (tagged["businessId"], tagged["tags"]) == ("b-1", ["t"])
    assert shape_item("jobs", {"priority": 40, "kind": None})["priority"] == 40
    assert shape_item("jobs", {})["kind"] == "BPMN_ELEMENT" and shape_item("jobs", {})["worker"] == ""
    assert shape_item("incidents", {})["errorMessage"] == "" and shape_item("jobs", {})["errorMessage"] is None


def test_a_decision_instance_by_key_has_its_inputs_and_rules() -> None:
    assert "evaluatedInputs" not in shape_item("decision-instances", {})
    assert shape_item("decision-instances", {}, by_key=True)["matchedRules"] == []


def test_given_dates_are_written_in_utc() -> None:
    assert utc_date_time("2031-01-01T01:00:00+01:00") == "2031-01-01T00:00:00.000Z"
    assert utc_date_time("") is None
    assert utc_date_time("not a date") == "not a date"  # shown as stored rather than lost


def test_cursors_are_standard_padded_base64_and_read_back() -> None:
    for offset in (0, 1, 12, 999, 123_456_789):
        cursor = standard_base64(encode_cursor(offset))
        assert cursor is not None and len(cursor) % 4 == 0
        base64.b64decode(cursor, validate=True)
        assert decode_cursor(cursor, "page.after") == offset
    page = shape_page({"items": [], "page": {"totalItems": 0, "startCursor": None, "endCursor": None}}, "jobs")
    assert page["page"] == {"totalItems": 0, "hasMoreTotalItems": False, "startCursor": None, "endCursor": None}


@pytest.mark.parametrize(
    ("entity", "filter_", "fragment"),
    [
        ("process-instances", {"state": "DONE"}, "filter.state: expected one of ACTIVE"),
        ("incidents", {"errorType": {"$in": ["JOB_NO_RETRIES", "X"]}}, "filter.errorType.$in[1]"),
        ("jobs", {"$or": [{"state": "CREATED"}, {"kind": {"$neq": "SERVICE"}}]}, "filter.$or[1].kind.$neq"),
        ("element-instances", {"type": "service_task"}, "'service_task'"),
    ],
)
def test_unknown_enum_values_are_refused(entity: str, filter_: dict, fragment: str) -> None:
    with pytest.raises(CommandError) as raised:
        check_enum_filters(entity, {"filter": filter_})
    assert fragment in str(raised.value)


def test_known_values_patterns_and_other_fields_pass() -> None:
    check_enum_filters("process-instances", {"filter": {"state": {"$in": ["ACTIVE", "COMPLETED"]}}})
    check_enum_filters("jobs", {"filter": {"state": {"$like": "COMP*"}, "type": "anything"}})
    check_enum_filters("variables", {"filter": {"name": "state"}})
    check_enum_filters("user-tasks", {})


def test_a_batch_operation_and_its_items_carry_every_field_of_the_spec() -> None:
    """Strict clients refuse a batch operation without its (nullable) actor or an item without its root instance."""
    batch = shape_item("batch-operations", {"batchOperationKey": "9", "state": "ACTIVE", "errors": None}, by_key=True)
    assert batch["actorType"] is None and batch["actorId"] is None and batch["errors"] == []
    counts = ("operationsTotalCount", "operationsFailedCount", "operationsCompletedCount")
    assert [batch[name] for name in counts] == [0, 0, 0]
    item = shape_item("batch-operation-items", {"itemKey": "4", "processInstanceKey": "4", "state": "COMPLETED"})
    assert list(item)[: len(ITEM_FIELDS["batch-operation-items"])] == list(ITEM_FIELDS["batch-operation-items"])
    assert item["rootProcessInstanceKey"] is None and item["errorMessage"] is None
