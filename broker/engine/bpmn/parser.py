"""Read a BPMN 2.0 resource into immutable :class:`Process` models, or say everything wrong with it.

The reader turns each executable process into elements and flows, noting problems as it goes
(missing extension elements, unknown references, unsupported definitions) instead of stopping at
the first one. Graph rules run afterwards on the assembled model (see :mod:`.validation`), then
FEEL expressions and engine support are checked through callbacks, so the deployer gets every
problem in one rejection.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final
from xml.etree.ElementTree import Element as XmlElement

from broker.safe_xml import DEFAULT_MAX_RESOURCE_BYTES, DEFAULT_MAX_XML_ELEMENTS, UnsafeXmlError, parse_xml

from . import model as m
from .errors import BpmnValidationError, Problem
from .validation import check_straight_through_loops, validate_process
from .xsd import schema_violations

BPMN_NS: Final = "http://www.omg.org/spec/BPMN/20100524/MODEL"
ZEEBE_NS: Final = "http://camunda.org/schema/zeebe/1.0"
DEFAULT_MAX_FLOW_ELEMENTS: Final = 10_000

_B: Final = f"{{{BPMN_NS}}}"
_Z: Final = f"{{{ZEEBE_NS}}}"

ExpressionCheck = Callable[[str], "str | None"]
SupportCheck = Callable[[m.Element], "str | None"]

_TASK_TYPES: Final = {
    "task": m.TASK,
    "serviceTask": m.SERVICE_TASK,
    "userTask": m.USER_TASK,
    "sendTask": m.SEND_TASK,
    "scriptTask": m.SCRIPT_TASK,
    "businessRuleTask": m.BUSINESS_RULE_TASK,
    "manualTask": m.MANUAL_TASK,
    "receiveTask": m.RECEIVE_TASK,
}
_GATEWAY_TYPES: Final = {
    "exclusiveGateway": m.EXCLUSIVE_GATEWAY,
    "parallelGateway": m.PARALLEL_GATEWAY,
    "inclusiveGateway": m.INCLUSIVE_GATEWAY,
    "eventBasedGateway": m.EVENT_BASED_GATEWAY,
}
_EVENT_TYPES: Final = {
    "startEvent": m.START_EVENT,
    "endEvent": m.END_EVENT,
    "intermediateCatchEvent": m.INTERMEDIATE_CATCH_EVENT,
    "intermediateThrowEvent": m.INTERMEDIATE_THROW_EVENT,
    "boundaryEvent": m.BOUNDARY_EVENT,
}
_UNSUPPORTED_FLOW_NODES: Final = frozenset(
    {
        "complexGateway",
        "transaction",
        "implicitThrowEvent",
        "choreographyTask",
        "subChoreography",
        "callChoreography",
    }
)
_EVENT_DEFINITIONS: Final = {
    "messageEventDefinition": m.MESSAGE,
    "timerEventDefinition": m.TIMER,
    "errorEventDefinition": m.ERROR,
    "signalEventDefinition": m.SIGNAL,
    "escalationEventDefinition": m.ESCALATION,
    "terminateEventDefinition": m.TERMINATE,
    "linkEventDefinition": m.LINK,
    "compensateEventDefinition": m.COMPENSATION,
    "conditionalEventDefinition": m.CONDITIONAL,
    "cancelEventDefinition": "CANCEL",
}
# Which event definitions each kind of event may carry (BPMN as Zeebe implements it).
_PROCESS_START_TRIGGERS: Final = frozenset({m.NONE, m.TIMER, m.MESSAGE, m.SIGNAL, m.CONDITIONAL})
_EVENT_SUB_PROCESS_START_TRIGGERS: Final = frozenset(
    {m.TIMER, m.MESSAGE, m.ERROR, m.SIGNAL, m.ESCALATION, m.COMPENSATION, m.CONDITIONAL}
)
_END_TRIGGERS: Final = frozenset({m.NONE, m.ERROR, m.MESSAGE, m.TERMINATE, m.SIGNAL, m.ESCALATION, m.COMPENSATION})
_CATCH_TRIGGERS: Final = frozenset({m.MESSAGE, m.TIMER, m.SIGNAL, m.LINK, m.CONDITIONAL})
_THROW_TRIGGERS: Final = frozenset({m.NONE, m.MESSAGE, m.SIGNAL, m.ESCALATION, m.LINK, m.COMPENSATION})
_BOUNDARY_TRIGGERS: Final = frozenset(
    {m.TIMER, m.MESSAGE, m.ERROR, m.SIGNAL, m.ESCALATION, m.COMPENSATION, m.CONDITIONAL}
)
_ACTIVITY_TYPES: Final = frozenset(_TASK_TYPES.values()) | {m.SUB_PROCESS, m.AD_HOC_SUB_PROCESS, m.CALL_ACTIVITY}


def resource_checksum(data: bytes) -> bytes:
    """SHA-256 of a resource's bytes: equal checksums mean an identical re-deploy."""
    return hashlib.sha256(data).digest()


@dataclass(frozen=True, slots=True)
class ExpressionSite:
    """Where a FEEL expression sits: checked after reading so all its problems are reported together.

    ``mandatory`` marks attributes that must be expressions (conditions, collections), where a
    static value is a mistake rather than a constant.
    """

    element_id: str
    attribute: str
    text: str
    mandatory: bool = False


_ExecutionListeners = tuple[m.ExecutionListener, ...]


class _TooManyFlowElements(Exception):
    """Stops reading once a resource holds more flow elements than allowed."""


def parse_bpmn(
    data: bytes,
    resource_name: str,
    *,
    check_expression: ExpressionCheck | None = None,
    supported: SupportCheck | None = None,
    max_bytes: int = DEFAULT_MAX_RESOURCE_BYTES,
    max_flow_elements: int = DEFAULT_MAX_FLOW_ELEMENTS,
    max_xml_elements: int = DEFAULT_MAX_XML_ELEMENTS,
) -> tuple[m.Process, ...]:
    """Every executable process in a BPMN resource, in document order.

    - ``check_expression`` gets each FEEL expression without its leading ``=`` and returns an
      error message or None.
    - ``supported`` gets each element and returns why the engine cannot run it, or None.
    - Raises :class:`BpmnValidationError` listing all problems when the resource is not valid.
    """
    try:
        root = parse_xml(data, max_bytes=max_bytes, max_elements=max_xml_elements)
    except UnsafeXmlError as error:
        raise BpmnValidationError(resource_name, (Problem(None, str(error)),)) from None
    if root.tag != f"{_B}definitions":
        reason = (
            f"Not a BPMN 2.0 definitions document: the root element is '{_plain_tag(root.tag)}', "
            f"expected 'definitions' in namespace '{BPMN_NS}'"
        )
        raise BpmnValidationError(resource_name, (Problem(None, reason),))

    schema_problems = [
        Problem(None, f"Does not conform to the BPMN 2.0 XML schema {violation}")
        for violation in schema_violations(data)
    ]
    reader = _DefinitionsReader(root, max_flow_elements)
    try:
        processes = reader.read()
    except _TooManyFlowElements:
        reason = f"Resource has more than {max_flow_elements} flow elements (the limit per resource)"
        raise BpmnValidationError(resource_name, (Problem(None, reason),)) from None

    problems = schema_problems + reader.problems
    for process in processes:
        problems.extend(validate_process(process))
    problems.extend(check_straight_through_loops(processes))
    problems.extend(_check_expressions(reader.expressions, check_expression))
    if supported is not None:
        for process in processes:
            for element in process.elements.values():
                unsupported = supported(element)
                if unsupported is not None:
                    problems.append(Problem(element.id, unsupported))
    if problems:
        raise BpmnValidationError(resource_name, tuple(_unique(problems)))
    return tuple(processes)


def _check_expressions(sites: list[ExpressionSite], check: ExpressionCheck | None) -> list[Problem]:
    """Static values where an expression is required, and expressions ``check`` rejects."""
    problems = []
    for site in sites:
        if site.text.startswith("="):
            message = check(site.text[1:]) if check is not None else None
        elif site.mandatory:
            message = (
                f"Expected expression but found static value '{site.text}'. "
                f"An expression must start with '=' (e.g. '={site.text}')."
            )
        else:
            continue
        if message is not None:
            problems.append(Problem(site.element_id, f"{site.attribute}: {message}"))
    return problems


def _unique(problems: list[Problem]) -> list[Problem]:
    """Problems in first-seen order without repeats (one cause can be seen by two rules)."""
    return list(dict.fromkeys(problems))


def _plain_tag(tag: str) -> str:
    return tag.rpartition("}")[2]


def _text(node: XmlElement | None) -> str | None:
    """Stripped text of a node; None when the node is missing or has no text."""
    if node is None or node.text is None:
        return None
    text = node.text.strip()
    return text or None


def _bool_attr(node: XmlElement, name: str, default: bool) -> bool:
    value = node.get(name)
    if value is None:
        return default
    return value.strip().lower() == "true"


class _DefinitionsReader:
    """Reads one ``definitions`` document; collects problems and expression sites as it goes."""

    def __init__(self, root: XmlElement, max_flow_elements: int) -> None:
        self._root = root
        self._flow_element_budget = max_flow_elements
        self.problems: list[Problem] = []
        self.expressions: list[ExpressionSite] = []
        self._errors: dict[str, XmlElement] = {}
        self._messages: dict[str, XmlElement] = {}
        self._signals: dict[str, XmlElement] = {}
        self._escalations: dict[str, XmlElement] = {}
        self._associations: list[tuple[str, str]] = []  # (sourceRef, targetRef) of the process being read

    def read(self) -> list[m.Process]:
        self._check_unique_ids()
        roots = {"error": self._errors, "message": self._messages, "signal": self._signals}
        roots["escalation"] = self._escalations
        for child in self._root:
            table = roots.get(child.tag.removeprefix(_B)) if child.tag.startswith(_B) else None
            if table is not None and child.get("id"):
                table.setdefault(child.get("id", ""), child)
        processes = []
        for child in self._root.iterfind(f"{_B}process"):
            if _bool_attr(child, "isExecutable", False):
                process = self._read_process(child)
                if process is not None:
                    processes.append(process)
        if not processes:
            self.problems.append(Problem(None, "Must contain at least one executable process"))
        return processes

    # --- document-wide ---------------------------------------------------------------------------

    def _check_unique_ids(self) -> None:
        counts = Counter(node.get("id") for node in self._root.iter() if node.get("id") is not None)
        for element_id, count in counts.items():
            if count > 1:
                reason = f"The id is used by {count} elements; ids must be unique in a resource"
                self.problems.append(Problem(element_id, reason))

    def _problem(self, element_id: str | None, reason: str) -> None:
        self.problems.append(Problem(element_id, reason))

    def _expression(self, element_id: str, attribute: str, text: str | None, *, mandatory: bool = False) -> None:
        if text is not None and (mandatory or text.startswith("=")):
            self.expressions.append(ExpressionSite(element_id, attribute, text, mandatory))

    # --- processes and scopes --------------------------------------------------------------------

    def _read_process(self, node: XmlElement) -> m.Process | None:
        process_id = node.get("id", "").strip()
        if not process_id:
            self._problem(None, "A process has no id")
            return None
        if len(process_id) > 255:
            self._problem(process_id, "Process id must be at most 255 characters long")
        elements: list[m.Element] = []
        flows: list[m.SequenceFlow] = []
        self._associations = []
        self._read_scope(node, process_id, elements, flows)
        zeebe = _ZeebeExtensions(node.find(f"{_B}extensionElements"))
        version_tag = self._read_version_tag(process_id, zeebe)
        listeners = self._read_execution_listeners(process_id, zeebe)
        return _wire(
            process_id, node.get("name"), elements, flows, self.problems, version_tag, self._associations, listeners
        )

    def _read_version_tag(self, process_id: str, zeebe: _ZeebeExtensions) -> str | None:
        tags = zeebe.all("versionTag")
        if len(tags) > 1:
            self._problem(process_id, "Must have at most one 'zeebe:versionTag' extension element")
        if not tags:
            return None
        value = tags[0].get("value", "").strip()
        if not value:
            self._problem(process_id, "zeebe:versionTag: Attribute 'value' must be present and not empty")
            return None
        return value

    def _read_scope(
        self, scope: XmlElement, scope_id: str, elements: list[m.Element], flows: list[m.SequenceFlow]
    ) -> None:
        for child in scope:
            if not isinstance(child.tag, str) or not child.tag.startswith(_B):
                continue
            local = child.tag[len(_B) :]
            if local == "sequenceFlow":
                self._spend_budget()
                flow = self._read_flow(child)
                if flow is not None:
                    flows.append(flow)
            elif local == "association":
                source, target = child.get("sourceRef", "").strip(), child.get("targetRef", "").strip()
                if source and target:
                    self._associations.append((source, target))
            elif local in _UNSUPPORTED_FLOW_NODES:
                self._spend_budget()
                self._problem(child.get("id"), f"Elements of type '{local}' are not supported")
            elif (
                local in _TASK_TYPES
                or local in _GATEWAY_TYPES
                or local in _EVENT_TYPES
                or local
                in (
                    "subProcess",
                    "adHocSubProcess",
                    "callActivity",
                )
            ):
                self._spend_budget()
                element_id = child.get("id", "").strip()
                if not element_id:
                    self._problem(None, f"A '{local}' element in '{scope_id}' has no id")
                    continue
                elements.append(self._read_flow_node(child, local, element_id, scope_id, scope))
                if local == "subProcess":
                    self._read_scope(child, element_id, elements, flows)
                elif local == "adHocSubProcess":
                    self._read_ad_hoc_scope(child, element_id, elements, flows)

    def _read_ad_hoc_scope(
        self, node: XmlElement, element_id: str, elements: list[m.Element], flows: list[m.SequenceFlow]
    ) -> None:
        """The inner elements of an ad-hoc sub-process live in its inner instance element (as in Zeebe, each
        activation runs in an instance of it); its event sub-processes stay its own children."""
        inner_id = element_id + m.AD_HOC_INNER_INSTANCE_SUFFIX
        first = len(elements)
        self._read_scope(node, element_id, elements, flows)
        for index in range(first, len(elements)):
            inner = elements[index]
            if inner.flow_scope_id == element_id and inner.element_type != m.EVENT_SUB_PROCESS:
                elements[index] = replace(inner, flow_scope_id=inner_id)
        elements.append(
            m.Element(id=inner_id, element_type=m.AD_HOC_SUB_PROCESS_INNER_INSTANCE, flow_scope_id=element_id)
        )

    def _spend_budget(self) -> None:
        self._flow_element_budget -= 1
        if self._flow_element_budget < 0:
            raise _TooManyFlowElements

    def _read_flow(self, node: XmlElement) -> m.SequenceFlow | None:
        flow_id = node.get("id", "").strip()
        if not flow_id:
            self._problem(None, "A sequence flow has no id")
            return None
        source = node.get("sourceRef", "").strip()
        target = node.get("targetRef", "").strip()
        if not source:
            self._problem(flow_id, "SequenceFlow is missing required attribute sourceRef")
        if not target:
            self._problem(flow_id, "SequenceFlow is missing required attribute targetRef")
        condition_node = node.find(f"{_B}conditionExpression")
        condition = None
        if condition_node is not None:
            condition = _text(condition_node)
            if condition is None:
                self._problem(flow_id, "conditionExpression: Expected expression but not found.")
            self._expression(flow_id, "conditionExpression", condition, mandatory=True)
        return m.SequenceFlow(flow_id, source, target, condition, node.get("name"))

    # --- flow nodes ------------------------------------------------------------------------------

    def _read_flow_node(
        self, node: XmlElement, local: str, element_id: str, scope_id: str, scope: XmlElement
    ) -> m.Element:
        extensions = node.find(f"{_B}extensionElements")
        zeebe = _ZeebeExtensions(extensions)
        fields: dict[str, object] = {
            "id": element_id,
            "flow_scope_id": scope_id,
            "name": node.get("name"),
            "properties": zeebe.properties(),
        }
        fields["input_mappings"], fields["output_mappings"] = self._read_io_mappings(element_id, zeebe)

        if local in _TASK_TYPES:
            fields["element_type"] = _TASK_TYPES[local]
            fields.update(self._read_task(node, local, element_id, zeebe))
        elif local in _GATEWAY_TYPES:
            fields["element_type"] = _GATEWAY_TYPES[local]
            default = node.get("default")
            fields["default_flow_id"] = default.strip() if default else None
        elif local in _EVENT_TYPES:
            fields["element_type"] = _EVENT_TYPES[local]
            fields.update(self._read_event(node, local, element_id, scope, zeebe))
        elif local == "subProcess":
            triggered = _bool_attr(node, "triggeredByEvent", False)
            fields["element_type"] = m.EVENT_SUB_PROCESS if triggered else m.SUB_PROCESS
            fields["triggered_by_event"] = triggered
        elif local == "adHocSubProcess":
            fields["element_type"] = m.AD_HOC_SUB_PROCESS
            fields["ad_hoc"] = self._read_ad_hoc(node, element_id, zeebe)
            # with a task definition a job worker decides what to activate and when it is done (Zeebe 8.8)
            fields["job"] = self._read_job(element_id, zeebe, required=False)
        else:  # callActivity
            fields["element_type"] = m.CALL_ACTIVITY
            fields["called_element"] = self._read_called_element(element_id, zeebe)

        listeners = self._read_execution_listeners(element_id, zeebe)
        if listeners[0] or listeners[1]:
            fields["start_listeners"], fields["end_listeners"] = self._allowed_execution_listeners(
                element_id, fields, listeners
            )
        if fields["element_type"] in _ACTIVITY_TYPES:
            fields["is_for_compensation"] = _bool_attr(node, "isForCompensation", False)
            loop = node.find(f"{_B}multiInstanceLoopCharacteristics")
            if loop is not None:
                fields["multi_instance"] = self._read_multi_instance(loop, element_id)
            elif node.find(f"{_B}standardLoopCharacteristics") is not None:
                self._problem(element_id, "Standard loop characteristics are not supported")
        return m.Element(**fields)  # type: ignore[arg-type]

    def _read_execution_listeners(
        self, element_id: str, zeebe: _ZeebeExtensions
    ) -> tuple[_ExecutionListeners, _ExecutionListeners]:
        """``zeebe:executionListeners``: the start and the end listeners, each in document order."""
        blocks = zeebe.all("executionListeners")
        if len(blocks) > 1:
            self._problem(element_id, "Must have at most one 'zeebe:executionListeners' extension element")
        start: list[m.ExecutionListener] = []
        end: list[m.ExecutionListener] = []
        for block in blocks[:1]:
            for node in block.iterfind(f"{_Z}executionListener"):
                event_type = node.get("eventType", m.LISTENER_START).strip()
                job_type = node.get("type", "").strip()
                retries = node.get("retries", m.DEFAULT_JOB_RETRIES).strip()
                if event_type not in (m.LISTENER_START, m.LISTENER_END):
                    reason = (
                        "zeebe:executionListener: Attribute 'eventType' must be one of [start, end], "
                        f"not '{event_type}'"
                    )
                    self._problem(element_id, reason)
                    continue
                if not job_type:
                    self._problem(element_id, "zeebe:executionListener: Attribute 'type' must be present and not empty")
                    continue
                if not retries:
                    reason = "zeebe:executionListener: Attribute 'retries' must be present and not empty"
                    self._problem(element_id, reason)
                    continue
                self._expression(element_id, "zeebe:executionListener type", job_type)
                self._expression(element_id, "zeebe:executionListener retries", retries)
                (start if event_type == m.LISTENER_START else end).append(
                    m.ExecutionListener(event_type, job_type, retries)
                )
        for listeners in (start, end):
            counts = Counter(listener.type for listener in listeners)
            for job_type, count in counts.items():
                if count > 1:
                    reason = (
                        f"Found '{count}' duplicates based on eventType[{listeners[0].event_type}] and "
                        f"type[{job_type}], these combinations should be unique."
                    )
                    self._problem(element_id, reason)
        return tuple(start), tuple(end)

    def _allowed_execution_listeners(
        self, element_id: str, fields: dict[str, object], listeners: tuple[_ExecutionListeners, _ExecutionListeners]
    ) -> tuple[_ExecutionListeners, _ExecutionListeners]:
        """The listeners an element kind can run, as Zeebe's validation allows them; a problem for the others."""
        start, end = listeners
        element_type, event_type = fields["element_type"], fields.get("event_type", m.UNSPECIFIED)
        reason = None
        if element_type == m.BOUNDARY_EVENT and event_type == m.COMPENSATION:
            reason = "Execution listeners of type 'start' and 'end' are not supported by [compensation] boundary events"
        elif start and element_type == m.START_EVENT:
            reason = "Execution listeners of type 'start' are not supported by start events"
        elif start and element_type == m.BOUNDARY_EVENT:
            reason = "Execution listeners of type 'start' are not supported by boundary events"
        elif end and element_type in _GATEWAY_TYPES.values():
            reason = "Execution listeners of type 'end' are not supported by gateway element"
        elif end and element_type == m.END_EVENT and event_type == m.ERROR:
            reason = "Execution listeners of type 'end' are not supported by [error] end events"
        elif end and element_type == m.INTERMEDIATE_THROW_EVENT and event_type == m.ESCALATION:
            reason = "Execution listeners of type 'end' are not supported by [escalation] intermediate throw events"
        if reason is not None:
            self._problem(element_id, reason)
        return start, end

    def _read_io_mappings(
        self, element_id: str, zeebe: _ZeebeExtensions
    ) -> tuple[tuple[m.VariableMapping, ...], tuple[m.VariableMapping, ...]]:
        io_mappings = zeebe.all("ioMapping")
        if len(io_mappings) > 1:
            self._problem(element_id, "Must have at most one 'zeebe:ioMapping' extension element")
        inputs: list[m.VariableMapping] = []
        outputs: list[m.VariableMapping] = []
        for io_mapping in io_mappings[:1]:
            for child in io_mapping:
                kind = child.tag.removeprefix(_Z)
                if kind not in ("input", "output"):
                    continue
                source = child.get("source", "")
                target = child.get("target", "").strip()
                if not target:
                    self._problem(element_id, f"zeebe:{kind}: Attribute 'target' must be present and not empty")
                    continue
                self._expression(element_id, f"zeebe:{kind} source", source)
                (inputs if kind == "input" else outputs).append(m.VariableMapping(source, target))
        return tuple(inputs), tuple(outputs)

    def _read_task(self, node: XmlElement, local: str, element_id: str, zeebe: _ZeebeExtensions) -> dict[str, object]:
        fields: dict[str, object] = {}
        if local in ("serviceTask", "sendTask"):
            fields["job"] = self._read_job(element_id, zeebe, required=True)
        elif local == "scriptTask":
            scripts = zeebe.all("script")
            if len(scripts) + len(zeebe.all("taskDefinition")) != 1:
                reason = "Must have either one 'zeebe:script' or one 'zeebe:taskDefinition' extension element"
                self._problem(element_id, reason)
            elif scripts:
                fields["script"] = self._read_script(element_id, scripts[0])
            else:
                fields["job"] = self._read_job(element_id, zeebe, required=True)
        elif local == "businessRuleTask":
            decisions = zeebe.all("calledDecision")
            if len(decisions) + len(zeebe.all("taskDefinition")) != 1:
                reason = "Must have either one 'zeebe:calledDecision' or one 'zeebe:taskDefinition' "
                reason += "extension element"
                self._problem(element_id, reason)
            elif decisions:
                fields["called_decision"] = self._read_called_decision(element_id, decisions[0])
            else:
                fields["job"] = self._read_job(element_id, zeebe, required=True)
        elif local == "userTask":
            fields.update(self._read_user_task(element_id, zeebe))
        elif local == "receiveTask":
            fields["message"] = self._read_message_ref(node, element_id, needs_correlation_key=True)
        return fields

    def _read_job(self, element_id: str, zeebe: _ZeebeExtensions, *, required: bool) -> m.JobDefinition | None:
        definitions = zeebe.all("taskDefinition")
        if len(definitions) != 1:
            if required or definitions:
                self._problem(element_id, "Must have exactly one 'zeebe:taskDefinition' extension element")
            return None
        definition = definitions[0]
        job_type = definition.get("type", "").strip()
        retries = definition.get("retries")
        if not job_type:
            self._problem(element_id, "zeebe:taskDefinition: Attribute 'type' must be present and not empty")
        if retries is not None and not retries.strip():
            self._problem(element_id, "zeebe:taskDefinition: Attribute 'retries' must be present and not empty")
        retries = retries.strip() if retries and retries.strip() else m.DEFAULT_JOB_RETRIES
        self._expression(element_id, "zeebe:taskDefinition type", job_type)
        self._expression(element_id, "zeebe:taskDefinition retries", retries)
        return m.JobDefinition(job_type, retries, self._read_headers(element_id, zeebe))

    def _read_headers(self, element_id: str, zeebe: _ZeebeExtensions) -> tuple[tuple[str, str], ...]:
        headers: list[tuple[str, str]] = []
        for task_headers in zeebe.all("taskHeaders"):
            for header in task_headers.iterfind(f"{_Z}header"):
                key = header.get("key", "")
                if not key.strip():
                    self._problem(element_id, "zeebe:header: Attribute 'key' must be present and not empty")
                    continue
                headers.append((key, header.get("value", "")))
        return tuple(headers)

    def _read_user_task(self, element_id: str, zeebe: _ZeebeExtensions) -> dict[str, object]:
        assignment = zeebe.first("assignmentDefinition")
        schedule = zeebe.first("taskSchedule")
        form = zeebe.first("formDefinition")

        def attr(node: XmlElement | None, name: str, label: str) -> str | None:
            value = node.get(name) if node is not None else None
            value = value.strip() if value is not None else None
            self._expression(element_id, label, value or None)
            return value or None

        user_task = m.UserTaskDefinition(
            native=zeebe.first("userTask") is not None,
            assignee=attr(assignment, "assignee", "zeebe:assignmentDefinition assignee"),
            candidate_groups=attr(assignment, "candidateGroups", "zeebe:assignmentDefinition candidateGroups"),
            candidate_users=attr(assignment, "candidateUsers", "zeebe:assignmentDefinition candidateUsers"),
            due_date=attr(schedule, "dueDate", "zeebe:taskSchedule dueDate"),
            follow_up_date=attr(schedule, "followUpDate", "zeebe:taskSchedule followUpDate"),
            form_key=attr(form, "formKey", "zeebe:formDefinition formKey"),
            form_id=attr(form, "formId", "zeebe:formDefinition formId"),
            external_reference=attr(form, "externalReference", "zeebe:formDefinition externalReference"),
            priority=attr(zeebe.first("priorityDefinition"), "priority", "zeebe:priorityDefinition priority"),
            listeners=self._read_task_listeners(element_id, zeebe),
            headers=self._read_headers(element_id, zeebe) if zeebe.first("userTask") is not None else (),
        )
        static_priority = user_task.priority is not None and not user_task.priority.startswith("=")
        if static_priority and not _is_priority(user_task.priority):
            reason = "zeebe:priorityDefinition: Priority must be a number between 0 and 100, but was "
            self._problem(element_id, f"{reason}'{user_task.priority}'")
        if user_task.listeners and not user_task.native:
            self._problem(element_id, "Task listeners are only supported for Camunda user tasks ('zeebe:userTask')")
        if form is not None and sum(v is not None for v in (user_task.form_key, user_task.form_id)) > 1:
            self._problem(element_id, "zeebe:formDefinition: Exactly one of 'formKey' or 'formId' must be set")
        fields: dict[str, object] = {"user_task": user_task}
        if not user_task.native:
            headers = _user_task_headers(user_task) + self._read_headers(element_id, zeebe)
            fields["job"] = m.JobDefinition(m.USER_TASK_JOB_TYPE, m.DEFAULT_JOB_RETRIES, headers)
        return fields

    def _read_task_listeners(self, element_id: str, zeebe: _ZeebeExtensions) -> tuple[m.TaskListener, ...]:
        listeners: list[m.TaskListener] = []
        for block in zeebe.all("taskListeners"):
            for node in block.iterfind(f"{_Z}taskListener"):
                written = node.get("eventType", "").strip()
                event_type = m.TASK_LISTENER_EVENT_ALIASES.get(written, written)
                job_type = node.get("type", "").strip()
                retries = (node.get("retries") or "").strip() or m.DEFAULT_JOB_RETRIES
                if event_type not in m.TASK_LISTENER_EVENT_TYPES:
                    allowed = ", ".join(f"'{t}'" for t in m.TASK_LISTENER_EVENT_TYPES)
                    self._problem(
                        element_id,
                        f"zeebe:taskListener: Attribute 'eventType' must be one of {allowed}, but was '{written}'",
                    )
                    continue
                if not job_type:
                    self._problem(element_id, "zeebe:taskListener: Attribute 'type' must be present and not empty")
                    continue
                self._expression(element_id, "zeebe:taskListener type", job_type)
                self._expression(element_id, "zeebe:taskListener retries", retries)
                listeners.append(m.TaskListener(event_type, job_type, retries))
        return tuple(listeners)

    def _read_script(self, element_id: str, script: XmlElement) -> m.ScriptDefinition | None:
        expression = script.get("expression", "").strip()
        result = script.get("resultVariable", "").strip()
        if not expression:
            self._problem(element_id, "zeebe:script: Attribute 'expression' must be present and not empty")
        if not result:
            self._problem(element_id, "zeebe:script: Attribute 'resultVariable' must be present and not empty")
        self._expression(element_id, "zeebe:script expression", expression or None, mandatory=True)
        return m.ScriptDefinition(expression, result)

    def _read_called_decision(self, element_id: str, decision: XmlElement) -> m.CalledDecision:
        decision_id = decision.get("decisionId", "").strip()
        result = decision.get("resultVariable", "").strip()
        if not decision_id:
            self._problem(element_id, "zeebe:calledDecision: Attribute 'decisionId' must be present and not empty")
        if not result:
            reason = "zeebe:calledDecision: Attribute 'resultVariable' must be present and not empty"
            self._problem(element_id, reason)
        self._expression(element_id, "zeebe:calledDecision decisionId", decision_id)
        binding = (decision.get("bindingType") or m.BINDING_LATEST).strip()
        version_tag = (decision.get("versionTag") or "").strip() or None
        if binding not in m.BINDING_TYPES:
            allowed = ", ".join(sorted(m.BINDING_TYPES))
            self._problem(element_id, f"zeebe:calledDecision: Attribute 'bindingType' must be one of {allowed}")
        elif binding == m.BINDING_VERSION_TAG and version_tag is None:
            reason = "zeebe:calledDecision: Attribute 'versionTag' must be present and not empty with bindingType"
            self._problem(element_id, reason + " 'versionTag'")
        return m.CalledDecision(decision_id, result, binding, version_tag)

    def _read_called_element(self, element_id: str, zeebe: _ZeebeExtensions) -> m.CalledElement | None:
        called = zeebe.all("calledElement")
        if len(called) != 1:
            self._problem(element_id, "Must have exactly one 'zeebe:calledElement' extension element")
            return None
        process_id = called[0].get("processId", "").strip()
        if not process_id:
            self._problem(element_id, "zeebe:calledElement: Attribute 'processId' must be present and not empty")
        self._expression(element_id, "zeebe:calledElement processId", process_id)
        binding = (called[0].get("bindingType") or m.BINDING_LATEST).strip()
        version_tag = (called[0].get("versionTag") or "").strip() or None
        if binding not in m.BINDING_TYPES:
            allowed = ", ".join(sorted(m.BINDING_TYPES))
            self._problem(element_id, f"zeebe:calledElement: Attribute 'bindingType' must be one of {allowed}")
        elif binding == m.BINDING_VERSION_TAG and version_tag is None:
            reason = "zeebe:calledElement: Attribute 'versionTag' must be present and not empty with bindingType"
            self._problem(element_id, reason + " 'versionTag'")
        return m.CalledElement(
            process_id,
            _bool_attr(called[0], "propagateAllChildVariables", True),
            _bool_attr(called[0], "propagateAllParentVariables", True),
            binding,
            version_tag,
        )

    def _read_ad_hoc(self, node: XmlElement, element_id: str, zeebe: _ZeebeExtensions) -> m.AdHoc:
        """``zeebe:adHoc`` and the completion attributes of an ad-hoc sub-process (``ordering`` is not read: as in
        Zeebe, the elements named by the collection all start at once)."""
        ad_hocs = zeebe.all("adHoc")
        if len(ad_hocs) > 1:
            self._problem(element_id, "Must have at most one 'zeebe:adHoc' extension element")
        ad_hoc = ad_hocs[0] if ad_hocs else None

        def attr(name: str) -> str | None:
            value = ad_hoc.get(name, "").strip() if ad_hoc is not None else ""
            return value or None

        collection, output_collection, output_element = (
            attr("activeElementsCollection"),
            attr("outputCollection"),
            attr("outputElement"),
        )
        if output_collection and not output_element:
            reason = "Attribute 'outputElement' must be present if the attribute 'outputCollection' is set"
            self._problem(element_id, reason)
        if output_element and not output_collection:
            reason = "Attribute 'outputCollection' must be present if the attribute 'outputElement' is set"
            self._problem(element_id, reason)
        completion = _text(node.find(f"{_B}completionCondition"))
        self._expression(element_id, "zeebe:adHoc activeElementsCollection", collection, mandatory=True)
        self._expression(element_id, "zeebe:adHoc outputElement", output_element, mandatory=True)
        self._expression(element_id, "completionCondition", completion, mandatory=True)
        return m.AdHoc(
            active_elements_collection=collection,
            completion_condition=completion,
            cancel_remaining_instances=_bool_attr(node, "cancelRemainingInstances", True),
            output_collection=output_collection,
            output_element=output_element,
        )

    def _read_multi_instance(self, loop: XmlElement, element_id: str) -> m.MultiInstance | None:
        zeebe = _ZeebeExtensions(loop.find(f"{_B}extensionElements"))
        characteristics = zeebe.all("loopCharacteristics")
        completion = _text(loop.find(f"{_B}completionCondition"))
        self._expression(element_id, "completionCondition", completion, mandatory=True)
        if len(characteristics) != 1:
            self._problem(element_id, "Must have exactly one 'zeebe:loopCharacteristics' extension element")
            return None
        node = characteristics[0]

        def attr(name: str) -> str | None:
            value = node.get(name, "").strip()
            return value or None

        input_collection = attr("inputCollection")
        output_collection, output_element = attr("outputCollection"), attr("outputElement")
        if input_collection is None:
            self._problem(element_id, "Attribute 'inputCollection' must be present and not empty")
        if output_collection and not output_element:
            reason = "Attribute 'outputElement' must be present if the attribute 'outputCollection' is set"
            self._problem(element_id, reason)
        if output_element and not output_collection:
            reason = "Attribute 'outputCollection' must be present if the attribute 'outputElement' is set"
            self._problem(element_id, reason)
        self._expression(element_id, "zeebe:loopCharacteristics inputCollection", input_collection, mandatory=True)
        self._expression(element_id, "zeebe:loopCharacteristics outputElement", output_element)
        return m.MultiInstance(
            is_sequential=_bool_attr(loop, "isSequential", False),
            input_collection=input_collection or "",
            input_element=attr("inputElement"),
            output_collection=output_collection,
            output_element=output_element,
            completion_condition=completion,
        )

    # --- events ----------------------------------------------------------------------------------

    def _read_event(
        self, node: XmlElement, local: str, element_id: str, scope: XmlElement, zeebe: _ZeebeExtensions
    ) -> dict[str, object]:
        definitions = [
            (_EVENT_DEFINITIONS[child.tag[len(_B) :]], child)
            for child in node
            if child.tag.startswith(_B) and child.tag[len(_B) :] in _EVENT_DEFINITIONS
        ]
        allowed, label, exactly_one = self._event_rules(local, scope)
        if exactly_one and len(definitions) != 1:
            self._problem(element_id, "Must have exactly one event definition")
        elif len(definitions) > 1:
            self._problem(element_id, "Must have at most one event definition")
        event_type = definitions[0][0] if definitions else m.NONE
        if event_type not in allowed:
            self._problem(element_id, f"{label} must be one of: {_describe(allowed)}")

        fields: dict[str, object] = {"event_type": event_type if event_type in m.EVENT_TYPES else m.UNSPECIFIED}
        if local == "boundaryEvent":
            attached = node.get("attachedToRef", "").strip()
            fields["attached_to_id"] = attached or None
            fields["cancel_activity"] = _bool_attr(node, "cancelActivity", True)
        if local == "startEvent":
            fields["is_interrupting"] = _bool_attr(node, "isInterrupting", True)
        if not definitions:
            return fields
        definition = definitions[0][1]
        is_throw = local in ("endEvent", "intermediateThrowEvent")
        in_event_sub_process = scope.tag == f"{_B}subProcess" and _bool_attr(scope, "triggeredByEvent", False)

        if event_type == m.ERROR:
            fields["error"] = self._read_error(definition, element_id, is_throw)
        elif event_type == m.MESSAGE:
            if is_throw:
                fields["job"] = self._read_job(element_id, zeebe, required=True)
                if definition.get("messageRef"):
                    fields["message"] = self._read_message_ref(definition, element_id, needs_correlation_key=False)
            else:
                needs_key = local != "startEvent" or in_event_sub_process
                fields["message"] = self._read_message_ref(definition, element_id, needs_correlation_key=needs_key)
        elif event_type == m.TIMER:
            fields["timer"] = self._read_timer(definition, element_id, local, node, in_event_sub_process)
        elif event_type == m.SIGNAL:
            fields["signal_name"] = self._read_named_ref(
                definition, element_id, "signalRef", self._signals, "signal", "name"
            )
        elif event_type == m.ESCALATION:
            fields["escalation_code"] = self._read_escalation(definition, element_id, is_throw)
        elif event_type == m.LINK:
            link_name = definition.get("name", "").strip()
            if not link_name:
                self._problem(element_id, "Link events must have a name")
            fields["link_name"] = link_name or None
        elif event_type == m.COMPENSATION and is_throw:
            fields["activity_ref"] = definition.get("activityRef", "").strip() or None
            if not _bool_attr(definition, "waitForCompletion", True):
                noun = "end event" if local == "endEvent" else "intermediate throwing event"
                reason = f"A compensation {noun} waitForCompletion attribute must be true or not present"
                self._problem(element_id, reason)
        elif event_type == m.CONDITIONAL:
            condition = _text(definition.find(f"{_B}condition"))
            if condition is None:
                self._problem(element_id, "condition: Expected expression but not found.")
            self._expression(element_id, "condition", condition, mandatory=True)
            fields["condition"] = condition
        return fields

    @staticmethod
    def _event_rules(local: str, scope: XmlElement) -> tuple[frozenset[str], str, bool]:
        """The event definitions an event may have here, how to name it, and whether one is required."""
        if local == "startEvent":
            if scope.tag == f"{_B}subProcess":
                if _bool_attr(scope, "triggeredByEvent", False):
                    return _EVENT_SUB_PROCESS_START_TRIGGERS, "Start events in event sub-processes", True
                return frozenset({m.NONE}), "Start events in sub-processes", False
            return _PROCESS_START_TRIGGERS, "Start events", False
        if local == "endEvent":
            return _END_TRIGGERS, "End events", False
        if local == "intermediateCatchEvent":
            return _CATCH_TRIGGERS, "Intermediate catch events", True
        if local == "intermediateThrowEvent":
            return _THROW_TRIGGERS, "Intermediate throw events", False
        return _BOUNDARY_TRIGGERS, "Boundary events", True

    def _read_error(self, definition: XmlElement, element_id: str, is_throw: bool) -> m.ErrorDefinition | None:
        ref = definition.get("errorRef", "").strip()
        if not ref:
            if is_throw:
                self._problem(element_id, "Must reference an error")
                return None
            return m.ErrorDefinition(error_code=None)
        error = self._errors.get(ref)
        if error is None:
            self._problem(element_id, f"Referenced error '{ref}' is not defined")
            return None
        code = error.get("errorCode", "").strip() or None
        if is_throw:
            if code is None:
                self._problem(element_id, "ErrorCode must be present and not empty")
            self._expression(element_id, "errorCode", code)
        elif code is not None and code.startswith("="):
            self._problem(element_id, "The errorCode of the error catch event is not allowed to be an expression")
        return m.ErrorDefinition(code, ref, error.get("name"))

    def _read_escalation(self, definition: XmlElement, element_id: str, is_throw: bool) -> str | None:
        ref = definition.get("escalationRef", "").strip()
        if not ref:
            if is_throw:
                self._problem(element_id, "Must reference an escalation")
            return None
        escalation = self._escalations.get(ref)
        if escalation is None:
            self._problem(element_id, f"Referenced escalation '{ref}' is not defined")
            return None
        code = escalation.get("escalationCode", "").strip() or None
        if is_throw:
            if code is None:
                self._problem(element_id, "EscalationCode must be present and not empty")
            self._expression(element_id, "escalationCode", code)
        elif code is not None and code.startswith("="):
            reason = "The escalationCode of the escalation catch event is not allowed to be an expression"
            self._problem(element_id, reason)
        return code

    def _read_named_ref(
        self,
        definition: XmlElement,
        element_id: str,
        ref_attribute: str,
        table: dict[str, XmlElement],
        noun: str,
        name_attribute: str,
    ) -> str | None:
        ref = definition.get(ref_attribute, "").strip()
        if not ref:
            self._problem(element_id, f"Must reference a {noun}")
            return None
        target = table.get(ref)
        if target is None:
            self._problem(element_id, f"Referenced {noun} '{ref}' is not defined")
            return None
        name = target.get(name_attribute, "").strip()
        if not name:
            self._problem(element_id, f"Referenced {noun} '{ref}' must have a name")
            return None
        self._expression(element_id, f"{noun} name", name)
        return name

    def _read_message_ref(
        self, node: XmlElement, element_id: str, *, needs_correlation_key: bool
    ) -> m.MessageDefinition | None:
        name = self._read_named_ref(node, element_id, "messageRef", self._messages, "message", "name")
        if name is None:
            return None
        message = self._messages[node.get("messageRef", "").strip()]
        subscription = _ZeebeExtensions(message.find(f"{_B}extensionElements")).first("subscription")
        key = subscription.get("correlationKey", "").strip() if subscription is not None else ""
        if needs_correlation_key and not key:
            reason = "Must have exactly one 'zeebe:subscription' with a non-empty 'correlationKey' attribute"
            self._problem(element_id, reason)
        self._expression(element_id, "zeebe:subscription correlationKey", key or None)
        return m.MessageDefinition(name, key or None, message.get("id"))

    def _read_timer(
        self,
        definition: XmlElement,
        element_id: str,
        local: str,
        node: XmlElement,
        in_event_sub_process: bool,
    ) -> m.TimerDefinition | None:
        present: list[tuple[m.TimerKind, str | None]] = []
        for tag, kind in (("timeDuration", "duration"), ("timeDate", "date"), ("timeCycle", "cycle")):
            child = definition.find(f"{_B}{tag}")
            if child is not None:
                present.append((kind, _text(child)))  # type: ignore[arg-type]
        if len(present) != 1:
            self._problem(element_id, "Timer must have exactly one of: timeDuration, timeDate, timeCycle")
            return None
        kind, expression = present[0]
        if expression is None:
            self._problem(element_id, f"Timer {kind} must not be empty")
            return None
        allowed: frozenset[str]
        if local == "startEvent":
            allowed = frozenset({"date", "cycle", "duration"}) if in_event_sub_process else frozenset({"date", "cycle"})
        elif local == "boundaryEvent" and not _bool_attr(node, "cancelActivity", True):
            allowed = frozenset({"duration", "date", "cycle"})
        else:
            allowed = frozenset({"duration", "date"})
        if kind not in allowed:
            self._problem(element_id, f"Timer {kind} is not allowed here; use one of: {', '.join(sorted(allowed))}")
        elif not expression.startswith("="):
            # A static value never changes: refuse it now rather than raise an incident at every activation.
            from broker.engine import timers

            try:
                if kind == "duration":
                    timers.parse_interval(expression)
                elif kind == "date":
                    timers.parse_date(expression)
                else:
                    timers.parse_cycle(expression, 0)
            except timers.TimerError as e:
                self._problem(element_id, str(e))
            except (OverflowError, ValueError) as e:
                self._problem(element_id, f"Invalid timer {kind} '{expression}': {e}")
        self._expression(element_id, f"timer {kind}", expression)
        return m.TimerDefinition(kind, expression)


class _ZeebeExtensions:
    """The ``zeebe:*`` children of an ``extensionElements`` block, by local name."""

    def __init__(self, extensions: XmlElement | None) -> None:
        self._by_name: dict[str, list[XmlElement]] = {}
        if extensions is not None:
            for child in extensions:
                if isinstance(child.tag, str) and child.tag.startswith(_Z):
                    self._by_name.setdefault(child.tag[len(_Z) :], []).append(child)

    def all(self, name: str) -> list[XmlElement]:
        return self._by_name.get(name, [])

    def first(self, name: str) -> XmlElement | None:
        found = self._by_name.get(name)
        return found[0] if found else None

    def properties(self) -> tuple[tuple[str, str], ...]:
        return tuple(
            (prop.get("name", ""), prop.get("value", ""))
            for block in self.all("properties")
            for prop in block.iterfind(f"{_Z}property")
        )


def _is_priority(text: str | None) -> bool:
    return text is not None and text.lstrip("-").isdigit() and 0 <= int(text) <= 100


def _user_task_headers(user_task: m.UserTaskDefinition) -> tuple[tuple[str, str], ...]:
    """The headers Zeebe puts on a job-worker user task's job for static (non-FEEL) values."""

    def static(value: str | None) -> str | None:
        return value if value is not None and not value.startswith("=") else None

    def static_list(value: str | None) -> str | None:
        if static(value) is None:
            return None
        assert value is not None
        items = [item.strip() for item in value.split(",") if item.strip()]
        return json.dumps(items, separators=(",", ":"))

    candidates = (
        (m.USER_TASK_HEADER_FORM_KEY, static(user_task.form_key)),
        (m.USER_TASK_HEADER_ASSIGNEE, static(user_task.assignee)),
        (m.USER_TASK_HEADER_CANDIDATE_GROUPS, static_list(user_task.candidate_groups)),
        (m.USER_TASK_HEADER_CANDIDATE_USERS, static_list(user_task.candidate_users)),
        (m.USER_TASK_HEADER_DUE_DATE, static(user_task.due_date)),
        (m.USER_TASK_HEADER_FOLLOW_UP_DATE, static(user_task.follow_up_date)),
    )
    return tuple((key, value) for key, value in candidates if value is not None)


def _describe(allowed: frozenset[str]) -> str:
    order = [m.NONE, m.TIMER, m.MESSAGE, m.ERROR, m.SIGNAL, m.ESCALATION, m.TERMINATE, m.LINK]
    order += [m.COMPENSATION, m.CONDITIONAL]
    return ", ".join(kind.lower() for kind in order if kind in allowed)


def _wire(
    process_id: str,
    name: str | None,
    elements: list[m.Element],
    flows: list[m.SequenceFlow],
    problems: list[Problem],
    version_tag: str | None = None,
    associations: list[tuple[str, str]] | None = None,
    listeners: tuple[_ExecutionListeners, _ExecutionListeners] = ((), ()),
) -> m.Process:
    """Connect flows and boundary events to the elements they belong to, and compensation boundary events to the
    handlers they are associated with (in either direction); note dangling references."""
    by_id: dict[str, m.Element] = {}
    for element in elements:
        by_id.setdefault(element.id, element)
    incoming: dict[str, list[str]] = {}
    outgoing: dict[str, list[str]] = {}
    for flow in flows:
        if flow.source_id and flow.source_id not in by_id:
            problems.append(Problem(flow.id, f"SequenceFlow has sourceRef '{flow.source_id}' which cannot be resolved"))
        elif flow.source_id:
            outgoing.setdefault(flow.source_id, []).append(flow.id)
        if flow.target_id and flow.target_id not in by_id:
            problems.append(Problem(flow.id, f"SequenceFlow has targetRef '{flow.target_id}' which cannot be resolved"))
        elif flow.target_id:
            incoming.setdefault(flow.target_id, []).append(flow.id)
    handlers: dict[str, str] = {}
    for source, target in associations or ():
        for boundary_id, handler_id in ((source, target), (target, source)):
            boundary = by_id.get(boundary_id)
            if boundary is not None and boundary.kind == f"{m.BOUNDARY_EVENT}:{m.COMPENSATION}" and handler_id in by_id:
                handlers.setdefault(boundary_id, handler_id)
    boundaries: dict[str, list[str]] = {}
    for element in by_id.values():
        if element.attached_to_id is not None:
            boundaries.setdefault(element.attached_to_id, []).append(element.id)
    wired = [
        replace(
            element,
            incoming=tuple(incoming.get(element.id, ())),
            outgoing=tuple(outgoing.get(element.id, ())),
            boundary_event_ids=tuple(boundaries.get(element.id, ())),
            compensation_handler_id=handlers.get(element.id),
        )
        for element in by_id.values()
    ]
    return m.Process.build(
        id=process_id,
        name=name,
        elements=wired,
        flows=flows,
        version_tag=version_tag,
        start_listeners=listeners[0],
        end_listeners=listeners[1],
    )
