"""How the engine's parts find an element's processor without importing the registry, which imports them all.

The engine hands the registry in: processors and the steps they share reach it through the processing context
(``Services.elements``), the event appliers as an argument. So the registry sits above every processor, and no
processor module leads back to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from broker.engine.bpmn import model as m
from broker.engine.context import ProcessingContext
from broker.protocol.values import ProcessInstanceValue

if TYPE_CHECKING:
    from broker.engine.elements.base import ElementProcessor


class ElementLookup(Protocol):
    """The processor of an element kind (``broker.engine.elements.registry`` is one)."""

    def processor_of(self, value: ProcessInstanceValue) -> ElementProcessor: ...

    def processor_for(self, element: m.Element) -> ElementProcessor: ...


def processor_of(ctx: ProcessingContext, value: ProcessInstanceValue) -> ElementProcessor:
    """The processor of the element a process-instance record value is about."""
    lookup: ElementLookup = ctx.services.elements
    return lookup.processor_of(value)


def processor_for(ctx: ProcessingContext, element: m.Element) -> ElementProcessor:
    """The processor of a model element."""
    lookup: ElementLookup = ctx.services.elements
    return lookup.processor_for(element)


def kind_of(value: ProcessInstanceValue) -> str:
    """The element kind of a process-instance record value (a compensation handler's records carry the COMPENSATION
    event type, but it is an activity of its own kind)."""
    if value.bpmn_event_type == m.UNSPECIFIED or value.bpmn_element_type not in m.EVENT_ELEMENT_TYPES:
        return value.bpmn_element_type
    return f"{value.bpmn_element_type}:{value.bpmn_event_type}"


def started_by_compensation(value: ProcessInstanceValue) -> bool:
    """Whether the element instance is a compensation handler started by compensation: an activity whose records
    carry the COMPENSATION event type, as Zeebe's do (the compensation events' carry it too, but are events)."""
    return value.bpmn_event_type == m.COMPENSATION and kind_of(value) == value.bpmn_element_type
