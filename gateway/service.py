"""The Zeebe gateway protocol (``gateway_protocol.Gateway``) on top of a :class:`BrokerClient`.

Each RPC validates its request, turns it into a command for the partition that owns it (creations round-robin,
keyed commands by the partition in the key), and maps the response or rejection to what Zeebe clients expect:
rejection types to gRPC status codes, with Zeebe's ``Command 'X' rejected with code 'Y': reason`` messages.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn

import grpc

from broker import monitoring
from broker.engine.job_processors import activation_request
from broker.engine.partitioning import subscription_partition
from broker.protocol.documents import InvalidDocumentError, find_problem
from broker.protocol.enums import (
    DecisionEvaluationIntent,
    DeploymentIntent,
    IncidentIntent,
    JobBatchIntent,
    JobIntent,
    MessageIntent,
    ProcessInstanceCreationIntent,
    ProcessInstanceIntent,
    RecordType,
    ResourceDeletionIntent,
    SignalIntent,
    ValueType,
    VariableDocumentIntent,
)
from broker.protocol.keys import partition_of
from broker.protocol.limits import MAX_DURATION_MS, duration_problem
from broker.protocol.record import Record
from broker.stream.partition import BackpressureError, PartitionUnavailableError
from gateway.api import gateway_pb2 as pb
from gateway.api import gateway_pb2_grpc as pb_grpc
from gateway.broker_client import BrokerClient
from gateway.rejections import REJECTION_STATUS

log = logging.getLogger("weir.gateway")

TENANT = "<default>"
DEFAULT_LONG_POLL_MS = 10_000
DEFAULT_REQUEST_TIMEOUT_MS = 15_000
VERSION = "8.5.0-weir"
#: Pushed jobs one StreamActivatedJobs stream may hold while its client has not read them. Beyond, the broker's
#: pushes are refused and the jobs made activatable again at once (for polling workers), so a worker that stops
#: reading cannot hoard the jobs of its type, nor grow the gateway's memory, until it is gone. The bound is far above
#: what a reading worker ever has waiting (a refused push is not offered to another stream later), and
#: WEIR_MAX_PENDING_PUSHES sets it.
MAX_PENDING_PUSHES = int(os.environ.get("WEIR_MAX_PENDING_PUSHES", "1024"))


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _fail(code: grpc.StatusCode, message: str) -> NoReturn:
    raise _Abort(code, message)


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
        _fail(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"Expected to parse {what} as a JSON object, but it is not valid JSON: {e}",
        )
    if not isinstance(value, dict):
        _fail(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"Expected {what} to be a JSON object, but got a JSON {type(value).__name__}: '{text[:100]}'",
        )
    problem = find_problem(value, json_only=True)
    if problem:
        _fail(grpc.StatusCode.INVALID_ARGUMENT, f"Expected {what} to be a valid JSON document, but the {problem}")
    return value


def _check_duration(name: str, value: int, *, minimum: int) -> None:
    problem = duration_problem(name, value, minimum=minimum)
    if problem:
        _fail(grpc.StatusCode.INVALID_ARGUMENT, problem)


def _check_request_timeout(value: int) -> None:
    """``requestTimeout``: 0 means the default and negative values mean none; only the upper bound is checked."""
    if value > MAX_DURATION_MS:
        _check_duration("requestTimeout", value, minimum=0)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _check_tenant(tenant_id: str) -> None:
    if tenant_id not in ("", TENANT):
        _fail(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"Expected tenant id to be '{TENANT}' (multi-tenancy is disabled), but got '{tenant_id}'",
        )


def _check_tenants(tenant_ids: Any) -> None:
    for t in tenant_ids:
        _check_tenant(t)


def activated_job(key: int, job: dict) -> pb.ActivatedJob:
    return pb.ActivatedJob(
        key=key,
        type=job["type"],
        processInstanceKey=job["processInstanceKey"],
        bpmnProcessId=job["bpmnProcessId"],
        processDefinitionVersion=job["processDefinitionVersion"],
        processDefinitionKey=job["processDefinitionKey"],
        elementId=job["elementId"],
        elementInstanceKey=job["elementInstanceKey"],
        customHeaders=_dumps(job.get("customHeaders") or {}),
        worker=job.get("worker", ""),
        retries=job["retries"],
        deadline=job["deadline"],
        variables=_dumps(job.get("variables") or {}),
        tenantId=TENANT,
        kind=pb.ActivatedJob.JobKind.Value(job.get("jobKind") or "BPMN_ELEMENT"),
        listenerEventType=pb.ActivatedJob.ListenerEventType.Value(job.get("jobListenerEventType") or "UNSPECIFIED"),
        userTask=_user_task_properties(job["userTask"]) if job.get("userTask") else None,
    )


def _user_task_properties(task: dict) -> pb.UserTaskProperties:
    return pb.UserTaskProperties(
        action=task["action"],
        assignee=task["assignee"],
        candidateGroups=task["candidateGroups"],
        candidateUsers=task["candidateUsers"],
        changedAttributes=task["changedAttributes"],
        dueDate=task["dueDate"],
        followUpDate=task["followUpDate"],
        formKey=task["formKey"],
        priority=task["priority"],
        userTaskKey=task["userTaskKey"],
    )


_JOB_RESULT_TYPES = ("userTask", "adHocSubProcess")


def job_result(result: pb.JobResult) -> dict[str, Any]:
    """CompleteJobRequest.result as the JOB COMPLETE command carries it (Zeebe's job result record shape): a task
    listener's denial or corrections, or a job-worker ad-hoc sub-process's choice of elements.

    Only the corrections present are listed in ``correctedAttributes``: an absent one keeps the task's value.
    """
    kind = result.type or "userTask"
    if kind not in _JOB_RESULT_TYPES:
        _fail(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"Expected the job result's type to be one of {list(_JOB_RESULT_TYPES)}, but was '{result.type}'",
        )
    activate = []
    for n, item in enumerate(result.activateElements):
        if not item.elementId:
            _fail(
                grpc.StatusCode.INVALID_ARGUMENT, f"Expected activateElements[{n}] to have an elementId, but none given"
            )
        variables = parse_variables(item.variables, f"the variables of activateElements[{n}] ('{item.elementId}')")
        activate.append({"elementId": item.elementId, "variables": variables})
    corrected: list[str] = []
    corrections: dict[str, Any] = {}
    if result.HasField("corrections"):
        c = result.corrections
        for field, name in (("assignee", "assignee"), ("dueDate", "dueDate"), ("followUpDate", "followUpDate")):
            if c.HasField(field):
                corrected.append(name)
                corrections[name] = getattr(c, field)
        for field, name in (("candidateUsers", "candidateUsersList"), ("candidateGroups", "candidateGroupsList")):
            if c.HasField(field):
                corrected.append(name)
                corrections[name] = list(getattr(c, field).values)
        if c.HasField("priority"):
            corrected.append("priority")
            corrections["priority"] = c.priority
    return {
        "type": "AD_HOC_SUB_PROCESS" if kind == "adHocSubProcess" else "USER_TASK",
        "denied": result.denied,
        "deniedReason": result.deniedReason,
        "correctedAttributes": corrected,
        "corrections": corrections,
        "activateElements": activate,
        "isCompletionConditionFulfilled": result.isCompletionConditionFulfilled,
        "isCancelRemainingInstances": result.isCancelRemainingInstances,
    }


def _evaluated_decision(d: dict) -> pb.EvaluatedDecision:
    return pb.EvaluatedDecision(
        decisionKey=d["decisionKey"],
        decisionId=d["decisionId"],
        decisionName=d["decisionName"],
        decisionVersion=d["decisionVersion"],
        decisionType=d["decisionType"],
        decisionOutput=d["decisionOutput"],
        matchedRules=[
            pb.MatchedDecisionRule(
                ruleId=r["ruleId"],
                ruleIndex=r["ruleIndex"],
                evaluatedOutputs=[pb.EvaluatedDecisionOutput(**o) for o in r["evaluatedOutputs"]],
            )
            for r in d["matchedRules"]
        ],
        evaluatedInputs=[pb.EvaluatedDecisionInput(**i) for i in d["evaluatedInputs"]],
        tenantId=TENANT,
    )


class _JobWaiters:
    """Long-polling ActivateJobs requests parked per job type, woken by brokers' jobs-available notices."""

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


def _unary(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Turn a validation failure or rejection (``_Abort``) raised anywhere in an RPC into its gRPC status."""

    counted = {code: monitoring.GRPC_REQUESTS.labels(method.__name__, code.name) for code in grpc.StatusCode}

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            reply = await method(self, request, context)
        except _Abort as e:
            counted[e.code].inc()
            await context.abort(e.code, e.message)
        counted[grpc.StatusCode.OK].inc()
        return reply

    return wrapper


class GatewayService(pb_grpc.GatewayServicer):
    """Implements every RPC of ``gateway_protocol.Gateway``."""

    def __init__(
        self,
        client: BrokerClient,
        *,
        long_poll_ms: int = DEFAULT_LONG_POLL_MS,
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        max_message_size: int = 4 * 1024 * 1024,
    ) -> None:
        self.client = client
        self.max_message_size = max_message_size
        self.long_poll_ms = long_poll_ms
        self.request_timeout_ms = request_timeout_ms
        self._round_robin = itertools.count()
        self._waiters = _JobWaiters()
        self._giving_back: set[asyncio.Task[None]] = set()
        client.add_jobs_available_listener(self._waiters.notify)

    # -- plumbing --------------------------------------------------------------------------------------------

    def _next_partition(self) -> int:
        ids = self.client.partition_ids
        return ids[next(self._round_robin) % len(ids)]

    def _partition_for_key(self, key: int, what: str) -> int:
        pid = partition_of(key)
        if pid not in self.client.partition_ids:
            _fail(
                grpc.StatusCode.NOT_FOUND,
                f"Expected to find {what} with key '{key}', but no such {what} was found",
            )
        return pid

    async def _execute(
        self,
        partition_id: int,
        value_type: ValueType,
        intent: int,
        value: dict,
        key: int = -1,
        timeout_ms: int | None = None,
    ) -> Record:
        """Send a command; rejections and broker failures become gRPC errors."""
        timeout = (timeout_ms if timeout_ms and timeout_ms > 0 else self.request_timeout_ms) / 1000
        try:
            async with asyncio.timeout(timeout):  # unlike wait_for, no extra task per call
                record = await self.client.execute(partition_id, value_type, intent, value, key)
        except TimeoutError:
            _fail(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"Time out between gateway and broker: request timed out after {timeout * 1000:.0f} ms",
            )
        except BackpressureError as e:
            _fail(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"Expected to handle the request, but the broker is overloaded: {e}",
            )
        except PartitionUnavailableError as e:
            _fail(grpc.StatusCode.UNAVAILABLE, str(e))
        except InvalidDocumentError as e:
            _fail(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        if record.record_type == RecordType.COMMAND_REJECTION:
            code = REJECTION_STATUS.get(record.rejection_type, grpc.StatusCode.UNKNOWN)
            intent_name = record.intent_enum.name
            _fail(
                code,
                f"Command '{intent_name}' rejected with code '{record.rejection_type.name}': {record.rejection_reason}",
            )
        return record

    @staticmethod
    async def _abort(context: grpc.aio.ServicerContext, e: _Abort) -> NoReturn:
        await context.abort(e.code, e.message)
        raise AssertionError("unreachable")

    # -- topology --------------------------------------------------------------------------------------------

    async def Topology(self, request: pb.TopologyRequest, context: grpc.aio.ServicerContext) -> pb.TopologyResponse:
        topo = self.client.topology()
        brokers = []
        for b in topo.brokers:
            parts = [
                pb.Partition(
                    partitionId=p.partition_id,
                    role=getattr(pb.Partition.PartitionBrokerRole, p.role),
                    health=pb.Partition.HEALTHY if p.healthy else pb.Partition.UNHEALTHY,
                )
                for p in b.partitions
            ]
            brokers.append(
                pb.BrokerInfo(nodeId=b.node_id, host=b.host, port=b.port, partitions=parts, version=b.version)
            )
        return pb.TopologyResponse(
            brokers=brokers,
            clusterSize=topo.cluster_size,
            partitionsCount=topo.partitions_count,
            replicationFactor=topo.replication_factor,
            gatewayVersion=VERSION,
        )

    # -- deployment ------------------------------------------------------------------------------------------

    async def _deploy(self, resources: list[tuple[str, bytes]]) -> Record:
        if not resources:
            _fail(grpc.StatusCode.INVALID_ARGUMENT, "Expected to deploy at least one resource, but none given")
        value = {"resources": [{"resourceName": n, "resource": c} for n, c in resources]}
        return await self._execute(self.client.partition_ids[0], ValueType.DEPLOYMENT, DeploymentIntent.CREATE, value)

    @_unary
    async def DeployResource(self, request: pb.DeployResourceRequest, context: grpc.aio.ServicerContext) -> Any:
        _check_tenant(request.tenantId)
        rec = await self._deploy([(r.name, r.content) for r in request.resources])
        deployments = [
            pb.Deployment(
                process=pb.ProcessMetadata(
                    bpmnProcessId=m["bpmnProcessId"],
                    version=m["version"],
                    processDefinitionKey=m["processDefinitionKey"],
                    resourceName=m["resourceName"],
                    tenantId=TENANT,
                )
            )
            for m in rec.value["processesMetadata"]
        ]
        deployments += [
            pb.Deployment(
                decision=pb.DecisionMetadata(
                    dmnDecisionId=m["decisionId"],
                    dmnDecisionName=m["decisionName"],
                    version=m["version"],
                    decisionKey=m["decisionKey"],
                    dmnDecisionRequirementsId=m["decisionRequirementsId"],
                    decisionRequirementsKey=m["decisionRequirementsKey"],
                    tenantId=TENANT,
                )
            )
            for m in rec.value.get("decisionsMetadata") or []
        ]
        deployments += [
            pb.Deployment(
                decisionRequirements=pb.DecisionRequirementsMetadata(
                    dmnDecisionRequirementsId=m["decisionRequirementsId"],
                    dmnDecisionRequirementsName=m["decisionRequirementsName"],
                    version=m["decisionRequirementsVersion"],
                    decisionRequirementsKey=m["decisionRequirementsKey"],
                    resourceName=m["resourceName"],
                    tenantId=TENANT,
                )
            )
            for m in rec.value.get("decisionRequirementsMetadata") or []
        ]
        deployments += [
            pb.Deployment(
                form=pb.FormMetadata(
                    formId=m["formId"],
                    version=m["version"],
                    formKey=m["formKey"],
                    resourceName=m["resourceName"],
                    tenantId=TENANT,
                )
            )
            for m in rec.value.get("formMetadata") or []
        ]
        return pb.DeployResourceResponse(key=rec.key, deployments=deployments, tenantId=TENANT)

    @_unary
    async def DeployProcess(self, request: pb.DeployProcessRequest, context: grpc.aio.ServicerContext) -> Any:
        rec = await self._deploy([(p.name, p.definition) for p in request.processes])
        processes = [
            pb.ProcessMetadata(
                bpmnProcessId=m["bpmnProcessId"],
                version=m["version"],
                processDefinitionKey=m["processDefinitionKey"],
                resourceName=m["resourceName"],
                tenantId=TENANT,
            )
            for m in rec.value["processesMetadata"]
        ]
        return pb.DeployProcessResponse(key=rec.key, processes=processes)

    # -- decisions -------------------------------------------------------------------------------------------

    @_unary
    async def EvaluateDecision(self, request: pb.EvaluateDecisionRequest, context: grpc.aio.ServicerContext) -> Any:
        """Evaluate by id (latest version) or key on any partition: every partition has every decision.

        A decision that fails to evaluate is still an answer: ``failedDecisionId`` and ``failureMessage`` say why.
        """
        _check_tenant(request.tenantId)
        if not request.decisionId and request.decisionKey <= 0:
            _fail(
                grpc.StatusCode.INVALID_ARGUMENT,
                "Expected either a decision id or a valid decision key, but none provided",
            )
        value = {
            "decisionId": request.decisionId,
            "decisionKey": request.decisionKey if request.decisionKey > 0 else -1,
            "variables": parse_variables(request.variables),
            "tenantId": TENANT,
        }
        partition_id = self._next_partition()
        rec = await self._execute(partition_id, ValueType.DECISION_EVALUATION, DecisionEvaluationIntent.EVALUATE, value)
        v = rec.value
        return pb.EvaluateDecisionResponse(
            decisionKey=v["decisionKey"],
            decisionId=v["decisionId"],
            decisionName=v["decisionName"],
            decisionVersion=v["decisionVersion"],
            decisionRequirementsId=v["decisionRequirementsId"],
            decisionRequirementsKey=v["decisionRequirementsKey"],
            decisionOutput=v["decisionOutput"],
            evaluatedDecisions=[_evaluated_decision(d) for d in v["evaluatedDecisions"]],
            failedDecisionId=v["failedDecisionId"],
            failureMessage=v["evaluationFailureMessage"],
            tenantId=TENANT,
            decisionInstanceKey=rec.key,
        )

    @_unary
    async def DeleteResource(self, request: pb.DeleteResourceRequest, context: grpc.aio.ServicerContext) -> Any:
        """Delete a process definition, a decision requirements graph (with its decisions) or a form, on every
        partition."""
        key = request.resourceKey
        partition_id = self._partition_for_key(key, "resource")
        value = {"resourceKey": key, "tenantId": TENANT}
        await self._execute(partition_id, ValueType.RESOURCE_DELETION, ResourceDeletionIntent.DELETE, value, key)
        return pb.DeleteResourceResponse()

    # -- process instances -----------------------------------------------------------------------------------

    def _creation_value(
        self, request: pb.CreateProcessInstanceRequest, fetch: list[str] | None = None
    ) -> tuple[int, dict]:
        _check_tenant(request.tenantId)
        if request.startInstructions:
            _fail(grpc.StatusCode.INVALID_ARGUMENT, "Start instructions are not supported yet")
        if request.version < -1:
            _fail(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Expected argument 'version' to be -1 (latest) or a version number, but was {request.version}",
            )
        if request.processDefinitionKey > 0 or request.bpmnProcessId:
            pid = self._next_partition()
        else:
            _fail(
                grpc.StatusCode.INVALID_ARGUMENT,
                "Expected either a bpmnProcessId or a processDefinitionKey, but none given",
            )
        value = {
            "bpmnProcessId": request.bpmnProcessId,
            "version": request.version if request.version else -1,
            "processDefinitionKey": request.processDefinitionKey if request.processDefinitionKey > 0 else -1,
            "variables": parse_variables(request.variables),
            "fetchVariables": list(fetch or []),
            "tenantId": TENANT,
        }
        if request.version == 0 and request.bpmnProcessId:
            value["version"] = -1
        return pid, value

    @_unary
    async def CreateProcessInstance(
        self, request: pb.CreateProcessInstanceRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        pid, value = self._creation_value(request)
        rec = await self._execute(pid, ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, value)
        v = rec.value
        return pb.CreateProcessInstanceResponse(
            processDefinitionKey=v["processDefinitionKey"],
            bpmnProcessId=v["bpmnProcessId"],
            version=v["version"],
            processInstanceKey=v["processInstanceKey"],
            tenantId=TENANT,
        )

    @_unary
    async def CreateProcessInstanceWithResult(
        self, request: pb.CreateProcessInstanceWithResultRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        _check_request_timeout(request.requestTimeout)
        pid, value = self._creation_value(request.request, list(request.fetchVariables))
        rec = await self._execute(
            pid,
            ValueType.PROCESS_INSTANCE_CREATION,
            ProcessInstanceCreationIntent.CREATE_WITH_AWAITING_RESULT,
            value,
            timeout_ms=request.requestTimeout or self.request_timeout_ms,
        )
        v = rec.value
        return pb.CreateProcessInstanceWithResultResponse(
            processDefinitionKey=v["processDefinitionKey"],
            bpmnProcessId=v["bpmnProcessId"],
            version=v["version"],
            processInstanceKey=v["processInstanceKey"],
            variables=_dumps(v.get("variables") or {}),
            tenantId=TENANT,
        )

    @_unary
    async def CancelProcessInstance(
        self, request: pb.CancelProcessInstanceRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        key = request.processInstanceKey
        pid = self._partition_for_key(key, "process instance")
        await self._execute(pid, ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.CANCEL, {}, key)
        return pb.CancelProcessInstanceResponse()

    @_unary
    async def SetVariables(self, request: pb.SetVariablesRequest, context: grpc.aio.ServicerContext) -> Any:
        key = request.elementInstanceKey
        pid = self._partition_for_key(key, "element instance")
        value = {
            "scopeKey": key,
            "variables": parse_variables(request.variables),
            "updateSemantics": "LOCAL" if request.local else "PROPAGATE",
            "tenantId": TENANT,
        }
        rec = await self._execute(pid, ValueType.VARIABLE_DOCUMENT, VariableDocumentIntent.UPDATE, value, key)
        return pb.SetVariablesResponse(key=rec.key)

    @_unary
    async def ResolveIncident(self, request: pb.ResolveIncidentRequest, context: grpc.aio.ServicerContext) -> Any:
        key = request.incidentKey
        pid = self._partition_for_key(key, "incident")
        await self._execute(pid, ValueType.INCIDENT, IncidentIntent.RESOLVE, {}, key)
        return pb.ResolveIncidentResponse()

    # -- jobs ------------------------------------------------------------------------------------------------

    async def _job_command(self, key: int, intent: JobIntent, value: dict) -> Record:
        pid = self._partition_for_key(key, "job")
        return await self._execute(pid, ValueType.JOB, intent, value, key)

    @_unary
    async def CompleteJob(self, request: pb.CompleteJobRequest, context: grpc.aio.ServicerContext) -> Any:
        value: dict[str, Any] = {"variables": parse_variables(request.variables)}
        if request.HasField("result"):
            value["result"] = job_result(request.result)
        await self._job_command(request.jobKey, JobIntent.COMPLETE, value)
        return pb.CompleteJobResponse()

    @_unary
    async def FailJob(self, request: pb.FailJobRequest, context: grpc.aio.ServicerContext) -> Any:
        if request.retries < 0:
            _fail(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Expected argument 'retries' to be at least 0, but was {request.retries}",
            )
        if request.retryBackOff > 0:  # a negative back-off means none, as in Zeebe
            _check_duration("retryBackOff", request.retryBackOff, minimum=0)
        value = {
            "retries": request.retries,
            "errorMessage": request.errorMessage,
            "retryBackoff": max(0, request.retryBackOff),
            "variables": parse_variables(request.variables),
        }
        await self._job_command(request.jobKey, JobIntent.FAIL, value)
        return pb.FailJobResponse()

    @_unary
    async def ThrowError(self, request: pb.ThrowErrorRequest, context: grpc.aio.ServicerContext) -> Any:
        if not request.errorCode:
            _fail(
                grpc.StatusCode.INVALID_ARGUMENT,
                "Expected argument 'errorCode' to be provided, but it is empty",
            )
        value = {
            "errorCode": request.errorCode,
            "errorMessage": request.errorMessage,
            "variables": parse_variables(request.variables),
        }
        await self._job_command(request.jobKey, JobIntent.THROW_ERROR, value)
        return pb.ThrowErrorResponse()

    @_unary
    async def UpdateJobRetries(self, request: pb.UpdateJobRetriesRequest, context: grpc.aio.ServicerContext) -> Any:
        if request.retries < 1:
            _fail(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Expected retries to be greater than zero, but got '{request.retries}'",
            )
        await self._job_command(request.jobKey, JobIntent.UPDATE_RETRIES, {"retries": request.retries})
        return pb.UpdateJobRetriesResponse()

    @_unary
    async def UpdateJobTimeout(self, request: pb.UpdateJobTimeoutRequest, context: grpc.aio.ServicerContext) -> Any:
        _check_duration("timeout", request.timeout, minimum=1)
        await self._job_command(request.jobKey, JobIntent.UPDATE_TIMEOUT, {"timeout": request.timeout})
        return pb.UpdateJobTimeoutResponse()

    @staticmethod
    def _validate_activation(job_type: str, worker: str, timeout: int, max_jobs: int | None) -> None:
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
            _fail(grpc.StatusCode.INVALID_ARGUMENT, "; ".join(problems))

    async def ActivateJobs(
        self, request: pb.ActivateJobsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ActivateJobsResponse]:
        try:
            self._validate_activation(request.type, request.worker, request.timeout, request.maxJobsToActivate)
            _check_request_timeout(request.requestTimeout)
            _check_tenants(request.tenantIds)
        except _Abort as e:
            await self._abort(context, e)
        poll_ms = request.requestTimeout if request.requestTimeout != 0 else self.long_poll_ms
        remaining_time = context.time_remaining()
        if poll_ms > 0 and remaining_time is not None:
            poll_ms = min(poll_ms, max(0, int(remaining_time * 1000) - 200))
        requested_at = time.monotonic()
        poll_deadline = requested_at + max(poll_ms, 0) / 1000
        remaining = request.maxJobsToActivate
        fetch = list(request.fetchVariable)
        partitions = self.client.partition_ids
        start = next(self._round_robin)
        while True:
            seen = self._waiters.generation(request.type)
            activated_any = False
            for i in range(len(partitions)):
                pid = partitions[(start + i) % len(partitions)]
                value = activation_request(request.type, request.worker, request.timeout, remaining, fetch)
                try:
                    rec = await self._execute(pid, ValueType.JOB_BATCH, JobBatchIntent.ACTIVATE, value)
                except _Abort as e:
                    if e.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED) and activated_any:
                        continue
                    if (
                        e.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
                        and len(partitions) > 1
                    ):
                        continue
                    await self._abort(context, e)
                activated = list(zip(rec.value["jobKeys"], rec.value["jobs"], strict=True))
                try:
                    jobs = [activated_job(k, j) for k, j in activated]
                except ValueError as e:  # a field out of its protobuf range: these jobs can never be sent
                    log.error("could not render %d activated jobs of type %r: %s", len(activated), request.type, e)
                    self._give_back(activated)
                    await self._abort(context, _Abort(grpc.StatusCode.INTERNAL, f"Could not send activated jobs: {e}"))
                if jobs:
                    if not activated_any:
                        monitoring.JOB_ACTIVATION_LATENCY.observe(time.monotonic() - requested_at)
                    activated_any = True
                    remaining -= len(jobs)
                    sent = False
                    try:
                        yield pb.ActivateJobsResponse(jobs=jobs)
                        sent = True
                    finally:
                        if not sent:  # the client went away while they were sent: never leave them activated
                            self._give_back(activated)
                if remaining <= 0:
                    return
            if activated_any or poll_ms <= 0:
                return
            left = poll_deadline - time.monotonic()
            if left <= 0:
                return
            if not await self._waiters.wait(request.type, seen, left):
                return

    def _pushable(self, key: int, job: dict) -> pb.ActivatedJob | None:
        """The pushed job as a message, or None when it can never be sent: then it fails with an incident.

        Sending a message over the max message size would break the stream, and the job, yielded back, would be
        pushed again and again; like an oversized job in a polled activation, it fails (retries 0) instead.
        """
        try:
            message = activated_job(key, job)
            size = message.ByteSize()
        except ValueError as e:
            reason = f"it cannot be rendered: {e}"
        else:
            if size <= self.max_message_size - 1024:
                return message
            reason = f"with its variables it takes {size} bytes, more than the {self.max_message_size} bytes a message "
            reason += "to a worker may carry"
        error = (
            f"The job with key '{key}' cannot be sent to its worker: {reason}. Reduce the variables (or fetch fewer), "
            "then update the job's retries and resolve this incident."
        )
        log.warning("failing pushed job %d: %s", key, reason)

        async def fail() -> None:
            value = {"retries": 0, "errorMessage": error, "retryBackoff": 0, "variables": {}}
            try:
                await self.client.execute(partition_of(key), ValueType.JOB, JobIntent.FAIL, value, key)
            except Exception as e:  # the job times out and is pushed or polled again
                log.debug("could not fail job %d: %r", key, e)

        task = asyncio.get_running_loop().create_task(fail())
        self._giving_back.add(task)
        task.add_done_callback(self._giving_back.discard)
        return None

    def _give_back(self, activated: list[tuple[int, dict]]) -> None:
        """Make jobs activated for a worker that never received them activatable again (JOB YIELD), at once.

        Runs as a task of its own: the request that activated them may be cancelled already.
        """

        async def give_back() -> None:
            for key, job in activated:
                try:
                    await self.client.execute(partition_of(key), ValueType.JOB, JobIntent.YIELD, job, key)
                except Exception as e:  # the job times out and becomes activatable then
                    log.debug("could not give back job %d: %r", key, e)

        task = asyncio.get_running_loop().create_task(give_back())
        self._giving_back.add(task)
        task.add_done_callback(self._giving_back.discard)

    async def StreamActivatedJobs(
        self, request: pb.StreamActivatedJobsRequest, context: grpc.aio.ServicerContext
    ) -> None:
        """Pushes jobs with ``context.write``, not as a generator: when the client goes while a write waits on flow
        control, the write raises here and the ``finally`` below runs at once. (An abandoned generator runs its
        ``finally`` only when collected: until then its stream stayed registered and took the type's jobs.)"""
        try:
            self._validate_activation(request.type, request.worker or "worker", request.timeout, None)
            _check_tenants(request.tenantIds)
        except _Abort as e:
            await self._abort(context, e)
        queue: asyncio.Queue[Record] = asyncio.Queue()
        open_ = True

        def sink(record: Record) -> bool:
            if not open_ or queue.qsize() >= MAX_PENDING_PUSHES:
                return False
            queue.put_nowait(record)
            return True

        handle = self.client.open_job_stream(
            request.type, request.worker or "", request.timeout, list(request.fetchVariable), sink
        )
        try:
            while True:
                record = await queue.get()
                pending = list(zip(record.value["jobKeys"], record.value["jobs"], strict=True))
                while pending:
                    key, job = pending[0]
                    message = self._pushable(key, job)
                    if message is not None:
                        try:
                            await context.write(message)
                        except asyncio.CancelledError:  # the client went: never leave these jobs activated
                            self._give_back(pending)
                            raise
                        except Exception as e:  # the stream broke (the client went while a write waited)
                            log.debug("job stream of %r closed while sending: %r", request.type, e)
                            self._give_back(pending)
                            return
                    pending.pop(0)
        finally:
            open_ = False
            handle.close()
            left = []
            while not queue.empty():
                record = queue.get_nowait()
                left.extend(zip(record.value["jobKeys"], record.value["jobs"], strict=True))
            if left:
                self._give_back(left)

    # -- not yet supported -----------------------------------------------------------------------------------

    async def _unsupported(self, context: grpc.aio.ServicerContext, what: str) -> NoReturn:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{what} is not supported by this version of Weir yet")
        raise AssertionError("unreachable")

    @_unary
    async def PublishMessage(self, request: pb.PublishMessageRequest, context: grpc.aio.ServicerContext) -> Any:
        """The message goes to the partition its correlation key hashes to (as in Zeebe), to wait there."""
        _check_tenant(request.tenantId)
        if not request.name:
            _fail(grpc.StatusCode.INVALID_ARGUMENT, "Expected a message name, but none given")
        _check_duration("timeToLive", request.timeToLive, minimum=0)
        count = self.client.topology().partitions_count or len(self.client.partition_ids)
        value = {
            "name": request.name,
            "correlationKey": request.correlationKey,
            "timeToLive": request.timeToLive,
            "messageId": request.messageId,
            "variables": parse_variables(request.variables),
            "tenantId": TENANT,
        }
        pid = subscription_partition(request.correlationKey, count)
        rec = await self._execute(pid, ValueType.MESSAGE, MessageIntent.PUBLISH, value)
        return pb.PublishMessageResponse(key=rec.key, tenantId=TENANT)

    @_unary
    async def BroadcastSignal(self, request: pb.BroadcastSignalRequest, context: grpc.aio.ServicerContext) -> Any:
        """Any partition takes the broadcast and answers once it is written; it reaches the others from there."""
        _check_tenant(request.tenantId)
        if not request.signalName:
            _fail(grpc.StatusCode.INVALID_ARGUMENT, "Expected a signal name, but none given")
        value = {"signalName": request.signalName, "variables": parse_variables(request.variables), "tenantId": TENANT}
        rec = await self._execute(self._next_partition(), ValueType.SIGNAL, SignalIntent.BROADCAST, value)
        return pb.BroadcastSignalResponse(key=rec.key, tenantId=TENANT)

    async def ModifyProcessInstance(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self._unsupported(context, "ModifyProcessInstance")

    async def MigrateProcessInstance(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self._unsupported(context, "MigrateProcessInstance")
