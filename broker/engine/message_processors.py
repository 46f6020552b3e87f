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

MESSAGE_CORRELATION CORRELATE takes the same way without buffering: the message partition writes the message, offers
it to what waits now and expires it in the same round; the request waits (ASYNC_REQUEST) for the instance partition's
MESSAGE_SUBSCRIPTION CORRELATE (answered CORRELATED), or REJECT or DELETE (the element left: NOT_CORRELATED once no
instance is left to take it).

Commands that must arrive wait in the outbox (state) until the answer that acknowledges them is processed; the
leader resends them meanwhile, and every receiver is idempotent. Answers themselves are sent once after commit: a lost
answer makes the other side resend its command, which is answered again.
"""

from __future__ import annotations

from typing import Any

from broker.engine import behaviors as b
from broker.engine import events
from broker.engine.context import ProcessingContext
from broker.protocol.entity_values import MessageValue
from broker.protocol.enums import (
    AsyncRequestIntent,
    MessageCorrelationIntent,
    MessageIntent,
    MessageStartEventSubscriptionIntent,
    MessageSubscriptionIntent,
    ProcessMessageSubscriptionIntent,
    RecordType,
    RejectionType,
    ValueType,
)
from broker.protocol.limits import duration_problem
from broker.protocol.record import Record, RequestMetadata

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
    tenant = b.tenant_of(v)
    if not b.authorized(ctx, "MESSAGE", "CREATE", tenant=tenant, request="PublishMessage"):
        return
    if not name:
        ctx.reject(RejectionType.INVALID_ARGUMENT, "Expected to publish a message with a name, but the name is empty")
        return
    problem = duration_problem("timeToLive", ttl, minimum=0)
    if problem:
        ctx.reject(RejectionType.INVALID_ARGUMENT, problem)
        return
    if message_id and ctx.state.messages.key_of_id(tenant, name, correlation_key, message_id) is not None:
        ctx.reject(
            RejectionType.ALREADY_EXISTS,
            f"Expected to publish a new message with id '{message_id}', but a message with that id was already "
            "published",
        )
        return
    key = ctx.keys.next_key()
    message = MessageValue(
        name=name,
        correlation_key=correlation_key,
        time_to_live=ttl,
        message_id=message_id,
        variables=v.get("variables") or {},
        deadline=ctx.now + max(ttl, 0),
        tenant_id=tenant,
    )
    rec = ctx.typed_event(ValueType.MESSAGE, MessageIntent.PUBLISHED, key, message)
    ctx.respond(rec)
    for sub in _free_subscriptions(ctx, key, message):
        _correlating(ctx, sub, key, message)
    for start in _startable(ctx, key, message)[0]:
        _start_instance(ctx, start, key, message)
    if ttl <= 0:
        ctx.typed_event(ValueType.MESSAGE, MessageIntent.EXPIRED, key, message)


def expire(ctx: ProcessingContext, cmd: Record) -> None:
    """Written by the leader's checker when a message's time to live passed; re-checked here."""
    stored = ctx.state.messages.get(cmd.key)
    if stored is None:
        ctx.reject(RejectionType.NOT_FOUND, f"Expected to expire message with key '{cmd.key}', but none found")
        return
    message = MessageValue.from_dict(stored)
    if message.deadline > ctx.now:
        ctx.reject(RejectionType.INVALID_STATE, f"Message '{cmd.key}' is still alive (deadline {message.deadline})")
        return
    ctx.typed_event(ValueType.MESSAGE, MessageIntent.EXPIRED, cmd.key, message)


def _correlating(ctx: ProcessingContext, sub: dict, message_key: int, message: MessageValue) -> None:
    """Hand ``message`` to the subscription's process instance (the outbox delivers it until answered)."""
    value = dict(sub)
    value.update(messageKey=message_key, variables=message.variables)
    ctx.event(ValueType.MESSAGE_SUBSCRIPTION, MS.CORRELATING, ctx.keys.next_key(), value)


def _correlate_buffered(ctx: ProcessingContext, sub: dict) -> None:
    """A subscription became free: the oldest buffered message for it that this instance has not had yet."""
    pi = str(sub["processInstanceKey"])
    for key in ctx.state.messages.keys_for(b.tenant_of(sub), sub["messageName"], sub["correlationKey"]):
        stored = ctx.state.messages.get(key)
        message = MessageValue.from_dict(stored) if stored is not None else None
        if message is not None and message.deadline >= ctx.now and not ctx.state.messages.correlated(key, pi):
            _correlating(ctx, sub, key, message)
            return


def _free_subscriptions(ctx: ProcessingContext, message_key: int | None, message: MessageValue) -> list[dict]:
    """The subscriptions ``message`` correlates to: one per process instance, none busy with another message
    (``message_key`` None: a message not written yet, which reached nothing so far)."""
    free: list[dict] = []
    seen: set[int] = set()
    subscriptions = ctx.state.message_subscriptions
    for sub in subscriptions.for_correlation(message.tenant_id, message.name, message.correlation_key):
        pi = sub["processInstanceKey"]
        if sub.get("correlatingMessageKey", -1) > 0 or pi in seen:
            continue
        if message_key is not None and ctx.state.messages.correlated(message_key, str(pi)):
            continue
        seen.add(pi)
        free.append(sub)
    return free


def _startable(ctx: ProcessingContext, message_key: int | None, message: MessageValue) -> tuple[list[dict], list[str]]:
    """Message start events ``message`` starts an instance of (one per process), and the processes it cannot start
    because an instance started for this correlation key still runs."""
    starts: list[dict] = []
    blocked: list[str] = []
    for start in ctx.state.message_starts.for_name(message.tenant_id, message.name):
        process_id = start["bpmnProcessId"]
        ck = message.correlation_key
        if message_key is not None and ctx.state.messages.correlated(message_key, "P:" + process_id):
            continue
        if ck and ctx.state.message_starts.active_instance(message.tenant_id, process_id, ck) is not None:
            blocked.append(process_id)
            continue
        starts.append(start)
    return starts, blocked


def _start_instance(ctx: ProcessingContext, start: dict, message_key: int, message: MessageValue) -> int:
    """A new instance of the message start event's process; its key."""
    pi_key = ctx.keys.next_key()
    value = dict(start)
    value.update(
        messageKey=message_key,
        correlationKey=message.correlation_key,
        variables=message.variables,
        processInstanceKey=pi_key,
    )
    ctx.event(
        ValueType.MESSAGE_START_EVENT_SUBSCRIPTION,
        MessageStartEventSubscriptionIntent.CORRELATED,
        start["processDefinitionKey"],
        value,
    )
    events.start_instance(ctx, start["processDefinitionKey"], start["startEventId"], message.variables, pi_key=pi_key)
    return pi_key


# -- MESSAGE_CORRELATION CORRELATE (message partition) --------------------------------------------------------


def correlate(ctx: ProcessingContext, cmd: Record) -> None:
    """Correlate a message to what waits for it now, never buffering it; the requester learns which instance took it.

    A message start event answers at once. A waiting element may live on another partition: the request is
    remembered (ASYNC_REQUEST) and answered when that partition confirms (MESSAGE_SUBSCRIPTION CORRELATE) or refuses.
    """
    v = cmd.value
    name = v.get("name", "")
    if not b.authorized(ctx, "MESSAGE", "CREATE", tenant=b.tenant_of(v), request="CorrelateMessage"):
        return
    if not name:
        ctx.reject(RejectionType.INVALID_ARGUMENT, "Expected to correlate a message with a name, but the name is empty")
        return
    message = MessageValue(
        name=name,
        correlation_key=str(v.get("correlationKey", "")),
        time_to_live=0,
        message_id="",
        variables=v.get("variables") or {},
        deadline=ctx.now,
        tenant_id=b.tenant_of(v),
    )
    # a new message has correlated to nothing yet; its key is taken only once it is written (replay restores the
    # key counter from written records)
    subscriptions = _free_subscriptions(ctx, None, message)
    starts, blocked = _startable(ctx, None, message)
    if not subscriptions and not starts:
        reason = (
            f"Expected to find subscription for message with name '{name}' and correlation key "
            f"'{message.correlation_key}', but none was found."
        )
        if blocked:
            reason = (
                f"Expected to find subscription for message with name '{name}' and correlation key "
                f"'{message.correlation_key}', but no active subscription was found. A process instance with this "
                "correlation key is already active for a message start event with this message name in process IDs "
                f"{sorted(blocked)}. Only one active process instance per correlation key is allowed for message "
                "start events."
            )
        ctx.reject(RejectionType.NOT_FOUND, reason)
        return
    message_key = ctx.keys.next_key()
    ctx.typed_event(ValueType.MESSAGE, MessageIntent.PUBLISHED, message_key, message)
    correlation = {
        "name": name,
        "correlationKey": message.correlation_key,
        "variables": message.variables,
        "tenantId": message.tenant_id,
        "messageKey": message_key,
        "processInstanceKey": -1,
        "processDefinitionKey": -1,
    }
    for sub in subscriptions:
        _correlating(ctx, sub, message_key, message)
    started = [(start, _start_instance(ctx, start, message_key, message)) for start in starts]
    if started:
        start, pi_key = started[0]
        correlation.update(processInstanceKey=pi_key, processDefinitionKey=start["processDefinitionKey"])
        rec = ctx.event(ValueType.MESSAGE_CORRELATION, MessageCorrelationIntent.CORRELATED, message_key, correlation)
        ctx.respond(rec)
    elif cmd.request is not None:
        ctx.event(
            ValueType.ASYNC_REQUEST,
            AsyncRequestIntent.RECEIVED,
            ctx.keys.next_key(),
            {
                "scopeKey": message_key,
                "valueType": ValueType.MESSAGE_CORRELATION.name,
                "intent": MessageCorrelationIntent.CORRELATE.name,
                "requestId": cmd.request.request_id,
                "requestStreamId": cmd.request.stream_id,
                "operationReference": -1,
                "correlation": correlation,
            },
        )
    ctx.typed_event(ValueType.MESSAGE, MessageIntent.EXPIRED, message_key, message)


def _answer_correlation(ctx: ProcessingContext, sub: dict, message_key: int, *, correlated: bool) -> None:
    """A waiting correlation request learns its outcome: the first instance that took the message, or, once every
    instance it was offered to refused it, that nothing took it."""
    request = ctx.state.async_requests.get(message_key)
    if request is None or request.get("valueType") != ValueType.MESSAGE_CORRELATION.name:
        return
    correlation = dict(request["correlation"])
    if correlated:
        correlation.update(
            processInstanceKey=sub["processInstanceKey"], processDefinitionKey=sub.get("processDefinitionKey", -1)
        )
        rec = ctx.event(ValueType.MESSAGE_CORRELATION, MessageCorrelationIntent.CORRELATED, message_key, correlation)
        ctx.respond(rec, RequestMetadata(request["requestStreamId"], request["requestId"]))
    else:
        still_offered = any(
            other.get("correlatingMessageKey", -1) == message_key
            for other in ctx.state.message_subscriptions.for_correlation(
                b.tenant_of(correlation), correlation["name"], correlation["correlationKey"]
            )
        )
        if still_offered:
            return
        rec = ctx.event(
            ValueType.MESSAGE_CORRELATION, MessageCorrelationIntent.NOT_CORRELATED, message_key, correlation
        )
        ctx.respond(_not_found(ctx, rec), RequestMetadata(request["requestStreamId"], request["requestId"]))
    ctx.event(ValueType.ASYNC_REQUEST, AsyncRequestIntent.PROCESSED, request["key"], request)


def _not_found(ctx: ProcessingContext, event: Record) -> Record:
    """The answer to a correlation request whose waiting elements all left before the message reached them."""
    v = event.value
    return Record(
        position=event.position,
        key=event.key,
        record_type=RecordType.COMMAND_REJECTION,
        value_type=ValueType.MESSAGE_CORRELATION,
        intent=int(MessageCorrelationIntent.CORRELATE),
        timestamp=event.timestamp,
        value=v,
        source_position=event.source_position,
        partition_id=ctx.partition_id,
        rejection_type=RejectionType.NOT_FOUND,
        rejection_reason=(
            f"Expected to find subscription for message with name '{v['name']}' and correlation key "
            f"'{v['correlationKey']}', but none was found."
        ),
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
    _answer_correlation(ctx, sub, v["messageKey"], correlated=True)
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
    _answer_correlation(ctx, sub, v["messageKey"], correlated=False)


def subscription_delete(ctx: ProcessingContext, cmd: Record) -> None:
    v = cmd.value
    sub = ctx.state.message_subscriptions.get(v["elementInstanceKey"], v["messageName"])
    _answer(ctx, v, PMS.DELETE, {})
    if sub is None:
        ctx.reject(RejectionType.NOT_FOUND, "Expected to delete a message subscription, but none found")
        return
    ctx.event(ValueType.MESSAGE_SUBSCRIPTION, MS.DELETED, ctx.keys.next_key(), sub)
    if sub.get("correlatingMessageKey", -1) > 0:  # the element left while a message was on its way to it
        _answer_correlation(ctx, sub, sub["correlatingMessageKey"], correlated=False)


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
