"""Which processor runs each element kind: one row per kind, and the set of kinds deployment accepts.

A kind is ``ELEMENT_TYPE`` or ``ELEMENT_TYPE:EVENT_TYPE`` (see ``Element.kind``). Adding an element to the engine is
a processor module plus a row here; a model using a kind without a row is refused at deployment, naming the element.
"""

from __future__ import annotations

from typing import Final

from broker.engine.bpmn import model as m
from broker.engine.elements.ad_hoc_sub_process import AdHocInnerInstanceProcessor, AdHocSubProcessProcessor
from broker.engine.elements.base import ElementProcessor
from broker.engine.elements.business_rule_task import BusinessRuleTaskProcessor
from broker.engine.elements.call_activity import CallActivityProcessor
from broker.engine.elements.catch_events import (
    IntermediateCatchEventProcessor,
    ReceiveTaskProcessor,
    StartEventProcessor,
    TriggeredEventProcessor,
)
from broker.engine.elements.compensation_events import CompensationBoundaryProcessor, CompensationThrowProcessor
from broker.engine.elements.gateways import (
    EventBasedGatewayProcessor,
    ExclusiveGatewayProcessor,
    InclusiveGatewayProcessor,
    ParallelGatewayProcessor,
)
from broker.engine.elements.job_task import JobTaskProcessor
from broker.engine.elements.lookup import kind_of
from broker.engine.elements.multi_instance import MultiInstanceBodyProcessor
from broker.engine.elements.process import ProcessProcessor
from broker.engine.elements.script_task import ScriptTaskProcessor
from broker.engine.elements.sub_process import EventSubProcessProcessor, SubProcessProcessor
from broker.engine.elements.throw_events import (
    ErrorEndEventProcessor,
    EscalationThrowProcessor,
    LinkCatchEventProcessor,
    LinkThrowEventProcessor,
    SignalThrowProcessor,
    TerminateEndEventProcessor,
)
from broker.engine.elements.user_task import UserTaskProcessor
from broker.protocol.values import ProcessInstanceValue

_PASS_THROUGH = ElementProcessor()
_TRIGGERED = TriggeredEventProcessor()
_START = StartEventProcessor()
_CATCH = IntermediateCatchEventProcessor()
_JOB = JobTaskProcessor()
_ESCALATION = EscalationThrowProcessor()
_SIGNAL = SignalThrowProcessor()
_COMPENSATION = CompensationThrowProcessor()

PROCESSORS: Final[dict[str, ElementProcessor]] = {
    m.PROCESS: ProcessProcessor(),
    # tasks
    m.TASK: _PASS_THROUGH,
    m.MANUAL_TASK: _PASS_THROUGH,
    m.SERVICE_TASK: _JOB,
    m.SEND_TASK: _JOB,
    m.SCRIPT_TASK: ScriptTaskProcessor(),
    m.BUSINESS_RULE_TASK: BusinessRuleTaskProcessor(),
    m.USER_TASK: UserTaskProcessor(),
    m.RECEIVE_TASK: ReceiveTaskProcessor(),
    # gateways
    m.EXCLUSIVE_GATEWAY: ExclusiveGatewayProcessor(),
    m.PARALLEL_GATEWAY: ParallelGatewayProcessor(),
    m.EVENT_BASED_GATEWAY: EventBasedGatewayProcessor(),
    m.INCLUSIVE_GATEWAY: InclusiveGatewayProcessor(),
    # scopes
    m.SUB_PROCESS: SubProcessProcessor(),
    m.MULTI_INSTANCE_BODY: MultiInstanceBodyProcessor(),
    m.EVENT_SUB_PROCESS: EventSubProcessProcessor(),
    m.AD_HOC_SUB_PROCESS: AdHocSubProcessProcessor(),
    m.AD_HOC_SUB_PROCESS_INNER_INSTANCE: AdHocInnerInstanceProcessor(),
    m.CALL_ACTIVITY: CallActivityProcessor(),
    # start events (error and escalation start events exist only in event sub-processes)
    f"{m.START_EVENT}:{m.NONE}": _START,
    f"{m.START_EVENT}:{m.TIMER}": _START,
    f"{m.START_EVENT}:{m.MESSAGE}": _START,
    f"{m.START_EVENT}:{m.SIGNAL}": _START,
    f"{m.START_EVENT}:{m.ERROR}": _START,
    f"{m.START_EVENT}:{m.ESCALATION}": _START,
    # boundary events
    f"{m.BOUNDARY_EVENT}:{m.ERROR}": _TRIGGERED,
    f"{m.BOUNDARY_EVENT}:{m.TIMER}": _TRIGGERED,
    f"{m.BOUNDARY_EVENT}:{m.MESSAGE}": _TRIGGERED,
    f"{m.BOUNDARY_EVENT}:{m.SIGNAL}": _TRIGGERED,
    f"{m.BOUNDARY_EVENT}:{m.ESCALATION}": _TRIGGERED,
    f"{m.BOUNDARY_EVENT}:{m.COMPENSATION}": CompensationBoundaryProcessor(),
    # intermediate catch events
    f"{m.INTERMEDIATE_CATCH_EVENT}:{m.TIMER}": _CATCH,
    f"{m.INTERMEDIATE_CATCH_EVENT}:{m.MESSAGE}": _CATCH,
    f"{m.INTERMEDIATE_CATCH_EVENT}:{m.SIGNAL}": _CATCH,
    f"{m.INTERMEDIATE_CATCH_EVENT}:{m.LINK}": LinkCatchEventProcessor(),
    # intermediate throw events
    f"{m.INTERMEDIATE_THROW_EVENT}:{m.NONE}": _PASS_THROUGH,
    f"{m.INTERMEDIATE_THROW_EVENT}:{m.ESCALATION}": _ESCALATION,
    f"{m.INTERMEDIATE_THROW_EVENT}:{m.SIGNAL}": _SIGNAL,
    f"{m.INTERMEDIATE_THROW_EVENT}:{m.LINK}": LinkThrowEventProcessor(),
    f"{m.INTERMEDIATE_THROW_EVENT}:{m.MESSAGE}": _JOB,  # the message is sent by a job worker
    f"{m.INTERMEDIATE_THROW_EVENT}:{m.COMPENSATION}": _COMPENSATION,
    # end events
    f"{m.END_EVENT}:{m.NONE}": _PASS_THROUGH,
    f"{m.END_EVENT}:{m.TERMINATE}": TerminateEndEventProcessor(),
    f"{m.END_EVENT}:{m.ERROR}": ErrorEndEventProcessor(),
    f"{m.END_EVENT}:{m.ESCALATION}": _ESCALATION,
    f"{m.END_EVENT}:{m.SIGNAL}": _SIGNAL,
    f"{m.END_EVENT}:{m.MESSAGE}": _JOB,  # the message is sent by a job worker
    f"{m.END_EVENT}:{m.COMPENSATION}": _COMPENSATION,
}

# Tasks whose processor also runs the engine-evaluated form (``zeebe:script``, ``zeebe:calledDecision`` or
# ``zeebe:userTask`` instead of a job worker).
ENGINE_FORMS: Final = frozenset({f"{m.SCRIPT_TASK}:ENGINE", f"{m.BUSINESS_RULE_TASK}:ENGINE", f"{m.USER_TASK}:ENGINE"})

# What deployment accepts: every kind with a processor (the process itself is not an element of a model).
SUPPORTED_KINDS: Final = (frozenset(PROCESSORS) - {m.PROCESS}) | ENGINE_FORMS


# The same table by (element type, event type): the lookup made for nearly every record, without building the kind.
_BY_TYPES: Final[dict[tuple[str, str], ElementProcessor]] = {
    (kind.partition(":")[0], kind.partition(":")[2] or m.UNSPECIFIED): processor
    for kind, processor in PROCESSORS.items()
}


def processor_of(value: ProcessInstanceValue) -> ElementProcessor:
    """The processor of the element a process-instance record value is about."""
    found = _BY_TYPES.get((value.bpmn_element_type, value.bpmn_event_type))
    if found is not None:
        return found
    kind = kind_of(value)  # e.g. a compensation handler: an activity whose records carry the COMPENSATION event type
    if kind not in PROCESSORS:
        raise KeyError(f"no processor for element kind {kind}")
    return PROCESSORS[kind]


def processor_for(element: m.Element) -> ElementProcessor:
    return PROCESSORS[element.kind]
