"""Which element kinds the engine can run: a callback for :func:`parse_bpmn` built from a set of kinds.

The model describes every BPMN element Zeebe knows; the engine grows into it. A deployment of a
model using something the engine cannot run yet is rejected at deploy time, naming the element,
instead of creating instances that get stuck.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from . import model as m

# The kinds the engine executes (see ``Element.kind``).
INITIAL_ENGINE_KINDS: Final = frozenset(
    {
        f"{m.START_EVENT}:{m.NONE}",
        f"{m.END_EVENT}:{m.NONE}",
        f"{m.END_EVENT}:{m.ERROR}",
        f"{m.INTERMEDIATE_THROW_EVENT}:{m.NONE}",
        f"{m.BOUNDARY_EVENT}:{m.ERROR}",
        m.SERVICE_TASK,
        m.SEND_TASK,
        m.SCRIPT_TASK,
        m.BUSINESS_RULE_TASK,
        m.USER_TASK,
        m.TASK,
        m.MANUAL_TASK,
        m.EXCLUSIVE_GATEWAY,
        m.PARALLEL_GATEWAY,
        m.SUB_PROCESS,
        # waiting states: timers and messages
        f"{m.START_EVENT}:{m.TIMER}",
        f"{m.START_EVENT}:{m.MESSAGE}",
        f"{m.INTERMEDIATE_CATCH_EVENT}:{m.TIMER}",
        f"{m.INTERMEDIATE_CATCH_EVENT}:{m.MESSAGE}",
        f"{m.BOUNDARY_EVENT}:{m.TIMER}",
        f"{m.BOUNDARY_EVENT}:{m.MESSAGE}",
        m.RECEIVE_TASK,
        # waiting states: terminate and escalation events
        f"{m.END_EVENT}:{m.TERMINATE}",
        f"{m.END_EVENT}:{m.ESCALATION}",
        f"{m.INTERMEDIATE_THROW_EVENT}:{m.ESCALATION}",
        f"{m.BOUNDARY_EVENT}:{m.ESCALATION}",
        # link events: a throw continues at the catch of the same name in its scope
        f"{m.INTERMEDIATE_THROW_EVENT}:{m.LINK}",
        f"{m.INTERMEDIATE_CATCH_EVENT}:{m.LINK}",
        # event-based gateways
        m.EVENT_BASED_GATEWAY,
        # signals
        f"{m.START_EVENT}:{m.SIGNAL}",
        f"{m.INTERMEDIATE_CATCH_EVENT}:{m.SIGNAL}",
        f"{m.BOUNDARY_EVENT}:{m.SIGNAL}",
        f"{m.INTERMEDIATE_THROW_EVENT}:{m.SIGNAL}",
        f"{m.END_EVENT}:{m.SIGNAL}",
        # event sub-processes (their error and escalation start events exist only there)
        m.EVENT_SUB_PROCESS,
        f"{m.START_EVENT}:{m.ERROR}",
        f"{m.START_EVENT}:{m.ESCALATION}",
    }
)


def supported_kinds(kinds: Iterable[str]) -> Callable[[m.Element], str | None]:
    """A ``supported`` callback accepting exactly ``kinds``.

    - Multi-instance activities also need ``MULTI_INSTANCE_BODY`` in ``kinds``.
    - Tasks the engine would evaluate itself (``zeebe:script``, ``zeebe:calledDecision``) and
      native ``zeebe:userTask`` user tasks need ``<TYPE>:ENGINE`` (e.g. ``SCRIPT_TASK:ENGINE``);
      their job-worker forms only need the plain type.
    """
    allowed = frozenset(kinds)

    def check(element: m.Element) -> str | None:
        if element.kind not in allowed:
            return f"Elements of kind {_describe(element)} are not supported yet"
        if element.multi_instance is not None and m.MULTI_INSTANCE_BODY not in allowed:
            return "Multi-instance activities are not supported yet"
        if element.job is None and _engine_implemented(element):
            engine_kind = f"{element.element_type}:ENGINE"
            if engine_kind not in allowed:
                reason = f"Elements of kind {_describe(element)} without a job worker ('zeebe:taskDefinition')"
                return reason + " are not supported yet"
        return None

    return check


def _engine_implemented(element: m.Element) -> bool:
    """Tasks that Zeebe runs inside the engine rather than through a job."""
    return (
        element.script is not None
        or element.called_decision is not None
        or (element.user_task is not None and element.user_task.native)
    )


def _describe(element: m.Element) -> str:
    words = element.element_type.lower().replace("_", " ")
    if element.event_type in (m.UNSPECIFIED, m.NONE):
        return f"'{words}'" if element.event_type == m.UNSPECIFIED else f"'none {words}'"
    return f"'{element.event_type.lower()} {words}'"
