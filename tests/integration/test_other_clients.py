"""Clients people already use, unchanged: zbctl (Go) and zeebe-node, from the npm registry.

`make test` installs them into .cache/node-clients (see the Makefile's `node-clients` target).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.harness import BPMN, REPO, WeirProcess

CLIENTS = REPO / ".cache" / "node-clients" / "node_modules"
ZBCTL = CLIENTS / "zbctl" / "bin" / "zbctl-cli.linux"

pytestmark = pytest.mark.skipif(
    not ZBCTL.exists() and os.environ.get("CI") != "true",
    reason="node clients not installed (run `make node-clients`)",
)


def zbctl(weir: WeirProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ZEEBE_ADDRESS": weir.address, "ZEEBE_INSECURE_CONNECTION": "true"}
    return subprocess.run([str(ZBCTL), *args], capture_output=True, text=True, env=env, timeout=60)


def test_zbctl_drives_weir(weir: WeirProcess) -> None:
    status = zbctl(weir, "status")
    assert status.returncode == 0, status.stderr
    assert "Partition 1 : Leader, Healthy" in status.stdout

    deployed = zbctl(weir, "deploy", "resource", str(BPMN / "one-task.bpmn"))
    assert deployed.returncode == 0, deployed.stderr
    assert json.loads(deployed.stdout)["deployments"][0]["process"]["bpmnProcessId"] == "one-task"
    legacy = zbctl(weir, "deploy", str(BPMN / "one-task.bpmn"))  # the deprecated DeployProcess RPC
    assert legacy.returncode == 0, legacy.stderr
    assert json.loads(legacy.stdout)["processes"][0]["version"] == 1

    created = zbctl(weir, "create", "instance", "one-task", "--variables", '{"orderId": 3}')
    assert created.returncode == 0, created.stderr
    instance_key = json.loads(created.stdout)["processInstanceKey"]

    activated = zbctl(weir, "activate", "jobs", "test", "--maxJobsToActivate", "10")
    assert activated.returncode == 0, activated.stderr
    jobs = json.loads(activated.stdout)["jobs"]
    mine = [j for j in jobs if j["processInstanceKey"] == instance_key]
    assert len(mine) == 1 and json.loads(mine[0]["variables"]) == {"orderId": 3}

    completed = zbctl(weir, "complete", "job", mine[0]["key"], "--variables", '{"done": true}')
    assert completed.returncode == 0, completed.stderr
    again = zbctl(weir, "complete", "job", mine[0]["key"])
    assert again.returncode != 0 and "NotFound" in again.stderr

    missing = zbctl(weir, "create", "instance", "no-such-process")
    assert missing.returncode != 0 and "NotFound" in missing.stderr


NODE_SCRIPT = r"""
const { ZBClient } = require('zeebe-node');
(async () => {
  const zbc = new ZBClient(process.env.WEIR_ADDRESS, { useTLS: false, retry: false, loglevel: 'NONE' });
  const topology = await zbc.topology();
  await zbc.deployResource({ processFilename: process.env.WEIR_BPMN });
  const worker = zbc.createWorker({
    taskType: 'test',
    taskHandler: (job) => job.complete({ fromNode: job.variables.n + 1 }),
    loglevel: 'NONE',
  });
  const result = await zbc.createProcessInstanceWithResult({
    bpmnProcessId: 'one-task', variables: { n: 41 }, requestTimeout: 10000,
  });
  await worker.close();
  await zbc.close();
  console.log(JSON.stringify({ partitions: topology.partitionsCount, variables: result.variables }));
})().catch((e) => { console.error(e); process.exit(1); });
"""


def test_zeebe_node_drives_weir(weir: WeirProcess, tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None, "node is required for the zeebe-node client test"
    script = tmp_path / "client.js"
    script.write_text(NODE_SCRIPT)
    env = {
        **os.environ,
        "NODE_PATH": str(CLIENTS),
        "WEIR_ADDRESS": weir.address,
        "WEIR_BPMN": str(BPMN / "one-task.bpmn"),
        "ZEEBE_NODE_LOG_LEVEL": "NONE",
    }
    out = subprocess.run([node, str(script)], capture_output=True, text=True, env=env, timeout=90)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"partitions": 1, "variables": {"n": 41, "fromNode": 42}}
