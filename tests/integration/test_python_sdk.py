"""The official Python SDK (`camunda-orchestration-sdk` from PyPI, as shipped: it decodes every response strictly and
refuses one that lacks a required field) drives Weir's REST API end to end: topology, deployment, instances with and
without their result, searches, jobs by hand and through its workers (async and thread), user tasks, incidents, BPMN
errors, messages, signals, variables, decisions and cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from tests.harness import BPMN, FIXTURES, LazyModule, WeirProcess

sdk = LazyModule("camunda_orchestration_sdk", reason="camunda-orchestration-sdk not installed (dev extras)")

T = TypeVar("T")
DMN = FIXTURES / "dmn"


def _configuration(weir: WeirProcess) -> dict[str, str]:
    return {"CAMUNDA_REST_ADDRESS": weir.rest_url, "CAMUNDA_AUTH_STRATEGY": "NONE"}


@pytest.fixture(scope="module")
def client(weir: WeirProcess) -> Iterator[sdk.CamundaClient]:
    with sdk.CamundaClient(configuration=_configuration(weir)) as c:
        c.deploy_resources_from_files(
            [
                BPMN / "one-task.bpmn",
                BPMN / "user-task-native.bpmn",
                BPMN / "error-boundary.bpmn",
                BPMN / "message-catch.bpmn",
                BPMN / "signal-catch.bpmn",
                BPMN / "pass-through.bpmn",
                DMN / "discount.dmn",
            ]
        )
        yield c


def until(what: str, find: Callable[[], T | None], timeout: float = 30.0) -> T:
    """Polls ``find`` (a history search: the history follows the log a little behind) until it finds something."""
    deadline = time.monotonic() + timeout
    while True:
        found = find()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def create(client: sdk.CamundaClient, process_id: str, variables: dict[str, Any] | None = None, **more: Any) -> Any:
    return client.create_process_instance(
        data=sdk.ProcessCreationById.from_dict(
            {"processDefinitionId": process_id, "variables": variables or {}, **more},
        )
    )


def instances(client: sdk.CamundaClient, **filter_: Any) -> list[Any]:
    return client.search_process_instances(data=sdk.ProcessInstanceSearchQuery.from_dict({"filter": filter_})).items


def state_of(client: sdk.CamundaClient, key: Any) -> str:
    found = instances(client, processInstanceKey=str(key))
    return str(found[0].state) if found else ""


def ended(client: sdk.CamundaClient, key: Any, state: str = "COMPLETED") -> None:
    until(f"instance {key} {state}", lambda: state_of(client, key) == state)


def activate(client: sdk.CamundaClient, job_type: str) -> Any:
    request = {"type": job_type, "worker": "py", "timeout": 60_000, "maxJobsToActivate": 1, "requestTimeout": 5000}
    jobs = client.activate_jobs(data=sdk.JobActivationRequest.from_dict(request)).jobs
    assert len(jobs) == 1, f"no {job_type} job"
    return jobs[0]


def test_topology_names_the_api_level(client: sdk.CamundaClient) -> None:
    topology = client.get_topology()
    assert topology.partitions_count == 1
    assert topology.gateway_version.startswith("8.9.")
    assert [p.partition_id for p in topology.brokers[0].partitions] == [1]


def test_create_without_and_with_the_result(client: sdk.CamundaClient) -> None:
    created = create(client, "one-task", {"n": 1})
    assert created.process_definition_id == "one-task"
    assert created.variables.to_dict() == {}
    job = activate(client, "test")
    assert str(job.process_instance_key) == str(created.process_instance_key)
    assert job.variables.to_dict() == {"n": 1}
    assert job.physical_tenant_id == "default" and job.priority == 0 and job.user_task is None and job.tags == []
    client.complete_job(job.job_key, data=sdk.JobCompletionRequest.from_dict({"variables": {"done": True}}))
    ended(client, created.process_instance_key)

    done = create(client, "pass-through", {"x": 2}, awaitCompletion=True)
    assert done.variables.to_dict() == {"x": 2}
    ended(client, done.process_instance_key)
    found = client.get_process_instance(done.process_instance_key)
    assert str(found.state) == "COMPLETED"
    assert found.root_process_instance_key == done.process_instance_key
    assert found.tags == [] and found.business_id is None and found.suspended_date is None


def test_incident_raised_by_a_failed_job_and_resolved(client: sdk.CamundaClient) -> None:
    created = create(client, "one-task")
    job = activate(client, "test")
    client.fail_job(job.job_key, data=sdk.JobFailRequest.from_dict({"retries": 0, "errorMessage": "out of paper"}))
    query = sdk.IncidentSearchQuery.from_dict({"filter": {"processInstanceKey": str(created.process_instance_key)}})
    incident = until("the incident", lambda: client.search_incidents(data=query).items)[0]
    assert incident.error_message == "out of paper"
    assert str(incident.error_type) == "JOB_NO_RETRIES"
    client.update_job(job.job_key, data=sdk.JobUpdateRequest.from_dict({"changeset": {"retries": 1}}))
    client.resolve_incident(incident.incident_key)
    again = activate(client, "test")
    assert str(again.job_key) == str(job.job_key)
    client.complete_job(again.job_key)
    ended(client, created.process_instance_key)
    jobs = client.search_jobs(data=sdk.JobSearchQuery.from_dict({"filter": {"jobKey": str(job.job_key)}})).items
    assert [str(j.state) for j in jobs] == ["COMPLETED"]


def test_bpmn_error_caught_by_a_boundary_event(client: sdk.CamundaClient) -> None:
    created = create(client, "error-boundary")
    job = activate(client, "charge")
    client.throw_job_error(job.job_key, data=sdk.JobErrorRequest.from_dict({"errorCode": "PAYMENT_FAILED"}))
    invoice = activate(client, "send-invoice")  # the boundary event caught the error and leads here
    assert str(invoice.process_instance_key) == str(created.process_instance_key)
    client.complete_job(invoice.job_key)
    ended(client, created.process_instance_key)


def test_user_task_assigned_and_completed(client: sdk.CamundaClient) -> None:
    created = create(client, "user-task-native", {"reviewers": ["ann"], "due": "2031-01-01T00:00:00Z"})
    query = sdk.UserTaskSearchQuery.from_dict({"filter": {"processInstanceKey": str(created.process_instance_key)}})
    task = until("the user task", lambda: client.search_user_tasks(data=query).items)[0]
    assert task.custom_headers.to_dict() == {"department": "sales"}
    client.assign_user_task(task.user_task_key, data=sdk.UserTaskAssignmentRequest.from_dict({"assignee": "ann"}))
    client.complete_user_task(
        task.user_task_key, data=sdk.UserTaskCompletionRequest.from_dict({"variables": {"ok": 1}})
    )
    ended(client, created.process_instance_key)
    assert str(client.get_user_task(task.user_task_key).state) == "COMPLETED"


def test_messages_signals_and_variables(client: sdk.CamundaClient) -> None:
    waiting = create(client, "message-catch", {"requestId": "r-1"})
    until("the subscription", lambda: state_of(client, waiting.process_instance_key) == "ACTIVE")
    time.sleep(0.5)  # the subscription opens as the instance reaches the catch event
    correlated = client.correlate_message(
        data=sdk.MessageCorrelationRequest.from_dict({"name": "approved", "correlationKey": "r-1"})
    )
    assert str(correlated.process_instance_key) == str(waiting.process_instance_key)
    activate_and_complete = activate(client, "approved")
    client.complete_job(activate_and_complete.job_key)
    ended(client, waiting.process_instance_key)

    published = client.publish_message(
        data=sdk.MessagePublicationRequest.from_dict({"name": "nobody", "correlationKey": "k", "timeToLive": 0})
    )
    assert published.message_key

    signalled = create(client, "signal-catch")
    until("the instance", lambda: state_of(client, signalled.process_instance_key) == "ACTIVE")
    time.sleep(0.5)
    client.broadcast_signal(data=sdk.SignalBroadcastRequest.from_dict({"signalName": "wake-up", "variables": {"s": 1}}))
    job = activate(client, "after-signal")
    client.create_element_instance_variables(
        job.process_instance_key, data=sdk.SetVariableRequest.from_dict({"variables": {"note": "set"}})
    )
    client.complete_job(job.job_key)
    ended(client, signalled.process_instance_key)
    query = sdk.VariableSearchQuery.from_dict(
        {"filter": {"processInstanceKey": str(signalled.process_instance_key), "name": "note"}}
    )
    variable = until("the variable", lambda: client.search_variables(data=query).items)[0]
    assert variable.value == '"set"'


def test_decision_evaluated(client: sdk.CamundaClient) -> None:
    result = client.evaluate_decision(
        data=sdk.DecisionEvaluationByID.from_dict(
            {"decisionDefinitionId": "discount", "variables": {"orders": 12, "total": 200}}
        )
    )
    assert result.failed_decision_definition_id is None
    assert result.decision_definition_id == "discount"
    assert [d.decision_definition_id for d in result.evaluated_decisions] == ["customer_level", "discount"]
    rule = result.evaluated_decisions[0].matched_rules[0]
    assert rule.evaluated_outputs[0].rule_index == rule.rule_index


def test_cancel(client: sdk.CamundaClient) -> None:
    created = create(client, "one-task")
    # data=None: the SDK 10.0.1 cannot serialize its own default (Unset) for this optional body
    client.cancel_process_instance(created.process_instance_key, data=None)
    ended(client, created.process_instance_key, "TERMINATED")


def test_job_workers_async_and_thread(weir: WeirProcess, client: sdk.CamundaClient) -> None:
    keys = [create(client, "one-task", {"i": i}).process_instance_key for i in range(4)]
    seen: list[int] = []
    lock = threading.Lock()

    async def on_async(job: sdk.ConnectedJobContext) -> dict[str, object]:
        with lock:
            seen.append(job.variables.to_dict()["i"])
        return {"by": "async"}

    def on_thread(job: sdk.SyncJobContext) -> dict[str, object]:
        with lock:
            seen.append(job.variables.to_dict()["i"])
        return {"by": "thread"}

    async def run() -> None:
        async with sdk.CamundaAsyncClient(configuration=_configuration(weir)) as worker_client:
            for callback, strategy in ((on_async, "async"), (on_thread, "thread")):
                worker_client.create_job_worker(
                    config=sdk.WorkerConfig(job_type="test", job_timeout_milliseconds=30_000, max_concurrent_jobs=2),
                    callback=callback,
                    execution_strategy=strategy,  # type: ignore[arg-type]
                )
            workers = asyncio.create_task(worker_client.run_workers())
            deadline = time.monotonic() + 60
            while len(seen) < len(keys) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            # a job counts as seen when its handler starts: the workers go only once every completion has landed
            await asyncio.to_thread(lambda: [ended(client, key) for key in keys])
            workers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await workers

    asyncio.run(run())
    assert sorted(seen) == [0, 1, 2, 3]


def test_a_worker_throws_a_bpmn_error(weir: WeirProcess, client: sdk.CamundaClient) -> None:
    created = create(client, "error-boundary")

    async def charge(job: sdk.ConnectedJobContext) -> dict[str, object]:
        raise sdk.JobError(error_code="PAYMENT_FAILED", message="card declined")

    async def run() -> None:
        async with sdk.CamundaAsyncClient(configuration=_configuration(weir)) as worker_client:
            worker_client.create_job_worker(
                config=sdk.WorkerConfig(job_type="charge", job_timeout_milliseconds=30_000), callback=charge
            )
            workers = asyncio.create_task(worker_client.run_workers())
            await asyncio.to_thread(activate_handler)
            workers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await workers

    def activate_handler() -> None:
        job = until("the invoice job after the error", lambda: _maybe_activate(client, "send-invoice"), timeout=60)
        client.complete_job(job.job_key)

    asyncio.run(run())
    ended(client, created.process_instance_key)


def _maybe_activate(client: sdk.CamundaClient, job_type: str) -> Any:
    request = {"type": job_type, "worker": "py", "timeout": 60_000, "maxJobsToActivate": 1, "requestTimeout": 1000}
    jobs = client.activate_jobs(data=sdk.JobActivationRequest.from_dict(request)).jobs
    return jobs[0] if jobs else None


def test_every_search_and_get_decodes(client: sdk.CamundaClient) -> None:
    """Runs last: what the tests above left in the history, searched and fetched by key through the SDK's models."""
    page = {"page": {"limit": 100}}
    searches: list[tuple[Callable[..., Any], Any, Callable[..., Any] | None, str]] = [
        (
            client.search_process_definitions,
            sdk.ProcessDefinitionSearchQuery,
            client.get_process_definition,
            "process_definition_key",
        ),
        (
            client.search_process_instances,
            sdk.ProcessInstanceSearchQuery,
            client.get_process_instance,
            "process_instance_key",
        ),
        (
            client.search_element_instances,
            sdk.ElementInstanceSearchQuery,
            client.get_element_instance,
            "element_instance_key",
        ),
        (client.search_variables, sdk.VariableSearchQuery, client.get_variable, "variable_key"),
        (client.search_incidents, sdk.IncidentSearchQuery, client.get_incident, "incident_key"),
        (client.search_jobs, sdk.JobSearchQuery, None, "job_key"),
        (client.search_user_tasks, sdk.UserTaskSearchQuery, client.get_user_task, "user_task_key"),
        (
            client.search_decision_instances,
            sdk.DecisionInstanceSearchQuery,
            client.get_decision_instance,
            "decision_evaluation_instance_key",
        ),
    ]
    for search, model, get, key in searches:
        found = search(data=model.from_dict(page))
        assert found.items, f"{search.__name__} found nothing"
        assert found.page.has_more_total_items is False and found.page.total_items == len(found.items)
        if get is not None:
            assert getattr(get(getattr(found.items[0], key)), key) == getattr(found.items[0], key)
    task = client.search_user_tasks(data=sdk.UserTaskSearchQuery.from_dict(page)).items[0]
    assert client.search_user_task_variables(task.user_task_key).items
    definition = client.search_process_definitions().items[0]
    assert "<" in client.get_process_definition_xml(definition.process_definition_key)

    deployed = client.deploy_resources_from_files([DMN / "greeting.dmn"])
    deleted = client.delete_resource(str(deployed.decision_requirements[0].decision_requirements_key), data=None)
    assert deleted.batch_operation is None
