"""The record: the one data type that flows through logs, processors, appliers, responses and exporters.

A record is immutable once appended. Its ``value`` is a plain dict whose keys follow Zeebe's record JSON shape
(camelCase), so exporters ship it without translation and clients see familiar field names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from broker.protocol.enums import RecordType, RejectionType, ValueType, intent_for

NO_REQUEST = -1


@dataclass(slots=True, frozen=True)
class RequestMetadata:
    """Where the response to a command goes: the gateway stream and the request id within it."""

    stream_id: int
    request_id: int


@dataclass(slots=True)
class Record:
    """One entry of a partition's log.

    ``intent`` is stored as a plain int for speed; ``intent_enum`` resolves it to the value type's Intent enum.
    ``source_position`` is the position of the command that caused this record (-1 for client commands).
    ``typed`` is the typed form of ``value`` (e.g. a :class:`~broker.protocol.values.ProcessInstanceValue`) when the
    engine wrote the record from one, so that its processor and applier need not decode ``value`` again. It is never
    encoded: a record read from the log has None, and decoding ``value`` gives an equal typed value, so replay applies
    the same state.
    """

    position: int
    key: int
    record_type: RecordType
    value_type: ValueType
    intent: int
    timestamp: int
    value: dict[str, Any]
    source_position: int = -1
    rejection_type: RejectionType = RejectionType.NULL_VAL
    rejection_reason: str = ""
    request: RequestMetadata | None = field(default=None)
    partition_id: int = 1
    # Who sent a client command, when the gateway authenticated them: {"username", "clientId", "claims"} (any may be
    # missing). The engine decides what the caller may do from it and the identity it keeps; never exported.
    authorization: dict[str, Any] | None = None
    typed: Any = field(default=None, repr=False, compare=False)

    @property
    def intent_enum(self) -> Any:
        return intent_for(self.value_type, self.intent)

    @property
    def is_command(self) -> bool:
        return self.record_type == RecordType.COMMAND

    @property
    def is_event(self) -> bool:
        return self.record_type == RecordType.EVENT

    def describe(self) -> str:
        """A compact one-line rendering for logs and failure dumps."""
        rtype = RecordType(self.record_type).name
        vtype = ValueType(self.value_type).name
        return f"{self.position} {rtype} {vtype}.{self.intent_enum.name} key={self.key} src={self.source_position}"

    def to_json_dict(self, broker_version: str = "") -> dict[str, Any]:
        """The record in Zeebe's JSON shape, as exporters ship it.

        Variable values travel through the log decoded; Zeebe's shape carries them as JSON text. A user's password
        hash is left out.
        """
        value = self.value
        if self.value_type == ValueType.VARIABLE and "value" in value:
            value = dict(value)
            value["value"] = json.dumps(value["value"], separators=(",", ":"))
        else:
            value = without_password_hashes(self.value_type, value)
        return {
            "partitionId": self.partition_id,
            "position": self.position,
            "sourceRecordPosition": self.source_position,
            "key": self.key,
            "timestamp": self.timestamp,
            "recordType": RecordType(self.record_type).name,
            "valueType": ValueType(self.value_type).name,
            "intent": self.intent_enum.name,
            "rejectionType": RejectionType(self.rejection_type).name,
            "rejectionReason": self.rejection_reason,
            "brokerVersion": broker_version,
            "recordVersion": 1,
            "value": value,
        }


def without_password_hashes(value_type: int, value: dict[str, Any]) -> dict[str, Any]:
    """The value as it may leave the broker: a user's password hash (in USER records and the users of an
    IDENTITY_SETUP command) stays in the log and the state, never in exports."""
    if value_type == ValueType.USER and value.get("password"):
        return {**value, "password": ""}
    if value_type == ValueType.IDENTITY_SETUP and isinstance(value.get("users"), list):
        users = [{**u, "password": ""} if isinstance(u, dict) and u.get("password") else u for u in value["users"]]
        return {**value, "users": users}
    return value
