"""User task commands as a gateway sends them: assign, unassign, update and complete a native user task.

Each function routes the command through the transport-neutral :class:`~gateway.commands.GatewayCommands` to the
partition that owns the task (keys carry their partition) and returns the event that ends the command (ASSIGNED,
UPDATED, COMPLETED). The answer waits for the task's listeners, so a listener that denies the change makes the call
fail. Every failure is a :class:`~gateway.commands.CommandError`, which an API layer maps to its own errors (HTTP:
NOT_FOUND → 404, FAILED_PRECONDITION → 409, INVALID_ARGUMENT → 400, …).
"""

from __future__ import annotations

from typing import Any

from broker.protocol.documents import find_problem
from broker.protocol.enums import UserTaskIntent, ValueType
from broker.protocol.record import Record
from gateway.commands import GatewayCommands, invalid

#: How long a command may wait for its answer at least (the task's listeners run before it), in milliseconds.
REQUEST_TIMEOUT_MS = 30_000

#: The attributes an update's changeset may name, and their names in the user task record.
CHANGESET_ATTRIBUTES = {
    "candidateGroups": "candidateGroupsList",
    "candidateUsers": "candidateUsersList",
    "dueDate": "dueDate",
    "followUpDate": "followUpDate",
    "priority": "priority",
}

#: Attributes a task listener may correct, by their API name, and their names in the user task record, in the order
#: ``correctedAttributes`` lists them.
CORRECTABLE = {
    "assignee": "assignee",
    "dueDate": "dueDate",
    "followUpDate": "followUpDate",
    "candidateUsers": "candidateUsersList",
    "candidateGroups": "candidateGroupsList",
    "priority": "priority",
}


def listener_result(denied: bool, denied_reason: str, corrections: dict[str, Any]) -> dict[str, Any]:
    """A task listener's answer as its job's COMPLETE command carries it: a denial, or corrections of the task
    (``corrections`` by API name, only those given)."""
    present = [name for name in CORRECTABLE if name in corrections]
    return {
        "type": "USER_TASK",
        "denied": denied,
        "deniedReason": denied_reason,
        "correctedAttributes": [CORRECTABLE[name] for name in present],
        "corrections": {CORRECTABLE[name]: corrections[name] for name in present},
    }


async def assign(
    commands: GatewayCommands, key: int, assignee: str, action: str | None = None, allow_override: bool | None = None
) -> Record:
    """Assign the task to ``assignee``. With ``allow_override`` False, a task assigned to someone else is refused
    (FAILED_PRECONDITION) instead of reassigned, as a claim is."""
    if not isinstance(assignee, str) or not assignee.strip():
        invalid("No assignee provided: expected a non-empty one")
    intent = UserTaskIntent.CLAIM if allow_override is False else UserTaskIntent.ASSIGN
    value = {"assignee": assignee, "action": _action(action)}
    return await _execute(commands, key, intent, value)


async def unassign(commands: GatewayCommands, key: int, action: str | None = None) -> Record:
    """Remove the task's assignee."""
    return await _execute(
        commands, key, UserTaskIntent.ASSIGN, {"assignee": "", "action": _action(action) or "unassign"}
    )


async def update(
    commands: GatewayCommands, key: int, changeset: dict[str, Any] | None, action: str | None = None
) -> Record:
    """Change the attributes present (not None) in ``changeset``: candidateGroups, candidateUsers, dueDate,
    followUpDate, priority. An empty string or list clears an attribute."""
    changeset = changeset or {}
    if not isinstance(changeset, dict):
        invalid("Expected the changeset to be an object")
    unknown = sorted(name for name in changeset if name not in CHANGESET_ATTRIBUTES)
    if unknown:
        allowed = ", ".join(CHANGESET_ATTRIBUTES)
        invalid(
            f"Expected the changeset to name only {allowed}, but it names {', '.join(unknown)}",
        )
    value: dict[str, Any] = {"changedAttributes": [], "action": _action(action)}
    for name, attribute in CHANGESET_ATTRIBUTES.items():
        if changeset.get(name) is not None:
            value["changedAttributes"].append(attribute)
            value[attribute] = changeset[name]
    if not value["changedAttributes"] and not value["action"]:
        invalid(
            "No update data provided: give an action or a non-null value for an attribute of the changeset",
        )
    return await _execute(commands, key, UserTaskIntent.UPDATE, value)


async def complete(
    commands: GatewayCommands, key: int, variables: dict[str, Any] | None = None, action: str | None = None
) -> Record:
    """Complete the task; ``variables`` reach its element as a job's completion variables do."""
    variables = variables or {}
    if not isinstance(variables, dict):
        invalid("Expected the variables to be a JSON object")
    problem = find_problem(variables, json_only=True)
    if problem:
        invalid(f"Expected the variables to be a valid JSON document, but the {problem}")
    return await _execute(commands, key, UserTaskIntent.COMPLETE, {"variables": variables, "action": _action(action)})


def _action(action: str | None) -> str:
    if action is not None and not isinstance(action, str):
        invalid("Expected the action to be a string")
    return action or ""


async def _execute(commands: GatewayCommands, key: int, intent: UserTaskIntent, value: dict[str, Any]) -> Record:
    partition_id = commands.partition_for_key(key, "user task")
    timeout_ms = max(commands.request_timeout_ms, REQUEST_TIMEOUT_MS)
    return await commands.execute(partition_id, ValueType.USER_TASK, intent, value, key, timeout_ms=timeout_ms)
