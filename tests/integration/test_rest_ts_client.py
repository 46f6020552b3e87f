"""@camunda8/orchestration-cluster-api 9.x, the TypeScript client of the 8.9 Orchestration Cluster API, unchanged from
the npm registry, drives Weir end to end with strict validation of every request and response (a missing or mistyped
field fails the call): topology, deploy, create (with and without the result), search, jobs by hand and through its
job worker, incidents, BPMN errors, user tasks, messages, signals, variables, decisions and cancellation.

`make test` installs the client into .cache/node-clients (the Makefile's `node-clients` target)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness import BPMN, FIXTURES, WeirProcess
from tests.integration.node_clients import CLIENTS, run_node_script

PACKAGE = CLIENTS / "@camunda8" / "orchestration-cluster-api"


def _major() -> int:
    try:
        return int(json.loads((PACKAGE / "package.json").read_text())["version"].split(".")[0])
    except (OSError, ValueError, KeyError):
        return 0


pytestmark = pytest.mark.skipif(
    _major() < 9, reason="@camunda8/orchestration-cluster-api 9.x not installed (run `make node-clients`)"
)

SCRIPT = r"""
const { createCamundaClient } = require('@camunda8/orchestration-cluster-api');
const [restAddress, ...files] = process.argv.slice(2);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const history = { consistency: { waitUpToMs: 15000, pollIntervalMs: 100 } };
const until = (predicate) => ({ consistency: { waitUpToMs: 15000, pollIntervalMs: 100, predicate } });

async function main() {
  const camunda = createCamundaClient({
    config: {
      CAMUNDA_REST_ADDRESS: restAddress,
      CAMUNDA_AUTH_STRATEGY: 'NONE',
      CAMUNDA_SDK_VALIDATION: 'req:strict,res:strict',
      CAMUNDA_SDK_LOG_LEVEL: 'silent',
    },
  });
  const out = {};
  const ended = (processInstanceKey, state = 'COMPLETED') =>
    camunda.searchProcessInstances(
      { filter: { processInstanceKey, state } },
      until((r) => r.items.length === 1),
    );
  const activate = async (type) => {
    const { jobs } = await camunda.activateJobs({
      type, worker: 'ts', timeout: 60000, maxJobsToActivate: 1, requestTimeout: 5000,
    });
    if (jobs.length !== 1) throw new Error(`no ${type} job`);
    return jobs[0];
  };

  const topology = await camunda.getTopology();
  out.topology = { version: topology.gatewayVersion, partitions: topology.partitionsCount };

  const deployed = await camunda.deployResourcesFromFiles(files);
  out.deployed = deployed.processes.map((p) => p.processDefinitionId).sort();

  // Create, work its job by hand, see it completed in a search.
  const created = await camunda.createProcessInstance({ processDefinitionId: 'one-task', variables: { n: 1 } });
  out.created = { variables: created.variables, tags: created.tags, businessId: created.businessId };
  const job = await activate('test');
  out.job = { variables: job.variables, userTask: job.userTask, tags: job.tags };
  await camunda.completeJob({ jobKey: job.jobKey, variables: { done: true } });
  const found = await ended(created.processInstanceKey);
  out.searched = { total: found.page.totalItems, more: found.page.hasMoreTotalItems };
  const instance = await camunda.getProcessInstance({ processInstanceKey: created.processInstanceKey }, history);
  out.instance = { state: instance.state, root: instance.rootProcessInstanceKey === created.processInstanceKey };

  const awaited = await camunda.createProcessInstance({
    processDefinitionId: 'pass-through', variables: { x: 2 }, awaitCompletion: true,
  });
  out.awaited = awaited.variables;

  // A failed job raises an incident; more retries and resolving it let the job run again.
  const failing = await camunda.createProcessInstance({ processDefinitionId: 'one-task' });
  const doomed = await activate('test');
  await camunda.failJob({ jobKey: doomed.jobKey, retries: 0, errorMessage: 'out of paper' });
  const incidents = await camunda.searchIncidents(
    { filter: { processInstanceKey: failing.processInstanceKey } },
    until((r) => r.items.length === 1),
  );
  out.incident = { type: incidents.items[0].errorType, message: incidents.items[0].errorMessage };
  await camunda.updateJob({ jobKey: doomed.jobKey, changeset: { retries: 1 } });
  await camunda.resolveIncident({ incidentKey: incidents.items[0].incidentKey });
  const retried = await activate('test');
  await camunda.completeJob({ jobKey: retried.jobKey });
  await ended(failing.processInstanceKey);
  const jobs = await camunda.searchJobs(
    { filter: { jobKey: doomed.jobKey } }, until((r) => r.items[0] && r.items[0].state === 'COMPLETED'),
  );
  out.jobState = jobs.items[0].state;

  // A BPMN error thrown by the job worker is caught by the boundary event.
  const charging = await camunda.createProcessInstance({ processDefinitionId: 'error-boundary' });
  const worker = camunda.createJobWorker({
    jobType: 'charge', maxParallelJobs: 1, jobTimeoutMs: 30000, pollIntervalMs: 100,
    jobHandler: (j) => j.error({ errorCode: 'PAYMENT_FAILED', errorMessage: 'card declined' }),
  });
  let invoice;
  for (let i = 0; i < 100 && !invoice; i++) {
    const { jobs: found } = await camunda.activateJobs({
      type: 'send-invoice', worker: 'ts', timeout: 60000, maxJobsToActivate: 1, requestTimeout: 500,
    });
    invoice = found[0];
  }
  worker.stop();
  out.caught = invoice && invoice.processInstanceKey === charging.processInstanceKey;
  await camunda.completeJob({ jobKey: invoice.jobKey });
  await ended(charging.processInstanceKey);

  // A user task, assigned and completed.
  const withTask = await camunda.createProcessInstance({
    processDefinitionId: 'user-task-native', variables: { reviewers: ['ann'], due: '2031-01-01T00:00:00Z' },
  });
  const tasks = await camunda.searchUserTasks(
    { filter: { processInstanceKey: withTask.processInstanceKey } }, until((r) => r.items.length === 1),
  );
  out.taskHeaders = tasks.items[0].customHeaders;
  await camunda.assignUserTask({ userTaskKey: tasks.items[0].userTaskKey, assignee: 'ann' });
  await camunda.completeUserTask({ userTaskKey: tasks.items[0].userTaskKey, variables: { approved: true } });
  await ended(withTask.processInstanceKey);

  // A message correlated, a signal broadcast, a variable set and found.
  const waiting = await camunda.createProcessInstance({
    processDefinitionId: 'message-catch', variables: { requestId: 'ts-1' },
  });
  let correlated;
  for (let i = 0; i < 100 && !correlated; i++) {
    try {
      correlated = await camunda.correlateMessage({ name: 'approved', correlationKey: 'ts-1' });
    } catch (e) {
      await sleep(100);  // not subscribed yet
    }
  }
  out.correlated = correlated.processInstanceKey === waiting.processInstanceKey;
  await camunda.completeJob({ jobKey: (await activate('approved')).jobKey });
  const published = await camunda.publishMessage({ name: 'nobody', correlationKey: 'k', timeToLive: 0 });
  out.published = /^\d+$/.test(published.messageKey);
  const signalled = await camunda.createProcessInstance({ processDefinitionId: 'signal-catch' });
  await camunda.searchElementInstances(
    { filter: { processInstanceKey: signalled.processInstanceKey, state: 'ACTIVE', type: 'INTERMEDIATE_CATCH_EVENT' } },
    until((r) => r.items.length === 1),
  );
  await camunda.broadcastSignal({ signalName: 'wake-up' });
  const afterSignal = await activate('after-signal');
  await camunda.createElementInstanceVariables({
    elementInstanceKey: signalled.processInstanceKey, variables: { note: 'set' },
  });
  await camunda.completeJob({ jobKey: afterSignal.jobKey });
  const variables = await camunda.searchVariables(
    { filter: { processInstanceKey: signalled.processInstanceKey, name: 'note' } },
    until((r) => r.items.length === 1),
  );
  out.variable = variables.items[0].value;

  // A decision, and cancellation.
  const decision = await camunda.evaluateDecision({
    decisionDefinitionId: 'discount', variables: { orders: 12, total: 200 },
  });
  out.decision = {
    failed: decision.failedDecisionDefinitionId,
    evaluated: decision.evaluatedDecisions.map((d) => d.decisionDefinitionId),
  };
  const cancelled = await camunda.createProcessInstance({ processDefinitionId: 'one-task' });
  await camunda.cancelProcessInstance({ processInstanceKey: cancelled.processInstanceKey });
  await ended(cancelled.processInstanceKey, 'TERMINATED');
  out.cancelled = true;

  // Every search and get Weir serves, over what the steps above left in the history, validated strictly.
  const now = { consistency: { waitUpToMs: 0 } };
  const entities = [
    ['searchProcessDefinitions', 'getProcessDefinition', 'processDefinitionKey'],
    ['searchProcessInstances', 'getProcessInstance', 'processInstanceKey'],
    ['searchElementInstances', 'getElementInstance', 'elementInstanceKey'],
    ['searchVariables', 'getVariable', 'variableKey'],
    ['searchIncidents', 'getIncident', 'incidentKey'],
    ['searchJobs', null, 'jobKey'],
    ['searchUserTasks', 'getUserTask', 'userTaskKey'],
    ['searchDecisionInstances', 'getDecisionInstance', 'decisionEvaluationInstanceKey'],
  ];
  out.searches = {};
  for (const [search, get, key] of entities) {
    const found = await camunda[search]({ page: { limit: 100 } }, now);
    out.searches[search] = found.items.length > 0 && found.page.totalItems === found.items.length;
    if (get) {
      const one = await camunda[get]({ [key]: found.items[0][key] }, now);
      out.searches[search] = out.searches[search] && one[key] === found.items[0][key];
    }
  }
  console.log(JSON.stringify(out));
}

"""


FILES = [
    BPMN / "one-task.bpmn",
    BPMN / "pass-through.bpmn",
    BPMN / "error-boundary.bpmn",
    BPMN / "user-task-native.bpmn",
    BPMN / "message-catch.bpmn",
    BPMN / "signal-catch.bpmn",
    FIXTURES / "dmn" / "discount.dmn",
]
"""What the scenario deploys."""


def test_orchestration_cluster_api_client_end_to_end(weir: WeirProcess, tmp_path: Path) -> None:
    out = run_node_script(SCRIPT, [weir.rest_url, *map(str, FILES)], tmp_path, timeout=240)
    assert out["topology"] == {"version": "8.9.0", "partitions": 1}
    processes = ["one-task", "pass-through", "error-boundary", "error-boundary-catch-all", "user-task-native"]
    assert out["deployed"] == sorted([*processes, "message-catch", "signal-catch"])
    assert out["created"] == {"variables": {}, "tags": [], "businessId": None}
    assert out["job"] == {"variables": {"n": 1}, "userTask": None, "tags": []}
    assert out["searched"] == {"total": 1, "more": False}
    assert out["instance"] == {"state": "COMPLETED", "root": True}
    assert out["awaited"] == {"x": 2}
    assert out["incident"] == {"type": "JOB_NO_RETRIES", "message": "out of paper"}
    assert out["jobState"] == "COMPLETED"
    assert out["caught"] is True
    assert out["taskHeaders"] == {"department": "sales"}
    assert out["correlated"] is True and out["published"] is True
    assert out["variable"] == '"set"'
    assert out["decision"] == {"failed": None, "evaluated": ["customer_level", "discount"]}
    assert out["cancelled"] is True
    assert out["searches"] == dict.fromkeys(out["searches"], True) and len(out["searches"]) == 8
