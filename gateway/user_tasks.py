"""User task commands as a gateway sends them: assign, unassign, update and complete a native user task.

Each function takes the gateway's :class:`~gateway.broker_client.BrokerClient`, routes the command to the partition
that owns the task (keys carry their partition) and returns the event that ends the command (ASSIGNED, UPDATED,
COMPLETED). The answer waits for the task's listeners, so a listener that denies the change makes the call fail.
Every failure is a :class:`UserTaskCommandError` with a gRPC status and a message, which an API layer maps to its
own errors (HTTP: NOT_FOUND → 404, FAILED_PRECONDITION → 409, INVALID_ARGUMENT → 400, …).
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from broker.protocol.documents import InvalidDocumentError, find_problem
from broker.protocol.enums import RecordType, UserTaskIntent, ValueType
from broker.protocol.keys import partition_of
from broker.protocol.record import Record
from broker.stream.partition import BackpressureError, PartitionUnavailableError
from gateway.broker_client import BrokerClient
from gateway.rejections import REJECTION_STATUS

#: How long a command may wait for its answer (the task's listeners run before it), in seconds.
REQUEST_TIMEOUT_S = 30.0

#: The attributes an update's changeset may name, and their names in the user task record.
CHANGESET_ATTRIBUTES = {
    "candidateGroups": "candidateGroupsList",
    "candidateUsers": "candidateUsersList",
    "dueDate": "dueDate",
    "followUpDate": "followUpDate",
    "priority": "priority",
}


class UserTaskCommandError(Exception):
    """A user task command failed: ``code`` is the gRPC status, ``message`` says why (a rejection's reason)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def assign(
    client: BrokerClient, key: int, assignee: str, action: str | None = None, allow_override: bool | None = None
) -> Record:
    """Assign the task to ``assignee``. With ``allow_override`` False, a task assigned to someone else is refused
    (FAILED_PRECONDITION) instead of reassigned, as a claim is."""
    if not isinstance(assignee, str) or not assignee.strip():
        raise UserTaskCommandError(grpc.StatusCode.INVALID_ARGUMENT, "No assignee provided: expected a non-empty one")
    intent = UserTaskIntent.CLAIM if allow_override is False else UserTaskIntent.ASSIGN
    value = {"assignee": assignee, "action": _action(action)}
    return await _execute(client, key, intent, value)


async def unassign(client: BrokerClient, key: int, action: str | None = None) -> Record:
    """Remove the task's assignee."""
    return await _execute(client, key, UserTaskIntent.ASSIGN, {"assignee": "", "action": _action(action) or "unassign"})


async def update(client: BrokerClient, key: int, changeset: dict[str, Any] | None, action: str | None = None) -> Record:
    """Change the attributes present (not None) in ``changeset``: candidateGroups, candidateUsers, dueDate,
    followUpDate, priority. An empty string or list clears an attribute."""
    changeset = changeset or {}
    if not isinstance(changeset, dict):
        raise UserTaskCommandError(grpc.StatusCode.INVALID_ARGUMENT, "Expected the changeset to be an object")
    unknown = sorted(name for name in changeset if name not in CHANGESET_ATTRIBUTES)
    if unknown:
        allowed = ", ".join(CHANGESET_ATTRIBUTES)
        raise UserTaskCommandError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"Expected the changeset to name only {allowed}, but it names {', '.join(unknown)}",
        )
    value: dict[str, Any] = {"changedAttributes": [], "action": _action(action)}
    for name, attribute in CHANGESET_ATTRIBUTES.items():
        if changeset.get(name) is not None:
            value["changedAttributes"].append(attribute)
            value[attribute] = changeset[name]
    if not value["changedAttributes"] and not value["action"]:
        raise UserTaskCommandError(
            grpc.StatusCode.INVALID_ARGUMENT,
            "No update data provided: give an action or a non-null value for an attribute of the changeset",
        )
    return await _execute(client, key, UserTaskIntent.UPDATE, value)


async def complete(
    client: BrokerClient, key: int, variables: dict[str, Any] | None = None, action: str | None = None
) -> Record:
    """Complete the task; ``variables`` reach its element as a job's completion variables do."""
    variables = variables or {}
    if not isinstance(variables, dict):
        raise UserTaskCommandError(grpc.StatusCode.INVALID_ARGUMENT, "Expected the variables to be a JSON object")
    problem = find_problem(variables, json_only=True)
    if problem:
        raise UserTaskCommandError(
            grpc.StatusCode.INVALID_ARGUMENT, f"Expected the variables to be a valid JSON document, but the {problem}"
        )
    return await _execute(client, key, UserTaskIntent.COMPLETE, {"variables": variables, "action": _action(action)})


def _action(action: str | None) -> str:
    if action is not None and not isinstance(action, str):
        raise UserTaskCommandError(grpc.StatusCode.INVALID_ARGUMENT, "Expected the action to be a string")
    return action or ""


async def _execute(client: BrokerClient, key: int, intent: UserTaskIntent, value: dict[str, Any]) -> Record:
    """Send to the partition owning ``key``; a rejection or a broker failure becomes a UserTaskCommandError."""
    partition_id = partition_of(key) if isinstance(key, int) and key > 0 else -1
    if partition_id not in client.partition_ids:
        raise UserTaskCommandError(
            grpc.StatusCode.NOT_FOUND, f"Expected to find user task with key '{key}', but no such user task was found"
        )
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            record = await client.execute(partition_id, ValueType.USER_TASK, intent, value, key)
    except TimeoutError:
        raise UserTaskCommandError(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            f"Time out between gateway and broker: request timed out after {REQUEST_TIMEOUT_S * 1000:.0f} ms",
        ) from None
    except BackpressureError as e:
        raise UserTaskCommandError(
            grpc.StatusCode.RESOURCE_EXHAUSTED, f"Expected to handle the request, but the broker is overloaded: {e}"
        ) from None
    except PartitionUnavailableError as e:
        raise UserTaskCommandError(grpc.StatusCode.UNAVAILABLE, str(e)) from None
    except InvalidDocumentError as e:
        raise UserTaskCommandError(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
    if record.record_type == RecordType.COMMAND_REJECTION:
        code = REJECTION_STATUS.get(record.rejection_type, grpc.StatusCode.UNKNOWN)
        raise UserTaskCommandError(
            code,
            f"Command '{record.intent_enum.name}' rejected with code '{record.rejection_type.name}': "
            f"{record.rejection_reason}",
        )
    return record
