"""The element registry and the lifecycle table: every kind deployment accepts has a processor, and a transition the
table does not allow is refused before anything is written."""

from __future__ import annotations

import pytest

from broker.engine.bpmn import model as m
from broker.engine.bpmn import parse_bpmn, supported_kinds
from broker.engine.context import ProcessingContext
from broker.engine.elements import lifecycle, registry
from broker.engine.elements.base import ContainerProcessor
from broker.engine.elements.registry import SUPPORTED_KINDS, processor_for
from broker.protocol.enums import ProcessInstanceIntent, RecordType, ValueType
from broker.protocol.keys import KeyGenerator
from broker.protocol.record import Record
from broker.protocol.values import ProcessInstanceValue
from broker.state.element_instance import ElementInstance
from tests.unit.test_bpmn_parser import FIXTURES

PI = ProcessInstanceIntent


def _context() -> tuple[ProcessingContext, list[Record]]:
    applied: list[Record] = []
    ctx = ProcessingContext(
        state=None,  # type: ignore[arg-type]
        keys=KeyGenerator(1),
        partition_id=1,
        apply_event=lambda _state, record: applied.append(record),
        next_position=1,
    )
    ctx.command = Record(
        position=0,
        key=1,
        record_type=RecordType.COMMAND,
        value_type=ValueType.PROCESS_INSTANCE,
        intent=PI.ACTIVATE_ELEMENT,
        timestamp=0,
        value={},
    )
    return ctx, applied


def _instance(state: int) -> ElementInstance:
    value = ProcessInstanceValue("p", 1, 7, 9, "task", 9, m.SERVICE_TASK, m.UNSPECIFIED)
    return ElementInstance(42, state, value)


LEGAL = [
    (PI.ELEMENT_ACTIVATING, PI.ELEMENT_ACTIVATED),
    (PI.ELEMENT_ACTIVATING, PI.ELEMENT_TERMINATING),
    (PI.ELEMENT_ACTIVATED, PI.ELEMENT_COMPLETING),
    (PI.ELEMENT_ACTIVATED, PI.ELEMENT_TERMINATING),
    (PI.ELEMENT_COMPLETING, PI.ELEMENT_COMPLETED),
    (PI.ELEMENT_COMPLETING, PI.ELEMENT_TERMINATING),
    (PI.ELEMENT_TERMINATING, PI.ELEMENT_TERMINATED),
]


@pytest.mark.parametrize(("current", "target"), LEGAL)
def test_a_legal_transition_is_written_and_moves_the_instance(current: int, target: PI) -> None:
    ctx, applied = _context()
    inst = _instance(current)
    moved = lifecycle.transition(ctx, inst, target)
    assert [(r.intent, r.key, r.value["elementId"]) for r in applied] == [(target, 42, "task")]
    assert moved == inst._replace(state=target)


ILLEGAL = [
    (PI.ELEMENT_ACTIVATING, PI.ELEMENT_COMPLETING),
    (PI.ELEMENT_ACTIVATING, PI.ELEMENT_COMPLETED),
    (PI.ELEMENT_ACTIVATED, PI.ELEMENT_ACTIVATED),
    (PI.ELEMENT_ACTIVATED, PI.ELEMENT_COMPLETED),
    (PI.ELEMENT_COMPLETING, PI.ELEMENT_ACTIVATED),
    (PI.ELEMENT_TERMINATING, PI.ELEMENT_COMPLETED),
    (PI.ELEMENT_TERMINATING, PI.ELEMENT_TERMINATING),
    (PI.ELEMENT_COMPLETED, PI.ELEMENT_TERMINATING),
    (PI.ELEMENT_TERMINATED, PI.ELEMENT_ACTIVATING),
]


@pytest.mark.parametrize(("current", "target"), ILLEGAL)
def test_an_illegal_transition_raises_before_anything_is_written(current: int, target: PI) -> None:
    ctx, applied = _context()
    inst = _instance(current)
    with pytest.raises(lifecycle.IllegalTransition, match=f"{PI(current).name} → {target.name}"):
        lifecycle.transition(ctx, inst, target)
    assert applied == []
    assert ctx.records == []


def test_every_supported_kind_has_a_processor_and_nothing_else_is_accepted() -> None:
    assert (frozenset(registry.PROCESSORS) - {m.PROCESS}) | registry.ENGINE_FORMS == SUPPORTED_KINDS
    for kind in SUPPORTED_KINDS - registry.ENGINE_FORMS:
        element_type, _, event_type = kind.partition(":")
        value = ProcessInstanceValue("p", 1, 7, 9, "e", 9, element_type, event_type or m.UNSPECIFIED)
        assert registry.processor_of(value) is registry.PROCESSORS[kind]


def test_every_element_of_the_fixture_models_finds_its_processor() -> None:
    check = supported_kinds(SUPPORTED_KINDS)
    seen = set()
    for path in sorted(FIXTURES.glob("*.bpmn")):
        try:
            processes = parse_bpmn(path.read_bytes(), path.name, supported=check)
        except Exception:
            continue  # fixtures of elements the engine refuses (they are tested for their refusal)
        for process in processes:
            for element in process.elements.values():
                assert processor_for(element) is not None
                seen.add(element.kind)
    assert len(seen) >= 20


def test_only_flow_scopes_are_containers() -> None:
    containers = {kind for kind, p in registry.PROCESSORS.items() if isinstance(p, ContainerProcessor)}
    assert containers == {
        m.PROCESS,
        m.SUB_PROCESS,
        m.EVENT_SUB_PROCESS,
        m.AD_HOC_SUB_PROCESS,
        m.AD_HOC_SUB_PROCESS_INNER_INSTANCE,
        m.MULTI_INSTANCE_BODY,
    }
