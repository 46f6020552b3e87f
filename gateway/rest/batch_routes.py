"""Batch operations over the REST API (Camunda 8.8, v2): cancel, resolve the incidents of, migrate or modify every
process instance a filter matches, and follow, suspend, resume or cancel such a batch.

The gateway resolves the filter against the history store with the process instance search's semantics (for
incident resolution: the active incidents of the matching instances) and sends the matching items in one command to
the first partition, which coordinates the batch and hands each partition its own items (see
broker/engine/batch_operations.py). Instances the history does not know yet are not part of the batch. The batch and
its items are read back from the history store.
"""

from __future__ import annotations

from typing import Any, Final, NoReturn

from aiohttp import web

from broker.protocol.enums import BatchOperationLifecycleManagementIntent as Lifecycle
from gateway.commands import ErrorCode, GatewayCommands, fail, invalid
from gateway.rest.endpoints import ANY_OBJECT, INTEGER, KEY, STRING, Endpoint, obj
from gateway.rest.routes import json_response, no_content, path_key, read_json_value
from gateway.rest.search import SEARCH_REQUEST, SEARCH_RESPONSE, SearchRoutes, _search_query
from gateway.rest.shapes import check_enum_filters, shape_item, shape_page

MAX_BATCH_ITEMS: Final = 10_000
"""The most items one batch takes: its items travel in one command to the coordinating partition."""
_PAGE: Final = 10_000
_INCIDENT_LOOKUP: Final = 500  # instance keys per incident search

CREATED = obj(
    {"batchOperationKey": KEY, "batchOperationType": STRING},
    "The batch operation started; follow it with GET /v2/batch-operations/{batchOperationKey}",
    required=["batchOperationKey", "batchOperationType"],
)
FILTER_ONLY: dict[str, Any] = {
    "type": "object",
    "description": "filter: a process instance search filter (the fields of POST /v2/process-instances/search); "
    "without a state, only ACTIVE instances are taken.",
    "properties": {"filter": ANY_OBJECT},
    "required": ["filter"],
}
MIGRATION_REQUEST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "filter": ANY_OBJECT,
        "migrationPlan": obj(
            {
                "targetProcessDefinitionKey": KEY,
                "mappingInstructions": {
                    "type": "array",
                    "items": obj({"sourceElementId": STRING, "targetElementId": STRING}),
                },
            },
            required=["targetProcessDefinitionKey", "mappingInstructions"],
        ),
    },
    "required": ["filter", "migrationPlan"],
}
MODIFICATION_REQUEST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "filter": ANY_OBJECT,
        "moveInstructions": {
            "type": "array",
            "items": obj({"sourceElementId": STRING, "targetElementId": STRING}),
        },
    },
    "required": ["filter", "moveInstructions"],
}
BATCH_OPERATION = obj(
    {
        "batchOperationKey": KEY,
        "batchOperationType": STRING,
        "state": STRING,
        "startDate": STRING,
        "endDate": {"type": ["string", "null"]},
        "actorType": {"type": ["string", "null"]},
        "actorId": {"type": ["string", "null"]},
        "operationsTotalCount": INTEGER,
        "operationsFailedCount": INTEGER,
        "operationsCompletedCount": INTEGER,
        "errors": {"type": "array", "items": ANY_OBJECT},
    },
    "state: ACTIVE, SUSPENDED, COMPLETED, PARTIALLY_COMPLETED (completed with failed items) or CANCELED",
)


class BatchRoutes:
    """Starting batch operations (through ``commands``) and reading them (through ``search``'s history reader)."""

    def __init__(self, commands: GatewayCommands, search: SearchRoutes) -> None:
        self.commands = commands
        self.search = search

    # -- resolving a filter ----------------------------------------------------------------------------------

    async def _body(self, request: web.Request, allowed: set[str]) -> dict[str, Any]:
        body = await read_json_value(request)
        if not isinstance(body, dict):
            invalid("Expected a JSON object with a filter as the request body")
        unknown = sorted(set(body) - allowed)
        if unknown:
            invalid(f"Unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
        filter_ = body.get("filter")
        if not isinstance(filter_, dict):
            invalid("Expected a filter object (the fields of a process instance search filter)")
        check_enum_filters("process-instances", {"filter": filter_})
        return body

    async def _instances(self, filter_: dict[str, Any]) -> list[int]:
        """The keys of the process instances the filter matches (ACTIVE ones unless it names a state)."""
        effective = filter_ if "state" in filter_ else {**filter_, "state": "ACTIVE"}
        keys: list[int] = []
        while True:
            query = {"filter": effective, "page": {"from": len(keys), "limit": _PAGE}}
            found = await self.search.read("search", "process-instances", query)
            keys += [int(item["processInstanceKey"]) for item in found["items"]]
            total = found["page"]["totalItems"]
            if total > MAX_BATCH_ITEMS:
                _too_many(total, "process instances")
            if not found["items"] or len(keys) >= total:
                return keys

    async def _incidents(self, instance_keys: list[int]) -> list[tuple[int, int]]:
        """The active incidents of these instances, as (incident key, process instance key)."""
        out: list[tuple[int, int]] = []
        for start in range(0, len(instance_keys), _INCIDENT_LOOKUP):
            some = [str(k) for k in instance_keys[start : start + _INCIDENT_LOOKUP]]
            seen = 0
            while True:
                query = {
                    "filter": {"processInstanceKey": {"$in": some}, "state": "ACTIVE"},
                    "page": {"from": seen, "limit": _PAGE},
                }
                found = await self.search.read("search", "incidents", query)
                items = found["items"]
                out += [(int(i["incidentKey"]), int(i["processInstanceKey"])) for i in items]
                seen += len(items)
                if len(out) > MAX_BATCH_ITEMS:
                    _too_many(len(out), "incidents")
                if not items or seen >= found["page"]["totalItems"]:
                    break
        return out

    async def _start(
        self, batch_type: str, filter_: dict[str, Any], items: list[tuple[int, int]], plan: dict[str, Any] | None
    ) -> web.Response:
        record = await self.commands.create_batch_operation(batch_type, filter_, items, plan)
        return json_response(
            {"batchOperationKey": str(record.key), "batchOperationType": record.value["batchOperationType"]}
        )

    # -- starting batches ------------------------------------------------------------------------------------

    async def cancel_instances(self, request: web.Request) -> web.Response:
        body = await self._body(request, {"filter"})
        keys = await self._instances(body["filter"])
        return await self._start("CANCEL_PROCESS_INSTANCE", body["filter"], [(k, k) for k in keys], None)

    async def resolve_incidents(self, request: web.Request) -> web.Response:
        body = await self._body(request, {"filter"})
        # incidents are of running instances: whatever state the filter names, their active incidents are taken
        keys = await self._instances(body["filter"])
        items = await self._incidents(keys)
        return await self._start("RESOLVE_INCIDENT", body["filter"], items, None)

    async def migrate_instances(self, request: web.Request) -> web.Response:
        body = await self._body(request, {"filter", "migrationPlan"})
        plan = body.get("migrationPlan")
        if not isinstance(plan, dict):
            invalid("Expected a migrationPlan with a targetProcessDefinitionKey and mappingInstructions")
        target = _key(plan.get("targetProcessDefinitionKey"), "migrationPlan.targetProcessDefinitionKey")
        mapping = _pairs(plan.get("mappingInstructions"), "migrationPlan.mappingInstructions", allow_empty=True)
        keys = await self._instances(body["filter"])
        migration = {"migrationPlan": {"targetProcessDefinitionKey": target, "mappingInstructions": mapping}}
        return await self._start("MIGRATE_PROCESS_INSTANCE", body["filter"], [(k, k) for k in keys], migration)

    async def modify_instances(self, request: web.Request) -> web.Response:
        body = await self._body(request, {"filter", "moveInstructions"})
        moves = _pairs(body.get("moveInstructions"), "moveInstructions", allow_empty=False)
        keys = await self._instances(body["filter"])
        plan = {"modificationPlan": {"moveInstructions": moves}}
        return await self._start("MODIFY_PROCESS_INSTANCE", body["filter"], [(k, k) for k in keys], plan)

    # -- one batch -------------------------------------------------------------------------------------------

    async def get(self, request: web.Request) -> web.Response:
        key = path_key(request, "batchOperationKey")
        found = await self.search.read("get", "batch-operations", str(key))
        if found is None:
            fail(
                ErrorCode.NOT_FOUND,
                f"Expected to find the batch operation with key '{key}', but it is not in the history",
            )
        return json_response(shape_item("batch-operations", found, by_key=True))

    def _lifecycle(self, intent: Lifecycle) -> Any:
        async def handler(request: web.Request) -> web.Response:
            await self.commands.batch_operation_lifecycle(path_key(request, "batchOperationKey"), intent)
            return no_content()

        return handler

    def _searcher(self, entity: str) -> Any:
        async def handler(request: web.Request) -> web.Response:
            query = await _search_query(request)
            found = await self.search.read("search", entity, query)
            return json_response(shape_page(found, entity))

        return handler

    def endpoints(self) -> list[Endpoint]:
        pi, bo = "Process instance", "Batch operation"
        started: dict[int, tuple[str, dict[str, Any] | None]] = {200: ("The batch operation started", CREATED)}
        lifecycle = [
            ("suspension", Lifecycle.SUSPEND, "Suspend a batch operation: partitions take no further items"),
            ("resumption", Lifecycle.RESUME, "Resume a suspended batch operation"),
            ("cancellation", Lifecycle.CANCEL, "Cancel a batch operation: the items not worked yet are dropped"),
        ]
        return [
            Endpoint(
                "POST",
                "/v2/process-instances/cancellation",
                "Cancel every process instance a filter matches, as a batch operation",
                self.cancel_instances,
                pi,
                raw_body=FILTER_ONLY,
                responses=started,
                operation_id="cancelProcessInstancesBatchOperation",
                description=f"At most {MAX_BATCH_ITEMS} instances; the filter is resolved on the history store.",
            ),
            Endpoint(
                "POST",
                "/v2/process-instances/incident-resolution",
                "Resolve the active incidents of every process instance a filter matches, as a batch operation",
                self.resolve_incidents,
                pi,
                raw_body=FILTER_ONLY,
                responses=started,
                operation_id="resolveIncidentsBatchOperation",
                description=f"At most {MAX_BATCH_ITEMS} incidents; the filter is resolved on the history store.",
            ),
            Endpoint(
                "POST",
                "/v2/process-instances/migration",
                "Migrate every process instance a filter matches, as a batch operation",
                self.migrate_instances,
                pi,
                raw_body=MIGRATION_REQUEST,
                responses=started,
                operation_id="migrateProcessInstancesBatchOperation",
                description="An instance the migration plan does not fit is a failed item with the reason its "
                "rejection would give.",
            ),
            Endpoint(
                "POST",
                "/v2/process-instances/modification",
                "Move the tokens of every process instance a filter matches, as a batch operation",
                self.modify_instances,
                pi,
                raw_body=MODIFICATION_REQUEST,
                responses=started,
                operation_id="modifyProcessInstancesBatchOperation",
                description="An instance the move does not fit is a failed item with the reason its rejection "
                "would give.",
            ),
            Endpoint(
                "GET",
                "/v2/batch-operations/{batchOperationKey}",
                "Get a batch operation from the history",
                self.get,
                bo,
                responses={200: ("The batch operation", dict(BATCH_OPERATION))},
                errors=(404,),
            ),
            Endpoint(
                "POST",
                "/v2/batch-operations/search",
                "Search batch operations in the history",
                self._searcher("batch-operations"),
                bo,
                raw_body=SEARCH_REQUEST,
                responses={200: ("The matching batch operations", SEARCH_RESPONSE)},
            ),
            Endpoint(
                "POST",
                "/v2/batch-operation-items/search",
                "Search the items of batch operations in the history",
                self._searcher("batch-operation-items"),
                bo,
                raw_body=SEARCH_REQUEST,
                responses={200: ("The matching items", SEARCH_RESPONSE)},
                description="Items: batchOperationKey, itemKey, processInstanceKey, operationType, state (ACTIVE, "
                "COMPLETED, FAILED, CANCELED), processedDate, errorMessage.",
            ),
            *(
                Endpoint(
                    "POST",
                    f"/v2/batch-operations/{{batchOperationKey}}/{path}",
                    summary,
                    self._lifecycle(intent),
                    bo,
                    responses={204: ("Taken by the coordinating partition and passed on to the others", None)},
                    errors=(404, 409),
                )
                for path, intent, summary in lifecycle
            ),
        ]


def _too_many(count: int, what: str) -> NoReturn:
    invalid(f"Expected a filter matching at most {MAX_BATCH_ITEMS} {what}, but it matches {count}; narrow the filter")


def _key(raw: Any, name: str) -> int:
    text = str(raw) if isinstance(raw, int | str) and not isinstance(raw, bool) else ""
    if not text.isdigit() or int(text) <= 0 or int(text) >= 2**63:
        invalid(f"Expected {name} to be a key (a string of digits), but got {raw!r:.100}")
    return int(text)


def _pairs(raw: Any, name: str, *, allow_empty: bool) -> list[dict[str, str]]:
    if not isinstance(raw, list) or (not raw and not allow_empty):
        invalid(
            f"Expected {name} to be a{'n' if allow_empty else ' non-empty'} array of sourceElementId/targetElementId"
        )
    out = []
    for n, item in enumerate(raw):
        source = item.get("sourceElementId") if isinstance(item, dict) else None
        target = item.get("targetElementId") if isinstance(item, dict) else None
        if not isinstance(source, str) or not source or not isinstance(target, str) or not target:
            invalid(f"Expected {name}[{n}] to name a sourceElementId and a targetElementId")
        out.append({"sourceElementId": source, "targetElementId": target})
    return out
