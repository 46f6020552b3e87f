"""Runaway expressions against a real ``weir start``: each becomes an incident naming the expression and the
budget it exceeded, and the broker keeps serving ordinary workflows promptly right after.

Before FEEL had a budget, the regex below blocked the partition for ~24 s, the nested loop grew the broker
to gigabytes and the doubling string was stored as an 84 MB variable.
"""

from __future__ import annotations

import json
import time

from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import WeirProcess, eventually
from tests.integration.clients import (
    Stub,
    activate,
    complete,
    create,
    create_with_result,
    deploy,
    is_active,
    open_incidents,
)


def test_runaway_expressions_raise_incidents_and_the_broker_keeps_serving(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "expression-budget.bpmn")
    started = time.monotonic()
    input_pi = create(stub, d.pid("budget-input"))
    condition_pi = create(stub, d.pid("budget-condition"))
    regex_pi = create(stub, d.pid("budget-regex"), {"name": "a" * 30 + "!"})
    output_pi = create(stub, d.pid("budget-output"))
    (job,) = activate(stub, d.type("budget-copy"))
    complete(stub, job.key, {"chunk": "x" * 300_000})  # the output mapping makes 20 copies: 6 MB

    # an ordinary workflow on the same broker, right after
    one = deploy(stub, "one-task.bpmn")
    pending = create_with_result(stub, one.pid(), {"n": 21})
    (work,) = activate(stub, one.type("test"))
    complete(stub, work.key, {"doubled": 42})
    result = pending.result(timeout=10)
    assert json.loads(result.variables) == {"n": 21, "doubled": 42}
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"the broker took {elapsed:.1f}s to serve an ordinary workflow after the runaway ones"

    eventually(lambda: not is_active(stub, regex_pi), timeout=5, what="the regex instance to take its default flow")
    for pi in (input_pi, condition_pi, output_pi):
        assert is_active(stub, pi), "an instance with a failed expression waits on its incident"

    weir.stop()
    incidents = {r.value["processInstanceKey"]: r.value for r in open_incidents(weir)}
    weir.start()
    assert regex_pi not in incidents

    loop = incidents[input_pi]
    assert loop["elementId"] == "bi-task"
    assert "'for i in 1..100000, j in 1..100000 return [i, j]'" in loop["errorMessage"]
    assert "step budget" in loop["errorMessage"]

    doubling = incidents[condition_pi]
    assert doubling["elementId"] == "bc-split"
    assert "partial[-1] + partial[-1]" in doubling["errorMessage"]
    assert "size budget" in doubling["errorMessage"]

    copies = incidents[output_pi]
    assert copies["elementId"] == "bo-task"
    assert "'for i in 1..20 return chunk'" in copies["errorMessage"]
    assert "larger than the maximum variable size" in copies["errorMessage"]

    # and after the restart it still serves
    pending = create_with_result(stub, one.pid(), {"n": 1})
    (work,) = activate(stub, one.type("test"))
    complete(stub, work.key)
    assert json.loads(pending.result(timeout=10).variables) == {"n": 1}
    assert stub.Topology(pb.TopologyRequest(), timeout=10).brokers
