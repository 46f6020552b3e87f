"""Records as Zeebe's record JSON documents: the shape every Weir exporter ships.

`Record.to_json_dict` gives the envelope; the few places where a Weir value is not yet spelled the way Zeebe
writes it are aligned here, so Elasticsearch queries and dashboards written for Zeebe work unchanged. Deployed
resources (bytes) travel base64-encoded, as in Zeebe's JSON.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from broker.protocol.enums import ValueType
from broker.protocol.record import Record

# Value fields Weir keeps for processing that Zeebe's JSON leaves out.
_INTERNAL_FIELDS: dict[ValueType, tuple[str, ...]] = {
    # awaitingResult: where to answer a create-with-result; the broker's business, not the record's.
    ValueType.PROCESS_INSTANCE_CREATION: ("fetchVariables", "awaitingResult"),
    ValueType.JOB_BATCH: ("variables",),
}
# Fields a Weir record value leaves out while empty (to keep records small) and Zeebe 8.9's JSON always has: an
# instance's business id and tags, on the records of the instance and of its jobs and user tasks.
_LABELLED = frozenset(
    {ValueType.PROCESS_INSTANCE, ValueType.PROCESS_INSTANCE_CREATION, ValueType.JOB, ValueType.USER_TASK}
)
# Boolean getters Zeebe's JSON names without the "is" prefix.
_METADATA_RENAMES = {"isDuplicate": "duplicate"}
_METADATA_LISTS = ("processesMetadata", "decisionsMetadata", "decisionRequirementsMetadata", "formMetadata")


def record_document(record: Record, broker_version: str) -> dict[str, Any]:
    """The record as a Zeebe record JSON document (a new dict; the record is not modified)."""
    document = record.to_json_dict(broker_version)
    value = document["value"]
    dropped = _INTERNAL_FIELDS.get(record.value_type)
    if dropped and any(name in value for name in dropped):
        value = {k: v for k, v in value.items() if k not in dropped}
    if record.value_type in _LABELLED and ("businessId" not in value or "tags" not in value):
        value = {"businessId": "", "tags": [], **value}
    if (
        record.value_type == ValueType.PROCESS_INSTANCE
        and "rootProcessInstanceKey" not in value
        and value.get("parentProcessInstanceKey", -1) <= 0
        and "processInstanceKey" in value
    ):  # left out of a root instance's records: the instance itself
        value = {**value, "rootProcessInstanceKey": value["processInstanceKey"]}
    if record.value_type == ValueType.DEPLOYMENT:
        value = _rename_metadata(value)
    elif record.value_type == ValueType.PROCESS and "isDuplicate" in value:
        value = {_METADATA_RENAMES.get(k, k): v for k, v in value.items()}
    document["value"] = value
    return document


def _rename_metadata(value: dict[str, Any]) -> dict[str, Any]:
    if not any(name in value for name in _METADATA_LISTS):
        return value
    value = dict(value)
    for name in _METADATA_LISTS:
        items = value.get(name)
        if isinstance(items, list):
            value[name] = [
                {_METADATA_RENAMES.get(k, k): v for k, v in item.items()} if isinstance(item, dict) else item
                for item in items
            ]
    return value


def _encode_extra(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"cannot render {type(value).__name__} as JSON")


def dumps(document: dict[str, Any]) -> str:
    """Compact JSON text of a document (UTF-8 characters kept as they are)."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, default=_encode_extra)
