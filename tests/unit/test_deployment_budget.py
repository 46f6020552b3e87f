"""The work budget of one deployment on an in-process partition: a cap on resources, on the XML elements they hold
together and on the invalid resources checked, each refusal naming its setting, and a rejection that stays small."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import ConfigError, load
from broker.engine.deployment_limits import MAX_REPORTED_PROBLEMS, DeploymentLimits, rejection
from broker.protocol.enums import DeploymentIntent, RecordType, RejectionType, ValueType
from broker.protocol.record import Record
from broker.safe_xml import parse_xml
from broker.stream.partition import PartitionConfig
from tests.harness import BPMN
from tests.unit.test_replay import Driver, accepted

ONE_TASK = (BPMN / "one-task.bpmn").read_bytes()
ONE_TASK_ELEMENTS = sum(1 for _ in parse_xml(ONE_TASK).iter())
# gRPC clients refuse a status message (the rejection's text) beyond 16 KiB
GRPC_STATUS_LIMIT = 16 * 1024


def _config(**limits: int) -> PartitionConfig:
    return PartitionConfig(checker_interval_s=0.005, deployment_limits=DeploymentLimits(**limits))


def _copy(n: int) -> tuple[str, bytes]:
    """A valid one-task model under its own process id and resource name."""
    return f"copy-{n}.bpmn", ONE_TASK.replace(b'id="one-task"', f'id="one-task-{n}"'.encode())


async def _deploy(d: Driver, resources: list[tuple[str, bytes]]) -> Record:
    value = {"resources": [{"resourceName": name, "resource": data} for name, data in resources]}
    return await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, value)


def _rejected(rec: Record) -> str:
    assert rec.record_type == RecordType.COMMAND_REJECTION, rec.describe()
    assert rec.rejection_type == RejectionType.INVALID_ARGUMENT
    return rec.rejection_reason


@pytest.fixture
async def driver(tmp_path: Path, request: pytest.FixtureRequest) -> Driver:
    d = Driver(tmp_path / "partition", _config(**getattr(request, "param", {})))
    d.open()
    yield d
    await d.close()


@pytest.mark.parametrize("driver", [{"max_resources": 3}], indirect=True)
async def test_more_resources_than_allowed_are_refused_before_any_is_read(driver: Driver) -> None:
    reason = _rejected(await _deploy(driver, [_copy(n) for n in range(4)]))
    assert "at most 3 resources in one deployment" in reason
    assert "broker.deployments.maxResources" in reason and "but got 4" in reason
    # as many as allowed deploy
    accepted(await _deploy(driver, [_copy(n) for n in range(3)]))


async def test_checking_stops_after_the_first_invalid_resources_and_says_how_many_were_skipped(
    driver: Driver,
) -> None:
    hostile = [(f"r{n}.bpmn", b"<a/>") for n in range(900)] + [(f"r{n}.dmn", b"<a/>") for n in range(90)]
    reason = _rejected(await _deploy(driver, hostile))
    assert reason.count("is not a valid BPMN resource") == 10
    assert "'r0.bpmn'" in reason and "'r9.bpmn'" in reason and "'r10.bpmn'" not in reason
    assert "… and 980 more resources not checked" in reason
    assert "broker.deployments.maxInvalidResources" in reason
    assert len(reason.encode()) < GRPC_STATUS_LIMIT
    # the partition goes on deploying
    accepted(await _deploy(driver, [_copy(1)]))


@pytest.mark.parametrize("driver", [{"max_invalid_resources": 2}], indirect=True)
async def test_valid_resources_do_not_count_as_invalid(driver: Driver) -> None:
    resources = [_copy(0), ("bad-1.bpmn", b"x"), _copy(1), ("bad-2.dmn", b"<a/>"), ("bad-3.form", b"{")]
    reason = _rejected(await _deploy(driver, resources))
    assert "'bad-1.bpmn'" in reason and "'bad-2.dmn'" in reason and "bad-3.form" not in reason
    assert "… and 1 more resources not checked" in reason


@pytest.mark.parametrize("driver", [{"max_elements": ONE_TASK_ELEMENTS * 2 + 1}], indirect=True)
async def test_the_xml_element_budget_is_shared_by_the_resources_of_a_deployment(driver: Driver) -> None:
    accepted(await _deploy(driver, [_copy(0), _copy(1)]))
    reason = _rejected(await _deploy(driver, [_copy(2), _copy(3), _copy(4), _copy(5)]))
    assert f"'copy-4.bpmn': the resources of this deployment hold more than {ONE_TASK_ELEMENTS * 2 + 1}" in reason
    assert "broker.deployments.maxElements" in reason
    assert "… and 1 more resources not checked" in reason
    # the budget is per deployment: the next one has all of it again
    accepted(await _deploy(driver, [_copy(4), _copy(5)]))


@pytest.mark.parametrize("driver", [{"max_elements": 1000}], indirect=True)
async def test_a_resource_over_the_element_budget_is_refused(driver: Driver) -> None:
    tasks = "".join(f'<bpmn:task id="t{n}" />' for n in range(1200))
    big = (
        '<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" id="d" targetNamespace="x">'
        f'<bpmn:process id="big" isExecutable="true">{tasks}</bpmn:process></bpmn:definitions>'
    ).encode()
    reason = _rejected(await _deploy(driver, [("big.bpmn", big)]))
    assert "'big.bpmn': the resources of this deployment hold more than 1000 XML elements" in reason


@pytest.mark.parametrize("driver", [{"max_elements": 1000}], indirect=True)
async def test_malformed_resources_are_charged_the_elements_read_before_their_error(driver: Driver) -> None:
    malformed = b"<a>" + b"<b/>" * 900  # never closed
    reason = _rejected(await _deploy(driver, [("m1.bpmn", malformed), ("m2.dmn", malformed), _copy(0)]))
    assert "'m1.bpmn' is not a valid BPMN resource" in reason and "not well-formed" in reason
    assert "'m2.dmn': the resources of this deployment hold more than 1000 XML elements" in reason
    assert "… and 1 more resources not checked" in reason


def test_a_rejection_lists_the_first_problems_and_counts_the_rest() -> None:
    limits = DeploymentLimits()
    problems = [f"'r{n}.bpmn' is not valid (2 problems):\n'x': " + "long " * 200 for n in range(40)]
    text = rejection(problems, skipped_resources=7, limits=limits)
    lines = text.splitlines()
    assert lines[0] == "Expected to deploy new resources, but encountered the following errors:"
    assert len(lines) == 1 + MAX_REPORTED_PROBLEMS + 2
    assert lines[-2] == f"… and {80 - MAX_REPORTED_PROBLEMS} more problems not shown"
    assert lines[-1].startswith("… and 7 more resources not checked")
    assert all(len(line) <= 400 for line in lines)
    assert len(text.encode()) < GRPC_STATUS_LIMIT
    assert rejection(["one"], 0, limits).splitlines()[1:] == ["one"]


def test_the_limits_are_settings() -> None:
    deployments = load(env={"WEIR_BROKER_DEPLOYMENTS_MAX_RESOURCES": "5"})["broker"]["deployments"]
    assert deployments == {"maxResources": 5, "maxElements": 200_000, "maxInvalidResources": 10}
    with pytest.raises(ConfigError, match=r"broker\.deployments\.maxInvalidResources"):
        load(env={"WEIR_BROKER_DEPLOYMENTS_MAX_INVALID_RESOURCES": "0"})
