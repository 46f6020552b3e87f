"""Which element kinds the engine can run: a callback for :func:`parse_bpmn` built from a set of kinds.

The set itself comes from the engine's element registry (``broker.engine.elements.SUPPORTED_KINDS``).

The model describes every BPMN element Zeebe knows; the engine grows into it. A deployment of a
model using something the engine cannot run yet is rejected at deploy time, naming the element,
instead of creating instances that get stuck.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from . import model as m


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
