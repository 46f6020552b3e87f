"""Record codes are wire and storage codes: they must be unique, complete and equal to Zeebe's."""

from __future__ import annotations

from enum import IntEnum

import pytest

from broker.protocol import enums
from broker.protocol.enums import (
    EVENTS,
    INTENTS,
    BpmnElementType,
    BpmnEventType,
    DeploymentIntent,
    IncidentIntent,
    JobBatchIntent,
    JobIntent,
    MessageIntent,
    ProcessInstanceCreationIntent,
    ProcessInstanceIntent,
    RecordType,
    RejectionType,
    ValueType,
    VariableDocumentIntent,
    intent_for,
    is_command,
    is_event,
)


def _int_enums() -> list[type[IntEnum]]:
    return [
        value
        for value in vars(enums).values()
        if isinstance(value, type) and issubclass(value, IntEnum) and value is not IntEnum
    ]


@pytest.mark.parametrize("enum_class", _int_enums(), ids=lambda enum_class: enum_class.__name__)
def test_codes_are_unique_and_fit_the_encoding(enum_class: type[IntEnum]) -> None:
    # An alias (two names, one code) would silently merge two meanings on the wire.
    assert len(enum_class.__members__) == len(list(enum_class)), f"{enum_class.__name__} has aliases"
    codes = [member.value for member in enum_class]
    assert len(codes) == len(set(codes))
    # Record types, value types, rejection types and intents are each encoded in one unsigned byte.
    assert all(0 <= code <= 255 for code in codes)


def test_every_intent_enum_is_mapped_and_classified() -> None:
    intent_enums = {enum_class for enum_class in _int_enums() if enum_class.__name__.endswith("Intent")}
    assert set(INTENTS.values()) == intent_enums
    assert set(EVENTS) == intent_enums
    for intent_enum, events in EVENTS.items():
        assert all(type(member) is intent_enum for member in events), intent_enum.__name__


def test_every_value_type_with_an_intent_enum_is_mapped_once() -> None:
    assert all(isinstance(value_type, ValueType) for value_type in INTENTS)
    assert len(set(INTENTS.values())) == len(INTENTS), "two value types share an intent enum"
    for value_type, intent_enum in INTENTS.items():
        stem = "".join(part.capitalize() for part in value_type.name.split("_"))
        assert intent_enum.__name__ == f"{stem}Intent"


def test_known_zeebe_codes() -> None:
    assert (RecordType.EVENT, RecordType.COMMAND, RecordType.COMMAND_REJECTION) == (0, 1, 2)
    assert ValueType.JOB == 0
    assert ValueType.DEPLOYMENT == 4
    assert ValueType.PROCESS_INSTANCE == 5
    assert ValueType.INCIDENT == 6
    assert ValueType.MESSAGE == 10
    assert ValueType.VARIABLE_DOCUMENT == 18
    assert ValueType.PROCESS_INSTANCE_CREATION == 19
    assert ValueType.SIGNAL == 31
    assert ValueType.COMMAND_DISTRIBUTION == 33
    assert ValueType.CHECKPOINT == 254
    assert RejectionType.INVALID_ARGUMENT == 0
    assert RejectionType.INVALID_STATE == 3
    assert RejectionType.FORBIDDEN == 7
    assert RejectionType.NULL_VAL == 255
    assert JobIntent.CREATED == 0
    assert JobIntent.COMPLETE == 1
    assert JobIntent.THROW_ERROR == 11
    assert JobIntent.UPDATE_TIMEOUT == 17
    assert ProcessInstanceIntent.CANCEL == 0
    assert ProcessInstanceIntent.ELEMENT_ACTIVATED == 3
    assert ProcessInstanceIntent.ACTIVATE_ELEMENT == 8
    assert DeploymentIntent.CREATE == 0
    assert DeploymentIntent.CREATED == 1
    assert IncidentIntent.RESOLVE == 1
    assert MessageIntent.PUBLISHED == 1
    assert VariableDocumentIntent.UPDATE == 0
    assert ProcessInstanceCreationIntent.CREATE_WITH_AWAITING_RESULT == 2
    assert JobBatchIntent.ACTIVATED == 1


def test_intent_for_resolves_codes_per_value_type() -> None:
    assert intent_for(ValueType.JOB, 2) is JobIntent.COMPLETED
    assert intent_for(5, 3) is ProcessInstanceIntent.ELEMENT_ACTIVATED
    # The same code means different things for different value types.
    assert intent_for(ValueType.DEPLOYMENT, 0) is DeploymentIntent.CREATE
    assert intent_for(ValueType.JOB, 0) is JobIntent.CREATED


def test_intent_for_refuses_what_it_cannot_interpret() -> None:
    with pytest.raises(ValueError):
        intent_for(ValueType.JOB, 200)
    with pytest.raises(ValueError):
        intent_for(ValueType.RESOURCE, 0)  # a value type without intents in Weir
    with pytest.raises(ValueError):
        intent_for(3, 0)  # no such value type


def test_is_event_follows_zeebe_classification() -> None:
    assert is_event(ValueType.JOB, JobIntent.CREATED)
    assert not is_event(ValueType.JOB, JobIntent.COMPLETE)
    assert is_command(ValueType.JOB, JobIntent.TIME_OUT)
    assert is_event(ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.ELEMENT_ACTIVATING)
    assert not is_event(ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.ACTIVATE_ELEMENT)
    assert not is_event(ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.CANCEL)
    assert is_event(ValueType.DEPLOYMENT, 1)
    assert not is_event(ValueType.DEPLOYMENT, 0)
    assert is_event(ValueType.VARIABLE_DOCUMENT, VariableDocumentIntent.UPDATED)


def test_is_event_rejects_an_intent_of_another_value_type() -> None:
    with pytest.raises(ValueError):
        is_event(ValueType.JOB, ProcessInstanceIntent.ELEMENT_ACTIVATED)


def test_past_tense_and_progressive_names_are_events() -> None:
    """A cross-check of the classification tables: in Zeebe's naming, -ED and -ING intents are events."""
    for intent_enum in INTENTS.values():
        for member in intent_enum:
            if member.name.endswith(("ED", "ING")):
                assert member in EVENTS[intent_enum], member


def test_bpmn_vocabulary_is_written_by_name() -> None:
    for enum_class in (BpmnElementType, BpmnEventType):
        assert all(member.value == member.name for member in enum_class)
    assert BpmnElementType.SERVICE_TASK == "SERVICE_TASK"
    assert BpmnEventType.TIMER == "TIMER"
    assert enums.ELEMENT_TYPE_BY_BPMN_TAG["serviceTask"] is BpmnElementType.SERVICE_TASK
    assert BpmnElementType.MULTI_INSTANCE_BODY in enums.CONTAINER_ELEMENT_TYPES
