"""See and steer what runs: instances, one instance, incidents, jobs; resolve, cancel, publish.

What runs is read from the gateway's REST API v2 (``--rest-address``, default ``WEIR_REST_ADDRESS`` or
``http://127.0.0.1:8080``), whose searches answer from the history store; the commands that change something
(resolve, cancel, publish) go over the gateway's gRPC API like ``weir create``. Each prints a readable table, or the
API's JSON with ``--output json``.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

DEFAULT_REST_ADDRESS = "http://127.0.0.1:8080"
REST_ADDRESS_ENV = "WEIR_REST_ADDRESS"
PAGE_SIZE = 100


class RestError(Exception):
    """The REST API could not be reached or refused the request; the message says which and why."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status, None when the API could not be reached


class RestClient:
    """Just enough of the REST API v2 for the inspection commands: JSON in, JSON out, cursor paging."""

    def __init__(self, address: str, authorization: str, timeout: float, ca_cert: str | None = None):
        self.address = address.rstrip("/")
        if "://" not in self.address:
            self.address = "http://" + self.address
        self.authorization = authorization
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=ca_cert) if self.address.startswith("https:") else None

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.address + path, data=data, method=method)
        request.add_header("accept", "application/json")
        if data is not None:
            request.add_header("content-type", "application/json")
        if self.authorization:
            request.add_header("authorization", self.authorization)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as response:
                text = response.read()
        except urllib.error.HTTPError as e:
            raise RestError(f"{method} {path} answered {e.code}: {_problem(e)}", e.code) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise RestError(
                f"cannot reach the REST API at {self.address} ({reason}); pass --rest-address or set {REST_ADDRESS_ENV}"
            ) from None
        return json.loads(text) if text else None

    def search(
        self, entity: str, filter_: dict[str, Any], sort: list[dict[str, str]] | None = None, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` items of a search, following the cursor from page to page."""
        items: list[dict[str, Any]] = []
        after: str | None = None
        while len(items) < limit:
            page: dict[str, Any] = {"limit": min(PAGE_SIZE, limit - len(items))}
            if after:
                page["after"] = after
            body: dict[str, Any] = {"filter": filter_, "page": page}
            if sort:
                body["sort"] = sort
            result = self.call("POST", f"/v2/{entity}/search", body)
            batch = result.get("items") or []
            items.extend(batch)
            after = (result.get("page") or {}).get("endCursor")
            total = (result.get("page") or {}).get("totalItems")
            if not batch or not after or (total is not None and len(items) >= total):
                break
        return items


def _problem(error: urllib.error.HTTPError) -> str:
    """The detail of an RFC 9457 problem answer, or the raw body."""
    body = error.read().decode(errors="replace")
    try:
        problem = json.loads(body)
        return str(problem.get("detail") or problem.get("title") or body)
    except (ValueError, AttributeError):
        return body or str(error.reason)


def _rest(args: argparse.Namespace) -> RestClient:
    from client.cli import authorization_header

    address = args.rest_address or os.environ.get(REST_ADDRESS_ENV) or DEFAULT_REST_ADDRESS
    ca_cert = args.ca_cert or os.environ.get("ZEEBE_CA_CERTIFICATE_PATH")
    return RestClient(address, authorization_header(args), args.timeout, ca_cert)


# -- output ---------------------------------------------------------------------------------------------------

Column = tuple[str, Callable[[dict[str, Any]], Any]]


def print_table(columns: Sequence[Column], rows: Sequence[dict[str, Any]], empty: str, indent: str = "") -> None:
    """Left-aligned columns as wide as their widest cell; long cells are cut so a row stays on one line."""
    if not rows:
        print(indent + empty)
        return
    cells = [[_cell(get(row)) for _, get in columns] for row in rows]
    widths = [max(len(title), *(len(r[i]) for r in cells)) for i, (title, _) in enumerate(columns)]
    print(indent + "  ".join(title.ljust(w) for (title, _), w in zip(columns, widths, strict=True)).rstrip())
    for r in cells:
        print(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def _cell(value: Any, width: int = 60) -> str:
    text = "" if value is None else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2))


def _state(item: dict[str, Any]) -> str:
    return str(item.get("state", "")) + (" (incident)" if item.get("hasIncident") else "")


# -- commands -------------------------------------------------------------------------------------------------

INSTANCE_COLUMNS: list[Column] = [
    ("KEY", lambda i: i.get("processInstanceKey")),
    ("PROCESS", lambda i: i.get("processDefinitionId")),
    ("VERSION", lambda i: i.get("processDefinitionVersion")),
    ("STATE", _state),
    ("STARTED", lambda i: i.get("startDate")),
    ("ENDED", lambda i: i.get("endDate")),
]

INCIDENT_COLUMNS: list[Column] = [
    ("KEY", lambda i: i.get("incidentKey")),
    ("INSTANCE", lambda i: i.get("processInstanceKey")),
    ("ELEMENT", lambda i: i.get("elementId")),
    ("TYPE", lambda i: i.get("errorType")),
    ("STATE", lambda i: i.get("state")),
    ("JOB", lambda i: i.get("jobKey")),
    ("MESSAGE", lambda i: i.get("errorMessage")),
]

VARIABLE_COLUMNS: list[Column] = [
    ("NAME", lambda v: v.get("name")),
    ("VALUE", lambda v: v.get("value")),
    ("SCOPE", lambda v: "process" if v.get("scopeKey") == v.get("processInstanceKey") else v.get("scopeKey")),
]

JOB_COLUMNS: list[Column] = [
    ("KEY", lambda j: j.get("jobKey")),
    ("TYPE", lambda j: j.get("type")),
    ("STATE", lambda j: j.get("state")),
    ("RETRIES", lambda j: j.get("retries")),
    ("WORKER", lambda j: j.get("worker")),
    ("INSTANCE", lambda j: j.get("processInstanceKey")),
    ("ELEMENT", lambda j: j.get("elementId")),
    ("ERROR", lambda j: j.get("errorMessage")),
]


def cmd_instances(args: argparse.Namespace) -> int:
    filter_: dict[str, Any] = {}
    if args.state:
        filter_["state"] = args.state
    if args.process:
        filter_["processDefinitionId"] = args.process
    items = _rest(args).search("process-instances", filter_, [{"field": "startDate", "order": "DESC"}], args.limit)
    if args.output == "json":
        _print_json(items)
    else:
        print_table(INSTANCE_COLUMNS, items, "No process instances.")
    return 0


def cmd_instance(args: argparse.Namespace) -> int:
    rest = _rest(args)
    key = args.key
    instance = rest.call("GET", f"/v2/process-instances/{key}")
    elements = rest.search("element-instances", {"processInstanceKey": key}, [{"field": "startDate"}])
    variables = rest.search("variables", {"processInstanceKey": key}, [{"field": "name"}])
    incidents = rest.search("incidents", {"processInstanceKey": key})
    if args.output == "json":
        _print_json({"instance": instance, "elements": elements, "variables": variables, "incidents": incidents})
        return 0
    tree = element_tree(rest, key, elements)
    print(
        f"Instance {key} of {instance.get('processDefinitionId')} v{instance.get('processDefinitionVersion')}: "
        f"{_state(instance)}, started {instance.get('startDate')}"
        + (f", ended {instance.get('endDate')}" if instance.get("endDate") else "")
    )
    print("\nElements:")
    for line in tree:
        print("  " + line)
    print("\nVariables:")
    print_table(VARIABLE_COLUMNS, variables, "(none)", indent="  ")
    print("\nIncidents:")
    print_table(INCIDENT_COLUMNS, incidents, "(none)", indent="  ")
    return 0


# Element instances that contain others in the same process instance (a call activity's run in their own).
CONTAINERS = frozenset({"PROCESS", "SUB_PROCESS", "EVENT_SUB_PROCESS", "AD_HOC_SUB_PROCESS", "MULTI_INSTANCE_BODY"})


def element_tree(rest: RestClient, instance_key: str, elements: list[dict[str, Any]]) -> list[str]:
    """One line per element instance, indented under the one that contains it.

    The containment comes from ``elementInstanceScopeKey`` searches (the immediate children of a scope), one per
    container, as Operate builds its instance history tree. A REST API without that filter (before Camunda 8.8)
    refuses it with 400: the elements are then listed flat, in the order they started.
    """
    lines: list[str] = []
    process = next((e for e in elements if e.get("type") == "PROCESS"), None)

    def line(e: dict[str, Any], depth: int) -> None:
        name = e.get("elementName") or e.get("elementId")
        lines.append("  " * depth + f"{name} [{e.get('type')}] {_state(e)}  (key {e.get('elementInstanceKey')})")

    def walk(scope: str, depth: int) -> None:
        children = rest.search("element-instances", {"elementInstanceScopeKey": scope}, [{"field": "startDate"}])
        for child in children:
            line(child, depth)
            if child.get("type") in CONTAINERS:
                walk(str(child["elementInstanceKey"]), depth + 1)

    if process is not None:
        line(process, 0)
    try:
        walk(str(instance_key), 1 if process is not None else 0)
    except RestError as error:
        if error.status != 400:
            raise
        lines.clear()
        for element in elements:
            line(element, 0)
    return lines or ["(none)"]


def cmd_incidents(args: argparse.Namespace) -> int:
    filter_: dict[str, Any] = {} if args.all else {"state": "ACTIVE"}
    if args.instance:
        filter_["processInstanceKey"] = args.instance
    items = _rest(args).search("incidents", filter_, [{"field": "creationTime", "order": "DESC"}], args.limit)
    if args.output == "json":
        _print_json(items)
    else:
        print_table(INCIDENT_COLUMNS, items, "No open incidents." if not args.all else "No incidents.")
    return 0


def cmd_jobs(args: argparse.Namespace) -> int:
    filter_: dict[str, Any] = {}
    if args.state:
        filter_["state"] = args.state
    if args.type:
        filter_["type"] = args.type
    if args.instance:
        filter_["processInstanceKey"] = args.instance
    items = _rest(args).search("jobs", filter_, None, args.limit)
    if args.output == "json":
        _print_json(items)
    else:
        print_table(JOB_COLUMNS, items, "No jobs.")
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    """Resolve an incident as Operate retries one: a job out of retries gets ``--retries`` back first."""
    from client.cli import _stub
    from gateway.api import gateway_pb2 as pb

    stub = _stub(args)
    job_key = args.job
    if job_key is None and not args.no_lookup:
        incident = _rest(args).call("GET", f"/v2/incidents/{args.key}")
        if incident.get("jobKey") and str(incident.get("errorType", "")).endswith("NO_RETRIES"):
            job_key = int(incident["jobKey"])
    if job_key is not None:
        stub.UpdateJobRetries(pb.UpdateJobRetriesRequest(jobKey=job_key, retries=args.retries), timeout=args.timeout)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=args.key), timeout=args.timeout)
    result = {"incidentKey": str(args.key), "resolved": True, "jobKey": None if job_key is None else str(job_key)}
    if args.output == "json":
        _print_json(result)
    else:
        retries = f" (job {job_key} got {args.retries} retries)" if job_key is not None else ""
        print(f"Incident {args.key} resolved{retries}.")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    from client.cli import _stub
    from gateway.api import gateway_pb2 as pb

    _stub(args).CancelProcessInstance(
        pb.CancelProcessInstanceRequest(processInstanceKey=args.key), timeout=args.timeout
    )
    if args.output == "json":
        _print_json({"processInstanceKey": str(args.key), "canceled": True})
    else:
        print(f"Process instance {args.key} canceled.")
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    from client.cli import _stub
    from gateway.api import gateway_pb2 as pb

    request = pb.PublishMessageRequest(
        name=args.name,
        correlationKey=args.correlation_key,
        timeToLive=args.ttl,
        messageId=args.message_id or "",
        variables=args.variables or "",
    )
    response = _stub(args).PublishMessage(request, timeout=args.timeout)
    if args.output == "json":
        _print_json(MessageToDict(response, preserving_proto_field_name=True))
    else:
        print(f"Message {args.name} published with key {response.key}.")
    return 0


# -- parser ---------------------------------------------------------------------------------------------------


def add_parsers(sub: Any, add_client_args: Callable[[argparse.ArgumentParser], None]) -> None:
    def command(name: str, text: str, fn: Callable[[argparse.Namespace], int], rest: bool) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=text)
        p.add_argument("--output", choices=("table", "json"), default="table", help="a table (default) or JSON")
        if rest:
            p.add_argument(
                "--rest-address", help=f"the gateway's REST API (${REST_ADDRESS_ENV} or {DEFAULT_REST_ADDRESS})"
            )
        add_client_args(p)
        p.set_defaults(fn=fn)
        return p

    p = command("instances", "list process instances (newest first)", cmd_instances, rest=True)
    p.add_argument("--state", choices=("ACTIVE", "COMPLETED", "TERMINATED"), help="only instances in this state")
    p.add_argument("--process", help="only instances of this process id")
    p.add_argument("--limit", type=int, default=100, help="at most this many (100)")

    p = command("instance", "show one process instance: its elements, variables and incidents", cmd_instance, True)
    p.add_argument("key", help="process instance key")

    p = command("incidents", "list open incidents", cmd_incidents, rest=True)
    p.add_argument("--all", action="store_true", help="resolved incidents too")
    p.add_argument("--instance", help="only this process instance's")
    p.add_argument("--limit", type=int, default=100, help="at most this many (100)")

    p = command("jobs", "list jobs", cmd_jobs, rest=True)
    p.add_argument("--state", help="only jobs in this state (CREATED, COMPLETED, FAILED, ERROR_THROWN, …)")
    p.add_argument("--type", help="only jobs of this type")
    p.add_argument("--instance", help="only this process instance's")
    p.add_argument("--limit", type=int, default=100, help="at most this many (100)")

    p = command("resolve", "resolve an incident (a job out of retries gets retries back first)", cmd_resolve, True)
    p.add_argument("key", type=int, help="incident key")
    p.add_argument("--retries", type=int, default=1, help="retries given back to the incident's job (1)")
    p.add_argument("--job", type=int, help="the incident's job key (otherwise looked up through the REST API)")
    p.add_argument("--no-lookup", action="store_true", help="do not look the incident up: just resolve it")

    p = command("cancel", "cancel a process instance", cmd_cancel, rest=False)
    p.add_argument("key", type=int, help="process instance key")

    p = command("publish", "publish a message", cmd_publish, rest=False)
    p.add_argument("name", help="message name")
    p.add_argument("--correlation-key", default="", help="correlation key")
    p.add_argument("--variables", help="JSON object of variables")
    p.add_argument("--ttl", type=int, default=5000, help="time to live in ms, as zbctl (5000; 0: now or never)")
    p.add_argument("--message-id", help="unique message id (a second message with it is refused)")
