"""The weir command line against a running Weir: deploy, create, status, and clear failures."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.harness import BPMN, REPO, WeirProcess


def weir_cli(*args: str, address: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "client.cli", *args, "--address", address],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_deploy_create_status(weir: WeirProcess) -> None:
    out = weir_cli("deploy", str(BPMN / "one-task.bpmn"), address=weir.address)
    assert out.returncode == 0, out.stderr
    deployed = json.loads(out.stdout)
    assert deployed["deployments"][0]["process"]["bpmnProcessId"] == "one-task"

    out = weir_cli("create", "one-task", "--variables", '{"orderId": 7}', address=weir.address)
    assert out.returncode == 0, out.stderr
    created = json.loads(out.stdout)
    assert int(created["processInstanceKey"]) >> 51 == 1

    out = weir_cli("status", address=weir.address)
    assert out.returncode == 0, out.stderr
    assert "Partition 1 : Leader, Healthy" in out.stdout


def test_failures_exit_non_zero_with_the_status(weir: WeirProcess) -> None:
    out = weir_cli("create", "no-such-process", address=weir.address)
    assert out.returncode == 1
    assert "NOT_FOUND" in out.stderr and "no-such-process" in out.stderr

    out = weir_cli("create", "one-task", "--variables", "[1, 2]", address=weir.address)
    assert out.returncode == 1
    assert "INVALID_ARGUMENT" in out.stderr

    out = weir_cli("deploy", str(BPMN / "does-not-exist.bpmn"), address=weir.address)
    assert out.returncode == 2
    assert "cannot read" in out.stderr


def test_probes_and_metrics(weir: WeirProcess) -> None:
    status, body = weir.probe("/health")
    assert status == 200 and body["status"] == "UP"
    assert body["partitions"]["1"]["role"] == "LEADER"
    assert weir.probe("/ready")[0] == 200
    assert weir.probe("/startup")[0] == 200
    metrics = weir.probe("/metrics")[1]["text"]
    assert "weir_stream_processor_records_total" in metrics
    assert weir.probe("/nope")[0] == 404


def test_admin_commands(weir: WeirProcess) -> None:
    monitoring = f"127.0.0.1:{weir.monitoring_port}"
    out = admin("partitions", monitoring)
    partition = json.loads(out.stdout)["partitions"]["1"]
    assert partition["role"] == "LEADER" and partition["commitPosition"] >= partition["processedPosition"]
    assert json.loads(admin("pause-exporting", monitoring).stdout)["exporting"] == "paused"
    assert json.loads(admin("partitions", monitoring).stdout)["partitions"]["1"]["exportingPaused"] is True
    assert json.loads(admin("resume-exporting", monitoring).stdout)["exporting"] == "resumed"
    snapshot = json.loads(admin("snapshot", monitoring).stdout)["snapshots"]["1"]
    assert snapshot >= partition["appliedPosition"]
    metrics = weir.probe("/metrics")[1]["text"]
    assert 'weir_snapshot_age_seconds{partition="1"}' in metrics
    assert 'weir_log_size_bytes{partition="1"}' in metrics
    # the earlier tests of this module deployed, created, and failed a create on an unknown process
    assert 'weir_gateway_requests_total{code="OK",method="DeployResource"} ' in metrics
    assert 'weir_gateway_requests_total{code="NOT_FOUND",method="CreateProcessInstance"} ' in metrics
    assert admin("partitions", "127.0.0.1:1").returncode == 1


def admin(command: str, monitoring: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "client.cli", "admin", command, "--monitoring", monitoring],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
