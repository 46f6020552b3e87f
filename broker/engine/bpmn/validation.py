"""Graph rules for an assembled process: what must connect to what before the engine may run it.

These rules need the whole process (flows wired to both ends, scopes known), so they run on the
model after reading. Each returns problems rather than raising, so a deployment lists them all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from . import model as m
from .errors import Problem

_CONDITIONAL_SOURCES = frozenset({m.EXCLUSIVE_GATEWAY, m.INCLUSIVE_GATEWAY})
_EVENT_GATEWAY_TARGET_EVENTS = frozenset({m.MESSAGE, m.TIMER, m.SIGNAL})
_ACTIVITIES = frozenset(
    {
        m.SERVICE_TASK,
        m.USER_TASK,
        m.SEND_TASK,
        m.SCRIPT_TASK,
        m.BUSINESS_RULE_TASK,
        m.MANUAL_TASK,
        m.TASK,
        m.RECEIVE_TASK,
        m.SUB_PROCESS,
        m.AD_HOC_SUB_PROCESS,
        m.CALL_ACTIVITY,
    }
)


def validate_process(process: m.Process) -> list[Problem]:
    """Every graph problem of ``process``, in document order of the elements concerned."""
    problems = list(_check_start_events(process))
    problems.extend(_check_flows(process))
    for element in process.elements.values():
        problems.extend(_check_connections(process, element))
        if element.element_type in (m.EXCLUSIVE_GATEWAY, m.INCLUSIVE_GATEWAY):
            problems.extend(_check_conditional_gateway(process, element))
        elif element.element_type == m.EVENT_BASED_GATEWAY:
            problems.extend(_check_event_based_gateway(process, element))
        elif element.element_type == m.BOUNDARY_EVENT:
            problems.extend(_check_boundary_event(process, element))
        elif element.element_type == m.SUB_PROCESS:
            problems.extend(_check_sub_process(process, element))
        elif element.element_type == m.EVENT_SUB_PROCESS:
            problems.extend(_check_event_sub_process(process, element))
        elif element.element_type == m.AD_HOC_SUB_PROCESS:
            problems.extend(_check_ad_hoc_sub_process(process, element))
        if element.event_type == m.COMPENSATION:
            problems.extend(_check_compensation_event(process, element))
        if element.is_for_compensation:
            problems.extend(_check_compensation_handler(element))
    for scope_id in _scope_ids(process):
        problems.extend(_check_links(process, scope_id))
    return problems


def _scope_ids(process: m.Process) -> Iterator[str]:
    yield process.id
    for element in process.elements.values():
        if element.element_type in m.SCOPE_ELEMENT_TYPES:
            yield element.id


def _check_start_events(process: m.Process) -> Iterator[Problem]:
    starts = [process.element(s) for s in process.start_event_ids]
    if not starts:
        yield Problem(process.id, "Must have at least one start event")
    if sum(start.event_type == m.NONE for start in starts) > 1:
        yield Problem(process.id, "Multiple none start events are not allowed")
    names = Counter(s.message.name for s in starts if s.event_type == m.MESSAGE and s.message is not None)
    for name, count in names.items():
        if count > 1:
            yield Problem(process.id, f"Multiple message start events with the same name '{name}' are not allowed")
    signals = Counter(s.signal_name for s in starts if s.event_type == m.SIGNAL and s.signal_name)
    for name, count in signals.items():
        if count > 1:
            yield Problem(process.id, f"Multiple signal start events with the same name '{name}' are not allowed")


def _check_flows(process: m.Process) -> Iterator[Problem]:
    for flow in process.flows.values():
        source = process.elements.get(flow.source_id)
        target = process.elements.get(flow.target_id)
        if source is not None and target is not None and source.flow_scope_id != target.flow_scope_id:
            yield Problem(flow.id, "Sequence flows must connect elements of the same scope")


def _needs_incoming(element: m.Element) -> bool:
    """Elements that are only entered through an incoming sequence flow."""
    if element.element_type in (
        m.START_EVENT,
        m.BOUNDARY_EVENT,
        m.EVENT_SUB_PROCESS,
        m.AD_HOC_SUB_PROCESS_INNER_INSTANCE,
    ):
        return False
    if element.element_type == m.INTERMEDIATE_CATCH_EVENT and element.event_type == m.LINK:
        return False
    return not element.is_for_compensation


def _in_ad_hoc_sub_process(process: m.Process, element: m.Element) -> bool:
    """Inner elements of an ad-hoc sub-process are entered without a flow (the sub-process activates them)."""
    scope = process.elements.get(element.flow_scope_id)
    return scope is not None and scope.element_type == m.AD_HOC_SUB_PROCESS_INNER_INSTANCE


def _check_connections(process: m.Process, element: m.Element) -> Iterator[Problem]:
    kind = element.element_type
    if kind == m.START_EVENT and element.incoming:
        yield Problem(element.id, "Start events must not have incoming sequence flows")
    elif kind == m.END_EVENT and element.outgoing:
        yield Problem(element.id, "End events must not have outgoing sequence flows to other elements.")
    elif kind == m.BOUNDARY_EVENT and element.incoming:
        yield Problem(element.id, "Cannot have incoming sequence flows")
    elif kind == m.EVENT_SUB_PROCESS and (element.incoming or element.outgoing):
        yield Problem(element.id, "Event sub-processes must not have incoming or outgoing sequence flows")
    elif kind == m.INTERMEDIATE_CATCH_EVENT and element.event_type == m.LINK and element.incoming:
        yield Problem(element.id, "Link catch events must not have incoming sequence flows")
    elif kind == m.INTERMEDIATE_THROW_EVENT and element.event_type == m.LINK and element.outgoing:
        yield Problem(element.id, "Link throw events must not have outgoing sequence flows")
    elif _needs_incoming(element) and not element.incoming and not _in_ad_hoc_sub_process(process, element):
        yield Problem(element.id, "Must have at least one incoming sequence flow")
    if kind in m.GATEWAY_ELEMENT_TYPES and not element.outgoing:
        yield Problem(element.id, "Must have at least one outgoing sequence flow")
    if kind not in _CONDITIONAL_SOURCES and any(process.flow(f).condition is not None for f in element.outgoing):
        yield Problem(element.id, "Conditional sequence flows are only supported at exclusive or inclusive gateway")


def _check_conditional_gateway(process: m.Process, gateway: m.Element) -> Iterator[Problem]:
    if gateway.default_flow_id is not None and gateway.default_flow_id not in gateway.outgoing:
        yield Problem(gateway.id, f"Default flow '{gateway.default_flow_id}' must start at gateway")
    if len(gateway.outgoing) <= 1:
        return
    reason = "Must have a condition or be default flow"
    if gateway.element_type == m.INCLUSIVE_GATEWAY:
        reason = "Must have a condition"
    for flow in process.outgoing_flows(gateway.id):
        if flow.condition is None and flow.id != gateway.default_flow_id:
            yield Problem(flow.id, reason)


def _check_event_based_gateway(process: m.Process, gateway: m.Element) -> Iterator[Problem]:
    if len(gateway.outgoing) < 2:
        yield Problem(gateway.id, "Event-based gateway must have at least 2 outgoing sequence flows")
    for flow in process.outgoing_flows(gateway.id):
        target = process.elements.get(flow.target_id)
        if target is None:
            continue
        if target.element_type != m.INTERMEDIATE_CATCH_EVENT or target.event_type not in _EVENT_GATEWAY_TARGET_EVENTS:
            yield Problem(
                gateway.id,
                "Event-based gateway must not have an outgoing sequence flow to other elements than "
                "message/timer/signal intermediate catch events",
            )
            return


def _check_boundary_event(process: m.Process, event: m.Element) -> Iterator[Problem]:
    if event.attached_to_id is None:
        yield Problem(event.id, "Must be attached to an activity")
        return
    host = process.elements.get(event.attached_to_id)
    if host is None:
        yield Problem(event.id, f"Attached to '{event.attached_to_id}', which is not an element of the process")
    elif host.element_type not in _ACTIVITIES:
        yield Problem(event.id, f"Must be attached to an activity, but '{host.id}' is not one")
    elif host.flow_scope_id != event.flow_scope_id:
        yield Problem(event.id, f"Must be in the same scope as the activity '{host.id}' it is attached to")
    if event.event_type == m.ERROR and not event.cancel_activity:
        yield Problem(event.id, "Error boundary events must be interrupting")


def _check_compensation_event(process: m.Process, event: m.Element) -> Iterator[Problem]:
    """A compensation boundary event leads to its handler through an association, never through a sequence flow;
    a compensation throw or end event's ``activityRef`` names an activity it can compensate."""
    if event.element_type == m.BOUNDARY_EVENT:
        if event.compensation_handler_id is None or event.outgoing:
            reason = "Compensation boundary events must have a compensation association and no outgoing sequence flows"
            yield Problem(event.id, reason)
            return
        handler = process.element(event.compensation_handler_id)
        if not handler.is_for_compensation:
            reason = f"The compensation handler '{handler.id}' must be an activity with isForCompensation=\"true\""
            yield Problem(event.id, reason)
        return
    if event.activity_ref is None:
        return
    # inside an event sub-process, the activities of the enclosing scope can be compensated too
    scopes = {event.flow_scope_id}
    scope = process.elements.get(event.flow_scope_id)
    if scope is not None and scope.element_type == m.EVENT_SUB_PROCESS:
        scopes.add(scope.flow_scope_id)
    target = process.elements.get(event.activity_ref)
    if target is None or target.element_type not in _ACTIVITIES or target.flow_scope_id not in scopes:
        reason = f"The activityRef '{event.activity_ref}' must reference an activity in the scope of the compensation"
        yield Problem(event.id, reason + " event")


def _check_compensation_handler(handler: m.Element) -> Iterator[Problem]:
    """A compensation handler runs only when its activity is compensated: it stands outside the flow."""
    if handler.incoming:
        yield Problem(handler.id, "A compensation handler should have no incoming sequence flows")
    if handler.outgoing:
        yield Problem(handler.id, "A compensation handler should have no outgoing sequence flows")
    if handler.boundary_event_ids:
        yield Problem(handler.id, "A compensation handler should have no boundary events")


def _check_sub_process(process: m.Process, sub_process: m.Element) -> Iterator[Problem]:
    starts = [c for c in process.children_of(sub_process.id) if c.element_type == m.START_EVENT]
    if len(starts) != 1:
        yield Problem(sub_process.id, "Must have exactly one start event")
    elif starts[0].event_type != m.NONE:
        yield Problem(sub_process.id, "Start events in sub-processes must be of type none")


def _check_ad_hoc_sub_process(process: m.Process, sub_process: m.Element) -> Iterator[Problem]:
    """Zeebe's rules: something inside to activate, and no start or end events (inner paths just end)."""
    children = process.children_of(sub_process.id + m.AD_HOC_INNER_INSTANCE_SUFFIX)
    if not children:
        yield Problem(sub_process.id, "Must have at least one activity.")
    if any(c.element_type == m.START_EVENT for c in children):
        yield Problem(sub_process.id, "Must not contain a start event.")
    if any(c.element_type == m.END_EVENT for c in children):
        yield Problem(sub_process.id, "Must not contain an end event.")


def _check_event_sub_process(process: m.Process, sub_process: m.Element) -> Iterator[Problem]:
    starts = [c for c in process.children_of(sub_process.id) if c.element_type == m.START_EVENT]
    if len(starts) != 1:
        yield Problem(sub_process.id, "Must have exactly one start event")
        return
    start = starts[0]
    if start.event_type == m.ERROR and not start.is_interrupting:
        yield Problem(start.id, "Error start events of event sub-processes must be interrupting")


def _check_links(process: m.Process, scope_id: str) -> Iterator[Problem]:
    children = process.children_of(scope_id)
    catches = Counter(
        c.link_name for c in children if c.element_type == m.INTERMEDIATE_CATCH_EVENT and c.event_type == m.LINK
    )
    for name, count in catches.items():
        if name is not None and count > 1:
            yield Problem(scope_id, f"Multiple intermediate catch link events with the name '{name}' exist")
    for child in children:
        is_link_throw = child.element_type == m.INTERMEDIATE_THROW_EVENT and child.event_type == m.LINK
        if is_link_throw and child.link_name and child.link_name not in catches:
            reason = f"Can't find a catch link event for the throw link event with the name '{child.link_name}'"
            yield Problem(child.id, reason)


# -- straight-through processing loops -------------------------------------------------------------------------
#
# Zeebe refuses a model in which a token could cycle forever without ever waiting: a cycle of sequence flows through
# elements that complete in the step that activates them. Its rule, followed here:
# - the elements a token passes straight through are plain and manual tasks, gateways (exclusive, inclusive,
#   parallel), start and end events, intermediate throw events, embedded sub-processes (entered at their none start
#   event, left over their outgoing flows) and call activities (entering the called process's none start event when
#   it is a static id of a process in the same resource);
# - every other element is a wait state (job tasks, receive tasks, FEEL script tasks, catch events, event-based
#   gateways …) and breaks the cycle; boundary events and event sub-processes are never followed;
# - a cycle only counts when it is reached from a plain or manual task, a call activity or an intermediate throw
#   event: a cycle of gateways alone, reached from none of them, is allowed (a condition can end it at run time,
#   and the step budget of the stream processor bounds it if none does);
# - searches start at those elements in the order of their ids; the first cycle found per process is reported.

_STRAIGHT_THROUGH: frozenset[str] = frozenset(
    {
        m.MANUAL_TASK,
        m.TASK,
        m.EXCLUSIVE_GATEWAY,
        m.INCLUSIVE_GATEWAY,
        m.PARALLEL_GATEWAY,
        m.START_EVENT,
        m.END_EVENT,
        m.SUB_PROCESS,
        m.CALL_ACTIVITY,
        m.INTERMEDIATE_THROW_EVENT,
    }
)
_LOOP_STARTS: frozenset[str] = frozenset({m.MANUAL_TASK, m.TASK, m.CALL_ACTIVITY, m.INTERMEDIATE_THROW_EVENT})
STRAIGHT_THROUGH_LOOP: str = "Processes are not allowed to contain a straight-through processing loop: "

# A node of the search: (process id, element id); call activities lead into other processes of the resource.
_Node = tuple[str, str]


def check_straight_through_loops(processes: tuple[m.Process, ...] | list[m.Process]) -> list[Problem]:
    """One problem per process of the resource that contains a straight-through processing loop.

    The problem names the process and the elements of the loop in flow order, the first one repeated at the end
    (``task1 > task2 > task1``), as Zeebe's rejection does.
    """
    by_id = {process.id: process for process in processes}
    problems = []
    for process in processes:
        safe: set[_Node] = set()  # nodes from which no loop can be reached (shared by the searches of the process)
        starts = sorted(e.id for e in process.elements.values() if e.element_type in _LOOP_STARTS)
        for start in starts:
            loop = _find_loop(by_id, (process.id, start), safe)
            if loop is not None:
                problems.append(Problem(process.id, STRAIGHT_THROUGH_LOOP + " > ".join(loop)))
                break
    return problems


def _find_loop(by_id: dict[str, m.Process], start: _Node, safe: set[_Node]) -> list[str] | None:
    """Depth-first search from ``start`` through straight-through elements; the element ids of the first cycle."""
    path: list[_Node] = []
    on_path: set[_Node] = set()
    # each frame: the node and the iterator over what comes after it
    stack: list[tuple[_Node, Iterator[_Node]]] = []

    def enter(node: _Node) -> list[str] | None:
        if node in on_path:
            cycle = [*path[path.index(node) :], node]
            return [element_id for _, element_id in cycle]
        if node in safe or not _is_straight_through(by_id, node):
            return None
        path.append(node)
        on_path.add(node)
        stack.append((node, iter(_next_nodes(by_id, node))))
        return None

    found = enter(start)
    while found is None and stack:
        node, following = stack[-1]
        nxt = next(following, None)
        if nxt is None:
            stack.pop()
            path.pop()
            on_path.discard(node)
            safe.add(node)
            continue
        found = enter(nxt)
    return found


def _is_straight_through(by_id: dict[str, m.Process], node: _Node) -> bool:
    process = by_id.get(node[0])
    element = process.elements.get(node[1]) if process is not None else None
    return element is not None and element.element_type in _STRAIGHT_THROUGH


def _next_nodes(by_id: dict[str, m.Process], node: _Node) -> list[_Node]:
    """Where a token goes after passing ``node`` straight through."""
    process = by_id[node[0]]
    element = process.elements[node[1]]
    if element.element_type == m.SUB_PROCESS:
        start = process.none_start_event_of(element.id)
        return [(process.id, start.id)] if start is not None else []
    if element.element_type == m.CALL_ACTIVITY:
        called_id = element.called_element.process_id if element.called_element is not None else ""
        called = by_id.get(called_id) if not called_id.startswith("=") else None
        if called is None or called.none_start_event_id is None:
            return []
        return [(called.id, called.none_start_event_id)]
    outgoing = element.outgoing
    if not outgoing:
        # the end of a sub-process: the token continues after it
        scope = process.elements.get(element.flow_scope_id)
        outgoing = scope.outgoing if scope is not None else ()
    targets = (process.flows[f].target_id for f in outgoing if f in process.flows)
    return [(process.id, target) for target in targets]
