"""@camunda8/sdk 8.8's CamundaRestClient, unchanged from the npm registry, drives Weir's REST API end to end: deploy,
create, search process instances, complete a native user task, resolve an incident.

`make test` installs the SDK into .cache/node-clients (the Makefile's `node-clients` target)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import BPMN, WeirProcess
from tests.integration.node_clients import CLIENTS, run_node_script

pytestmark = pytest.mark.skipif(
    not (CLIENTS / "@camunda8" / "sdk").is_dir(),
    reason="@camunda8/sdk not installed (run `make node-clients`)",
)

SCRIPT = r"""
const { Camunda8 } = require('@camunda8/sdk');
const [restAddress, oneTask, userTask] = process.argv.slice(2);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what, find) {
  for (let i = 0; i < 150; i++) {
    const found = await find();
    if (found) return found;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function main() {
  const c8 = new Camunda8({
    ZEEBE_REST_ADDRESS: restAddress,
    CAMUNDA_AUTH_STRATEGY: 'NONE',
    CAMUNDA_SECURE_CONNECTION: false,
  });
  const rest = c8.getCamundaRestClient();
  const completed = (processInstanceKey) => until(`instance ${processInstanceKey} completed`, async () => {
    const r = await rest.searchProcessInstances({ filter: { processInstanceKey, state: 'COMPLETED' } });
    return r.items.length ? r : null;
  });
  const out = {};

  const topology = await rest.getTopology();
  out.partitions = topology.partitionsCount;

  const deployed = await rest.deployResourcesFromFiles([oneTask, userTask]);
  out.deployed = deployed.processes.map((p) => p.processDefinitionId).sort();

  // Create, then find the instance by search.
  const created = await rest.createProcessInstance({ processDefinitionId: 'one-task', variables: { n: 1 } });
  out.created = created.processInstanceKey;
  const found = await until('the instance in a search', async () => {
    const r = await rest.searchProcessInstances({ filter: { processInstanceKey: created.processInstanceKey } });
    return r.items.length ? r : null;
  });
  out.searched = { key: found.items[0].processInstanceKey, state: found.items[0].state, total: found.page.totalItems };

  // Fail its job without retries: an incident, found by search and resolved.
  const activation = { type: 'test', worker: 'sdk', timeout: 60000, maxJobsToActivate: 1, requestTimeout: 5000 };
  const [job] = await rest.activateJobs(activation);
  await rest.failJob({ jobKey: job.jobKey, retries: 0, errorMessage: 'out of paper', retryBackOff: 0 });
  const incidents = await until('the incident in a search', async () => {
    const filter = { processInstanceKey: created.processInstanceKey, state: 'ACTIVE' };
    const r = await rest.searchIncidents({ filter });
    return r.items.length ? r : null;
  });
  out.incident = { message: incidents.items[0].errorMessage, type: incidents.items[0].errorType };
  await rest.updateJob({ jobKey: job.jobKey, retries: 1 });
  await rest.resolveIncident(incidents.items[0].incidentKey);
  const [again] = await rest.activateJobs(activation);
  out.retried = again.jobKey === job.jobKey;
  await rest.completeJob({ jobKey: again.jobKey, variables: { done: true } });
  await completed(created.processInstanceKey);
  out.completed = true;

  // A native user task, completed by the SDK.
  const withTask = await rest.createProcessInstance({
    processDefinitionId: 'user-task-native',
    variables: { reviewers: ['ann'], due: '2031-01-01T00:00:00Z' },
  });
  const tasks = await until('the user task in a search', async () => {
    const r = await rest.searchUserTasks({ filter: { processInstanceKey: withTask.processInstanceKey } });
    return r.items.length ? r : null;
  });
  await rest.assignUserTask({ userTaskKey: tasks.items[0].userTaskKey, assignee: 'ann' });
  await rest.completeUserTask({ userTaskKey: tasks.items[0].userTaskKey, variables: { approved: true } });
  await completed(withTask.processInstanceKey);
  out.taskCompleted = true;
  console.log(JSON.stringify(out));
}

"""


def test_camunda_sdk_rest_client_runs_the_issue_scenario(weir: WeirProcess, tmp_path: Path) -> None:
    args = [weir.rest_url, str(BPMN / "one-task.bpmn"), str(BPMN / "user-task-native.bpmn")]
    env = {"CAMUNDA_LOG_LEVEL": "none", "ZEEBE_NODE_LOG_LEVEL": "NONE"}
    out = run_node_script(SCRIPT, args, tmp_path, env=env)
    assert out["partitions"] == 1
    assert out["deployed"] == ["one-task", "user-task-native"]
    assert out["searched"] == {"key": out["created"], "state": "ACTIVE", "total": 1}
    assert out["incident"] == {"message": "out of paper", "type": "JOB_NO_RETRIES"}
    assert out["retried"] and out["completed"] and out["taskCompleted"]
