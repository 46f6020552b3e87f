"""The immutable process model the engine walks.

A deployed BPMN resource becomes one :class:`Process` per executable process. Everything here is
frozen: processors share one model between many instances and partitions, so nothing may mutate it.
Attribute values are kept as written in the XML: a value starting with ``=`` is a FEEL expression,
anything else a static value. The engine decides how to evaluate them.

Element and event type names follow Zeebe's ``BpmnElementType`` / ``BpmnEventType`` so that records
and exporters speak the same vocabulary as Zeebe's.
"""

from __future__ import annotations

import collections.abc as cabc
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, TypeVar

# --- element and event types -------------------------------------------------------------------

PROCESS: Final = "PROCESS"
START_EVENT: Final = "START_EVENT"
END_EVENT: Final = "END_EVENT"
SERVICE_TASK: Final = "SERVICE_TASK"
USER_TASK: Final = "USER_TASK"
SEND_TASK: Final = "SEND_TASK"
SCRIPT_TASK: Final = "SCRIPT_TASK"
BUSINESS_RULE_TASK: Final = "BUSINESS_RULE_TASK"
MANUAL_TASK: Final = "MANUAL_TASK"
TASK: Final = "TASK"
RECEIVE_TASK: Final = "RECEIVE_TASK"
EXCLUSIVE_GATEWAY: Final = "EXCLUSIVE_GATEWAY"
PARALLEL_GATEWAY: Final = "PARALLEL_GATEWAY"
INCLUSIVE_GATEWAY: Final = "INCLUSIVE_GATEWAY"
EVENT_BASED_GATEWAY: Final = "EVENT_BASED_GATEWAY"
INTERMEDIATE_CATCH_EVENT: Final = "INTERMEDIATE_CATCH_EVENT"
INTERMEDIATE_THROW_EVENT: Final = "INTERMEDIATE_THROW_EVENT"
BOUNDARY_EVENT: Final = "BOUNDARY_EVENT"
SUB_PROCESS: Final = "SUB_PROCESS"
EVENT_SUB_PROCESS: Final = "EVENT_SUB_PROCESS"
AD_HOC_SUB_PROCESS: Final = "AD_HOC_SUB_PROCESS"
# The scope an ad-hoc sub-process creates around each element it activates (its inner elements live in it).
AD_HOC_SUB_PROCESS_INNER_INSTANCE: Final = "AD_HOC_SUB_PROCESS_INNER_INSTANCE"
CALL_ACTIVITY: Final = "CALL_ACTIVITY"
MULTI_INSTANCE_BODY: Final = "MULTI_INSTANCE_BODY"

ELEMENT_TYPES: Final = frozenset(
    {
        PROCESS,
        START_EVENT,
        END_EVENT,
        SERVICE_TASK,
        USER_TASK,
        SEND_TASK,
        SCRIPT_TASK,
        BUSINESS_RULE_TASK,
        MANUAL_TASK,
        TASK,
        RECEIVE_TASK,
        EXCLUSIVE_GATEWAY,
        PARALLEL_GATEWAY,
        INCLUSIVE_GATEWAY,
        EVENT_BASED_GATEWAY,
        INTERMEDIATE_CATCH_EVENT,
        INTERMEDIATE_THROW_EVENT,
        BOUNDARY_EVENT,
        SUB_PROCESS,
        EVENT_SUB_PROCESS,
        AD_HOC_SUB_PROCESS,
        AD_HOC_SUB_PROCESS_INNER_INSTANCE,
        CALL_ACTIVITY,
        MULTI_INSTANCE_BODY,
    }
)

UNSPECIFIED: Final = "UNSPECIFIED"
NONE: Final = "NONE"
ERROR: Final = "ERROR"
MESSAGE: Final = "MESSAGE"
TIMER: Final = "TIMER"
SIGNAL: Final = "SIGNAL"
ESCALATION: Final = "ESCALATION"
TERMINATE: Final = "TERMINATE"
LINK: Final = "LINK"
COMPENSATION: Final = "COMPENSATION"
CONDITIONAL: Final = "CONDITIONAL"

EVENT_TYPES: Final = frozenset(
    {UNSPECIFIED, NONE, ERROR, MESSAGE, TIMER, SIGNAL, ESCALATION, TERMINATE, LINK, COMPENSATION, CONDITIONAL}
)

EVENT_ELEMENT_TYPES: Final = frozenset(
    {START_EVENT, END_EVENT, INTERMEDIATE_CATCH_EVENT, INTERMEDIATE_THROW_EVENT, BOUNDARY_EVENT}
)
GATEWAY_ELEMENT_TYPES: Final = frozenset({EXCLUSIVE_GATEWAY, PARALLEL_GATEWAY, INCLUSIVE_GATEWAY, EVENT_BASED_GATEWAY})
SCOPE_ELEMENT_TYPES: Final = frozenset(
    {SUB_PROCESS, EVENT_SUB_PROCESS, AD_HOC_SUB_PROCESS, AD_HOC_SUB_PROCESS_INNER_INSTANCE}
)
# The id of an ad-hoc sub-process's inner instance element: the sub-process's id and this (as in Zeebe).
AD_HOC_INNER_INSTANCE_SUFFIX: Final = "#innerInstance"
# Inner elements of an ad-hoc sub-process its collection may not name: they start through an event or end a path.
_NOT_ACTIVATABLE_IN_AD_HOC: Final = frozenset({START_EVENT, BOUNDARY_EVENT, END_EVENT, EVENT_SUB_PROCESS})

# The job type Zeebe gives user tasks that are implemented by job workers (Tasklist's worker).
USER_TASK_JOB_TYPE: Final = "io.camunda.zeebe:userTask"
# Headers Zeebe puts on jobs of job-worker user tasks (static values at deployment, FEEL values at activation).
USER_TASK_HEADER_ASSIGNEE: Final = "io.camunda.zeebe:assignee"
USER_TASK_HEADER_CANDIDATE_GROUPS: Final = "io.camunda.zeebe:candidateGroups"
USER_TASK_HEADER_CANDIDATE_USERS: Final = "io.camunda.zeebe:candidateUsers"
USER_TASK_HEADER_DUE_DATE: Final = "io.camunda.zeebe:dueDate"
USER_TASK_HEADER_FOLLOW_UP_DATE: Final = "io.camunda.zeebe:followUpDate"
USER_TASK_HEADER_FORM_KEY: Final = "io.camunda.zeebe:formKey"
DEFAULT_JOB_RETRIES: Final = "3"
# The moments a ``zeebe:executionListener`` runs at (its ``eventType``).
LISTENER_START: Final = "start"
LISTENER_END: Final = "end"


_K = TypeVar("_K")
_V = TypeVar("_V")


def _frozen_mapping(items: cabc.Mapping[_K, _V] | None = None) -> cabc.Mapping[_K, _V]:
    """A read-only view over a private copy, so callers cannot mutate the model through it."""
    return MappingProxyType(dict(items or {}))


# --- parts of elements ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VariableMapping:
    """One ``zeebe:input`` / ``zeebe:output``: ``source`` as written (``=`` kept), ``target`` a path."""

    source: str
    target: str


# The name the engine's design uses for a variable mapping; ``VariableMapping`` avoids shadowing
# ``collections.abc.Mapping`` where both are needed.
Mapping = VariableMapping


@dataclass(frozen=True, slots=True)
class JobDefinition:
    """What a job created for the element looks like: ``type`` and ``retries`` may be FEEL expressions.

    ``headers`` are the static custom headers handed to workers, in document order.
    """

    type: str
    retries: str = DEFAULT_JOB_RETRIES
    headers: tuple[tuple[str, str], ...] = ()


TASK_LISTENER_EVENT_TYPES: Final = ("creating", "assigning", "updating", "completing", "canceling")
"""The event types of task listeners, in Zeebe 8.8's names."""

# Names of earlier Zeebe releases, still read: each means the 8.8 event type it maps to.
TASK_LISTENER_EVENT_ALIASES: Final = {
    "create": "creating",
    "assignment": "assigning",
    "update": "updating",
    "complete": "completing",
    "cancel": "canceling",
}


@dataclass(frozen=True, slots=True)
class TaskListener:
    """A ``zeebe:taskListener``: a job of ``type`` run (and awaited) when the user task enters ``event_type``.

    ``type`` and ``retries`` may be FEEL expressions, like a task definition's.
    """

    event_type: str
    type: str
    retries: str = DEFAULT_JOB_RETRIES


@dataclass(frozen=True, slots=True)
class ExecutionListener:
    """One ``zeebe:executionListener``: a job of ``type`` (with ``retries``; both may be FEEL expressions) that a
    worker completes before the element's own behaviour (``start``) or before it leaves (``end``)."""

    event_type: str
    type: str
    retries: str = DEFAULT_JOB_RETRIES


@dataclass(frozen=True, slots=True)
class UserTaskDefinition:
    """Assignment, schedule and form of a user task, kept as written.

    - For job-worker user tasks, static values are already in the job's headers (as Zeebe sets
      them); values that are FEEL expressions are evaluated by the engine when the job is created
      and added under the same header names.
    - ``native`` is True for ``zeebe:userTask`` (Camunda user tasks), which are not jobs.
    """

    native: bool = False
    assignee: str | None = None
    candidate_groups: str | None = None
    candidate_users: str | None = None
    due_date: str | None = None
    follow_up_date: str | None = None
    form_key: str | None = None
    form_id: str | None = None
    external_reference: str | None = None
    priority: str | None = None
    listeners: tuple[TaskListener, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ErrorDefinition:
    """A BPMN error. ``error_code`` None means catch-all (catch events); on throws it may be FEEL."""

    error_code: str | None
    error_id: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class MessageDefinition:
    """A BPMN message: ``name`` and ``correlation_key`` may be FEEL expressions."""

    name: str
    correlation_key: str | None = None
    message_id: str | None = None


TimerKind = Literal["duration", "date", "cycle"]


@dataclass(frozen=True, slots=True)
class TimerDefinition:
    """A timer: ISO 8601 duration/date/repeating interval or cron, or a FEEL expression yielding one."""

    kind: TimerKind
    expression: str


BINDING_LATEST: Final = "latest"
BINDING_DEPLOYMENT: Final = "deployment"
BINDING_VERSION_TAG: Final = "versionTag"
BINDING_TYPES: Final = frozenset({BINDING_LATEST, BINDING_DEPLOYMENT, BINDING_VERSION_TAG})


@dataclass(frozen=True, slots=True)
class CalledElement:
    """The target of a call activity; ``process_id`` may be a FEEL expression.

    - ``binding_type``: which version is called: ``latest`` (the default), ``deployment`` (the one deployed together
      with the calling process) or ``versionTag`` (the latest one carrying ``version_tag``).
    """

    process_id: str
    propagate_all_child_variables: bool = True
    propagate_all_parent_variables: bool = True
    binding_type: str = BINDING_LATEST
    version_tag: str | None = None


@dataclass(frozen=True, slots=True)
class MultiInstance:
    """Multi-instance loop characteristics (the element is wrapped in a MULTI_INSTANCE_BODY)."""

    is_sequential: bool
    input_collection: str
    input_element: str | None = None
    output_collection: str | None = None
    output_element: str | None = None
    completion_condition: str | None = None


@dataclass(frozen=True, slots=True)
class AdHoc:
    """What an ad-hoc sub-process activates and when it completes (``zeebe:adHoc`` and the BPMN attributes).

    - ``active_elements_collection``: FEEL, a list of the ids of inner elements to activate on entering (None: none).
    - ``completion_condition``: FEEL, evaluated in the sub-process each time an inner path ends (None: the
      sub-process completes once nothing inside is active).
    - ``cancel_remaining_instances``: when the condition holds, terminate what still runs inside (else wait for it).
    - ``output_collection`` / ``output_element``: the local list each ended inner path appends ``output_element`` to
      (evaluated where the path ended); it reaches the flow scope when the sub-process completes.
    """

    active_elements_collection: str | None = None
    completion_condition: str | None = None
    cancel_remaining_instances: bool = True
    output_collection: str | None = None
    output_element: str | None = None


@dataclass(frozen=True, slots=True)
class ScriptDefinition:
    """A script task evaluated by the engine itself (``zeebe:script``): a FEEL expression and a result."""

    expression: str
    result_variable: str


@dataclass(frozen=True, slots=True)
class CalledDecision:
    """A business rule task evaluated by the engine itself (``zeebe:calledDecision``).

    - ``binding_type``: which version is evaluated: ``latest`` (the default), ``deployment`` (the one deployed
      together with the process) or ``versionTag`` (the latest one carrying ``version_tag``).
    """

    decision_id: str
    result_variable: str
    binding_type: str = BINDING_LATEST
    version_tag: str | None = None


# --- elements ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SequenceFlow:
    """A sequence flow; ``condition`` is the stripped ``conditionExpression`` text (``=`` kept)."""

    id: str
    source_id: str
    target_id: str
    condition: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Element:
    """One flow node (task, event, gateway, sub-process …) with everything the engine needs to run it.

    - ``flow_scope_id``: the enclosing process or (event) sub-process; for the elements inside an ad-hoc
      sub-process, its inner instance element (``<id>#innerInstance``, which the parser adds; the event
      sub-processes of an ad-hoc sub-process are its own children).
    - ``incoming`` / ``outgoing``: sequence flow ids, in document order.
    - Only the fields relevant to the element's type are set; the others keep their empty default.
    - Compensation: ``is_for_compensation`` marks a compensation handler (an activity outside the normal flow);
      ``compensation_handler_id`` is the handler a compensation boundary event is associated with;
      ``activity_ref`` the one activity a compensation throw or end event compensates (None: all of its scope).
    """

    id: str
    element_type: str
    flow_scope_id: str
    name: str | None = None
    event_type: str = UNSPECIFIED
    incoming: tuple[str, ...] = ()
    outgoing: tuple[str, ...] = ()
    default_flow_id: str | None = None
    input_mappings: tuple[VariableMapping, ...] = ()
    output_mappings: tuple[VariableMapping, ...] = ()
    job: JobDefinition | None = None
    user_task: UserTaskDefinition | None = None
    script: ScriptDefinition | None = None
    called_decision: CalledDecision | None = None
    attached_to_id: str | None = None
    cancel_activity: bool = True
    boundary_event_ids: tuple[str, ...] = ()
    error: ErrorDefinition | None = None
    message: MessageDefinition | None = None
    timer: TimerDefinition | None = None
    signal_name: str | None = None
    escalation_code: str | None = None
    link_name: str | None = None
    condition: str | None = None
    called_element: CalledElement | None = None
    multi_instance: MultiInstance | None = None
    ad_hoc: AdHoc | None = None
    is_interrupting: bool = True
    triggered_by_event: bool = False
    is_for_compensation: bool = False
    compensation_handler_id: str | None = None
    activity_ref: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    # ``zeebe:executionListeners`` by event type, each in document order (the order they run in).
    start_listeners: tuple[ExecutionListener, ...] = ()
    end_listeners: tuple[ExecutionListener, ...] = ()

    @property
    def is_join(self) -> bool:
        """A parallel or inclusive gateway with several incoming flows: tokens wait there until it may activate."""
        return self.element_type in (PARALLEL_GATEWAY, INCLUSIVE_GATEWAY) and len(self.incoming) > 1

    @property
    def interrupts(self) -> bool:
        """Whether this event ends what it interrupts when it fires: a boundary event's ``cancelActivity`` or an
        event sub-process start event's ``isInterrupting`` (each is True for every other element)."""
        return self.cancel_activity and self.is_interrupting

    @property
    def kind(self) -> str:
        """``ELEMENT_TYPE`` or ``ELEMENT_TYPE:EVENT_TYPE`` for events: the unit of engine support."""
        if self.event_type == UNSPECIFIED:
            return self.element_type
        return f"{self.element_type}:{self.event_type}"


@dataclass(frozen=True, slots=True)
class Process:
    """An executable process: every flow node (nested ones included) and sequence flow, by id.

    - ``none_start_event_id``: the process-level none start event that CreateProcessInstance uses;
      None when the process only starts through messages, timers or signals.
    - ``start_event_ids``: all process-level start events, in document order.
    - ``version_tag``: the process's ``zeebe:versionTag`` (what call activities with a ``versionTag`` binding
      look for), or None.
    - ``start_listeners`` / ``end_listeners``: the execution listeners of the process itself.
    """

    id: str
    name: str | None
    is_executable: bool
    elements: cabc.Mapping[str, Element]
    flows: cabc.Mapping[str, SequenceFlow]
    none_start_event_id: str | None
    start_event_ids: tuple[str, ...]
    version_tag: str | None = None
    _children: cabc.Mapping[str, tuple[str, ...]] = field(default_factory=_frozen_mapping, repr=False)
    _inclusive_joins: cabc.Mapping[str, tuple[str, ...]] = field(default_factory=_frozen_mapping, repr=False)
    # Whether any element compensates or is compensated: instances of other processes skip that bookkeeping.
    uses_compensation: bool = False
    start_listeners: tuple[ExecutionListener, ...] = ()
    end_listeners: tuple[ExecutionListener, ...] = ()
    # Whether the process or any element has execution listeners: instances of other processes skip the lookup.
    uses_execution_listeners: bool = False
    # What the engine derives from the model once instead of for every instance (e.g. the events each element waits
    # for, see ``lifecycle.subscription_targets``): filled on first use; the model itself never changes.
    derived: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @staticmethod
    def build(
        *,
        id: str,
        name: str | None,
        elements: cabc.Iterable[Element],
        flows: cabc.Iterable[SequenceFlow],
        is_executable: bool = True,
        version_tag: str | None = None,
        start_listeners: tuple[ExecutionListener, ...] = (),
        end_listeners: tuple[ExecutionListener, ...] = (),
    ) -> Process:
        """Assemble a process from its parts, deriving start events and the scope index."""
        element_map = {element.id: element for element in elements}
        children: dict[str, list[str]] = {}
        for element in element_map.values():
            children.setdefault(element.flow_scope_id, []).append(element.id)
        start_event_ids = tuple(
            element_id for element_id in children.get(id, []) if element_map[element_id].element_type == START_EVENT
        )
        none_starts = [s for s in start_event_ids if element_map[s].event_type == NONE]
        return Process(
            id=id,
            name=name,
            is_executable=is_executable,
            elements=_frozen_mapping(element_map),
            flows=_frozen_mapping({flow.id: flow for flow in flows}),
            none_start_event_id=none_starts[0] if len(none_starts) == 1 else None,
            start_event_ids=start_event_ids,
            version_tag=version_tag,
            _children=_frozen_mapping({scope: tuple(ids) for scope, ids in children.items()}),
            uses_compensation=any(e.event_type == COMPENSATION or e.is_for_compensation for e in element_map.values()),
            start_listeners=start_listeners,
            end_listeners=end_listeners,
            uses_execution_listeners=bool(start_listeners or end_listeners)
            or any(e.start_listeners or e.end_listeners for e in element_map.values()),
            _inclusive_joins=_frozen_mapping(
                {
                    scope: joins
                    for scope, ids in children.items()
                    if (
                        joins := tuple(
                            i
                            for i in ids
                            if element_map[i].element_type == INCLUSIVE_GATEWAY and element_map[i].is_join
                        )
                    )
                }
            ),
        )

    def element(self, element_id: str) -> Element:
        """The flow node with this id; KeyError if there is none."""
        return self.elements[element_id]

    def flow(self, flow_id: str) -> SequenceFlow:
        """The sequence flow with this id; KeyError if there is none."""
        return self.flows[flow_id]

    def children_of(self, scope_id: str) -> tuple[Element, ...]:
        """Direct children of the process or of a (event) sub-process, in document order."""
        return tuple(self.elements[element_id] for element_id in self._children.get(scope_id, ()))

    def none_start_event_of(self, scope_id: str) -> Element | None:
        """The none start event of a scope: where a process or embedded sub-process begins."""
        for child in self.children_of(scope_id):
            if child.element_type == START_EVENT and child.event_type == NONE:
                return child
        return None

    def event_sub_processes_of(self, scope_id: str) -> tuple[Element, ...]:
        """Event sub-processes directly inside a scope: their start events subscribe with the scope."""
        return tuple(c for c in self.children_of(scope_id) if c.element_type == EVENT_SUB_PROCESS)

    def event_sub_process_starts_of(self, scope_id: str) -> tuple[Element, ...]:
        """The start events of the event sub-processes directly inside a scope (one each)."""
        return tuple(
            c
            for esp in self.event_sub_processes_of(scope_id)
            for c in self.children_of(esp.id)
            if c.element_type == START_EVENT
        )

    def link_catch_event_of(self, scope_id: str, link_name: str) -> Element | None:
        """The link catch event of that name directly inside a scope (validation allows one at most), or None."""
        for child in self.children_of(scope_id):
            if (
                child.element_type == INTERMEDIATE_CATCH_EVENT
                and child.event_type == LINK
                and child.link_name == link_name
            ):
                return child
        return None

    def ad_hoc_activatable_of(self, ad_hoc_id: str) -> tuple[Element, ...]:
        """The inner elements of an ad-hoc sub-process that its collection may name: those without incoming flows
        that start on their own (not start, boundary or end events, nor event sub-processes)."""
        return tuple(
            c
            for c in self.children_of(ad_hoc_id + AD_HOC_INNER_INSTANCE_SUFFIX)
            if not c.incoming and c.element_type not in _NOT_ACTIVATABLE_IN_AD_HOC
        )

    def boundary_events_of(self, activity_id: str) -> tuple[Element, ...]:
        """Boundary events attached to an activity, in document order."""
        return tuple(self.elements[b] for b in self.elements[activity_id].boundary_event_ids)

    def compensation_boundary_of(self, activity_id: str) -> Element | None:
        """The compensation boundary event attached to an activity (it has at most one), or None."""
        return next((e for e in self.boundary_events_of(activity_id) if e.event_type == COMPENSATION), None)

    def inclusive_joins_in(self, scope_id: str) -> tuple[Element, ...]:
        """Inclusive gateways with several incoming flows directly inside a scope."""
        return tuple(self.elements[i] for i in self._inclusive_joins.get(scope_id, ()))

    def joins_in(self, scope_id: str) -> tuple[Element, ...]:
        """Parallel and inclusive joins directly inside a scope."""
        return tuple(c for c in self.children_of(scope_id) if c.is_join)

    def can_reach(self, source_id: str, target_id: str) -> bool:
        """Whether a token at ``source_id`` can arrive at ``target_id`` in the same scope: over outgoing sequence
        flows, out of boundary events and from link throw events to their catch events. The search does not go
        on past ``target_id``."""
        seen = {source_id}
        todo = [source_id]
        while todo:
            current = self.elements[todo.pop()]
            following = [self.flows[f].target_id for f in current.outgoing]
            following += current.boundary_event_ids
            if current.element_type == INTERMEDIATE_THROW_EVENT and current.event_type == LINK:
                following += [
                    c.id
                    for c in self.children_of(current.flow_scope_id)
                    if c.element_type == INTERMEDIATE_CATCH_EVENT and c.link_name == current.link_name
                ]
            for nxt in following:
                if nxt == target_id:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    def outgoing_flows(self, element_id: str) -> tuple[SequenceFlow, ...]:
        """Outgoing sequence flows of an element, in document order."""
        return tuple(self.flows[f] for f in self.elements[element_id].outgoing)

    def incoming_flows(self, element_id: str) -> tuple[SequenceFlow, ...]:
        """Incoming sequence flows of an element, in document order."""
        return tuple(self.flows[f] for f in self.elements[element_id].incoming)
