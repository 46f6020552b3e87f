"""Straight-through processing loops: refused at deployment as Zeebe refuses them, naming the elements in order."""

from __future__ import annotations

import itertools

from broker.engine.bpmn import parse_bpmn
from broker.engine.bpmn.validation import STRAIGHT_THROUGH_LOOP
from tests.unit.test_bpmn_parser import definitions, flow, problems_of, process_xml, service_task


def tasks(*ids: str, tag: str = "task") -> str:
    return "".join(f'<bpmn:{tag} id="{i}"/>' for i in ids)


def flows(*pairs: tuple[str, str] | tuple[str, str, str]) -> str:
    return "".join(flow(f"f{n}", *pair) for n, pair in enumerate(pairs))


def loop_problem(process_id: str, *ids: str) -> str:
    return f"'{process_id}': {STRAIGHT_THROUGH_LOOP}{' > '.join(ids)}"


def script_task(task_id: str) -> str:
    return (
        f'<bpmn:scriptTask id="{task_id}"><bpmn:extensionElements>'
        '<zeebe:script expression="=n + 1" resultVariable="n"/></bpmn:extensionElements></bpmn:scriptTask>'
    )


def test_a_loop_of_two_plain_tasks_is_refused() -> None:
    body = '<bpmn:startEvent id="start"/>' + tasks("task1", "task2")
    body += flows(("start", "task1"), ("task1", "task2"), ("task2", "task1"))
    assert problems_of(process_xml(body)) == (loop_problem("p", "task1", "task2", "task1"),)


def test_a_loop_of_manual_tasks_is_refused() -> None:
    body = '<bpmn:startEvent id="start"/>' + tasks("task1", "task2", tag="manualTask")
    body += flows(("start", "task1"), ("task1", "task2"), ("task2", "task1"))
    assert problems_of(process_xml(body)) == (loop_problem("p", "task1", "task2", "task1"),)


def test_a_loop_through_gateways_is_named_from_the_first_task_by_id() -> None:
    # start > userTask1 > parallel1 > exclusive1 > task1 > parallel2 > manualTask1 > exclusive2 -(true)> task1
    #                                                       parallel2 > userTask3 > end
    #                                                                   exclusive2 -(default)> userTask2 > exclusive1
    #                      parallel1 > task2 > task3 > end2
    body = (
        '<bpmn:startEvent id="start"/>'
        + service_task("userTask1")
        + '<bpmn:parallelGateway id="parallel1"/>'
        + '<bpmn:exclusiveGateway id="exclusive1"/>'
        + tasks("task1")
        + '<bpmn:parallelGateway id="parallel2"/>'
        + tasks("manualTask1", tag="manualTask")
        + '<bpmn:exclusiveGateway id="exclusive2" default="toUserTask2"/>'
        + service_task("userTask2")
        + service_task("userTask3")
        + '<bpmn:endEvent id="end"/>'
        + tasks("task2", "task3")
        + '<bpmn:endEvent id="end2"/>'
        + flows(
            ("start", "userTask1"),
            ("userTask1", "parallel1"),
            ("parallel1", "exclusive1"),
            ("exclusive1", "task1"),
            ("task1", "parallel2"),
            ("parallel2", "manualTask1"),
            ("manualTask1", "exclusive2"),
            ("userTask2", "exclusive1"),
            ("parallel2", "userTask3"),
            ("userTask3", "end"),
            ("exclusive2", "task1", "=true"),
            ("parallel1", "task2"),
            ("task2", "task3"),
            ("task3", "end2"),
        )
        + flow("toUserTask2", "exclusive2", "userTask2")
    )
    assert problems_of(process_xml(body)) == (
        loop_problem("p", "manualTask1", "exclusive2", "task1", "parallel2", "manualTask1"),
    )


def test_only_the_looping_part_of_a_chain_is_named() -> None:
    ids = [f"task{i}" for i in range(1, 10)]
    chain = [("start", "task1"), *itertools.pairwise(ids), ("task9", "task7")]
    body = '<bpmn:startEvent id="start"/>' + tasks(*ids) + flows(*chain)
    assert problems_of(process_xml(body)) == (loop_problem("p", "task7", "task8", "task9", "task7"),)


def test_each_process_of_a_resource_is_checked() -> None:
    first = '<bpmn:startEvent id="s1"/>' + tasks("task1", "task2")
    first += flow("a1", "s1", "task1") + flow("a2", "task1", "task2") + flow("a3", "task2", "task1")
    second = '<bpmn:startEvent id="s2"/>' + tasks("manualTask1", "manualTask2", tag="manualTask")
    second += flow("b1", "s2", "manualTask2") + flow("b2", "manualTask2", "manualTask1")
    second += flow("b3", "manualTask1", "manualTask2")
    data = definitions(
        f'<bpmn:process id="process1" isExecutable="true">{first}</bpmn:process>'
        f'<bpmn:process id="process2" isExecutable="true">{second}</bpmn:process>'
    )
    assert problems_of(data) == (
        loop_problem("process1", "task1", "task2", "task1"),
        loop_problem("process2", "manualTask1", "manualTask2", "manualTask1"),
    )


def test_a_wait_state_in_the_loop_makes_it_a_regular_loop() -> None:
    body = '<bpmn:startEvent id="start"/>' + service_task("task1") + service_task("task2")
    body += flows(("start", "task1"), ("task1", "task2"), ("task2", "task1"))
    assert parse_bpmn(process_xml(body), "loop.bpmn")
    body = '<bpmn:startEvent id="start"/>' + tasks("task1", "task2") + service_task("wait")
    body += flows(("start", "task1"), ("task1", "wait"), ("wait", "task2"), ("task2", "task1"))
    assert parse_bpmn(process_xml(body), "loop.bpmn")


def test_a_loop_of_gateways_alone_is_allowed() -> None:
    body = (
        '<bpmn:startEvent id="start"/><bpmn:exclusiveGateway id="again" default="out"/>'
        '<bpmn:exclusiveGateway id="back"/><bpmn:endEvent id="end"/>'
        + flows(("start", "again"), ("again", "back", "=loop"), ("back", "again"))
        + flow("out", "again", "end")
    )
    assert parse_bpmn(process_xml(body), "loop.bpmn")


def test_a_feel_script_task_is_not_passed_straight_through() -> None:
    body = (
        '<bpmn:startEvent id="start"/><bpmn:exclusiveGateway id="again" default="out"/>'
        + script_task("count")
        + '<bpmn:endEvent id="end"/>'
        + flows(("start", "again"), ("again", "count", "=n &lt; 10"), ("count", "again"))
        + flow("out", "again", "end")
    )
    assert parse_bpmn(process_xml(body), "loop.bpmn")


def test_a_loop_through_a_throw_event_and_a_sub_process_is_refused() -> None:
    inner = '<bpmn:startEvent id="inner_start"/><bpmn:endEvent id="inner_end"/>' + flow(
        "i1", "inner_start", "inner_end"
    )
    body = (
        '<bpmn:startEvent id="start"/><bpmn:intermediateThrowEvent id="throw"/>'
        f'<bpmn:subProcess id="sub">{inner}</bpmn:subProcess>'
        + flows(("start", "throw"), ("throw", "sub"), ("sub", "throw"))
    )
    assert problems_of(process_xml(body)) == (loop_problem("p", "throw", "sub", "inner_start", "inner_end", "throw"),)


def test_a_process_calling_itself_straight_through_is_refused() -> None:
    body = (
        '<bpmn:startEvent id="start"/><bpmn:callActivity id="call"><bpmn:extensionElements>'
        '<zeebe:calledElement processId="p"/></bpmn:extensionElements></bpmn:callActivity>'
        '<bpmn:endEvent id="end"/>' + flows(("start", "call"), ("call", "end"))
    )
    assert problems_of(process_xml(body)) == (loop_problem("p", "call", "start", "call"),)


def test_every_fixture_still_deploys() -> None:
    from tests.unit.test_bpmn_parser import VALID_FIXTURES

    for path in VALID_FIXTURES:
        assert parse_bpmn(path.read_bytes(), path.name)
