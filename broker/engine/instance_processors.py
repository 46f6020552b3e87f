"""Deployment, process instance creation and cancellation, and variable documents (SetVariables)."""

from __future__ import annotations

from broker.dmn import DmnParseError, parse_dmn
from broker.engine import behaviors as b
from broker.engine import decision_processors as decisions
from broker.engine import events, identity, modification, signals
from broker.engine.bpmn import BpmnValidationError, ExpressionCheck, parse_bpmn, resource_checksum, supported_kinds
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.deployment_limits import (
    MAX_SCOPE_DEPTH,
    DeploymentBudget,
    ElementBudgetExceeded,
    rejection,
    too_many_resources,
)
from broker.engine.elements import lifecycle
from broker.engine.elements.registry import SUPPORTED_KINDS
from broker.protocol import labels
from broker.protocol.enums import (
    CommandDistributionIntent,
    DeploymentIntent,
    MessageStartEventSubscriptionIntent,
    ProcessInstanceBusinessIdIntent,
    ProcessInstanceCreationIntent,
    ProcessInstanceIntent,
    ProcessIntent,
    RecordType,
    RejectionType,
    ValueType,
    VariableDocumentIntent,
)
from broker.protocol.record import Record
from broker.protocol.values import ProcessInstanceValue
from broker.state.element_instance import ElementInstance

_SUPPORTED = supported_kinds(SUPPORTED_KINDS)

PI = ProcessInstanceIntent


def deploy(ctx: ProcessingContext, cmd: Record) -> None:
    """DEPLOYMENT CREATE: all resources or none; an identical re-deploy keeps the existing version.

    Deployments are made on one partition, which then distributes the new processes — keys and versions included —
    to every other partition (COMMAND_DISTRIBUTION), so instances of a new version can start anywhere.
    """
    if cmd.value.get("distributedFrom"):
        _deploy_distributed(ctx, cmd)
        return
    if not b.authorized(ctx, "RESOURCE", "CREATE", tenant=b.tenant_of(cmd.value), request="DeployResource"):
        return
    resources = cmd.value.get("resources") or []
    if not resources:
        ctx.reject(RejectionType.INVALID_ARGUMENT, "Expected to deploy at least one resource, but none given")
        return
    limits = b.services(ctx).deployment_limits
    too_many = too_many_resources(limits, len(resources))
    if too_many is not None:
        ctx.reject(RejectionType.INVALID_ARGUMENT, too_many)
        return
    check = _ResourceCheck(b.services(ctx).expressions.check, DeploymentBudget(limits))
    check.run(resources)
    if check.problems:
        ctx.reject(RejectionType.INVALID_ARGUMENT, rejection(check.problems, check.skipped, limits))
        return
    parsed, dmns, forms = check.processes, check.dmns, check.forms
    tenant = b.tenant_of(cmd.value)
    metadata = []
    created: list[dict] = []
    models = b.services(ctx).models
    deployment_key = ctx.keys.next_key()
    checked = []
    for name, data, process in parsed:
        checksum = resource_checksum(data).hex()
        latest = ctx.state.processes.latest(tenant, process.id)
        duplicate = latest is not None and latest["checksum"] == checksum and latest["resourceName"] == name
        checked.append((name, data, process, checksum, latest, duplicate))
    # As Zeebe does: when anything in a deployment changed, every process in it gets a new version, so that call
    # activities bound to their deployment call versions that were deployed together.
    for dmn_res in dmns:
        decisions.check_dmn(ctx, dmn_res, tenant)
    for form_res in forms:
        decisions.check_form(ctx, form_res, tenant)
    all_duplicates = (
        all(duplicate for *_, duplicate in checked)
        and all(r.duplicate for r in dmns)
        and all(r.duplicate for r in forms)
    )
    extra: dict[str, list] = {
        "decisionRequirements": [],
        "decisions": [],
        "forms": [],
        "decisionRequirementsMetadata": [],
        "decisionsMetadata": [],
        "formMetadata": [],
    }
    for dmn_res in dmns:
        decisions.deploy_dmn(ctx, dmn_res, deployment_key, keep=all_duplicates, out=extra)
    for name, data, process, checksum, latest, _duplicate in checked:
        if all_duplicates:
            assert latest is not None
            metadata.append(_metadata(latest, duplicate=True))
            continue
        key = ctx.keys.next_key()
        stored = {
            "bpmnProcessId": process.id,
            "version": ctx.state.processes.next_version(tenant, process.id),
            "processDefinitionKey": key,
            "resourceName": name,
            "checksum": checksum,
            "resource": data,
            "tenantId": tenant,
            "versionTag": process.version_tag or "",
            "deploymentKey": deployment_key,
        }
        ctx.event(ValueType.PROCESS, ProcessIntent.CREATED, key, stored)
        models.put(key, process)
        if latest is not None:
            events.close_start_timers_of(ctx, latest["processDefinitionKey"])
        events.open_start_timers(ctx, process, key)
        replace_message_starts(ctx, process, key, tenant)
        signals.replace_start_subscriptions(ctx, process, key)
        created.append(stored)
        metadata.append(_metadata(stored, duplicate=False))
    for form_res in forms:
        decisions.deploy_form(ctx, form_res, deployment_key, keep=all_duplicates, out=extra)
    rec = ctx.event(
        ValueType.DEPLOYMENT,
        DeploymentIntent.CREATED,
        deployment_key,
        {
            "resources": [{"resourceName": r["resourceName"]} for r in resources],
            "processesMetadata": metadata,
            "decisionRequirementsMetadata": extra["decisionRequirementsMetadata"],
            "decisionsMetadata": extra["decisionsMetadata"],
            "formMetadata": extra["formMetadata"],
            "tenantId": tenant,
        },
    )
    ctx.respond(rec)
    if created or extra["decisionRequirements"] or extra["forms"]:
        _start_distribution(ctx, deployment_key, created, extra)


class _ResourceCheck:
    """Reads a deployment's resources in order, noting every problem, within the deployment's budget: after
    ``maxInvalidResources`` invalid resources, or once the resources hold too many XML elements together, the rest
    are skipped (``skipped`` says how many)."""

    def __init__(self, check_expression: ExpressionCheck, budget: DeploymentBudget) -> None:
        self.check_expression = check_expression
        self.budget = budget
        self.problems: list[str] = []
        self.skipped = 0
        self.processes: list[tuple[str, bytes, bpmn.Process]] = []
        self.dmns: list[decisions.DmnResource] = []
        self.forms: list[decisions.FormResource] = []
        self._process_ids: dict[str, str] = {}
        self._decisions: dict[str, str] = {}
        self._drgs: dict[str, str] = {}
        self._forms: dict[str, str] = {}

    def run(self, resources: list[dict]) -> None:
        for index, res in enumerate(resources):
            if self.budget.exhausted:
                self.skipped = len(resources) - index
                return
            name = res["resourceName"]
            problems_before = len(self.problems)
            try:
                self._read(name, res["resource"])
            except ElementBudgetExceeded:
                self.problems.append(f"'{name}': {self.budget.element_limit_reason()}")
                self.skipped = len(resources) - index - 1
                return
            if len(self.problems) > problems_before:
                self.budget.invalid_resources += 1

    def _read(self, name: str, data: bytes) -> None:
        if name.endswith(".form"):
            self._read_form(name, data)
        elif not name.endswith((".bpmn", ".xml", ".dmn")):
            self.problems.append(
                f"'{name}': Expected the resource to be a BPMN model (.bpmn, .xml), a DMN model (.dmn) or a form "
                "(.form), but its name has none of these extensions"
            )
        elif name.endswith(".dmn"):
            self.budget.measure(data)
            self._read_dmn(name, data)
        else:
            self._read_bpmn(name, data)

    def _read_dmn(self, name: str, data: bytes) -> None:
        try:
            drg = parse_dmn(data, name)
        except DmnParseError as e:
            self.problems.append(str(e))
            return
        if drg.id in self._drgs:
            self.problems.append(
                "Expected the decision requirements ids to be unique within a deployment but found a duplicated "
                f"id '{drg.id}' in the resources '{self._drgs[drg.id]}' and '{name}'."
            )
        self._drgs[drg.id] = name
        for decision in drg.decisions:
            if decision.id in self._decisions:
                self.problems.append(
                    "Expected the decision ids to be unique within a deployment but found a duplicated id "
                    f"'{decision.id}' in the resources '{self._decisions[decision.id]}' and '{name}'."
                )
            self._decisions[decision.id] = name
        self.dmns.append(decisions.DmnResource(name, data, drg))

    def _read_form(self, name: str, data: bytes) -> None:
        try:
            form_id = decisions.read_form_id(data)
        except ValueError as e:
            self.problems.append(f"'{name}': {e}")
            return
        if form_id in self._forms:
            self.problems.append(
                "Expected the form ids to be unique within a deployment but found a duplicated id "
                f"'{form_id}' in the resources '{self._forms[form_id]}' and '{name}'."
            )
        self._forms[form_id] = name
        self.forms.append(decisions.FormResource(name, data, form_id))

    def _read_bpmn(self, name: str, data: bytes) -> None:
        too_deep = self.budget.measure(data)
        if too_deep is not None:
            self.problems.append(
                f"'{name}': '{too_deep}': sub-processes are nested more than {MAX_SCOPE_DEPTH} levels deep "
                "(the limit); flatten the model"
            )
            return
        try:
            processes = parse_bpmn(data, name, check_expression=self.check_expression, supported=_SUPPORTED)
        except BpmnValidationError as e:
            self.problems.append(str(e))
            return
        except RecursionError:  # a structure nested deeper than the reader can follow, not a broker failure
            self.problems.append(f"'{name}': the model is nested too deeply to be read; flatten the model")
            return
        for p in processes:
            if p.id in self._process_ids:
                self.problems.append(
                    f"Duplicated process id in resources '{self._process_ids[p.id]}' and '{name}': '{p.id}'"
                )
            self._process_ids[p.id] = name
            self.processes.append((name, data, p))


def _start_distribution(ctx: ProcessingContext, deployment_key: int, processes: list[dict], extra: dict) -> None:
    """Every other partition must receive these processes, decision requirements, decisions and forms."""
    command = {"distributedFrom": ctx.partition_id, "deploymentKey": deployment_key, "processes": processes}
    for name in ("decisionRequirements", "decisions", "forms"):
        if extra[name]:
            command[name] = extra[name]
    b.distribute(ctx, deployment_key, ValueType.DEPLOYMENT, DeploymentIntent.CREATE, command)


def _deploy_distributed(ctx: ProcessingContext, cmd: Record) -> None:
    """A deployment made on another partition: store its processes under their keys and versions (idempotent)."""
    metadata = []
    written_before = len(ctx.records)
    for stored in cmd.value.get("processes") or []:
        if ctx.state.processes.get(stored["processDefinitionKey"]) is None:
            latest = ctx.state.processes.latest(b.tenant_of(stored), stored["bpmnProcessId"])
            ctx.event(ValueType.PROCESS, ProcessIntent.CREATED, stored["processDefinitionKey"], stored)
            if latest is None or latest["version"] < stored["version"]:
                process = b.services(ctx).models.get(stored["processDefinitionKey"])
                replace_message_starts(ctx, process, stored["processDefinitionKey"], b.tenant_of(stored))
        metadata.append(_metadata(stored, duplicate=False))
    extra: dict[str, list] = {"decisionRequirementsMetadata": [], "decisionsMetadata": [], "formMetadata": []}
    decisions.deploy_distributed(ctx, cmd.value, extra)
    names = [p["resourceName"] for p in cmd.value.get("processes") or []]
    names += [d["resourceName"] for d in cmd.value.get("decisionRequirements") or []]
    names += [f["resourceName"] for f in cmd.value.get("forms") or []]
    value = {
        "resources": [{"resourceName": n} for n in names],
        "processesMetadata": metadata,
        **extra,
        "tenantId": _distributed_tenant(cmd.value),
    }
    key = cmd.value.get("deploymentKey", -1)
    if len(ctx.records) == written_before and names:
        # a redelivery: the acknowledgement of the first delivery was lost (e.g. a leader change on the sending
        # partition); answer again without a second DEPLOYMENT CREATED under the same key
        ctx.respond(
            Record(
                position=-1,
                key=key,
                record_type=RecordType.EVENT,
                value_type=ValueType.DEPLOYMENT,
                intent=int(DeploymentIntent.CREATED),
                timestamp=ctx.now,
                value=value,
                partition_id=ctx.partition_id,
            )
        )
        return
    ctx.respond(ctx.event(ValueType.DEPLOYMENT, DeploymentIntent.CREATED, key, value))


def _distributed_tenant(command: dict) -> str:
    """The tenant of a deployment distributed from another partition: that of the resources it carries."""
    for name in ("processes", "decisionRequirements", "forms"):
        for stored in command.get(name) or []:
            return b.tenant_of(stored)
    return b.TENANT


def close_message_starts(ctx: ProcessingContext, tenant: str, process_id: str) -> None:
    """Every message start subscription of the tenant's ``process_id`` (those of its listening version) goes."""
    for old in ctx.state.message_starts.for_process(tenant, process_id):
        ctx.event(
            ValueType.MESSAGE_START_EVENT_SUBSCRIPTION,
            MessageStartEventSubscriptionIntent.DELETED,
            old["processDefinitionKey"],
            old,
        )


def replace_message_starts(ctx: ProcessingContext, process: bpmn.Process, definition_key: int, tenant: str) -> None:
    """The latest version's message start events are the ones that listen: older versions' subscriptions go."""
    close_message_starts(ctx, tenant, process.id)
    for start_id in process.start_event_ids:
        start = process.element(start_id)
        if start.message is None:
            continue
        name = b.evaluate(ctx, start.message.name, -1)
        if not isinstance(name, str) or not name:
            continue
        ctx.event(
            ValueType.MESSAGE_START_EVENT_SUBSCRIPTION,
            MessageStartEventSubscriptionIntent.CREATED,
            definition_key,
            {
                "processDefinitionKey": definition_key,
                "bpmnProcessId": process.id,
                "startEventId": start.id,
                "messageName": name,
                "messageKey": -1,
                "processInstanceKey": -1,
                "correlationKey": "",
                "variables": {},
                "tenantId": tenant,
            },
        )


def acknowledge_distribution(ctx: ProcessingContext, cmd: Record) -> None:
    """COMMAND_DISTRIBUTION ACKNOWLEDGE: the target partition has the command; stop delivering it."""
    partition_id = cmd.value.get("partitionId", -1)
    pending = ctx.state.distributions.get(cmd.key, partition_id)
    if pending is None:
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected a distribution with key '{cmd.key}' to partition {partition_id}, but none is pending",
        )
        return
    ctx.event(ValueType.COMMAND_DISTRIBUTION, CommandDistributionIntent.ACKNOWLEDGED, cmd.key, pending)
    identity.answer_when_distributed(ctx, cmd.key)


def _metadata(stored: dict, *, duplicate: bool) -> dict:
    return {
        "bpmnProcessId": stored["bpmnProcessId"],
        "version": stored["version"],
        "processDefinitionKey": stored["processDefinitionKey"],
        "resourceName": stored["resourceName"],
        "checksum": stored["checksum"],
        "isDuplicate": duplicate,
        "tenantId": b.tenant_of(stored),
    }


def create_instance(ctx: ProcessingContext, cmd: Record) -> None:
    """PROCESS_INSTANCE_CREATION CREATE (and CREATE_WITH_AWAITING_RESULT)."""
    v = cmd.value
    process_id = v.get("bpmnProcessId", "")
    key = v.get("processDefinitionKey", -1)
    version = v.get("version", -1)
    tenant = b.tenant_of(v)
    if b.refuse_unassigned_tenant(ctx, "CreateProcessInstance", [tenant]):
        return
    if key > 0:
        stored = ctx.state.processes.get(key)
        if stored is None or b.tenant_of(stored) != tenant:
            ctx.reject(
                RejectionType.NOT_FOUND,
                f"Expected to find process definition with key '{key}', but none found",
            )
            return
    elif version is None or version < 0:
        stored = ctx.state.processes.latest(tenant, process_id)
        if stored is None:
            ctx.reject(
                RejectionType.NOT_FOUND,
                f"Expected to find process definition with process ID '{process_id}', but none found",
            )
            return
    else:
        found = ctx.state.processes.key_of(tenant, process_id, version)
        stored = ctx.state.processes.get(found) if found is not None else None
        if stored is None:
            ctx.reject(
                RejectionType.NOT_FOUND,
                f"Expected to find process definition with process ID '{process_id}' and version '{version}',"
                " but none found",
            )
            return
    if not b.authorized(ctx, "PROCESS_DEFINITION", "CREATE_PROCESS_INSTANCE", [stored["bpmnProcessId"]]):
        return
    business_id, tags = v.get("businessId") or "", v.get("tags") or []
    problem = labels.business_id_problem(business_id) or labels.tags_problem(tags)
    if problem is not None:
        ctx.reject(RejectionType.INVALID_ARGUMENT, problem)
        return
    if business_id and b.services(ctx).business_id_uniqueness:
        holder = ctx.state.business_ids.active(tenant, stored["bpmnProcessId"], business_id)
        if holder is not None:
            ctx.reject(
                RejectionType.ALREADY_EXISTS,
                f"Expected to create an instance of process '{stored['bpmnProcessId']}' with business id "
                f"'{business_id}', but the active process instance '{holder}' already has it; business ids are "
                "unique among active root instances of a process (broker.businessIdUniqueness)",
            )
            return
    tags = labels.normal_tags(tags)
    process = b.services(ctx).models.get(stored["processDefinitionKey"])
    start_ids = [i.get("elementId", "") for i in v.get("startInstructions") or []]
    if process.none_start_event_id is None and not start_ids:
        ctx.reject(
            RejectionType.INVALID_STATE,
            "Expected to create instance of process with none start event, but there is no such event",
        )
        return
    problem = modification.check_start_instructions(process, start_ids) if start_ids else None
    if problem is not None:
        ctx.reject(RejectionType.INVALID_ARGUMENT, problem)
        return
    pi_key = ctx.keys.next_key()
    instance_value = ProcessInstanceValue(
        bpmn_process_id=stored["bpmnProcessId"],
        version=stored["version"],
        process_definition_key=stored["processDefinitionKey"],
        process_instance_key=pi_key,
        element_id=stored["bpmnProcessId"],
        flow_scope_key=-1,
        bpmn_element_type=bpmn.PROCESS,
        bpmn_event_type=bpmn.UNSPECIFIED,
        root_process_instance_key=pi_key,  # a created instance is the root of its chain of calls
        tenant_id=tenant,
        business_id=business_id,
        tags=tuple(tags),
    )
    variables = v.get("variables") or {}
    # the instance's variables are written before the instance itself is activated
    to_be = ElementInstance(pi_key, PI.ELEMENT_ACTIVATING, instance_value)
    for name, value in variables.items():
        b.set_local_variable(ctx, pi_key, name, value, instance=to_be)
    created = {
        "bpmnProcessId": stored["bpmnProcessId"],
        "version": stored["version"],
        "processDefinitionKey": stored["processDefinitionKey"],
        "processInstanceKey": pi_key,
        "variables": variables,
        "startInstructions": [{"elementId": element_id} for element_id in start_ids],
        "fetchVariables": v.get("fetchVariables") or [],
        "tenantId": tenant,
        "businessId": business_id,
        "tags": tags,
    }
    awaiting = cmd.intent == ProcessInstanceCreationIntent.CREATE_WITH_AWAITING_RESULT
    if awaiting and cmd.request is not None:
        created["awaitingResult"] = {
            "streamId": cmd.request.stream_id,
            "requestId": cmd.request.request_id,
            "fetchVariables": v.get("fetchVariables") or [],
        }
    rec = ctx.event(ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATED, pi_key, created)
    if not awaiting:
        ctx.respond(rec)
    if start_ids:
        modification.start_at(ctx, process, instance_value, start_ids)
        return
    ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.ACTIVATE_ELEMENT, pi_key, instance_value.to_dict())


def cancel_instance(ctx: ProcessingContext, cmd: Record) -> None:
    inst = ctx.state.elements.get(cmd.key)
    if inst is None or inst.value.flow_scope_key > 0 or inst.state == PI.ELEMENT_TERMINATING:
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to cancel a process instance with key '{cmd.key}', but no such process was found",
        )
        return
    if not b.may_update(ctx, inst.value, "CANCEL_PROCESS_INSTANCE"):
        return
    if inst.value.parent_process_instance_key > 0:
        ctx.reject(
            RejectionType.INVALID_STATE,
            f"Expected to cancel a process instance with key '{cmd.key}', but it is created by a parent process "
            f"instance. Cancel the root process instance '{b.root_instance_key(ctx, inst.value)}' instead.",
        )
        return
    rec = lifecycle.terminate(ctx, inst)
    ctx.respond(rec)


def assign_business_id(ctx: ProcessingContext, cmd: Record) -> None:
    """PROCESS_INSTANCE_BUSINESS_ID ASSIGN (Camunda 8.10): a running root instance without a business id gets one,
    once; what it creates from then on carries it. Sending the id it already has again is accepted and changes
    nothing. Not while business ids are unique: that check would need every partition's instances."""
    key = cmd.key if cmd.key > 0 else cmd.value.get("processInstanceKey", -1)
    business_id = str(cmd.value.get("businessId") or "")
    inst = ctx.state.elements.get(key)
    what = f"Expected to assign a business id to the process instance with key '{key}'"
    if inst is None or inst.value.flow_scope_key > 0:
        ctx.reject(RejectionType.NOT_FOUND, f"{what}, but no such process instance was found")
        return
    if not b.may_update(ctx, inst.value):
        return
    problem = labels.business_id_problem(business_id) or (None if business_id else "Expected a businessId, but none")
    if problem is not None:
        ctx.reject(RejectionType.INVALID_ARGUMENT, problem)
        return
    v = inst.value
    if v.business_id == business_id:
        ctx.respond(_business_id_record(ctx, inst))  # the same id again: nothing to do
        return
    refusal = None
    if b.services(ctx).business_id_uniqueness:
        refusal = "business ids are unique (broker.businessIdUniqueness), so they are given on creation only"
    elif v.parent_process_instance_key > 0:
        refusal = "it was started by a call activity; its root instance's business id is the one that counts"
    elif v.business_id:
        refusal = f"it already has the business id '{v.business_id}', and a business id is given once"
    elif inst.state not in (PI.ELEMENT_ACTIVATING, PI.ELEMENT_ACTIVATED):
        refusal = "it is ending"
    if refusal is not None:
        ctx.reject(RejectionType.INVALID_STATE, f"{what}, but {refusal}")
        return
    rec = ctx.event(
        ValueType.PROCESS_INSTANCE_BUSINESS_ID,
        ProcessInstanceBusinessIdIntent.ASSIGNED,
        key,
        _business_id_value(v, business_id),
    )
    ctx.respond(rec)


def _business_id_value(v: ProcessInstanceValue, business_id: str) -> dict:
    return {
        "processInstanceKey": v.process_instance_key,
        "businessId": business_id,
        "bpmnProcessId": v.bpmn_process_id,
        "processDefinitionKey": v.process_definition_key,
        "tenantId": v.tenant_id,
    }


def _business_id_record(ctx: ProcessingContext, inst: ElementInstance) -> Record:
    """The answer to an assignment that changes nothing (no event is written)."""
    return Record(
        position=-1,
        key=inst.key,
        record_type=RecordType.EVENT,
        value_type=ValueType.PROCESS_INSTANCE_BUSINESS_ID,
        intent=int(ProcessInstanceBusinessIdIntent.ASSIGNED),
        timestamp=ctx.now,
        value=_business_id_value(inst.value, inst.value.business_id),
        partition_id=ctx.partition_id,
    )


def update_variables(ctx: ProcessingContext, cmd: Record) -> None:
    """VARIABLE_DOCUMENT UPDATE: SetVariables on an element instance, local or propagating."""
    v = cmd.value
    scope_key = v.get("scopeKey", -1)
    inst = ctx.state.elements.get(scope_key)
    if inst is None:
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to update variables for element with key '{scope_key}', but no such element was found",
        )
        return
    if not b.may_update(ctx, inst.value):
        return
    document = v.get("variables") or {}
    if v.get("updateSemantics") == "LOCAL":
        b.set_local_document(ctx, scope_key, document, inst)
    else:
        b.merge_document(ctx, scope_key, document)
    rec = ctx.event(ValueType.VARIABLE_DOCUMENT, VariableDocumentIntent.UPDATED, ctx.keys.next_key(), v)
    ctx.respond(rec)
