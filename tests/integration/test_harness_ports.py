"""The test harness against ports taken between being picked and being bound: it starts Weir again on other ports.

Ports are picked before ``weir start`` binds them; meanwhile another test run's server, or a neighbouring Weir, can
take one. The process then exits saying so, and the harness picks new ports instead of failing the test's setup.
"""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import PortTaken, StartupFailed, WeirProcess, free_port, retry_on_taken_port
from tests.integration.clients import Stub


@pytest.fixture
def occupied_port() -> Iterator[int]:
    """A port held by a listening socket of someone else's (a server: SO_REUSEADDR, as Weir's own servers bind)."""
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", free_port()))
        holder.listen()
        yield int(holder.getsockname()[1])


def test_a_rest_port_taken_before_start_up_is_replaced(tmp_path: Path, occupied_port: int) -> None:
    node = WeirProcess(tmp_path / "data")
    node.rest_port = occupied_port  # as if another process took the picked port before Weir bound it
    node.start()
    try:
        assert f"could not bind the REST API to 127.0.0.1:{occupied_port}" in node.log()  # the first attempt's end
        assert node.rest_port != occupied_port
        with urllib.request.urlopen(f"{node.rest_url}/v2/topology", timeout=5) as r:
            assert r.status == 200
        with grpc.insecure_channel(node.address) as channel:
            topology = Stub(channel).Topology(pb.TopologyRequest(), timeout=10)
            assert topology.brokers[0].partitions[0].role == pb.Partition.LEADER
    finally:
        node.stop()


def test_a_neighbours_monitoring_port_does_not_pass_for_ready(tmp_path: Path, weir: WeirProcess) -> None:
    """The neighbour answers /ready on the port; the harness waits for its own process, which gets other ports."""
    node = WeirProcess(tmp_path / "data")
    node.monitoring_port = weir.monitoring_port
    node.start()
    try:
        assert f"could not bind the monitoring port to 127.0.0.1:{weir.monitoring_port}" in node.log()
        assert node.monitoring_port != weir.monitoring_port
        assert node.probe("/ready")[0] == 200
        assert node.proc is not None and node.proc.poll() is None
    finally:
        node.stop()


def test_a_start_up_failure_of_another_kind_fails_at_once_with_the_output(tmp_path: Path) -> None:
    node = WeirProcess(tmp_path / "data", env={"WEIR_BROKER_CLUSTER_PARTITIONS_COUNT": "none"})
    with pytest.raises(StartupFailed) as failure:
        node.start()
    assert not isinstance(failure.value, PortTaken)
    assert "invalid configuration" in str(failure.value)
    assert node.log().count("invalid configuration") == 1  # started once, not again


def test_a_port_taken_on_every_attempt_fails_with_the_last_output() -> None:
    attempts: list[int] = []

    def start(attempt: int) -> None:
        attempts.append(attempt)
        raise PortTaken(f"attempt {attempt}: address already in use")

    with pytest.raises(PortTaken, match=r"each of 3 attempts.*attempt 2: address already in use"):
        retry_on_taken_port(start, attempts=3)
    assert attempts == [0, 1, 2]
