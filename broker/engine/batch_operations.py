"""Batch operations (Camunda 8.8): one command that cancels, migrates or modifies many process instances, or resolves
many incidents, worked by every partition on its own items without holding up other commands.

How a batch runs:

- The gateway resolves the request's filter into the matching items (from the history) and sends one
  BATCH_OPERATION_CREATION CREATE to the first partition, with the items grouped by the partition that owns them.
  That partition (the coordinator) writes CREATED, records its own items in BATCH_OPERATION_CHUNK CREATED events
  (at most :data:`CHUNK_SIZE` each) and distributes CREATE, carrying each partition's own items, to every other
  partition through command distribution (delivered until acknowledged, like a deployment).
- Each partition then works its chunks through BATCH_OPERATION_EXECUTION EXECUTE follow-ups, one chunk each: for every
  item it writes the command a client would (PROCESS_INSTANCE CANCEL, INCIDENT RESOLVE, PROCESS_INSTANCE_MIGRATION
  MIGRATE, PROCESS_INSTANCE_MODIFICATION MODIFY), or, when the item cannot take it (the instance is gone), records
  it as failed with the reason the command's rejection would give. EXECUTED carries each item's outcome. The next
  EXECUTE is a follow-up behind the item commands, so other commands are served between chunks.
- A partition with no chunks left writes PARTITION_COMPLETED; one other than the coordinator also sends
  COMPLETE_PARTITION to the coordinator (command distribution again). When every partition has reported, the
  coordinator writes COMPLETED.
- SUSPEND, RESUME and CANCEL (BATCH_OPERATION_LIFECYCLE_MANAGEMENT) are taken by the coordinator and distributed to
  every other partition; a suspended or canceled partition takes no further chunk (a canceled one drops them), a
  resumed one starts again where it stopped.

Everything is on the log, so a new leader continues where the old one stopped. A migration or modification item is
checked by its processor's own refusal check before its command is written: one the instance would refuse fails with
that reason instead of counting as done.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from broker.engine import behaviors as b
from broker.engine import migration, modification
from broker.engine.access import Access, Caller, forbidden_message, hidden_message
from broker.engine.access import resolve as resolve_access
from broker.engine.context import EventApplier, ProcessingContext
from broker.protocol.enums import (
    BatchOperationChunkIntent,
    BatchOperationCreationIntent,
    BatchOperationExecutionIntent,
    BatchOperationLifecycleManagementIntent,
    BatchOperationPartitionLifecycleIntent,
    CommandDistributionIntent,
    IncidentIntent,
    JobIntent,
    ProcessInstanceIntent,
    ProcessInstanceMigrationIntent,
    ProcessInstanceModificationIntent,
    RecordType,
    RejectionType,
    ValueType,
)
from broker.protocol.record import Record
from broker.protocol.values import TENANT

BOC = BatchOperationCreationIntent
BOL = BatchOperationLifecycleManagementIntent
BOP = BatchOperationPartitionLifecycleIntent
CHUNK_SIZE: Final = 50
"""Items per chunk, and so per EXECUTE command: small enough that other commands wait little between chunks."""

CANCEL_PROCESS_INSTANCE: Final = "CANCEL_PROCESS_INSTANCE"
RESOLVE_INCIDENT: Final = "RESOLVE_INCIDENT"
MIGRATE_PROCESS_INSTANCE: Final = "MIGRATE_PROCESS_INSTANCE"
MODIFY_PROCESS_INSTANCE: Final = "MODIFY_PROCESS_INSTANCE"
TYPES: Final = frozenset({CANCEL_PROCESS_INSTANCE, RESOLVE_INCIDENT, MIGRATE_PROCESS_INSTANCE, MODIFY_PROCESS_INSTANCE})
#: The permission each item needs on its process, as the command the item becomes would (UPDATE_PROCESS_INSTANCE,
#: Camunda 8.8's one permission for every change, covers each too).
ITEM_PERMISSIONS: Final = {
    CANCEL_PROCESS_INSTANCE: "CANCEL_PROCESS_INSTANCE",
    MODIFY_PROCESS_INSTANCE: "MODIFY_PROCESS_INSTANCE",
    MIGRATE_PROCESS_INSTANCE: "UPDATE_PROCESS_INSTANCE",
    RESOLVE_INCIDENT: "UPDATE_PROCESS_INSTANCE",
}

# Batch states on a partition
ACTIVE: Final = "ACTIVE"
SUSPENDED: Final = "SUSPENDED"
CANCELED: Final = "CANCELED"
COMPLETED: Final = "COMPLETED"


# -- creation ----------------------------------------------------------------------------------------------------


def create(ctx: ProcessingContext, cmd: Record) -> None:
    """BATCH_OPERATION_CREATION CREATE: from the gateway (this partition coordinates) or distributed by the
    coordinator (this partition's own items)."""
    if cmd.value.get("distributedFrom"):
        _create_distributed(ctx, cmd)
        return
    v = cmd.value
    batch_type = v.get("batchOperationType")
    if batch_type not in TYPES:
        ctx.reject(
            RejectionType.INVALID_ARGUMENT,
            f"Expected a batchOperationType of {', '.join(sorted(TYPES))}, but got '{batch_type}'",
        )
        return
    if not b.authorized(ctx, "BATCH", f"CREATE_BATCH_OPERATION_{batch_type}", also=("CREATE",)):
        return
    partitions_count = b.services(ctx).partitions_count
    items = _partition_items(ctx, v.get("partitionItems"), partitions_count)
    if items is None:
        return
    plan = _plan(ctx, batch_type, v)
    if plan is None:
        return
    key = ctx.keys.next_key()
    created = {
        "batchOperationKey": key,
        "batchOperationType": batch_type,
        "filter": v.get("filter") if isinstance(v.get("filter"), dict) else {},
        **plan,
        "partitionIds": list(range(1, partitions_count + 1)),
        "coordinatorPartitionId": ctx.partition_id,
        "itemsCount": sum(len(i) for i in items.values()),
    }
    if cmd.authorization:  # each item is checked against its creator's permissions when it is worked
        created["caller"] = cmd.authorization
    rec = ctx.event(ValueType.BATCH_OPERATION_CREATION, BOC.CREATED, key, created)
    ctx.respond(rec)
    for partition_id in range(1, partitions_count + 1):
        if partition_id == ctx.partition_id:
            continue
        own = [{"itemKey": i, "processInstanceKey": p} for i, p in items.get(partition_id, [])]
        command = {**created, "items": own, "distributedFrom": ctx.partition_id}
        _distribute_to(ctx, key, partition_id, ValueType.BATCH_OPERATION_CREATION, BOC.CREATE, command)
    _start(ctx, key, items.get(ctx.partition_id, []))


def _create_distributed(ctx: ProcessingContext, cmd: Record) -> None:
    v = cmd.value
    key = v.get("batchOperationKey", -1)
    if not isinstance(key, int) or key <= 0:
        ctx.reject(RejectionType.INVALID_ARGUMENT, f"Expected a batchOperationKey, but got '{key}'")
        return
    if ctx.state.batch_operations.get(key) is not None:
        # a redelivery (the first delivery's acknowledgement was lost): answer again, write nothing twice
        b.answer_again(ctx, ValueType.BATCH_OPERATION_CREATION, BOC.CREATED, key, {"batchOperationKey": key})
        return
    raw = v.get("items")
    items = [(i["itemKey"], i["processInstanceKey"]) for i in raw or () if isinstance(i, dict)]
    created = {name: value for name, value in v.items() if name not in ("items", "distributedFrom")}
    created["itemsCount"] = len(items)
    rec = ctx.event(ValueType.BATCH_OPERATION_CREATION, BOC.CREATED, key, created)
    ctx.respond(rec)
    _start(ctx, key, items)


def _partition_items(
    ctx: ProcessingContext, raw: Any, partitions_count: int
) -> dict[int, list[tuple[int, int]]] | None:
    """The items per partition, each once, in the order given; None after rejecting a malformed list."""
    out: dict[int, list[tuple[int, int]]] = {}
    seen: set[int] = set()
    if not isinstance(raw, list):
        raw = []
    for group in raw:
        partition_id = group.get("partitionId") if isinstance(group, dict) else None
        items = group.get("items") if isinstance(group, dict) else None
        if (
            not isinstance(partition_id, int)
            or not 1 <= partition_id <= partitions_count
            or not isinstance(items, list)
        ):
            ctx.reject(
                RejectionType.INVALID_ARGUMENT,
                f"Expected items grouped by a partitionId from 1 to {partitions_count}, but got {group!r:.200}",
            )
            return None
        for item in items:
            item_key = item.get("itemKey") if isinstance(item, dict) else None
            instance_key = item.get("processInstanceKey") if isinstance(item, dict) else None
            if not isinstance(item_key, int) or not isinstance(instance_key, int) or item_key <= 0:
                ctx.reject(RejectionType.INVALID_ARGUMENT, f"Expected an itemKey and processInstanceKey: {item!r:.200}")
                return None
            if item_key not in seen:
                seen.add(item_key)
                out.setdefault(partition_id, []).append((item_key, instance_key))
    return out


def _plan(ctx: ProcessingContext, batch_type: str, v: dict) -> dict[str, Any] | None:
    """The operation's parameters (a migration plan, move instructions) as recorded; None after a rejection."""
    if batch_type == MIGRATE_PROCESS_INSTANCE:
        plan = v.get("migrationPlan")
        target = plan.get("targetProcessDefinitionKey") if isinstance(plan, dict) else None
        mapping = plan.get("mappingInstructions") if isinstance(plan, dict) else None
        if not isinstance(target, int) or target <= 0 or not isinstance(mapping, list):
            ctx.reject(
                RejectionType.INVALID_ARGUMENT,
                "Expected a migrationPlan with a targetProcessDefinitionKey and mappingInstructions",
            )
            return None
        return {"migrationPlan": {"targetProcessDefinitionKey": target, "mappingInstructions": mapping}}
    if batch_type == MODIFY_PROCESS_INSTANCE:
        plan = v.get("modificationPlan")
        moves = plan.get("moveInstructions") if isinstance(plan, dict) else None
        if not isinstance(moves, list) or not moves:
            ctx.reject(RejectionType.INVALID_ARGUMENT, "Expected a modificationPlan with moveInstructions")
            return None
        return {"modificationPlan": {"moveInstructions": moves}}
    return {}


def _start(ctx: ProcessingContext, key: int, items: list[tuple[int, int]]) -> None:
    """Record this partition's items in chunks and start working them."""
    for index, start in enumerate(range(0, len(items), CHUNK_SIZE)):
        chunk = [{"itemKey": i, "processInstanceKey": p} for i, p in items[start : start + CHUNK_SIZE]]
        value = {"batchOperationKey": key, "chunkIndex": index, "items": chunk}
        ctx.event(ValueType.BATCH_OPERATION_CHUNK, BatchOperationChunkIntent.CREATED, key, value)
    ctx.follow_up(ValueType.BATCH_OPERATION_EXECUTION, BatchOperationExecutionIntent.EXECUTE, key, _ref(key))


def _ref(key: int) -> dict[str, Any]:
    return {"batchOperationKey": key}


def _distribute_to(
    ctx: ProcessingContext, key: int, partition_id: int, value_type: ValueType, intent: Any, command: dict
) -> None:
    """Deliver a command to one partition until it is acknowledged (the command distribution of deployments)."""
    value = {"partitionId": partition_id, "valueType": value_type.name, "intent": intent.name, "commandValue": command}
    ctx.event(ValueType.COMMAND_DISTRIBUTION, CommandDistributionIntent.STARTED, key, value)


# -- execution ---------------------------------------------------------------------------------------------------


def execute(ctx: ProcessingContext, cmd: Record) -> None:
    """BATCH_OPERATION_EXECUTION EXECUTE: work the next chunk of this partition's items (nothing while the batch is
    suspended, canceled or done here)."""
    key = cmd.key
    entry = ctx.state.batch_operations.get(key)
    if entry is None or entry["state"] != ACTIVE or entry["partitionDone"]:
        return
    index = entry["nextChunk"]
    if index >= entry["chunks"]:
        _finish_partition(ctx, key, entry)
        return
    chunk = ctx.state.batch_operations.chunk(key, index) or []
    ref = {"batchOperationKey": key, "chunkIndex": index}
    executing = {**ref, "itemKeys": [item_key for item_key, _ in chunk]}
    ctx.event(ValueType.BATCH_OPERATION_EXECUTION, BatchOperationExecutionIntent.EXECUTING, key, executing)
    outcomes = []
    caller = entry.get("caller")
    access = resolve_access(ctx.state.identity, Caller.of(caller)) if caller else None
    for item_key, instance_key in chunk:
        error = _issue(ctx, entry, access, item_key, instance_key)
        outcomes.append(
            {
                "itemKey": item_key,
                "processInstanceKey": instance_key,
                "state": "FAILED" if error else COMPLETED,
                "errorMessage": error or "",
            }
        )
    executed = {**ref, "batchOperationType": entry["batchOperationType"], "items": outcomes}
    ctx.event(ValueType.BATCH_OPERATION_EXECUTION, BatchOperationExecutionIntent.EXECUTED, key, executed)
    entry = ctx.state.batch_operations.get(key)
    assert entry is not None
    if entry["nextChunk"] < entry["chunks"]:
        ctx.follow_up(ValueType.BATCH_OPERATION_EXECUTION, BatchOperationExecutionIntent.EXECUTE, key, _ref(key))
    else:
        _finish_partition(ctx, key, entry)


def _issue(ctx: ProcessingContext, entry: dict, access: Access | None, item_key: int, instance_key: int) -> str | None:
    """Write the item's command; the reason its rejection would give instead when it cannot take it (``access``:
    the batch creator's, when it was created by an authenticated caller)."""
    batch_type = entry["batchOperationType"]
    if batch_type == RESOLVE_INCIDENT:
        incident = ctx.state.incidents.get(item_key)
        if incident is None:
            return f"Expected to resolve incident with key '{item_key}', but no such incident was found"
        forbidden = _forbidden(ctx, access, batch_type, str(incident.get("bpmnProcessId") or ""), b.tenant_of(incident))
        if forbidden is not None:
            return forbidden
        job_key = incident.get("jobKey", -1)
        if job_key > 0:  # a job out of retries gets one back first, or resolving raises the incident again (Zeebe)
            ctx.follow_up(ValueType.JOB, JobIntent.UPDATE_RETRIES, job_key, {"retries": 1})
        ctx.follow_up(ValueType.INCIDENT, IncidentIntent.RESOLVE, item_key, {})
        return None
    inst = ctx.state.elements.get(instance_key)
    if inst is None or inst.value.flow_scope_key > 0 or inst.state == ProcessInstanceIntent.ELEMENT_TERMINATING:
        what = {CANCEL_PROCESS_INSTANCE: "cancel", MIGRATE_PROCESS_INSTANCE: "migrate"}.get(batch_type, "modify")
        return f"Expected to {what} a process instance with key '{instance_key}', but no such process was found"
    forbidden = _forbidden(ctx, access, batch_type, inst.value.bpmn_process_id, inst.value.tenant_id or TENANT)
    if forbidden is not None:
        return forbidden
    if batch_type == CANCEL_PROCESS_INSTANCE:
        if inst.value.parent_process_instance_key > 0:
            return (
                f"Expected to cancel a process instance with key '{instance_key}', but it is created by a parent "
                "process instance. Cancel the root process instance instead."
            )
        ctx.follow_up(ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.CANCEL, instance_key, {})
    elif batch_type == MIGRATE_PROCESS_INSTANCE:
        plan = entry["migrationPlan"]
        value = {"processInstanceKey": instance_key, **plan, "tenantId": inst.value.tenant_id}
        intent = ProcessInstanceMigrationIntent.MIGRATE
        refused = migration.refusal(
            ctx, _command(ctx, ValueType.PROCESS_INSTANCE_MIGRATION, intent, instance_key, value)
        )
        if refused is not None:
            return refused[1]
        ctx.follow_up(ValueType.PROCESS_INSTANCE_MIGRATION, intent, instance_key, value)
    else:
        moves = [
            {
                "sourceElementId": m.get("sourceElementId", ""),
                "sourceElementInstanceKey": -1,
                "targetElementId": m.get("targetElementId", ""),
                "ancestorScopeKey": -1,
                "inferAncestorScopeFromSourceHierarchy": False,
                "useSourceParentKeyAsAncestorScope": False,
                "variableInstructions": [],
            }
            for m in entry["modificationPlan"]["moveInstructions"]
            if isinstance(m, dict)
        ]
        value = {
            "processInstanceKey": instance_key,
            "activateInstructions": [],
            "terminateInstructions": [],
            "moveInstructions": moves,
            "tenantId": inst.value.tenant_id,
        }
        modify = ProcessInstanceModificationIntent.MODIFY
        command = _command(ctx, ValueType.PROCESS_INSTANCE_MODIFICATION, modify, instance_key, value)
        refused = modification.refusal(ctx, command)
        if refused is not None:
            return refused[1]
        ctx.follow_up(ValueType.PROCESS_INSTANCE_MODIFICATION, modify, instance_key, value)
    return None


def _forbidden(
    ctx: ProcessingContext, access: Access | None, batch_type: str, process_id: str, tenant: str
) -> str | None:
    """Why the batch's creator may not change this item (Camunda checks every item with its creator's permissions,
    as the item's own command would be checked), or None: an item of a tenant it is not assigned to is not found,
    one of a process it holds no permission on is forbidden."""
    if access is None:
        return None
    permission = ITEM_PERMISSIONS[batch_type]
    if not b.assigned(access, tenant):
        return hidden_message(permission, "PROCESS_DEFINITION", tenant)
    if not b.services(ctx).authorizations:
        return None
    if access.allows_any("PROCESS_DEFINITION", (process_id,), (permission, "UPDATE_PROCESS_INSTANCE")):
        return None
    return forbidden_message(permission, "PROCESS_DEFINITION", (process_id,))


def _command(ctx: ProcessingContext, value_type: ValueType, intent: int, key: int, value: dict) -> Record:
    """The item's command as it will be written, for asking its processor whether it would refuse it: the item then
    fails with that reason instead of counting as done while its command is rejected."""
    return Record(-1, key, RecordType.COMMAND, value_type, int(intent), ctx.now, value)


def _finish_partition(ctx: ProcessingContext, key: int, entry: dict) -> None:
    """This partition worked all its items: tell the coordinator (itself, or through command distribution)."""
    value = {
        "batchOperationKey": key,
        "partitionId": ctx.partition_id,
        "completedCount": entry["completedCount"],
        "failedCount": entry["failedCount"],
    }
    ctx.event(ValueType.BATCH_OPERATION_PARTITION_LIFECYCLE, BOP.PARTITION_COMPLETED, key, value)
    coordinator = entry["coordinatorPartitionId"]
    if coordinator == ctx.partition_id:
        _maybe_complete(ctx, key)
    else:
        intent = BOP.COMPLETE_PARTITION
        command = {**value, "distributedFrom": ctx.partition_id}
        vt = ValueType.BATCH_OPERATION_PARTITION_LIFECYCLE
        _distribute_to(ctx, ctx.keys.next_key(), coordinator, vt, intent, command)


def complete_partition(ctx: ProcessingContext, cmd: Record) -> None:
    """BATCH_OPERATION_PARTITION_LIFECYCLE COMPLETE_PARTITION, on the coordinator: another partition is done."""
    v = cmd.value
    key = v.get("batchOperationKey", -1)
    entry = ctx.state.batch_operations.get(key) if isinstance(key, int) else None
    partition_id = v.get("partitionId")
    if entry is None or entry["coordinatorPartitionId"] != ctx.partition_id:
        ctx.reject(RejectionType.NOT_FOUND, f"Expected batch operation '{key}' to be coordinated here, but it is not")
        return
    value = {name: v.get(name) for name in ("batchOperationKey", "partitionId", "completedCount", "failedCount")}
    if partition_id not in entry["pendingPartitions"]:
        if partition_id in entry["partitionIds"]:  # a redelivery of a report taken already
            b.answer_again(ctx, ValueType.BATCH_OPERATION_PARTITION_LIFECYCLE, BOP.PARTITION_COMPLETED, key, value)
        else:
            ctx.reject(RejectionType.INVALID_ARGUMENT, f"Expected a partition of batch operation '{key}': {v!r:.200}")
        return
    rec = ctx.event(ValueType.BATCH_OPERATION_PARTITION_LIFECYCLE, BOP.PARTITION_COMPLETED, key, value)
    ctx.respond(rec)
    _maybe_complete(ctx, key)


def _maybe_complete(ctx: ProcessingContext, key: int) -> None:
    entry = ctx.state.batch_operations.get(key)
    if entry is None or entry["pendingPartitions"] or entry["state"] in (CANCELED, COMPLETED):
        return
    value = {"batchOperationKey": key, "batchOperationType": entry["batchOperationType"]}
    ctx.event(ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT, BOL.COMPLETED, key, value)


# -- suspend, resume, cancel -------------------------------------------------------------------------------------

_LIFECYCLE: Final = {
    BOL.SUSPEND: ("suspend", (ACTIVE,), BOL.SUSPENDED),
    BOL.RESUME: ("resume", (SUSPENDED,), BOL.RESUMED),
    BOL.CANCEL: ("cancel", (ACTIVE, SUSPENDED), BOL.CANCELED),
}


def lifecycle(ctx: ProcessingContext, cmd: Record) -> None:
    """BATCH_OPERATION_LIFECYCLE_MANAGEMENT SUSPEND, RESUME, CANCEL: taken by the coordinator, distributed to the
    other partitions (where a batch not created yet refuses it for now, so it is delivered again)."""
    v = cmd.value
    key = cmd.key if cmd.key > 0 else v.get("batchOperationKey", -1)
    verb, allowed, event = _LIFECYCLE[BOL(cmd.intent)]
    entry = ctx.state.batch_operations.get(key) if isinstance(key, int) and key > 0 else None
    distributed = bool(v.get("distributedFrom"))
    if not distributed and not b.authorized(ctx, "BATCH", "UPDATE"):
        return
    if entry is None:
        if distributed:
            ctx.reject(RejectionType.INVALID_STATE, f"Expected to {verb} batch operation '{key}', not created here yet")
        else:
            ctx.reject(
                RejectionType.NOT_FOUND,
                f"Expected to {verb} a batch operation with key '{key}', but no such batch operation was found",
            )
        return
    if not distributed and entry.get("coordinatorPartitionId") != ctx.partition_id:
        ctx.reject(RejectionType.NOT_FOUND, f"Expected to {verb} batch operation '{key}' on the partition that owns it")
        return
    if not distributed and entry["state"] not in allowed:
        ctx.reject(
            RejectionType.INVALID_STATE,
            f"Expected to {verb} a batch operation that is {' or '.join(allowed)}, but batch operation '{key}' is "
            f"{entry['state']}",
        )
        return
    was = entry["state"]
    value = {"batchOperationKey": key, "batchOperationType": entry["batchOperationType"]}
    rec = ctx.event(ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT, event, key, value)
    ctx.respond(rec)
    if event == BOL.RESUMED and was == SUSPENDED and not entry["partitionDone"]:
        ctx.follow_up(ValueType.BATCH_OPERATION_EXECUTION, BatchOperationExecutionIntent.EXECUTE, key, _ref(key))
    if not distributed:
        command = {**value, "distributedFrom": ctx.partition_id}
        for partition_id in entry["partitionIds"]:
            if partition_id != ctx.partition_id:
                vt = ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT
                _distribute_to(ctx, ctx.keys.next_key(), partition_id, vt, BOL(cmd.intent), command)


# -- appliers ----------------------------------------------------------------------------------------------------


def apply_created(state: Any, r: Record) -> None:
    v = r.value
    coordinator = v.get("coordinatorPartitionId") == r.partition_id
    entry = {
        "batchOperationType": v["batchOperationType"],
        "state": ACTIVE,
        "coordinatorPartitionId": v.get("coordinatorPartitionId", r.partition_id),
        "partitionIds": v.get("partitionIds", [r.partition_id]),
        "pendingPartitions": list(v.get("partitionIds", [r.partition_id])) if coordinator else [],
        "migrationPlan": v.get("migrationPlan"),
        "modificationPlan": v.get("modificationPlan"),
        "caller": v.get("caller"),
        "chunks": 0,
        "nextChunk": 0,
        "partitionDone": False,
        "completedCount": 0,
        "failedCount": 0,
    }
    state.batch_operations.put(r.key, entry)


def apply_chunk_created(state: Any, r: Record) -> None:
    entry = state.batch_operations.get(r.key)
    if entry is None:
        return
    items = [[i["itemKey"], i["processInstanceKey"]] for i in r.value["items"]]
    state.batch_operations.put_chunk(r.key, r.value["chunkIndex"], items)
    entry["chunks"] = max(entry["chunks"], r.value["chunkIndex"] + 1)
    state.batch_operations.put(r.key, entry)


def apply_executed(state: Any, r: Record) -> None:
    entry = state.batch_operations.get(r.key)
    if entry is None:
        return
    index = r.value["chunkIndex"]
    state.batch_operations.remove_chunk(r.key, index)
    entry["nextChunk"] = max(entry["nextChunk"], index + 1)
    for item in r.value["items"]:
        entry["completedCount" if item["state"] == COMPLETED else "failedCount"] += 1
    state.batch_operations.put(r.key, entry)


def apply_partition_completed(state: Any, r: Record) -> None:
    entry = state.batch_operations.get(r.key)
    if entry is None:
        return
    partition_id = r.value["partitionId"]
    if partition_id == r.partition_id:
        entry["partitionDone"] = True
    if partition_id in entry["pendingPartitions"]:
        entry["pendingPartitions"].remove(partition_id)
    state.batch_operations.put(r.key, entry)


def _set_state(new: str, only_from: tuple[str, ...]) -> Any:
    def apply(state: Any, r: Record) -> None:
        entry = state.batch_operations.get(r.key)
        if entry is None or entry["state"] not in only_from:
            return
        entry["state"] = new
        state.batch_operations.put(r.key, entry)
        if new == CANCELED:
            state.batch_operations.remove_chunks(r.key)

    return apply


APPLIERS: Final[dict[tuple[int, int], EventApplier]] = {
    (ValueType.BATCH_OPERATION_CREATION, BOC.CREATED): apply_created,
    (ValueType.BATCH_OPERATION_CHUNK, BatchOperationChunkIntent.CREATED): apply_chunk_created,
    (ValueType.BATCH_OPERATION_EXECUTION, BatchOperationExecutionIntent.EXECUTED): apply_executed,
    (ValueType.BATCH_OPERATION_PARTITION_LIFECYCLE, BOP.PARTITION_COMPLETED): apply_partition_completed,
    (ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT, BOL.SUSPENDED): _set_state(SUSPENDED, (ACTIVE,)),
    (ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT, BOL.RESUMED): _set_state(ACTIVE, (SUSPENDED,)),
    (ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT, BOL.CANCELED): _set_state(CANCELED, (ACTIVE, SUSPENDED)),
    (ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT, BOL.COMPLETED): _set_state(COMPLETED, (ACTIVE, SUSPENDED)),
}
"""The event appliers of batch operations, registered in the engine's applier table."""

PROCESSORS: Final[dict[tuple[int, int], Callable[[ProcessingContext, Record], None]]] = {
    (ValueType.BATCH_OPERATION_CREATION, BOC.CREATE): create,
    (ValueType.BATCH_OPERATION_EXECUTION, BatchOperationExecutionIntent.EXECUTE): execute,
    (ValueType.BATCH_OPERATION_PARTITION_LIFECYCLE, BOP.COMPLETE_PARTITION): complete_partition,
    (ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT, BOL.SUSPEND): lifecycle,
    (ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT, BOL.RESUME): lifecycle,
    (ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT, BOL.CANCEL): lifecycle,
}
"""The command processors of batch operations, registered in the engine's table."""
