"""BPMN 2.0 deployment: safe parsing, validation listing every problem, and the immutable model.

The public surface: :func:`parse_bpmn` turns resource bytes into :class:`Process` models (or raises
:class:`BpmnValidationError`), :func:`resource_checksum` detects identical re-deploys, and
:func:`supported_kinds` lets the engine refuse models it cannot run yet.
"""

from broker.safe_xml import DEFAULT_MAX_RESOURCE_BYTES, DEFAULT_MAX_XML_ELEMENTS

from .errors import BpmnValidationError, Problem
from .model import (
    DEFAULT_JOB_RETRIES,
    USER_TASK_JOB_TYPE,
    AdHoc,
    CalledDecision,
    CalledElement,
    Element,
    ErrorDefinition,
    ExecutionListener,
    JobDefinition,
    Mapping,
    MessageDefinition,
    MultiInstance,
    Process,
    ScriptDefinition,
    SequenceFlow,
    TimerDefinition,
    TimerKind,
    UserTaskDefinition,
    VariableMapping,
)
from .parser import (
    BPMN_NS,
    DEFAULT_MAX_FLOW_ELEMENTS,
    ZEEBE_NS,
    ExpressionCheck,
    SupportCheck,
    parse_bpmn,
    resource_checksum,
)
from .support import supported_kinds

__all__ = [
    "BPMN_NS",
    "DEFAULT_JOB_RETRIES",
    "DEFAULT_MAX_FLOW_ELEMENTS",
    "DEFAULT_MAX_RESOURCE_BYTES",
    "DEFAULT_MAX_XML_ELEMENTS",
    "USER_TASK_JOB_TYPE",
    "ZEEBE_NS",
    "AdHoc",
    "BpmnValidationError",
    "CalledDecision",
    "CalledElement",
    "Element",
    "ErrorDefinition",
    "ExecutionListener",
    "ExpressionCheck",
    "JobDefinition",
    "Mapping",
    "MessageDefinition",
    "MultiInstance",
    "Problem",
    "Process",
    "ScriptDefinition",
    "SequenceFlow",
    "SupportCheck",
    "TimerDefinition",
    "TimerKind",
    "UserTaskDefinition",
    "VariableMapping",
    "parse_bpmn",
    "resource_checksum",
    "supported_kinds",
]
