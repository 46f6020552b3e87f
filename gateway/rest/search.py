"""Search endpoints of the REST API, answered from the history store (exporters/history): what ran and what is
running, and the cluster's identity (users, groups, roles, tenants, mapping rules, authorizations and who is a
member of what), with filters, sort and cursor paging as in Camunda's v2 search requests.

The gateway opens the store read-only through ``exporters.history.reader.open_reader(url)``; without a store (no
URL configured) every search endpoint answers 503 naming the setting to add.

Every read is kept to what its caller may see (:meth:`SearchRoutes.scope`): with authentication on, the directory's
:class:`~gateway.directory.CallerAccess` of the caller becomes the reader's scope, an extra SQL condition on each
query, so totals and pages count only visible rows and a get of an invisible item is the 404 of a missing one.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

from aiohttp import web

from exporters.history.query import decode_cursor, encode_cursor
from exporters.history.reader import InvalidQuery
from exporters.history.scope import EVERYTHING, Scope
from gateway.caller import CALLER
from gateway.commands import CommandError, ErrorCode, fail, invalid
from gateway.directory import Directory
from gateway.rest.endpoints import ANY_OBJECT, INTEGER, Endpoint, obj
from gateway.rest.policy import RestPolicy
from gateway.rest.routes import json_response, read_json_value
from gateway.rest.schema import parse_key
from gateway.rest.shapes import check_enum_filters, shape_item, shape_page

log = logging.getLogger("weir.gateway.rest")

#: Entity (path segment) → (the path parameter naming its key, a human name, the OpenAPI tag).
ENTITIES: dict[str, tuple[str, str, str]] = {
    "process-definitions": ("processDefinitionKey", "process definition", "Process definition"),
    "process-instances": ("processInstanceKey", "process instance", "Process instance"),
    "element-instances": ("elementInstanceKey", "element instance", "Element instance"),
    "variables": ("variableKey", "variable", "Variable"),
    "incidents": ("incidentKey", "incident", "Incident"),
    "jobs": ("jobKey", "job", "Job"),
    "user-tasks": ("userTaskKey", "user task", "User task"),
    "decision-instances": ("decisionEvaluationInstanceKey", "decision instance", "Decision instance"),
    "decision-definitions": ("decisionDefinitionKey", "decision definition", "Decision definition"),
    "decision-requirements": ("decisionRequirementsKey", "decision requirements", "Decision requirements"),
    "authorizations": ("authorizationKey", "authorization", "Authorization"),
}
#: Identities (Camunda 8.8), read by their id rather than a key: path segment → (the path parameter naming the id,
#: a human name, the OpenAPI tag).
IDENTITIES: dict[str, tuple[str, str, str]] = {
    "users": ("username", "user", "User"),
    "groups": ("groupId", "group", "Group"),
    "roles": ("roleId", "role", "Role"),
    "tenants": ("tenantId", "tenant", "Tenant"),
    "mapping-rules": ("mappingRuleId", "mapping rule", "Mapping rule"),
}
#: The member searches of groups, roles and tenants (Camunda 8.8): (container segment, member segment) →
#: (container kind, member type, a human name of the members).
MEMBER_SEARCHES: dict[tuple[str, str], tuple[str, str, str]] = {
    ("groups", "users"): ("GROUP", "USER", "users"),
    ("groups", "clients"): ("GROUP", "CLIENT", "clients"),
    ("groups", "mapping-rules"): ("GROUP", "MAPPING_RULE", "mapping rules"),
    ("roles", "users"): ("ROLE", "USER", "users"),
    ("roles", "clients"): ("ROLE", "CLIENT", "clients"),
    ("roles", "groups"): ("ROLE", "GROUP", "groups"),
    ("roles", "mapping-rules"): ("ROLE", "MAPPING_RULE", "mapping rules"),
    ("tenants", "users"): ("TENANT", "USER", "users"),
    ("tenants", "clients"): ("TENANT", "CLIENT", "clients"),
    ("tenants", "groups"): ("TENANT", "GROUP", "groups"),
    ("tenants", "roles"): ("TENANT", "ROLE", "roles"),
    ("tenants", "mapping-rules"): ("TENANT", "MAPPING_RULE", "mapping rules"),
}
#: The shape of each member type's items: users, clients and groups by id only, roles and mapping rules whole.
_MEMBER_SHAPES = {
    "USER": "member-users",
    "CLIENT": "member-clients",
    "GROUP": "member-groups",
    "ROLE": "roles",
    "MAPPING_RULE": "mapping-rules",
}
#: Entities keyed by text rather than by a 64-bit key: a decision instance is ``<decisionEvaluationKey>-<position>``.
_TEXT_KEYS: dict[str, re.Pattern[str]] = {"decision-instances": re.compile(r"[0-9]{1,19}-[0-9]{1,9}")}

SEARCH_REQUEST: dict[str, Any] = {
    "type": "object",
    "description": "A v2 search query: filter (fields of the entity), sort ([{field, order}]) and page "
    "({limit, after | before | from}).",
    "properties": {
        "filter": ANY_OBJECT,
        "sort": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "order": {"type": "string", "enum": ["ASC", "DESC"]}},
                "required": ["field"],
            },
        },
        "page": {
            "type": "object",
            "properties": {
                "limit": {"type": "integer", "minimum": 1, "maximum": 10000},
                "from": {"type": "integer", "minimum": 0},
                "after": {"type": "string"},
                "before": {"type": "string"},
            },
        },
    },
}
#: ``?truncateValues=false`` on a variable search: whole values instead of previews (Camunda's query parameter).
TRUNCATE_VALUES: dict[str, Any] = {
    "name": "truncateValues",
    "in": "query",
    "required": False,
    "description": "When true (the default), long variable values in the response are truncated (isTruncated); "
    "when false, full values are returned, and the page ends early (fewer items than the limit, its endCursor "
    "continuing) where the values would exceed gateway.rest.maxResponseBytes.",
    "schema": {"type": "boolean"},
}
#: Entities whose searches take ``truncateValues``.
_TRUNCATING = frozenset({"variables"})

_Page = TypeVar("_Page", dict[str, Any], dict[str, Any] | None)
"""A search page, or None where the search can find nothing to page (a user task not in the history)."""


def truncate_values(request: web.Request) -> bool:
    """The ``truncateValues`` query parameter (true when absent)."""
    raw = request.query.get("truncateValues")
    if raw is None:
        return True
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    invalid(f"Expected the query parameter 'truncateValues' to be true or false, but it is '{raw}'")


SEARCH_RESPONSE = obj(
    {
        "items": {"type": "array", "items": ANY_OBJECT},
        "page": obj(
            {
                "totalItems": INTEGER,
                "hasMoreTotalItems": {"type": "boolean", "description": "Whether totalItems is a lower bound"},
                "startCursor": {"type": ["string", "null"]},
                "endCursor": {"type": ["string", "null"]},
            }
        ),
    },
    required=["items", "page"],
)


class SearchRoutes:
    """Search and get-by-key endpoints over a history reader (None: no store configured).

    ``authentication``: whether callers sign in (then each read asks ``directory`` what its caller may see; without
    a directory such reads are refused with 503 rather than answered unfiltered).
    """

    def __init__(
        self,
        history_url: str | None,
        *,
        setting: str,
        policy: RestPolicy | None = None,
        directory: Directory | None = None,
        authentication: bool = False,
    ) -> None:
        self.history_url = history_url
        self.setting = setting
        self.directory = directory
        self.authentication = authentication
        self._reader: Any = None
        self.policy = policy or RestPolicy()
        #: searches with whole values running; more wait (then 503), so their memory stays bounded
        self._large = asyncio.Semaphore(self.policy.max_large_responses)

    async def close(self) -> None:
        if self._reader is not None:
            await self._reader.close()
            self._reader = None

    def _open(self) -> Any:
        if self._reader is not None:
            return self._reader
        if not self.history_url:
            fail(
                ErrorCode.UNAVAILABLE,
                f"Searching needs the history store, and this gateway has none: set {self.setting} "
                "(sqlite:///path/history.db or postgresql://…) to the history exporter's database",
            )
        from exporters.history.reader import open_reader

        try:
            self._reader = open_reader(self.history_url)
        except Exception as e:
            fail(ErrorCode.UNAVAILABLE, f"Cannot open the history store {self.setting}: {e}")
        return self._reader

    async def read(self, method: str, *args: Any) -> Any:
        """Call a history reader method within the caller's scope: 503 without a store or when it fails, 400 for a
        query it refuses."""
        return await self._call(method, *args)

    async def scope(self) -> Scope:
        """What the caller of this request may read (:data:`gateway.caller.CALLER`): everything with authentication
        off; else its tenants and, with authorizations enabled, what its grants cover (as the directory has them, at
        most identityCacheTtl old)."""
        if not self.authentication:
            return EVERYTHING
        caller = CALLER.get()
        if caller is None:
            fail(ErrorCode.UNAUTHENTICATED, "Reading the history needs a signed-in caller")
        if self.directory is None:
            fail(
                ErrorCode.UNAVAILABLE,
                "This gateway cannot ask the cluster who its callers are, so it cannot tell what they may read",
            )
        try:
            access = await self.directory.access(caller)
        except CommandError:
            raise
        except Exception as e:
            fail(ErrorCode.UNAVAILABLE, f"Cannot tell what the caller may read, the cluster did not answer: {e}")
        return access.scope()

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        reader = self._open()
        scope = await self.scope()
        try:
            return await getattr(reader, method)(*args, scope=scope, **kwargs)
        except CommandError:
            raise
        except InvalidQuery as e:
            invalid(str(e))
        except Exception as e:
            log.exception("history store %s failed", method)
            fail(ErrorCode.UNAVAILABLE, f"The history store could not answer: {e}")

    def _search_handler(self, entity: str) -> Any:
        async def search(request: web.Request) -> web.Response:
            query = await _search_query(request)
            check_enum_filters(entity, query)
            if entity in _TRUNCATING and not truncate_values(request):
                found: dict[str, Any] = await self._whole_values(lambda: self._call("search", entity, query))
            else:
                found = await self._call("search", entity, query)
            return json_response(shape_page(found, entity))

        return search

    async def user_task_variables(self, request: web.Request) -> web.Response:
        key = parse_key("userTaskKey", request.match_info["userTaskKey"])
        truncate = truncate_values(request)
        query = await _search_query(request)

        async def previews() -> dict[str, Any] | None:
            return await self._call("search_user_task_variables", str(key), query)

        found = await (previews() if truncate else self._whole_values(previews))
        if found is None:
            fail(ErrorCode.NOT_FOUND, f"Expected to find the user task with key '{key}', but it is not in the history")
        return json_response(shape_page(found, "user-task-variables"))

    async def _whole_values(self, previews: Callable[[], Awaitable[_Page]]) -> _Page:
        """A variable search with whole values, within gateway.rest.maxResponseBytes of values.

        The search runs with previews; then the cut values are fetched one by one until the next would pass the
        bound, and the page ends there (its endCursor continues after the last item; at least one item is given).
        Only maxConcurrentLargeResponses of these run at once; a search waiting longer than the body timeout for its
        turn is refused (503), so the memory whole values take stays bounded.
        """
        try:
            async with asyncio.timeout(self.policy.body_timeout):
                await self._large.acquire()
        except TimeoutError:
            fail(
                ErrorCode.RESOURCE_EXHAUSTED,
                f"{self.policy.max_large_responses} searches with truncateValues=false are running "
                "(gateway.rest.maxConcurrentLargeResponses); retry later, or search with truncateValues=true",
            )
        try:
            result = await previews()
            if result is None:
                return None
            items: list[dict[str, Any]] = result["items"]
            budget = self.policy.max_response_bytes
            for i, item in enumerate(items):
                if item.get("isTruncated"):
                    whole = await self._call("get", "variables", item["variableKey"])
                    if whole is not None:
                        item["value"], item["isTruncated"] = whole["value"], False
                budget -= len(str(item.get("value", "")).encode())
                if budget < 0 and i > 0:
                    del items[i:]
                    start = decode_cursor(result["page"]["startCursor"], "startCursor")
                    result["page"]["endCursor"] = encode_cursor(start + i - 1)
                    break
            return result
        finally:
            self._large.release()

    def _get_handler(self, entity: str) -> Any:
        param, noun, _ = ENTITIES[entity]

        async def get(request: web.Request) -> web.Response:
            key = _path_key(entity, param, request.match_info[param])
            found = await self._call("get", entity, key)
            if found is None:
                fail(ErrorCode.NOT_FOUND, f"Expected to find the {noun} with key '{key}', but it is not in the history")
            return json_response(shape_item(entity, found, by_key=True))

        return get

    # -- identity ------------------------------------------------------------------------------------------------

    def _identity_get_handler(self, entity: str) -> Any:
        param, noun, _ = IDENTITIES[entity]

        async def get(request: web.Request) -> web.Response:
            entity_id = _path_id(param, request.match_info[param])
            found = await self._call("get", entity, entity_id)
            if found is None:
                _unknown(noun, param, entity_id)
            return json_response(shape_item(entity, found, by_key=True))

        return get

    def _members_handler(self, container: str, members: str) -> Any:
        param, noun, _ = IDENTITIES[container]
        kind, member_type, _ = MEMBER_SEARCHES[(container, members)]

        async def search(request: web.Request) -> web.Response:
            container_id = _path_id(param, request.match_info[param])
            query = await _search_query(request)
            found = await self._call("search_members", kind, container_id, member_type, query)
            if found is None:
                _unknown(noun, param, container_id)
            return json_response(shape_page(found, _MEMBER_SHAPES[member_type]))

        return search

    async def group_roles(self, request: web.Request) -> web.Response:
        """The roles a group is a member of."""
        group_id = _path_id("groupId", request.match_info["groupId"])
        query = await _search_query(request)
        found = await self._call("search_containers", "ROLE", "GROUP", group_id, query)
        if found is None:
            _unknown("group", "groupId", group_id)
        return json_response(shape_page(found, "roles"))

    def _identity_endpoints(self) -> list[Endpoint]:
        found: list[Endpoint] = []
        for entity, (param, noun, tag) in IDENTITIES.items():
            found.append(
                Endpoint(
                    "POST",
                    f"/v2/{entity}/search",
                    f"Search {noun}s in the history",
                    self._search_handler(entity),
                    tag,
                    responses={200: (f"The matching {noun}s", SEARCH_RESPONSE)},
                    description=f"Answered from the history store; {SEARCH_REQUEST['description']}",
                    raw_body=SEARCH_REQUEST,
                )
            )
            found.append(
                Endpoint(
                    "GET",
                    f"/v2/{entity}/{{{param}}}",
                    f"Get a {noun} from the history",
                    self._identity_get_handler(entity),
                    tag,
                    responses={200: (f"The {noun}", ANY_OBJECT)},
                    errors=(404,),
                )
            )
        for (container, members), (_, _, what) in MEMBER_SEARCHES.items():
            param, noun, tag = IDENTITIES[container]
            found.append(
                Endpoint(
                    "POST",
                    f"/v2/{container}/{{{param}}}/{members}/search",
                    f"Search the {what} of a {noun} in the history",
                    self._members_handler(container, members),
                    tag,
                    responses={200: (f"The matching {what}", SEARCH_RESPONSE)},
                    description=f"Answered from the history store; 404 when it has no such {noun}. "
                    f"{SEARCH_REQUEST['description']}",
                    raw_body=SEARCH_REQUEST,
                    errors=(404,),
                )
            )
        found.append(
            Endpoint(
                "POST",
                "/v2/groups/{groupId}/roles/search",
                "Search the roles a group is a member of in the history",
                self.group_roles,
                "Group",
                responses={200: ("The matching roles", SEARCH_RESPONSE)},
                description=f"Answered from the history store; 404 when it has no such group. "
                f"{SEARCH_REQUEST['description']}",
                raw_body=SEARCH_REQUEST,
                errors=(404,),
            )
        )
        return found

    async def process_definition_xml(self, request: web.Request) -> web.Response:
        key = parse_key("processDefinitionKey", request.match_info["processDefinitionKey"])
        xml = await self._call("process_definition_xml", str(key))
        if xml is None:
            fail(ErrorCode.NOT_FOUND, f"Expected to find the process definition with key '{key}', but it is not known")
        return web.Response(text=xml, content_type="text/xml")

    def endpoints(self) -> list[Endpoint]:
        found: list[Endpoint] = []
        for entity, (param, noun, tag) in ENTITIES.items():
            found.append(
                Endpoint(
                    "POST",
                    f"/v2/{entity}/search",
                    f"Search {noun}s in the history",
                    self._search_handler(entity),
                    tag,
                    responses={200: (f"The matching {noun}s", SEARCH_RESPONSE)},
                    description=f"Answered from the history store; {SEARCH_REQUEST['description']}",
                    raw_body=SEARCH_REQUEST,
                    query_params=(TRUNCATE_VALUES,) if entity in _TRUNCATING else (),
                )
            )
            found.append(
                Endpoint(
                    "GET",
                    f"/v2/{entity}/{{{param}}}",
                    f"Get a {noun} from the history",
                    self._get_handler(entity),
                    tag,
                    responses={200: (f"The {noun}", ANY_OBJECT)},
                    errors=(404,),
                )
            )
        found.append(
            Endpoint(
                "POST",
                "/v2/user-tasks/{userTaskKey}/variables/search",
                "Search the variables a user task sees in the history",
                self.user_task_variables,
                "User task",
                responses={200: ("The matching variables", SEARCH_RESPONSE)},
                description="The variables of the task's element and of every enclosing scope up to its process "
                f"instance, answered from the history store; filter by name only. {SEARCH_REQUEST['description']}",
                raw_body=SEARCH_REQUEST,
                errors=(404,),
                query_params=(TRUNCATE_VALUES,),
            )
        )
        found.append(
            Endpoint(
                "GET",
                "/v2/process-definitions/{processDefinitionKey}/xml",
                "The BPMN XML of a process definition",
                self.process_definition_xml,
                "Process definition",
                responses={200: ("The BPMN XML", {"type": "string"})},
                errors=(404,),
                content_type="text/xml",
            )
        )
        found.extend(self._identity_endpoints())
        return found


def _path_key(entity: str, param: str, raw: str) -> str:
    """The key in a get-by-key path, checked (400 when it cannot be one)."""
    pattern = _TEXT_KEYS.get(entity)
    if pattern is None:
        return str(parse_key(param, raw))
    if not pattern.fullmatch(raw):
        invalid(
            f"Expected '{param}' to be <decisionEvaluationKey>-<position> (e.g. 2251799813685354-1), but got '{raw}'"
        )
    return raw


def _path_id(param: str, raw: str) -> str:
    """An identity's id from a path (400 when it is not text a history store can look up)."""
    try:
        raw.encode()
    except UnicodeEncodeError:
        invalid(f"Expected '{param}' to be text, but it holds a lone surrogate (\\ud800-\\udfff)")
    return raw


def _unknown(noun: str, param: str, entity_id: str) -> NoReturn:
    fail(ErrorCode.NOT_FOUND, f"Expected to find the {noun} with {param} '{entity_id}', but it is not in the history")


async def _search_query(request: web.Request) -> dict[str, Any]:
    """The JSON search query of a request body (an empty body: the empty query)."""
    query = await read_json_value(request)
    if query is None:
        return {}
    if not isinstance(query, dict):
        invalid("Expected the search query to be a JSON object")
    _check_values(query)
    return query


#: The largest integer a history store column or a page offset holds (SQL BIGINT).
MAX_INTEGER = 2**63 - 1
#: The largest page offset (``from`` or a cursor's): an offset plus a page stays a BIGINT.
MAX_OFFSET = 2**62


def _check_values(query: dict[str, Any]) -> None:
    """Values no history store can take are the client's error (400), not the store's: integers beyond 64 bits,
    page offsets beyond MAX_OFFSET (``from`` and the offset a cursor holds) and text that is not Unicode."""
    pending: list[tuple[str, Any]] = [("", query)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, dict):
            pending.extend((f"{path}.{k}" if path else k, v) for k, v in value.items())
        elif isinstance(value, list):
            pending.extend((f"{path}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INTEGER:
            invalid(f"{path}: expected an integer of at most 64 bits, got {value}")
        elif isinstance(value, str):
            try:
                value.encode()
            except UnicodeEncodeError:
                invalid(f"{path}: expected text, but it holds a lone surrogate (\\ud800-\\udfff)")
    page = query.get("page")
    if not isinstance(page, dict):
        return
    offsets = {"page.from": page.get("from")}
    for name in ("after", "before"):
        if isinstance(page.get(name), str):
            try:
                offsets[f"page.{name}"] = decode_cursor(page[name], f"page.{name}")
            except InvalidQuery as e:
                invalid(str(e))
    for name, offset in offsets.items():
        if isinstance(offset, int) and offset > MAX_OFFSET:
            invalid(f"{name}: expected an offset of at most {MAX_OFFSET}, got {offset}")
