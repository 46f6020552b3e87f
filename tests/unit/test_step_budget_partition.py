"""The step budget in a running partition: a loop without a wait state stops with an incident, the partition keeps
serving, the stop does not depend on how commands fall into rounds, replay rebuilds the same state, and resolving
the incident after fixing the variables lets the instance finish."""

from __future__ import annotations

from pathlib import Path

from broker.protocol.enums import DeploymentIntent, IncidentIntent, ProcessInstanceIntent, RecordType, ValueType
from broker.stream.partition import PartitionConfig
from broker.tools.inspect import iter_records
from tests.integration.test_deployment_parity import FEEL_LOOP
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live, check_restart_recovers

BUDGET = 40


async def run_loop(directory: Path, commands_per_round: int) -> tuple[Driver, int]:
    config = PartitionConfig(
        checker_interval_s=0.005, max_steps_per_instance=BUDGET, max_commands_per_round=commands_per_round
    )
    d = Driver(directory, config)
    d.open()
    resources = [{"resourceName": "feel-loop.bpmn", "resource": FEEL_LOOP}]
    accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources}))
    accepted(await d.deploy("one-task.bpmn"))
    looping = accepted(await d.create("feel-loop", {"loop": True, "n": 0})).key
    other = accepted(await d.create("one-task", {"x": 1})).key
    await d.settle()
    (job,) = await d.activate("test")
    accepted(await d.complete(job))
    await d.settle()
    assert d.read(lambda s: s.elements.get(other)) is None, "the other instance completed"
    return d, looping


def activations_before_incident(directory: Path, instance: int) -> tuple[list[str], dict]:
    activated: list[str] = []
    for record in iter_records(directory):
        if record.value_type == ValueType.INCIDENT and record.intent == IncidentIntent.CREATED:
            return activated, record.value
        is_activation = (
            record.record_type == RecordType.COMMAND
            and record.value_type == ValueType.PROCESS_INSTANCE
            and record.intent == ProcessInstanceIntent.ACTIVATE_ELEMENT
        )
        if is_activation and record.value.get("processInstanceKey") == instance:
            activated.append(record.value["elementId"])
    raise AssertionError("no incident")


async def test_a_loop_stops_at_the_budget_and_resumes_after_resolve(tmp_path: Path) -> None:
    d, looping = await run_loop(tmp_path / "p" / "1", 500)
    ((incident_key, incident),) = d.incidents()
    assert incident["processInstanceKey"] == looping
    assert f"broker.maxStepsPerInstance = {BUDGET}" in incident["errorMessage"]
    assert d.partition is not None and d.partition.instances_stopped_by_budget == 1
    stopped_at = d.read(lambda s: s.elements.get(incident["elementInstanceKey"]))
    assert stopped_at.state == ProcessInstanceIntent.ELEMENT_ACTIVATING

    accepted(await d.set_variables(looping, {"loop": False}))
    accepted(await d.resolve(incident_key))
    await d.settle()
    assert d.read(lambda s: s.elements.get(looping)) is None, "the instance completed after the resolve"
    assert d.incidents() == []
    await d.close()
    live = check_replay_equals_live(d.directory, tmp_path)
    await check_restart_recovers(d, live, from_scratch=True)


async def test_where_the_budget_stops_does_not_depend_on_rounds(tmp_path: Path) -> None:
    stops = []
    for per_round in (1, 7, 500):
        directory = tmp_path / str(per_round) / "1"
        d, looping = await run_loop(directory, per_round)
        await d.close()
        activated, incident = activations_before_incident(directory, looping)
        # the process itself, then the start event, then BUDGET - 2 more before the one stopped
        assert len(activated) == BUDGET + 1
        assert activated[-1] == incident["elementId"]
        stops.append((len(activated), incident["elementId"], incident["errorMessage"].replace(str(looping), "?")))
    assert len(set(stops)) == 1, stops


# start > sub [ inner_start > fail (error end event) ] ; error boundary on sub > again -(=retry)> sub ; default > end
ERROR_LOOP = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b'<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" '
    b'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" id="defs" targetNamespace="http://bpmn.io/schema/bpmn">'
    b'<bpmn:error id="boom" name="Boom" errorCode="BOOM"/>'
    b'<bpmn:process id="error-loop" isExecutable="true">'
    b'<bpmn:startEvent id="start"/>'
    b'<bpmn:subProcess id="sub"><bpmn:startEvent id="inner_start"/>'
    b'<bpmn:endEvent id="fail"><bpmn:errorEventDefinition errorRef="boom"/></bpmn:endEvent>'
    b'<bpmn:sequenceFlow id="i1" sourceRef="inner_start" targetRef="fail"/></bpmn:subProcess>'
    b'<bpmn:boundaryEvent id="caught" attachedToRef="sub"><bpmn:errorEventDefinition errorRef="boom"/>'
    b"</bpmn:boundaryEvent>"
    b'<bpmn:exclusiveGateway id="again" default="give-up"/>'
    b'<bpmn:endEvent id="end"/>'
    b'<bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="sub"/>'
    b'<bpmn:sequenceFlow id="f2" sourceRef="caught" targetRef="again"/>'
    b'<bpmn:sequenceFlow id="f3" sourceRef="again" targetRef="sub">'
    b'<bpmn:conditionExpression xsi:type="bpmn:tFormalExpression">=retry</bpmn:conditionExpression>'
    b"</bpmn:sequenceFlow>"
    b'<bpmn:sequenceFlow id="give-up" sourceRef="again" targetRef="end"/>'
    b"</bpmn:process></bpmn:definitions>"
)


async def test_an_error_boundary_loop_that_deployment_cannot_see_is_stopped_too(tmp_path: Path) -> None:
    """Zeebe's loop check does not follow boundary events; the budget stops such a loop at run time."""
    d = Driver(tmp_path / "p" / "1", PartitionConfig(checker_interval_s=0.005, max_steps_per_instance=BUDGET))
    d.open()
    resources = [{"resourceName": "error-loop.bpmn", "resource": ERROR_LOOP}]
    accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources}))
    looping = accepted(await d.create("error-loop", {"retry": True})).key
    await d.settle()
    ((incident_key, incident),) = d.incidents()
    assert incident["processInstanceKey"] == looping
    assert "without reaching a wait state" in incident["errorMessage"]

    accepted(await d.set_variables(looping, {"retry": False}))
    accepted(await d.resolve(incident_key))
    await d.settle()
    assert d.read(lambda s: s.elements.get(looping)) is None, "the instance ended after the resolve"
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)
