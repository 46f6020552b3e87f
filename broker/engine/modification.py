"""Process instance modification (PROCESS_INSTANCE_MODIFICATION MODIFY) and start instructions on creation.

A modification activates elements and terminates element instances of one running instance, all in one command on
the instance's partition, the way Zeebe does:

- Everything is checked first; a command with any problem is rejected with every offending element, key or scope
  named, and changes nothing.
- Activate instructions run in order. The flow scopes an element needs (sub-processes, event sub-processes) are
  reused when exactly one instance of them is active (or the one the ancestor selection points at), else created:
  written ACTIVATING then ACTIVATED without input mappings, start events or listeners, with their boundary events
  and event sub-process start events subscribed. The element itself is written ACTIVATING here and runs its own
  activation (mappings, jobs, subscriptions…) in the ACTIVATE_ELEMENT command that follows.
- Terminate instructions run after the activations. A flow scope left without anything active (and needed by no
  activation of the command) is terminated with it, up to the process instance: an instance whose last active
  element is terminated ends TERMINATED, as in Zeebe. Terminating reuses the elements' own termination (jobs,
  subscriptions, timers, incidents and called instances are cleaned up as when an instance is cancelled).

- Terminate instructions by element id and move instructions (Camunda 8.9) are expanded here, against the
  instance's state, into terminations by key and activations, and then checked and carried out like them.

The checks that depend on what earlier instructions of the command wrote (a flow scope with several instances, a
created scope's subscriptions, emptying a called instance) raise :class:`CommandRefused`, which undoes the command.

Creating an instance with start instructions uses the same activation: the process is written ACTIVATING and
ACTIVATED (no none start event runs) and each instruction's element is activated in its flow scopes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from broker.engine import behaviors as b
from broker.engine import events
from broker.engine.bpmn import model as bpmn
from broker.engine.context import CommandRefused, ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.lookup import processor_of
from broker.protocol.enums import ProcessInstanceIntent, ProcessInstanceModificationIntent, RejectionType, ValueType
from broker.protocol.record import Record
from broker.protocol.values import ProcessInstanceValue
from broker.state.element_instance import ElementInstance

PI = ProcessInstanceIntent
SEQUENCE_FLOW: Final = "SEQUENCE_FLOW"  # the element type Zeebe names sequence flows by

# Element types no instruction may activate (Zeebe's list): what only an event or a flow starts.
UNSUPPORTED_TYPES: Final = (bpmn.START_EVENT, SEQUENCE_FLOW, bpmn.BOUNDARY_EVENT)
SUPPORTED_TYPES: Final = (
    bpmn.END_EVENT,
    bpmn.SERVICE_TASK,
    bpmn.USER_TASK,
    bpmn.SEND_TASK,
    bpmn.SCRIPT_TASK,
    bpmn.BUSINESS_RULE_TASK,
    bpmn.MANUAL_TASK,
    bpmn.TASK,
    bpmn.RECEIVE_TASK,
    bpmn.EXCLUSIVE_GATEWAY,
    bpmn.PARALLEL_GATEWAY,
    bpmn.INCLUSIVE_GATEWAY,
    bpmn.EVENT_BASED_GATEWAY,
    bpmn.INTERMEDIATE_CATCH_EVENT,
    bpmn.INTERMEDIATE_THROW_EVENT,
    bpmn.SUB_PROCESS,
    bpmn.EVENT_SUB_PROCESS,
    bpmn.AD_HOC_SUB_PROCESS,
    bpmn.CALL_ACTIVITY,
)
# The most instructions one command may carry: each writes several records in the command's one batch (Zeebe
# refuses a modification whose records exceed the maximum batch size the same way, asking to split it).
MAX_INSTRUCTIONS: Final = 1000
# What an ancestor selection may point at and a flow scope instance must be to be activated in.
_ACTIVE: Final = (PI.ELEMENT_ACTIVATED,)


@dataclass(slots=True)
class _Activation:
    """One activate instruction as the command carries it, with the flow scope instances it used or created."""

    element_id: str
    ancestor_key: int
    variables: list[tuple[str, dict[str, Any]]]
    scope_keys: list[int] = field(default_factory=list)


def _activations(value: dict[str, Any]) -> list[_Activation]:
    out = []
    for ins in value.get("activateInstructions") or []:
        variables = _variables(ins)
        ancestor = ins.get("ancestorScopeKey", ins.get("ancestorElementInstanceKey", -1))
        out.append(_Activation(ins.get("elementId", ""), ancestor if ancestor and ancestor > 0 else -1, variables))
    return out


def _variables(instruction: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (v.get("elementId") or v.get("scopeId") or "", v.get("variables") or {})
        for v in instruction.get("variableInstructions") or []
    ]


def _expand(
    ctx: ProcessingContext,
    process: bpmn.Process,
    root: ElementInstance,
    value: dict[str, Any],
    activations: list[_Activation],
) -> tuple[list[int], str | None]:
    """The element instances to terminate, and the activations of the move instructions (appended to
    ``activations``), from the command's terminate instructions (by key, or by element id: every active instance of
    the element) and move instructions (Camunda 8.9: terminate the source instances, activate the target once for
    each); or why they cannot be followed."""
    what = f"Expected to modify instance of process '{process.id}' but it contains one or more"
    terminations: list[int] = []
    by_id = [t["elementId"] for t in value.get("terminateInstructions") or [] if t.get("elementId")]
    unknown = _distinct(e for e in by_id if e not in process.elements)
    if unknown:
        return [], f"{what} terminate instructions with an element that could not be found: '{_join(unknown)}'"
    for ins in value.get("terminateInstructions") or []:
        if ins.get("elementId"):
            terminations += _live_instances_of(ctx, root, ins["elementId"])
        else:
            terminations.append(ins.get("elementInstanceKey", -1))
    moves = value.get("moveInstructions") or []
    unknown = _distinct(
        m["sourceElementId"] for m in moves if m.get("sourceElementId") and m["sourceElementId"] not in process.elements
    )
    if unknown:
        return [], f"{what} move instructions with a source element that could not be found: '{_join(unknown)}'"
    missing = _distinct(
        str(m["sourceElementInstanceKey"])
        for m in moves
        if not m.get("sourceElementId")
        and ((i := ctx.state.elements.get(m.get("sourceElementInstanceKey", -1))) is None or not _of_instance(i, root))
    )
    if missing:
        return (
            [],
            f"{what} move instructions with a source element instance that could not be found: '{_join(missing)}'",
        )
    for move in moves:
        target = move.get("targetElementId", "")
        if move.get("sourceElementId"):
            sources = _live_instances_of(ctx, root, move["sourceElementId"])
        else:
            sources = [move["sourceElementInstanceKey"]]
        for source_key in sources:
            source = ctx.state.elements.get(source_key)
            assert source is not None
            ancestor = move.get("ancestorScopeKey", -1)
            if move.get("useSourceParentKeyAsAncestorScope"):
                ancestor = source.value.flow_scope_key
            elif move.get("inferAncestorScopeFromSourceHierarchy") and target in process.elements:
                ancestor = _inferred_ancestor(ctx, process, source, target)
            activations.append(_Activation(target, ancestor if ancestor > 0 else -1, _variables(move)))
            terminations.append(source_key)
    return terminations, None


def _live_instances_of(ctx: ProcessingContext, root: ElementInstance, element_id: str) -> list[int]:
    """The instance's element instances of ``element_id`` that are not ending: of a multi-instance activity, its
    bodies (their instances go with them)."""
    found = []
    pending = [root.key]
    while pending:
        key = pending.pop(0)
        inst = ctx.state.elements.get(key)
        if inst is None or inst.state == PI.ELEMENT_TERMINATING:
            continue
        if inst.value.element_id == element_id and not inst.value.is_root:
            found.append(key)
            continue
        pending.extend(ctx.state.elements.children(key))
    return found


def _inferred_ancestor(ctx: ProcessingContext, process: bpmn.Process, source: ElementInstance, target: str) -> int:
    """The nearest instance above ``source`` whose element encloses ``target`` (-1: none does)."""
    scopes = set(_flow_scope_ids(process, target))
    for key in b.scope_chain(ctx, source.value.flow_scope_key):
        inst = ctx.state.elements.get(key)
        if inst is not None and (inst.value.element_id in scopes or inst.value.is_root):
            return key
    return -1


# -- MODIFY --------------------------------------------------------------------------------------------------


def refusal(ctx: ProcessingContext, cmd: Record) -> tuple[RejectionType, str] | None:
    """Why MODIFY ``cmd`` would be rejected now, or None (reads state only; a batch operation asks before writing
    its item's command, so a refused item is a failed item)."""
    prepared = _prepare(ctx, cmd)
    return prepared if isinstance(prepared[0], RejectionType) else None  # type: ignore[return-value]


def _prepare(
    ctx: ProcessingContext, cmd: Record
) -> tuple[RejectionType, str] | tuple[ElementInstance, bpmn.Process, list[_Activation], list[int], int, int]:
    """The instance, its process, the activations and terminations of ``cmd`` — or the rejection (nothing written)."""
    v = cmd.value
    pi_key = v.get("processInstanceKey", -1)
    if pi_key is None or pi_key <= 0:
        pi_key = cmd.key
    event_key = cmd.key if cmd.key > 0 else pi_key
    root = ctx.state.elements.get(pi_key)
    if root is None or not root.value.is_root:
        return (
            RejectionType.NOT_FOUND,
            f"Expected to modify process instance but no process instance found with key '{event_key}'",
        )
    if root.state != PI.ELEMENT_ACTIVATED:
        return (
            RejectionType.INVALID_STATE,
            f"Expected to modify process instance with key '{pi_key}', but it is "
            f"{'ending' if root.state != PI.ELEMENT_ACTIVATING else 'still being activated'}",
        )
    process = lc.process_of(ctx, root)
    given = sum(
        len(v.get(name) or []) for name in ("activateInstructions", "terminateInstructions", "moveInstructions")
    )
    activations = _activations(v)
    terminations, problem = _expand(ctx, process, root, v, activations) if given <= MAX_INSTRUCTIONS else ([], None)
    if problem is not None:
        return RejectionType.INVALID_ARGUMENT, problem
    count = max(given, len(activations) + len(terminations))
    if count > MAX_INSTRUCTIONS:
        return (
            RejectionType.INVALID_ARGUMENT,
            f"Unable to modify process instance with key '{pi_key}': it has {count} instructions (moves and "
            f"terminations by element id counted per element instance), more than the {MAX_INSTRUCTIONS} one command "
            "may carry. Please reduce the size by splitting the modification into multiple commands.",
        )
    problem = _check(ctx, process, root, activations, terminations)
    if problem is not None:
        return RejectionType.INVALID_ARGUMENT, problem
    return root, process, activations, terminations, pi_key, event_key


def _may_modify(ctx: ProcessingContext, cmd: Record) -> bool:
    """The caller's permission, checked before anything else about the instance is said."""
    pi_key = cmd.value.get("processInstanceKey", -1)
    root = ctx.state.elements.get(pi_key if isinstance(pi_key, int) and pi_key > 0 else cmd.key)
    return root is None or not root.value.is_root or b.may_update(ctx, root.value, "MODIFY_PROCESS_INSTANCE")


def modify(ctx: ProcessingContext, cmd: Record) -> None:
    """PROCESS_INSTANCE_MODIFICATION MODIFY: activate and terminate elements of one instance, atomically."""
    if not _may_modify(ctx, cmd):
        return
    prepared = _prepare(ctx, cmd)
    if isinstance(prepared[0], RejectionType):
        ctx.reject(prepared[0], prepared[1])  # type: ignore[arg-type]
        return
    root, process, activations, terminations, pi_key, event_key = prepared  # type: ignore[misc]
    v = cmd.value
    required: set[int] = set()
    for act in activations:
        element = process.element(act.element_id)
        act.scope_keys = activate_element(ctx, process, root.value, element, act.ancestor_key, act.variables)
        required.update(act.scope_keys)
    for key in terminations:
        _terminate(ctx, process, key, required)
    modified = {
        "processInstanceKey": pi_key,
        "activateInstructions": [
            {
                "elementId": act.element_id,
                "ancestorScopeKey": act.ancestor_key,
                "variableInstructions": [{"elementId": scope, "variables": doc} for scope, doc in act.variables],
                "ancestorScopeKeys": act.scope_keys,
            }
            for act in activations
        ],
        "terminateInstructions": [{"elementInstanceKey": key} for key in terminations],
        "moveInstructions": v.get("moveInstructions") or [],
        "tenantId": root.value.tenant_id,
    }
    rec = ctx.event(
        ValueType.PROCESS_INSTANCE_MODIFICATION, ProcessInstanceModificationIntent.MODIFIED, event_key, modified
    )
    ctx.respond(rec)


def _check(
    ctx: ProcessingContext,
    process: bpmn.Process,
    root: ElementInstance,
    activations: list[_Activation],
    terminations: list[int],
) -> str | None:
    """Why the instructions cannot be carried out (Zeebe's checks, in Zeebe's order), or None."""
    what = f"Expected to modify instance of process '{process.id}' but it contains one or more"
    unknown = _distinct(a.element_id for a in activations if a.element_id not in process.elements)
    flows = [e for e in unknown if e in process.flows]
    unknown = [e for e in unknown if e not in process.flows]
    if unknown:
        return f"{what} activate instructions with an element that could not be found: '{_join(unknown)}'"
    ids = _distinct(a.element_id for a in activations)
    gateway_events = [e for e in ids if e not in flows and _after_event_based_gateway(process, process.element(e))]
    if gateway_events:
        return (
            f"{what} activate instructions for elements that are unsupported: '{_join(gateway_events)}'. "
            "The activation of events belonging to an event-based gateway is not supported."
        )
    unsupported = flows + [e for e in ids if e not in flows and process.element(e).element_type in UNSUPPORTED_TYPES]
    if unsupported:
        types = _distinct(SEQUENCE_FLOW if e in flows else process.element(e).element_type for e in unsupported)
        return (
            f"{what} activate instructions for elements that are unsupported: '{_join(unsupported)}'. "
            f"The activation of elements with type '{_join(types)}' is not supported. "
            f"Supported element types are: {', '.join(SUPPORTED_TYPES)}."
        )
    refused = refusal_of_kind(process, ids)
    if refused is not None:
        return f"{what} activate instructions for elements that are unsupported: {refused}"
    missing = _distinct(
        str(k) for k in terminations if (i := ctx.state.elements.get(k)) is None or not _of_instance(i, root)
    )
    if missing:
        return f"{what} terminate instructions with an element instance that could not be found: '{_join(missing)}'"
    scopes = [(a, scope) for a in activations for scope, _ in a.variables if scope and scope != process.id]
    unknown_scopes = _distinct(scope for _, scope in scopes if scope not in process.elements)
    if unknown_scopes:
        return (
            f"{what} variable instructions with a scope element id that could not be found: '{_join(unknown_scopes)}'"
        )
    if any(scope != a.element_id and scope not in _flow_scope_ids(process, a.element_id) for a, scope in scopes):
        return (
            f"{what} variable instructions with a scope element that doesn't belong to the activating element's flow "
            "scope. These variables should be set before or after the modification."
        )
    return _check_ancestors(ctx, process, root, activations, terminations)


def _check_ancestors(
    ctx: ProcessingContext,
    process: bpmn.Process,
    root: ElementInstance,
    activations: list[_Activation],
    terminations: list[int],
) -> str | None:
    what = f"Expected to modify instance of process '{process.id}' but it contains one or more activate instructions"
    selected = _distinct(a.ancestor_key for a in activations if a.ancestor_key > 0)
    found = {key: ctx.state.elements.get(key) for key in selected}
    inactive = [str(k) for k, inst in found.items() if inst is None or inst.state not in _ACTIVE]
    if inactive:
        return (
            f"{what} with an ancestor scope key that does not exist, or is not in an active state: '{_join(inactive)}'"
        )
    foreign = [str(k) for k, inst in found.items() if inst is not None and not _of_instance(inst, root)]
    if foreign:
        return (
            f"{what} with an ancestor scope key that does not belong to the modified process instance: "
            f"'{_join(foreign)}'"
        )
    not_ancestors = "".join(
        f"\n- instance '{a.ancestor_key}' of element '{inst.value.element_id}' is not an ancestor of element "
        f"'{a.element_id}'"
        for a in activations
        if a.ancestor_key > 0
        and (inst := found[a.ancestor_key]) is not None
        and inst.value.element_id not in _flow_scope_ids(process, a.element_id)
    )
    if not_ancestors:
        return f"{what} with an ancestor scope key that is not an ancestor of the element to activate:{not_ancestors}"
    conflicts = []
    for key in _distinct(terminations):
        ending = ctx.state.elements.get(key)
        assert ending is not None  # checked before
        for a in activations:
            if a.ancestor_key > 0:
                hit = a.ancestor_key == key
            else:
                hit = ending.value.element_id in _flow_scope_ids(process, a.element_id)
            if hit:
                conflicts.append(
                    f"element '{a.element_id}' requires flow scope instance '{key}' which is being terminated"
                )
    if conflicts:
        return (
            f"{what} for elements whose required flow scope instance is also being terminated: "
            f"{', '.join(conflicts)}. Please provide a valid ancestor scope key for the activation or avoid "
            "terminating the required flow scope."
        )
    return None


def refusal_of_kind(process: bpmn.Process, element_ids: Iterable[str]) -> str | None:
    """Elements Weir cannot start in the middle of an instance (beyond Zeebe's unsupported types), with why."""
    for element_id in element_ids:
        element = process.element(element_id)
        if element.is_for_compensation:
            return (
                f"'{element_id}'. A compensation handler runs only when its activity is compensated; throw a "
                "compensation event instead."
            )
        for scope_id in _flow_scope_ids(process, element_id):
            scope = process.elements.get(scope_id)
            if scope is not None and scope.element_type == bpmn.AD_HOC_SUB_PROCESS:
                return (
                    f"'{element_id}'. It is inside the ad-hoc sub-process '{scope_id}', whose elements are activated "
                    "through the ad-hoc sub-process (its activeElementsCollection or a job completion)."
                )
    return None


def inside_multi_instance(process: bpmn.Process, element_id: str) -> bool:
    """Whether an enclosing sub-process of the element is a multi-instance activity."""
    return any(
        (scope := process.elements.get(s)) is not None and scope.multi_instance is not None
        for s in _flow_scope_ids(process, element_id)
    )


def _after_event_based_gateway(process: bpmn.Process, element: bpmn.Element) -> bool:
    return element.element_type in (bpmn.INTERMEDIATE_CATCH_EVENT, bpmn.RECEIVE_TASK) and any(
        (source := process.elements.get(process.flow(f).source_id)) is not None
        and source.element_type == bpmn.EVENT_BASED_GATEWAY
        for f in element.incoming
    )


def _flow_scope_ids(process: bpmn.Process, element_id: str) -> list[str]:
    """The element's flow scopes, innermost first, ending with the process id."""
    out = []
    scope_id = process.element(element_id).flow_scope_id
    while scope_id and scope_id != process.id:
        out.append(scope_id)
        scope_id = process.element(scope_id).flow_scope_id
    out.append(process.id)
    return out


def _of_instance(inst: ElementInstance, root: ElementInstance) -> bool:
    return inst.value.process_instance_key == root.key


def _distinct(items: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(items))


def _join(items: Iterable[str]) -> str:
    return "', '".join(items)


# -- activation ----------------------------------------------------------------------------------------------


def activate_element(
    ctx: ProcessingContext,
    process: bpmn.Process,
    like: ProcessInstanceValue,
    element: bpmn.Element,
    ancestor_key: int,
    variables: list[tuple[str, dict[str, Any]]],
) -> list[int]:
    """Activate ``element`` in its flow scopes (found or created, see the module doc); the flow scope instance keys
    it used, outermost first. Raises :class:`CommandRefused` when no flow scope instance can be chosen."""
    pi_key = like.process_instance_key
    scope_keys = [pi_key]
    _set_variables(ctx, process.id, pi_key, variables, global_scope=True)
    scope_key = pi_key
    for scope_id in reversed(_flow_scope_ids(process, element.id)[:-1]):
        scope = process.element(scope_id)
        if scope.multi_instance is not None:
            body_key = _reusable(ctx, process, scope, scope_key, ancestor_key)
            inner_key = _reusable(ctx, process, scope, body_key, ancestor_key) if body_key is not None else None
            if inner_key is None:
                raise CommandRefused(
                    RejectionType.INVALID_ARGUMENT,
                    f"Expected to modify instance of process '{process.id}' but it contains one or more activate "
                    f"instructions that would result in the activation of multi-instance element '{scope_id}', "
                    "which is currently unsupported.",
                )
            scope_key = inner_key
            _set_variables(ctx, scope_id, scope_key, variables)
        else:
            found = _reusable(ctx, process, scope, scope_key, ancestor_key)
            if found is None:
                scope_key = _create_scope(ctx, process, like, scope, scope_key, variables)
            else:
                scope_key = found
                _set_variables(ctx, scope_id, scope_key, variables)
        scope_keys.append(scope_key)
    if element.element_type == bpmn.EVENT_SUB_PROCESS:
        # as in Zeebe, without its event: the event sub-process is created like a flow scope (it interrupts
        # nothing) and its start event is activated in it
        scope_key = _create_scope(ctx, process, like, element, scope_key, variables)
        element = next(e for e in process.children_of(element.id) if e.element_type == bpmn.START_EVENT)
    _start(ctx, process, like, element, scope_key, variables)
    return scope_keys


def _reusable(
    ctx: ProcessingContext, process: bpmn.Process, scope: bpmn.Element, parent_key: int, ancestor_key: int
) -> int | None:
    """The active instance of ``scope`` inside ``parent_key`` to activate in, or None to create one (Zeebe's
    ancestor selection)."""
    candidates = [
        c.key
        for k in ctx.state.elements.children(parent_key)
        if (c := ctx.state.elements.get(k)) is not None and c.value.element_id == scope.id and c.state in _ACTIVE
    ]
    selected = ancestor_key > 0
    if not candidates:
        return None
    if len(candidates) == 1:
        only = candidates[0]
        return None if selected and _descends_from(ctx, only, ancestor_key) else only
    if selected:
        if ancestor_key in candidates:
            return ancestor_key
        if any(_descends_from(ctx, c, ancestor_key) for c in candidates):
            return None
        above = [c for c in candidates if _descends_from(ctx, ancestor_key, c)]
        if above:
            return above[0]
    raise CommandRefused(
        RejectionType.INVALID_ARGUMENT,
        f"Expected to modify instance of process '{process.id}' but it contains one or more activate instructions "
        f"for an element that has a flow scope with more than one active instance: '{scope.id}'. Can't decide in "
        "which instance of the flow scope the element should be activated. Please specify an ancestor element "
        "instance key for this activate instruction.",
    )


def _descends_from(ctx: ProcessingContext, key: int, ancestor_key: int) -> bool:
    """Whether ``ancestor_key`` is a (direct or indirect) flow scope of element instance ``key``."""
    return ancestor_key in b.scope_chain(ctx, key)[1:]


def _create_scope(
    ctx: ProcessingContext,
    process: bpmn.Process,
    like: ProcessInstanceValue,
    scope: bpmn.Element,
    parent_key: int,
    variables: list[tuple[str, dict[str, Any]]],
) -> int:
    """A new instance of the flow scope ``scope``: ACTIVATING, its instruction variables, its subscriptions,
    ACTIVATED (no input mappings, start event or listeners, as in Zeebe)."""
    key = ctx.keys.next_key()
    value = like.for_element(scope.id, scope.element_type, scope.event_type, parent_key)
    ctx.instance_event(PI.ELEMENT_ACTIVATING, key, value)
    inst = ctx.state.elements.get(key)
    assert inst is not None
    _set_variables(ctx, scope.id, key, variables, instance=inst)
    _subscribe(ctx, process, scope, inst)
    lc.transition(ctx, inst, PI.ELEMENT_ACTIVATED)
    return key


def _subscribe(
    ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
) -> None:
    targets = lc.subscription_targets(process, element, processor_of(ctx, inst.value))
    problem = events.open_subscriptions(ctx, list(targets), inst) if targets else None
    if problem is not None:
        raise CommandRefused(
            RejectionType.INVALID_ARGUMENT,
            f"Expected to subscribe to catch event(s) of '{inst.value.element_id}' but {problem}",
        )


def _start(
    ctx: ProcessingContext,
    process: bpmn.Process,
    like: ProcessInstanceValue,
    element: bpmn.Element,
    scope_key: int,
    variables: list[tuple[str, dict[str, Any]]],
) -> None:
    """The element itself: ACTIVATING now (so its scope counts it from this command on, and a termination in the
    same command cannot end the scope under it), its own activation in the ACTIVATE_ELEMENT that follows."""
    key = ctx.keys.next_key()
    if element.multi_instance is not None:  # entered through its body, as b.activate_element does
        value = like.for_element(element.id, bpmn.MULTI_INSTANCE_BODY, bpmn.UNSPECIFIED, scope_key)
    else:
        value = like.for_element(element.id, element.element_type, element.event_type, scope_key)
    ctx.instance_event(PI.ELEMENT_ACTIVATING, key, value)
    inst = ctx.state.elements.get(key)
    assert inst is not None
    _set_variables(ctx, element.id, key, variables, instance=inst)
    b.activate_element(ctx, element, like, scope_key, key=key)


def _set_variables(
    ctx: ProcessingContext,
    scope_id: str,
    scope_key: int,
    variables: list[tuple[str, dict[str, Any]]],
    *,
    instance: ElementInstance | None = None,
    global_scope: bool = False,
) -> None:
    for target, document in variables:
        if target == scope_id or (global_scope and not target):
            b.set_local_document(ctx, scope_key, document, instance)


# -- termination ---------------------------------------------------------------------------------------------


def _terminate(ctx: ProcessingContext, process: bpmn.Process, key: int, required: set[int]) -> None:
    """Terminate the element instance, and with it each flow scope it leaves with nothing active (Zeebe)."""
    inst = ctx.state.elements.get(key)
    if inst is None or _ending(ctx, inst):
        return  # ended already, or terminating with an instance an earlier instruction terminated
    top = inst
    while top.value.flow_scope_key > 0:
        scope = ctx.state.elements.get(top.value.flow_scope_key)
        if scope is None or scope.key in required or scope.flows > 0 or _others_active(ctx, scope, top.key):
            break
        if scope.value.is_root and scope.value.parent_process_instance_key > 0:
            raise CommandRefused(
                RejectionType.INVALID_ARGUMENT,
                f"Expected to modify instance of process '{process.id}' but the given instructions would terminate "
                "the instance. The instance was created by a call activity in the parent process. To terminate this "
                "instance please modify the parent process instead.",
            )
        top = scope
    lc.terminate(ctx, top)


def _ending(ctx: ProcessingContext, inst: ElementInstance) -> bool:
    """Whether the instance or one of its flow scopes is terminating already."""
    for key in b.scope_chain(ctx, inst.key):
        found = ctx.state.elements.get(key)
        if found is not None and found.state == PI.ELEMENT_TERMINATING:
            return True
    return False


def _others_active(ctx: ProcessingContext, scope: ElementInstance, leaving: int) -> bool:
    return any(
        k != leaving and (c := ctx.state.elements.get(k)) is not None and c.state != PI.ELEMENT_TERMINATING
        for k in ctx.state.elements.children(scope.key)
    )


# -- start instructions on creation --------------------------------------------------------------------------


def check_start_instructions(process: bpmn.Process, element_ids: list[str]) -> str | None:
    """Why an instance cannot be created at these elements (Zeebe's checks and reasons), or None."""
    what = "Expected to create instance of process with start instructions but"
    if len(element_ids) > MAX_INSTRUCTIONS:
        return f"{what} there are {len(element_ids)} of them, more than the {MAX_INSTRUCTIONS} one command may carry"
    for element_id in element_ids:
        if element_id not in process.elements and element_id not in process.flows:
            return f"{what} no element found with id '{element_id}'."
    for element_id in element_ids:
        if element_id in process.elements and inside_multi_instance(process, element_id):
            return (
                f"{what} the element with id '{element_id}' is inside a multi-instance subprocess. The creation of "
                "elements inside a multi-instance subprocess is not supported."
            )
    for element_id in element_ids:
        element_type = process.element(element_id).element_type if element_id in process.elements else None
        if element_type is None or element_type in UNSUPPORTED_TYPES:
            return (
                f"{what} the element with id '{element_id}' targets unsupported element type "
                f"'{element_type or SEQUENCE_FLOW}'. Supported element types are: {', '.join(SUPPORTED_TYPES)}"
            )
    for element_id in element_ids:
        if _after_event_based_gateway(process, process.element(element_id)):
            return (
                f"{what} the element with id '{element_id}' belongs to an event-based gateway. The creation of "
                "elements belonging to an event-based gateway is not supported."
            )
    refused = refusal_of_kind(process, element_ids)
    if refused is not None:
        return f"{what} the element with id {refused}"
    return None


def start_at(
    ctx: ProcessingContext, process: bpmn.Process, instance: ProcessInstanceValue, element_ids: list[str]
) -> None:
    """Activate a new instance's process directly (ACTIVATING, subscriptions, ACTIVATED) and then each start
    instruction's element in its flow scopes, instead of the none start event."""
    key = instance.process_instance_key
    ctx.instance_event(PI.ELEMENT_ACTIVATING, key, instance)
    inst = ctx.state.elements.get(key)
    assert inst is not None
    _subscribe(ctx, process, None, inst)
    lc.transition(ctx, inst, PI.ELEMENT_ACTIVATED)
    for element_id in element_ids:
        activate_element(ctx, process, instance, process.element(element_id), -1, [])
