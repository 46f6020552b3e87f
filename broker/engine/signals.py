"""Signals: broadcasting, and the subscriptions of signal catch, boundary and start events.

A broadcast is written (SIGNAL BROADCASTED) and acknowledged on the partition that received it, which then hands it
to every other partition through command distribution: delivered at least once, until acknowledged, and deduplicated
by the signal's key on arrival (receipts are kept for an hour of record time, far longer than redeliveries last).
Each partition triggers its own subscriptions. Signal start events subscribe on the partition a process was deployed
on only, so one broadcast starts one instance per process, not one per partition.
"""

from __future__ import annotations

from broker.engine import behaviors as b
from broker.engine import events
from broker.engine.bpmn import model as bpmn
from broker.engine.context import ProcessingContext
from broker.protocol.enums import (
    RecordType,
    RejectionType,
    SignalIntent,
    ValueType,
)
from broker.protocol.record import Record


def broadcast_command(ctx: ProcessingContext, cmd: Record) -> None:
    """SIGNAL BROADCAST: from a client (through the gateway) or distributed from another partition."""
    v = cmd.value
    name = v.get("signalName", "")
    if not name:
        ctx.reject(RejectionType.INVALID_ARGUMENT, "Expected to broadcast a signal with a name, but the name is empty")
        return
    variables = v.get("variables") or {}
    if not isinstance(variables, dict):
        ctx.reject(RejectionType.INVALID_ARGUMENT, "Expected the signal's variables to be a document")
        return
    tenant = b.tenant_of(v)
    if v.get("distributedFrom"):
        _receive(ctx, v, tenant, name, variables)
        return
    if b.refuse_unassigned_tenant(ctx, "BroadcastSignal", [tenant]):
        return
    starts = sorted({s["bpmnProcessId"] for s in ctx.state.signal_subscriptions.for_name(tenant, name) if _starts(s)})
    for process_id in starts:  # as in Camunda: starting instances by a signal needs the right to start them
        if not b.authorized(ctx, "PROCESS_DEFINITION", "CREATE_PROCESS_INSTANCE", [process_id]):
            return
    ctx.respond(broadcast(ctx, tenant, name, variables))


def _starts(subscription: dict) -> bool:
    """Whether a signal subscription is a start event's (it starts an instance) rather than a waiting element's."""
    return subscription.get("catchEventInstanceKey", -1) <= 0


def _receive(ctx: ProcessingContext, v: dict, tenant: str, name: str, variables: dict) -> None:
    key = v.get("signalKey", -1)
    if not isinstance(key, int) or key <= 0:
        ctx.reject(RejectionType.INVALID_ARGUMENT, f"Expected a distributed signal with its key, but got '{key}'")
        return
    value = _value(tenant, name, variables)
    if ctx.state.signal_receipts.get(key) is not None:  # delivered again: acknowledge, trigger nothing
        ctx.respond(Record(-1, key, RecordType.EVENT, ValueType.SIGNAL, SignalIntent.BROADCASTED, ctx.now, value))
        return
    ctx.respond(ctx.event(ValueType.SIGNAL, SignalIntent.BROADCASTED, key, value))
    trigger(ctx, tenant, name, variables)


def _value(tenant: str, name: str, variables: dict) -> dict:
    return {"signalName": name, "variables": variables, "tenantId": tenant}


def broadcast(ctx: ProcessingContext, tenant: str, name: str, variables: dict) -> Record:
    """Broadcast a signal within a tenant from this partition: record it, distribute it, trigger the local
    subscriptions."""
    key = ctx.keys.next_key()
    value = _value(tenant, name, variables)
    rec = ctx.event(ValueType.SIGNAL, SignalIntent.BROADCASTED, key, value)
    command = {**value, "distributedFrom": ctx.partition_id, "signalKey": key}
    b.distribute(ctx, key, ValueType.SIGNAL, SignalIntent.BROADCAST, command)
    trigger(ctx, tenant, name, variables)
    return rec


def trigger(ctx: ProcessingContext, tenant: str, name: str, variables: dict) -> None:
    """Every subscription of the tenant to ``name`` on this partition: start instances, wake waiting elements."""
    for sub in ctx.state.signal_subscriptions.for_name(tenant, name):
        eik = sub.get("catchEventInstanceKey", -1)
        definition_key = sub["processDefinitionKey"]
        if eik <= 0:
            if ctx.state.processes.get(definition_key) is not None:
                events.start_instance(ctx, definition_key, sub["catchEventId"], variables)
            continue
        if ctx.state.signal_subscriptions.get(tenant, name, eik, sub["catchEventId"]) is None:
            continue  # closed by an earlier subscription of the same element this round (a gateway's other target)
        inst = ctx.state.elements.get(eik)
        if not events.can_fire(ctx, inst):
            continue
        assert inst is not None
        process = b.services(ctx).models.get(definition_key)
        events.fire(ctx, process, inst, process.element(sub["catchEventId"]), variables)


def replace_start_subscriptions(ctx: ProcessingContext, process: bpmn.Process, definition_key: int) -> None:
    """The newest version's signal start events are the ones that listen: older versions' subscriptions close."""
    stored = ctx.state.processes.get(definition_key)
    assert stored is not None
    _close_older(ctx, b.tenant_of(stored), process.id, definition_key)
    for start_id in process.start_event_ids:
        start = process.element(start_id)
        if start.event_type != bpmn.SIGNAL or not start.signal_name:
            continue
        name = b.evaluate(ctx, start.signal_name, -1)
        if not isinstance(name, str) or not name:
            continue
        events.open_signal_subscription(
            ctx, stored["processDefinitionKey"], stored["bpmnProcessId"], start.id, name, -1, b.tenant_of(stored)
        )


def _close_older(ctx: ProcessingContext, tenant: str, process_id: str, definition_key: int) -> None:
    """Close the subscriptions of the newest older version that still has some (older ones closed earlier)."""
    stored = ctx.state.processes.get(definition_key)
    assert stored is not None
    for version in range(stored["version"] - 1, 0, -1):
        older_key = ctx.state.processes.key_of(tenant, process_id, version)
        if older_key is None:
            continue
        subs = ctx.state.signal_subscriptions.of_owner(older_key)
        for sub in subs:
            events.close_signal_subscription(ctx, sub)
        if subs:
            return  # only the previous listening version has subscriptions
