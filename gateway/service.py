"""The Zeebe gateway protocol (``gateway_protocol.Gateway``) on top of :class:`GatewayCommands`.

Each RPC reads its request message, hands plain values to the transport-neutral commands (validation, partition
routing, timeouts, rejections: gateway/commands.py) and renders the record they return as a reply message. A
:class:`CommandError` becomes the gRPC status of its code, with Zeebe's ``Command 'X' rejected with code 'Y': reason``
messages for rejections.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn

import grpc

from broker import monitoring
from broker.engine.deployment_limits import DeploymentLimits
from broker.protocol.enums import JobIntent, ValueType
from broker.protocol.keys import partition_of
from broker.protocol.record import Record
from broker.transport.broker_client import BrokerClient
from gateway.api import gateway_pb2 as pb
from gateway.api import gateway_pb2_grpc as pb_grpc
from gateway.caller import CALLER
from gateway.commands import (
    DEFAULT_LONG_POLL_MS,
    DEFAULT_REQUEST_TIMEOUT_MS,
    TENANT,
    ActivateInstruction,
    CommandError,
    ErrorCode,
    GatewayCommands,
    invalid,
    parse_variables,
    validate_activation,
)
from gateway.directory import Directory
from gateway.job_results import job_result as build_job_result

log = logging.getLogger("weir.gateway")

#: The API level the gateway implements (Camunda 8.9's Orchestration Cluster API and gateway protocol): the
#: topology's gatewayVersion and the REST API's OpenAPI info.version.
VERSION = "8.9.0"
#: Pushed jobs one StreamActivatedJobs stream may hold while its client has not read them. Beyond, the broker's
#: pushes are refused and the jobs made activatable again at once (for polling workers), so a worker that stops
#: reading cannot hoard the jobs of its type, nor grow the gateway's memory, until it is gone. The bound is far above
#: what a reading worker ever has waiting (a refused push is not offered to another stream later), and
#: WEIR_MAX_PENDING_PUSHES sets it.
MAX_PENDING_PUSHES = int(os.environ.get("WEIR_MAX_PENDING_PUSHES", "1024"))

STATUS_CODES = {code: grpc.StatusCode[code.value] for code in ErrorCode}


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


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
        tenantId=job.get("tenantId") or TENANT,
        kind=pb.ActivatedJob.JobKind.Value(job.get("jobKind") or "BPMN_ELEMENT"),
        listenerEventType=pb.ActivatedJob.ListenerEventType.Value(job.get("jobListenerEventType") or "UNSPECIFIED"),
        userTask=_user_task_properties(job["userTask"]) if job.get("userTask") else None,
        tags=job.get("tags") or [],
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


def job_result(result: pb.JobResult) -> dict[str, Any]:
    """CompleteJobRequest.result as the JOB COMPLETE command carries it: a task listener's denial or corrections (only
    those present: an absent one keeps the task's value), or a job-worker ad-hoc sub-process's choice of elements."""
    corrections: dict[str, Any] = {}
    if result.HasField("corrections"):
        c = result.corrections
        for name in ("assignee", "dueDate", "followUpDate", "priority"):
            if c.HasField(name):
                corrections[name] = getattr(c, name)
        for name in ("candidateUsers", "candidateGroups"):
            if c.HasField(name):
                corrections[name] = list(getattr(c, name).values)
    activate = [
        (
            item.elementId,
            parse_variables(item.variables, f"the variables of activateElements[{n}] ('{item.elementId}')"),
        )
        for n, item in enumerate(result.activateElements)
    ]
    return build_job_result(
        result.type,
        denied=result.denied,
        denied_reason=result.deniedReason,
        corrections=corrections,
        activate_elements=activate,
        completion_condition_fulfilled=result.isCompletionConditionFulfilled,
        cancel_remaining_instances=result.isCancelRemainingInstances,
    )


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
        tenantId=d.get("tenantId") or TENANT,
    )


def _unary(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Turn a :class:`CommandError` raised anywhere in an RPC into its gRPC status."""

    counted = {code: monitoring.GRPC_REQUESTS.labels(method.__name__, code.name) for code in grpc.StatusCode}

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            reply = await method(self, request, context)
        except CommandError as e:
            status = STATUS_CODES[e.code]
            counted[status].inc()
            await context.abort(status, e.message)
        counted[grpc.StatusCode.OK].inc()
        return reply

    return wrapper


async def _abort(context: grpc.aio.ServicerContext, e: CommandError) -> NoReturn:
    await context.abort(STATUS_CODES[e.code], e.message)
    raise AssertionError("unreachable")


class GatewayService(pb_grpc.GatewayServicer):
    """Implements every RPC of ``gateway_protocol.Gateway``."""

    def __init__(
        self,
        client: BrokerClient,
        *,
        long_poll_ms: int = DEFAULT_LONG_POLL_MS,
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        max_message_size: int = 4 * 1024 * 1024,
        commands: GatewayCommands | None = None,
        deployment_limits: DeploymentLimits | None = None,
        multi_tenancy: bool = False,
    ) -> None:
        self.client = client
        self.max_message_size = max_message_size
        # What the gateway knows of its callers (set by start_gateway_server): job streams check tenants with it.
        self.directory: Directory | None = None
        self.commands = commands or GatewayCommands(
            client,
            long_poll_ms=long_poll_ms,
            request_timeout_ms=request_timeout_ms,
            deployment_limits=deployment_limits,
            multi_tenancy=multi_tenancy,
        )

    # -- topology --------------------------------------------------------------------------------------------

    async def Topology(self, request: pb.TopologyRequest, context: grpc.aio.ServicerContext) -> pb.TopologyResponse:
        topo = self.commands.topology()
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

    @_unary
    async def DeployResource(self, request: pb.DeployResourceRequest, context: grpc.aio.ServicerContext) -> Any:
        tenant = self.commands.tenant("DeployResource", request.tenantId)
        self.commands.check_deployment_size(len(request.resources))
        rec = await self.commands.deploy([(r.name, r.content) for r in request.resources], tenant)
        deployments = [
            pb.Deployment(
                process=pb.ProcessMetadata(
                    bpmnProcessId=m["bpmnProcessId"],
                    version=m["version"],
                    processDefinitionKey=m["processDefinitionKey"],
                    resourceName=m["resourceName"],
                    tenantId=tenant,
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
                    tenantId=tenant,
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
                    tenantId=tenant,
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
                    tenantId=tenant,
                )
            )
            for m in rec.value.get("formMetadata") or []
        ]
        return pb.DeployResourceResponse(key=rec.key, deployments=deployments, tenantId=tenant)

    @_unary
    async def DeployProcess(self, request: pb.DeployProcessRequest, context: grpc.aio.ServicerContext) -> Any:
        self.commands.check_deployment_size(len(request.processes))
        rec = await self.commands.deploy([(p.name, p.definition) for p in request.processes])
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
        """A decision that fails to evaluate is still an answer: ``failedDecisionId`` and ``failureMessage`` say why."""
        tenant = self.commands.tenant("EvaluateDecision", request.tenantId)
        variables = parse_variables(request.variables)
        rec = await self.commands.evaluate_decision(request.decisionId, request.decisionKey, variables, tenant)
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
            tenantId=v.get("tenantId") or tenant,
            decisionInstanceKey=rec.key,
        )

    @_unary
    async def DeleteResource(self, request: pb.DeleteResourceRequest, context: grpc.aio.ServicerContext) -> Any:
        await self.commands.delete_resource(request.resourceKey)
        return pb.DeleteResourceResponse()

    # -- process instances -----------------------------------------------------------------------------------

    async def _create(
        self,
        request: pb.CreateProcessInstanceRequest,
        *,
        await_result: bool = False,
        fetch: list[str] | None = None,
        request_timeout_ms: int = 0,
    ) -> Record:
        tenant = self.commands.tenant("CreateProcessInstance", request.tenantId)
        start_at = [i.elementId for i in request.startInstructions]
        if any(not element_id for element_id in start_at):
            invalid("Expected an elementId in every start instruction, but one has none")
        variables = parse_variables(request.variables)
        return await self.commands.create_process_instance(
            request.bpmnProcessId,
            request.version,
            request.processDefinitionKey,
            variables,
            await_result=await_result,
            fetch_variables=fetch,
            request_timeout_ms=request_timeout_ms,
            business_id=request.businessId,
            tags=list(request.tags),
            start_instructions=start_at,
            tenant_id=tenant,
        )

    @_unary
    async def CreateProcessInstance(
        self, request: pb.CreateProcessInstanceRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        rec = await self._create(request)
        v = rec.value
        return pb.CreateProcessInstanceResponse(
            processDefinitionKey=v["processDefinitionKey"],
            bpmnProcessId=v["bpmnProcessId"],
            version=v["version"],
            processInstanceKey=v["processInstanceKey"],
            tenantId=v.get("tenantId") or TENANT,
            tags=v.get("tags") or [],
            businessId=v.get("businessId") or None,
        )

    @_unary
    async def CreateProcessInstanceWithResult(
        self, request: pb.CreateProcessInstanceWithResultRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        rec = await self._create(
            request.request,
            await_result=True,
            fetch=list(request.fetchVariables),
            request_timeout_ms=request.requestTimeout,
        )
        v = rec.value
        return pb.CreateProcessInstanceWithResultResponse(
            processDefinitionKey=v["processDefinitionKey"],
            bpmnProcessId=v["bpmnProcessId"],
            version=v["version"],
            processInstanceKey=v["processInstanceKey"],
            variables=_dumps(v.get("variables") or {}),
            tenantId=v.get("tenantId") or TENANT,
            tags=v.get("tags") or [],
            businessId=v.get("businessId") or None,
        )

    @_unary
    async def CancelProcessInstance(
        self, request: pb.CancelProcessInstanceRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        await self.commands.cancel_process_instance(request.processInstanceKey)
        return pb.CancelProcessInstanceResponse()

    @_unary
    async def SetVariables(self, request: pb.SetVariablesRequest, context: grpc.aio.ServicerContext) -> Any:
        variables = parse_variables(request.variables)
        rec = await self.commands.set_variables(request.elementInstanceKey, variables, local=request.local)
        return pb.SetVariablesResponse(key=rec.key)

    @_unary
    async def ResolveIncident(self, request: pb.ResolveIncidentRequest, context: grpc.aio.ServicerContext) -> Any:
        await self.commands.resolve_incident(request.incidentKey)
        return pb.ResolveIncidentResponse()

    # -- jobs ------------------------------------------------------------------------------------------------

    @_unary
    async def CompleteJob(self, request: pb.CompleteJobRequest, context: grpc.aio.ServicerContext) -> Any:
        result = job_result(request.result) if request.HasField("result") else None
        await self.commands.complete_job(request.jobKey, parse_variables(request.variables), result=result)
        return pb.CompleteJobResponse()

    @_unary
    async def FailJob(self, request: pb.FailJobRequest, context: grpc.aio.ServicerContext) -> Any:
        variables = parse_variables(request.variables)
        await self.commands.fail_job(
            request.jobKey, request.retries, request.errorMessage, request.retryBackOff, variables
        )
        return pb.FailJobResponse()

    @_unary
    async def ThrowError(self, request: pb.ThrowErrorRequest, context: grpc.aio.ServicerContext) -> Any:
        variables = parse_variables(request.variables)
        await self.commands.throw_error(request.jobKey, request.errorCode, request.errorMessage, variables)
        return pb.ThrowErrorResponse()

    @_unary
    async def UpdateJobRetries(self, request: pb.UpdateJobRetriesRequest, context: grpc.aio.ServicerContext) -> Any:
        await self.commands.update_job_retries(request.jobKey, request.retries)
        return pb.UpdateJobRetriesResponse()

    @_unary
    async def UpdateJobTimeout(self, request: pb.UpdateJobTimeoutRequest, context: grpc.aio.ServicerContext) -> Any:
        await self.commands.update_job_timeout(request.jobKey, request.timeout)
        return pb.UpdateJobTimeoutResponse()

    async def ActivateJobs(
        self, request: pb.ActivateJobsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ActivateJobsResponse]:
        batches = self.commands.activate_jobs(
            request.type,
            request.worker,
            request.timeout,
            request.maxJobsToActivate,
            list(request.fetchVariable),
            request.requestTimeout,
            tenant_ids=list(request.tenantIds),
            time_remaining_s=context.time_remaining(),
        )
        try:
            while True:
                try:
                    activated = await anext(batches)
                except StopAsyncIteration:
                    return
                except CommandError as e:
                    await _abort(context, e)
                try:
                    jobs = [activated_job(k, j) for k, j in activated]
                except ValueError as e:  # a field out of its protobuf range: these jobs can never be sent
                    log.error("could not render %d activated jobs of type %r: %s", len(activated), request.type, e)
                    self.commands.give_back(activated)
                    await _abort(context, CommandError(ErrorCode.INTERNAL, f"Could not send activated jobs: {e}"))
                sent = False
                try:
                    yield pb.ActivateJobsResponse(jobs=jobs)
                    sent = True
                finally:
                    if not sent:  # the client went away while they were sent: never leave them activated
                        self.commands.give_back(activated)
        finally:
            await batches.aclose()

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

        self.commands.spawn(fail())
        return None

    async def StreamActivatedJobs(
        self, request: pb.StreamActivatedJobsRequest, context: grpc.aio.ServicerContext
    ) -> None:
        """Pushes jobs with ``context.write``, not as a generator: when the client goes while a write waits on flow
        control, the write raises here and the ``finally`` below runs at once. (An abandoned generator runs its
        ``finally`` only when collected: until then its stream stayed registered and took the type's jobs.)"""
        try:
            tenants = self.commands.tenants("StreamActivatedJobs", list(request.tenantIds))
            validate_activation(request.type, request.worker or "worker", request.timeout, None)
        except CommandError as e:
            await _abort(context, e)
        queue: asyncio.Queue[Record] = asyncio.Queue()
        open_ = True

        def sink(record: Record) -> bool:
            if not open_ or queue.qsize() >= MAX_PENDING_PUSHES:
                return False
            queue.put_nowait(record)
            return True

        caller = CALLER.get()
        if caller is not None and self.directory is not None:
            access = await self.directory.access(caller)
            unseen = next((t for t in tenants if not access.sees_tenant(t)), None)
            if unseen is not None:
                await context.abort(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"Expected to handle gRPC request StreamActivatedJobs with tenant identifier '{unseen}', but "
                    "tenant is not authorized to perform this request",
                )
        handle = self.client.open_job_stream(
            request.type, request.worker or "", request.timeout, list(request.fetchVariable), sink, tenants, caller
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
                            self.commands.give_back(pending)
                            raise
                        except Exception as e:  # the stream broke (the client went while a write waited)
                            log.debug("job stream of %r closed while sending: %r", request.type, e)
                            self.commands.give_back(pending)
                            return
                    pending.pop(0)
        finally:
            open_ = False
            handle.close()
            left: list[tuple[int, dict]] = []
            while not queue.empty():
                record = queue.get_nowait()
                left.extend(zip(record.value["jobKeys"], record.value["jobs"], strict=True))
            if left:
                self.commands.give_back(left)

    # -- not yet supported -----------------------------------------------------------------------------------

    async def _unsupported(self, context: grpc.aio.ServicerContext, what: str) -> NoReturn:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{what} is not supported by this version of Weir yet")
        raise AssertionError("unreachable")

    @_unary
    async def PublishMessage(self, request: pb.PublishMessageRequest, context: grpc.aio.ServicerContext) -> Any:
        tenant = self.commands.tenant("PublishMessage", request.tenantId)
        variables = parse_variables(request.variables)
        rec = await self.commands.publish_message(
            request.name, request.correlationKey, request.timeToLive, request.messageId, variables, tenant
        )
        return pb.PublishMessageResponse(key=rec.key, tenantId=tenant)

    @_unary
    async def BroadcastSignal(self, request: pb.BroadcastSignalRequest, context: grpc.aio.ServicerContext) -> Any:
        tenant = self.commands.tenant("BroadcastSignal", request.tenantId)
        variables = parse_variables(request.variables)
        rec = await self.commands.broadcast_signal(request.signalName, variables, tenant)
        return pb.BroadcastSignalResponse(key=rec.key, tenantId=tenant)

    @_unary
    async def ModifyProcessInstance(
        self, request: pb.ModifyProcessInstanceRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        activate = [
            ActivateInstruction(
                a.elementId,
                a.ancestorElementInstanceKey,
                tuple(
                    (v.scopeId, parse_variables(v.variables, f"variables of the '{a.elementId}' activation"))
                    for v in a.variableInstructions
                ),
            )
            for a in request.activateInstructions
        ]
        terminate = [t.elementInstanceKey for t in request.terminateInstructions]
        await self.commands.modify_process_instance(request.processInstanceKey, activate, terminate)
        return pb.ModifyProcessInstanceResponse()

    @_unary
    async def MigrateProcessInstance(
        self, request: pb.MigrateProcessInstanceRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        plan = request.migrationPlan
        mapping = [(m.sourceElementId, m.targetElementId) for m in plan.mappingInstructions]
        await self.commands.migrate_process_instance(
            request.processInstanceKey, plan.targetProcessDefinitionKey, mapping
        )
        return pb.MigrateProcessInstanceResponse()
