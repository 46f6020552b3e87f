"""Invariants a simulated run must keep, checked against the committed logs, the replicas' states and the sink.

Each check returns the violations it found as lines a person can act on (empty: it held).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from broker.engine.engine import Engine
from broker.log import LogBlock, MemoryLog
from broker.protocol.codec import decode_block
from broker.protocol.enums import (
    IncidentIntent,
    JobBatchIntent,
    JobIntent,
    MessageIntent,
    ProcessInstanceCreationIntent,
    ProcessInstanceIntent,
    ProcessIntent,
    RecordType,
    TimerIntent,
    ValueType,
    VariableIntent,
)
from broker.protocol.keys import KeyGenerator, partition_of
from broker.protocol.record import Record
from broker.state.db import StateDb
from broker.state.repositories import PartitionState
from broker.stream import snapshots
from broker.stream.replay import replay_blocks, replay_start
from broker.tools.inspect import StateDump, diff_dumps, dump_state
from client.sim import models
from client.sim.workload import History

# Events that bring a new entity into being: no key may be created by two of them (on any partition).
_CREATIONS = {
    (ValueType.JOB, int(JobIntent.CREATED)),
    (ValueType.TIMER, int(TimerIntent.CREATED)),
    (ValueType.INCIDENT, int(IncidentIntent.CREATED)),
    (ValueType.VARIABLE, int(VariableIntent.CREATED)),
    (ValueType.MESSAGE, int(MessageIntent.PUBLISHED)),
    (ValueType.PROCESS_INSTANCE, int(ProcessInstanceIntent.ELEMENT_ACTIVATING)),
}


def records(blocks: list[LogBlock]) -> Iterator[Record]:
    """Every record of committed blocks, in position order."""
    for block in blocks:
        yield from decode_block(block.payload)[1]


def acknowledged_lost(history: History, logs: dict[int, list[Record]]) -> list[str]:
    """Acknowledged creations and job completions must be in the committed log of the partition that owns them."""
    created = {
        r.value.get("processInstanceKey")
        for recs in logs.values()
        for r in recs
        if r.value_type == ValueType.PROCESS_INSTANCE_CREATION
        and r.intent == ProcessInstanceCreationIntent.CREATED
        and r.record_type == RecordType.EVENT
    }
    completed = {
        r.key
        for recs in logs.values()
        for r in recs
        if r.value_type == ValueType.JOB and r.intent == JobIntent.COMPLETED and r.record_type == RecordType.EVENT
    }
    out = [
        f"acknowledged instance {k} ({p}) is not in the log" for k, p in history.instances.items() if k not in created
    ]
    out += [
        f"acknowledged completion of job {k} is not in the log" for k in history.completed_jobs if k not in completed
    ]
    return out


def pushed_committed(history: History, logs: dict[int, list[Record]]) -> list[str]:
    """A worker is pushed only jobs whose activation is committed (the push goes out after its block commits)."""
    activated = {
        r.key: r.value.get("jobKeys", [])
        for recs in logs.values()
        for r in recs
        if r.value_type == ValueType.JOB_BATCH
        and r.intent == JobBatchIntent.ACTIVATED
        and r.record_type == RecordType.EVENT
    }
    return [
        f"a worker was pushed jobs {jobs} (batch {key}) whose activation is not in the log"
        for key, jobs in sorted(history.pushed.items())
        if activated.get(key) != jobs
    ]


def double_completion(logs: dict[int, list[Record]]) -> list[str]:
    counts = Counter(
        r.key
        for recs in logs.values()
        for r in recs
        if r.value_type == ValueType.JOB and r.intent == JobIntent.COMPLETED and r.record_type == RecordType.EVENT
    )
    return [f"job {k} completed {n} times" for k, n in counts.items() if n > 1]


def duplicate_keys(logs: dict[int, list[Record]]) -> list[str]:
    seen: dict[int, tuple[int, Record]] = {}
    out = []
    for pid, recs in sorted(logs.items()):
        for r in recs:
            if r.record_type != RecordType.EVENT or (r.value_type, r.intent) not in _CREATIONS:
                continue
            if partition_of(r.key) != pid:
                out.append(f"partition {pid} created key {r.key} of partition {partition_of(r.key)} ({r.describe()})")
            earlier = seen.get(r.key)
            if earlier is not None:
                out.append(
                    f"key {r.key} created twice: {earlier[1].describe()} at {earlier[0]}:{earlier[1].position} and "
                    f"{r.describe()} at {pid}:{r.position}"
                )
            seen[r.key] = (pid, r)
    return out


def replicas_agree(replica_blocks: dict[int, list[list[LogBlock]]]) -> list[str]:
    """Every replica's committed log agrees with the others on every position they both hold."""
    out = []
    for pid, replicas in sorted(replica_blocks.items()):
        by_first = sorted(({b.first_position: b for b in blocks} for blocks in replicas), key=len, reverse=True)
        for i in range(1, len(by_first)):
            for first, block in by_first[i].items():
                other = by_first[0].get(first)
                if other is not None and other.payload != block.payload:
                    out.append(f"partition {pid}: replicas differ in the block at position {first}")
    return out


def exported_once_in_order(sink: dict[int, list[tuple[int, Record]]], logs: dict[int, list[Record]]) -> list[str]:
    """Each committed record reached the sink, equal to the logged one; a leader's exporter never goes backwards
    except to offer again what it had not acknowledged (at least once)."""
    out = []
    for pid, recs in sorted(logs.items()):
        exported = {position: record for position, record in sink.get(pid, [])}
        missing = [r.position for r in recs if r.position not in exported]
        if missing:
            out.append(f"partition {pid}: {len(missing)} committed records never exported (first {missing[:5]})")
        for r in recs:
            e = exported.get(r.position)
            if e is not None and (e.key, e.value_type, e.intent, e.record_type) != (
                r.key,
                r.value_type,
                r.intent,
                r.record_type,
            ):
                out.append(f"partition {pid}: exported {e.describe()} at {r.position}, but the log has {r.describe()}")
    return out


def replay_equals_live(pid: int, log: MemoryLog, partition_dir: Path, partitions_count: int) -> list[str]:
    """Recovering from the newest snapshot (or nothing) plus the committed log gives the replica's live state."""
    with tempfile.TemporaryDirectory(prefix=f"weir-sim-replay-{pid}-") as scratch:
        target = Path(scratch) / "state"
        snapshots.restore_latest(partition_dir / "snapshots", target)
        db = StateDb(target)
        try:
            state = PartitionState(db)
            engine = Engine(state, partitions_count=partitions_count)
            with db.begin() as txn:
                state.bind(txn)
                applied, processed = state.meta.last_applied_position(), state.meta.last_processed_position()
                keys = KeyGenerator(pid, state.meta.key_counter())
                state.bind(None)
            start = replay_start(applied, processed)
            if log.last_position >= start:
                replay_blocks(log.read(start), db, state, engine, keys, applied=applied, processed=processed)
        finally:
            db.close()
        replayed: StateDump = dump_state(target)
    live = dump_state(partition_dir / "runtime")
    return [f"partition {pid}: replay differs from the live state: {line}" for line in diff_dumps(live, replayed)]


def deployments_everywhere(history: History, logs: dict[int, list[Record]]) -> list[str]:
    """A deployment acknowledged to a client reached every partition (its processes can start anywhere)."""
    out = []
    wanted = set(history.deployed.values())
    for pid, recs in sorted(logs.items()):
        have = {
            r.key
            for r in recs
            if r.record_type == RecordType.EVENT
            and r.value_type == ValueType.PROCESS
            and r.intent == ProcessIntent.CREATED
        }
        missing = wanted - have
        if missing:
            out.append(f"partition {pid}: acknowledged process definitions {sorted(missing)} never arrived")
    return out


def identity_everywhere(history: History, logs: dict[int, list[Record]]) -> list[str]:
    """An identity change acknowledged to a client is on every partition: it is answered only once every partition
    applied it, so no partition may still lack it (a revoked grant still held somewhere)."""
    out = []
    for pid, recs in sorted(logs.items()):
        have = {
            (int(r.value_type), int(r.intent), r.key, str(r.value.get("entityId") or ""))
            for r in recs
            if r.record_type == RecordType.EVENT
        }
        missing = [change for change in history.identity if change not in have]
        if missing:
            out.append(f"partition {pid}: acknowledged identity changes {missing[:5]} never arrived")
    return out


def tenants_kept(history: History, logs: dict[int, list[Record]]) -> list[str]:
    """Everything an instance causes stays in its tenant: the instance is in the tenant it was created in, its
    elements, jobs, variables, incidents and user tasks carry it, the instances it calls are in it, and the messages
    it takes were published in it."""
    out: list[str] = []
    instance_tenant = dict(history.tenants)
    message_tenant: dict[int, str] = {}
    events = [r for recs in logs.values() for r in recs if r.record_type == RecordType.EVENT]
    for r in events:
        if r.value_type == ValueType.PROCESS_INSTANCE and r.value.get("bpmnElementType") == "PROCESS":
            instance_tenant.setdefault(r.key, r.value.get("tenantId", ""))
        elif r.value_type == ValueType.MESSAGE and r.intent == MessageIntent.PUBLISHED:
            message_tenant[r.key] = r.value.get("tenantId", "")
    for r in events:
        v = r.value
        tenant, instance = v.get("tenantId"), v.get("processInstanceKey", -1)
        if tenant is None or not isinstance(instance, int) or instance <= 0 or instance not in instance_tenant:
            continue
        if tenant != instance_tenant[instance]:
            out.append(
                f"{r.describe()} carries tenant '{tenant}', its instance {instance} is in '{instance_tenant[instance]}'"
            )
        parent = v.get("parentProcessInstanceKey", -1)
        if parent in instance_tenant and instance_tenant[parent] != tenant:
            out.append(f"{r.describe()}: instance {instance} in '{tenant}' was called from '{instance_tenant[parent]}'")
        message = v.get("messageKey", -1)
        taken = r.value_type == ValueType.PROCESS_MESSAGE_SUBSCRIPTION and message in message_tenant
        if taken and message_tenant[message] != tenant:
            out.append(f"{r.describe()}: a message of '{message_tenant[message]}' reached '{tenant}'")
    return out[:10]


def deployments_usable(history: History) -> list[str]:
    """A process acknowledged as deployed can be started through the gateway at once, whichever partition it picks."""
    refused = history.outcomes.get("create NOT_FOUND", 0)
    if not refused:
        return []
    return [f"{refused} creations of acknowledged processes were refused NOT_FOUND"]


def completed_instances(history: History, logs: dict[int, list[Record]]) -> list[str]:
    """Liveness: every acknowledged instance of a model that completes by itself has completed."""
    done = {
        r.key
        for recs in logs.values()
        for r in recs
        if r.record_type == RecordType.EVENT
        and r.value_type == ValueType.PROCESS_INSTANCE
        and r.intent == ProcessInstanceIntent.ELEMENT_COMPLETED
        and r.value.get("bpmnElementType") == "PROCESS"
    }
    completes = {m.process_id for m in models.CATALOGUE if m.completes}
    stuck = sorted(k for k, p in history.instances.items() if p in completes and k not in done)
    if not stuck:
        return []
    where = []
    for key in stuck[:3]:
        last = [
            r.describe() + f" {r.value.get('elementId', '')}"
            for recs in logs.values()
            for r in recs
            if r.value.get("processInstanceKey") == key
        ][-3:]
        where.append(f"{key} ({history.instances[key]}): last records {last}")
    return [f"{len(stuck)} acknowledged instances did not complete after the faults healed: " + "; ".join(where)]


def canaries_in_time(history: History, bound_s: float, faults: list[tuple[float, float]]) -> list[str]:
    """Liveness under load: a canary that met no fault completes within the bound (hostile work may run)."""
    slow = []
    for key, started in sorted(history.canaries.items()):
        done = history.canary_done.get(key)
        end = started + bound_s if done is None else done
        if any(begin < end and started < healed for begin, healed in faults):
            continue
        if done is None or done - started > bound_s:
            slow.append(f"canary {key} took {'ever' if done is None else f'{done - started:.1f}s'} (bound {bound_s}s)")
    return slow
