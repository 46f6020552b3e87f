"""The reads an instance view draws from (Camunda 8.9 Orchestration Cluster API, v2): element statistics of a
process definition or instance, the sequence flows an instance took, its call hierarchy and incidents, decision
and decision requirements XML, deployed resources and forms, and the cluster's status.

All but the status are answered from the history store through :class:`SearchRoutes` (its reader, its 503 when
no store is configured); an unknown key is a 404, a key the history has but nothing is linked to (a task without
a form) a 204, as in Camunda. Statistics and sequence flows are searches there: an unknown key has none (200 with no
items; the history may not have a new instance yet).
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

from aiohttp import web

from gateway.commands import ErrorCode, GatewayCommands, fail, invalid
from gateway.rest import problems
from gateway.rest.endpoints import ANY_OBJECT, INTEGER, KEY, STRING, Endpoint, obj
from gateway.rest.routes import json_response, path_key
from gateway.rest.search import SEARCH_REQUEST, SEARCH_RESPONSE, SearchRoutes, _search_query
from gateway.rest.shapes import check_enum_filters, shape_page

NULLABLE_STRING: dict[str, Any] = {"type": ["string", "null"]}
ELEMENT_STATISTICS = obj(
    {
        "items": {
            "type": "array",
            "items": obj(
                {
                    "elementId": STRING,
                    "active": INTEGER,
                    "canceled": INTEGER,
                    "incidents": INTEGER,
                    "completed": INTEGER,
                },
                "Element instances of one element: active (without an incident), canceled, with an active incident, "
                "completed (a multi-instance body is not counted apart from its inner instances)",
                required=["elementId", "active", "canceled", "incidents", "completed"],
            ),
        }
    },
    required=["items"],
)
STATISTICS_REQUEST: dict[str, Any] = {
    "type": "object",
    "description": "filter: the fields of a process instance search filter (state, hasIncident, startDate, "
    "variables, $or, …); instances of other definitions never count.",
    "properties": {"filter": ANY_OBJECT},
}
SEQUENCE_FLOWS = obj(
    {
        "items": {
            "type": "array",
            "items": obj(
                {
                    "sequenceFlowId": STRING,
                    "processInstanceKey": KEY,
                    "rootProcessInstanceKey": NULLABLE_STRING,
                    "processDefinitionKey": NULLABLE_STRING,
                    "processDefinitionId": NULLABLE_STRING,
                    "elementId": STRING,
                    "tenantId": STRING,
                },
                required=[
                    "sequenceFlowId",
                    "processInstanceKey",
                    "rootProcessInstanceKey",
                    "processDefinitionKey",
                    "processDefinitionId",
                    "elementId",
                    "tenantId",
                ],
            ),
        }
    },
    required=["items"],
)
CALL_HIERARCHY: dict[str, Any] = {
    "type": "array",
    "description": "The root instance first, down to the instance asked about",
    "items": obj(
        {"processInstanceKey": KEY, "processDefinitionKey": KEY, "processDefinitionName": STRING},
        required=["processInstanceKey", "processDefinitionKey", "processDefinitionName"],
    ),
}
FORM = obj(
    {"tenantId": STRING, "formId": STRING, "schema": STRING, "version": INTEGER, "formKey": KEY},
    required=["tenantId", "formId", "schema", "version", "formKey"],
)
RESOURCE = obj(
    {
        "resourceName": STRING,
        "version": INTEGER,
        "versionTag": NULLABLE_STRING,
        "resourceId": STRING,
        "tenantId": STRING,
        "resourceKey": KEY,
    },
    required=["resourceName", "version", "versionTag", "resourceId", "tenantId", "resourceKey"],
)
_RESOURCE_FIELDS = ("resourceName", "version", "versionTag", "resourceId", "tenantId", "resourceKey")


class OperateRoutes:
    """Reads over the history (through ``search``'s reader) and the cluster's status (through ``commands``)."""

    def __init__(self, commands: GatewayCommands, search: SearchRoutes) -> None:
        self.commands = commands
        self.search = search

    async def _read(self, method: str, *args: Any) -> Any:
        return await self.search.read(method, *args)

    # -- statistics ------------------------------------------------------------------------------------------

    async def definition_statistics(self, request: web.Request) -> web.Response:
        key = path_key(request, "processDefinitionKey")
        body = await _search_query(request) if request.method == "POST" else {}
        unknown = sorted(set(body) - {"filter"})
        if unknown:
            invalid(f"Unknown field(s) {', '.join(unknown)} in the statistics query; allowed: filter")
        check_enum_filters("process-instances", body)
        items = await self._read("process_definition_element_statistics", str(key), body)
        return json_response({"items": items})

    async def instance_statistics(self, request: web.Request) -> web.Response:
        key = path_key(request, "processInstanceKey")
        items = await self._read("process_instance_element_statistics", str(key))
        return json_response({"items": items})

    # -- one instance ----------------------------------------------------------------------------------------

    async def sequence_flows(self, request: web.Request) -> web.Response:
        key = path_key(request, "processInstanceKey")
        items = await self._read("sequence_flows", str(key))
        return json_response({"items": items})

    async def call_hierarchy(self, request: web.Request) -> web.Response:
        key = path_key(request, "processInstanceKey")
        chain = await self._read("call_hierarchy", str(key))
        if chain is None:
            _not_found("process instance", key)
        return json_response(chain)

    async def instance_incidents(self, request: web.Request) -> web.Response:
        key = path_key(request, "processInstanceKey")
        query = await _search_query(request)
        check_enum_filters("incidents", query)
        found = await self._read("search_instance_incidents", str(key), query)
        if found is None:
            _not_found("process instance", key)
        return json_response(shape_page(found, "incidents"))

    # -- decisions -------------------------------------------------------------------------------------------

    async def decision_definition_xml(self, request: web.Request) -> web.Response:
        key = path_key(request, "decisionDefinitionKey")
        xml = await self._read("decision_definition_xml", str(key))
        if xml is None:
            _not_found("decision definition", key)
        return web.Response(text=xml, content_type="text/xml")

    async def decision_requirements_xml(self, request: web.Request) -> web.Response:
        key = path_key(request, "decisionRequirementsKey")
        xml = await self._read("decision_requirements_xml", str(key))
        if xml is None:
            _not_found("decision requirements", key)
        return web.Response(text=xml, content_type="text/xml")

    # -- resources and forms ---------------------------------------------------------------------------------

    async def _resource(self, request: web.Request) -> dict[str, Any]:
        key = path_key(request, "resourceKey")
        found = await self._read("resource", str(key))
        if found is None:
            _not_found("resource", key)
        return found

    async def resource(self, request: web.Request) -> web.Response:
        found = await self._resource(request)
        return json_response({name: found[name] for name in _RESOURCE_FIELDS})

    async def resource_content(self, request: web.Request) -> web.Response:
        found = await self._resource(request)
        key = found["resourceKey"]
        if found["kind"] != "form":
            # the content is answered as a JSON document; BPMN and DMN are XML, served by their own endpoints
            xml_path = {"bpmn": "process-definitions", "dmn": "decision-requirements"}[found["kind"]]
            detail = f"The resource with key '{key}' is XML, not a JSON document: get it from /v2/{xml_path}/{key}/xml"
            return problems.problem(406, "NOT_ACCEPTABLE", detail, request.path)
        try:
            content = json.loads(found["content"] or "")
        except ValueError:
            fail(ErrorCode.INTERNAL, f"The form with key '{key}' holds no JSON document")
        return json_response(content)

    async def user_task_form(self, request: web.Request) -> web.Response:
        key = path_key(request, "userTaskKey")
        known, form_key = await self._read("user_task_form_key", str(key))
        if not known:
            _not_found("user task", key)
        return await self._form(form_key)

    async def start_form(self, request: web.Request) -> web.Response:
        key = path_key(request, "processDefinitionKey")
        known, form_key = await self._read("start_form_key", str(key))
        if not known:
            _not_found("process definition", key)
        return await self._form(form_key)

    async def _form(self, form_key: int | None) -> web.Response:
        """The linked form, or 204 when none is linked (embedded and external forms are not served, as in
        Camunda)."""
        if form_key is None:
            return web.Response(status=204)
        form = await self._read("form", form_key)
        if form is None:
            fail(ErrorCode.NOT_FOUND, f"Expected to find the linked form with key '{form_key}', but it is not known")
        return json_response(form)

    # -- the cluster -----------------------------------------------------------------------------------------

    async def status(self, request: web.Request) -> web.Response:
        """204 when some partition has a healthy leader; else 503."""
        topology = self.commands.topology()
        if any(p.role == "LEADER" and p.healthy for b in topology.brokers for p in b.partitions):
            return web.Response(status=204)
        fail(ErrorCode.UNAVAILABLE, "No partition has a healthy leader: see GET /v2/topology")

    # -- the registry ----------------------------------------------------------------------------------------

    def endpoints(self) -> list[Endpoint]:
        pd, pi = "Process definition", "Process instance"
        xml: dict[int, tuple[str, dict[str, Any] | None]] = {200: ("The XML", {"type": "string"})}
        form = {200: ("The linked form", FORM), 204: ("No form is linked (or an embedded or external one)", None)}
        return [
            Endpoint(
                "POST",
                "/v2/process-definitions/{processDefinitionKey}/statistics/element-instances",
                "Element instance statistics of a process definition",
                self.definition_statistics,
                pd,
                raw_body=STATISTICS_REQUEST,
                responses={200: ("Per element, over the instances the filter matches", ELEMENT_STATISTICS)},
                description="Answered from the history store.",
            ),
            Endpoint(
                "GET",
                "/v2/process-definitions/{processDefinitionKey}/statistics/element-instances",
                "Element instance statistics of a process definition, over all its instances",
                self.definition_statistics,
                pd,
                responses={200: ("Per element", ELEMENT_STATISTICS)},
                description="The POST form without a filter.",
            ),
            Endpoint(
                "GET",
                "/v2/process-instances/{processInstanceKey}/statistics/element-instances",
                "Element instance statistics of a process instance",
                self.instance_statistics,
                pi,
                responses={200: ("Per element", ELEMENT_STATISTICS)},
            ),
            Endpoint(
                "GET",
                "/v2/process-instances/{processInstanceKey}/sequence-flows",
                "The sequence flows a process instance took (each once)",
                self.sequence_flows,
                pi,
                responses={200: ("The sequence flows", SEQUENCE_FLOWS)},
            ),
            Endpoint(
                "GET",
                "/v2/process-instances/{processInstanceKey}/call-hierarchy",
                "The instances that called a process instance, from the root down to it",
                self.call_hierarchy,
                pi,
                responses={200: ("The call hierarchy", CALL_HIERARCHY)},
                errors=(404,),
            ),
            Endpoint(
                "POST",
                "/v2/process-instances/{processInstanceKey}/incidents/search",
                "Search the incidents of a process instance and of the instances it called",
                self.instance_incidents,
                pi,
                raw_body=SEARCH_REQUEST,
                responses={200: ("The matching incidents", SEARCH_RESPONSE)},
                errors=(404,),
                description="A filter's processInstanceKey narrows them to one instance of the tree. "
                f"{SEARCH_REQUEST['description']}",
            ),
            Endpoint(
                "GET",
                "/v2/decision-definitions/{decisionDefinitionKey}/xml",
                "The DMN XML of the decision requirements graph a decision is part of",
                self.decision_definition_xml,
                "Decision definition",
                responses=xml,
                errors=(404,),
                content_type="text/xml",
            ),
            Endpoint(
                "GET",
                "/v2/decision-requirements/{decisionRequirementsKey}/xml",
                "The DMN XML of a decision requirements graph",
                self.decision_requirements_xml,
                "Decision requirements",
                responses=xml,
                errors=(404,),
                content_type="text/xml",
            ),
            Endpoint(
                "GET",
                "/v2/resources/{resourceKey}",
                "A deployed resource: a process definition, a decision requirements graph or a form",
                self.resource,
                "Resource",
                responses={200: ("The resource", RESOURCE)},
                errors=(404,),
                description="Camunda serves RPA resources here; Weir has none and serves the resources it deploys.",
            ),
            Endpoint(
                "GET",
                "/v2/resources/{resourceKey}/content",
                "The content of a deployed form, as its JSON document",
                self.resource_content,
                "Resource",
                responses={200: ("The content", ANY_OBJECT)},
                errors=(404, 406),
                description="BPMN and DMN resources are XML (406): their /xml endpoints serve them.",
            ),
            Endpoint(
                "GET",
                "/v2/user-tasks/{userTaskKey}/form",
                "The form linked to a user task",
                self.user_task_form,
                "User task",
                responses=form,
                errors=(404,),
            ),
            Endpoint(
                "GET",
                "/v2/process-definitions/{processDefinitionKey}/form",
                "The form linked to a process's start event",
                self.start_form,
                pd,
                responses=form,
                errors=(404,),
            ),
            Endpoint(
                "GET",
                "/v2/status",
                "Whether the cluster can take requests: 204 when a partition has a healthy leader, else 503",
                self.status,
                "Cluster",
                responses={204: ("A partition has a healthy leader", None)},
            ),
        ]


def _not_found(noun: str, key: int) -> NoReturn:
    fail(ErrorCode.NOT_FOUND, f"Expected to find the {noun} with key '{key}', but it is not in the history")
