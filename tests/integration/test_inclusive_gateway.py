"""Inclusive gateways against a real ``weir start``: the fork takes every flow whose condition holds (else the
default, else an incident); the join waits only for the tokens that can still reach it."""

import json

import pytest
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import WeirProcess, eventually
from tests.integration.clients import (
    Stub,
    activate,
    activate_now,
    complete,
    create,
    create_with_result,
    deploy,
    incidents_of,
    is_active,
)


@pytest.mark.parametrize(
    ("variables", "taken", "not_taken"),
    [
        ({"amount": 150, "express": True}, ["a", "b"], ["c"]),
        ({"amount": 150, "express": False}, ["a"], ["b", "c"]),
        ({"amount": 5, "express": True}, ["b"], ["a", "c"]),
        ({"amount": 5, "express": False}, ["c"], ["a", "b"]),  # nothing holds: the default flow
    ],
)
def test_fork_takes_every_true_flow_and_the_join_waits_for_exactly_those(
    stub: Stub, variables: dict, taken: list[str], not_taken: list[str]
) -> None:
    d = deploy(stub, "inclusive-gateway.bpmn")
    result = create_with_result(stub, d.pid(), variables)
    jobs = {name: activate(stub, d.type(f"inc-{name}"))[0] for name in taken}
    for name in not_taken:
        assert activate_now(stub, d.type(f"inc-{name}"), wait_ms=100) == []
    for i, name in enumerate(taken):
        assert activate_now(stub, d.type("inc-after"), wait_ms=100) == [], f"the join fired before '{name}'"
        complete(stub, jobs[name].key, {f"done_{name}": i})
    (after,) = activate(stub, d.type("inc-after"))
    assert activate_now(stub, d.type("inc-after"), wait_ms=200) == [], "the join fired once"
    complete(stub, after.key)
    final = json.loads(result.result(timeout=10).variables)
    assert {k for k in final if k.startswith("done_")} == {f"done_{name}" for name in taken}


def test_join_stops_waiting_for_a_token_that_can_no_longer_arrive(stub: Stub) -> None:
    d = deploy(stub, "inclusive-reachability.bpmn")
    pi = create(stub, d.pid(), {"toJoin": False})
    (a,) = activate(stub, d.type("reach-a"))
    (b,) = activate(stub, d.type("reach-b"))
    complete(stub, a.key)
    # 'b' is still active and may reach the join: it waits
    assert activate_now(stub, d.type("reach-after"), wait_ms=300) == []
    complete(stub, b.key)  # 'decide' sends b's token to an end event: nothing else can reach the join
    (after,) = activate(stub, d.type("reach-after"))
    complete(stub, after.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_join_waits_for_a_token_that_does_arrive(stub: Stub) -> None:
    d = deploy(stub, "inclusive-reachability.bpmn")
    result = create_with_result(stub, d.pid(), {"toJoin": True})
    (b,) = activate(stub, d.type("reach-b"))
    complete(stub, b.key, {"fromB": 1})
    assert activate_now(stub, d.type("reach-after"), wait_ms=300) == []  # 'a' can still reach it
    (a,) = activate(stub, d.type("reach-a"))
    complete(stub, a.key, {"fromA": 1})
    (after,) = activate(stub, d.type("reach-after"))
    assert json.loads(after.variables) == {"toJoin": True, "fromA": 1, "fromB": 1}
    complete(stub, after.key)
    assert json.loads(result.result(timeout=10).variables) == {"toJoin": True, "fromA": 1, "fromB": 1}


def test_no_true_condition_and_no_default_raises_an_incident(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "inclusive-no-default.bpmn")
    pi = create(stub, d.pid(), {"x": "none"})
    (incident,) = eventually(lambda: incidents_of(weir, pi), what="the gateway's incident")
    assert incident.error_type == "CONDITION_ERROR"
    assert incident.element_id == "fork"
    assert "Expected at least one condition to evaluate to true" in incident.error_message

    stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=pi, variables='{"x": "b"}'), timeout=10)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    (job,) = activate(stub, d.type("nd-b"))
    assert activate_now(stub, d.type("nd-a"), wait_ms=100) == []
    complete(stub, job.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")
