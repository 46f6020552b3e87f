"""Call activities inside multi-instance bodies across a leader kill, on a real 3-broker cluster (3 partitions,
replication 3).

The parent process (``call-activity-multi-instance.bpmn``) calls a child process once per item of its collection, in
parallel, and collects the children's charges in input order; then a sequential multi-instance task writes one
receipt per charge, one after the other. Clients create parents and complete both kinds of jobs while the leader of
one partition is killed with SIGKILL and later restarted. A call activity starts its child on its own partition, so
the whole tree of an instance lives (and fails over) together.

After a graceful ``weir cluster down`` the replicas' logs are read offline and must agree; on the prefix a majority
holds: nothing acknowledged is lost and no job is completed twice (the shared audit), every parent completed once
with its outputs complete and in input order, every child links back to the call activity instance that started it
(one child per instance, none without a caller), the sequential instances never overlapped, and a replay of every
replica's log gives exactly the state that broker holds.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter, defaultdict
from typing import Any

import grpc
import pytest

from broker.engine.bpmn import model as bpmn
from broker.protocol.enums import ProcessInstanceIntent, RecordType, ValueType
from broker.protocol.record import Record
from tests.cluster.audit import (
    History,
    Load,
    audit,
    committed,
    deploy_fixture,
    divergence,
    partition_of,
    read_replica_logs,
    replay_differences,
    stub_for,
    variables_by_scope,
    write_history,
)
from tests.cluster.harness import Cluster
from tests.harness import eventually
from tests.integration.clients import Stub, activate, complete, create, is_active, variables_of

PI = ProcessInstanceIntent
FIXTURE = "call-activity-multi-instance.bpmn"
PARENT = "call-multi-instance"
CHILD = "call-multi-instance-child"
CALL = "charge-each"  # the parallel multi-instance call activity
RECEIPT = "receipt-each"  # the sequential multi-instance service task
PARENTS = 60  # acknowledged creates to aim for (the creators may overshoot by one each)
HELD = 6  # parents left waiting at the end
RECEIPT_STEPS = (PI.ELEMENT_ACTIVATING, PI.ELEMENT_COMPLETED, PI.ELEMENT_TERMINATED)


def items_for(op: int) -> list[str]:
    """5 to 8 items, distinct across instances."""
    return [f"op{op}-item{i}" for i in range(5 + op % 4)]


def charge(variables: dict[str, Any]) -> dict[str, Any]:
    return {"charge": f"{variables['item']}:charged"}


def receipt(variables: dict[str, Any]) -> dict[str, Any]:
    return {"receipt": f"{variables['paid']}:receipt"}


# -- the check of the call trees on the committed log ---------------------------------------------------------


def call_tree_problems(
    log: dict[int, list[Record]], history: History, held: dict[int, int]
) -> tuple[list[str], dict[str, int]]:
    """What is wrong with the parents, their call activity instances, children and receipts in ``log``.

    ``held``: parents left waiting on purpose (see :func:`hold_instances_in_flight`), by their ``op``.
    """
    processes: dict[int, dict[str, Any]] = {}  # process instance key -> its ELEMENT_ACTIVATING value
    where: dict[int, int] = {}  # process instance key -> partition
    completed: Counter[int] = Counter()
    callers: dict[int, dict[str, Any]] = {}  # call activity instance (inside the body) -> its value
    receipts: dict[int, list[tuple[int, int]]] = defaultdict(list)  # parent -> (intent, key) of its task instances
    bodies: dict[tuple[int, str], int] = {}  # (parent, element id) -> its multi-instance body
    variables: dict[int, dict[str, Any]] = {}
    for partition, records in log.items():
        variables.update(variables_by_scope(records))
        for r in records:
            if r.record_type != RecordType.EVENT or r.value_type != ValueType.PROCESS_INSTANCE:
                continue
            v = r.value
            kind = v["bpmnElementType"]
            if kind == bpmn.PROCESS:
                if r.intent == PI.ELEMENT_ACTIVATING:
                    processes[r.key] = v
                    where[r.key] = partition
                elif r.intent == PI.ELEMENT_COMPLETED:
                    completed[r.key] += 1
            elif kind == bpmn.MULTI_INSTANCE_BODY and r.intent == PI.ELEMENT_ACTIVATING:
                bodies[(v["processInstanceKey"], v["elementId"])] = r.key
            elif kind == bpmn.CALL_ACTIVITY and v["elementId"] == CALL and r.intent == PI.ELEMENT_ACTIVATING:
                callers[r.key] = v
            elif kind == bpmn.SERVICE_TASK and v["elementId"] == RECEIPT and r.intent in RECEIPT_STEPS:
                receipts[v["processInstanceKey"]].append((r.intent, r.key))

    problems: list[str] = []
    parents = {k for k, v in processes.items() if v["bpmnProcessId"] == PARENT}
    children = {k for k, v in processes.items() if v["bpmnProcessId"] == CHILD}
    assert parents and children, f"no {PARENT} or no {CHILD} instance in the log"

    # Every acknowledged create: in the log, with the variables it was sent with, completed.
    for _, key in history.created:
        if key in parents and variables[key]["items"] != history.variables[key]["items"]:
            problems.append(f"parent {key}: items {variables[key]['items']} but created with {history.variables[key]}")
    unfinished = [k for _, k in history.created if k in parents and completed[k] == 0]
    if unfinished:
        problems.append(f"{len(unfinished)} acknowledged parents never completed, e.g. {unfinished[:5]}")
    # Parents whose create was not acknowledged (in flight at the kill) ran to the end as well.
    left = [k for k in parents if completed[k] == 0 and k not in held and k not in history.variables]
    if left:
        problems.append(f"{len(left)} parents created without an acknowledgement never completed, e.g. {left[:5]}")
    twice = [k for k in parents | children if completed[k] > 1]
    if twice:
        problems.append(f"process instances completed more than once: {twice[:5]}")

    # Every child: started by a call activity instance of its parent, on the parent's partition, with its item.
    called: dict[int, list[int]] = defaultdict(list)  # call activity instance -> children it started
    for child in children:
        v = processes[child]
        parent, caller = v["parentProcessInstanceKey"], v["parentElementInstanceKey"]
        if parent not in parents or caller not in callers or callers[caller]["processInstanceKey"] != parent:
            problems.append(f"child {child} does not link back to a call activity of its parent: {v}")
            continue
        called[caller].append(child)
        if where[child] != where[parent]:
            problems.append(f"child {child} runs on partition {where[child]}, its parent {parent} on {where[parent]}")
        counter = variables[caller]["loopCounter"]
        if variables[child].get("item") != variables[parent]["items"][counter - 1]:
            problems.append(f"child {child} (loopCounter {counter}) got item {variables[child].get('item')!r}")
        if completed[child] != 1 and completed[parent]:
            problems.append(f"child {child} did not complete, but its parent {parent} did")
    for caller, started in called.items():
        if len(started) != 1:
            problems.append(f"call activity instance {caller} started {len(started)} children: {started}")

    # Every parent: one call activity instance and one child per item (all started at once); outputs complete and in
    # input order; the receipts one after the other. A held parent is where it was left.
    callers_of: Counter[int] = Counter(v["processInstanceKey"] for v in callers.values())
    children_of: Counter[int] = Counter(processes[c]["parentProcessInstanceKey"] for c in children)
    for parent in parents:
        if completed[parent] == 0 and parent not in held:
            continue  # not acknowledged and not finished: checked above (a parent is never left behind)
        items = variables[parent]["items"]
        n = len(items)
        if callers_of[parent] != n or children_of[parent] != n:
            problems.append(f"parent {parent}: {n} items, {callers_of[parent]} calls, {children_of[parent]} children")
        charges = [f"{item}:charged" for item in items]
        receipt_list = [f"{c}:receipt" for c in charges]
        if parent in held:
            if completed[parent]:
                problems.append(f"parent {parent} completed, but it was left waiting for jobs")
            if held[parent] % 2 == 0:  # every other child charged, the parallel body still open
                collected = variables[bodies[(parent, CALL)]].get("charges")
                expected = [c if i % 2 == 0 else None for i, c in enumerate(charges)]
                outputs = [("charges", collected, expected)]
                runs = []
            else:  # every child charged, the first receipt written, the sequential body still open
                collected = variables[bodies[(parent, RECEIPT)]].get("receipts")
                expected = [r if i == 0 else None for i, r in enumerate(receipt_list)]
                outputs = [("charges", variables[parent].get("charges"), charges), ("receipts", collected, expected)]
                runs = [PI.ELEMENT_ACTIVATING, PI.ELEMENT_COMPLETED, PI.ELEMENT_ACTIVATING]
        else:
            outputs = [
                ("charges", variables[parent].get("charges"), charges),
                ("receipts", variables[parent].get("receipts"), receipt_list),
            ]
            runs = [PI.ELEMENT_ACTIVATING, PI.ELEMENT_COMPLETED] * n
        for name, got, expected in outputs:
            if got != expected:
                problems.append(f"parent {parent}: {name} {got}, expected {expected}")
        steps = receipts[parent]
        paired = all(steps[i][1] == steps[i + 1][1] for i in range(0, len(steps) - 1, 2))
        if [intent for intent, _ in steps] != runs or not paired:
            problems.append(f"parent {parent}: the sequential receipts ran as {steps}")

    figures = {
        "parents": len(parents),
        "completed parents": sum(1 for k in parents if completed[k]),
        "children": len(children),
        "acknowledged parents": len(history.created),
    }
    return problems, figures


# -- the test -------------------------------------------------------------------------------------------------


def _unfinished(stub: Stub, keys: list[int]) -> list[int]:
    """The instances among ``keys`` that still exist (or did not answer during a failover: ask again later)."""
    left = []
    for key in keys:
        try:
            if not is_active(stub, key):
                continue
        except grpc.RpcError:
            pass
        left.append(key)
    return left


def hold_instances_in_flight(stub: Stub, first_op: int) -> dict[int, int]:
    """Create HELD more parents (no worker runs any more) and leave them waiting, so the replicas end holding open
    bodies, call activities, children, activated jobs and partial output collections: parents of an even ``op``
    with every other child charged (the parallel body open), of an odd ``op`` with every child charged and the first
    receipt written (the sequential body open, the second receipt's job activated). Returns parent key -> op."""
    held = {create(stub, PARENT, {"op": op, "items": items_for(op)}): op for op in range(first_op, first_op + HELD)}
    count = sum(len(items_for(op)) for op in held.values())
    for job in activate(stub, "charge-item", count, timeout_ms=600_000, within=20):
        variables = variables_of(job)
        if variables["op"] % 2 == 1 or variables["loopCounter"] % 2 == 1:
            complete(stub, job.key, charge(variables))
    sequential = sum(1 for op in held.values() if op % 2 == 1)
    for job in activate(stub, "write-receipt", sequential, timeout_ms=600_000, within=20):
        assert variables_of(job)["loopCounter"] == 1
        complete(stub, job.key, receipt(variables_of(job)))
    second = activate(stub, "write-receipt", sequential, timeout_ms=600_000, within=20)
    assert sorted(variables_of(j)["loopCounter"] for j in second) == [2] * sequential
    return held


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_parallel_calls_and_sequential_tasks_survive_a_leader_kill(cluster: Cluster) -> None:
    seed = int(os.environ.get("WEIR_CLUSTER_SEED", random.SystemRandom().randrange(1 << 32)))
    print(f"WEIR_CLUSTER_SEED={seed}")
    rng = random.Random(seed)
    started = time.monotonic()
    # The probes have nothing to call and nothing to receipt: they complete at once.
    deploy_fixture(cluster, FIXTURE, PARENT, probe_variables='{"items": []}')
    job_timeout_ms = 2000
    load = Load(
        cluster.gateway,
        creators=2,
        workers=2,
        job_timeout_ms=job_timeout_ms,
        process_id=PARENT,
        variables=lambda op: {"op": op, "items": items_for(op)},
        handlers={"charge-item": charge, "write-receipt": receipt},
        max_creates=PARENTS,
    ).start()
    channel, stub = stub_for(cluster.gateway)
    with channel:
        try:
            # Kill while parents are being created and their children and receipts are being worked on.
            eventually(
                lambda: len(load.history.created) >= PARENTS * 0.4 and len(load.history.completed) >= 40,
                timeout=60,
                interval=0.05,
                what="the load to get going",
            )
            time.sleep(rng.uniform(0.0, 1.0))
            partition = rng.randint(1, cluster.partitions)
            leader = cluster.wait_leader(partition)
            killed_at = time.monotonic()
            cluster.kill(leader)
            successor = cluster.wait_leader(partition, exclude={leader})
            elected = time.monotonic() - killed_at
            time.sleep(1.0)  # the load goes on with two brokers for a while
            restart = cluster.restart_broker(leader)

            eventually(lambda: not load.creating(), timeout=60, interval=0.1, what=f"{PARENTS} acknowledged creates")
            remaining = [k for _, k in load.history.created]

            def all_completed() -> bool:
                remaining[:] = _unfinished(stub, remaining)
                return not remaining

            eventually(
                all_completed,
                timeout=60,
                interval=0.5,
                what="every acknowledged parent to complete",
            )
            # Parents created without an acknowledgement (a create in flight at the kill) complete as well: wait until
            # the workers have been idle for longer than a lost activation keeps a job away.
            eventually(
                lambda: time.monotonic() - max(t for t, _ in load.history.activated) > job_timeout_ms / 1000 + 1.0,
                timeout=30,
                interval=0.2,
                what="the workers to run out of jobs",
            )
        finally:
            history = load.finish()
        worked = time.monotonic() - started
        held = hold_instances_in_flight(stub, first_op=next(load.attempts))
    cluster.wait_replicas_equal()
    cluster.down()

    write_history(cluster.data_dir / "history.jsonl", history)
    logs = read_replica_logs(cluster)
    problems = divergence(logs)
    assert not problems, "replica logs diverge:\n" + "\n".join(problems)
    result = audit(history, logs, cluster.replication)
    print(result.summary(), f"client errors {dict(history.errors)}")
    assert not result.problems(), "\n".join(result.problems())

    problems, figures = call_tree_problems(committed(logs, cluster.replication), history, held)
    assert not problems, "\n".join(problems[:20])
    on_partition = Counter(partition_of(k) for _, k in history.created)
    print(
        f"{figures}; acknowledged parents per partition {dict(sorted(on_partition.items()))}; jobs completed "
        f"{len(history.completed)}, handed out again {history.activated_again()}"
    )
    print(
        f"broker {leader} led partition {partition} when killed; broker {successor} led after {elected:.2f}s; "
        f"restart-broker took {restart:.1f}s; the workload ran {worked:.1f}s"
    )
    after = [t for t in history.acks_on(partition) if t > killed_at]
    print(f"commands of partition {partition} acknowledged after the kill: {len(after)}")
    assert after, f"partition {partition} acknowledged nothing after its leader was killed"

    differences = replay_differences(cluster, cluster.data_dir / "replays")
    assert not differences, "replay differs from the state a broker holds:\n" + "\n".join(differences)
