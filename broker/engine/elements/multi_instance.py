"""Multi-instance activities: a body around the activity runs one instance of it per item of a collection.

- The body evaluates ``inputCollection`` (an incident when it is not a list), then activates one instance per item
  at once (parallel) or one after the other (sequential); an empty collection completes the body at once.
- Each instance gets its item as the local variable ``inputElement`` and its 1-based ``loopCounter``; the activity's
  input and output mappings, job and events are the instance's, its boundary events the body's.
- When ``outputElement`` is a variable or a path into one (``=result``, ``=result.total``), that variable is created
  in each instance as null, as Zeebe does: what a worker or the inner flow sets under that name lands in the instance
  (so each is collected separately) instead of leaking into the flow scope. Other expressions create nothing.
- When an instance completes, ``outputElement`` (evaluated in the instance) goes to its place in the body's local
  ``outputCollection`` (input order, whatever the completion order), and ``completionCondition`` is evaluated with
  ``numberOfInstances``, ``numberOfActiveInstances``, ``numberOfCompletedInstances`` and
  ``numberOfTerminatedInstances``; once it holds, the other instances are terminated and the body completes.
- The body completes when every instance has ended; its output collection then reaches its flow scope.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from broker import feel
from broker.engine import behaviors as b
from broker.engine import events
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle as lc
from broker.engine.elements.base import ContainerProcessor, ElementProcessor
from broker.engine.expressions import ExpressionFailure
from broker.feel._parser import parse_expression_tree
from broker.protocol.enums import ProcessInstanceIntent
from broker.state.element_instance import ElementInstance

PI = ProcessInstanceIntent
LOOP_COUNTER = "loopCounter"


class MultiInstanceBodyProcessor(ContainerProcessor):
    contains_its_own_element = True
    keeps_compensation_inside = True
    drops_compensation_inside = True

    def event_targets(self, process: bpmn.Process, element: bpmn.Element | None) -> list[bpmn.Element]:
        """The activity's boundary events (event sub-processes of a sub-process belong to each instance)."""
        assert element is not None
        return list(process.boundary_events_of(element.id))

    def on_event(
        self,
        ctx: ProcessingContext,
        process: bpmn.Process,
        inst: ElementInstance,
        target: bpmn.Element,
        variables: dict,
    ) -> None:
        ElementProcessor.on_event(self, ctx, process, inst, target, variables)

    # -- the body -----------------------------------------------------------------------------------------------

    def on_activate(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        assert element is not None and element.multi_instance is not None
        loop = element.multi_instance
        items = _collection(ctx, element, inst, fresh=True)
        if isinstance(items, ExpressionFailure):
            b.raise_incident(ctx, inst, "EXTRACT_VALUE_ERROR", items.message)
            return
        if not lc.subscribe(ctx, process, element, inst):
            return
        inst = lc.activated(ctx, inst)
        if loop.output_collection:
            b.set_local_variable(ctx, inst.key, loop.output_collection, [None] * len(items), instance=inst)
        if not items:
            lc.complete(ctx, process, None, inst)
            return
        for _ in range(1 if loop.is_sequential else len(items)):
            b.activate_element(ctx, element, inst.value, inst.key, instance_of_body=True)

    def on_complete(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        lc.complete(ctx, process, None, inst)  # the activity's output mappings were each instance's

    def before_completed(
        self, ctx: ProcessingContext, process: bpmn.Process, element: bpmn.Element | None, inst: ElementInstance
    ) -> None:
        loop = _loop(process, inst)
        if loop.output_collection and inst.value.flow_scope_key > 0:
            found = ctx.state.variables.get_local(inst.key, loop.output_collection)
            if found is not None:
                b.merge_document(ctx, inst.value.flow_scope_key, {loop.output_collection: found[1]})

    def on_completed(
        self,
        ctx: ProcessingContext,
        process: bpmn.Process,
        element: bpmn.Element | None,
        inst: ElementInstance,
        flows: tuple[bpmn.SequenceFlow, ...] | None,
        trigger: dict | None,
    ) -> None:
        lc.take_outgoing(ctx, process, process.element(inst.value.element_id), inst, flows, trigger)

    # -- its instances ------------------------------------------------------------------------------------------

    def on_child_activating(
        self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance, child: ElementInstance
    ) -> bool:
        element = process.element(scope.value.element_id)
        loop = element.multi_instance
        assert loop is not None
        index = scope.activated_children  # counts this instance already
        items = _collection(ctx, element, scope)
        if isinstance(items, ExpressionFailure):
            b.raise_incident(ctx, child, "EXTRACT_VALUE_ERROR", items.message)
            return False
        if loop.input_element:
            item = items[index - 1] if index <= len(items) else None
            b.set_local_variable(ctx, child.key, loop.input_element, item, instance=child)
        output = output_variable(loop.output_element)
        if output is not None and output not in (loop.input_element, LOOP_COUNTER):  # those are set already
            b.set_local_variable(ctx, child.key, output, None, instance=child)
        b.set_local_variable(ctx, child.key, LOOP_COUNTER, index, instance=child)
        return True

    def before_child_completed(
        self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance, child: ElementInstance
    ) -> bool:
        element = process.element(scope.value.element_id)
        loop = element.multi_instance
        assert loop is not None
        if not (loop.output_collection and loop.output_element) and not loop.completion_condition:
            return True  # nothing to evaluate (reading the instance's variables costs the whole collection)
        evaluator = b.services(ctx).expressions
        context = b.visible_variables(ctx, child.key)
        if loop.output_collection and loop.output_element:
            value = evaluator.evaluate(loop.output_element, context, ctx.now)
            if isinstance(value, ExpressionFailure):
                b.raise_incident(ctx, child, "EXTRACT_VALUE_ERROR", value.message)
                return False
            found = ctx.state.variables.get_local(scope.key, loop.output_collection)
            collection = list(found[1]) if found is not None and isinstance(found[1], list) else []
            index = context.get(LOOP_COUNTER, 0)
            if isinstance(index, int) and 0 < index <= len(collection):
                collection[index - 1] = value
                b.set_local_variable(ctx, scope.key, loop.output_collection, collection, instance=scope)
        if loop.completion_condition and scope.state == PI.ELEMENT_ACTIVATED:
            items = _collection(ctx, element, scope)
            total = len(items) if isinstance(items, list) else scope.activated_children
            counters = {
                "numberOfInstances": total,
                "numberOfActiveInstances": scope.children - 1,
                "numberOfCompletedInstances": scope.completed_children + 1,
                "numberOfTerminatedInstances": scope.terminated_children,
            }
            done = evaluator.evaluate_condition(loop.completion_condition, {**context, **counters}, ctx.now)
            if isinstance(done, ExpressionFailure):
                b.raise_incident(ctx, child, "EXTRACT_VALUE_ERROR", done.message)
                return False
            if done:  # the body completes once the other instances are gone
                scope = lc.transition(ctx, scope, PI.ELEMENT_COMPLETING)
                events.close_subscriptions(ctx, scope)
                lc.terminate_children(ctx, scope.key, keep=child.key)
        return True

    def on_child_completed(self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance) -> None:
        self._go_on(ctx, process, scope)

    def on_child_terminated(self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance) -> None:
        if scope.state == PI.ELEMENT_TERMINATING:
            if scope.children == 0:
                lc.terminated(ctx, scope)
            return
        self._go_on(ctx, process, scope)

    def _go_on(self, ctx: ProcessingContext, process: bpmn.Process, scope: ElementInstance) -> None:
        """An instance ended: complete the body once all have (or the completion condition held), else start the
        next one of a sequential loop."""
        if scope.state == PI.ELEMENT_COMPLETING:
            if scope.children == 0:
                lc.complete(ctx, process, None, scope)
            return
        if scope.state != PI.ELEMENT_ACTIVATED:
            return
        if scope.completed_children + scope.terminated_children < scope.activated_children:
            return  # others are still running: only when the last activated one ends is there a decision to make
        element = process.element(scope.value.element_id)
        items = _collection(ctx, element, scope)
        total = len(items) if isinstance(items, list) else scope.activated_children
        if scope.completed_children + scope.terminated_children >= total:
            if scope.children == 0:
                lc.complete(ctx, process, None, scope)
            return
        loop = element.multi_instance
        assert loop is not None
        if loop.is_sequential and scope.children == 0:
            b.activate_element(ctx, element, scope.value, scope.key, instance_of_body=True)


@lru_cache(maxsize=1024)
def output_variable(output_element: str | None) -> str | None:
    """The variable an ``outputElement`` reads when it is a name or a path into one (``=a``, ``=a.b.c``): the name
    each instance holds locally. None for a static value or any other expression."""
    if not output_element or not output_element.startswith("="):
        return None
    try:
        node = parse_expression_tree(output_element[1:])
    except (feel.FeelSyntaxError, RecursionError):
        return None  # deployment refused it already; evaluating it raises the incident
    while node[0] == "path":
        node = node[2]
    return node[2] if node[0] == "name" else None


def loop_variables(loop: bpmn.MultiInstance | None) -> frozenset[str]:
    """The variables each instance holds locally: its input element, ``loopCounter`` and its output variable."""
    if loop is None:
        return frozenset()
    names = {LOOP_COUNTER, loop.input_element, output_variable(loop.output_element)}
    return frozenset(name for name in names if name)


def _loop(process: bpmn.Process, inst: ElementInstance) -> bpmn.MultiInstance:
    loop = process.element(inst.value.element_id).multi_instance
    assert loop is not None
    return loop


def _collection(
    ctx: ProcessingContext, element: bpmn.Element, body: ElementInstance, *, fresh: bool = False
) -> list[Any] | ExpressionFailure:
    """The body's input collection, evaluated in the body's scope; reused within the processing round (a parallel
    body over n items would otherwise evaluate it n times)."""
    loop = element.multi_instance
    assert loop is not None
    memo_key = ("multi-instance collection", body.key)
    if not fresh and memo_key in ctx.memo:
        return ctx.memo[memo_key]
    value = b.evaluate(ctx, loop.input_collection, body.key)
    if not isinstance(value, ExpressionFailure) and not isinstance(value, list):
        value = ExpressionFailure(
            f"Expected result of the expression '{loop.input_collection}' to be 'ARRAY', but was "
            f"'{b.describe_type(value)}'."
        )
    ctx.memo[memo_key] = value
    return value
