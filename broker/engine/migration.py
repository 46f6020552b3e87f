"""Process instance migration: a running instance moves to another process definition, element by element.

PROCESS_INSTANCE_MIGRATION MIGRATE names the instance, the target definition and mapping instructions (source
element id → target element id). As in Zeebe 8.8, every active element instance must be mapped to an element of the
same type in the same flow scope; the instance keeps its keys, variables, jobs, user tasks, incidents and
subscriptions, which now point at the target definition (``*_MIGRATED`` events), so it goes on in the target version:
completing a migrated job takes the target element's outgoing flows.

The command is checked in full before anything is written (first pass: every element instance, its catch events,
the tokens waiting at joins, the subscriptions to open), so a refusal leaves nothing behind; the second pass writes:

- ``ELEMENT_MIGRATED`` per element instance (top-down), its job (``JOB MIGRATED``), user task (``USER_TASK
  MIGRATED``), incidents (``INCIDENT MIGRATED``) and local variables (``VARIABLE MIGRATED``);
- catch events: a subscription of a mapped catch event moves with it (``TIMER``/``SIGNAL_SUBSCRIPTION MIGRATED``,
  ``PROCESS_MESSAGE_SUBSCRIPTION MIGRATED``); one of an unmapped catch event is closed; a catch event of the target
  element that no subscription was mapped to is subscribed anew;
- tokens waiting at a parallel or inclusive join: ``SEQUENCE_FLOW_DELETED`` of the source flow and
  ``SEQUENCE_FLOW_TAKEN`` of the mapped target flow;
- ``PROCESS_INSTANCE_MIGRATION MIGRATED``, the answer.

Instances started by a call activity are not migrated with their caller (they run their own definition), as in Zeebe.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from broker.engine import behaviors as b
from broker.engine import events
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements.lookup import processor_of
from broker.protocol.enums import (
    CommandDistributionIntent,
    IncidentIntent,
    JobIntent,
    MessageSubscriptionIntent,
    ProcessInstanceIntent,
    ProcessInstanceMigrationIntent,
    ProcessMessageSubscriptionIntent,
    RejectionType,
    SignalSubscriptionIntent,
    TimerIntent,
    UserTaskIntent,
    ValueType,
    VariableIntent,
)
from broker.protocol.record import Record
from broker.protocol.values import ProcessInstanceValue
from broker.state.element_instance import ElementInstance

PI = ProcessInstanceIntent

# Active element types Zeebe 8.8 migrates; any other active element refuses the migration.
SUPPORTED_ELEMENT_TYPES = frozenset(
    {
        bpmn.PROCESS,
        bpmn.SERVICE_TASK,
        bpmn.USER_TASK,
        bpmn.SUB_PROCESS,
        bpmn.CALL_ACTIVITY,
        bpmn.INTERMEDIATE_CATCH_EVENT,
        bpmn.RECEIVE_TASK,
        bpmn.EVENT_SUB_PROCESS,
        bpmn.EXCLUSIVE_GATEWAY,
        bpmn.EVENT_BASED_GATEWAY,
        bpmn.BUSINESS_RULE_TASK,
        bpmn.SCRIPT_TASK,
        bpmn.SEND_TASK,
        bpmn.MULTI_INSTANCE_BODY,
    }
)
SUPPORTED_CATCH_EVENT_TYPES = frozenset({bpmn.MESSAGE, bpmn.TIMER, bpmn.SIGNAL})
# Boundary events and event sub-process start events of these types may be attached to a migrated element.
_BOUNDARY_EVENT_TYPES = frozenset(
    {bpmn.MESSAGE, bpmn.TIMER, bpmn.SIGNAL, bpmn.ERROR, bpmn.ESCALATION, bpmn.COMPENSATION, bpmn.CONDITIONAL}
)
_EVENT_SUB_PROCESS_START_TYPES = frozenset(
    {bpmn.MESSAGE, bpmn.TIMER, bpmn.SIGNAL, bpmn.ERROR, bpmn.ESCALATION, bpmn.CONDITIONAL}
)
_ZEEBE_USER_TASK = "zeebe user task"
_JOB_WORKER = "job worker"
_SEQUENCE_FLOW = "SEQUENCE_FLOW"


class Refused(Exception):
    """A precondition of the migration failed: the command is rejected with this type and reason."""

    def __init__(self, rejection_type: RejectionType, reason: str) -> None:
        super().__init__(reason)
        self.rejection_type = rejection_type
        self.reason = reason


@dataclass
class _Step:
    """What migrating one element instance writes (decided in the first pass)."""

    inst: ElementInstance
    target_id: str
    value: ProcessInstanceValue
    moved_flows: list[tuple[str, str]] = field(default_factory=list)  # (source flow id, target flow id)
    subscriptions: bool = False  # whether its catch events are handled (only while it is ACTIVATED)
    to_open: list[events.PlannedSubscription] = field(default_factory=list)


@dataclass
class _Plan:
    source: bpmn.Process
    target: bpmn.Process
    target_stored: dict[str, Any]
    mapping: dict[str, str]
    instance_key: int
    steps: list[_Step] = field(default_factory=list)
    new_ids: dict[int, str] = field(default_factory=dict)  # element instance key → its element id after migration


def refusal(ctx: ProcessingContext, cmd: Record) -> tuple[RejectionType, str] | None:
    """Why MIGRATE ``cmd`` would be rejected now, or None (reads state only; a batch operation asks before writing
    its item's command, so a refused item is a failed item)."""
    try:
        _check(ctx, cmd)
    except Refused as refused:
        return refused.rejection_type, refused.reason
    return None


def migrate(ctx: ProcessingContext, cmd: Record) -> None:
    """PROCESS_INSTANCE_MIGRATION MIGRATE: check everything, then move the instance to the target definition."""
    key = cmd.value.get("processInstanceKey", cmd.key)
    instance = ctx.state.elements.get(key if isinstance(key, int) and key > 0 else cmd.key)
    if instance is not None and instance.value.is_root and not b.may_update(ctx, instance.value):
        return  # the caller's permission, before anything else about the instance is said
    try:
        plan = _check(ctx, cmd)
    except Refused as refused:
        ctx.reject(refused.rejection_type, refused.reason)
        return
    for step in plan.steps:
        _write(ctx, plan, step)
    root = plan.steps[0].inst.value
    value = {
        "processInstanceKey": plan.instance_key,
        "targetProcessDefinitionKey": plan.target_stored["processDefinitionKey"],
        "mappingInstructions": _instructions(cmd.value),
        "processDefinitionKey": root.process_definition_key,
        "tenantId": root.tenant_id,
    }
    ctx.respond(
        ctx.event(
            ValueType.PROCESS_INSTANCE_MIGRATION, ProcessInstanceMigrationIntent.MIGRATED, plan.instance_key, value
        )
    )


def _instructions(value: dict) -> list[dict[str, str]]:
    return [
        {"sourceElementId": str(i.get("sourceElementId") or ""), "targetElementId": str(i.get("targetElementId") or "")}
        for i in value.get("mappingInstructions") or []
        if isinstance(i, dict)
    ]


# -- the first pass: preconditions ----------------------------------------------------------------------------


def _check(ctx: ProcessingContext, cmd: Record) -> _Plan:
    v = cmd.value
    key = v.get("processInstanceKey", cmd.key)
    if not isinstance(key, int) or key <= 0:
        key = cmd.key
    root = ctx.state.elements.get(key)
    if root is None or not root.value.is_root:
        raise Refused(
            RejectionType.NOT_FOUND,
            f"Expected to migrate process instance but no process instance found with key '{key}'",
        )
    instructions = _instructions(v)
    counts: dict[str, int] = {}
    for instruction in instructions:
        counts[instruction["sourceElementId"]] = counts.get(instruction["sourceElementId"], 0) + 1
    duplicates = [source for source, n in counts.items() if n > 1]
    if duplicates:
        raise Refused(
            RejectionType.INVALID_ARGUMENT,
            f"Expected to migrate process instance '{key}' but the mapping instructions contain duplicate source "
            f"element ids '[{', '.join(duplicates)}]'.",
        )
    target_key = v.get("targetProcessDefinitionKey", -1)
    stored = ctx.state.processes.get(target_key) if isinstance(target_key, int) and target_key > 0 else None
    if stored is None:
        raise Refused(
            RejectionType.NOT_FOUND,
            "Expected to migrate process instance to process definition but no process definition found with key "
            f"'{target_key}'",
        )
    if b.tenant_of(stored) != root.value.tenant_id:
        raise Refused(
            RejectionType.INVALID_STATE,
            f"Expected to migrate process instance '{key}' to a process definition of its own tenant "
            f"'{root.value.tenant_id}', but the target process definition '{target_key}' belongs to tenant "
            f"'{b.tenant_of(stored)}'",
        )
    models = b.services(ctx).models
    source = models.get(root.value.process_definition_key)
    target = models.get(target_key)
    _check_message_start_lock(ctx, root, target, stored)
    for instruction in instructions:
        if not _exists(source, instruction["sourceElementId"]):
            raise Refused(
                RejectionType.INVALID_ARGUMENT,
                f"Expected to migrate process instance '{key}' but mapping instructions contain a non-existing source "
                f"element id '{instruction['sourceElementId']}'. Elements provided in mapping instructions must exist "
                "in the source process definition.",
            )
        if not _exists(target, instruction["targetElementId"]):
            raise Refused(
                RejectionType.INVALID_ARGUMENT,
                f"Expected to migrate process instance '{key}' but mapping instructions contain a non-existing target "
                f"element id '{instruction['targetElementId']}'. Elements provided in mapping instructions must exist "
                "in the target process definition.",
            )
    if ctx.state.compensation_subscriptions.of_instance(key):
        raise Refused(
            RejectionType.INVALID_STATE,
            f"Expected to migrate process instance '{key}' but it has completed activities that can still be "
            "compensated. Weir does not migrate compensation subscriptions yet.",
        )
    mapping = {i["sourceElementId"]: i["targetElementId"] for i in instructions}
    mapping[root.value.bpmn_process_id] = stored["bpmnProcessId"]  # nobody maps the process itself
    plan = _Plan(source, target, stored, mapping, key)
    pending = deque([root])
    while pending:  # breadth first: a flow scope is planned before the instances inside it
        inst = pending.popleft()
        plan.steps.append(_check_instance(ctx, plan, inst))
        children = [ctx.state.elements.get(k) for k in ctx.state.elements.children(inst.key)]
        pending.extend(sorted((c for c in children if c is not None), key=lambda c: c.key))
    return plan


def _check_message_start_lock(
    ctx: ProcessingContext, root: ElementInstance, target: bpmn.Process, stored: dict[str, Any]
) -> None:
    """An instance a message start event started holds its correlation key for its process id: moving it to another
    process id must not make two active instances of that process hold one key."""
    if root.value.bpmn_process_id == stored["bpmnProcessId"]:
        return
    if not any(target.element(s).message is not None for s in target.start_event_ids):
        return
    correlation_key = ctx.state.message_starts.correlation_key_of(root.key)
    if correlation_key is None:
        return
    if ctx.state.message_starts.active_instance(root.value.tenant_id, stored["bpmnProcessId"], correlation_key):
        raise Refused(
            RejectionType.INVALID_STATE,
            f"Expected to migrate process instance '{root.key}' but target process definition "
            f"'{stored['processDefinitionKey']}' has an active instance triggered by a message start event with "
            f"correlation key '{correlation_key}'. Only one instance per correlation key is allowed for message start "
            "events.",
        )


def _exists(process: bpmn.Process, element_id: str) -> bool:
    return element_id == process.id or element_id in process.elements or element_id in process.flows


def _element(process: bpmn.Process, element_id: str) -> bpmn.Element | None:
    """The model element (None: the process itself)."""
    return process.elements.get(element_id)


def _check_instance(ctx: ProcessingContext, plan: _Plan, inst: ElementInstance) -> _Step:
    v = inst.value
    key = plan.instance_key
    element_id = v.element_id
    element_type = v.bpmn_element_type
    source_element = _element(plan.source, element_id)
    if element_type not in SUPPORTED_ELEMENT_TYPES:
        raise Refused(
            RejectionType.INVALID_STATE,
            f"Expected to migrate process instance '{key}' but active element with id '{element_id}' has an "
            f"unsupported type. The migration of a {element_type} is not supported.",
        )
    if element_type == bpmn.INTERMEDIATE_CATCH_EVENT:
        if v.bpmn_event_type not in SUPPORTED_CATCH_EVENT_TYPES:
            raise Refused(
                RejectionType.INVALID_STATE,
                f"Expected to migrate process instance '{key}' but active element with id '{element_id}' is "
                f"intermediate catch event of type '{v.bpmn_event_type}'. Migrating active intermediate catch event "
                "of this type is not possible yet.",
            )
        if source_element is not None and _after_event_based_gateway(plan.source, source_element):
            raise Refused(
                RejectionType.INVALID_STATE,
                f"Expected to migrate process instance '{key}' but active element with id '{element_id}' is an "
                "intermediate catch event attached to an event-based gateway. Migrating active events attached to an "
                "event-based gateway is not possible yet.",
            )
    target_id = plan.mapping.get(element_id)
    if target_id is None:
        raise Refused(
            RejectionType.INVALID_STATE,
            f"Expected to migrate process instance '{key}' but no mapping instruction defined for active element "
            f"with id '{element_id}'. Elements cannot be migrated without a mapping.",
        )
    target_element = _element(plan.target, target_id)
    is_root = v.is_root
    parent = ctx.state.elements.get(v.flow_scope_key) if not is_root else None
    in_body = parent is not None and parent.value.bpmn_element_type == bpmn.MULTI_INSTANCE_BODY
    _check_type(plan, inst, target_id, target_element, is_root=is_root, in_body=in_body)
    _check_user_task(ctx, plan, inst, target_id, target_element)
    if parent is not None and target_element is not None:
        expected = plan.new_ids[parent.key]
        actual = target_id if in_body and target_element.multi_instance is not None else target_element.flow_scope_id
        if actual != expected:
            raise Refused(
                RejectionType.INVALID_STATE,
                f"Expected to migrate process instance '{key}' but the flow scope of active element with id "
                f"'{element_id}' is changed. The flow scope of the active element is expected to be '{expected}' "
                f"but was '{actual}'. The flow scope of an element cannot be changed during migration yet.",
            )
    scope_of_source = plan.source.id if source_element is None else source_element.id
    scope_of_target = plan.target.id if target_element is None else target_element.id
    if element_type != bpmn.MULTI_INSTANCE_BODY:  # a body's event sub-processes are its instances'
        _check_event_sub_processes(plan.source, scope_of_source, key, "active process", source_element)
        _check_event_sub_processes(plan.target, scope_of_target, key, "target process", target_element)
    if not in_body:  # an instance's boundary events are its body's
        _check_boundary_events(plan.source, element_id, key, "active")
        _check_boundary_events(plan.target, target_id, key, "target")
    source_events = _catch_events(ctx, plan.source, source_element, inst, in_body=in_body)
    target_events = _catch_events(ctx, plan.target, target_element, inst, in_body=in_body)
    _check_catch_events(plan, element_id, target_id, source_events, target_events)
    _check_loop(plan, source_element, target_element, element_id, target_id, inst)
    _check_no_concurrent_command(ctx, plan, inst, source_element)
    plan.new_ids[inst.key] = target_id
    new_value = _migrated_value(v, plan, target_id)
    step = _Step(inst, target_id, new_value)
    step.moved_flows = _check_joins(ctx, plan, inst, source_element)
    if inst.state == PI.ELEMENT_ACTIVATED:  # an activating one subscribes once activated, a completing one is done
        step.subscriptions = True
        step.to_open = _plan_new_subscriptions(ctx, plan, inst, target_element, target_events)
    return step


def _after_event_based_gateway(process: bpmn.Process, element: bpmn.Element) -> bool:
    for flow_id in element.incoming:
        flow = process.flows.get(flow_id)
        source = process.elements.get(flow.source_id) if flow is not None else None
        if source is not None and source.element_type == bpmn.EVENT_BASED_GATEWAY:
            return True
    return False


def _check_type(
    plan: _Plan,
    inst: ElementInstance,
    target_id: str,
    target_element: bpmn.Element | None,
    *,
    is_root: bool,
    in_body: bool,
) -> None:
    v = inst.value
    if target_element is None:
        target_type = _SEQUENCE_FLOW if target_id in plan.target.flows else bpmn.PROCESS
    elif in_body or target_element.multi_instance is None:  # an instance in a body: the inner activity counts
        target_type = target_element.element_type
    else:
        target_type = bpmn.MULTI_INSTANCE_BODY
    if is_root:
        target_type = bpmn.PROCESS  # the process maps to the target process, always
    if target_type != v.bpmn_element_type:
        raise Refused(
            RejectionType.INVALID_STATE,
            f"Expected to migrate process instance '{plan.instance_key}' but active element with id "
            f"'{v.element_id}' and type '{v.bpmn_element_type}' is mapped to an element with id '{target_id}' and "
            f"different type '{target_type}'. Elements must be mapped to elements of the same type.",
        )


def _check_user_task(
    ctx: ProcessingContext, plan: _Plan, inst: ElementInstance, target_id: str, target_element: bpmn.Element | None
) -> None:
    if inst.value.bpmn_element_type != bpmn.USER_TASK or target_element is None:
        return
    source_kind = _ZEEBE_USER_TASK if ctx.state.user_tasks.for_element(inst.key) is not None else _JOB_WORKER
    task = target_element.user_task
    target_kind = _ZEEBE_USER_TASK if task is not None and task.native else _JOB_WORKER
    if source_kind != target_kind:
        raise Refused(
            RejectionType.INVALID_STATE,
            f"Expected to migrate process instance '{plan.instance_key}' but active user task with id "
            f"'{inst.value.element_id}' and implementation '{source_kind}' is mapped to an user task with id "
            f"'{target_id}' and different implementation '{target_kind}'. Elements must be mapped to elements of the "
            "same implementation.",
        )


def _check_event_sub_processes(
    process: bpmn.Process, scope_id: str, key: int, which: str, element: bpmn.Element | None
) -> None:
    if element is not None and element.element_type not in bpmn.SCOPE_ELEMENT_TYPES:
        return
    refused = [s.event_type for s in process.event_sub_process_starts_of(scope_id)]
    refused = [t for t in refused if t not in _EVENT_SUB_PROCESS_START_TYPES]
    if refused:
        raise Refused(
            RejectionType.INVALID_STATE,
            f"Expected to migrate process instance '{key}' but {which} with id '{scope_id}' has one or more event "
            f"subprocesses with start events of types '{','.join(refused)}'. Migrating event subprocesses with start "
            "events of these types is not possible yet.",
        )


def _check_boundary_events(process: bpmn.Process, element_id: str, key: int, which: str) -> None:
    if element_id not in process.elements:
        return
    refused = [
        e.event_type for e in process.boundary_events_of(element_id) if e.event_type not in _BOUNDARY_EVENT_TYPES
    ]
    if refused:
        raise Refused(
            RejectionType.INVALID_STATE,
            f"Expected to migrate process instance '{key}' but {which} element with id '{element_id}' has one or more "
            f"boundary events of types '{','.join(refused)}'. Migrating {which} elements with boundary events of "
            "these types is not possible yet.",
        )


def _catch_events(
    ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance, *, in_body: bool
) -> list[bpmn.Element]:
    """The catch events an instance of ``element`` waits for (its own, its boundary events, its event sub-processes'
    start events; an instance in a multi-instance body leaves the boundary events to the body)."""
    if element is None and not inst.value.is_root:
        return []
    found = processor_of(ctx, inst.value).event_targets(process, element)
    if in_body and element is not None:
        found = [e for e in found if e.attached_to_id != element.id]
    return found


def _check_catch_events(
    plan: _Plan, element_id: str, target_id: str, source_events: list[bpmn.Element], target_events: list[bpmn.Element]
) -> None:
    key = plan.instance_key
    target_ids = {e.id for e in target_events}
    by_target: dict[str, list[str]] = {}
    for event in source_events:
        mapped = plan.mapping.get(event.id)
        if mapped is None:
            continue
        if mapped not in target_ids:
            raise Refused(
                RejectionType.INVALID_STATE,
                f"Expected to migrate process instance '{key}' but active element with id '{element_id}' is mapped to "
                f"an element with id '{target_id}' and has a catch event with id '{event.id}' that is mapped to a "
                f"catch event with id '{mapped}'. These mappings detach the catch event from the element in the "
                "target process. Catch events must stay attached to the same element instance.",
            )
        by_target.setdefault(mapped, []).append(event.id)
    for mapped, sources in by_target.items():
        if len(sources) > 1:
            raise Refused(
                RejectionType.INVALID_STATE,
                f"Expected to migrate process instance '{key}' but active element with id '{element_id}' has a catch "
                f"event attached that is mapped to a catch event with id '{mapped}'. There are multiple mapping "
                f"instructions that target this catch event: '{_quoted(sources)}'. Catch events cannot be "
                "merged by process instance migration. Please ensure the mapping instructions target a catch event "
                "only once.",
            )
    for event in source_events:
        mapped = plan.mapping.get(event.id)
        if mapped is None:
            continue
        target_event = plan.target.elements[mapped]
        if event.event_type != target_event.event_type:
            raise Refused(
                RejectionType.INVALID_STATE,
                f"Expected to migrate process instance '{key}' but active element with id '{element_id}' has a catch "
                f"event with id '{event.id}' that is mapped to a catch event with id '{mapped}'. These catch events "
                f"have different event types: '{event.event_type}' and '{target_event.event_type}'. The event type of "
                "a catch event cannot be changed by process instance migration. Please ensure the event type of the "
                "catch event remains the same or remove the mapping instruction for these catch events.",
            )


def _quoted(ids: list[str]) -> str:
    """Ids as Zeebe lists them inside quotes: ``a', 'b``."""
    return "', '".join(sorted(ids))


def _check_loop(
    plan: _Plan,
    source_element: bpmn.Element | None,
    target_element: bpmn.Element | None,
    element_id: str,
    target_id: str,
    inst: ElementInstance,
) -> None:
    if inst.value.bpmn_element_type != bpmn.MULTI_INSTANCE_BODY or source_element is None or target_element is None:
        return
    source_loop, target_loop = source_element.multi_instance, target_element.multi_instance
    if source_loop is not None and target_loop is not None and source_loop.is_sequential != target_loop.is_sequential:
        raise Refused(
            RejectionType.INVALID_STATE,
            f"Expected to migrate process instance '{plan.instance_key}' but active element with id '{element_id}' "
            f"has a different loop characteristics than the target element with id '{target_id}'. Both elements must "
            "have either sequential or parallel loop characteristics.",
        )


def _waiting_at_joins(
    ctx: ProcessingContext, process: bpmn.Process, inst: ElementInstance, scope_id: str
) -> list[tuple[bpmn.Element, str, int]]:
    """(join, incoming flow id, tokens) for the tokens waiting at the parallel and inclusive joins in the scope."""
    waiting = []
    for join in process.joins_in(scope_id):
        for flow_id in join.incoming:
            n = ctx.state.joins.count(inst.key, join.id, flow_id)
            if n > 0:
                waiting.append((join, flow_id, n))
    return waiting


def _scope_id(process: bpmn.Process, element: bpmn.Element | None) -> str:
    return process.id if element is None else element.id


def _check_no_concurrent_command(
    ctx: ProcessingContext, plan: _Plan, inst: ElementInstance, source_element: bpmn.Element | None
) -> None:
    """An event about to act on the instance (a caught event waiting for its scope, a token in flight, an element
    ending) would run against a definition that changed under it: refuse, the client retries."""
    waiting = sum(n for _, _, n in _waiting_at_joins(ctx, plan.source, inst, _scope_id(plan.source, source_element)))
    pending_trigger = ctx.state.event_triggers.get(inst.key) is not None
    if pending_trigger or inst.flows - waiting > 0 or inst.state == PI.ELEMENT_TERMINATING:
        raise Refused(
            RejectionType.INVALID_STATE,
            f"Expected to migrate process instance '{plan.instance_key}' but a concurrent command was executed on "
            "the process instance. Please retry the migration.",
        )


def _check_joins(
    ctx: ProcessingContext, plan: _Plan, inst: ElementInstance, source_element: bpmn.Element | None
) -> list[tuple[str, str]]:
    """The tokens waiting at joins in this scope move to the mapped joins of the target: which flows they take."""
    if source_element is not None and source_element.element_type not in bpmn.SCOPE_ELEMENT_TYPES:
        return []
    key = plan.instance_key
    moved: list[tuple[str, str]] = []
    targets: dict[str, str] = {}
    for join, flow_id, _ in _waiting_at_joins(ctx, plan.source, inst, _scope_id(plan.source, source_element)):
        target_join_id = plan.mapping.get(join.id)
        target_join = plan.target.elements.get(target_join_id) if target_join_id else None
        if target_join is None:
            raise Refused(
                RejectionType.INVALID_STATE,
                f"Expected to migrate process instance '{key}' but no mapping instruction defined for the gateway "
                f"with id '{join.id}' that has a taken sequence flow with id '{flow_id}' waiting. Gateways with taken "
                "sequence flows cannot be migrated without a mapping.",
            )
        if target_join.element_type != join.element_type:
            raise Refused(
                RejectionType.INVALID_STATE,
                f"Expected to migrate process instance '{key}' but active gateway with id '{join.id}' and type "
                f"'{join.element_type}' is mapped to an element with id '{target_join.id}' and different type "
                f"'{target_join.element_type}'. Gateways must be mapped to gateways of the same type.",
            )
        if len(target_join.incoming) < len(join.incoming):
            raise Refused(
                RejectionType.INVALID_STATE,
                f"Expected to migrate process instance '{key}' but the target gateway with id '{target_join.id}' has "
                f"fewer incoming sequence flows ({len(target_join.incoming)}) than the active gateway with id "
                f"'{join.id}' ({len(join.incoming)}). The target gateway must have at least as many incoming sequence "
                "flows as the source gateway.",
            )
        target_flow_id = plan.mapping.get(flow_id)
        if target_flow_id is None or target_flow_id not in target_join.incoming:
            raise Refused(
                RejectionType.INVALID_STATE,
                f"Expected to migrate process instance '{key}' but the taken sequence flow with id '{flow_id}' of the "
                f"gateway with id '{join.id}' is not mapped to an incoming sequence flow of the target gateway with id "
                f"'{target_join.id}'. Taken sequence flows must be mapped to incoming sequence flows of the target "
                "gateway.",
            )
        if target_flow_id in targets:
            raise Refused(
                RejectionType.INVALID_STATE,
                f"Expected to migrate process instance '{key}' but the taken sequence flows with ids "
                f"'{targets[target_flow_id]}' and '{flow_id}' are mapped to the same target sequence flow with id "
                f"'{target_flow_id}'. Taken sequence flows cannot be merged by process instance migration.",
            )
        targets[target_flow_id] = flow_id
        moved.append((flow_id, target_flow_id))
    return moved


def _subscribed_ids(ctx: ProcessingContext, inst: ElementInstance) -> list[str]:
    """The catch events the instance holds subscriptions for."""
    ids = [t["targetElementId"] for k in ctx.state.timers.of_owner(inst.key) if (t := ctx.state.timers.get(k))]
    ids += [s["elementId"] for s in ctx.state.process_message_subscriptions.of_element(inst.key)]
    ids += [s["catchEventId"] for s in ctx.state.signal_subscriptions.of_owner(inst.key)]
    return ids


def _plan_new_subscriptions(
    ctx: ProcessingContext,
    plan: _Plan,
    inst: ElementInstance,
    target_element: bpmn.Element | None,
    target_events: list[bpmn.Element],
) -> list[events.PlannedSubscription]:
    """The catch events of the target element no subscription of the instance is mapped to: they subscribe anew."""
    kept = {plan.mapping[i] for i in _subscribed_ids(ctx, inst) if i in plan.mapping}
    fresh = [
        e
        for e in target_events
        if e.id not in kept and (e.timer is not None or e.message is not None or e.signal_name is not None)
    ]
    if not fresh:
        return []
    planned = events.plan_subscriptions(ctx, fresh, inst.key)
    if isinstance(planned, str):
        raise Refused(
            RejectionType.INVALID_STATE,
            f"Expected to migrate process instance '{plan.instance_key}' but active element with id "
            f"'{inst.value.element_id}' could not subscribe to the catch events of the target element with id "
            f"'{_scope_id(plan.target, target_element)}': {planned}",
        )
    kept_messages = {
        s["messageName"]
        for s in ctx.state.process_message_subscriptions.of_element(inst.key)
        if s["elementId"] in plan.mapping
    }
    for entry in planned:
        name = events.planned_message_name(entry)
        if name is not None and name in kept_messages:
            raise Refused(
                RejectionType.INVALID_STATE,
                f"Expected to migrate process instance '{plan.instance_key}' but active element with id "
                f"'{inst.value.element_id}' attempts to subscribe to a message it is already subscribed to with name "
                f"'{name}'. Migrating active elements that subscribe to a message they are already subscribed to is "
                "not possible yet. Please provide a mapping instruction to message catch event with id "
                f"'{entry[0].id}' to migrate the respective message subscription.",
            )
    return planned


def _migrated_value(v: ProcessInstanceValue, plan: _Plan, target_id: str) -> ProcessInstanceValue:
    stored = plan.target_stored
    return v._replace(
        bpmn_process_id=stored["bpmnProcessId"],
        version=stored["version"],
        process_definition_key=stored["processDefinitionKey"],
        element_id=target_id,
    )


# -- the second pass: writing ----------------------------------------------------------------------------------


def _write(ctx: ProcessingContext, plan: _Plan, step: _Step) -> None:
    inst = step.inst
    old = inst.value
    new = step.value
    target_key = new.process_definition_key
    ctx.instance_event(PI.ELEMENT_MIGRATED, inst.key, new)
    for source_flow, target_flow in step.moved_flows:
        gone = old.for_element(source_flow, _SEQUENCE_FLOW, bpmn.UNSPECIFIED, inst.key)
        ctx.event(ValueType.PROCESS_INSTANCE, PI.SEQUENCE_FLOW_DELETED, ctx.keys.next_key(), gone.to_dict())
        taken = new.for_element(target_flow, _SEQUENCE_FLOW, bpmn.UNSPECIFIED, inst.key)
        ctx.event(ValueType.PROCESS_INSTANCE, PI.SEQUENCE_FLOW_TAKEN, ctx.keys.next_key(), taken.to_dict())
    definition = {
        "processDefinitionKey": target_key,
        "bpmnProcessId": new.bpmn_process_id,
        "elementId": step.target_id,
    }
    if inst.job_key > 0:
        job = ctx.state.jobs.get(inst.job_key)
        if job is not None:
            value = {**job["value"], **definition, "processDefinitionVersion": new.version, "variables": {}}
            ctx.event(ValueType.JOB, JobIntent.MIGRATED, inst.job_key, value)
    incident_keys = {ctx.state.incidents.for_element(inst.key)}
    if inst.job_key > 0:
        incident_keys.add(ctx.state.incidents.for_job(inst.job_key))
    for incident_key in sorted(k for k in incident_keys if k is not None):
        incident = ctx.state.incidents.get(incident_key)
        if incident is not None:
            ctx.event(ValueType.INCIDENT, IncidentIntent.MIGRATED, incident_key, {**incident, **definition})
    task_key = ctx.state.user_tasks.for_element(inst.key)
    entry = ctx.state.user_tasks.get(task_key) if task_key is not None else None
    if task_key is not None and entry is not None:
        value = {**entry["value"], **definition, "processDefinitionVersion": new.version, "variables": {}}
        ctx.event(ValueType.USER_TASK, UserTaskIntent.MIGRATED, task_key, value)
    for name in ctx.state.variables.local(inst.key):
        found = ctx.state.variables.get_local(inst.key, name)
        if found is None:
            continue
        value = {  # no value: the variable keeps it (a history store must not take the missing value for null)
            "name": name,
            "scopeKey": inst.key,
            "processInstanceKey": new.process_instance_key,
            "processDefinitionKey": target_key,
            "bpmnProcessId": new.bpmn_process_id,
            "tenantId": new.tenant_id,
            "rootProcessInstanceKey": new.root_process_instance_key,
        }
        ctx.event(ValueType.VARIABLE, VariableIntent.MIGRATED, found[0], value)
    if step.subscriptions:
        _move_subscriptions(ctx, plan, inst, new)
        migrated = ctx.state.elements.get(inst.key)
        if migrated is not None and step.to_open:
            events.write_subscriptions(ctx, migrated, step.to_open)


def _move_subscriptions(ctx: ProcessingContext, plan: _Plan, inst: ElementInstance, new: ProcessInstanceValue) -> None:
    """Subscriptions of mapped catch events move to their targets; those of unmapped ones are closed."""
    target_key = new.process_definition_key
    unmapped = frozenset(i for i in _subscribed_ids(ctx, inst) if i not in plan.mapping)
    for timer_key in ctx.state.timers.of_owner(inst.key):
        timer = ctx.state.timers.get(timer_key)
        if timer is not None and timer["targetElementId"] in plan.mapping:
            moved = {
                **timer,
                "processDefinitionKey": target_key,
                "targetElementId": plan.mapping[timer["targetElementId"]],
            }
            ctx.event(ValueType.TIMER, TimerIntent.MIGRATED, timer_key, moved)
    for sub in ctx.state.process_message_subscriptions.of_element(inst.key):
        if sub["elementId"] in plan.mapping and sub["state"] != "DELETING":
            target_event = plan.target.elements[plan.mapping[sub["elementId"]]]
            moved = {k: v for k, v in sub.items() if k != "state"}
            moved.update(
                processDefinitionKey=target_key,
                bpmnProcessId=new.bpmn_process_id,
                elementId=target_event.id,
                interrupting=target_event.interrupts,
            )
            ctx.event(
                ValueType.PROCESS_MESSAGE_SUBSCRIPTION,
                ProcessMessageSubscriptionIntent.MIGRATED,
                ctx.keys.next_key(),
                moved,
            )
            _tell_message_partition(ctx, moved)
    for signal in ctx.state.signal_subscriptions.of_owner(inst.key):
        if signal["catchEventId"] in plan.mapping:
            moved = {k: v for k, v in signal.items() if k != "key"}
            moved.update(
                processDefinitionKey=target_key,
                bpmnProcessId=new.bpmn_process_id,
                catchEventId=plan.mapping[signal["catchEventId"]],
            )
            ctx.event(ValueType.SIGNAL_SUBSCRIPTION, SignalSubscriptionIntent.MIGRATED, signal["key"], moved)
    if unmapped:
        current = ctx.state.elements.get(inst.key)
        if current is not None:
            events.close_subscriptions(ctx, current, only=unmapped)


def _tell_message_partition(ctx: ProcessingContext, moved: dict) -> None:
    """The message partition's copy of a migrated subscription follows (MESSAGE_SUBSCRIPTION MIGRATE): distributed
    to that partition until it answers, or processed here when the subscription lives on this partition."""
    command = {
        key: moved[key]
        for key in (
            "subscriptionPartitionId",
            "processInstanceKey",
            "processDefinitionKey",
            "bpmnProcessId",
            "elementInstanceKey",
            "elementId",
            "messageName",
            "interrupting",
            "tenantId",
        )
        if key in moved
    }
    partition_id = moved["subscriptionPartitionId"]
    if partition_id == ctx.partition_id:
        ctx.follow_up(ValueType.MESSAGE_SUBSCRIPTION, MessageSubscriptionIntent.MIGRATE, -1, command)
        return
    ctx.event(
        ValueType.COMMAND_DISTRIBUTION,
        CommandDistributionIntent.STARTED,
        ctx.keys.next_key(),
        {
            "partitionId": partition_id,
            "valueType": ValueType.MESSAGE_SUBSCRIPTION.name,
            "intent": MessageSubscriptionIntent.MIGRATE.name,
            "commandValue": command,
        },
    )


def migrate_message_subscription(ctx: ProcessingContext, cmd: Record) -> None:
    """MESSAGE_SUBSCRIPTION MIGRATE (the message partition): the subscription of a migrated element instance now
    names the target definition and catch event (and whether that one interrupts)."""
    v = cmd.value
    sub = ctx.state.message_subscriptions.get(v.get("elementInstanceKey", -1), v.get("messageName", ""))
    if sub is None:
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to migrate a message subscription for element instance '{v.get('elementInstanceKey')}' and "
            f"message '{v.get('messageName')}', but no such subscription was found",
        )
        return
    moved = {**sub}
    for name in ("processDefinitionKey", "bpmnProcessId", "elementId", "interrupting"):
        if name in v:
            moved[name] = v[name]
    ctx.respond(
        ctx.event(ValueType.MESSAGE_SUBSCRIPTION, MessageSubscriptionIntent.MIGRATED, ctx.keys.next_key(), moved)
    )
