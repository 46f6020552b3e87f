"""Messages: publishing and expiry, and the subscription handshake between two partitions.

A message lives on the partition its correlation key hashes to; a subscription lives on its process instance's
partition and is mirrored there. The two sides talk through commands only::

    instance partition                                  message partition
    PROCESS_MESSAGE_SUBSCRIPTION CREATING  ── MESSAGE_SUBSCRIPTION CREATE ──▶  CREATED (+ correlate a buffered one)
    CREATED ◀── PROCESS_MESSAGE_SUBSCRIPTION CREATE ──
                                           ◀── PROCESS_MESSAGE_SUBSCRIPTION CORRELATE ──  CORRELATING
    CORRELATED (element continues)  ── MESSAGE_SUBSCRIPTION CORRELATE (or REJECT) ──▶  CORRELATED (or REJECTED)
    DELETING (element left)  ── MESSAGE_SUBSCRIPTION DELETE ──▶  DELETED
    DELETED ◀── PROCESS_MESSAGE_SUBSCRIPTION DELETE ──

Commands that must arrive wait in the outbox (state) until the answer that acknowledges them is processed; the
leader resends them meanwhile, and every receiver is idempotent. Answers themselves are sent once after commit: a lost
answer makes the other side resend its command, which is answered again.
"""

from __future__ import annotations

from typing import Any

from broker.engine import behaviors as b
from broker.engine import events
from broker.engine.context import ProcessingContext
from broker.protocol.enums import (
    MessageIntent,
    MessageStartEventSubscriptionIntent,
    MessageSubscriptionIntent,
    ProcessMessageSubscriptionIntent,
    RejectionType,
    ValueType,
)
from broker.protocol.limits import duration_problem
from broker.protocol.record import Record

MS = MessageSubscriptionIntent
PMS = ProcessMessageSubscriptionIntent


def send(ctx: ProcessingContext, partition_id: int, value_type: ValueType, intent: int, value: dict) -> None:
    """Send a command once, after this round commits (through the partition's sender; nothing while replaying)."""
    services = b.services(ctx)

    def deliver() -> None:
        sender = getattr(services, "sender", None)
        if sender is not None:
            sender(partition_id, value_type, intent, value, -1)

    ctx.side_effects.tasks.append(deliver)


# -- MESSAGE PUBLISH / EXPIRE (message partition) -------------------------------------------------------------


def publish(ctx: ProcessingContext, cmd: Record) -> None:
    v = cmd.value
    name = v.get("name", "")
    correlation_key = str(v.get("correlationKey", ""))
    message_id = v.get("messageId", "") or ""
    ttl = int(v.get("timeToLive", 0) or 0)
    if not name:
        ctx.reject(RejectionType.INVALID_ARGUMENT, "Expected to publish a message with a name, but the name is empty")
        return
    problem = duration_problem("timeToLive", ttl, minimum=0)
    if problem:
        ctx.reject(RejectionType.INVALID_ARGUMENT, problem)
        return
    if message_id and ctx.state.messages.key_of_id(name, correlation_key, message_id) is not None:
        ctx.reject(
            RejectionType.ALREADY_EXISTS,
            f"Expected to publish a new message with id '{message_id}', but a message with that id was already "
            "published",
        )
        return
    key = ctx.keys.next_key()
    message = {
        "name": name,
        "correlationKey": correlation_key,
        "timeToLive": ttl,
        "messageId": message_id,
        "variables": v.get("variables") or {},
        "deadline": ctx.now + max(ttl, 0),
        "tenantId": b.TENANT,
    }
    rec = ctx.event(ValueType.MESSAGE, MessageIntent.PUBLISHED, key, message)
    ctx.respond(rec)
    seen: set[int] = set()
    for sub in ctx.state.message_subscriptions.for_correlation(name, correlation_key):
        pi = sub["processInstanceKey"]
        if sub.get("correlatingMessageKey", -1) > 0 or pi in seen or ctx.state.messages.correlated(key, str(pi)):
            continue
        seen.add(pi)
        _correlating(ctx, sub, key, message)
    _start_instances(ctx, key, message)
    if ttl <= 0:
        ctx.event(ValueType.MESSAGE, MessageIntent.EXPIRED, key, message)


def expire(ctx: ProcessingContext, cmd: Record) -> None:
    """Written by the leader's checker when a message's time to live passed; re-checked here."""
    message = ctx.state.messages.get(cmd.key)
    if message is None:
        ctx.reject(RejectionType.NOT_FOUND, f"Expected to expire message with key '{cmd.key}', but none found")
        return
    if message["deadline"] > ctx.now:
        ctx.reject(RejectionType.INVALID_STATE, f"Message '{cmd.key}' is still alive (deadline {message['deadline']})")
        return
    ctx.event(ValueType.MESSAGE, MessageIntent.EXPIRED, cmd.key, message)


def _correlating(ctx: ProcessingContext, sub: dict, message_key: int, message: dict) -> None:
    """Hand ``message`` to the subscription's process instance (the outbox delivers it until answered)."""
    value = dict(sub)
    value.update(messageKey=message_key, variables=message["variables"])
    ctx.event(ValueType.MESSAGE_SUBSCRIPTION, MS.CORRELATING, ctx.keys.next_key(), value)


def _correlate_buffered(ctx: ProcessingContext, sub: dict) -> None:
    """A subscription became free: the oldest buffered message for it that this instance has not had yet."""
    pi = str(sub["processInstanceKey"])
    for key in ctx.state.messages.keys_for(sub["messageName"], sub["correlationKey"]):
        message = ctx.state.messages.get(key)
        if message is not None and message["deadline"] >= ctx.now and not ctx.state.messages.correlated(key, pi):
            _correlating(ctx, sub, key, message)
            return


def _start_instances(ctx: ProcessingContext, message_key: int, message: dict) -> None:
    """Message start events: a new instance per process, unless one already runs for this correlation key."""
    for start in ctx.state.message_starts.for_name(message["name"]):
        process_id = start["bpmnProcessId"]
        ck = message["correlationKey"]
        if ctx.state.messages.correlated(message_key, "P:" + process_id):
            continue
        if ck and ctx.state.message_starts.active_instance(process_id, ck) is not None:
            continue
        pi_key = ctx.keys.next_key()
        value = dict(start)
        value.update(
            messageKey=message_key,
            correlationKey=ck,
            variables=message["variables"],
            processInstanceKey=pi_key,
        )
        ctx.event(
            ValueType.MESSAGE_START_EVENT_SUBSCRIPTION,
            MessageStartEventSubscriptionIntent.CORRELATED,
            start["processDefinitionKey"],
            value,
        )
        events.start_instance(
            ctx, start["processDefinitionKey"], start["startEventId"], message["variables"], pi_key=pi_key
        )


# -- MESSAGE_SUBSCRIPTION commands (message partition) --------------------------------------------------------


def subscription_create(ctx: ProcessingContext, cmd: Record) -> None:
    v = cmd.value
    existing = ctx.state.message_subscriptions.get(v["elementInstanceKey"], v["messageName"])
    if existing is None:
        value = {k: val for k, val in v.items() if k not in ("state", "variables", "messageKey")}
        value["correlatingMessageKey"] = -1
        ctx.event(ValueType.MESSAGE_SUBSCRIPTION, MS.CREATED, ctx.keys.next_key(), value)
    _answer(ctx, v, PMS.CREATE, {})
    if existing is None:
        created = ctx.state.message_subscriptions.get(v["elementInstanceKey"], v["messageName"])
        if created is not None:
            _correlate_buffered(ctx, created)


def _correlating_subscription(ctx: ProcessingContext, v: dict) -> dict | None:
    """The message partition's subscription that is correlating this message, or None (the command is rejected)."""
    sub = ctx.state.message_subscriptions.get(v["elementInstanceKey"], v["messageName"])
    if sub is None or sub.get("correlatingMessageKey", -1) != v.get("messageKey"):
        ctx.reject(RejectionType.NOT_FOUND, "Expected a subscription correlating this message, but none found")
        return None
    return sub


def subscription_correlated(ctx: ProcessingContext, cmd: Record) -> None:
    """The instance took the message (MESSAGE_SUBSCRIPTION CORRELATE from its partition)."""
    v = cmd.value
    sub = _correlating_subscription(ctx, v)
    if sub is None:
        return
    ctx.event(ValueType.MESSAGE_SUBSCRIPTION, MS.CORRELATED, ctx.keys.next_key(), {**sub, **_message_part(v)})
    if not sub["interrupting"]:
        free = ctx.state.message_subscriptions.get(v["elementInstanceKey"], v["messageName"])
        if free is not None:
            _correlate_buffered(ctx, free)


def subscription_rejected(ctx: ProcessingContext, cmd: Record) -> None:
    """The instance could not take the message (its element left): forget the subscription, keep the message."""
    v = cmd.value
    sub = _correlating_subscription(ctx, v)
    if sub is None:
        return
    ctx.event(ValueType.MESSAGE_SUBSCRIPTION, MS.REJECTED, ctx.keys.next_key(), {**sub, **_message_part(v)})


def subscription_delete(ctx: ProcessingContext, cmd: Record) -> None:
    v = cmd.value
    sub = ctx.state.message_subscriptions.get(v["elementInstanceKey"], v["messageName"])
    _answer(ctx, v, PMS.DELETE, {})
    if sub is None:
        ctx.reject(RejectionType.NOT_FOUND, "Expected to delete a message subscription, but none found")
        return
    ctx.event(ValueType.MESSAGE_SUBSCRIPTION, MS.DELETED, ctx.keys.next_key(), sub)


def _message_part(v: dict) -> dict[str, Any]:
    return {"messageKey": v.get("messageKey", -1)}


def _answer(ctx: ProcessingContext, sub: dict, intent: int, extra: dict) -> None:
    value = {
        "elementInstanceKey": sub["elementInstanceKey"],
        "messageName": sub["messageName"],
        "subscriptionPartitionId": ctx.partition_id,
        **extra,
    }
    send(ctx, sub["processInstancePartitionId"], ValueType.PROCESS_MESSAGE_SUBSCRIPTION, intent, value)


# -- PROCESS_MESSAGE_SUBSCRIPTION commands (instance partition) ----------------------------------------------


def process_subscription_created(ctx: ProcessingContext, cmd: Record) -> None:
    _confirm_process_subscription(ctx, cmd, "CREATING", PMS.CREATED, "being opened")


def process_subscription_deleted(ctx: ProcessingContext, cmd: Record) -> None:
    _confirm_process_subscription(ctx, cmd, "DELETING", PMS.DELETED, "being deleted")


def _confirm_process_subscription(ctx: ProcessingContext, cmd: Record, state: str, intent: int, what: str) -> None:
    """The message partition confirmed an open or a delete: the subscription leaves its transitional state."""
    v = cmd.value
    sub = ctx.state.process_message_subscriptions.get(v["elementInstanceKey"], v["messageName"])
    if sub is None or sub["state"] != state:
        ctx.reject(RejectionType.INVALID_STATE, f"Expected a message subscription {what}, but none found")
        return
    ctx.event(ValueType.PROCESS_MESSAGE_SUBSCRIPTION, intent, ctx.keys.next_key(), events._record(sub))


def process_subscription_correlate(ctx: ProcessingContext, cmd: Record) -> None:
    """A message for a waiting element: continue the instance, then tell the message partition."""
    v = cmd.value
    eik, name, message_key = v["elementInstanceKey"], v["messageName"], v["messageKey"]
    sub = ctx.state.process_message_subscriptions.get(eik, name)
    inst = ctx.state.elements.get(eik)
    reply = {
        "elementInstanceKey": eik,
        "messageName": name,
        "messageKey": message_key,
        "processInstancePartitionId": ctx.partition_id,
    }
    partition = v.get("subscriptionPartitionId", ctx.partition_id)
    if sub is None or sub.get("messageKey") == message_key:
        # A resend after the instance took the message (an interrupting subscription is gone by then): answer
        # CORRELATE again. Rejecting would make the message partition forget the correlation and offer the message
        # to this instance a second time. Without a subscription there is nothing else it could be: a deleted one
        # was already deleted on the message partition, where this answer then finds nothing and changes nothing.
        send(ctx, partition, ValueType.MESSAGE_SUBSCRIPTION, MS.CORRELATE, reply)
        if sub is None:
            ctx.reject(RejectionType.NOT_FOUND, f"Element instance '{eik}' no longer waits for message '{name}'")
        else:
            ctx.reject(RejectionType.INVALID_STATE, f"Message '{message_key}' was already correlated to this element")
        return
    if sub["state"] == "DELETING" or not events.can_fire(ctx, inst):
        send(ctx, partition, ValueType.MESSAGE_SUBSCRIPTION, MS.REJECT, reply)
        ctx.reject(
            RejectionType.INVALID_STATE,
            f"Expected element instance '{eik}' to wait for message '{name}', but it does not",
        )
        return
    assert inst is not None
    variables = v.get("variables") or {}
    ctx.event(
        ValueType.PROCESS_MESSAGE_SUBSCRIPTION,
        PMS.CORRELATED,
        ctx.keys.next_key(),
        {**events._record(sub), "messageKey": message_key, "variables": variables},
    )
    send(ctx, partition, ValueType.MESSAGE_SUBSCRIPTION, MS.CORRELATE, reply)
    process = b.services(ctx).models.get(inst.value.process_definition_key)
    events.fire(ctx, process, inst, process.element(sub["elementId"]), variables)
