"""Where a multi-instance activity's output variable lives: an ``outputElement`` that names a variable (or a path
into one) makes that variable local to each instance, so what a worker completes with is collected per instance and
does not reach the flow scope; without one (or with any other expression) completion variables propagate as usual.
Each scenario also replays to the live state."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from broker.engine.behaviors import TENANT
from broker.engine.elements.multi_instance import output_variable
from broker.protocol.enums import DeploymentIntent, MessageIntent, ValueType
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live

HEADER = """<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="t">
"""
LOOP = """      <bpmn:multiInstanceLoopCharacteristics isSequential="{sequential}">
        <bpmn:extensionElements>
          <zeebe:loopCharacteristics inputCollection="=items" inputElement="item" {output} />
        </bpmn:extensionElements>
      </bpmn:multiInstanceLoopCharacteristics>"""


def service_task(element_id: str, job_type: str) -> str:
    extensions = f'<bpmn:extensionElements><zeebe:taskDefinition type="{job_type}" /></bpmn:extensionElements>'
    return f'<bpmn:serviceTask id="{element_id}">{extensions}</bpmn:serviceTask>'


async def deploy_xml(d: Driver, name: str, template: str, *, sequential: bool, output: str, **fields: str) -> None:
    """Deploy ``template`` with its multi-instance loop (``{loop}``) and ``fields`` filled in."""
    loop = LOOP.format(sequential=str(sequential).lower(), output=output)
    xml = template.format(header=HEADER, loop=loop, **fields)
    resources = [{"resourceName": name, "resource": xml.encode()}]
    accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources}))


PROCESS = """{header}  <bpmn:process id="{pid}" isExecutable="true">
    <bpmn:startEvent id="start" />
    <bpmn:serviceTask id="work">
      <bpmn:extensionElements><zeebe:taskDefinition type="{pid}-work" />{mappings}</bpmn:extensionElements>
{loop}
    </bpmn:serviceTask>
    {task_after}
    <bpmn:endEvent id="end" />
    <bpmn:sequenceFlow id="f0" sourceRef="start" targetRef="work" />
    <bpmn:sequenceFlow id="f1" sourceRef="work" targetRef="after" />
    <bpmn:sequenceFlow id="f2" sourceRef="after" targetRef="end" />
  </bpmn:process>
</bpmn:definitions>
"""

COLLECTED = 'outputCollection="results" outputElement="=result"'


async def _deploy(d: Driver, pid: str, *, sequential: bool, output: str, mappings: str = "") -> None:
    after = service_task("after", f"{pid}-after")
    await deploy_xml(
        d, f"{pid}.bpmn", PROCESS, sequential=sequential, output=output, pid=pid, mappings=mappings, task_after=after
    )


async def _run(d: Driver, pid: str, items: list[Any], completion: Any) -> dict[str, Any]:
    """Run ``pid`` over ``items``, completing each instance's job with ``completion(item)``; the process scope's
    variables once the body has completed (its ``after`` task waits)."""
    key = accepted(await d.create(pid, {"items": items})).value["processInstanceKey"]
    done = 0
    while done < len(items):
        await d.settle()
        jobs = await d.activate(f"{pid}-work")
        assert jobs, f"{pid}: {done} of {len(items)} instances completed, no job waits"
        for job in reversed(jobs):  # completion order is not input order
            scope = d.read(lambda s, j=job: s.jobs.get(j)["value"]["elementInstanceKey"])
            item = d.read(lambda s, k=scope: s.variables.get_local(k, "item")[1])
            accepted(await d.complete(job, completion(item)))
            done += 1
    await d.settle()
    assert await d.activate(f"{pid}-after", 1), f"{pid}: the body did not complete"
    return d.read(lambda s: s.variables.local(key))


@pytest.mark.parametrize("sequential", [False, True], ids=["parallel", "sequential"])
async def test_an_output_variable_stays_in_each_instance_and_is_collected(tmp_path: Path, sequential: bool) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await _deploy(d, "plain", sequential=sequential, output=COLLECTED)
    await _deploy(d, "path", sequential=sequential, output='outputCollection="totals" outputElement="=result.total"')
    await _deploy(d, "input", sequential=sequential, output='outputCollection="seen" outputElement="=item"')

    plain = await _run(d, "plain", [1, 2, 3], lambda item: {"result": item * 10, "other": item})
    assert plain["results"] == [10, 20, 30]
    assert "result" not in plain, "the output variable leaked into the process scope"
    assert plain["other"] in (1, 2, 3)  # variables the output element does not read propagate as before
    assert "item" not in plain and "loopCounter" not in plain

    path = await _run(d, "path", ["a", "b"], lambda item: {"result": {"total": item.upper()}})
    assert path == {"items": ["a", "b"], "totals": ["A", "B"]}

    # the input element is local already: the worker's change to it is collected, nothing else is created
    same = await _run(d, "input", [1, 2], lambda item: {"item": item + 100})
    assert same == {"items": [1, 2], "seen": [101, 102]}

    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


@pytest.mark.parametrize("sequential", [False, True], ids=["parallel", "sequential"])
async def test_output_mappings_of_an_instance_start_in_the_instance(tmp_path: Path, sequential: bool) -> None:
    """As in Zeebe, an instance's output mappings merge from its own scope: one onto the output variable is
    collected, others reach the flow scope; the job's variables stay in the task (it has output mappings)."""
    d = Driver(tmp_path / "p" / "1")
    d.open()
    mappings = (
        '<zeebe:ioMapping><zeebe:output source="=out * 2" target="result" />'
        '<zeebe:output source="=out" target="last" /></zeebe:ioMapping>'
    )
    await _deploy(d, "mapped", sequential=sequential, output=COLLECTED, mappings=mappings)
    mapped = await _run(d, "mapped", [1, 2, 3], lambda item: {"out": item})
    assert mapped["results"] == [2, 4, 6]
    assert "result" not in mapped and "out" not in mapped
    assert mapped["last"] in (1, 2, 3)
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


CONTAINERS = """{header}  <bpmn:process id="calls" isExecutable="true">
    <bpmn:startEvent id="s1" />
    <bpmn:callActivity id="each">
      <bpmn:extensionElements>
        <zeebe:calledElement processId="called" propagateAllParentVariables="false" />
        <zeebe:ioMapping><zeebe:input source="=item" target="n" /></zeebe:ioMapping>
      </bpmn:extensionElements>
{loop}
    </bpmn:callActivity>
    {task_after1}
    <bpmn:sequenceFlow id="fa" sourceRef="s1" targetRef="each" />
    <bpmn:sequenceFlow id="fb" sourceRef="each" targetRef="after1" />
  </bpmn:process>
  <bpmn:process id="called" isExecutable="true">
    <bpmn:startEvent id="s2" />
    {task_work2}
    <bpmn:sequenceFlow id="fc" sourceRef="s2" targetRef="work2" />
  </bpmn:process>
  <bpmn:process id="subs" isExecutable="true">
    <bpmn:startEvent id="s3" />
    <bpmn:subProcess id="sub">
{loop}
      <bpmn:startEvent id="s4" />
      <bpmn:serviceTask id="work3">
        <bpmn:extensionElements><zeebe:taskDefinition type="subs-work" /></bpmn:extensionElements>
      </bpmn:serviceTask>
      <bpmn:sequenceFlow id="fd" sourceRef="s4" targetRef="work3" />
    </bpmn:subProcess>
    {task_after3}
    <bpmn:sequenceFlow id="fe" sourceRef="s3" targetRef="sub" />
    <bpmn:sequenceFlow id="ff" sourceRef="sub" targetRef="after3" />
  </bpmn:process>
</bpmn:definitions>
"""


def _visible(state: Any, scope_key: int, name: str) -> Any:
    """The value of ``name`` seen from ``scope_key`` (its own scope, then each enclosing one)."""
    while scope_key > 0:
        found = state.variables.get_local(scope_key, name)
        if found is not None:
            return found[1]
        scope_key = state.elements.get(scope_key).value.flow_scope_key
    raise KeyError(name)


@pytest.mark.parametrize("sequential", [False, True], ids=["parallel", "sequential"])
async def test_a_called_process_or_sub_process_fills_its_instance_output_variable(
    tmp_path: Path, sequential: bool
) -> None:
    """The output variable is local to each call activity / sub-process instance: the called process's variables
    (propagated back) and a task inside the sub-process set it there, not in the parent scope. (The called process
    gets only the call activity's own variables: a copy of the output collection would come back stale.)"""
    d = Driver(tmp_path / "p" / "1")
    d.open()
    tasks = {
        "task_after1": service_task("after1", "calls-after"),
        "task_work2": service_task("work2", "calls-work"),
        "task_after3": service_task("after3", "subs-after"),
    }
    await deploy_xml(d, "containers.bpmn", CONTAINERS, sequential=sequential, output=COLLECTED, **tasks)
    for pid in ("calls", "subs"):
        key = accepted(await d.create(pid, {"items": [1, 2]})).value["processInstanceKey"]
        for _ in range(2):
            await d.settle()
            for job in await d.activate(f"{pid}-work"):
                item = d.read(lambda s, j=job: _visible(s, s.jobs.get(j)["value"]["elementInstanceKey"], "item"))
                accepted(await d.complete(job, {"result": item * 10}))
        await d.settle()
        assert await d.activate(f"{pid}-after", 1), f"{pid}: the body did not complete"
        assert d.read(lambda s, k=key: s.variables.local(k)) == {"items": [1, 2], "results": [10, 20]}, pid
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


RECEIVE = """{header}  <bpmn:message id="m" name="answer">
    <bpmn:extensionElements><zeebe:subscription correlationKey="=item" /></bpmn:extensionElements>
  </bpmn:message>
  <bpmn:process id="receive" isExecutable="true">
    <bpmn:startEvent id="s" />
    <bpmn:receiveTask id="wait" messageRef="m">
{loop}
    </bpmn:receiveTask>
    {task_after}
    <bpmn:sequenceFlow id="f0" sourceRef="s" targetRef="wait" />
    <bpmn:sequenceFlow id="f1" sourceRef="wait" targetRef="after" />
  </bpmn:process>
</bpmn:definitions>
"""


@pytest.mark.parametrize("sequential", [False, True], ids=["parallel", "sequential"])
async def test_message_variables_fill_the_instance_output_variable(tmp_path: Path, sequential: bool) -> None:
    """A receive task's message variables merge from the instance: the output variable is collected, the others
    reach the flow scope."""
    d = Driver(tmp_path / "p" / "1")
    d.open()
    after = service_task("after", "receive-after")
    await deploy_xml(d, "receive.bpmn", RECEIVE, sequential=sequential, output=COLLECTED, task_after=after)
    key = accepted(await d.create("receive", {"items": ["a", "b"]})).value["processInstanceKey"]
    for item in ("a", "b"):
        await d.settle()
        message = {
            "name": "answer",
            "correlationKey": item,
            "timeToLive": 60_000,
            "messageId": "",
            "variables": {"result": item.upper(), "seen": item},
            "tenantId": TENANT,
        }
        accepted(await d.send(ValueType.MESSAGE, MessageIntent.PUBLISH, message))
    for _ in range(100):  # a buffered message correlates once the instance's subscription opens
        await d.settle()
        if await d.activate("receive-after", 1):
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError(f"the body did not complete: {d.read(lambda s: s.variables.local(key))}")
    variables = d.read(lambda s: s.variables.local(key))
    assert variables == {"items": ["a", "b"], "results": ["A", "B"], "seen": variables["seen"]}
    assert variables["seen"] in ("a", "b")  # the message's other variables go on up
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


@pytest.mark.parametrize("sequential", [False, True], ids=["parallel", "sequential"])
async def test_without_an_output_variable_completion_variables_reach_the_flow_scope(
    tmp_path: Path, sequential: bool
) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await _deploy(d, "none", sequential=sequential, output="")
    await _deploy(d, "expr", sequential=sequential, output='outputCollection="results" outputElement="=result + 1"')

    none = await _run(d, "none", [1, 2], lambda item: {"result": item})
    assert none["result"] in (1, 2)

    # an expression that is not a plain variable reference creates no local variable (as in Zeebe)
    expr = await _run(d, "expr", [5], lambda item: {"result": item})
    assert expr == {"items": [5], "result": 5, "results": [6]}

    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_the_instances_hold_the_output_variable_as_null_until_set(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    await _deploy(d, "held", sequential=False, output=COLLECTED)
    accepted(await d.create("held", {"items": ["x", "y"], "result": "outer"}))
    await d.settle()
    jobs = await d.activate("held-work")
    scopes = [d.read(lambda s, j=j: s.jobs.get(j)["value"]["elementInstanceKey"]) for j in jobs]
    assert [d.read(lambda s, k=k: s.variables.local(k)) for k in scopes] == [
        {"item": "x", "result": None, "loopCounter": 1},
        {"item": "y", "result": None, "loopCounter": 2},
    ]
    await d.close()


@pytest.mark.parametrize(
    ("output_element", "variable"),
    [
        ("=result", "result"),
        ("= result.total.net", "result"),
        ("=first name", "first name"),
        ("=result + 1", None),
        ("={x: result}", None),
        ("=result[1]", None),
        ("result", None),  # a static value
        ("=(", None),
        (None, None),
    ],
)
def test_which_output_elements_name_a_variable(output_element: str | None, variable: str | None) -> None:
    assert output_variable(output_element) == variable
