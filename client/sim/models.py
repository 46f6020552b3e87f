"""The simulator's catalogue of process models: small BPMN files covering what people run, written here as XML.

Each :class:`Model` says how to start an instance (variables drawn from the run's RNG) and what its jobs are called,
so the workload can create instances, work their jobs and know which instances are expected to complete.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" '
    'xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="sim-{id}" targetNamespace="http://weir.sim">\n'
)


def _task(element_id: str, job_type: str, extra: str = "") -> str:
    return (
        f'<bpmn:serviceTask id="{element_id}"><bpmn:extensionElements><zeebe:taskDefinition type="{job_type}" />'
        f"</bpmn:extensionElements>{extra}</bpmn:serviceTask>"
    )


def _flow(flow_id: str, source: str, target: str, condition: str = "") -> str:
    if condition:
        return (
            f'<bpmn:sequenceFlow id="{flow_id}" sourceRef="{source}" targetRef="{target}">'
            f'<bpmn:conditionExpression xsi:type="bpmn:tFormalExpression" '
            f'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">{condition}</bpmn:conditionExpression>'
            "</bpmn:sequenceFlow>"
        )
    return f'<bpmn:sequenceFlow id="{flow_id}" sourceRef="{source}" targetRef="{target}" />'


def _process(process_id: str, body: str, after: str = "") -> bytes:
    xml = (
        _HEAD.format(id=process_id)
        + f'<bpmn:process id="{process_id}" isExecutable="true">{body}</bpmn:process>{after}</bpmn:definitions>\n'
    )
    return xml.encode()


@dataclass(frozen=True, slots=True)
class Model:
    """A process the workload can start; ``completes``: an instance ends by itself once its jobs are worked."""

    process_id: str
    xml: bytes
    job_types: tuple[str, ...]
    variables: Callable[[random.Random], dict[str, Any]]
    completes: bool = True
    # A message the instance waits for: (message name, variable holding the correlation key).
    message: tuple[str, str] | None = None


def _linear(process_id: str, elements: list[tuple[str, str]]) -> bytes:
    ids = ["start", *(element_id for element_id, _ in elements), "end"]
    body = '<bpmn:startEvent id="start" />' + "".join(xml for _, xml in elements) + '<bpmn:endEvent id="end" />'
    body += "".join(_flow(f"f{i}", a, b) for i, (a, b) in enumerate(itertools.pairwise(ids)))
    return _process(process_id, body)


def _no_variables(rng: random.Random) -> dict[str, Any]:
    return {"n": rng.randint(0, 1000)}


ONE_TASK = Model(
    "sim-one-task", _linear("sim-one-task", [("task", _task("task", "sim-work"))]), ("sim-work",), _no_variables
)

TWO_TASKS = Model(
    "sim-two-tasks",
    _linear("sim-two-tasks", [("a", _task("a", "sim-work")), ("b", _task("b", "sim-check"))]),
    ("sim-work", "sim-check"),
    _no_variables,
)


def _parallel() -> bytes:
    body = (
        '<bpmn:startEvent id="start" /><bpmn:parallelGateway id="fork" /><bpmn:parallelGateway id="join" />'
        + _task("left", "sim-work")
        + _task("right", "sim-check")
        + '<bpmn:endEvent id="end" />'
        + _flow("f0", "start", "fork")
        + _flow("f1", "fork", "left")
        + _flow("f2", "fork", "right")
        + _flow("f3", "left", "join")
        + _flow("f4", "right", "join")
        + _flow("f5", "join", "end")
    )
    return _process("sim-parallel", body)


PARALLEL = Model("sim-parallel", _parallel(), ("sim-work", "sim-check"), _no_variables)


def _inclusive() -> bytes:
    body = (
        '<bpmn:startEvent id="start" /><bpmn:inclusiveGateway id="fork" default="f3" />'
        '<bpmn:inclusiveGateway id="join" />'
        + _task("big", "sim-work")
        + _task("small", "sim-check")
        + '<bpmn:endEvent id="end" />'
        + _flow("f0", "start", "fork")
        + _flow("f1", "fork", "big", "=n &gt; 300")
        + _flow("f2", "fork", "small", "=n &lt; 700")
        + _flow("f3", "fork", "join")
        + _flow("f4", "big", "join")
        + _flow("f5", "small", "join")
        + _flow("f6", "join", "end")
    )
    return _process("sim-inclusive", body)


INCLUSIVE = Model("sim-inclusive", _inclusive(), ("sim-work", "sim-check"), _no_variables)


def _message() -> bytes:
    catch = (
        '<bpmn:intermediateCatchEvent id="wait"><bpmn:messageEventDefinition messageRef="msg" />'
        "</bpmn:intermediateCatchEvent>"
    )
    after = (
        '<bpmn:message id="msg" name="sim-approved"><bpmn:extensionElements>'
        '<zeebe:subscription correlationKey="=orderId" /></bpmn:extensionElements></bpmn:message>'
    )
    ids = ["start", "wait", "task", "end"]
    body = '<bpmn:startEvent id="start" />' + catch + _task("task", "sim-work") + '<bpmn:endEvent id="end" />'
    body += "".join(_flow(f"f{i}", a, b) for i, (a, b) in enumerate(itertools.pairwise(ids)))
    return _process("sim-message", body, after)


MESSAGE = Model(
    "sim-message",
    _message(),
    ("sim-work",),
    lambda rng: {"orderId": f"order-{rng.randint(0, 1 << 30)}"},
    message=("sim-approved", "orderId"),
)


def _timer() -> bytes:
    wait = (
        '<bpmn:intermediateCatchEvent id="wait"><bpmn:timerEventDefinition><bpmn:timeDuration>=delay'
        "</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:intermediateCatchEvent>"
    )
    return _linear("sim-timer", [("wait", wait), ("task", _task("task", "sim-work"))])


TIMER = Model("sim-timer", _timer(), ("sim-work",), lambda rng: {"delay": f"PT{rng.randint(1, 5)}S"})


def _call() -> bytes:
    call = (
        '<bpmn:callActivity id="call"><bpmn:extensionElements>'
        '<zeebe:calledElement processId="sim-one-task" propagateAllChildVariables="false" />'
        "</bpmn:extensionElements></bpmn:callActivity>"
    )
    return _linear("sim-call", [("call", call), ("task", _task("task", "sim-check"))])


CALL = Model("sim-call", _call(), ("sim-work", "sim-check"), _no_variables)


def _multi_instance() -> bytes:
    loop = (
        "<bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics "
        'inputCollection="=items" inputElement="item" /></bpmn:extensionElements>'
        "</bpmn:multiInstanceLoopCharacteristics>"
    )
    return _linear("sim-multi", [("task", _task("task", "sim-work", loop))])


MULTI_INSTANCE = Model(
    "sim-multi", _multi_instance(), ("sim-work",), lambda rng: {"items": list(range(rng.randint(1, 4)))}
)


def _user_task() -> bytes:
    task = (
        '<bpmn:userTask id="task"><bpmn:extensionElements><zeebe:userTask /></bpmn:extensionElements></bpmn:userTask>'
    )
    return _linear("sim-user-task", [("task", task)])


USER_TASK = Model("sim-user-task", _user_task(), (), _no_variables)

# A job whose worker fails it without retries: an incident the workload resolves (retries back, then resolve).
INCIDENT = Model(
    "sim-incident",
    _linear("sim-incident", [("task", _task("task", "sim-flaky"))]),
    ("sim-flaky",),
    _no_variables,
)


# Jobs pushed to the workers' job streams (StreamActivatedJobs); a poller takes those that became activatable while
# no stream was open. The timer before the task keeps due work pending while leadership moves.
def _pushed() -> bytes:
    wait = (
        '<bpmn:intermediateCatchEvent id="wait"><bpmn:timerEventDefinition><bpmn:timeDuration>=delay'
        "</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:intermediateCatchEvent>"
    )
    return _linear(
        "sim-pushed", [("push", _task("push", "sim-push")), ("wait", wait), ("check", _task("check", "sim-push"))]
    )


PUSHED = Model("sim-pushed", _pushed(), ("sim-push",), lambda rng: {"delay": f"PT{rng.randint(1, 3)}S"})

CATALOGUE: tuple[Model, ...] = (
    ONE_TASK,
    TWO_TASKS,
    PARALLEL,
    INCLUSIVE,
    MESSAGE,
    TIMER,
    CALL,
    MULTI_INSTANCE,
    USER_TASK,
    INCIDENT,
    PUSHED,
)

# What a canary runs: a one-task instance, expected to complete within a bound even while hostile work runs.
CANARY = ONE_TASK
