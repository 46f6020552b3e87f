"""Call activities: the element starts an instance of another process on the same partition and waits for it.

- Activation: input mappings, then the called process is found (``zeebe:calledElement processId``, static or FEEL,
  and its binding: the latest version, the version deployed together with the calling process, or the latest version
  with a version tag), then subscriptions; the call activity is ACTIVATED and ACTIVATE_ELEMENT of the child process
  instance follows, carrying the parent's keys. Not finding the process is a CALLED_ELEMENT_ERROR incident; resolving
  it looks again.
- The child starts with every variable visible at the call activity (``propagateAllParentVariables``, the default)
  or only the call activity's local variables (its input mappings), copied when the child is activated.
- The child's completion hands its root variables back: as local variables of the call activity when it has output
  mappings (which then decide what reaches the flow scope), else merged into the flow scope unless
  ``propagateAllChildVariables`` is false; then COMPLETE_ELEMENT of the call activity follows.
- A call that would make the chain of called instances deeper than ``broker.maxProcessDepth`` (the root is 1) raises
  a CALLED_ELEMENT_ERROR incident instead, which stops a process that calls itself without end.
- Terminating the call activity terminates the child instance first; the child's termination ends the call activity.

The child process's own processor (:mod:`.process`) calls the ``child_*`` functions here at those steps.
"""

from __future__ import annotations

from typing import Any, Final

from broker.engine import behaviors as b
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.base import ElementProcessor
from broker.engine.expressions import ExpressionFailure
from broker.protocol.enums import ProcessInstanceIntent, ValueType
from broker.protocol.values import ProcessInstanceValue
from broker.state.element_instance import ElementInstance

PI = ProcessInstanceIntent

CALLED_ELEMENT_ERROR: Final = "CALLED_ELEMENT_ERROR"


class _Failure:
    """Why the called process cannot be started: the incident's type and message."""

    __slots__ = ("error_type", "message")

    def __init__(self, error_type: str, message: str) -> None:
        self.error_type = error_type
        self.message = message


class CallActivityProcessor(ElementProcessor):
    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None and element.called_element is not None
        if not lc.apply_inputs(ctx, element, inst):
            return
        called = _called_process(ctx, element.called_element, inst)
        if isinstance(called, _Failure):
            b.raise_incident(ctx, inst, called.error_type, called.message)
            return
        if not lc.subscribe(ctx, process, element, inst):
            return
        inst = lc.activated(ctx, inst)
        v = inst.value
        child_key = ctx.keys.next_key()
        child = ProcessInstanceValue(
            bpmn_process_id=called["bpmnProcessId"],
            version=called["version"],
            process_definition_key=called["processDefinitionKey"],
            process_instance_key=child_key,
            element_id=called["bpmnProcessId"],
            flow_scope_key=-1,
            bpmn_element_type=bpmn.PROCESS,
            bpmn_event_type=bpmn.UNSPECIFIED,
            parent_process_instance_key=v.process_instance_key,
            parent_element_instance_key=inst.key,
            root_process_instance_key=b.root_instance_key(ctx, v),
            tenant_id=v.tenant_id,  # a call stays within its tenant, as does the lookup of the process it calls
            # the child carries its caller's business id and tags (Camunda 8.9): searches by them find the whole tree
            business_id=v.business_id,
            tags=v.tags,
        )
        ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.ACTIVATE_ELEMENT, child_key, child.to_dict())

    def on_terminating(self, ctx: ProcessingContext, inst: ElementInstance) -> bool:
        """The child instance goes first; its termination ends the call activity (:func:`child_terminated`)."""
        child = ctx.state.elements.get(inst.called_child_key) if inst.called_child_key > 0 else None
        if child is None:
            return False  # not started (an incident, or its activation is still on its way) or already over
        if child.state != PI.ELEMENT_TERMINATING:
            ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.TERMINATE_ELEMENT, child.key, child.value.to_dict())
        return True

    def on_terminated(
        self,
        ctx: ProcessingContext,
        process: bpmn.Process,
        element: bpmn.Element | None,
        inst: ElementInstance,
        trigger: dict | None,
    ) -> None:
        """As for any activity, but a boundary event caught while the call activity was already terminating with
        its flow scope (an error thrown in the child meanwhile) does not start: the scope is ending."""
        scope = ctx.state.elements.get(inst.value.flow_scope_key)
        scope_ending = scope is None or scope.state != PI.ELEMENT_ACTIVATED
        if trigger is not None and (scope_ending or ctx.state.event_triggers.get(inst.value.flow_scope_key)):
            trigger = None
        super().on_terminated(ctx, process, element, inst, trigger)


def _called_process(ctx: ProcessingContext, called: bpmn.CalledElement, inst: ElementInstance) -> dict | _Failure:
    """The stored process definition the call activity starts, or why there is none."""
    process_id = b.evaluate(ctx, called.process_id, inst.key)
    if isinstance(process_id, ExpressionFailure):
        return _Failure("EXTRACT_VALUE_ERROR", process_id.message)
    if not isinstance(process_id, str):
        return _Failure(
            "EXTRACT_VALUE_ERROR",
            f"Expected result of the expression '{called.process_id}' to be 'STRING', but was "
            f"'{b.describe_type(process_id)}'.",
        )
    processes, tenant = ctx.state.processes, inst.value.tenant_id
    if called.binding_type == bpmn.BINDING_DEPLOYMENT:
        calling = processes.get(inst.value.process_definition_key) or {}
        deployment_key = calling.get("deploymentKey", -1)
        stored = processes.in_deployment(tenant, process_id, deployment_key) if deployment_key > 0 else None
        if stored is None:
            return _Failure(
                CALLED_ELEMENT_ERROR,
                f"Expected to call process with BPMN process id '{process_id}' with binding type 'deployment', but "
                f"no such process found in the deployment with key {deployment_key} which contained the current "
                "process. To resolve this incident, deploy the calling process together with the process to call.",
            )
    elif called.binding_type == bpmn.BINDING_VERSION_TAG:
        tag = called.version_tag or ""
        stored = processes.with_version_tag(tenant, process_id, tag)
        if stored is None:
            return _Failure(
                CALLED_ELEMENT_ERROR,
                f"Expected to call process with BPMN process id '{process_id}' and version tag '{tag}', but no such "
                "process found. To resolve this incident, deploy a process with the given process id and version tag.",
            )
    else:
        stored = processes.latest(tenant, process_id)
        if stored is None:
            return _Failure(
                CALLED_ELEMENT_ERROR,
                f"Expected process with BPMN process id '{process_id}' to be deployed, but not found.",
            )
    if b.services(ctx).models.get(stored["processDefinitionKey"]).none_start_event_id is None:
        return _Failure(
            CALLED_ELEMENT_ERROR,
            f"Expected process with BPMN process id '{process_id}' to have a none start event, but not found.",
        )
    limit = b.services(ctx).max_process_depth
    if limit > 0 and _depth(ctx, inst.value, limit) >= limit:
        return _Failure(
            CALLED_ELEMENT_ERROR,
            f"The call activity has reached the maximum depth of {limit}. This is likely due to a recursive call. "
            "Cancel the root process instance if this was unintentional; if the process needs deeper calls, raise "
            f"broker.maxProcessDepth (now {limit} process instances, the root included) and resolve this incident.",
        )
    return stored


def _depth(ctx: ProcessingContext, v: ProcessInstanceValue, limit: int) -> int:
    """How many process instances the chain of calls up to ``v``'s instance holds (1: a root instance), counting
    up to ``limit``. The parent links are state, so replay rebuilds the same depth."""
    depth = 1
    parent_key = v.parent_process_instance_key
    while parent_key > 0 and depth < limit:
        parent = ctx.state.elements.get(parent_key)
        if parent is None:
            break
        depth += 1
        parent_key = parent.value.parent_process_instance_key
    return depth


# -- the child process instance's side ----------------------------------------------------------------------


def caller_of(ctx: ProcessingContext, child: ElementInstance) -> ElementInstance | None:
    """The call activity that started this process instance, if it did and it still exists."""
    key = child.value.parent_element_instance_key
    return ctx.state.elements.get(key) if key > 0 else None


def activation_blocked(ctx: ProcessingContext, child: ProcessInstanceValue) -> str | None:
    """Why a called process instance may not start: its call activity ended before the activation arrived."""
    caller = ctx.state.elements.get(child.parent_element_instance_key)
    if caller is None or caller.state != PI.ELEMENT_ACTIVATED:
        return (
            f"Expected to activate the process instance called by element '{child.parent_element_instance_key}', "
            "but that call activity is no longer active"
        )
    return None


def _call_activity(ctx: ProcessingContext, caller: ElementInstance) -> bpmn.Element:
    element = lc.element_of(lc.process_of(ctx, caller), caller)
    assert element is not None and element.called_element is not None
    return element


def child_activating(ctx: ProcessingContext, child: ElementInstance) -> None:
    """The child instance starts with the variables its call activity hands in."""
    caller = caller_of(ctx, child)
    if caller is None:
        return
    element = _call_activity(ctx, caller)
    assert element.called_element is not None
    document: dict[str, Any] = {}
    if element.called_element.propagate_all_parent_variables:
        document = b.visible_variables(ctx, caller.key)
    elif element.input_mappings:
        document = ctx.state.variables.local(caller.key)
    b.set_local_document(ctx, child.key, document, child)


def child_completing(ctx: ProcessingContext, child: ElementInstance) -> None:
    """The child instance is about to be COMPLETED: its root variables go back to the call activity."""
    caller = caller_of(ctx, child)
    if caller is None or caller.state != PI.ELEMENT_ACTIVATED:
        return
    element = _call_activity(ctx, caller)
    assert element.called_element is not None
    document = ctx.state.variables.local(child.key)
    if element.output_mappings:
        b.set_local_document(ctx, caller.key, document, caller)  # what the output mappings read
    elif element.called_element.propagate_all_child_variables:
        # from the call activity up, as Zeebe merges them: an instance of a multi-instance call activity holds its
        # output element, which the child's variable of that name fills
        into = caller.key if element.multi_instance is not None else caller.value.flow_scope_key
        b.merge_document(ctx, into, document)


def child_completed(ctx: ProcessingContext, child: ElementInstance) -> None:
    """The child instance is COMPLETED: the call activity completes."""
    caller = caller_of(ctx, child)
    if caller is not None and caller.state == PI.ELEMENT_ACTIVATED:
        ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.COMPLETE_ELEMENT, caller.key, caller.value.to_dict())


# Callers whose termination waits until the one being ended returns, per processing context being drained.
_ENDING_CALLERS: Final[dict[int, list[int]]] = {}


def child_terminated(ctx: ProcessingContext, child: ElementInstance) -> None:
    """The child instance is TERMINATED: the call activity that waited for it is terminated too.

    Ending a caller ends its process instance, whose own caller ends in turn, all within one command: a chain of
    called instances as deep as broker.maxProcessDepth would nest that deeper than Python's stack allows. So only
    the outermost call ends callers, one after another; a nested call queues its caller instead (at the very end
    of what the frames above it do, so the records come in the same order)."""
    caller = caller_of(ctx, child)
    if caller is None or caller.state != PI.ELEMENT_TERMINATING:
        return
    queued = _ENDING_CALLERS.get(id(ctx))
    if queued is not None:
        queued.append(caller.key)
        return
    queued = _ENDING_CALLERS[id(ctx)] = [caller.key]
    try:
        while queued:
            next_caller = ctx.state.elements.get(queued.pop())
            if next_caller is not None and next_caller.state == PI.ELEMENT_TERMINATING:
                lc.terminated(ctx, next_caller)
    finally:
        del _ENDING_CALLERS[id(ctx)]
