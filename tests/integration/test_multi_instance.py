"""Multi-instance activities against a real ``weir start``: parallel and sequential loops over a collection, the
output collection in input order, the completion condition, boundary events on the body, sub-processes."""

import asyncio
import json

import grpc
from pyzeebe import ZeebeClient, ZeebeWorker, create_insecure_channel
from pyzeebe.proto import gateway_pb2 as pb

from tests.harness import WeirProcess, eventually
from tests.integration.clients import (
    Stub,
    activate,
    activate_now,
    complete,
    create,
    create_with_result,
    deploy,
    incidents_of,
    is_active,
    rpc_error,
    variables_of,
)


def test_parallel_instances_run_at_once_and_collect_outputs_in_input_order(stub: Stub) -> None:
    d = deploy(stub, "mi-parallel.bpmn")
    result = create_with_result(stub, d.pid(), {"items": ["a", "b", "c"]})
    jobs = activate(stub, d.type("mi-work"), 3)
    seen = sorted((variables_of(j)["loopCounter"], variables_of(j)["item"]) for j in jobs)
    assert seen == [(1, "a"), (2, "b"), (3, "c")]
    for job in reversed(jobs):  # completion order does not decide the output order
        complete(stub, job.key, {"result": variables_of(job)["item"].upper()})
    (after,) = activate(stub, d.type("mi-after"))
    # the instances' variables stay there, the output element's variable ``result`` too
    assert variables_of(after) == {"items": ["a", "b", "c"], "results": ["A", "B", "C"]}
    complete(stub, after.key)
    assert json.loads(result.result(timeout=10).variables)["results"] == ["A", "B", "C"]


def test_a_pyzeebe_worker_fills_each_instance_output_without_touching_the_process_scope(
    weir: WeirProcess, stub: Stub
) -> None:
    d = deploy(stub, "mi-parallel.bpmn")

    async def run() -> dict:
        worker = ZeebeWorker(create_insecure_channel(grpc_address=weir.address))

        @worker.task(task_type=d.type("mi-work"))
        async def work(item: int) -> dict:
            return {"result": item * 2}

        @worker.task(task_type=d.type("mi-after"))
        async def after() -> dict:
            return {}

        task = asyncio.create_task(worker.work())
        try:
            client = ZeebeClient(create_insecure_channel(grpc_address=weir.address))
            response = await client.run_process_with_result(d.pid(), {"items": [1, 2, 3, 4]}, timeout=30_000)
            return response.variables
        finally:
            await worker.stop()
            await asyncio.gather(task, return_exceptions=True)

    assert asyncio.run(run()) == {"items": [1, 2, 3, 4], "results": [2, 4, 6, 8]}


def test_sequential_instances_run_one_after_the_other_in_order(stub: Stub) -> None:
    d = deploy(stub, "mi-sequential.bpmn")
    result = create_with_result(stub, d.pid(), {"items": [3, 1, 2]})
    order = []
    for expected_counter in (1, 2, 3):
        (job,) = activate(stub, d.type("seq-work"))
        assert activate_now(stub, d.type("seq-work"), wait_ms=100) == []  # only one at a time
        variables = variables_of(job)
        assert variables["loopCounter"] == expected_counter
        order.append(variables["item"])
        complete(stub, job.key, {"result": variables["item"] * 10})
    assert order == [3, 1, 2]
    (after,) = activate(stub, d.type("seq-after"))
    assert variables_of(after)["results"] == [30, 10, 20]
    complete(stub, after.key)
    result.result(timeout=10)


def test_an_empty_collection_completes_the_body_at_once(stub: Stub) -> None:
    d = deploy(stub, "mi-parallel.bpmn")
    create(stub, d.pid(), {"items": []})
    (after,) = activate(stub, d.type("mi-after"))
    assert variables_of(after) == {"items": [], "results": []}
    assert activate_now(stub, d.type("mi-work"), wait_ms=100) == []
    complete(stub, after.key)


def test_the_completion_condition_ends_the_body_and_terminates_the_other_instances(stub: Stub) -> None:
    d = deploy(stub, "mi-completion.bpmn")
    pi = create(stub, d.pid(), {"items": [1, 2, 3, 4]})
    jobs = activate(stub, d.type("cc-work"), 4)
    complete(stub, jobs[0].key, {"result": "first"})
    assert activate_now(stub, d.type("cc-after"), wait_ms=200) == []
    complete(stub, jobs[1].key, {"result": "second"})
    (after,) = activate(stub, d.type("cc-after"))
    results = variables_of(after)["results"]
    assert sorted(r for r in results if r is not None) == ["first", "second"]
    assert results.count(None) == 2
    for job in jobs[2:]:  # the other instances were terminated with their jobs
        assert rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=job.key)).code() == grpc.StatusCode.NOT_FOUND
    complete(stub, after.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_an_error_boundary_on_the_body_catches_an_instance_error_and_ends_every_instance(stub: Stub) -> None:
    d = deploy(stub, "mi-boundary.bpmn")
    pi = create(stub, d.pid(), {"items": ["x", "y", "z"]})
    jobs = activate(stub, d.type("bd-work"), 3)
    stub.ThrowError(pb.ThrowErrorRequest(jobKey=jobs[1].key, errorCode="OOPS", errorMessage="no"), timeout=10)
    (handle,) = activate(stub, d.type("bd-handle"))
    for job in (jobs[0], jobs[2]):
        assert rpc_error(stub.CompleteJob, pb.CompleteJobRequest(jobKey=job.key)).code() == grpc.StatusCode.NOT_FOUND
    assert activate_now(stub, d.type("bd-after"), wait_ms=100) == []
    complete(stub, handle.key)
    eventually(lambda: not is_active(stub, pi), timeout=5, what="the instance to complete")


def test_a_multi_instance_sub_process_runs_its_flow_once_per_item(stub: Stub) -> None:
    d = deploy(stub, "mi-subprocess.bpmn")
    result = create_with_result(stub, d.pid(), {"orders": [{"id": 1}, {"id": 2}]})
    jobs = activate(stub, d.type("sp-pack"), 2)
    assert sorted(variables_of(j)["order"]["id"] for j in jobs) == [1, 2]
    for job in jobs:
        complete(stub, job.key, {"packed": f"parcel-{variables_of(job)['order']['id']}"})
    (after,) = activate(stub, d.type("sp-after"))
    assert variables_of(after)["shipped"] == ["parcel-1", "parcel-2"]
    complete(stub, after.key)
    result.result(timeout=10)


def test_an_input_collection_that_is_not_a_list_raises_an_incident(weir: WeirProcess, stub: Stub) -> None:
    d = deploy(stub, "mi-parallel.bpmn")
    pi = create(stub, d.pid(), {"items": "not a list"})
    (incident,) = eventually(lambda: incidents_of(weir, pi), what="the body's incident")
    assert incident.error_type == "EXTRACT_VALUE_ERROR"
    assert incident.element_id == "work"
    assert incident.error_message == "Expected result of the expression '=items' to be 'ARRAY', but was 'STRING'."

    stub.SetVariables(pb.SetVariablesRequest(elementInstanceKey=pi, variables='{"items": [7]}'), timeout=10)
    stub.ResolveIncident(pb.ResolveIncidentRequest(incidentKey=incident.key), timeout=10)
    (job,) = activate(stub, d.type("mi-work"))
    assert variables_of(job)["item"] == 7
    complete(stub, job.key, {"result": 70})
    (after,) = activate(stub, d.type("mi-after"))
    assert variables_of(after)["results"] == [70]


def test_a_multi_instance_call_activity_starts_one_child_per_item(stub: Stub) -> None:
    d = deploy(stub, "mi-call.bpmn")
    result = create_with_result(stub, d.pid("mi-call"), {"orders": ["a", "b", "c"]})
    jobs = activate(stub, d.type("mc-ship"), 3)
    parents = {j.processInstanceKey for j in jobs}
    assert len(parents) == 3, "each item runs in its own child instance"
    by_order = {variables_of(j)["order"]: j for j in jobs}
    assert sorted(by_order) == ["a", "b", "c"]
    for order in ("c", "a", "b"):
        complete(stub, by_order[order].key, {"receipt": f"r-{order}"})
    final = json.loads(result.result(timeout=10).variables)
    assert final["receipts"] == ["r-a", "r-b", "r-c"]
