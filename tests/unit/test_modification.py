"""Process instance modification and start instructions on one in-process partition: each instruction kind, each
rejection (with Zeebe's reasons), and what modifying leaves behind (jobs, incidents, subscriptions, flow scopes).
Every test ends by checking that a replay of the log rebuilds exactly the live state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from broker.engine.behaviors import TENANT
from broker.protocol.enums import (
    DeploymentIntent,
    ProcessInstanceCreationIntent,
    ProcessInstanceIntent,
    ProcessInstanceModificationIntent,
    RecordType,
    RejectionType,
    ValueType,
)
from broker.protocol.record import Record
from broker.state.element_instance import ElementInstance
from broker.tools.inspect import iter_records
from exporters import es_templates
from exporters.record_json import record_document
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live

PI = ProcessInstanceIntent


def _task(element_id: str) -> str:
    return (
        f'<bpmn:serviceTask id="{element_id}"><bpmn:extensionElements>'
        f'<zeebe:taskDefinition type="{element_id}" /></bpmn:extensionElements></bpmn:serviceTask>'
    )


MODEL = f"""<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="t">
  <bpmn:process id="mod" isExecutable="true">
    <bpmn:startEvent id="start" />
    <bpmn:exclusiveGateway id="split" default="f1" />
    {_task("a")}
    <bpmn:subProcess id="sub">
      <bpmn:startEvent id="sub_start" />
      {_task("b")}
      <bpmn:endEvent id="sub_end" />
      <bpmn:sequenceFlow id="s1" sourceRef="sub_start" targetRef="b" />
      <bpmn:sequenceFlow id="s2" sourceRef="b" targetRef="sub_end" />
    </bpmn:subProcess>
    <bpmn:boundaryEvent id="late" attachedToRef="sub">
      <bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition>
    </bpmn:boundaryEvent>
    {_task("c")}
    <bpmn:endEvent id="end" />
    <bpmn:endEvent id="late_end" />
    <bpmn:sequenceFlow id="f0" sourceRef="start" targetRef="split" />
    <bpmn:sequenceFlow id="f1" sourceRef="split" targetRef="a" />
    <bpmn:sequenceFlow id="fm" sourceRef="split" targetRef="many">
      <bpmn:conditionExpression>=false</bpmn:conditionExpression>
    </bpmn:sequenceFlow>
    <bpmn:sequenceFlow id="fs" sourceRef="split" targetRef="msub">
      <bpmn:conditionExpression>=false</bpmn:conditionExpression>
    </bpmn:sequenceFlow>
    <bpmn:subProcess id="msub">
      <bpmn:startEvent id="msub_start" />
      {_task("t")}
      <bpmn:sequenceFlow id="t1" sourceRef="msub_start" targetRef="t" />
    </bpmn:subProcess>
    <bpmn:boundaryEvent id="pinged" attachedToRef="msub">
      <bpmn:messageEventDefinition messageRef="ping" />
    </bpmn:boundaryEvent>
    <bpmn:sequenceFlow id="fg" sourceRef="split" targetRef="gw">
      <bpmn:conditionExpression>=false</bpmn:conditionExpression>
    </bpmn:sequenceFlow>
    <bpmn:sequenceFlow id="f2" sourceRef="a" targetRef="sub" />
    <bpmn:sequenceFlow id="f3" sourceRef="sub" targetRef="c" />
    <bpmn:sequenceFlow id="f4" sourceRef="c" targetRef="end" />
    <bpmn:sequenceFlow id="f5" sourceRef="late" targetRef="late_end" />
    <bpmn:subProcess id="many">
      <bpmn:multiInstanceLoopCharacteristics>
        <bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=[1, 2]" /></bpmn:extensionElements>
      </bpmn:multiInstanceLoopCharacteristics>
      <bpmn:startEvent id="many_start" />
      {_task("m")}
      <bpmn:sequenceFlow id="m1" sourceRef="many_start" targetRef="m" />
    </bpmn:subProcess>
    <bpmn:subProcess id="esp" triggeredByEvent="true">
      <bpmn:startEvent id="esp_start" isInterrupting="false">
        <bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition>
      </bpmn:startEvent>
      {_task("e")}
      <bpmn:sequenceFlow id="e1" sourceRef="esp_start" targetRef="e" />
    </bpmn:subProcess>
    <bpmn:eventBasedGateway id="gw" />
    <bpmn:intermediateCatchEvent id="wait">
      <bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition>
    </bpmn:intermediateCatchEvent>
    <bpmn:intermediateCatchEvent id="wait_more">
      <bpmn:timerEventDefinition><bpmn:timeDuration>PT2H</bpmn:timeDuration></bpmn:timerEventDefinition>
    </bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="g1" sourceRef="gw" targetRef="wait" />
    <bpmn:sequenceFlow id="g2" sourceRef="gw" targetRef="wait_more" />
  </bpmn:process>
  <bpmn:message id="ping" name="ping">
    <bpmn:extensionElements><zeebe:subscription correlationKey="=orderId" /></bpmn:extensionElements>
  </bpmn:message>
</bpmn:definitions>
"""


@pytest.fixture
async def driver(tmp_path: Path) -> AsyncIterator[Driver]:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    resources = [{"resourceName": "mod.bpmn", "resource": MODEL.encode()}]
    accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources}))
    yield d
    if d.partition is not None:
        await d.settle()
        await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def started(d: Driver, variables: dict | None = None) -> int:
    rec = accepted(await d.create("mod", variables or {}))
    await d.settle()
    return rec.value["processInstanceKey"]


async def modify(
    d: Driver,
    pi: int,
    activate: list[dict[str, Any]] | None = None,
    terminate: list[int | str] | None = None,
    move: list[dict[str, Any]] | None = None,
) -> Record:
    """Terminate instructions are keys or (strings) element ids."""
    value = {
        "processInstanceKey": pi,
        "activateInstructions": [{"ancestorScopeKey": -1, "variableInstructions": [], **a} for a in activate or []],
        "terminateInstructions": [
            {"elementId": t} if isinstance(t, str) else {"elementInstanceKey": t} for t in terminate or []
        ],
        "moveInstructions": move or [],
        "tenantId": TENANT,
    }
    rec = await d.send(ValueType.PROCESS_INSTANCE_MODIFICATION, ProcessInstanceModificationIntent.MODIFY, value, pi)
    await d.settle()
    return rec


def rejected(rec: Record, rejection_type: RejectionType = RejectionType.INVALID_ARGUMENT) -> str:
    assert rec.record_type == RecordType.COMMAND_REJECTION, rec.describe()
    assert rec.rejection_type == rejection_type, rec.rejection_reason
    return rec.rejection_reason


def active(d: Driver, pi: int) -> dict[str, list[ElementInstance]]:
    """The instance's live element instances by element id (the process itself included)."""

    def read(s: Any) -> dict[str, list[ElementInstance]]:
        out: dict[str, list[ElementInstance]] = {}
        pending = [pi]
        while pending:
            inst = s.elements.get(pending.pop())
            if inst is None:
                continue
            out.setdefault(inst.value.element_id, []).append(inst)
            pending.extend(s.elements.children(inst.key))
        return out

    return d.read(read)


def one(d: Driver, pi: int, element_id: str) -> ElementInstance:
    (inst,) = active(d, pi)[element_id]
    return inst


async def logged(d: Driver) -> list[Record]:
    await d.settle()
    await d.close()
    return list(iter_records(d.directory))


def lifecycle_of(records: list[Record], element_id: str) -> list[str]:
    return [
        PI(r.intent).name
        for r in records
        if r.value_type == ValueType.PROCESS_INSTANCE
        and r.record_type == RecordType.EVENT
        and r.value.get("elementId") == element_id
    ]


# -- activating and terminating ------------------------------------------------------------------------------


async def test_activate_and_terminate_in_one_command_moves_the_token(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    a = one(d, pi, "a")
    (job_a,) = await d.activate("a")
    rec = accepted(await modify(d, pi, activate=[{"elementId": "c"}], terminate=[a.key]))
    assert rec.intent == ProcessInstanceModificationIntent.MODIFIED
    assert rec.key == pi
    assert rec.value["activateInstructions"][0]["ancestorScopeKeys"] == [pi]
    assert set(active(d, pi)) == {"mod", "c"}
    assert d.read(lambda s: s.jobs.get(job_a)) is None  # the terminated task's job went with it
    (job_c,) = await d.activate("c")
    accepted(await d.complete(job_c))
    await d.settle()
    assert active(d, pi) == {}  # c completed and the instance with it
    records = await logged(d)
    assert lifecycle_of(records, "a") == [
        "ELEMENT_ACTIVATING",
        "ELEMENT_ACTIVATED",
        "ELEMENT_TERMINATING",
        "ELEMENT_TERMINATED",
    ]
    assert lifecycle_of(records, "c")[:2] == ["ELEMENT_ACTIVATING", "ELEMENT_ACTIVATED"]
    assert lifecycle_of(records, "mod")[-1] == "ELEMENT_COMPLETED"
    modified = [r for r in records if r.value_type == ValueType.PROCESS_INSTANCE_MODIFICATION]
    assert [(r.record_type, r.intent) for r in modified] == [
        (RecordType.COMMAND, ProcessInstanceModificationIntent.MODIFY),
        (RecordType.EVENT, ProcessInstanceModificationIntent.MODIFIED),
    ]
    # the Elasticsearch exporter's strict mapping declares every field the event carries
    value = record_document(modified[1], "8.8.0")["value"]
    mapping = es_templates.VALUE_PROPERTIES[ValueType.PROCESS_INSTANCE_MODIFICATION]
    assert set(value) <= set(mapping)
    (instruction,) = value["activateInstructions"]
    assert set(instruction) <= set(mapping["activateInstructions"]["properties"])


async def test_activating_inside_an_inactive_sub_process_creates_it_without_its_start_event(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    variables = [
        {"elementId": "", "variables": {"g": 1}},
        {"elementId": "sub", "variables": {"s": 2}},
        {"elementId": "b", "variables": {"own": 3}},
    ]
    rec = accepted(await modify(d, pi, activate=[{"elementId": "b", "variableInstructions": variables}]))
    elements = active(d, pi)
    assert set(elements) == {"mod", "a", "sub", "b"}
    sub, b = elements["sub"][0], elements["b"][0]
    assert sub.state == PI.ELEMENT_ACTIVATED and b.value.flow_scope_key == sub.key
    assert rec.value["activateInstructions"][0]["ancestorScopeKeys"] == [pi, sub.key]
    assert d.read(lambda s: s.variables.local(pi)) == {"g": 1}
    assert d.read(lambda s: s.variables.local(sub.key)) == {"s": 2}
    assert d.read(lambda s: s.variables.local(b.key)) == {"own": 3}
    assert d.read(lambda s: s.timers.of_owner(sub.key)), "the created sub-process subscribes to its boundary timer"
    assert await d.activate("b")
    records = await logged(d)
    assert lifecycle_of(records, "sub_start") == []


async def test_a_second_instance_of_a_sub_process_needs_an_ancestor_selection(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    accepted(await modify(d, pi, activate=[{"elementId": "b"}]))
    first = one(d, pi, "sub")
    # the process instance as ancestor: a new instance of the sub-process is created beside the first
    accepted(await modify(d, pi, activate=[{"elementId": "b", "ancestorScopeKey": pi}]))
    subs = active(d, pi)["sub"]
    assert len(subs) == 2
    reason = rejected(await modify(d, pi, activate=[{"elementId": "b"}]))
    assert "flow scope with more than one active instance: 'sub'" in reason
    assert "ancestor element instance key" in reason
    assert len(active(d, pi)["b"]) == 2  # the rejected command changed nothing
    accepted(await modify(d, pi, activate=[{"elementId": "b", "ancestorScopeKey": first.key}]))
    assert len([b for b in active(d, pi)["b"] if b.value.flow_scope_key == first.key]) == 2


async def test_terminating_the_last_active_element_terminates_the_instance(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    (job,) = await d.activate("a")
    accepted(await d.fail(job, retries=0))
    await d.settle()
    assert d.incidents(), "the job without retries raised an incident"
    accepted(await modify(d, pi, terminate=[one(d, pi, "a").key]))
    assert active(d, pi) == {}
    assert d.incidents() == []  # resolved with its element
    records = await logged(d)
    assert lifecycle_of(records, "mod")[-2:] == ["ELEMENT_TERMINATING", "ELEMENT_TERMINATED"]


async def test_terminating_the_only_element_of_a_sub_process_ends_the_sub_process_but_not_the_instance(
    driver: Driver,
) -> None:
    d = driver
    pi = await started(d)
    accepted(await modify(d, pi, activate=[{"elementId": "b"}]))
    sub, b = one(d, pi, "sub"), one(d, pi, "b")
    accepted(await modify(d, pi, terminate=[b.key]))
    assert set(active(d, pi)) == {"mod", "a"}
    assert d.read(lambda s: s.timers.of_owner(sub.key)) == []  # the boundary timer went with the sub-process


async def test_activating_a_multi_instance_activity_enters_its_body(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    accepted(await modify(d, pi, activate=[{"elementId": "many"}]))
    assert len(await d.activate("m")) == 2


async def test_an_activated_element_keeps_its_scope_from_completing_when_the_rest_terminates(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    accepted(await modify(d, pi, activate=[{"elementId": "b"}]))
    sub, b = one(d, pi, "sub"), one(d, pi, "b")
    # inside the same sub-process instance: a new b, and the old one terminated
    accepted(await modify(d, pi, activate=[{"elementId": "b", "ancestorScopeKey": sub.key}], terminate=[b.key]))
    (b2,) = active(d, pi)["b"]
    assert b2.key != b.key and b2.value.flow_scope_key == sub.key
    assert one(d, pi, "sub").state == PI.ELEMENT_ACTIVATED


async def test_activating_an_event_sub_process_starts_it_at_its_start_event_without_interrupting(
    driver: Driver,
) -> None:
    d = driver
    pi = await started(d)
    accepted(await modify(d, pi, activate=[{"elementId": "esp"}]))
    assert set(active(d, pi)) == {"mod", "a", "esp", "e"}
    (job,) = await d.activate("e")
    accepted(await d.complete(job))
    await d.settle()
    assert set(active(d, pi)) == {"mod", "a"}  # the event sub-process completed; the instance goes on
    records = await logged(d)
    assert lifecycle_of(records, "esp_start") == [
        "ELEMENT_ACTIVATING",
        "ELEMENT_ACTIVATED",
        "ELEMENT_COMPLETING",
        "ELEMENT_COMPLETED",
    ]


# -- terminating by element id and moving (Camunda 8.9) -----------------------------------------------------


async def test_terminating_by_element_id_ends_every_active_instance_of_it(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    accepted(await modify(d, pi, activate=[{"elementId": "b"}]))
    accepted(await modify(d, pi, activate=[{"elementId": "b", "ancestorScopeKey": pi}]))
    assert len(active(d, pi)["b"]) == 2
    rec = accepted(await modify(d, pi, terminate=["b"]))
    assert len(rec.value["terminateInstructions"]) == 2  # by key, as carried out
    assert set(active(d, pi)) == {"mod", "a"}  # the sub-processes left empty went too
    reason = rejected(await modify(d, pi, terminate=["nope"]))
    assert "terminate instructions with an element that could not be found: 'nope'" in reason


async def test_a_move_terminates_each_source_and_activates_the_target_for_it(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    a = one(d, pi, "a")
    move = {
        "sourceElementId": "a",
        "targetElementId": "b",
        "inferAncestorScopeFromSourceHierarchy": True,
        "variableInstructions": [{"elementId": "sub", "variables": {"moved": True}}],
    }
    rec = accepted(await modify(d, pi, move=[move]))
    assert rec.value["moveInstructions"] == [move]
    moves = es_templates.VALUE_PROPERTIES[ValueType.PROCESS_INSTANCE_MODIFICATION]["moveInstructions"]["properties"]
    assert set(move) <= set(moves)  # the Elasticsearch exporter's strict mapping declares them
    assert rec.value["terminateInstructions"] == [{"elementInstanceKey": a.key}]
    sub, b = one(d, pi, "sub"), one(d, pi, "b")
    assert set(active(d, pi)) == {"mod", "sub", "b"}
    assert d.read(lambda s: s.variables.local(sub.key)) == {"moved": True}
    # by key, next to itself: a new instance of b in the same sub-process
    sibling = {"sourceElementInstanceKey": b.key, "targetElementId": "b", "useSourceParentKeyAsAncestorScope": True}
    accepted(await modify(d, pi, move=[sibling]))
    (b2,) = active(d, pi)["b"]
    assert b2.key != b.key and b2.value.flow_scope_key == sub.key


async def test_move_sources_must_exist(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    reason = rejected(await modify(d, pi, move=[{"sourceElementId": "nope", "targetElementId": "c"}]))
    assert "move instructions with a source element that could not be found: 'nope'" in reason
    reason = rejected(await modify(d, pi, move=[{"sourceElementInstanceKey": UNKNOWN, "targetElementId": "c"}]))
    assert f"move instructions with a source element instance that could not be found: '{UNKNOWN}'" in reason
    reason = rejected(await modify(d, pi, move=[{"sourceElementId": "a", "targetElementId": "start"}]))
    assert "The activation of elements with type 'START_EVENT' is not supported" in reason
    assert set(active(d, pi)) == {"mod", "a"}


# -- rejections ----------------------------------------------------------------------------------------------


# A key this partition never gave out (below the ones it did: a replay counts the keys of every record it reads).
UNKNOWN = (1 << 51) + 1


async def test_an_unknown_instance_is_not_found(driver: Driver) -> None:
    reason = rejected(await modify(driver, UNKNOWN), RejectionType.NOT_FOUND)
    assert reason == f"Expected to modify process instance but no process instance found with key '{UNKNOWN}'"


@pytest.mark.parametrize(
    ("element_id", "expected"),
    [
        ("nope", "activate instructions with an element that could not be found: 'nope'"),
        ("start", "The activation of elements with type 'START_EVENT' is not supported"),
        ("late", "The activation of elements with type 'BOUNDARY_EVENT' is not supported"),
        ("f1", "The activation of elements with type 'SEQUENCE_FLOW' is not supported"),
        ("wait", "The activation of events belonging to an event-based gateway is not supported"),
    ],
)
async def test_elements_that_cannot_be_activated_are_refused(driver: Driver, element_id: str, expected: str) -> None:
    d = driver
    pi = await started(d)
    reason = rejected(await modify(d, pi, activate=[{"elementId": element_id}]))
    assert reason.startswith("Expected to modify instance of process 'mod' but it contains one or more")
    assert expected in reason
    assert set(active(d, pi)) == {"mod", "a"}


async def test_an_element_inside_a_multi_instance_body_that_is_not_active_is_refused(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    reason = rejected(await modify(d, pi, activate=[{"elementId": "c"}, {"elementId": "m"}]))
    assert "would result in the activation of multi-instance element 'many', which is currently unsupported" in reason
    assert set(active(d, pi)) == {"mod", "a"}  # c, activated before, was undone with the rest


async def test_terminating_an_unknown_element_instance_is_refused(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    reason = rejected(await modify(d, pi, terminate=[one(d, pi, "a").key, UNKNOWN]))
    assert f"terminate instructions with an element instance that could not be found: '{UNKNOWN}'" in reason
    assert set(active(d, pi)) == {"mod", "a"}


async def test_an_element_instance_of_another_instance_is_not_found_here(driver: Driver) -> None:
    d = driver
    pi, other = await started(d), await started(d)
    reason = rejected(await modify(d, pi, terminate=[one(d, other, "a").key]))
    assert "with an element instance that could not be found" in reason


async def test_variable_scopes_must_exist_and_enclose_the_element(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    unknown = [{"elementId": "c", "variableInstructions": [{"elementId": "nowhere", "variables": {"x": 1}}]}]
    reason = rejected(await modify(d, pi, activate=unknown))
    assert "variable instructions with a scope element id that could not be found: 'nowhere'" in reason
    outside = [{"elementId": "c", "variableInstructions": [{"elementId": "sub", "variables": {"x": 1}}]}]
    reason = rejected(await modify(d, pi, activate=outside))
    assert "doesn't belong to the activating element's flow scope" in reason


async def test_ancestor_selections_are_checked(driver: Driver) -> None:
    d = driver
    pi, other = await started(d), await started(d)
    a = one(d, pi, "a")
    reason = rejected(await modify(d, pi, activate=[{"elementId": "c", "ancestorScopeKey": UNKNOWN}]))
    assert f"ancestor scope key that does not exist, or is not in an active state: '{UNKNOWN}'" in reason
    reason = rejected(await modify(d, pi, activate=[{"elementId": "c", "ancestorScopeKey": other}]))
    assert f"ancestor scope key that does not belong to the modified process instance: '{other}'" in reason
    reason = rejected(await modify(d, pi, activate=[{"elementId": "b", "ancestorScopeKey": a.key}]))
    assert f"instance '{a.key}' of element 'a' is not an ancestor of element 'b'" in reason


async def test_activating_in_a_flow_scope_that_the_same_command_terminates_is_refused(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    accepted(await modify(d, pi, activate=[{"elementId": "b"}]))
    sub = one(d, pi, "sub")
    reason = rejected(await modify(d, pi, activate=[{"elementId": "b"}], terminate=[sub.key]))
    assert f"element 'b' requires flow scope instance '{sub.key}' which is being terminated" in reason
    reason = rejected(await modify(d, pi, activate=[{"elementId": "c"}], terminate=[pi]))
    assert f"element 'c' requires flow scope instance '{pi}' which is being terminated" in reason


async def test_a_created_flow_scope_that_cannot_subscribe_refuses_the_whole_command(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    reason = rejected(await modify(d, pi, activate=[{"elementId": "c"}, {"elementId": "t"}]))
    assert reason.startswith("Expected to subscribe to catch event(s) of 'msub' but ")
    assert set(active(d, pi)) == {"mod", "a"}  # what the command wrote before is undone
    assert d.read(lambda s: s.variables.local(pi)) == {}
    with_key = {"elementId": "t", "variableInstructions": [{"elementId": "", "variables": {"orderId": "o-1"}}]}
    accepted(await modify(d, pi, activate=[with_key]))
    msub = one(d, pi, "msub")
    assert d.read(lambda s: s.process_message_subscriptions.of_element(msub.key))


async def test_a_command_with_too_many_instructions_is_refused(driver: Driver) -> None:
    d = driver
    pi = await started(d)
    reason = rejected(await modify(d, pi, activate=[{"elementId": "c"}] * 1001))
    assert "1001 instructions" in reason and "more than the 1000 one command may carry" in reason
    assert set(active(d, pi)) == {"mod", "a"}


CALLER = """<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="c" targetNamespace="t">
  <bpmn:process id="caller" isExecutable="true">
    <bpmn:startEvent id="go" />
    <bpmn:callActivity id="call">
      <bpmn:extensionElements><zeebe:calledElement processId="mod" /></bpmn:extensionElements>
    </bpmn:callActivity>
    <bpmn:sequenceFlow id="c1" sourceRef="go" targetRef="call" />
  </bpmn:process>
</bpmn:definitions>
"""


async def test_terminating_everything_in_a_called_instance_is_refused(driver: Driver) -> None:
    d = driver
    resources = [{"resourceName": "caller.bpmn", "resource": CALLER.encode()}]
    accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources}))
    rec = accepted(await d.create("caller", {}))
    await d.settle()
    caller = rec.value["processInstanceKey"]
    child = one(d, caller, "call").called_child_key
    reason = rejected(await modify(d, child, terminate=[one(d, child, "a").key]))
    assert reason == (
        "Expected to modify instance of process 'mod' but the given instructions would terminate the instance. The "
        "instance was created by a call activity in the parent process. To terminate this instance please modify "
        "the parent process instead."
    )
    assert set(active(d, child)) == {"mod", "a"}
    # moving the token within the called instance is fine
    accepted(await modify(d, child, activate=[{"elementId": "c"}], terminate=[one(d, child, "a").key]))
    assert set(active(d, child)) == {"mod", "c"}


# -- start instructions --------------------------------------------------------------------------------------


async def create_at(d: Driver, *element_ids: str, variables: dict | None = None) -> Record:
    value = {
        "bpmnProcessId": "mod",
        "version": -1,
        "processDefinitionKey": -1,
        "variables": variables or {},
        "startInstructions": [{"elementId": e} for e in element_ids],
        "tenantId": TENANT,
    }
    rec = await d.send(ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, value)
    await d.settle()
    return rec


async def test_start_instructions_start_the_instance_at_the_given_elements(driver: Driver) -> None:
    d = driver
    rec = accepted(await create_at(d, "b", "c", variables={"v": 1}))
    pi = rec.value["processInstanceKey"]
    assert rec.value["startInstructions"] == [{"elementId": "b"}, {"elementId": "c"}]
    assert set(active(d, pi)) == {"mod", "sub", "b", "c"}
    assert d.read(lambda s: s.variables.local(pi)) == {"v": 1}
    (job_b,) = await d.activate("b")
    accepted(await d.complete(job_b))
    await d.settle()
    jobs_c = await d.activate("c")  # the one started at c, and the one the completed sub-process went on to
    assert len(jobs_c) == 2
    for job in jobs_c:
        accepted(await d.complete(job))
        await d.settle()
    assert active(d, pi) == {}
    records = await logged(d)
    assert lifecycle_of(records, "start") == [] and lifecycle_of(records, "a") == []


@pytest.mark.parametrize(
    ("element_id", "expected"),
    [
        ("nope", "no element found with id 'nope'."),
        ("m", "the element with id 'm' is inside a multi-instance subprocess"),
        ("start", "the element with id 'start' targets unsupported element type 'START_EVENT'"),
        ("wait", "the element with id 'wait' belongs to an event-based gateway"),
    ],
)
async def test_start_instructions_that_cannot_be_followed_are_refused(
    driver: Driver, element_id: str, expected: str
) -> None:
    reason = rejected(await create_at(driver, element_id))
    assert reason.startswith("Expected to create instance of process with start instructions but ")
    assert expected in reason
