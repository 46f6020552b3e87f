"""The two official clients that cover repairs — the Python SDK `camunda-orchestration-sdk` and the TypeScript client
`@camunda8/orchestration-cluster-api` 9.x, both decoding every response strictly — repair instances on a Weir of
three partitions: modification (a move, an activation and a termination), migration to a second version with
mapping instructions, creation with start instructions, and a cancellation batch operation followed to its end with
its items. Each effect is checked through the client's own searches and gets."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.harness import LazyModule, WeirProcess, running
from tests.integration.node_clients import CLIENTS, run_node_script

sdk = LazyModule("camunda_orchestration_sdk", reason="camunda-orchestration-sdk not installed (dev extras)")

T = TypeVar("T")
PARTITIONS = 3
TS_PACKAGE = CLIENTS / "@camunda8" / "orchestration-cluster-api"


def _process(process_id: str, first: str, second: str) -> str:
    """start → ``first`` → ``second`` → end, both service tasks (no worker ever takes their jobs)."""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d-{process_id}" targetNamespace="http://weir.test">
  <bpmn:process id="{process_id}" isExecutable="true">
    <bpmn:startEvent id="start" />
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="{first}" />
    <bpmn:serviceTask id="{first}">
      <bpmn:extensionElements><zeebe:taskDefinition type="{process_id}-{first}" /></bpmn:extensionElements>
    </bpmn:serviceTask>
    <bpmn:sequenceFlow id="f2" sourceRef="{first}" targetRef="{second}" />
    <bpmn:serviceTask id="{second}">
      <bpmn:extensionElements><zeebe:taskDefinition type="{process_id}-{second}" /></bpmn:extensionElements>
    </bpmn:serviceTask>
    <bpmn:sequenceFlow id="f3" sourceRef="{second}" targetRef="end" />
    <bpmn:endEvent id="end" />
  </bpmn:process>
</bpmn:definitions>
"""


def write_processes(folder: Path, prefix: str) -> tuple[list[Path], Path]:
    """``{prefix}-repair`` and ``{prefix}-migrate`` v1 (tasks a, b), and the file of ``{prefix}-migrate`` v2 (a2, b):
    deployed right after v1 and long before the migration, so that the distribution of v2 has reached every partition
    (a migration on a partition the deployment has not reached yet is rightly refused as NOT_FOUND)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for process_id, first in ((f"{prefix}-repair", "a"), (f"{prefix}-migrate", "a")):
        path = folder / f"{process_id}.bpmn"
        path.write_text(_process(process_id, first, "b"))
        files.append(path)
    v2 = folder / f"{prefix}-migrate-v2.bpmn"
    v2.write_text(_process(f"{prefix}-migrate", "a2", "b"))
    return files, v2


@pytest.fixture(scope="module")
def weir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    with running(
        WeirProcess(tmp_path_factory.mktemp("weir") / "data", extra_args=["--partitions", str(PARTITIONS)])
    ) as w:
        yield w


class Deployed:
    """The Python SDK's client, and the keys of ``py-migrate`` v1 and v2."""

    def __init__(self, client: sdk.CamundaClient, v1: str, v2: str) -> None:
        self.client, self.v1, self.v2 = client, v1, v2


@pytest.fixture(scope="module")
def deployed(weir: WeirProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    with sdk.CamundaClient(configuration={"CAMUNDA_REST_ADDRESS": weir.rest_url, "CAMUNDA_AUTH_STRATEGY": "NONE"}) as c:
        files, v2_file = write_processes(tmp_path_factory.mktemp("py-bpmn"), "py")
        v1 = {p.process_definition_id: p for p in c.deploy_resources_from_files(files).processes}["py-migrate"]
        v2 = c.deploy_resources_from_files([v2_file]).processes[0]
        assert (v1.process_definition_version, v2.process_definition_version) == (1, 2)
        yield Deployed(c, str(v1.process_definition_key), str(v2.process_definition_key))


@pytest.fixture(scope="module")
def client(deployed: Deployed) -> sdk.CamundaClient:
    return deployed.client


def until(what: str, find: Callable[[], T | None], timeout: float = 20.0) -> T:
    """Polls ``find`` (the history follows the log a little behind) until it finds something."""
    deadline = time.monotonic() + timeout
    while True:
        found = find()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def create(client: sdk.CamundaClient, process_id: str, **more: Any) -> str:
    created = client.create_process_instance(
        data=sdk.ProcessCreationById.from_dict({"processDefinitionId": process_id, **more})
    )
    return str(created.process_instance_key)


def active_elements(client: sdk.CamundaClient, key: str) -> list[str]:
    """The element ids active in instance ``key``, sorted."""
    query = {"filter": {"processInstanceKey": key, "state": "ACTIVE"}}
    found = client.search_element_instances(data=sdk.ElementInstanceSearchQuery.from_dict(query)).items
    return sorted(str(e.element_id) for e in found)


def becomes(client: sdk.CamundaClient, key: str, elements: list[str]) -> None:
    """Waits until exactly ``elements`` are active in ``key`` (the search lists no process-level instance)."""
    seen: list[list[str]] = []

    def check() -> bool:
        seen.append(active_elements(client, key))
        return seen[-1] == sorted(elements)

    try:
        until(f"{elements} active in {key}", check)
    except AssertionError:
        raise AssertionError(f"{key}: expected {sorted(elements)} active, last seen {seen[-1:]}") from None


def test_python_sdk_modifies_an_instance(client: sdk.CamundaClient) -> None:
    key = create(client, "py-repair")
    becomes(client, key, ["a"])
    move = {"sourceElementInstruction": {"sourceType": "byId", "sourceElementId": "a"}, "targetElementId": "b"}
    client.modify_process_instance(
        key, data=sdk.ProcessInstanceModificationInstruction.from_dict({"moveInstructions": [move]})
    )
    becomes(client, key, ["b"])

    a = {"elementId": "a", "variableInstructions": [{"variables": {"again": True}}]}
    client.modify_process_instance(
        key,
        data=sdk.ProcessInstanceModificationInstruction.from_dict(
            {"activateInstructions": [a], "terminateInstructions": [{"elementId": "b"}]}
        ),
    )
    becomes(client, key, ["a"])
    assert str(client.get_process_instance(key).state) == "ACTIVE"


def test_python_sdk_migrates_an_instance_to_a_second_version(deployed: Deployed) -> None:
    client = deployed.client
    created = client.create_process_instance(
        data=sdk.ProcessCreationByKey.from_dict({"processDefinitionKey": deployed.v1})
    )
    key = str(created.process_instance_key)
    becomes(client, key, ["a"])
    client.migrate_process_instance(
        key,
        data=sdk.ProcessInstanceMigrationInstruction.from_dict(
            {
                "targetProcessDefinitionKey": deployed.v2,
                "mappingInstructions": [{"sourceElementId": "a", "targetElementId": "a2"}],
            }
        ),
    )
    becomes(client, key, ["a2"])
    migrated = until(
        "the instance on v2",
        lambda: (i := client.get_process_instance(key)).process_definition_key == deployed.v2 and i,
    )
    assert migrated.process_definition_version == 2 and str(migrated.state) == "ACTIVE"


def test_python_sdk_creates_an_instance_with_start_instructions(client: sdk.CamundaClient) -> None:
    key = create(client, "py-repair", startInstructions=[{"elementId": "b"}], variables={"late": 1})
    becomes(client, key, ["b"])
    query = {"filter": {"processInstanceKey": key, "elementId": "a"}}
    assert client.search_element_instances(data=sdk.ElementInstanceSearchQuery.from_dict(query)).items == []


def test_python_sdk_cancels_instances_in_a_batch(client: sdk.CamundaClient) -> None:
    keys = [create(client, "py-repair") for _ in range(4)]
    # a batch takes the instances its filter matches in the history: wait for the history to know them all
    search = sdk.ProcessInstanceSearchQuery.from_dict({"filter": {"processInstanceKey": {"$in": keys}}})
    until("the instances in the history", lambda: len(client.search_process_instances(data=search).items) == 4)
    batch = client.cancel_process_instances_batch_operation(
        data=sdk.ProcessInstanceCancellationBatchOperationRequest.from_dict(
            {"filter": {"processInstanceKey": {"$in": keys}}}
        )
    )
    key = batch.batch_operation_key
    assert str(batch.batch_operation_type) == "CANCEL_PROCESS_INSTANCE"
    # the batch operation reaches the history a little after its creation: the SDK's own polling waits for it
    ended = sdk.ConsistencyOptions(
        wait_up_to_ms=20_000, poll_interval_ms=100, predicate=lambda b: b.end_date is not None
    )
    done = client.get_batch_operation(key, consistency=ended)
    assert str(done.state) == "COMPLETED"
    assert (done.operations_total_count, done.operations_completed_count, done.operations_failed_count) == (4, 4, 0)
    assert done.errors == []

    query = sdk.BatchOperationItemSearchQuery.from_dict({"filter": {"batchOperationKey": str(key)}})
    # each partition's items reach the history at its own pace, the end of the batch may come first
    all_items = sdk.ConsistencyOptions(
        wait_up_to_ms=20_000, poll_interval_ms=100, predicate=lambda r: len(r.items) == 4
    )
    items = client.search_batch_operation_items(data=query, consistency=all_items).items
    assert sorted(str(i.item_key) for i in items) == sorted(keys)
    assert {str(i.state) for i in items} == {"COMPLETED"}
    assert {str(i.operation_type) for i in items} == {"CANCEL_PROCESS_INSTANCE"}

    states = until(
        "the instances terminated",
        lambda: (
            (s := {str(i.state) for i in client.search_process_instances(data=search).items}) == {"TERMINATED"} and s
        ),
    )
    assert states == {"TERMINATED"}


TS_SCRIPT = r"""
const { createCamundaClient } = require('@camunda8/orchestration-cluster-api');
const [restAddress, v2File, ...files] = process.argv.slice(2);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const now = { consistency: { waitUpToMs: 0 } };

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
  const poll = async (what, find) => {
    for (let i = 0; i < 200; i++) {
      const found = await find();
      if (found) return found;
      await sleep(100);
    }
    throw new Error(`timed out waiting for ${what}`);
  };
  const active = async (processInstanceKey) => {
    const found = await camunda.searchElementInstances({ filter: { processInstanceKey, state: 'ACTIVE' } }, now);
    return found.items.map((e) => e.elementId).sort();
  };
  const becomes = (processInstanceKey, elements) =>
    poll(`${elements} in ${processInstanceKey}`, async () =>
      JSON.stringify(await active(processInstanceKey)) === JSON.stringify([...elements].sort()));

  const v1s = (await camunda.deployResourcesFromFiles(files)).processes;
  const v1 = v1s.find((p) => p.processDefinitionId === 'ts-migrate');
  // v2 long before the migration: its distribution reaches every partition meanwhile
  const v2 = (await camunda.deployResourcesFromFiles([v2File])).processes[0];
  out.versions = [v1.processDefinitionVersion, v2.processDefinitionVersion];

  // Modification: a move, then an activation with a termination.
  const { processInstanceKey: moved } = await camunda.createProcessInstance({ processDefinitionId: 'ts-repair' });
  await becomes(moved, ['a']);
  await camunda.modifyProcessInstance({
    processInstanceKey: moved,
    moveInstructions: [
      { sourceElementInstruction: { sourceType: 'byId', sourceElementId: 'a' }, targetElementId: 'b' },
    ],
  });
  await becomes(moved, ['b']);
  await camunda.modifyProcessInstance({
    processInstanceKey: moved,
    activateInstructions: [{ elementId: 'a' }],
    terminateInstructions: [{ elementId: 'b' }],
  });
  await becomes(moved, ['a']);
  out.modified = await active(moved);

  // Migration to the second version.
  const { processInstanceKey: migrated } = await camunda.createProcessInstance({
    processDefinitionKey: v1.processDefinitionKey,
  });
  await becomes(migrated, ['a']);
  await camunda.migrateProcessInstance({
    processInstanceKey: migrated,
    targetProcessDefinitionKey: v2.processDefinitionKey,
    mappingInstructions: [{ sourceElementId: 'a', targetElementId: 'a2' }],
  });
  await becomes(migrated, ['a2']);
  const onV2 = await poll('the instance on v2', async () => {
    const i = await camunda.getProcessInstance({ processInstanceKey: migrated }, now);
    return i.processDefinitionKey === v2.processDefinitionKey && i;
  });
  out.migrated = { version: onV2.processDefinitionVersion, state: onV2.state };

  // Creation with start instructions.
  const { processInstanceKey: started } = await camunda.createProcessInstance({
    processDefinitionId: 'ts-repair', startInstructions: [{ elementId: 'b' }],
  });
  await becomes(started, ['b']);
  const skipped = await camunda.searchElementInstances(
    { filter: { processInstanceKey: started, elementId: 'a' } }, now);
  out.started = { active: await active(started), skipped: skipped.items.length };

  // A cancellation batch operation, followed to its end, with its items.
  const keys = [];
  for (let i = 0; i < 3; i++) {
    keys.push((await camunda.createProcessInstance({ processDefinitionId: 'ts-repair' })).processInstanceKey);
  }
  // a batch takes the instances its filter matches in the history: wait for the history to know them all
  await camunda.searchProcessInstances(
    { filter: { processInstanceKey: { $in: keys } } },
    { consistency: { waitUpToMs: 20000, pollIntervalMs: 100, predicate: (r) => r.items.length === keys.length } },
  );
  const batch = await camunda.cancelProcessInstancesBatchOperation({ filter: { processInstanceKey: { $in: keys } } });
  // the batch operation reaches the history a little after its creation: the client's own polling waits for it
  const done = await camunda.getBatchOperation(
    { batchOperationKey: batch.batchOperationKey },
    { consistency: { waitUpToMs: 20000, pollIntervalMs: 100, predicate: (b) => !!b.endDate } },
  );
  out.batch = {
    type: batch.batchOperationType, state: done.state, total: done.operationsTotalCount,
    completed: done.operationsCompletedCount, failed: done.operationsFailedCount, errors: done.errors,
  };
  // each partition's items reach the history at its own pace, the end of the batch may come first
  const items = await camunda.searchBatchOperationItems(
    { filter: { batchOperationKey: batch.batchOperationKey } },
    { consistency: { waitUpToMs: 20000, pollIntervalMs: 100, predicate: (r) => r.items.length === keys.length } },
  );
  out.items = {
    same: JSON.stringify(items.items.map((i) => i.itemKey).sort()) === JSON.stringify([...keys].sort()),
    states: [...new Set(items.items.map((i) => i.state))],
  };
  const terminated = await poll('the instances terminated', async () => {
    const found = await camunda.searchProcessInstances({ filter: { processInstanceKey: { $in: keys } } }, now);
    const states = [...new Set(found.items.map((i) => i.state))];
    return states.length === 1 && states[0] === 'TERMINATED' && found.items.length === keys.length && states;
  });
  out.terminated = terminated;
  console.log(JSON.stringify(out));
}
"""


def _ts_major() -> int:
    try:
        return int(json.loads((TS_PACKAGE / "package.json").read_text())["version"].split(".")[0])
    except (OSError, ValueError, KeyError):
        return 0


@pytest.mark.skipif(
    _ts_major() < 9, reason="@camunda8/orchestration-cluster-api 9.x not installed (run `make node-clients`)"
)
def test_typescript_client_repairs_instances(weir: WeirProcess, tmp_path: Path) -> None:
    files, v2 = write_processes(tmp_path / "bpmn", "ts")
    out = run_node_script(TS_SCRIPT, [weir.rest_url, str(v2), *map(str, files)], tmp_path, timeout=120)
    assert out["versions"] == [1, 2]
    assert out["modified"] == ["a"]
    assert out["migrated"] == {"version": 2, "state": "ACTIVE"}
    assert out["started"] == {"active": ["b"], "skipped": 0}
    assert out["batch"] == {
        "type": "CANCEL_PROCESS_INSTANCE",
        "state": "COMPLETED",
        "total": 3,
        "completed": 3,
        "failed": 0,
        "errors": [],
    }
    assert out["items"] == {"same": True, "states": ["COMPLETED"]}
    assert out["terminated"] == ["TERMINATED"]
