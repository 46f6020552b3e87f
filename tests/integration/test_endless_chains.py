"""Endless chains against a real ``weir start``: a signal storm (a signal start event whose instances broadcast the
same signal) and a process calling itself run on the partition while a one-task instance is started, worked and
completed over the gateway; and a chain of signal broadcasts past its bound stops with an incident and a metric."""

import re
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.harness import BPMN, WeirProcess, eventually
from tests.integration.clients import Deployed, Stub, activate, complete, create, deploy, is_active, open_incidents
from tests.integration.test_bad_input import deploy_raw
from tests.integration.test_events import broadcast

CANARY_BOUND_S = 20.0


def start(directory: Path, env: dict[str, str]) -> Iterator[tuple[WeirProcess, Stub]]:
    w = WeirProcess(directory, env=env)
    w.start()
    channel = grpc.insecure_channel(w.address)
    try:
        yield w, Stub(channel)
    finally:
        channel.close()
        w.kill()


@pytest.fixture
def unbounded(tmp_path: Path) -> Iterator[tuple[WeirProcess, Stub]]:
    """A Weir whose loop limits are off: a storm or a recursion runs until the test ends."""
    yield from start(
        tmp_path / "data",
        {
            "WEIR_BROKER_MAX_INSTANCES_PER_SIGNAL_CHAIN": "0",
            "WEIR_BROKER_MAX_PROCESS_DEPTH": "0",
            "WEIR_BROKER_MAX_RECURSIVE_INSTANCES_PER_CHAIN": "0",
        },
    )


@pytest.fixture
def bounded(tmp_path: Path) -> Iterator[tuple[WeirProcess, Stub]]:
    yield from start(
        tmp_path / "data",
        {"WEIR_BROKER_MAX_INSTANCES_PER_SIGNAL_CHAIN": "50", "WEIR_BROKER_MAX_RECURSIVE_INSTANCES_PER_CHAIN": "50"},
    )


def records_processed(w: WeirProcess) -> float:
    # a busy partition shares its loop with the monitoring port: a scrape may wait for a round on a loaded machine
    text = w.probe("/metrics", timeout=10.0)[1]["text"]
    return float(re.search(r'^weir_stream_processor_records_total\{partition="1"\} (\S+)$', text, re.M).group(1))


def test_a_one_task_instance_completes_while_a_signal_storm_and_a_recursion_run(
    unbounded: tuple[WeirProcess, Stub],
) -> None:
    w, stub = unbounded
    canary = deploy(stub, "one-task.bpmn")
    deploy(stub, "start-events/signal-storm.bpmn")
    deploy_raw(stub, ("call-recursive.bpmn", (BPMN / "call-recursive.bpmn").read_bytes()))  # calls itself by FEEL
    broadcast(stub, "storm")
    create(stub, "call-recursive", {"depth": 1})
    time.sleep(1.0)  # both chains are under way
    run_canary(w, stub, canary)
    # the chains are in the log: after a restart they go on, and so does everyone else
    w.restart()
    run_canary(w, stub, canary)
    w.stop()
    assert not open_incidents(w)


def run_canary(w: WeirProcess, stub: Stub, canary: Deployed) -> None:
    """A one-task instance from start to end within the bound, while the partition stays busy and healthy."""
    busy_from = records_processed(w)
    began = time.monotonic()
    instance = create(stub, canary.pid())
    (job,) = activate(stub, canary.type("test"), within=CANARY_BOUND_S)
    complete(stub, job.key)
    eventually(lambda: not is_active(stub, instance), timeout=CANARY_BOUND_S, what="the canary instance completed")
    took = time.monotonic() - began
    assert took < CANARY_BOUND_S, took
    status, body = w.probe("/health")
    assert status == 200 and body["status"] == "UP", body
    assert records_processed(w) > busy_from, "the chains still run: nothing stopped them"


def test_a_chain_of_signal_broadcasts_past_its_bound_stops_with_an_incident_and_a_metric(
    bounded: tuple[WeirProcess, Stub],
) -> None:
    w, stub = bounded
    deploy(stub, "start-events/signal-storm.bpmn")
    broadcast(stub, "storm")

    def stopped() -> str:
        text = w.probe("/metrics")[1]["text"]
        match = re.search(r'^weir_signal_chains_stopped_total\{partition="1"\} (\S+)$', text, re.M)
        assert match is not None and float(match.group(1)) == 1.0
        return text

    eventually(stopped, timeout=30, what="the chain stopped")
    assert "a chain of signal broadcasts started 50 process instances" in w.log()
    assert w.probe("/health")[1]["status"] == "UP"
    w.stop()
    (incident,) = open_incidents(w)
    assert "broker.maxInstancesPerSignalChain = 50" in incident.value["errorMessage"]
    assert incident.value["bpmnProcessId"].startswith("signal-storm")


def test_a_process_calling_itself_twice_stops_at_its_recursion_bound_and_the_canary_completes(
    bounded: tuple[WeirProcess, Stub],
) -> None:
    """Two parallel self-calls double at each level (the depth limit would come after 2^1000 instances): the chain's
    recursive instances stop at broker.maxRecursiveInstancesPerChain, set through the environment."""
    w, stub = bounded
    canary = deploy(stub, "one-task.bpmn")
    deploy_raw(stub, ("call-recursive-twice.bpmn", (BPMN / "call-recursive-twice.bpmn").read_bytes()))
    create(stub, "call-recursive-twice", {})

    def stopped() -> bool:
        text = w.probe("/metrics", timeout=10.0)[1]["text"]
        match = re.search(r'^weir_recursive_chains_stopped_total\{partition="1"\} (\S+)$', text, re.M)
        return match is not None and float(match.group(1)) == 1.0

    eventually(stopped, timeout=30, what="the recursion stopped")
    assert "a chain of calls started 50 instances of processes already on their call stack" in w.log()
    run_canary_after_chains(w, stub, canary)
    w.stop()
    incidents = open_incidents(w)
    assert incidents and all(
        "broker.maxRecursiveInstancesPerChain = 50" in i.value["errorMessage"] for i in incidents
    ), incidents


def run_canary_after_chains(w: WeirProcess, stub: Stub, canary: Deployed) -> None:
    """A one-task instance from start to end within the bound once the chains stopped."""
    began = time.monotonic()
    instance = create(stub, canary.pid())
    (job,) = activate(stub, canary.type("test"), within=CANARY_BOUND_S)
    complete(stub, job.key)
    eventually(lambda: not is_active(stub, instance), timeout=CANARY_BOUND_S, what="the canary instance completed")
    assert time.monotonic() - began < CANARY_BOUND_S
