"""BPMN deployment parsing: fixtures read into the model; each validation rule rejects with its reason."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from broker.engine.bpmn import (
    USER_TASK_JOB_TYPE,
    BpmnValidationError,
    CalledElement,
    Element,
    JobDefinition,
    Process,
    VariableMapping,
    parse_bpmn,
    resource_checksum,
    supported_kinds,
)
from broker.engine.bpmn import model as bpmn_model
from broker.engine.elements.registry import SUPPORTED_KINDS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bpmn"
VALID_FIXTURES = sorted(FIXTURES.glob("*.bpmn"))

HEADER = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" '
    'xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" id="defs" '
    'targetNamespace="http://bpmn.io/schema/bpmn">\n'
)


def definitions(body: str) -> bytes:
    return (HEADER + body + "\n</bpmn:definitions>").encode()


def process_xml(body: str, *, process_id: str = "p", extra: str = "") -> bytes:
    return definitions(f'<bpmn:process id="{process_id}" isExecutable="true">{body}</bpmn:process>{extra}')


def service_task(task_id: str, job_type: str = "work") -> str:
    return (
        f'<bpmn:serviceTask id="{task_id}"><bpmn:extensionElements>'
        f'<zeebe:taskDefinition type="{job_type}"/></bpmn:extensionElements></bpmn:serviceTask>'
    )


def flow(flow_id: str, source: str, target: str, condition: str | None = None) -> str:
    if condition is None:
        return f'<bpmn:sequenceFlow id="{flow_id}" sourceRef="{source}" targetRef="{target}"/>'
    return (
        f'<bpmn:sequenceFlow id="{flow_id}" sourceRef="{source}" targetRef="{target}">'
        f'<bpmn:conditionExpression xsi:type="bpmn:tFormalExpression">{condition}</bpmn:conditionExpression>'
        "</bpmn:sequenceFlow>"
    )


def linear(*middle: str) -> str:
    """start -> middle elements (given as xml with ids m0, m1, …) -> end."""
    ids = ["start", *[f"m{i}" for i in range(len(middle))], "end"]
    flows = "".join(flow(f"f{i}", ids[i], ids[i + 1]) for i in range(len(ids) - 1))
    return '<bpmn:startEvent id="start"/>' + "".join(middle) + '<bpmn:endEvent id="end"/>' + flows


def problems_of(data: bytes, **kwargs: object) -> tuple[str, ...]:
    with pytest.raises(BpmnValidationError) as caught:
        parse_bpmn(data, "test.bpmn", **kwargs)  # type: ignore[arg-type]
    return caught.value.problems


def only(processes: tuple[Process, ...]) -> Process:
    assert len(processes) == 1
    return processes[0]


def load(name: str) -> tuple[Process, ...]:
    path = FIXTURES / name
    return parse_bpmn(path.read_bytes(), path.name)


# --- the fixtures --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", VALID_FIXTURES, ids=lambda p: p.name)
def test_every_fixture_is_valid_and_runnable_by_the_initial_engine(path: Path) -> None:
    processes = parse_bpmn(path.read_bytes(), path.name, supported=supported_kinds(SUPPORTED_KINDS))
    assert processes
    for process in processes:
        assert process.is_executable
        assert process.none_start_event_id is not None
        for element in process.elements.values():
            for flow_id in element.incoming:
                assert process.flow(flow_id).target_id == element.id
            for flow_id in element.outgoing:
                assert process.flow(flow_id).source_id == element.id


def test_one_task_with_diagram_interchange() -> None:
    process = only(load("one-task.bpmn"))
    assert (process.id, process.name) == ("one-task", "One task")
    assert set(process.elements) == {"start", "task", "end"}
    assert process.start_event_ids == ("start",)
    start, task, end = (process.element(i) for i in ("start", "task", "end"))
    assert (start.element_type, start.event_type, start.flow_scope_id) == ("START_EVENT", "NONE", "one-task")
    assert task.element_type == "SERVICE_TASK" and task.event_type == "UNSPECIFIED"
    assert task.job == JobDefinition(type="test", retries="3", headers=())
    assert task.incoming == ("flow-start-task",) and task.outgoing == ("flow-task-end",)
    assert end.outgoing == () and end.event_type == "NONE"
    assert [e.id for e in process.children_of("one-task")] == ["start", "task", "end"]


def test_ten_tasks_in_sequence() -> None:
    process = only(load("ten-tasks.bpmn"))
    tasks = [e for e in process.children_of(process.id) if e.element_type == "SERVICE_TASK"]
    assert [t.job.type for t in tasks if t.job] == [f"task-{i}" for i in range(1, 11)]
    assert {t.job.retries for t in tasks if t.job} == {"5"}
    current = process.element(process.none_start_event_id or "")
    visited = []
    while current.outgoing:
        current = process.element(process.flow(current.outgoing[0]).target_id)
        visited.append(current.id)
    assert visited == [*(f"task-{i}" for i in range(1, 11)), "end"]


def test_exclusive_gateway_conditions_and_default() -> None:
    process = only(load("exclusive-gateway.bpmn"))
    split = process.element("split")
    assert split.element_type == "EXCLUSIVE_GATEWAY"
    assert split.default_flow_id == "flow-small"
    conditions = {f.id: f.condition for f in process.outgoing_flows("split")}
    assert conditions == {"flow-large": "=amount > 100", "flow-small": None}
    assert process.element("join").incoming == ("flow-large-join", "flow-small-join")


def test_parallel_gateway_fork_and_join() -> None:
    process = only(load("parallel-gateway.bpmn"))
    assert process.element("fork").element_type == "PARALLEL_GATEWAY"
    assert [f.target_id for f in process.outgoing_flows("fork")] == ["ship", "bill"]
    assert [f.source_id for f in process.incoming_flows("join")] == ["ship", "bill"]


def test_error_boundary_with_code_and_catch_all() -> None:
    with_code, catch_all = load("error-boundary.bpmn")
    boundary = with_code.element("payment-failed")
    assert boundary.kind == "BOUNDARY_EVENT:ERROR"
    assert boundary.attached_to_id == "charge" and boundary.cancel_activity
    assert boundary.error is not None and boundary.error.error_code == "PAYMENT_FAILED"
    assert with_code.element("charge").boundary_event_ids == ("payment-failed",)
    assert [b.id for b in with_code.boundary_events_of("charge")] == ["payment-failed"]
    assert with_code.outgoing_flows("payment-failed")[0].target_id == "send-invoice"
    any_error = catch_all.element("catch-all-error")
    assert any_error.error is not None and any_error.error.error_code is None


def test_error_end_event() -> None:
    reject = only(load("error-end-event.bpmn")).element("reject")
    assert reject.kind == "END_EVENT:ERROR"
    assert reject.error is not None
    assert (reject.error.error_code, reject.error.error_id) == ("ORDER_REJECTED", "Error_rejected")


def test_io_mappings_and_task_headers_keep_sources_as_written() -> None:
    task = only(load("io-mapping.bpmn")).element("task")
    assert task.input_mappings == (
        VariableMapping("=order.items", "items"),
        VariableMapping("=order.customer.id", "customerId"),
        VariableMapping("warehouse-1", "warehouse"),
    )
    assert task.output_mappings == (
        VariableMapping("=reservation.id", "reservationId"),
        VariableMapping("=count(reservation.items)", "order.reservedCount"),
    )
    assert task.job == JobDefinition("reserve-stock", "=maxRetries", (("priority", "high"), ("sla", "PT1H")))


def test_pass_through_elements() -> None:
    process = only(load("pass-through.bpmn"))
    kinds = [e.kind for e in process.children_of(process.id)]
    assert kinds == [
        "START_EVENT:NONE",
        "TASK",
        "MANUAL_TASK",
        "INTERMEDIATE_THROW_EVENT:NONE",
        "END_EVENT:NONE",
    ]
    assert all(e.job is None for e in process.elements.values())


def test_user_task_is_a_job_with_zeebe_headers() -> None:
    review = only(load("user-task.bpmn")).element("review")
    assert review.element_type == "USER_TASK"
    assert review.job is not None and review.job.type == USER_TASK_JOB_TYPE
    assert dict(review.job.headers) == {
        "io.camunda.zeebe:formKey": "camunda-forms:bpmn:UserTaskForm_review",
        "io.camunda.zeebe:assignee": "demo",
        "io.camunda.zeebe:candidateGroups": '["reviewers","managers"]',
        "io.camunda.zeebe:dueDate": "2030-01-01T12:00:00Z",
        "department": "legal",
    }
    assert review.user_task is not None
    assert review.user_task.candidate_users == "=approvers"  # evaluated when the job is created
    assert not review.user_task.native


def test_native_user_task_reads_listeners_priority_headers_and_form() -> None:
    review = only(load("user-task-listeners.bpmn")).element("review")
    assert review.job is None and review.user_task is not None and review.user_task.native
    listeners = [(listener.event_type, listener.type, listener.retries) for listener in review.user_task.listeners]
    assert listeners == [
        ("creating", "tl-creating", "3"),
        ("assigning", "tl-assigning", "3"),
        ("updating", "tl-updating", "3"),
        ("completing", "tl-completing", "2"),
        ("completing", "tl-completing-audit", "3"),
        ("canceling", "tl-canceling", "3"),
    ]
    approve = only(load("user-task-native.bpmn")).element("approve")
    assert approve.user_task is not None and approve.user_task.priority == "70"
    assert approve.user_task.headers == (("department", "sales"),)
    feel = only(load("user-task-listener-feel.bpmn")).element("check")
    assert feel.user_task is not None and feel.user_task.form_id == "=formId"
    assert [listener.event_type for listener in feel.user_task.listeners] == ["creating", "assigning"]  # older names


def native_user_task(extensions: str, *, native: bool = True) -> bytes:
    marker = "<zeebe:userTask/>" if native else ""
    return process_xml(
        f'<bpmn:startEvent id="s"/>{flow("f1", "s", "ut")}'
        f'<bpmn:userTask id="ut"><bpmn:extensionElements>{marker}{extensions}</bpmn:extensionElements></bpmn:userTask>'
        f'{flow("f2", "ut", "e")}<bpmn:endEvent id="e"/>'
    )


@pytest.mark.parametrize(
    ("extensions", "native", "reason"),
    [
        (
            '<zeebe:taskListeners><zeebe:taskListener eventType="finishing" type="t"/></zeebe:taskListeners>',
            True,
            "zeebe:taskListener: Attribute 'eventType' must be one of 'creating', 'assigning', 'updating', "
            "'completing', 'canceling', but was 'finishing'",
        ),
        (
            '<zeebe:taskListeners><zeebe:taskListener eventType="completing" type=" "/></zeebe:taskListeners>',
            True,
            "zeebe:taskListener: Attribute 'type' must be present and not empty",
        ),
        (
            '<zeebe:taskListeners><zeebe:taskListener eventType="completing" type="t"/></zeebe:taskListeners>',
            False,
            "Task listeners are only supported for Camunda user tasks ('zeebe:userTask')",
        ),
        (
            '<zeebe:priorityDefinition priority="101"/>',
            True,
            "zeebe:priorityDefinition: Priority must be a number between 0 and 100, but was '101'",
        ),
    ],
)
def test_native_user_task_attributes_are_validated(extensions: str, native: bool, reason: str) -> None:
    assert f"'ut': {reason}" in problems_of(native_user_task(extensions, native=native))


def test_model_is_immutable() -> None:
    process = only(load("one-task.bpmn"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        process.element("task").name = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        process.elements["other"] = process.element("task")  # type: ignore[index]
    assert isinstance(process.element("task").incoming, tuple)


def test_checksum_identifies_identical_resources() -> None:
    data = (FIXTURES / "one-task.bpmn").read_bytes()
    assert resource_checksum(data) == resource_checksum(bytes(data))
    assert resource_checksum(data) != resource_checksum(data + b" ")
    assert len(resource_checksum(data)) == 32


# --- a realistic model with everything the engine will run later ----------------------------------

MODELER_STYLE = b"""<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:bpmndi="http://www.omg.org/spec/BPMN/20100524/DI" xmlns:dc="http://www.omg.org/spec/DD/20100524/DC"
    xmlns:di="http://www.omg.org/spec/DD/20100524/DI" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0"
    xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:modeler="http://camunda.org/schema/modeler/1.0"
    id="Definitions_order" targetNamespace="http://bpmn.io/schema/bpmn" exporter="Camunda Modeler"
    exporterVersion="5.22.0" modeler:executionPlatform="Camunda Cloud"
    modeler:executionPlatformVersion="8.4.0">
  <bpmn:collaboration id="Collaboration_1">
    <bpmn:participant id="Participant_shop" name="Shop" processRef="order" />
  </bpmn:collaboration>
  <bpmn:process id="order" name="Order fulfilment" isExecutable="true">
    <bpmn:documentation>Fulfils an order end to end.</bpmn:documentation>
    <bpmn:extensionElements>
      <zeebe:properties><zeebe:property name="owner" value="shop-team" /></zeebe:properties>
    </bpmn:extensionElements>
    <bpmn:laneSet id="LaneSet_1"><bpmn:lane id="Lane_1" name="Shop"><bpmn:flowNodeRef>start</bpmn:flowNodeRef>
    </bpmn:lane></bpmn:laneSet>
    <bpmn:startEvent id="start" name="Order placed">
      <bpmn:documentation>A customer placed an order.</bpmn:documentation>
      <bpmn:extensionElements><zeebe:properties><zeebe:property name="ui" value="x" /></zeebe:properties>
      </bpmn:extensionElements>
      <bpmn:outgoing>f1</bpmn:outgoing>
    </bpmn:startEvent>
    <bpmn:startEvent id="start-message" name="Order by mail">
      <bpmn:messageEventDefinition id="med-start" messageRef="Message_mail" />
    </bpmn:startEvent>
    <bpmn:startEvent id="start-timer">
      <bpmn:timerEventDefinition id="ted-start">
        <bpmn:timeCycle xsi:type="bpmn:tFormalExpression">R/PT1H</bpmn:timeCycle>
      </bpmn:timerEventDefinition>
    </bpmn:startEvent>
    <bpmn:sequenceFlow id="f-mail" sourceRef="start-message" targetRef="script" />
    <bpmn:sequenceFlow id="f-timer" sourceRef="start-timer" targetRef="script" />
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="script" />
    <bpmn:scriptTask id="script" name="Total">
      <bpmn:extensionElements><zeebe:script expression="=sum(items.price)" resultVariable="total" />
      </bpmn:extensionElements>
    </bpmn:scriptTask>
    <bpmn:sequenceFlow id="f2" sourceRef="script" targetRef="decide" />
    <bpmn:businessRuleTask id="decide">
      <bpmn:extensionElements><zeebe:calledDecision decisionId="discount" resultVariable="discount" />
      </bpmn:extensionElements>
    </bpmn:businessRuleTask>
    <bpmn:sequenceFlow id="f3" sourceRef="decide" targetRef="pick" />
    <bpmn:subProcess id="pick" name="Pick items">
      <bpmn:multiInstanceLoopCharacteristics isSequential="true">
        <bpmn:extensionElements>
          <zeebe:loopCharacteristics inputCollection="=items" inputElement="item" outputCollection="results"
              outputElement="=result" />
        </bpmn:extensionElements>
        <bpmn:completionCondition xsi:type="bpmn:tFormalExpression">=allPicked</bpmn:completionCondition>
      </bpmn:multiInstanceLoopCharacteristics>
      <bpmn:startEvent id="pick-start" />
      <bpmn:sequenceFlow id="pf1" sourceRef="pick-start" targetRef="pick-wait" />
      <bpmn:receiveTask id="pick-wait" messageRef="Message_picked" />
      <bpmn:sequenceFlow id="pf2" sourceRef="pick-wait" targetRef="pick-end" />
      <bpmn:endEvent id="pick-end" />
    </bpmn:subProcess>
    <bpmn:boundaryEvent id="pick-timeout" cancelActivity="false" attachedToRef="pick">
      <bpmn:timerEventDefinition id="ted-b"><bpmn:timeDuration>PT4H</bpmn:timeDuration>
      </bpmn:timerEventDefinition>
    </bpmn:boundaryEvent>
    <bpmn:sequenceFlow id="fb" sourceRef="pick-timeout" targetRef="escalate" />
    <bpmn:intermediateThrowEvent id="escalate">
      <bpmn:escalationEventDefinition id="eed" escalationRef="Escalation_late" />
    </bpmn:intermediateThrowEvent>
    <bpmn:sequenceFlow id="fb2" sourceRef="escalate" targetRef="late-end" />
    <bpmn:endEvent id="late-end" />
    <bpmn:sequenceFlow id="f4" sourceRef="pick" targetRef="ship-split" />
    <bpmn:inclusiveGateway id="ship-split" default="f-standard" />
    <bpmn:sequenceFlow id="f-express" sourceRef="ship-split" targetRef="call">
      <bpmn:conditionExpression xsi:type="bpmn:tFormalExpression">=express</bpmn:conditionExpression>
    </bpmn:sequenceFlow>
    <bpmn:sequenceFlow id="f-standard" sourceRef="ship-split" targetRef="wait" />
    <bpmn:callActivity id="call">
      <bpmn:extensionElements>
        <zeebe:calledElement processId="=shippingProcess" propagateAllChildVariables="false" />
      </bpmn:extensionElements>
    </bpmn:callActivity>
    <bpmn:sequenceFlow id="f5" sourceRef="call" targetRef="link-out" />
    <bpmn:intermediateThrowEvent id="link-out"><bpmn:linkEventDefinition id="led1" name="done" />
    </bpmn:intermediateThrowEvent>
    <bpmn:intermediateCatchEvent id="link-in"><bpmn:linkEventDefinition id="led2" name="done" />
    </bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f6" sourceRef="link-in" targetRef="signal-end" />
    <bpmn:endEvent id="signal-end"><bpmn:signalEventDefinition id="sed" signalRef="Signal_shipped" />
    </bpmn:endEvent>
    <bpmn:eventBasedGateway id="wait" />
    <bpmn:sequenceFlow id="f7" sourceRef="wait" targetRef="paid" />
    <bpmn:sequenceFlow id="f8" sourceRef="wait" targetRef="too-late" />
    <bpmn:intermediateCatchEvent id="paid">
      <bpmn:messageEventDefinition id="med-paid" messageRef="Message_paid" />
    </bpmn:intermediateCatchEvent>
    <bpmn:intermediateCatchEvent id="too-late">
      <bpmn:timerEventDefinition id="ted-late"><bpmn:timeDate>=deadline</bpmn:timeDate>
      </bpmn:timerEventDefinition>
    </bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f9" sourceRef="paid" targetRef="done" />
    <bpmn:sequenceFlow id="f10" sourceRef="too-late" targetRef="terminate" />
    <bpmn:endEvent id="done" />
    <bpmn:endEvent id="terminate"><bpmn:terminateEventDefinition id="ted-term" /></bpmn:endEvent>
    <bpmn:subProcess id="on-cancel" triggeredByEvent="true">
      <bpmn:startEvent id="on-cancel-start" isInterrupting="false">
        <bpmn:messageEventDefinition id="med-cancel" messageRef="Message_cancel" />
      </bpmn:startEvent>
      <bpmn:sequenceFlow id="cf1" sourceRef="on-cancel-start" targetRef="on-cancel-end" />
      <bpmn:endEvent id="on-cancel-end" />
    </bpmn:subProcess>
    <bpmn:textAnnotation id="note"><bpmn:text>Keep it fast</bpmn:text></bpmn:textAnnotation>
    <bpmn:association id="assoc" sourceRef="start" targetRef="note" />
  </bpmn:process>
  <bpmn:message id="Message_mail" name="order-by-mail" />
  <bpmn:message id="Message_picked" name="item-picked">
    <bpmn:extensionElements><zeebe:subscription correlationKey="=item.id" /></bpmn:extensionElements>
  </bpmn:message>
  <bpmn:message id="Message_paid" name="paid">
    <bpmn:extensionElements><zeebe:subscription correlationKey="=orderId" /></bpmn:extensionElements>
  </bpmn:message>
  <bpmn:message id="Message_cancel" name="cancel">
    <bpmn:extensionElements><zeebe:subscription correlationKey="=orderId" /></bpmn:extensionElements>
  </bpmn:message>
  <bpmn:signal id="Signal_shipped" name="shipped" />
  <bpmn:escalation id="Escalation_late" name="Late" escalationCode="LATE" />
  <bpmndi:BPMNDiagram id="BPMNDiagram_1">
    <bpmndi:BPMNPlane id="BPMNPlane_1" bpmnElement="Collaboration_1">
      <bpmndi:BPMNShape id="start_di" bpmnElement="start"><dc:Bounds x="1" y="2" width="36" height="36" />
        <bpmndi:BPMNLabel><dc:Bounds x="1" y="40" width="60" height="14" /></bpmndi:BPMNLabel>
      </bpmndi:BPMNShape>
      <bpmndi:BPMNEdge id="f1_di" bpmnElement="f1"><di:waypoint x="1" y="2" /><di:waypoint x="3" y="4" />
      </bpmndi:BPMNEdge>
    </bpmndi:BPMNPlane>
  </bpmndi:BPMNDiagram>
</bpmn:definitions>
"""


def test_modeler_style_model_is_read_completely() -> None:
    process = only(parse_bpmn(MODELER_STYLE, "order.bpmn"))
    assert process.start_event_ids == ("start", "start-message", "start-timer")
    assert process.none_start_event_id == "start"
    element = process.element
    assert element("start").properties == (("ui", "x"),)
    assert element("start-message").message is not None
    assert element("start-message").message.name == "order-by-mail"
    assert element("start-timer").timer is not None and element("start-timer").timer.kind == "cycle"
    script = element("script").script
    assert script is not None and (script.expression, script.result_variable) == (
        "=sum(items.price)",
        "total",
    )
    assert element("script").job is None
    assert element("decide").called_decision is not None
    pick = element("pick")
    assert pick.element_type == "SUB_PROCESS" and pick.multi_instance is not None
    assert pick.multi_instance.is_sequential and pick.multi_instance.input_collection == "=items"
    assert pick.multi_instance.output_element == "=result"
    assert pick.multi_instance.completion_condition == "=allPicked"
    assert [c.id for c in process.children_of("pick")] == ["pick-start", "pick-wait", "pick-end"]
    assert process.none_start_event_of("pick") == element("pick-start")
    assert element("pick-wait").flow_scope_id == "pick"
    receive = element("pick-wait")
    assert receive.message is not None and receive.message.correlation_key == "=item.id"
    timeout = element("pick-timeout")
    assert not timeout.cancel_activity and timeout.timer is not None and timeout.timer.expression == "PT4H"
    assert element("escalate").escalation_code == "LATE"
    assert element("ship-split").kind == "INCLUSIVE_GATEWAY" and element("ship-split").default_flow_id == "f-standard"
    called = element("call").called_element
    assert called is not None and called.process_id == "=shippingProcess"
    assert not called.propagate_all_child_variables and called.propagate_all_parent_variables
    assert element("link-out").link_name == "done" and element("link-in").kind == "INTERMEDIATE_CATCH_EVENT:LINK"
    assert element("signal-end").signal_name == "shipped"
    assert element("wait").kind == "EVENT_BASED_GATEWAY"
    assert element("too-late").timer is not None and element("too-late").timer.kind == "date"
    assert element("terminate").kind == "END_EVENT:TERMINATE"
    on_cancel = element("on-cancel")
    assert on_cancel.element_type == "EVENT_SUB_PROCESS" and on_cancel.triggered_by_event
    assert process.event_sub_processes_of("order") == (on_cancel,)
    assert not element("on-cancel-start").is_interrupting
    assert "note" not in process.elements and "Lane_1" not in process.elements


def test_the_engine_runs_every_element_of_the_modeler_style_model() -> None:
    # message starts, signals, inclusive gateways, multi-instance sub-processes, zeebe:script and
    # zeebe:calledDecision (business rule tasks evaluated by the engine) all run: nothing is refused
    processes = parse_bpmn(MODELER_STYLE, "test.bpmn", supported=supported_kinds(SUPPORTED_KINDS))
    decide = next(p for p in processes if "decide" in p.elements).element("decide")
    assert decide.called_decision is not None and decide.job is None


def test_business_rule_tasks_evaluated_by_the_engine_need_their_engine_kind() -> None:
    body = linear(
        '<bpmn:businessRuleTask id="m0"><bpmn:extensionElements><zeebe:calledDecision decisionId="d" '
        'resultVariable="r"/></bpmn:extensionElements></bpmn:businessRuleTask>'
    )
    kinds = SUPPORTED_KINDS - {"BUSINESS_RULE_TASK:ENGINE"}
    problems = problems_of(process_xml(body), supported=supported_kinds(kinds))
    assert (
        "'m0': Elements of kind 'business rule task' without a job worker ('zeebe:taskDefinition') "
        "are not supported yet" in problems
    )


def test_called_decision_binding_types() -> None:
    def task(attributes: str) -> str:
        return linear(
            '<bpmn:businessRuleTask id="m0"><bpmn:extensionElements><zeebe:calledDecision decisionId="d" '
            f'resultVariable="r" {attributes}/></bpmn:extensionElements></bpmn:businessRuleTask>'
        )

    tagged = only(parse_bpmn(process_xml(task('bindingType="versionTag" versionTag="v1"')), "t.bpmn"))
    called = tagged.element("m0").called_decision
    assert called is not None and (called.binding_type, called.version_tag) == ("versionTag", "v1")
    assert problems_of(process_xml(task('bindingType="sometimes"'))) == (
        "'m0': zeebe:calledDecision: Attribute 'bindingType' must be one of deployment, latest, versionTag",
    )
    assert problems_of(process_xml(task('bindingType="versionTag"'))) == (
        "'m0': zeebe:calledDecision: Attribute 'versionTag' must be present and not empty with bindingType "
        "'versionTag'",
    )


def test_multi_instance_needs_its_own_kind() -> None:
    body = linear(
        '<bpmn:task id="m0"><bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements>'
        '<zeebe:loopCharacteristics inputCollection="=xs"/></bpmn:extensionElements>'
        "</bpmn:multiInstanceLoopCharacteristics></bpmn:task>"
    )
    kinds = SUPPORTED_KINDS - {"MULTI_INSTANCE_BODY"}
    assert problems_of(process_xml(body), supported=supported_kinds(kinds)) == (
        "'m0': Multi-instance activities are not supported yet",
    )
    assert parse_bpmn(process_xml(body), "mi.bpmn", supported=supported_kinds(kinds | {"MULTI_INSTANCE_BODY"}))


# --- validation rules ------------------------------------------------------------------------------


def test_no_executable_process() -> None:
    assert problems_of((FIXTURES / "invalid" / "no-executable-process.bpmn").read_bytes()) == (
        "Must contain at least one executable process",
    )


def test_not_a_bpmn_document() -> None:
    (problem,) = problems_of(b'<?xml version="1.0"?><html><body/></html>')
    assert "Not a BPMN 2.0 definitions document" in problem and "'html'" in problem


def test_missing_task_definition_fixture() -> None:
    assert problems_of((FIXTURES / "invalid" / "missing-task-definition.bpmn").read_bytes()) == (
        "'task': Must have exactly one 'zeebe:taskDefinition' extension element",
    )


@pytest.mark.parametrize("tag", ["serviceTask", "sendTask"])
def test_job_tasks_need_exactly_one_task_definition(tag: str) -> None:
    two = '<zeebe:taskDefinition type="a"/><zeebe:taskDefinition type="b"/>'
    body = linear(f'<bpmn:{tag} id="m0"><bpmn:extensionElements>{two}</bpmn:extensionElements></bpmn:{tag}>')
    assert problems_of(process_xml(body)) == ("'m0': Must have exactly one 'zeebe:taskDefinition' extension element",)


def test_task_definition_type_must_not_be_empty() -> None:
    body = linear(service_task("m0", job_type="  "))
    assert problems_of(process_xml(body)) == (
        "'m0': zeebe:taskDefinition: Attribute 'type' must be present and not empty",
    )


def test_script_and_business_rule_tasks_need_an_implementation() -> None:
    body = linear('<bpmn:scriptTask id="m0"/>', '<bpmn:businessRuleTask id="m1"/>')
    assert problems_of(process_xml(body)) == (
        "'m0': Must have either one 'zeebe:script' or one 'zeebe:taskDefinition' extension element",
        "'m1': Must have either one 'zeebe:calledDecision' or one 'zeebe:taskDefinition' extension element",
    )


def test_script_task_with_task_definition_is_a_job() -> None:
    task = (
        '<bpmn:scriptTask id="m0"><bpmn:extensionElements><zeebe:taskDefinition type="js" retries="1"/>'
        '<zeebe:taskHeaders><zeebe:header key="language" value="javascript"/></zeebe:taskHeaders>'
        "</bpmn:extensionElements></bpmn:scriptTask>"
    )
    process = only(parse_bpmn(process_xml(linear(task)), "s.bpmn"))
    assert process.element("m0").job == JobDefinition("js", "1", (("language", "javascript"),))


def test_duplicate_ids() -> None:
    body = linear(service_task("m0"), service_task("m0"))
    assert "'m0': The id is used by 2 elements; ids must be unique in a resource" in problems_of(process_xml(body))


def test_sequence_flow_with_unknown_source_and_target() -> None:
    body = linear() + flow("bad", "ghost", "phantom")
    assert problems_of(process_xml(body)) == (
        "'bad': SequenceFlow has sourceRef 'ghost' which cannot be resolved",
        "'bad': SequenceFlow has targetRef 'phantom' which cannot be resolved",
    )


def test_sequence_flow_without_refs() -> None:
    body = linear() + '<bpmn:sequenceFlow id="bad"/>'
    assert problems_of(process_xml(body)) == (
        "Does not conform to the BPMN 2.0 XML schema (line: 3): Element 'bpmn:sequenceFlow': "
        "The attribute 'sourceRef' is required but missing.",
        "Does not conform to the BPMN 2.0 XML schema (line: 3): Element 'bpmn:sequenceFlow': "
        "The attribute 'targetRef' is required but missing.",
        "'bad': SequenceFlow is missing required attribute sourceRef",
        "'bad': SequenceFlow is missing required attribute targetRef",
    )


def test_element_without_incoming_flow() -> None:
    body = linear() + service_task("orphan")
    assert problems_of(process_xml(body)) == ("'orphan': Must have at least one incoming sequence flow",)


def test_start_event_with_incoming_and_end_event_with_outgoing() -> None:
    body = linear(service_task("m0")) + flow("back", "m0", "start") + flow("out", "end", "m0")
    assert problems_of(process_xml(body)) == (
        "'start': Start events must not have incoming sequence flows",
        "'end': End events must not have outgoing sequence flows to other elements.",
    )


def test_exclusive_gateway_flows_need_a_condition_unless_default() -> None:
    body = (
        '<bpmn:startEvent id="start"/><bpmn:exclusiveGateway id="gw"/>'
        + service_task("a")
        + service_task("b")
        + flow("f0", "start", "gw")
        + flow("fa", "gw", "a", "=x")
        + flow("fb", "gw", "b")
    )
    assert problems_of(process_xml(body)) == ("'fb': Must have a condition or be default flow",)
    with_default = body.replace('<bpmn:exclusiveGateway id="gw"/>', '<bpmn:exclusiveGateway id="gw" default="fb"/>')
    assert only(parse_bpmn(process_xml(with_default), "x.bpmn")).element("gw").default_flow_id == "fb"


def test_exclusive_gateway_with_a_single_unconditional_flow_is_fine() -> None:
    body = linear('<bpmn:exclusiveGateway id="m0"/>')
    assert only(parse_bpmn(process_xml(body), "x.bpmn")).element("m0").outgoing == ("f1",)


def test_default_flow_must_start_at_the_gateway() -> None:
    body = linear('<bpmn:exclusiveGateway id="m0" default="f0"/>')
    assert problems_of(process_xml(body)) == ("'m0': Default flow 'f0' must start at gateway",)


def test_conditions_only_at_exclusive_or_inclusive_gateways() -> None:
    body = (
        '<bpmn:startEvent id="start"/><bpmn:parallelGateway id="fork"/>'
        + service_task("a")
        + service_task("b")
        + flow("f0", "start", "fork")
        + flow("fa", "fork", "a", "=x")
        + flow("fb", "fork", "b")
    )
    assert problems_of(process_xml(body)) == (
        "'fork': Conditional sequence flows are only supported at exclusive or inclusive gateway",
    )


def test_static_condition_is_rejected() -> None:
    body = (
        '<bpmn:startEvent id="start"/><bpmn:exclusiveGateway id="gw" default="fb"/>'
        + service_task("a")
        + service_task("b")
        + flow("f0", "start", "gw")
        + flow("fa", "gw", "a", "${amount > 100}")
        + flow("fb", "gw", "b")
    )
    (problem,) = problems_of(process_xml(body))
    assert problem.startswith("'fa': conditionExpression: Expected expression but found static value '${amount")


def test_boundary_event_attached_to_unknown_element() -> None:
    boundary = '<bpmn:boundaryEvent id="b" attachedToRef="ghost"><bpmn:errorEventDefinition/></bpmn:boundaryEvent>'
    assert problems_of(process_xml(linear(service_task("m0")) + boundary)) == (
        "'b': Attached to 'ghost', which is not an element of the process",
    )


def test_boundary_event_needs_an_activity_and_no_incoming_flow() -> None:
    boundary = (
        '<bpmn:boundaryEvent id="b" attachedToRef="start"><bpmn:errorEventDefinition/></bpmn:boundaryEvent>'
        '<bpmn:boundaryEvent id="c"><bpmn:errorEventDefinition/></bpmn:boundaryEvent>'
    )
    body = linear(service_task("m0")) + boundary + flow("into-b", "m0", "b")
    assert problems_of(process_xml(body)) == (
        "Does not conform to the BPMN 2.0 XML schema (line: 3): Element 'bpmn:boundaryEvent': "
        "The attribute 'attachedToRef' is required but missing.",
        "'b': Cannot have incoming sequence flows",
        "'b': Must be attached to an activity, but 'start' is not one",
        "'c': Must be attached to an activity",
    )


def test_error_events_reference_known_errors_with_codes() -> None:
    body = (
        linear(service_task("m0"))
        + '<bpmn:boundaryEvent id="b1" attachedToRef="m0"><bpmn:errorEventDefinition errorRef="nope"/>'
        "</bpmn:boundaryEvent>"
        + '<bpmn:boundaryEvent id="b2" attachedToRef="m0"><bpmn:errorEventDefinition errorRef="err-expr"/>'
        "</bpmn:boundaryEvent>"
        + '<bpmn:endEvent id="e1"><bpmn:errorEventDefinition/></bpmn:endEvent>'
        + '<bpmn:endEvent id="e2"><bpmn:errorEventDefinition errorRef="err-no-code"/></bpmn:endEvent>'
        + flow("fb1", "b1", "e1")
        + flow("fb2", "b2", "e2")
    )
    errors = '<bpmn:error id="err-no-code" name="x"/><bpmn:error id="err-expr" errorCode="=code"/>'
    assert problems_of(process_xml(body, extra=errors)) == (
        "'b1': Referenced error 'nope' is not defined",
        "'b2': The errorCode of the error catch event is not allowed to be an expression",
        "'e1': Must reference an error",
        "'e2': ErrorCode must be present and not empty",
    )


def test_error_end_event_code_may_be_an_expression() -> None:
    end = '<bpmn:endEvent id="m0"><bpmn:errorEventDefinition errorRef="e"/></bpmn:endEvent>'
    body = '<bpmn:startEvent id="start"/>' + end + flow("f", "start", "m0")
    process = only(parse_bpmn(process_xml(body, extra='<bpmn:error id="e" errorCode="=code"/>'), "e.bpmn"))
    assert process.element("m0").error is not None and process.element("m0").error.error_code == "=code"


def test_process_without_none_start_event_can_still_deploy() -> None:
    body = (
        '<bpmn:startEvent id="s"><bpmn:messageEventDefinition messageRef="msg"/></bpmn:startEvent>'
        '<bpmn:endEvent id="e"/>' + flow("f", "s", "e")
    )
    process = only(parse_bpmn(process_xml(body, extra='<bpmn:message id="msg" name="go"/>'), "m.bpmn"))
    assert process.none_start_event_id is None and process.start_event_ids == ("s",)


def test_process_needs_a_start_event_and_at_most_one_none_start() -> None:
    assert problems_of(process_xml('<bpmn:endEvent id="e"/>')) == (
        "'p': Must have at least one start event",
        "'e': Must have at least one incoming sequence flow",
    )
    two = '<bpmn:startEvent id="s1"/><bpmn:startEvent id="s2"/>'
    assert problems_of(process_xml(two)) == ("'p': Multiple none start events are not allowed",)


def test_unsupported_element_types_and_event_definitions() -> None:
    body = linear('<bpmn:complexGateway id="m0"/>') + (
        '<bpmn:intermediateCatchEvent id="ice"/>'
        '<bpmn:endEvent id="cancel"><bpmn:cancelEventDefinition/></bpmn:endEvent>'
        + flow("x1", "start", "ice")
        + flow("x2", "start", "cancel")
    )
    problems = problems_of(process_xml(body))
    assert "'m0': Elements of type 'complexGateway' are not supported" in problems
    assert "'ice': Must have exactly one event definition" in problems
    assert any(p.startswith("'cancel': End events must be one of: none, message, error") for p in problems)


def test_message_catch_events_need_a_message_with_a_correlation_key() -> None:
    body = linear(
        '<bpmn:intermediateCatchEvent id="m0"><bpmn:messageEventDefinition messageRef="msg"/>'
        "</bpmn:intermediateCatchEvent>",
        '<bpmn:receiveTask id="m1"/>',
    )
    assert problems_of(process_xml(body, extra='<bpmn:message id="msg" name="go"/>')) == (
        "'m0': Must have exactly one 'zeebe:subscription' with a non-empty 'correlationKey' attribute",
        "'m1': Must reference a message",
    )


def test_timer_rules() -> None:
    body = linear(
        '<bpmn:intermediateCatchEvent id="m0"><bpmn:timerEventDefinition>'
        "<bpmn:timeCycle>R/PT1M</bpmn:timeCycle>"
        "</bpmn:timerEventDefinition></bpmn:intermediateCatchEvent>",
        '<bpmn:intermediateCatchEvent id="m1"><bpmn:timerEventDefinition/></bpmn:intermediateCatchEvent>',
    )
    assert problems_of(process_xml(body)) == (
        "'m0': Timer cycle is not allowed here; use one of: date, duration",
        "'m1': Timer must have exactly one of: timeDuration, timeDate, timeCycle",
    )


def _timer_boundary(tag: str, value: str, *, interrupting: bool = False) -> bytes:
    """A service task with one timer boundary event ``b`` whose definition is ``<tag>value</tag>``."""
    boundary = (
        f'<bpmn:boundaryEvent id="b" attachedToRef="m0" cancelActivity="{str(interrupting).lower()}">'
        f"<bpmn:timerEventDefinition><bpmn:{tag}>{value}</bpmn:{tag}></bpmn:timerEventDefinition>"
        '</bpmn:boundaryEvent><bpmn:endEvent id="after"/>' + flow("fb", "b", "after")
    )
    return process_xml(linear(service_task("m0")) + boundary)


@pytest.mark.parametrize(
    ("tag", "value", "problem"),
    [
        ("timeDuration", "10 seconds", "'b': Invalid duration format '10 seconds' for timer"),
        ("timeDuration", "PT0S", "'b': Expected a positive duration for the timer, but got 'PT0S'"),
        ("timeDate", "tomorrow", "'b': Invalid date-time format 'tomorrow' for timer"),
        ("timeCycle", "R5", "'b': Invalid time cycle format 'R5' for timer; expected e.g. 'R5/PT10S'"),
        ("timeCycle", "Rx/PT1S", "'b': Invalid repetitions 'Rx' in time cycle 'Rx/PT1S'"),
        ("timeCycle", "R3/PT", "'b': Invalid duration format 'PT' for timer"),
        (
            "timeCycle",
            "0 0 9-17 * *",
            "'b': Invalid cron expression '0 0 9-17 * *' for timer: expected 6 fields "
            "(second minute hour day-of-month month day-of-week) or a macro such as @daily, but found 5",
        ),
        (
            "timeCycle",
            "0 0 9 * * FOO",
            "'b': Invalid cron expression '0 0 9 * * FOO' for timer: day-of-week field 'FOO' has 'FOO', "
            "which is not a number or a name (MON-SUN)",
        ),
        ("timeCycle", "0 0 0 30 2 *", "'b': Invalid cron expression '0 0 0 30 2 *' for timer: it never matches"),
    ],
)
def test_static_timer_values_are_checked_at_deployment(tag: str, value: str, problem: str) -> None:
    problems = problems_of(_timer_boundary(tag, value))
    assert len(problems) == 1 and problems[0].startswith(problem), problems


@pytest.mark.parametrize(
    ("tag", "value"),
    [
        ("timeCycle", "0 0 9-17 * * MON-FRI"),
        ("timeCycle", "*/10 * * * * *"),
        ("timeCycle", "0 0 0 L * *"),
        ("timeCycle", "0 15 10 ? * 6#3"),
        ("timeCycle", "@daily"),
        ("timeCycle", "R5/PT10S"),
        ("timeCycle", "R/2030-01-01T00:00:00Z/P1D"),
        ("timeDuration", "P1DT2H"),
        ("timeDate", "2030-01-01T00:00:00Z"),
        ("timeCycle", "=cycle"),  # FEEL: evaluated when the timer is created, not at deployment
        ("timeCycle", '="not a cycle"'),
        ("timeDate", "=date and time(deadline)"),
        ("timeDuration", "=wait"),
    ],
)
def test_valid_static_timers_and_expressions_deploy(tag: str, value: str) -> None:
    process = only(parse_bpmn(_timer_boundary(tag, value), "test.bpmn"))
    timer = process.element("b").timer
    assert timer is not None and timer.expression == value


def test_a_static_cycle_where_it_is_not_allowed_reports_only_that() -> None:
    assert problems_of(_timer_boundary("timeCycle", "not a cycle", interrupting=True)) == (
        "'b': Timer cycle is not allowed here; use one of: date, duration",
    )


def test_link_throw_needs_a_matching_catch() -> None:
    body = '<bpmn:startEvent id="start"/><bpmn:intermediateThrowEvent id="t">'
    body += '<bpmn:linkEventDefinition name="x"/></bpmn:intermediateThrowEvent>' + flow("f", "start", "t")
    assert problems_of(process_xml(body)) == (
        "'t': Can't find a catch link event for the throw link event with the name 'x'",
    )


def test_link_rules_still_apply_now_that_the_engine_runs_link_events() -> None:
    def throw(element_id: str, name: str) -> str:
        return (
            f'<bpmn:intermediateThrowEvent id="{element_id}"><bpmn:linkEventDefinition name="{name}"/>'
            "</bpmn:intermediateThrowEvent>"
        )

    def catch(element_id: str, name: str) -> str:
        return (
            f'<bpmn:intermediateCatchEvent id="{element_id}"><bpmn:linkEventDefinition name="{name}"/>'
            "</bpmn:intermediateCatchEvent>"
        )

    sub = (
        '<bpmn:subProcess id="sub"><bpmn:startEvent id="sub-start"/>'
        + throw("sub-throw", "outer")
        + flow("sf", "sub-start", "sub-throw")
        + "</bpmn:subProcess>"
    )
    body = (
        '<bpmn:startEvent id="start"/><bpmn:parallelGateway id="fork"/>'
        + throw("jump", "nowhere")
        + throw("jump-twice", "twice")
        + catch("twice-1", "twice")
        + catch("twice-2", "twice")
        + catch("outer-catch", "outer")
        + '<bpmn:endEvent id="end"/>'
        + flow("f0", "start", "fork")
        + flow("f1", "fork", "jump")
        + flow("f2", "fork", "jump-twice")
        + flow("f3", "fork", "sub")
        + flow("f4", "jump-twice", "end")
        + flow("f5", "fork", "outer-catch")
        + flow("f6", "twice-1", "end")
        + flow("f7", "twice-2", "end")
        + flow("f8", "outer-catch", "end")
        + flow("f9", "sub", "end")
        + sub
    )
    problems = problems_of(process_xml(body), supported=supported_kinds(SUPPORTED_KINDS))
    assert set(problems) == {
        "'jump-twice': Link throw events must not have outgoing sequence flows",
        "'outer-catch': Link catch events must not have incoming sequence flows",
        "'p': Multiple intermediate catch link events with the name 'twice' exist",
        "'jump': Can't find a catch link event for the throw link event with the name 'nowhere'",
        # a link never leaves its scope: the catch of that name in the parent does not count
        "'sub-throw': Can't find a catch link event for the throw link event with the name 'outer'",
    }, problems
    assert not any("not supported" in p for p in problems)


def test_link_events_fixtures_are_runnable() -> None:
    processes = parse_bpmn(
        (FIXTURES / "link-events.bpmn").read_bytes(), "link.bpmn", supported=supported_kinds(SUPPORTED_KINDS)
    )
    process = only(processes)
    assert process.element("to-b").kind == "INTERMEDIATE_THROW_EVENT:LINK"
    assert process.element("from-a").kind == "INTERMEDIATE_CATCH_EVENT:LINK"
    assert process.element("to-b").link_name == process.element("from-a").link_name == "toB"
    assert process.element("inner-land").flow_scope_id == "inner"


def test_sub_process_rules() -> None:
    sub = (
        '<bpmn:subProcess id="m0"><bpmn:endEvent id="inner-end"/></bpmn:subProcess>'
        '<bpmn:subProcess id="esp" triggeredByEvent="true">'
        '<bpmn:startEvent id="esp-start"/></bpmn:subProcess>'
    )
    problems = problems_of(process_xml(linear(sub)))
    assert "'m0': Must have exactly one start event" in problems
    assert "'inner-end': Must have at least one incoming sequence flow" in problems
    assert "'esp-start': Must have exactly one event definition" in problems


def test_call_activity_and_multi_instance_rules() -> None:
    body = linear(
        '<bpmn:callActivity id="m0"/>',
        '<bpmn:task id="m1"><bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements>'
        '<zeebe:loopCharacteristics inputCollection="" outputCollection="out"/></bpmn:extensionElements>'
        "</bpmn:multiInstanceLoopCharacteristics></bpmn:task>",
    )
    assert problems_of(process_xml(body)) == (
        "'m0': Must have exactly one 'zeebe:calledElement' extension element",
        "'m1': Attribute 'inputCollection' must be present and not empty",
        "'m1': Attribute 'outputElement' must be present if the attribute 'outputCollection' is set",
    )


def called(attributes: str) -> str:
    return (
        '<bpmn:callActivity id="m0"><bpmn:extensionElements>'
        f"<zeebe:calledElement {attributes}/></bpmn:extensionElements></bpmn:callActivity>"
    )


def test_call_activity_bindings_and_process_version_tags_are_read() -> None:
    tag = '<bpmn:extensionElements><zeebe:versionTag value="v1.2"/></bpmn:extensionElements>'
    process = only(parse_bpmn(process_xml(tag + linear(called('processId="=target"'))), "t.bpmn"))
    assert process.version_tag == "v1.2"
    assert process.element("m0").called_element == CalledElement("=target")  # latest, both propagations
    body = linear(called('processId="c" bindingType="versionTag" versionTag="v2" propagateAllChildVariables="false"'))
    element = only(parse_bpmn(process_xml(body), "t.bpmn")).element("m0")
    assert element.called_element == CalledElement("c", False, True, "versionTag", "v2")
    assert only(parse_bpmn(process_xml(linear(called('processId="c"'))), "t.bpmn")).version_tag is None
    body = linear(called('processId="c" bindingType="deployment"'))
    assert only(parse_bpmn(process_xml(body), "t.bpmn")).element("m0").called_element == CalledElement(
        "c", binding_type="deployment"
    )


def test_call_activity_binding_rules() -> None:
    assert problems_of(process_xml(linear(called('processId="c" bindingType="newest"')))) == (
        "'m0': zeebe:calledElement: Attribute 'bindingType' must be one of deployment, latest, versionTag",
    )
    assert problems_of(process_xml(linear(called('processId="c" bindingType="versionTag"')))) == (
        "'m0': zeebe:calledElement: Attribute 'versionTag' must be present and not empty with bindingType 'versionTag'",
    )
    empty_tag = '<bpmn:extensionElements><zeebe:versionTag value=" "/></bpmn:extensionElements>'
    assert problems_of(process_xml(empty_tag + linear())) == (
        "'p': zeebe:versionTag: Attribute 'value' must be present and not empty",
    )


def test_io_mapping_target_is_required() -> None:
    task = service_task("m0").replace(
        "</bpmn:extensionElements>",
        '<zeebe:ioMapping><zeebe:input source="=a"/></zeebe:ioMapping></bpmn:extensionElements>',
    )
    assert problems_of(process_xml(linear(task))) == (
        "'m0': zeebe:input: Attribute 'target' must be present and not empty",
    )


# --- FEEL expressions --------------------------------------------------------------------------------


def test_expressions_are_checked_without_their_equals_sign() -> None:
    seen: list[str] = []

    def check(expression: str) -> str | None:
        seen.append(expression)
        return "failed to parse expression" if "!!" in expression else None

    parse_bpmn((FIXTURES / "io-mapping.bpmn").read_bytes(), "io.bpmn", check_expression=check)
    assert seen == [
        "order.items",
        "order.customer.id",
        "reservation.id",
        "count(reservation.items)",
        "maxRetries",
    ]

    bad = (FIXTURES / "exclusive-gateway.bpmn").read_bytes().replace(b"=amount &gt; 100", b"=amount !! 100")
    assert problems_of(bad, check_expression=check) == (
        "'flow-large': conditionExpression: failed to parse expression",
    )


def test_all_expression_sites_reach_the_checker() -> None:
    failing: list[str] = []

    def reject_all(expression: str) -> str:
        failing.append(expression)
        return "nope"

    problems = problems_of(MODELER_STYLE, check_expression=reject_all)
    assert "'script': zeebe:script expression: nope" in problems
    assert "'pick': zeebe:loopCharacteristics inputCollection: nope" in problems
    assert "'pick': completionCondition: nope" in problems
    assert "'paid': zeebe:subscription correlationKey: nope" in problems
    assert "'too-late': timer date: nope" in problems
    assert "'call': zeebe:calledElement processId: nope" in problems
    assert "'f-express': conditionExpression: nope" in problems
    assert "R/PT1H" not in failing and "PT4H" not in failing  # static values are not expressions


# --- hostile and broken input -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["billion-laughs.bpmn", "external-entity.bpmn"])
def test_dtd_payloads_are_rejected_without_expansion(name: str) -> None:
    started = time.monotonic()
    problems = problems_of((FIXTURES / "invalid" / name).read_bytes())
    assert problems == ("Document type declarations (DTDs) are not allowed in BPMN resources",)
    assert time.monotonic() - started < 1.0


def test_undeclared_entity_is_a_parse_error() -> None:
    (problem,) = problems_of(definitions('<bpmn:process id="p" name="&xxe;" isExecutable="true"/>'))
    assert "undefined entity" in problem and "line" in problem and "column" in problem


def test_garbage_and_empty_input() -> None:
    (problem,) = problems_of(b"\x00\x01\xffnot xml at all")
    assert problem.startswith("Resource is not well-formed XML:") and "(line 1, column" in problem
    assert problems_of(b"") == ("Resource is empty",)
    assert problems_of(b"   \n") == ("Resource is empty",)


def test_truncated_document_reports_line_and_column() -> None:
    data = (FIXTURES / "one-task.bpmn").read_bytes()[:300]
    (problem,) = problems_of(data)
    assert problem.startswith("Resource is not well-formed XML:") and "line" in problem


def test_size_and_element_limits() -> None:
    data = (FIXTURES / "ten-tasks.bpmn").read_bytes()
    (problem,) = problems_of(data, max_bytes=100)
    assert problem == f"Resource is {len(data)} bytes, larger than the allowed 100 bytes"
    (problem,) = problems_of(data, max_flow_elements=10)
    assert problem == "Resource has more than 10 flow elements (the limit per resource)"
    (problem,) = problems_of(data, max_xml_elements=20)
    assert problem == "Resource has more than 20 XML elements"


def test_a_model_with_many_problems_lists_them_all() -> None:
    with pytest.raises(BpmnValidationError) as caught:
        parse_bpmn((FIXTURES / "invalid" / "many-problems.bpmn").read_bytes(), "many-problems.bpmn")
    error = caught.value
    assert error.problems == (
        "'task-a': zeebe:taskDefinition: Attribute 'type' must be present and not empty",
        "'task-b': Must have exactly one 'zeebe:taskDefinition' extension element",
        "'boundary': Referenced error 'Error_unknown' is not defined",
        "'flow-a-end': SequenceFlow has targetRef 'nowhere' which cannot be resolved",
        "'split': Default flow 'flow-elsewhere' must start at gateway",
        "'flow-b': Must have a condition or be default flow",
        "'end': End events must not have outgoing sequence flows to other elements.",
        "'boundary': Attached to 'ghost', which is not an element of the process",
    )
    lines = str(error).splitlines()
    assert lines[0] == "'many-problems.bpmn' is not a valid BPMN resource (8 problems):"
    assert lines[1:] == list(error.problems)
    assert [d.element_id for d in error.details][:2] == ["task-a", "task-b"]


def test_large_model_parses_quickly() -> None:
    tasks = "".join(service_task(f"m{i}", f"type-{i}") for i in range(2000))
    ids = ["start", *[f"m{i}" for i in range(2000)], "end"]
    flows = "".join(flow(f"f{i}", ids[i], ids[i + 1]) for i in range(len(ids) - 1))
    data = process_xml('<bpmn:startEvent id="start"/>' + tasks + '<bpmn:endEvent id="end"/>' + flows)
    started = time.monotonic()
    process = only(parse_bpmn(data, "big.bpmn", check_expression=lambda _: None))
    elapsed = time.monotonic() - started
    assert len(process.elements) == 2002 and len(process.flows) == 2001
    assert elapsed < 2.0, elapsed


def test_elements_carry_their_kind() -> None:
    element = Element(id="x", element_type="BOUNDARY_EVENT", flow_scope_id="p", event_type="TIMER")
    assert element.kind == "BOUNDARY_EVENT:TIMER"
    assert Element(id="y", element_type="SERVICE_TASK", flow_scope_id="p").kind == "SERVICE_TASK"


# --- compensation ------------------------------------------------------------------------------------


def compensable(*, association: bool = True, handler_extra: str = "", throw: str = "") -> bytes:
    """start -> book (compensation boundary -> cancel, by association) -> throw -> end."""
    cancel = service_task("cancel", "cancel").replace('id="cancel"', 'id="cancel" isForCompensation="true"')
    body = (
        '<bpmn:startEvent id="start"/>'
        + service_task("book", "book")
        + '<bpmn:boundaryEvent id="undo" attachedToRef="book"><bpmn:compensateEventDefinition/></bpmn:boundaryEvent>'
        + cancel
        + handler_extra
        + (
            throw
            or '<bpmn:intermediateThrowEvent id="throw"><bpmn:compensateEventDefinition/></bpmn:intermediateThrowEvent>'
        )
        + '<bpmn:endEvent id="end"/>'
        + flow("f0", "start", "book")
        + flow("f1", "book", "throw")
        + flow("f2", "throw", "end")
        + ('<bpmn:association id="a" sourceRef="undo" targetRef="cancel"/>' if association else "")
    )
    return process_xml(body)


def test_compensation_boundary_events_are_associated_with_their_handler() -> None:
    process = only(parse_bpmn(compensable(), "c.bpmn", supported=supported_kinds(SUPPORTED_KINDS)))
    assert process.element("undo").compensation_handler_id == "cancel"
    assert process.element("cancel").is_for_compensation
    assert process.element("throw").activity_ref is None


def test_a_compensation_boundary_event_needs_an_association() -> None:
    assert problems_of(compensable(association=False)) == (
        "'undo': Compensation boundary events must have a compensation association and no outgoing sequence flows",
    )


def test_a_compensation_handler_stands_outside_the_flow() -> None:
    extra = service_task("other", "other") + flow("f9", "other", "cancel")
    problems = problems_of(compensable(handler_extra=extra))
    assert "'cancel': A compensation handler should have no incoming sequence flows" in problems


def test_compensation_throw_events_wait_for_their_handlers_and_name_an_activity_of_their_scope() -> None:
    no_wait = (
        '<bpmn:intermediateThrowEvent id="throw">'
        '<bpmn:compensateEventDefinition waitForCompletion="false"/></bpmn:intermediateThrowEvent>'
    )
    assert problems_of(compensable(throw=no_wait)) == (
        "'throw': A compensation intermediate throwing event waitForCompletion attribute must be true or not present",
    )
    unknown = (
        '<bpmn:intermediateThrowEvent id="throw">'
        '<bpmn:compensateEventDefinition activityRef="nowhere"/></bpmn:intermediateThrowEvent>'
    )
    assert problems_of(compensable(throw=unknown)) == (
        "'throw': The activityRef 'nowhere' must reference an activity in the scope of the compensation event",
    )
    book = unknown.replace("nowhere", "book")
    process = only(parse_bpmn(compensable(throw=book), "c.bpmn", supported=supported_kinds(SUPPORTED_KINDS)))
    assert process.element("throw").activity_ref == "book"


def test_compensation_start_events_of_event_sub_processes_are_not_supported_yet() -> None:
    esp = (
        '<bpmn:subProcess id="esp" triggeredByEvent="true">'
        '<bpmn:startEvent id="esp-start"><bpmn:compensateEventDefinition/></bpmn:startEvent>'
        '<bpmn:endEvent id="esp-end"/>' + flow("e0", "esp-start", "esp-end") + "</bpmn:subProcess>"
    )
    problems = problems_of(process_xml(linear() + esp), supported=supported_kinds(SUPPORTED_KINDS))
    assert problems == ("'esp-start': Elements of kind 'compensation start event' are not supported yet",)


# --- execution listeners ---------------------------------------------------------------------------


def listeners(*items: tuple[str | None, str, str | None]) -> str:
    """A ``zeebe:executionListeners`` block of (eventType, type, retries) listeners (None: attribute left out)."""
    nodes = []
    for event_type, job_type, retries in items:
        attributes = f'type="{job_type}"'
        if event_type is not None:
            attributes = f'eventType="{event_type}" ' + attributes
        if retries is not None:
            attributes += f' retries="{retries}"'
        nodes.append(f"<zeebe:executionListener {attributes}/>")
    return f"<zeebe:executionListeners>{''.join(nodes)}</zeebe:executionListeners>"


def test_execution_listeners_are_read_by_event_type_in_document_order() -> None:
    task = (
        '<bpmn:serviceTask id="m0"><bpmn:extensionElements><zeebe:taskDefinition type="work"/>'
        + listeners(("start", "a", "5"), ("end", "z", None), (None, "b", None), ("start", "=&quot;c&quot; + x", "=n"))
        + "</bpmn:extensionElements></bpmn:serviceTask>"
    )
    process_listeners = f"<bpmn:extensionElements>{listeners(('end', 'bye', None))}</bpmn:extensionElements>"
    process = only(parse_bpmn(process_xml(process_listeners + linear(task)), "l.bpmn"))
    ExecutionListener = bpmn_model.ExecutionListener
    assert process.element("m0").start_listeners == (
        ExecutionListener("start", "a", "5"),
        ExecutionListener("start", "b", "3"),  # eventType start and retries 3 by default, as in Zeebe
        ExecutionListener("start", '="c" + x', "=n"),
    )
    assert process.element("m0").end_listeners == (ExecutionListener("end", "z", "3"),)
    assert process.start_listeners == ()
    assert process.end_listeners == (ExecutionListener("end", "bye", "3"),)
    assert process.uses_execution_listeners


def test_a_model_without_listeners_says_so() -> None:
    assert not only(load("one-task.bpmn")).uses_execution_listeners


def test_listener_expressions_are_checked_and_attributes_required() -> None:
    task = (
        '<bpmn:serviceTask id="m0"><bpmn:extensionElements><zeebe:taskDefinition type="work"/>'
        + listeners(("start", "=bad(", None), ("sometimes", "x", None), ("end", "", None))
        + "</bpmn:extensionElements></bpmn:serviceTask>"
    )
    problems = problems_of(process_xml(linear(task)), check_expression=lambda text: "no" if "(" in text else None)
    assert problems == (
        "'m0': zeebe:executionListener: Attribute 'eventType' must be one of [start, end], not 'sometimes'",
        "'m0': zeebe:executionListener: Attribute 'type' must be present and not empty",
        "'m0': zeebe:executionListener type: no",
    )


@pytest.mark.parametrize(
    ("element", "event_type", "reason"),
    [
        ('<bpmn:intermediateThrowEvent id="m0">{}</bpmn:intermediateThrowEvent>', "start", None),
        ('<bpmn:intermediateThrowEvent id="m0">{}</bpmn:intermediateThrowEvent>', "end", None),
        ('<bpmn:exclusiveGateway id="m0">{}</bpmn:exclusiveGateway>', "start", None),
        (
            '<bpmn:exclusiveGateway id="m0">{}</bpmn:exclusiveGateway>',
            "end",
            "Execution listeners of type 'end' are not supported by gateway element",
        ),
        (
            '<bpmn:eventBasedGateway id="m0">{}</bpmn:eventBasedGateway>',
            "end",
            "Execution listeners of type 'end' are not supported by gateway element",
        ),
    ],
)
def test_which_listeners_an_element_may_have(element: str, event_type: str, reason: str | None) -> None:
    block = f"<bpmn:extensionElements>{listeners((event_type, 'l', None))}</bpmn:extensionElements>"
    data = process_xml(linear(element.format(block)))
    if reason is None:
        parse_bpmn(data, "l.bpmn")
    else:
        assert f"'m0': {reason}" in problems_of(data)
