"""BPMN 2.0 XML schema validation at deployment: violations are refused naming the line and what is wrong."""

from __future__ import annotations

import time

import pytest

from broker.engine.bpmn import parse_bpmn
from broker.engine.bpmn.xsd import bpmn_schema, schema_violations
from tests.unit.test_bpmn_parser import FIXTURES, HEADER, VALID_FIXTURES, linear, problems_of, process_xml, service_task

SCHEMA = "Does not conform to the BPMN 2.0 XML schema"


@pytest.mark.parametrize("path", VALID_FIXTURES, ids=lambda p: p.name)
def test_every_valid_fixture_conforms_to_the_schema(path) -> None:  # type: ignore[no-untyped-def]
    assert schema_violations(path.read_bytes()) == []


def test_the_schema_violations_fixture_is_refused_with_each_line() -> None:
    problems = problems_of((FIXTURES / "invalid" / "schema-violations.bpmn").read_bytes())
    assert problems[:3] == (
        f"{SCHEMA} (line: 3): Element 'bpmn:process', attribute 'isExecutable': 'maybe' is not a valid value of "
        "the atomic type 'xs:boolean'.",
        f"{SCHEMA} (line: 9): Element 'bpmn:extensionElements': This element is not expected. Expected is one of "
        "( bpmn:incoming, bpmn:outgoing, bpmn:ioSpecification, bpmn:property, bpmn:dataInputAssociation, "
        "bpmn:dataOutputAssociation, bpmn:resourceRole, bpmn:performer, bpmn:humanPerformer, bpmn:potentialOwner ).",
        f"{SCHEMA} (line: 14): Element 'bpmn:fancyTask': This element is not expected. Expected is one of "
        "( bpmn:artifact, bpmn:association, bpmn:group, bpmn:textAnnotation, bpmn:resourceRole, bpmn:performer, "
        "bpmn:humanPerformer, bpmn:potentialOwner, bpmn:correlationSubscription, bpmn:supports ).",
    )


def test_an_unknown_element_in_the_bpmn_namespace() -> None:
    (problem,) = [p for p in problems_of(process_xml(linear() + "\n<bpmn:serviceTasks id='x'/>")) if SCHEMA in p]
    assert "(line: 4): Element 'bpmn:serviceTasks': This element is not expected." in problem


def test_an_attribute_of_the_wrong_type() -> None:
    body = linear(service_task("m0")).replace(
        '<bpmn:serviceTask id="m0"', '<bpmn:serviceTask id="m0" startQuantity="x"'
    )
    (problem,) = problems_of(process_xml(body))
    assert problem.startswith(f"{SCHEMA} (line: 3): Element 'bpmn:serviceTask', attribute 'startQuantity': 'x'")


def test_children_out_of_the_order_the_schema_fixes() -> None:
    task = (
        '<bpmn:serviceTask id="m0"><bpmn:incoming>f0</bpmn:incoming><bpmn:extensionElements>'
        '<zeebe:taskDefinition type="work"/></bpmn:extensionElements></bpmn:serviceTask>'
    )
    (problem,) = problems_of(process_xml(linear(task)))
    assert "Element 'bpmn:extensionElements': This element is not expected." in problem


def test_a_misplaced_child() -> None:
    body = linear().replace(
        '<bpmn:startEvent id="start"/>',
        '<bpmn:startEvent id="start"><bpmn:conditionExpression>=x</bpmn:conditionExpression></bpmn:startEvent>',
    )
    (problem,) = problems_of(process_xml(body))
    assert "Element 'bpmn:conditionExpression': This element is not expected." in problem


def test_a_missing_required_attribute() -> None:
    data = process_xml(linear()).replace(b' targetNamespace="http://bpmn.io/schema/bpmn"', b"")
    assert problems_of(data) == (
        f"{SCHEMA} (line: 2): Element 'bpmn:definitions': The attribute 'targetNamespace' is required but missing.",
    )


def test_extensions_of_other_namespaces_are_not_checked() -> None:
    task = (
        '<bpmn:serviceTask id="m0" zeebe:modelerTemplate="t" xmlns:other="urn:other" other:x="1">'
        '<bpmn:extensionElements><zeebe:taskDefinition type="work"/><zeebe:somethingNew a="b"/>'
        "<other:thing/></bpmn:extensionElements></bpmn:serviceTask>"
    )
    assert parse_bpmn(process_xml(linear(task)), "ext.bpmn")


def test_the_document_is_reported_with_every_other_problem() -> None:
    body = linear(service_task("m0")).replace('isExecutable="true"', "") + '<bpmn:task id="t" startQuantity="x"/>'
    problems = problems_of(process_xml(body))
    assert problems[0].startswith(f"{SCHEMA} (line: 3): Element 'bpmn:task', attribute 'startQuantity'")
    assert "'t': Must have at least one incoming sequence flow" in problems


def test_too_many_violations_are_summed_up() -> None:
    tasks = "\n".join(f'<bpmn:task id="t{i}" startQuantity="x"/>' for i in range(30))
    violations = schema_violations(
        (HEADER + f'<bpmn:process id="p">{tasks}</bpmn:process></bpmn:definitions>').encode()
    )
    assert len(violations) == 21
    assert violations[-1] == "… and 10 more schema violations"


def test_the_schema_is_compiled_once_and_validation_is_fast() -> None:
    assert bpmn_schema() is bpmn_schema()
    data = [path.read_bytes() for path in VALID_FIXTURES]
    started = time.perf_counter()
    for _ in range(10):
        for content in data:
            schema_violations(content)
    assert time.perf_counter() - started < 2.0
