"""DeleteResource of process definitions on an in-process partition: refused while instances run, PROCESS DELETING
and DELETED, the previous version the latest again with its start events (timer, message, signal) listening again,
versions never given twice, and replay of all of it."""

from __future__ import annotations

from pathlib import Path

from broker.engine.behaviors import TENANT
from broker.protocol.enums import (
    DeploymentIntent,
    MessageStartEventSubscriptionIntent,
    ProcessInstanceCreationIntent,
    ProcessIntent,
    RecordType,
    RejectionType,
    ResourceDeletionIntent,
    SignalSubscriptionIntent,
    TimerIntent,
    ValueType,
)
from broker.protocol.record import Record
from broker.state.repositories import PartitionState
from broker.tools.inspect import iter_records
from tests.harness import BPMN
from tests.unit.test_events import publish
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live

START_EVENTS = BPMN / "start-events"


def _starts(process_id: str, marker: str) -> bytes:
    """A process started by a timer (far future cycle), a message and a signal; ``marker`` makes a new version."""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d" targetNamespace="x">
  <bpmn:process id="{process_id}" name="{marker}" isExecutable="true">
    <bpmn:startEvent id="by-timer">
      <bpmn:timerEventDefinition><bpmn:timeCycle>R/PT1H</bpmn:timeCycle></bpmn:timerEventDefinition>
    </bpmn:startEvent>
    <bpmn:startEvent id="by-message"><bpmn:messageEventDefinition messageRef="m" /></bpmn:startEvent>
    <bpmn:startEvent id="by-signal"><bpmn:signalEventDefinition signalRef="s" /></bpmn:startEvent>
    <bpmn:startEvent id="none" />
    <bpmn:sequenceFlow id="f1" sourceRef="by-timer" targetRef="work" />
    <bpmn:sequenceFlow id="f2" sourceRef="by-message" targetRef="work" />
    <bpmn:sequenceFlow id="f3" sourceRef="by-signal" targetRef="work" />
    <bpmn:sequenceFlow id="f4" sourceRef="none" targetRef="work" />
    <bpmn:serviceTask id="work">
      <bpmn:extensionElements><zeebe:taskDefinition type="work-{process_id}" /></bpmn:extensionElements>
    </bpmn:serviceTask>
  </bpmn:process>
  <bpmn:message id="m" name="start-{process_id}" />
  <bpmn:signal id="s" name="signal-{process_id}" />
</bpmn:definitions>""".encode()


async def _deploy(d: Driver, name: str, data: bytes) -> dict:
    value = {"resources": [{"resourceName": name, "resource": data}]}
    rec = accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, value))
    return rec.value["processesMetadata"][0]


async def _delete(d: Driver, key: int) -> Record:
    return await d.send(ValueType.RESOURCE_DELETION, ResourceDeletionIntent.DELETE, {"resourceKey": key})


async def _create_by_key(d: Driver, key: int) -> Record:
    value = {"bpmnProcessId": "", "version": -1, "processDefinitionKey": key, "variables": {}, "tenantId": TENANT}
    return await d.send(ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATE, value)


def _listening(d: Driver, process_id: str, *keys: int) -> dict[str, set[int]]:
    """Which of the definitions ``keys`` each kind of start event of ``process_id`` is subscribed for."""

    def read(s: PartitionState) -> dict[str, set[int]]:
        timers = {k for k in keys if s.timers.of_owner(k)}
        messages = {m["processDefinitionKey"] for m in s.message_starts.for_process(TENANT, process_id)}
        signals = {
            sub["processDefinitionKey"] for sub in s.signal_subscriptions.for_name(TENANT, f"signal-{process_id}")
        }
        return {"timer": timers, "message": messages, "signal": signals}

    return d.read(read)


async def test_deleting_process_versions(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    v1 = await _deploy(d, "starts.bpmn", _starts("starts", "one"))
    v2 = await _deploy(d, "starts.bpmn", _starts("starts", "two"))
    assert (v1["version"], v2["version"]) == (1, 2)
    k1, k2 = v1["processDefinitionKey"], v2["processDefinitionKey"]
    assert _listening(d, "starts", k1, k2) == {"timer": {k2}, "message": {k2}, "signal": {k2}}

    # an instance of version 2 runs: deleting it is refused, as in Zeebe 8.8
    running = accepted(await d.create("starts", {}))
    assert running.value["processDefinitionKey"] == k2
    refused = await _delete(d, k2)
    assert refused.rejection_type == RejectionType.INVALID_STATE
    assert (
        refused.rejection_reason == f"Expected to delete resource with key `{k2}` but there are still running instances"
    )
    accepted(await d.cancel(running.key))
    await d.settle()

    deleted = accepted(await _delete(d, k2))
    assert deleted.intent == ResourceDeletionIntent.DELETED and deleted.value["resourceKey"] == k2
    # version 1 is the latest again and its start events listen again
    assert _listening(d, "starts", k1, k2) == {"timer": {k1}, "message": {k1}, "signal": {k1}}
    by_id = accepted(await d.create("starts", {}))
    assert by_id.value["processDefinitionKey"] == k1
    gone = await _create_by_key(d, k2)
    assert gone.rejection_type == RejectionType.NOT_FOUND
    await publish(d, "start-starts", "")
    started = [r for r in iter_records(d.directory) if r.value_type == ValueType.MESSAGE_START_EVENT_SUBSCRIPTION]
    assert started[-1].intent == MessageStartEventSubscriptionIntent.CORRELATED
    assert started[-1].value["processDefinitionKey"] == k1
    # a deleted version's number is never given again
    v3 = await _deploy(d, "starts.bpmn", _starts("starts", "three"))
    assert v3["version"] == 3
    k3 = v3["processDefinitionKey"]
    assert _listening(d, "starts", k1, k2, k3) == {"timer": {k3}, "message": {k3}, "signal": {k3}}

    # deleting an older version changes nothing that listens
    other = await _deploy(d, "other.bpmn", _starts("other", "one"))
    again = await _delete(d, k2)
    assert again.rejection_type == RejectionType.NOT_FOUND
    assert again.rejection_reason == f"Expected to delete resource but no resource found with key `{k2}`"
    unknown = await _delete(d, 2**50)
    assert unknown.rejection_type == RejectionType.NOT_FOUND
    # version 1 still has the instances created above
    assert (await _delete(d, k1)).rejection_type == RejectionType.INVALID_STATE
    await d.close()
    directory = tmp_path / "p" / "1"
    events = [r for r in iter_records(directory) if r.record_type == RecordType.EVENT]
    process_events = [(r.intent, r.key) for r in events if r.value_type == ValueType.PROCESS and r.intent != 0]
    assert process_events == [(ProcessIntent.DELETING, k2), (ProcessIntent.DELETED, k2)]
    deletion = [r.intent for r in events if r.value_type == ValueType.RESOURCE_DELETION]
    assert deletion == [ResourceDeletionIntent.DELETING, ResourceDeletionIntent.DELETED]
    closed = {
        (r.value_type, r.intent)
        for r in events
        if r.value.get("processDefinitionKey") == k2
        and r.value_type in (ValueType.TIMER, ValueType.MESSAGE_START_EVENT_SUBSCRIPTION, ValueType.SIGNAL_SUBSCRIPTION)
    }
    assert {
        (ValueType.TIMER, TimerIntent.CANCELED),
        (ValueType.MESSAGE_START_EVENT_SUBSCRIPTION, MessageStartEventSubscriptionIntent.DELETED),
        (ValueType.SIGNAL_SUBSCRIPTION, SignalSubscriptionIntent.DELETED),
    } <= closed
    assert other["version"] == 1
    check_replay_equals_live(directory, tmp_path)
