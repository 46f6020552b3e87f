"""REST endpoints for native user tasks (Camunda 8.8 v2): assign, unassign, update and complete, through
gateway/user_tasks.py. Each answers once the task's listeners have run; a listener's denial is a 409."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway import user_tasks
from gateway.commands import GatewayCommands, check_variables
from gateway.rest.endpoints import Endpoint
from gateway.rest.routes import no_content, path_key, read_json
from gateway.rest.schema import Body, Field

ACTION = Field("string", "A custom action name, recorded on the task's event and seen by its listeners")
ASSIGNMENT = Body(
    {
        "assignee": Field("string", "Who the task is assigned to", required=True, min_length=1),
        "allowOverride": Field("boolean", "Reassign a task assigned to someone else (default true); false: a claim"),
        "action": ACTION,
    }
)
UPDATE = Body(
    {
        "changeset": Field(
            "nested",
            "The attributes to change; an empty string or list clears one",
            body=Body(
                {
                    "dueDate": Field("string", "When the task is due (ISO 8601 date-time)"),
                    "followUpDate": Field("string", "When to follow the task up (ISO 8601 date-time)"),
                    "candidateUsers": Field("strings", "Users who may claim the task"),
                    "candidateGroups": Field("strings", "Groups whose members may claim the task"),
                    "priority": Field("integer", "0 to 100", minimum=0),
                }
            ),
        ),
        "action": ACTION,
    }
)
COMPLETION = Body({"variables": Field("object", "Variables for the task's element"), "action": ACTION})
ERRORS = (404, 409, 504)


class UserTaskRoutes:
    def __init__(self, commands: GatewayCommands) -> None:
        self.commands = commands

    async def assign(self, request: web.Request) -> web.Response:
        key = path_key(request, "userTaskKey")
        body = await read_json(request, ASSIGNMENT)
        await user_tasks.assign(
            self.commands, key, body["assignee"], body.get("action"), body.get("allowOverride", True)
        )
        return no_content()

    async def unassign(self, request: web.Request) -> web.Response:
        await user_tasks.unassign(self.commands, path_key(request, "userTaskKey"))
        return no_content()

    async def update(self, request: web.Request) -> web.Response:
        key = path_key(request, "userTaskKey")
        body = await read_json(request, UPDATE, optional=True)
        await user_tasks.update(self.commands, key, body.get("changeset"), body.get("action"))
        return no_content()

    async def complete(self, request: web.Request) -> web.Response:
        key = path_key(request, "userTaskKey")
        body = await read_json(request, COMPLETION, optional=True)
        await user_tasks.complete(self.commands, key, check_variables(body.get("variables")), body.get("action"))
        return no_content()

    def endpoints(self) -> list[Endpoint]:
        done: dict[int, tuple[str, dict[str, Any] | None]] = {204: ("Done", None)}
        tag = "User task"
        return [
            Endpoint(
                "POST",
                "/v2/user-tasks/{userTaskKey}/assignment",
                "Assign a user task",
                self.assign,
                tag,
                body=ASSIGNMENT,
                responses=done,
                errors=ERRORS,
            ),
            Endpoint(
                "DELETE",
                "/v2/user-tasks/{userTaskKey}/assignee",
                "Unassign a user task",
                self.unassign,
                tag,
                responses=done,
                errors=ERRORS,
            ),
            Endpoint(
                "PATCH",
                "/v2/user-tasks/{userTaskKey}",
                "Update a user task's due date, follow-up date, candidates or priority",
                self.update,
                tag,
                body=UPDATE,
                body_optional=True,
                responses=done,
                errors=ERRORS,
            ),
            Endpoint(
                "POST",
                "/v2/user-tasks/{userTaskKey}/completion",
                "Complete a user task",
                self.complete,
                tag,
                body=COMPLETION,
                body_optional=True,
                responses=done,
                errors=ERRORS,
            ),
        ]
