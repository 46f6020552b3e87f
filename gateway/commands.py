"""What a gateway does with a client request, whatever the transport: validation, partition routing, request
timeouts, backpressure and rejections.

The gRPC service (gateway/service.py) and the REST API (gateway/rest/) both call :class:`GatewayCommands` with plain
values and get records back. Every failure is a :class:`CommandError` whose code names what went wrong (gRPC maps it
to its status code, REST to an HTTP status and a problem detail), with the same message on both.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import json
import logging
import re
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from broker import monitoring
from broker.engine.deployment_limits import DeploymentLimits, too_many_resources
from broker.engine.job_processors import activation_request
from broker.engine.partitioning import subscription_partition
from broker.error_messages import bounded_message, shown
from broker.protocol import labels
from broker.protocol.documents import InvalidDocumentError, find_problem
from broker.protocol.enums import (
    BatchOperationCreationIntent,
    BatchOperationLifecycleManagementIntent,
    ClockIntent,
    DecisionEvaluationIntent,
    DeploymentIntent,
    IncidentIntent,
    JobBatchIntent,
    JobIntent,
    MessageCorrelationIntent,
    MessageIntent,
    ProcessInstanceBusinessIdIntent,
    ProcessInstanceCreationIntent,
    ProcessInstanceIntent,
    ProcessInstanceMigrationIntent,
    ProcessInstanceModificationIntent,
    RecordType,
    RejectionType,
    ResourceDeletionIntent,
    SignalIntent,
    ValueType,
    VariableDocumentIntent,
)
from broker.protocol.keys import partition_of
from broker.protocol.limits import MAX_DURATION_MS, duration_problem
from broker.protocol.record import Record
from broker.stream.partition import BackpressureError, PartitionUnavailableError
from broker.transport.broker_client import BrokerClient, Topology
from gateway.caller import CALLER

log = logging.getLogger("weir.gateway")

TENANT = "<default>"
DEFAULT_LONG_POLL_MS = 10_000
DEFAULT_REQUEST_TIMEOUT_MS = 15_000
# A long-polling activation looks at the partitions again at least this often, notified or not.
LONG_POLL_PROBE_MS = 5_000


class ErrorCode(enum.Enum):
    """Why a request failed, named like the gRPC status codes Zeebe clients know (gRPC maps them one to one)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    UNAVAILABLE = "UNAVAILABLE"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    UNIMPLEMENTED = "UNIMPLEMENTED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    INTERNAL = "INTERNAL"
    UNKNOWN = "UNKNOWN"


_REJECTION_CODES = {
    RejectionType.INVALID_ARGUMENT: ErrorCode.INVALID_ARGUMENT,
    RejectionType.NOT_FOUND: ErrorCode.NOT_FOUND,
    RejectionType.ALREADY_EXISTS: ErrorCode.ALREADY_EXISTS,
    RejectionType.INVALID_STATE: ErrorCode.FAILED_PRECONDITION,
    RejectionType.PROCESSING_ERROR: ErrorCode.INTERNAL,
    RejectionType.FORBIDDEN: ErrorCode.PERMISSION_DENIED,
}


class CommandError(Exception):
    """A request that cannot be served: bad input, a rejection by the broker, or a broker that cannot answer.

    ``title`` is a short name of the problem: the rejection type for rejected commands, else the code's name. The
    message is bounded (broker/error_messages.py): it may quote a caller's value of any size, or a broker's reason that
    does.
    """

    def __init__(self, code: ErrorCode, message: str, *, title: str | None = None) -> None:
        message = bounded_message(message)
        super().__init__(message)
        self.code = code
        self.message = message
        self.title = title or code.value


def fail(code: ErrorCode, message: str) -> NoReturn:
    raise CommandError(code, message)


def invalid(message: str) -> NoReturn:
    raise CommandError(ErrorCode.INVALID_ARGUMENT, message)


# -- validation shared by every transport ------------------------------------------------------------------------


def _reject_non_json_constant(name: str) -> NoReturn:
    """Python's json module accepts NaN and Infinity; JSON (and every other Zeebe client) does not."""
    raise ValueError(f"'{name}' is not a JSON value")


def parse_variables(text: str, what: str = "variables") -> dict[str, Any]:
    """A JSON object document, as every variables field must be; '' means {}."""
    if not text:
        return {}
    try:
        value = json.loads(text, parse_constant=_reject_non_json_constant)
    except (ValueError, RecursionError) as e:
        invalid(f"Expected to parse {what} as a JSON object, but it is not valid JSON: {e}")
    if not isinstance(value, dict):
        invalid(f"Expected {what} to be a JSON object, but got a JSON {type(value).__name__}: '{text[:100]}'")
    return check_variables(value, what)


def check_variables(value: Any, what: str = "variables") -> dict[str, Any]:
    """An already decoded variables document (REST bodies carry objects, not strings); None means {}."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        invalid(f"Expected {what} to be a JSON object, but got a JSON {_json_type(value)}")
    problem = find_problem(value, json_only=True)
    if problem:
        invalid(f"Expected {what} to be a valid JSON document, but the {problem}")
    return value


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "null" if value is None else type(value).__name__


def check_duration(name: str, value: int, *, minimum: int) -> None:
    problem = duration_problem(name, value, minimum=minimum)
    if problem:
        invalid(problem)


def check_request_timeout(value: int) -> None:
    """``requestTimeout``: 0 means the default and negative values mean none; only the upper bound is checked."""
    if value > MAX_DURATION_MS:
        check_duration("requestTimeout", value, minimum=0)


TENANT_ID = re.compile(r"[\w.-]{1,31}", re.ASCII)
"""A tenant id, as Camunda allows them: up to 31 letters, digits, ``_``, ``.`` and ``-``."""


def resolve_tenant(request: str, tenant_id: Any, *, multi_tenancy: bool) -> str:
    """The tenant a request acts in, from the tenant id it names (Zeebe's rules and messages).

    Without multi-tenancy only the default tenant exists: an empty id means it and any other is refused. With it, a
    request must name its tenant, and the id must be a valid one.
    """
    if not isinstance(tenant_id, str):
        invalid(f"Expected to handle request {request} with a tenant identifier that is a string")
    if not multi_tenancy:
        if tenant_id not in ("", TENANT):
            invalid(
                f"Expected to handle request {request} with tenant identifier '{shown(tenant_id)}', but multi-tenancy "
                f"is disabled (only the default tenant '{TENANT}' exists)"
            )
        return TENANT
    if not tenant_id:
        invalid(
            f"Expected to handle request {request} with multi-tenancy enabled, but no tenant identifier was provided"
        )
    if len(tenant_id) > 31:
        invalid(
            f"Expected to handle request {request} with tenant identifier '{shown(tenant_id)}', but tenant identifier "
            "is longer than 31 characters"
        )
    if TENANT_ID.fullmatch(tenant_id) is None and tenant_id != TENANT:
        invalid(
            f"Expected to handle request {request} with tenant identifier '{shown(tenant_id)}', but tenant identifier "
            "contains illegal characters"
        )
    return tenant_id


def resolve_tenants(request: str, tenant_ids: Any, *, multi_tenancy: bool) -> list[str]:
    """The tenants a request acts in (job activation and job streams), by :func:`resolve_tenant`'s rules; without
    multi-tenancy an empty list means the default tenant."""
    if not isinstance(tenant_ids, list | tuple):
        invalid(f"Expected to handle request {request} with a list of tenant identifiers")
    if not tenant_ids:
        if multi_tenancy:
            invalid(
                f"Expected to handle request {request} with multi-tenancy enabled, but no tenant identifier was "
                "provided"
            )
        return [TENANT]
    return list(dict.fromkeys(resolve_tenant(request, t, multi_tenancy=multi_tenancy) for t in tenant_ids))


def validate_activation(job_type: str, worker: str | None, timeout: int, max_jobs: int | None) -> None:
    problems = []
    if not job_type.strip():
        problems.append("Expected argument 'type' to be provided, but it is blank")
    if worker is not None and not worker.strip():
        problems.append("Expected argument 'worker' to be provided, but it is blank")
    if timeout < 1:
        problems.append(f"Expected argument 'timeout' to be greater than 0, but was {timeout}")
    elif timeout > MAX_DURATION_MS:
        problems.append(
            f"Expected argument 'timeout' to be at most {MAX_DURATION_MS} ms (100 years), but was {timeout}"
        )
    if max_jobs is not None and max_jobs < 1:
        problems.append(f"Expected argument 'maxJobsToActivate' to be greater than 0, but was {max_jobs}")
    if problems:
        invalid("; ".join(problems))


class _JobWaiters:
    """Long-polling job activations parked per job type, woken by brokers' jobs-available notices."""

    def __init__(self) -> None:
        self._generation: dict[str, int] = {}
        self._events: dict[str, asyncio.Event] = {}

    def generation(self, job_type: str) -> int:
        return self._generation.get(job_type, 0)

    def notify(self, _partition_id: int, types: set[str]) -> None:
        for t in types:
            self._generation[t] = self._generation.get(t, 0) + 1
            ev = self._events.pop(t, None)
            if ev is not None:
                ev.set()

    async def wait(self, job_type: str, seen: int, timeout: float) -> bool:
        """Wait until the type's generation moves past ``seen``; False on timeout."""
        if self.generation(job_type) != seen:
            return True
        ev = self._events.get(job_type)
        if ev is None:
            ev = asyncio.Event()
            self._events[job_type] = ev
        try:
            await asyncio.wait_for(ev.wait(), timeout)
            return True
        except TimeoutError:
            return self.generation(job_type) != seen


@dataclass(frozen=True, slots=True)
class ActivateInstruction:
    """One element a modification activates: in the flow scope instance under ``ancestor_key`` (<= 0: the only active
    one), with variable documents for the element or its flow scopes (scope id "" or the process id: the instance)."""

    element_id: str
    ancestor_key: int = -1
    variables: tuple[tuple[str, dict[str, Any]], ...] = ()


@dataclass(frozen=True, slots=True)
class MoveInstruction:
    """Terminate the active instances of ``source_element_id`` (or the one instance ``source_key``) and activate
    ``target_element_id`` for each, in the scope ``ancestor`` names: "direct" (``ancestor_key``, <= 0: the only
    active one), "inferred" (found above the source) or "sourceParent" (the source's flow scope)."""

    target_element_id: str
    source_element_id: str = ""
    source_key: int = -1
    ancestor: str = "direct"
    ancestor_key: int = -1
    variables: tuple[tuple[str, dict[str, Any]], ...] = ()


class GatewayCommands:
    """The gateway's requests as commands to the partitions that own them, for any transport."""

    def __init__(
        self,
        client: BrokerClient,
        *,
        long_poll_ms: int = DEFAULT_LONG_POLL_MS,
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        deployment_limits: DeploymentLimits | None = None,
        multi_tenancy: bool = False,
    ) -> None:
        self.client = client
        # Whether requests name their tenant (gateway.multiTenancy.enabled); without, all is the default tenant's.
        self.multi_tenancy = multi_tenancy
        self.long_poll_ms = long_poll_ms
        self.request_timeout_ms = request_timeout_ms
        self._round_robin = itertools.count()
        self._waiters = _JobWaiters()
        self._giving_back: set[asyncio.Task[None]] = set()
        # The broker refuses larger deployments too; checked here first, so they are never read in full or sent.
        self.deployment_limits = deployment_limits or DeploymentLimits()
        client.add_jobs_available_listener(self._waiters.notify)

    # -- plumbing --------------------------------------------------------------------------------------------

    def tenant(self, request: str, tenant_id: Any) -> str:
        """The tenant ``request`` acts in (:func:`resolve_tenant`); INVALID_ARGUMENT when it may not name it."""
        return resolve_tenant(request, tenant_id, multi_tenancy=self.multi_tenancy)

    def tenants(self, request: str, tenant_ids: Any) -> list[str]:
        return resolve_tenants(request, tenant_ids, multi_tenancy=self.multi_tenancy)

    def next_partition(self) -> int:
        ids = self.client.partition_ids
        return ids[next(self._round_robin) % len(ids)]

    def partition_for_key(self, key: int, what: str) -> int:
        pid = partition_of(key)
        if pid not in self.client.partition_ids:
            fail(ErrorCode.NOT_FOUND, f"Expected to find {what} with key '{key}', but no such {what} was found")
        return pid

    async def execute(
        self,
        partition_id: int,
        value_type: ValueType,
        intent: int,
        value: dict,
        key: int = -1,
        timeout_ms: int | None = None,
    ) -> Record:
        """Send a command; rejections and broker failures become :class:`CommandError`."""
        timeout = (timeout_ms if timeout_ms and timeout_ms > 0 else self.request_timeout_ms) / 1000
        try:
            caller = CALLER.get()
            async with asyncio.timeout(timeout):  # unlike wait_for, no extra task per call
                if caller is None:
                    record = await self.client.execute(partition_id, value_type, intent, value, key)
                else:  # the engine decides what an authenticated caller may do
                    record = await self.client.execute(
                        partition_id, value_type, intent, value, key, authorization=caller
                    )
        except TimeoutError:
            fail(
                ErrorCode.DEADLINE_EXCEEDED,
                f"Time out between gateway and broker: request timed out after {timeout * 1000:.0f} ms",
            )
        except BackpressureError as e:
            fail(ErrorCode.RESOURCE_EXHAUSTED, f"Expected to handle the request, but the broker is overloaded: {e}")
        except PartitionUnavailableError as e:
            fail(ErrorCode.UNAVAILABLE, str(e))
        except InvalidDocumentError as e:
            invalid(str(e))
        if record.record_type == RecordType.COMMAND_REJECTION:
            code = _REJECTION_CODES.get(record.rejection_type, ErrorCode.UNKNOWN)
            intent_name = record.intent_enum.name
            raise CommandError(
                code,
                f"Command '{intent_name}' rejected with code '{record.rejection_type.name}': {record.rejection_reason}",
                title=record.rejection_type.name,
            )
        return record

    def give_back(self, activated: list[tuple[int, dict]]) -> None:
        """Make jobs activated for a worker that never received them activatable again (JOB YIELD), at once.

        Runs as a task of its own: the request that activated them may be cancelled already.
        """

        async def give_back() -> None:
            for key, job in activated:
                try:
                    await self.client.execute(partition_of(key), ValueType.JOB, JobIntent.YIELD, job, key)
                except Exception as e:  # the job times out and becomes activatable then
                    log.debug("could not give back job %d: %r", key, e)

        self.spawn(give_back())

    def spawn(self, coroutine: Any) -> None:
        """Run a follow-up command in the background, keeping a reference until it is done."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._giving_back.add(task)
        task.add_done_callback(self._giving_back.discard)

    # -- topology and resources ------------------------------------------------------------------------------

    def topology(self) -> Topology:
        return self.client.topology()

    def check_deployment_size(self, count: int) -> None:
        """Refuse a deployment of too many resources before it is read further or sent (broker.deployments.*)."""
        problem = too_many_resources(self.deployment_limits, count)
        if problem is not None:
            invalid(problem)

    async def deploy(self, resources: list[tuple[str, bytes]], tenant_id: str = "") -> Record:
        tenant = self.tenant("DeployResource", tenant_id)
        if not resources:
            invalid("Expected to deploy at least one resource, but none given")
        self.check_deployment_size(len(resources))
        value = {"resources": [{"resourceName": n, "resource": c} for n, c in resources], "tenantId": tenant}
        return await self.execute(self.client.partition_ids[0], ValueType.DEPLOYMENT, DeploymentIntent.CREATE, value)

    async def delete_resource(self, key: int) -> Record:
        """Delete a process definition, a decision requirements graph (with its decisions) or a form, on every
        partition."""
        partition_id = self.partition_for_key(key, "resource")
        value = {"resourceKey": key, "tenantId": TENANT}
        return await self.execute(partition_id, ValueType.RESOURCE_DELETION, ResourceDeletionIntent.DELETE, value, key)

    async def evaluate_decision(
        self, decision_id: str, decision_key: int, variables: dict[str, Any], tenant_id: str = ""
    ) -> Record:
        """Evaluate by id (the tenant's latest version) or key on any partition: every partition has every decision."""
        tenant = self.tenant("EvaluateDecision", tenant_id)
        if not decision_id and decision_key <= 0:
            invalid("Expected either a decision id or a valid decision key, but none provided")
        value = {
            "decisionId": decision_id,
            "decisionKey": decision_key if decision_key > 0 else -1,
            "variables": variables,
            "tenantId": tenant,
        }
        return await self.execute(
            self.next_partition(), ValueType.DECISION_EVALUATION, DecisionEvaluationIntent.EVALUATE, value
        )

    # -- the clock -------------------------------------------------------------------------------------------

    async def pin_clock(self, timestamp: int) -> Record:
        """Pin the stream clock of every partition at ``timestamp`` (epoch ms): the first partition answers once
        pinned and distributes the pin to the others, as Zeebe's deployment partition does."""
        if timestamp < 0:
            invalid(f"The value for timestamp is '{timestamp}' but must be not negative.")
        return await self.execute(self.client.partition_ids[0], ValueType.CLOCK, ClockIntent.PIN, {"time": timestamp})

    async def reset_clock(self) -> Record:
        """Let every partition's stream clock follow its leader's clock again (distributed like a pin)."""
        return await self.execute(self.client.partition_ids[0], ValueType.CLOCK, ClockIntent.RESET, {"time": 0})

    # -- process instances -----------------------------------------------------------------------------------

    async def create_process_instance(
        self,
        bpmn_process_id: str,
        version: int,
        process_definition_key: int,
        variables: dict[str, Any],
        *,
        await_result: bool = False,
        fetch_variables: list[str] | None = None,
        request_timeout_ms: int = 0,
        business_id: str = "",
        tags: list[str] | None = None,
        start_instructions: list[str] | None = None,
        tenant_id: str = "",
    ) -> Record:
        """Create on the next partition (round robin), or, with a business id, on the partition it hashes to (like a
        message's correlation key), so one partition sees every active instance with that id and decides whether it
        is unique. With ``await_result`` answer when the instance completes."""
        tenant = self.tenant("CreateProcessInstance", tenant_id)
        if version < -1:
            invalid(f"Expected argument 'version' to be -1 (latest) or a version number, but was {version}")
        if not (process_definition_key > 0 or bpmn_process_id):
            invalid("Expected either a bpmnProcessId or a processDefinitionKey, but none given")
        tags = list(tags or [])
        problem = labels.business_id_problem(business_id) or labels.tags_problem(tags)
        if problem is not None:
            invalid(problem)
        if business_id:
            count = self.client.topology().partitions_count or len(self.client.partition_ids)
            pid = subscription_partition(business_id, count)
        else:
            pid = self.next_partition()
        value = {
            "bpmnProcessId": bpmn_process_id,
            "version": version if version else -1,
            "processDefinitionKey": process_definition_key if process_definition_key > 0 else -1,
            "variables": variables,
            "fetchVariables": list(fetch_variables or []),
            "tenantId": tenant,
        }
        if business_id:
            value["businessId"] = business_id
        if tags:
            value["tags"] = tags
        if start_instructions:
            value["startInstructions"] = [{"elementId": element_id} for element_id in start_instructions]
        if await_result:
            check_request_timeout(request_timeout_ms)
            intent = ProcessInstanceCreationIntent.CREATE_WITH_AWAITING_RESULT
            timeout_ms: int | None = request_timeout_ms or self.request_timeout_ms
        else:
            intent, timeout_ms = ProcessInstanceCreationIntent.CREATE, None
        try:
            return await self.execute(pid, ValueType.PROCESS_INSTANCE_CREATION, intent, value, timeout_ms=timeout_ms)
        except CommandError as e:
            deployment_partition = self.client.partition_ids[0]
            if e.code != ErrorCode.NOT_FOUND or business_id or pid == deployment_partition:
                raise
            # A deployment is acknowledged once its partition holds it and reaches the others a moment later: a
            # partition it has not reached yet refused the command (certainly not taken), the deployment
            # partition has every acknowledged process (and has deleted every deleted one first).
            return await self.execute(
                deployment_partition, ValueType.PROCESS_INSTANCE_CREATION, intent, value, timeout_ms=timeout_ms
            )

    async def cancel_process_instance(self, key: int) -> Record:
        pid = self.partition_for_key(key, "process instance")
        return await self.execute(pid, ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.CANCEL, {}, key)

    async def modify_process_instance(
        self,
        process_instance_key: int,
        activate: Sequence[ActivateInstruction],
        terminate: Sequence[int | str],
        move: Sequence[MoveInstruction] = (),
    ) -> Record:
        """Activate and terminate elements of a running instance in one command on the instance's partition.

        ``terminate``: element instance keys, or element ids (every active instance of the element)."""
        key = process_instance_key
        pid = self.partition_for_key(key, "process instance")
        for instruction in activate:
            if not instruction.element_id:
                invalid("Expected an elementId in every activate instruction, but one has none")
        for m in move:
            if not m.target_element_id or not (m.source_element_id or m.source_key > 0):
                invalid(
                    "Expected a source element (id or instance key) and a targetElementId in every move instruction"
                )
        value = {
            "processInstanceKey": key,
            "activateInstructions": [
                {
                    "elementId": a.element_id,
                    "ancestorScopeKey": a.ancestor_key if a.ancestor_key > 0 else -1,
                    "variableInstructions": [
                        {"elementId": scope_id, "variables": variables} for scope_id, variables in a.variables
                    ],
                    "ancestorScopeKeys": [],
                }
                for a in activate
            ],
            "terminateInstructions": [
                {"elementId": t} if isinstance(t, str) else {"elementInstanceKey": t} for t in terminate
            ],
            "moveInstructions": [
                {
                    "sourceElementId": m.source_element_id,
                    "sourceElementInstanceKey": m.source_key if not m.source_element_id else -1,
                    "targetElementId": m.target_element_id,
                    "ancestorScopeKey": m.ancestor_key if m.ancestor_key > 0 else -1,
                    "inferAncestorScopeFromSourceHierarchy": m.ancestor == "inferred",
                    "useSourceParentKeyAsAncestorScope": m.ancestor == "sourceParent",
                    "variableInstructions": [
                        {"elementId": scope_id, "variables": variables} for scope_id, variables in m.variables
                    ],
                }
                for m in move
            ],
            "tenantId": TENANT,
        }
        intent = ProcessInstanceModificationIntent.MODIFY
        return await self.execute(pid, ValueType.PROCESS_INSTANCE_MODIFICATION, intent, value, key)

    async def assign_business_id(self, process_instance_key: int, business_id: str) -> Record:
        """Give a running root instance without a business id one (Camunda 8.10), on the instance's partition."""
        problem = labels.business_id_problem(business_id)
        if problem is not None or not business_id:
            invalid(problem or "Expected a businessId, but none given")
        key = process_instance_key
        pid = self.partition_for_key(key, "process instance")
        value = {"processInstanceKey": key, "businessId": business_id, "tenantId": TENANT}
        intent = ProcessInstanceBusinessIdIntent.ASSIGN
        return await self.execute(pid, ValueType.PROCESS_INSTANCE_BUSINESS_ID, intent, value, key)

    async def migrate_process_instance(
        self, process_instance_key: int, target_process_definition_key: int, mapping: Sequence[tuple[str, str]]
    ) -> Record:
        """Move a running instance to another process definition (Zeebe 8.8's migration), on the instance's
        partition: ``mapping`` pairs source element ids with target element ids."""
        if target_process_definition_key <= 0:
            invalid(f"Expected a targetProcessDefinitionKey, but got '{target_process_definition_key}'")
        for n, (source, target) in enumerate(mapping):
            if not source or not target:
                invalid(f"Expected mapping instruction {n} to name a sourceElementId and a targetElementId")
        key = process_instance_key
        pid = self.partition_for_key(key, "process instance")
        value = {
            "processInstanceKey": key,
            "targetProcessDefinitionKey": target_process_definition_key,
            "mappingInstructions": [{"sourceElementId": s, "targetElementId": t} for s, t in mapping],
            "tenantId": TENANT,
        }
        intent = ProcessInstanceMigrationIntent.MIGRATE
        return await self.execute(pid, ValueType.PROCESS_INSTANCE_MIGRATION, intent, value, key)

    async def set_variables(self, element_instance_key: int, variables: dict[str, Any], *, local: bool) -> Record:
        key = element_instance_key
        pid = self.partition_for_key(key, "element instance")
        value = {
            "scopeKey": key,
            "variables": variables,
            "updateSemantics": "LOCAL" if local else "PROPAGATE",
            "tenantId": TENANT,
        }
        return await self.execute(pid, ValueType.VARIABLE_DOCUMENT, VariableDocumentIntent.UPDATE, value, key)

    async def resolve_incident(self, key: int) -> Record:
        pid = self.partition_for_key(key, "incident")
        return await self.execute(pid, ValueType.INCIDENT, IncidentIntent.RESOLVE, {}, key)

    # -- batch operations ------------------------------------------------------------------------------------

    async def create_batch_operation(
        self,
        batch_type: str,
        filter_: dict[str, Any],
        items: Sequence[tuple[int, int]],
        plan: dict[str, Any] | None = None,
    ) -> Record:
        """Start a batch operation over ``items`` ((item key, process instance key) pairs, e.g. the instances a
        filter matched): one command to the first partition, which coordinates it and hands every other partition
        its own items. ``plan``: the migrationPlan or modificationPlan, as the engine records it."""
        groups: dict[int, list[dict[str, int]]] = {}
        for item_key, instance_key in items:
            groups.setdefault(partition_of(item_key), []).append(
                {"itemKey": item_key, "processInstanceKey": instance_key}
            )
        value = {
            "batchOperationType": batch_type,
            "filter": filter_,
            "partitionItems": [
                {"partitionId": pid, "items": group}
                for pid, group in sorted(groups.items())
                if pid in self.client.partition_ids
            ],
            **(plan or {}),
        }
        coordinator = min(self.client.partition_ids)
        intent = BatchOperationCreationIntent.CREATE
        return await self.execute(coordinator, ValueType.BATCH_OPERATION_CREATION, intent, value)

    async def batch_operation_lifecycle(self, key: int, intent: BatchOperationLifecycleManagementIntent) -> Record:
        """Suspend, resume or cancel a batch operation, on the partition that coordinates it."""
        pid = self.partition_for_key(key, "batch operation")
        value = {"batchOperationKey": key}
        return await self.execute(pid, ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT, intent, value, key)

    # -- messages and signals --------------------------------------------------------------------------------

    async def publish_message(
        self,
        name: str,
        correlation_key: str,
        time_to_live: int,
        message_id: str,
        variables: dict[str, Any],
        tenant_id: str = "",
    ) -> Record:
        """The message goes to the partition its correlation key hashes to (as in Zeebe), to wait there for what
        waits for it in its tenant."""
        tenant = self.tenant("PublishMessage", tenant_id)
        if not name:
            invalid("Expected a message name, but none given")
        check_duration("timeToLive", time_to_live, minimum=0)
        count = self.client.topology().partitions_count or len(self.client.partition_ids)
        value = {
            "name": name,
            "correlationKey": correlation_key,
            "timeToLive": time_to_live,
            "messageId": message_id,
            "variables": variables,
            "tenantId": tenant,
        }
        pid = subscription_partition(correlation_key, count)
        return await self.execute(pid, ValueType.MESSAGE, MessageIntent.PUBLISH, value)

    async def correlate_message(
        self, name: str, correlation_key: str, variables: dict[str, Any], tenant_id: str = ""
    ) -> Record:
        """Correlate at once to what waits for the message, without buffering it: the message's partition (by
        correlation key, as for publishing) answers once the instance that took it is known, or NOT_FOUND."""
        tenant = self.tenant("CorrelateMessage", tenant_id)
        if not name:
            invalid("Expected a message name, but none given")
        count = self.client.topology().partitions_count or len(self.client.partition_ids)
        value = {"name": name, "correlationKey": correlation_key, "variables": variables, "tenantId": tenant}
        pid = subscription_partition(correlation_key, count)
        return await self.execute(pid, ValueType.MESSAGE_CORRELATION, MessageCorrelationIntent.CORRELATE, value)

    async def broadcast_signal(self, signal_name: str, variables: dict[str, Any], tenant_id: str = "") -> Record:
        """Any partition takes the broadcast and answers once it is written; it reaches the others from there, and
        the subscriptions of its tenant."""
        tenant = self.tenant("BroadcastSignal", tenant_id)
        if not signal_name:
            invalid("Expected a signal name, but none given")
        value = {"signalName": signal_name, "variables": variables, "tenantId": tenant}
        return await self.execute(self.next_partition(), ValueType.SIGNAL, SignalIntent.BROADCAST, value)

    # -- jobs ------------------------------------------------------------------------------------------------

    async def _job_command(self, key: int, intent: JobIntent, value: dict) -> Record:
        pid = self.partition_for_key(key, "job")
        return await self.execute(pid, ValueType.JOB, intent, value, key)

    async def complete_job(
        self, key: int, variables: dict[str, Any], *, result: dict[str, Any] | None = None
    ) -> Record:
        """Complete a job; ``result`` is a task listener's answer (denial or corrections of the user task)."""
        value: dict[str, Any] = {"variables": variables}
        if result is not None:
            value["result"] = result
        return await self._job_command(key, JobIntent.COMPLETE, value)

    async def fail_job(
        self, key: int, retries: int, error_message: str, retry_backoff: int, variables: dict[str, Any]
    ) -> Record:
        if retries < 0:
            invalid(f"Expected argument 'retries' to be at least 0, but was {retries}")
        if retry_backoff > 0:  # a negative back-off means none, as in Zeebe
            check_duration("retryBackOff", retry_backoff, minimum=0)
        value = {
            "retries": retries,
            "errorMessage": error_message,
            "retryBackoff": max(0, retry_backoff),
            "variables": variables,
        }
        return await self._job_command(key, JobIntent.FAIL, value)

    async def throw_error(self, key: int, error_code: str, error_message: str, variables: dict[str, Any]) -> Record:
        if not error_code:
            invalid("Expected argument 'errorCode' to be provided, but it is empty")
        value = {"errorCode": error_code, "errorMessage": error_message, "variables": variables}
        return await self._job_command(key, JobIntent.THROW_ERROR, value)

    async def update_job_retries(self, key: int, retries: int) -> Record:
        if retries < 1:
            invalid(f"Expected retries to be greater than zero, but got '{retries}'")
        return await self._job_command(key, JobIntent.UPDATE_RETRIES, {"retries": retries})

    async def update_job_timeout(self, key: int, timeout: int) -> Record:
        check_duration("timeout", timeout, minimum=1)
        return await self._job_command(key, JobIntent.UPDATE_TIMEOUT, {"timeout": timeout})

    async def activate_jobs(
        self,
        job_type: str,
        worker: str | None,
        timeout: int,
        max_jobs: int,
        fetch_variables: list[str],
        request_timeout_ms: int,
        *,
        tenant_ids: Sequence[str] = (),
        time_remaining_s: float | None = None,
    ) -> AsyncGenerator[list[tuple[int, dict]], None]:
        """Activate up to ``max_jobs`` jobs across partitions, long-polling until some exist or the poll ends.

        Yields each partition's batch of (job key, job) as it is activated. A batch the caller cannot deliver must
        be handed to :meth:`give_back`. Validation failures raise before anything is activated. ``worker`` None means
        none was given (REST), unlike a blank name (refused).
        """
        tenants = self.tenants("ActivateJobs", list(tenant_ids))
        validate_activation(job_type, worker, timeout, max_jobs)
        check_request_timeout(request_timeout_ms)
        poll_ms = request_timeout_ms if request_timeout_ms != 0 else self.long_poll_ms
        if poll_ms > 0 and time_remaining_s is not None:
            poll_ms = min(poll_ms, max(0, int(time_remaining_s * 1000) - 200))
        requested_at = time.monotonic()
        poll_deadline = requested_at + max(poll_ms, 0) / 1000
        remaining = max_jobs
        partitions = self.client.partition_ids
        start = next(self._round_robin)
        busy = (ErrorCode.UNAVAILABLE, ErrorCode.RESOURCE_EXHAUSTED)
        while True:
            seen = self._waiters.generation(job_type)
            activated_any = False
            for i in range(len(partitions)):
                pid = partitions[(start + i) % len(partitions)]
                value = activation_request(job_type, worker or "", timeout, remaining, fetch_variables, tenants)
                try:
                    rec = await self.execute(pid, ValueType.JOB_BATCH, JobBatchIntent.ACTIVATE, value)
                except CommandError as e:
                    if e.code in busy and (activated_any or len(partitions) > 1):
                        continue
                    raise
                activated = list(zip(rec.value["jobKeys"], rec.value["jobs"], strict=True))
                if activated:
                    if not activated_any:
                        monitoring.JOB_ACTIVATION_LATENCY.observe(time.monotonic() - requested_at)
                    activated_any = True
                    remaining -= len(activated)
                    yield activated
                if remaining <= 0:
                    return
            if activated_any or poll_ms <= 0:
                return
            left = poll_deadline - time.monotonic()
            if left <= 0:
                return
            # Woken by a broker's jobs-available notice, or at the latest after the probe interval (as Zeebe's
            # long polling probes): a notice sent while the gateway was reconnecting to a broker is lost.
            probe = min(left, LONG_POLL_PROBE_MS / 1000)
            if not await self._waiters.wait(job_type, seen, probe) and probe >= left:
                return
