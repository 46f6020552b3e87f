"""Reading ad-hoc sub-processes: their attributes into the model, and the rules Zeebe applies to them."""

from __future__ import annotations

import pytest

from broker.engine.bpmn import AdHoc, BpmnValidationError, Process, parse_bpmn, supported_kinds
from broker.engine.elements.ad_hoc_sub_process import activatable_elements
from broker.engine.elements.registry import SUPPORTED_KINDS

HEADER = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" '
    'xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" id="defs" '
    'targetNamespace="http://bpmn.io/schema/bpmn">\n'
)
SUPPORTED = supported_kinds(SUPPORTED_KINDS)


def model(inner: str, *, attributes: str = "", extensions: str = "", condition: str = "") -> bytes:
    """start -> ad-hoc sub-process "tools" (``inner`` inside) -> end."""
    ext = f"<bpmn:extensionElements>{extensions}</bpmn:extensionElements>" if extensions else ""
    cond = (
        f'<bpmn:completionCondition xsi:type="bpmn:tFormalExpression">{condition}</bpmn:completionCondition>'
        if condition
        else ""
    )
    body = (
        '<bpmn:startEvent id="start"/>'
        f'<bpmn:adHocSubProcess id="tools" {attributes}>{ext}{inner}{cond}</bpmn:adHocSubProcess>'
        '<bpmn:endEvent id="end"/>'
        '<bpmn:sequenceFlow id="f0" sourceRef="start" targetRef="tools"/>'
        '<bpmn:sequenceFlow id="f1" sourceRef="tools" targetRef="end"/>'
    )
    return (HEADER + f'<bpmn:process id="p" isExecutable="true">{body}</bpmn:process></bpmn:definitions>').encode()


def parse(data: bytes) -> Process:
    (process,) = parse_bpmn(data, "ad-hoc.bpmn", supported=SUPPORTED)
    return process


def problems_of(data: bytes) -> tuple[str, ...]:
    with pytest.raises(BpmnValidationError) as caught:
        parse_bpmn(data, "ad-hoc.bpmn", supported=SUPPORTED)
    return caught.value.problems


TASKS = (
    '<bpmn:task id="a"/><bpmn:task id="b"/><bpmn:task id="c"/><bpmn:sequenceFlow id="bc" sourceRef="b" targetRef="c"/>'
)


def test_attributes_are_read_into_the_model() -> None:
    process = parse(
        model(
            TASKS,
            attributes='cancelRemainingInstances="false" ordering="Sequential"',
            extensions='<zeebe:adHoc activeElementsCollection="=tools" outputCollection="rs" outputElement="=r"/>',
            condition="= done",
        )
    )
    tools = process.element("tools")
    assert tools.element_type == "AD_HOC_SUB_PROCESS" and tools.kind == "AD_HOC_SUB_PROCESS"
    assert tools.ad_hoc == AdHoc(
        active_elements_collection="=tools",
        completion_condition="= done",
        cancel_remaining_instances=False,
        output_collection="rs",
        output_element="=r",
    )
    # the inner elements live in the inner instance element (one instance of it per activation, as in Zeebe 8.8)
    (inner,) = process.children_of("tools")
    assert inner.id == "tools#innerInstance" and inner.element_type == "AD_HOC_SUB_PROCESS_INNER_INSTANCE"
    assert {e.id for e in process.children_of(inner.id)} == {"a", "b", "c"}
    assert all(process.element(i).flow_scope_id == "tools#innerInstance" for i in "abc")
    # what a collection may name: inner elements without incoming flows
    assert sorted(activatable_elements(process, tools)) == ["a", "b"]


def test_defaults_without_extension_or_condition() -> None:
    tools = parse(model('<bpmn:task id="a"/>')).element("tools")
    assert tools.ad_hoc == AdHoc()
    assert tools.ad_hoc.cancel_remaining_instances and tools.ad_hoc.active_elements_collection is None


def test_inner_elements_need_no_incoming_flow_but_a_flow_may_connect_them() -> None:
    process = parse(model(TASKS))
    assert process.element("c").incoming == ("bc",)
    assert process.element("a").incoming == ()


def test_start_and_end_events_are_not_allowed_inside() -> None:
    inner = '<bpmn:startEvent id="s"/><bpmn:task id="a"/><bpmn:endEvent id="e"/>'
    inner += '<bpmn:sequenceFlow id="sa" sourceRef="s" targetRef="a"/>'
    inner += '<bpmn:sequenceFlow id="ae" sourceRef="a" targetRef="e"/>'
    problems = problems_of(model(inner))
    assert "'tools': Must not contain a start event." in problems
    assert "'tools': Must not contain an end event." in problems


def test_an_empty_ad_hoc_sub_process_is_refused() -> None:
    assert problems_of(model("")) == ("'tools': Must have at least one activity.",)


def test_expressions_must_be_expressions_and_valid_feel() -> None:
    problems = problems_of(
        model(
            '<bpmn:task id="a"/>',
            extensions='<zeebe:adHoc activeElementsCollection="tools"/>',
            condition="done",
        )
    )
    assert any(p.startswith("'tools': zeebe:adHoc activeElementsCollection: Expected expression") for p in problems)
    assert any(p.startswith("'tools': completionCondition: Expected expression") for p in problems)


def test_output_collection_and_element_come_together() -> None:
    problems = problems_of(model('<bpmn:task id="a"/>', extensions='<zeebe:adHoc outputCollection="rs"/>'))
    assert problems == (
        "'tools': Attribute 'outputElement' must be present if the attribute 'outputCollection' is set",
    )


def test_the_job_worker_implementation_reads_the_task_definition() -> None:
    ext = '<zeebe:taskDefinition type="agent" retries="5"/><zeebe:adHoc outputCollection="rs" outputElement="=r"/>'
    element = parse(model('<bpmn:task id="a"/>', extensions=ext)).element("tools")
    assert element.job is not None and (element.job.type, element.job.retries) == ("agent", "5")
    assert element.ad_hoc is not None and element.ad_hoc.output_collection == "rs"
    assert parse(model('<bpmn:task id="a"/>')).element("tools").job is None
    (problem,) = problems_of(model('<bpmn:task id="a"/>', extensions='<zeebe:taskDefinition type=""/>'))
    assert problem == "'tools': zeebe:taskDefinition: Attribute 'type' must be present and not empty"


def test_event_sub_processes_stay_children_of_the_ad_hoc_sub_process() -> None:
    inner = (
        '<bpmn:task id="a"/><bpmn:subProcess id="esp" triggeredByEvent="true">'
        '<bpmn:startEvent id="esp-start" isInterrupting="false"><bpmn:timerEventDefinition>'
        "<bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:startEvent>"
        '<bpmn:endEvent id="esp-end"/><bpmn:sequenceFlow id="e0" sourceRef="esp-start" targetRef="esp-end"/>'
        "</bpmn:subProcess>"
    )
    process = parse(model(inner))
    assert process.event_sub_processes_of("tools") == (process.element("esp"),)
    assert process.element("a").flow_scope_id == "tools#innerInstance"
    assert sorted(activatable_elements(process, process.element("tools"))) == ["a"]


def test_boundary_events_may_be_attached_to_it() -> None:
    data = model('<bpmn:task id="a"/>').replace(
        b'<bpmn:endEvent id="end"/>',
        b'<bpmn:endEvent id="end"/><bpmn:boundaryEvent id="late" attachedToRef="tools">'
        b"<bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition>"
        b"</bpmn:boundaryEvent>",
    )
    assert parse(data).element("tools").boundary_event_ids == ("late",)


def test_completion_condition_out_of_place_breaks_the_schema() -> None:
    # the schema puts completionCondition after the inner elements
    inner = (
        '<bpmn:completionCondition xsi:type="bpmn:tFormalExpression">=x</bpmn:completionCondition><bpmn:task id="a"/>'
    )
    problems = problems_of(model(inner))
    assert any("Does not conform to the BPMN 2.0 XML schema" in p for p in problems)
