"""Ad-hoc sub-processes: a flow scope whose inner elements start because a collection names them, not at a start
event (Zeebe's BPMN-implemented ad-hoc sub-process).

- On activation (after its input mappings) ``activeElementsCollection`` is evaluated in the sub-process: a list of
  ids of inner elements without incoming flows, each activated once, in list order. An absent expression or an
  empty list activates nothing and the sub-process stays active (until it is cancelled or interrupted). A value
  that is not a list of strings, or an id that is not such an element, is an ``EXTRACT_VALUE_ERROR`` incident on the
  sub-process; resolving it evaluates the collection again.
- As in Zeebe 8.8, each activated element runs in an inner instance of its own (``AD_HOC_SUB_PROCESS_INNER_INSTANCE``,
  element id ``<id>#innerInstance``): a scope created ACTIVATED with it, where its flows to other inner elements
  run on. When an inner instance completes (nothing inside it is active any more) a path of the sub-process has
  ended: ``outputElement`` (if set) is evaluated in the inner instance and appended to the sub-process's local
  ``outputCollection``, then ``completionCondition`` (if set) is evaluated in the sub-process; a failure is an
  incident on the inner instance, which stays COMPLETING until it is resolved.
- Without a condition the sub-process completes once nothing inside is active any more. When the condition holds,
  the sub-process completes — first terminating what still runs inside when ``cancelRemainingInstances`` (the
  default; the sub-process is COMPLETING meanwhile, as a multi-instance body is, so tokens still on their way are
  refused), else once nothing inside is active (judged again, with the condition, when the next path ends).
- Output mappings apply on completion; without them no local variable reaches the flow scope, except the output
  collection. Boundary events, event sub-processes and termination are those of any flow scope.

With a ``zeebe:taskDefinition`` a job worker decides instead (Zeebe 8.8's job-worker implementation, used by AI
agents); ``activeElementsCollection`` and ``completionCondition`` are not read:

- On activation (after input mappings and the output collection) a job of kind ``AD_HOC_SUB_PROCESS`` is created
  for the sub-process. The worker completes it with a result (:func:`complete_job`): inner elements to activate,
  each in an inner instance of its own with the given variables local to it, and whether the completion condition
  is fulfilled — then the sub-process completes, at once when ``isCancelRemainingInstances`` (terminating what
  still runs inside) or else once nothing inside is active (it is COMPLETING meanwhile). The job's variables are
  merged from the sub-process up, as for any job.
- Each time an inner path ends (after the output collection is updated) the job is created anew (a job still
  waiting for a worker is CANCELED first), so the worker can decide again.
"""

from __future__ import annotations

from typing import Any

from broker.engine import behaviors as b
from broker.engine import events
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.base import ContainerProcessor
from broker.engine.elements.job_task import create_job
from broker.engine.expressions import ExpressionFailure
from broker.protocol.enums import JobIntent, ProcessInstanceIntent, RejectionType, ValueType
from broker.state.element_instance import ElementInstance

PI = ProcessInstanceIntent
JOB_KIND = "AD_HOC_SUB_PROCESS"
# Memo key (per processing round): whether the completion condition held when a path ended in the sub-process.
_CONDITION_HELD = "ad-hoc completion condition held"
# Inner elements a collection may not name: they start through an event or end a path, never on their own.
_NOT_ACTIVATABLE = frozenset({bpmn.START_EVENT, bpmn.BOUNDARY_EVENT, bpmn.END_EVENT, bpmn.EVENT_SUB_PROCESS})


class AdHocSubProcessProcessor(ContainerProcessor):
    hears_ending_paths = True

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None and element.ad_hoc is not None
        if not lc.apply_inputs(ctx, element, inst):
            return
        if element.job is not None:
            if not lc.subscribe(ctx, process, element, inst):
                return
            if element.ad_hoc.output_collection:
                b.set_local_variable(ctx, inst.key, element.ad_hoc.output_collection, [], instance=inst)
            create_job(ctx, element, inst, kind=JOB_KIND)
            return
        chosen = _elements_to_activate(ctx, process, element, inst)
        if isinstance(chosen, ExpressionFailure):
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", chosen.message)
            return
        if not lc.subscribe(ctx, process, element, inst):
            return
        inst = lc.activated(ctx, inst)
        if element.ad_hoc.output_collection:
            b.set_local_variable(ctx, inst.key, element.ad_hoc.output_collection, [], instance=inst)
        for target in chosen:
            activate_in_inner_instance(ctx, element, inst, target)

    def before_child_completed(
        self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance, child: ElementInstance
    ) -> bool:
        """A path ends (``child`` is an inner instance, or an event sub-process of the sub-process): collect its
        output, then evaluate the completion condition. Nothing is written before both succeeded, so resolving an
        incident judges the path once more; the answer is kept for :meth:`on_child_completed`, which runs in the
        same step once the child is gone."""
        element = process.element(scope.value.element_id)
        ad_hoc = _ad_hoc(process, scope)
        # a job worker's fulfilled condition lets what runs finish: their paths still add to the output collection
        collecting = scope.state == PI.ELEMENT_COMPLETING and element.job is not None
        if scope.state != PI.ELEMENT_ACTIVATED and not collecting:
            return True
        evaluator = b.services(ctx).expressions
        collected: dict[str, Any] = {}
        if ad_hoc.output_collection and ad_hoc.output_element:
            value = evaluator.evaluate(ad_hoc.output_element, b.visible_variables(ctx, child.key), ctx.now)
            if isinstance(value, ExpressionFailure):
                b.raise_incident(ctx, child, "EXTRACT_VALUE_ERROR", value.message)
                return False
            found = ctx.state.variables.get_local(scope.key, ad_hoc.output_collection)
            items = list(found[1]) if found is not None and isinstance(found[1], list) else []
            collected[ad_hoc.output_collection] = [*items, value]
        if ad_hoc.completion_condition and element.job is None:
            context = {**b.visible_variables(ctx, scope.key), **collected}
            held = evaluator.evaluate_condition(ad_hoc.completion_condition, context, ctx.now)
            if isinstance(held, ExpressionFailure):
                message = f"Failed to evaluate completion condition. {held.message}"
                b.raise_incident(ctx, child, "EXTRACT_VALUE_ERROR", message)
                return False
            ctx.memo[(_CONDITION_HELD, scope.key)] = held
        b.set_local_document(ctx, scope.key, collected, scope)
        return True

    def on_child_completed(self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance) -> None:
        """A path ended (see :meth:`before_child_completed`): complete when the condition says so, or — without
        one — when nothing inside is active any more."""
        held = ctx.memo.pop((_CONDITION_HELD, scope.key), None)
        if scope.state == PI.ELEMENT_COMPLETING:
            if scope.children == 0:
                lc.complete(ctx, process, process.element(scope.value.element_id), scope)
            return
        element = process.element(scope.value.element_id)
        if element.job is not None:
            if scope.state == PI.ELEMENT_ACTIVATED:  # the worker decides again
                b.cancel_job(ctx, scope)
                create_job(ctx, element, scope, kind=JOB_KIND)
            return
        ad_hoc = _ad_hoc(process, scope)
        if ad_hoc.completion_condition is None or scope.state != PI.ELEMENT_ACTIVATED:
            self._maybe_complete(ctx, process, scope)
            return
        if held is None:  # the path ended without the hook (it cannot, but a stuck sub-process is worse)
            value = b.evaluate(ctx, ad_hoc.completion_condition, scope.key)
            held = value is True
        if not held:
            return
        if not ad_hoc.cancel_remaining_instances or (scope.children == 0 and scope.flows == 0):
            self._maybe_complete(ctx, process, scope)
            return
        if ctx.state.event_triggers.get(scope.key) is not None:
            return  # an interrupting event sub-process is already ending what runs inside
        # terminate what still runs; tokens still on their way are refused (the scope is no longer ACTIVATED)
        scope = lc.transition(ctx, scope, PI.ELEMENT_COMPLETING)
        events.close_subscriptions(ctx, scope)
        if scope.children > 0:
            lc.terminate_children(ctx, scope.key)
        else:
            lc.complete(ctx, process, process.element(scope.value.element_id), scope)

    def on_child_terminated(self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance) -> None:
        if scope.state == PI.ELEMENT_COMPLETING:
            if scope.children == 0:  # the completion condition held and the remaining instances are gone
                lc.complete(ctx, process, process.element(scope.value.element_id), scope)
            return
        super().on_child_terminated(ctx, process, scope)

    def before_completed(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        """The output collection reaches the flow scope (whatever the output mappings)."""
        assert element is not None and element.ad_hoc is not None
        name = element.ad_hoc.output_collection
        if name and inst.value.flow_scope_key > 0:
            found = ctx.state.variables.get_local(inst.key, name)
            if found is not None:
                b.merge_document(ctx, inst.value.flow_scope_key, {name: found[1]})


class AdHocInnerInstanceProcessor(ContainerProcessor):
    """The scope around one activated element of an ad-hoc sub-process (and what its flows lead to): created
    ACTIVATED together with the element, it completes when nothing inside it is active any more, ending a path of
    the sub-process."""

    def event_targets(self, process: bpmn.Process, element: bpmn.Element | None) -> list[bpmn.Element]:
        return []

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        raise RuntimeError(
            f"element instance {inst.key}: an inner instance of an ad-hoc sub-process is created by the sub-process "
            "when it activates an element, never by ACTIVATE_ELEMENT"
        )


def activate_in_inner_instance(
    ctx: ProcessingContext,
    element: bpmn.Element,
    inst: ElementInstance,
    target: bpmn.Element,
    variables: dict[str, Any] | None = None,
) -> None:
    """Create an inner instance of the ad-hoc sub-process ``inst`` (ACTIVATING, ACTIVATED), with ``variables``
    local to it, and activate ``target`` in it."""
    inner_id = element.id + bpmn.AD_HOC_INNER_INSTANCE_SUFFIX
    inner_key = ctx.keys.next_key()
    value = inst.value.for_element(inner_id, bpmn.AD_HOC_SUB_PROCESS_INNER_INSTANCE, bpmn.UNSPECIFIED, inst.key)
    ctx.event(ValueType.PROCESS_INSTANCE, PI.ELEMENT_ACTIVATING, inner_key, value.to_dict())
    inner = ctx.state.elements.get(inner_key)
    assert inner is not None
    if variables:
        b.set_local_document(ctx, inner_key, variables, inner)
    inner = lc.activated(ctx, inner)
    b.activate_element(ctx, target, inner.value, inner.key)


# -- the job-worker implementation ----------------------------------------------------------------------------


def complete_job(ctx: ProcessingContext, job_key: int, job: dict[str, Any], command: dict[str, Any]) -> None:
    """JOB COMPLETE for the job of a job-worker ad-hoc sub-process: act on the worker's result.

    Refused (and nothing written) when the sub-process is no longer active, when the result names an element the
    sub-process cannot activate (NOT_FOUND), or when it both activates elements and fulfils the completion
    condition (INVALID_ARGUMENT), as in Zeebe.
    """
    inst = ctx.state.elements.get(job["elementInstanceKey"])
    if inst is None or inst.state != PI.ELEMENT_ACTIVATED:
        ctx.reject(
            RejectionType.INVALID_STATE,
            f"Expected to complete job with key '{job_key}', but the ad-hoc sub-process "
            f"'{job['elementId']}' it belongs to is not active any more",
        )
        return
    process = b.services(ctx).models.get(job["processDefinitionKey"])
    element = process.element(job["elementId"])
    result = command.get("result") or {}
    activate = list(result.get("activateElements") or [])
    fulfilled = bool(result.get("isCompletionConditionFulfilled"))
    candidates = activatable_elements(process, element)
    unknown = [item.get("elementId", "") for item in activate if item.get("elementId") not in candidates]
    if unknown:
        ctx.reject(
            RejectionType.NOT_FOUND,
            f"Expected to activate activities for ad-hoc sub-process with key '{inst.key}', but the given elements "
            f"[{', '.join(unknown)}] do not exist.",
        )
        return
    if activate and fulfilled:
        ctx.reject(
            RejectionType.INVALID_ARGUMENT,
            "Expected to complete ad-hoc sub-process job, but the job result contains elements to be activated "
            f"while the completion condition is fulfilled (job key '{job_key}'). When the completion condition is "
            "fulfilled, no further element activations are allowed. Either remove the elements to be activated "
            "from the job result, or set the completion condition to not fulfilled.",
        )
        return
    variables = command.get("variables") or {}
    completed = {**job, "variables": variables}
    if result:
        completed["result"] = result
    ctx.respond(ctx.event(ValueType.JOB, JobIntent.COMPLETED, job_key, completed))
    b.merge_document(ctx, inst.key, variables)
    for item in activate:
        activate_in_inner_instance(ctx, element, inst, candidates[item["elementId"]], item.get("variables"))
    if fulfilled:
        _condition_fulfilled(ctx, process, element, inst.key, cancel=bool(result.get("isCancelRemainingInstances")))


def _condition_fulfilled(
    ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element, key: int, *, cancel: bool
) -> None:
    """The worker says the sub-process is done: it completes now, or once what runs inside has ended (terminated
    when ``cancel``)."""
    scope = ctx.state.elements.get(key)
    assert scope is not None
    if scope.children == 0 and scope.flows == 0:
        ctx.follow_up(ValueType.PROCESS_INSTANCE, PI.COMPLETE_ELEMENT, scope.key, scope.value.to_dict())
        return
    scope = lc.transition(ctx, scope, PI.ELEMENT_COMPLETING)
    events.close_subscriptions(ctx, scope)
    if cancel:
        lc.terminate_children(ctx, scope.key)


def _ad_hoc(process: bpmn.Process, inst: ElementInstance) -> bpmn.AdHoc:
    ad_hoc = process.element(inst.value.element_id).ad_hoc
    assert ad_hoc is not None
    return ad_hoc


def activatable_elements(process: bpmn.Process, element: bpmn.Element) -> dict[str, bpmn.Element]:
    """The inner elements a collection may name, by id: those without incoming flows that start on their own."""
    return {
        child.id: child
        for child in process.children_of(element.id + bpmn.AD_HOC_INNER_INSTANCE_SUFFIX)
        if not child.incoming and child.element_type not in _NOT_ACTIVATABLE
    }


def _elements_to_activate(
    ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element, inst: ElementInstance
) -> list[bpmn.Element] | ExpressionFailure:
    """The inner elements ``activeElementsCollection`` names, in its order (none without the expression)."""
    assert element.ad_hoc is not None
    source = element.ad_hoc.active_elements_collection
    if source is None:
        return []
    value = b.evaluate(ctx, source, inst.key)
    prefix = "Failed to activate ad-hoc elements."
    if isinstance(value, ExpressionFailure):
        return ExpressionFailure(f"{prefix} {value.message}")
    if not isinstance(value, list):
        return ExpressionFailure(
            f"{prefix} Expected result of the expression '{source}' to be 'ARRAY', but was '{b.describe_type(value)}'."
        )
    if not all(isinstance(item, str) for item in value):
        return ExpressionFailure(
            f"{prefix} Expected result of the expression '{source}' to be a list of strings, but it holds "
            + ", ".join(sorted({f"'{b.describe_type(item)}'" for item in value if not isinstance(item, str)}))
            + "."
        )
    candidates = activatable_elements(process, element)
    unknown = [item for item in value if item not in candidates]
    if unknown:
        ids = ", ".join(f"'{item}'" for item in unknown)
        return ExpressionFailure(f"{prefix} No BPMN elements found with ids: {ids} (expression '{source}').")
    return [candidates[item] for item in value]
