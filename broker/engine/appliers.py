"""Event appliers: the only code that changes partition state.

Live processing applies each event the moment it is written; followers and restarts apply the same events through the
same functions during replay. Replay therefore equals processing by construction (and tests check it anyway).
"""

from __future__ import annotations

from collections.abc import Callable

from broker.engine import batch_operations, identity
from broker.engine.elements.lookup import ElementLookup
from broker.engine.models import ModelCache
from broker.protocol.entity_values import IncidentValue, JobValue, VariableValue
from broker.protocol.enums import (
    AsyncRequestIntent,
    ClockIntent,
    CommandDistributionIntent,
    CompensationSubscriptionIntent,
    DecisionIntent,
    DecisionRequirementsIntent,
    FormIntent,
    IncidentIntent,
    JobBatchIntent,
    JobIntent,
    JobKind,
    MessageIntent,
    MessageStartEventSubscriptionIntent,
    MessageSubscriptionIntent,
    ProcessEventIntent,
    ProcessInstanceBusinessIdIntent,
    ProcessInstanceCreationIntent,
    ProcessInstanceIntent,
    ProcessIntent,
    ProcessMessageSubscriptionIntent,
    SignalIntent,
    SignalSubscriptionIntent,
    TimerIntent,
    UserTaskIntent,
    ValueType,
    VariableIntent,
)
from broker.protocol.keys import partition_of
from broker.protocol.record import Record
from broker.protocol.values import TENANT, ProcessInstanceValue
from broker.state.db import u64
from broker.state.element_instance import ElementInstance
from broker.state.repositories import JobState, PartitionState, UserTaskState

Applier = Callable[[PartitionState, Record], None]

PI = ProcessInstanceIntent
MS = MessageSubscriptionIntent
PMS = ProcessMessageSubscriptionIntent
MSE = MessageStartEventSubscriptionIntent
CSI = CompensationSubscriptionIntent
UT = UserTaskIntent


# How long (record time) a received signal's key is remembered. Redeliveries stop when the broadcasting partition has
# the acknowledgement, seconds after the first delivery even under failover; an hour leaves a wide margin.
SIGNAL_RECEIPT_RETENTION_MS = 3_600_000


class EventAppliers:
    """Maps (value type, intent) of an event to the function that applies it."""

    def __init__(self, models: ModelCache, elements: ElementLookup) -> None:
        self._models = models
        self._elements = elements
        self._table: dict[tuple[int, int], Applier] = {
            (ValueType.PROCESS, ProcessIntent.CREATED): self._process_created,
            (ValueType.PROCESS, ProcessIntent.DELETED): self._process_deleted,
            (ValueType.DECISION_REQUIREMENTS, DecisionRequirementsIntent.CREATED): self._drg_created,
            (ValueType.DECISION, DecisionIntent.CREATED): self._decision_created,
            (ValueType.FORM, FormIntent.CREATED): self._form_created,
            (ValueType.DECISION_REQUIREMENTS, DecisionRequirementsIntent.DELETED): self._drg_deleted,
            (ValueType.DECISION, DecisionIntent.DELETED): self._decision_deleted,
            (ValueType.FORM, FormIntent.DELETED): self._form_deleted,
            (ValueType.PROCESS_INSTANCE, PI.ELEMENT_ACTIVATING): self._element_activating,
            (ValueType.PROCESS_INSTANCE, PI.ELEMENT_ACTIVATED): self._element_state,
            (ValueType.PROCESS_INSTANCE, PI.ELEMENT_COMPLETING): self._element_completing,
            (ValueType.PROCESS_INSTANCE, PI.ELEMENT_TERMINATING): self._element_state,
            (ValueType.PROCESS_INSTANCE, PI.ELEMENT_COMPLETED): self._element_ended,
            (ValueType.PROCESS_INSTANCE, PI.ELEMENT_TERMINATED): self._element_ended,
            (ValueType.PROCESS_INSTANCE, PI.SEQUENCE_FLOW_TAKEN): self._sequence_flow_taken,
            (ValueType.VARIABLE, VariableIntent.CREATED): self._variable_set,
            (ValueType.VARIABLE, VariableIntent.UPDATED): self._variable_set,
            (ValueType.JOB, JobIntent.CREATED): self._job_created,
            (ValueType.JOB_BATCH, JobBatchIntent.ACTIVATED): self._jobs_activated,
            (ValueType.JOB, JobIntent.COMPLETED): self._job_removed,
            (ValueType.JOB, JobIntent.CANCELED): self._job_removed,
            (ValueType.JOB, JobIntent.FAILED): self._job_failed,
            (ValueType.JOB, JobIntent.TIMED_OUT): self._job_activatable,
            (ValueType.JOB, JobIntent.RECURRED_AFTER_BACKOFF): self._job_activatable,
            (ValueType.JOB, JobIntent.YIELDED): self._job_activatable,
            (ValueType.JOB, JobIntent.RETRIES_UPDATED): self._job_updated,
            (ValueType.JOB, JobIntent.TIMEOUT_UPDATED): self._job_updated,
            (ValueType.JOB, JobIntent.ERROR_THROWN): self._job_error_thrown,
            (ValueType.INCIDENT, IncidentIntent.CREATED): self._incident_created,
            (ValueType.INCIDENT, IncidentIntent.RESOLVED): self._incident_resolved,
            (ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERING): self._event_triggering,
            (ValueType.PROCESS_EVENT, ProcessEventIntent.TRIGGERED): self._event_triggered,
            (
                ValueType.PROCESS_INSTANCE_CREATION,
                ProcessInstanceCreationIntent.CREATED,
            ): self._instance_created,
            (ValueType.CLOCK, ClockIntent.PINNED): self._clock_pinned,
            (ValueType.CLOCK, ClockIntent.RESETTED): self._clock_resetted,
            (ValueType.COMMAND_DISTRIBUTION, CommandDistributionIntent.STARTED): self._distribution_started,
            (ValueType.COMMAND_DISTRIBUTION, CommandDistributionIntent.ACKNOWLEDGED): self._distribution_acknowledged,
            (ValueType.TIMER, TimerIntent.CREATED): self._timer_created,
            (ValueType.TIMER, TimerIntent.TRIGGERED): self._timer_removed,
            (ValueType.TIMER, TimerIntent.CANCELED): self._timer_removed,
            (ValueType.MESSAGE, MessageIntent.PUBLISHED): self._message_published,
            (ValueType.MESSAGE, MessageIntent.EXPIRED): self._message_expired,
            (ValueType.MESSAGE_SUBSCRIPTION, MS.CREATED): self._subscription_created,
            (ValueType.MESSAGE_SUBSCRIPTION, MS.CORRELATING): self._subscription_correlating,
            (ValueType.MESSAGE_SUBSCRIPTION, MS.CORRELATED): self._subscription_correlated,
            (ValueType.MESSAGE_SUBSCRIPTION, MS.REJECTED): self._subscription_rejected,
            (ValueType.MESSAGE_SUBSCRIPTION, MS.DELETED): self._subscription_deleted,
            (ValueType.PROCESS_MESSAGE_SUBSCRIPTION, PMS.CREATING): self._process_subscription_creating,
            (ValueType.PROCESS_MESSAGE_SUBSCRIPTION, PMS.CREATED): self._process_subscription_created,
            (ValueType.PROCESS_MESSAGE_SUBSCRIPTION, PMS.CORRELATED): self._process_subscription_correlated,
            (ValueType.PROCESS_MESSAGE_SUBSCRIPTION, PMS.DELETING): self._process_subscription_deleting,
            (ValueType.PROCESS_MESSAGE_SUBSCRIPTION, PMS.DELETED): self._process_subscription_deleted,
            (ValueType.MESSAGE_START_EVENT_SUBSCRIPTION, MSE.CREATED): self._message_start_created,
            (ValueType.MESSAGE_START_EVENT_SUBSCRIPTION, MSE.CORRELATED): self._message_start_correlated,
            (ValueType.MESSAGE_START_EVENT_SUBSCRIPTION, MSE.DELETED): self._message_start_deleted,
            (ValueType.SIGNAL_SUBSCRIPTION, SignalSubscriptionIntent.CREATED): self._signal_subscription_created,
            (ValueType.SIGNAL_SUBSCRIPTION, SignalSubscriptionIntent.DELETED): self._signal_subscription_deleted,
            (ValueType.SIGNAL, SignalIntent.BROADCASTED): self._signal_broadcasted,
            (ValueType.COMPENSATION_SUBSCRIPTION, CSI.CREATED): self._compensation_subscription_put,
            (ValueType.COMPENSATION_SUBSCRIPTION, CSI.TRIGGERED): self._compensation_subscription_put,
            (ValueType.COMPENSATION_SUBSCRIPTION, CSI.COMPLETED): self._compensation_subscription_removed,
            (ValueType.COMPENSATION_SUBSCRIPTION, CSI.DELETED): self._compensation_subscription_removed,
            (ValueType.USER_TASK, UT.CREATING): self._user_task_creating,
            (ValueType.USER_TASK, UT.CREATED): self._user_task_settled,
            (ValueType.USER_TASK, UT.ASSIGNED): self._user_task_settled,
            (ValueType.USER_TASK, UT.UPDATED): self._user_task_settled,
            (ValueType.USER_TASK, UT.ASSIGNMENT_DENIED): self._user_task_denied,
            (ValueType.USER_TASK, UT.UPDATE_DENIED): self._user_task_denied,
            (ValueType.USER_TASK, UT.COMPLETION_DENIED): self._user_task_denied,
            (ValueType.USER_TASK, UT.ASSIGNING): self._user_task_transition,
            (ValueType.USER_TASK, UT.CLAIMING): self._user_task_transition,
            (ValueType.USER_TASK, UT.UPDATING): self._user_task_transition,
            (ValueType.USER_TASK, UT.COMPLETING): self._user_task_transition,
            (ValueType.USER_TASK, UT.CANCELING): self._user_task_transition,
            (ValueType.USER_TASK, UT.CORRECTED): self._user_task_corrected,
            (ValueType.USER_TASK, UT.COMPLETED): self._user_task_removed,
            (ValueType.USER_TASK, UT.CANCELED): self._user_task_removed,
            (ValueType.ASYNC_REQUEST, AsyncRequestIntent.RECEIVED): self._async_request_received,
            (ValueType.ASYNC_REQUEST, AsyncRequestIntent.PROCESSED): self._async_request_processed,
            (
                ValueType.PROCESS_INSTANCE_BUSINESS_ID,
                ProcessInstanceBusinessIdIntent.ASSIGNED,
            ): self._business_id_assigned,
            # process instance migration (broker/engine/migration.py)
            (ValueType.PROCESS_INSTANCE, PI.ELEMENT_MIGRATED): self._element_migrated,
            (ValueType.PROCESS_INSTANCE, PI.SEQUENCE_FLOW_DELETED): self._sequence_flow_deleted,
            (ValueType.JOB, JobIntent.MIGRATED): self._job_updated,
            (ValueType.USER_TASK, UT.MIGRATED): self._user_task_migrated,
            (ValueType.INCIDENT, IncidentIntent.MIGRATED): self._incident_migrated,
            (ValueType.TIMER, TimerIntent.MIGRATED): self._timer_created,
            (ValueType.SIGNAL_SUBSCRIPTION, SignalSubscriptionIntent.MIGRATED): self._signal_subscription_migrated,
            (ValueType.PROCESS_MESSAGE_SUBSCRIPTION, PMS.MIGRATED): self._process_subscription_migrated,
            (ValueType.MESSAGE_SUBSCRIPTION, MS.MIGRATED): self._subscription_created,
        }
        self._table.update(batch_operations.APPLIERS)
        self._table.update(identity.APPLIERS)

    def apply(self, state: PartitionState, record: Record) -> None:
        fn = self._table.get((record.value_type, record.intent))
        if fn is not None:
            fn(state, record)

    # -- deployment ------------------------------------------------------------------------------------------

    def _drg_created(self, state: PartitionState, r: Record) -> None:
        state.decision_requirements.put(r.value)

    def _decision_created(self, state: PartitionState, r: Record) -> None:
        state.decisions.put(r.value)

    def _form_created(self, state: PartitionState, r: Record) -> None:
        state.forms.put(r.value)

    def _drg_deleted(self, state: PartitionState, r: Record) -> None:
        state.decision_requirements.remove(r.value)

    def _decision_deleted(self, state: PartitionState, r: Record) -> None:
        state.decisions.remove(r.value)

    def _form_deleted(self, state: PartitionState, r: Record) -> None:
        state.forms.remove(r.value)

    def _process_created(self, state: PartitionState, r: Record) -> None:
        state.processes.put(r.value)

    def _process_deleted(self, state: PartitionState, r: Record) -> None:
        state.processes.remove(r.value)
        self._models.remove(r.value["processDefinitionKey"])

    # -- element instances -----------------------------------------------------------------------------------

    def _element_activating(self, state: PartitionState, r: Record) -> None:
        v = ProcessInstanceValue.of_record(r)
        state.elements.add(ElementInstance(r.key, PI.ELEMENT_ACTIVATING, v))
        parent_key = v.flow_scope_key
        if parent_key <= 0:
            state.processes.count_instance(v.process_definition_key, 1)
            caller = state.elements.get(v.parent_element_instance_key) if v.parent_element_instance_key > 0 else None
            if caller is not None:  # a process instance started by a call activity
                state.elements.put(caller.with_called_child(r.key))
            return
        parent = state.elements.get(parent_key)
        if parent is None:
            return
        # an instance of a multi-instance activity is started by its body, not by a sequence flow
        body = self._elements.processor_of(parent.value).contains_its_own_element
        consumed = 0 if body else self._flows_consumed(state, v)
        # at most the tokens in flight: an element a modification or start instruction activates was reached by none
        # (Zeebe likewise never lets the count go below zero)
        state.elements.put(parent.after_child_activated(min(consumed, max(parent.flows, 0))))

    def _flows_consumed(self, state: PartitionState, v: ProcessInstanceValue) -> int:
        """How many taken sequence flows the activation of this element consumes (Zeebe's token counting).

        A join consumes one token from each incoming flow that has one waiting: all of them for a parallel join
        (it activates only then), the ones that arrived for an inclusive join.
        """
        processor = self._elements.processor_of(v)
        if not processor.started_by_flow:
            return 0
        if processor.reached_by_link:
            return 1  # the token its link throw event left in flight (see _element_ended)
        element = self._models.get(v.process_definition_key).element(v.element_id)
        if not element.is_join:
            return 1 if element.incoming else 0
        scope_key = v.flow_scope_key
        arrived = [f for f in element.incoming if state.joins.count(scope_key, element.id, f) > 0]
        for flow_id in arrived:
            state.joins.add(scope_key, element.id, flow_id, -1)
        return len(arrived)

    def _element_state(self, state: PartitionState, r: Record) -> None:
        inst = state.elements.get(r.key)
        if inst is not None:
            state.elements.put(inst.with_state(r.intent))

    def _element_completing(self, state: PartitionState, r: Record) -> None:
        """COMPLETING: the end execution listeners (if any) are counted from the first again."""
        inst = state.elements.get(r.key)
        if inst is not None:
            inst = inst.with_state(r.intent)
            state.elements.put(inst.with_listener_index(0) if inst.listener_index else inst)

    def _element_ended(self, state: PartitionState, r: Record) -> None:
        inst = state.elements.remove(r.key)
        state.variables.remove_scope(r.key)
        state.joins.remove_scope(r.key)
        state.event_triggers.remove(r.key)
        if inst is None:
            return
        if inst.job_key > 0:
            state.jobs.remove(inst.job_key)
        v = inst.value
        parent_key = v.flow_scope_key
        if parent_key > 0:
            parent = state.elements.get(parent_key)
            if parent is not None:
                # a completed link throw event's token jumps to the link catch event (ACTIVATE_ELEMENT follows): in
                # flight like a taken sequence flow, so the scope cannot complete before the catch event is activated
                completed = r.intent == PI.ELEMENT_COMPLETED
                jumping = completed and self._elements.processor_of(v).leaves_by_link
                state.elements.put(parent.after_child_ended(completed=completed, flows_in_flight=int(jumping)))
        else:
            state.processes.count_instance(v.process_definition_key, -1)
            if v.business_id and v.parent_element_instance_key <= 0:
                state.business_ids.remove(v.tenant_id, v.bpmn_process_id, v.business_id, r.key)
            state.awaiting_results.remove(r.key)
            state.message_starts.unlock(r.key)

    def _sequence_flow_taken(self, state: PartitionState, r: Record) -> None:
        v = r.value
        parent = state.elements.get(v["flowScopeKey"])
        if parent is None:
            return
        state.elements.put(parent.with_flows(parent.flows + 1))
        process = self._models.get(v["processDefinitionKey"])
        flow = process.flow(v["elementId"])
        target = process.element(flow.target_id)
        if target.is_join:
            state.joins.add(v["flowScopeKey"], target.id, flow.id, 1)

    # -- process instance migration ------------------------------------------------------------------------

    def _element_migrated(self, state: PartitionState, r: Record) -> None:
        """The element instance now belongs to the target definition (its counters and children stay)."""
        inst = state.elements.get(r.key)
        if inst is None:
            return
        new = ProcessInstanceValue.of_record(r)
        old = inst.value
        state.elements.put(inst._replace(value=new))
        if old.is_root and old.process_definition_key != new.process_definition_key:
            state.processes.count_instance(old.process_definition_key, -1)
            state.processes.count_instance(new.process_definition_key, 1)
            if old.business_id and old.parent_element_instance_key <= 0 and old.bpmn_process_id != new.bpmn_process_id:
                state.business_ids.remove(old.tenant_id, old.bpmn_process_id, old.business_id, r.key)
                state.business_ids.put(new.tenant_id, new.bpmn_process_id, new.business_id, r.key)

    def _sequence_flow_deleted(self, state: PartitionState, r: Record) -> None:
        """A token waiting at a join leaves it (a migration moves it to the target's flow): the reverse of taken."""
        v = r.value
        parent = state.elements.get(v["flowScopeKey"])
        if parent is None:
            return
        state.elements.put(parent.with_flows(parent.flows - 1))
        process = self._models.get(v["processDefinitionKey"])
        flow = process.flow(v["elementId"])
        target = process.element(flow.target_id)
        if target.is_join:
            state.joins.add(v["flowScopeKey"], target.id, flow.id, -1)

    def _user_task_migrated(self, state: PartitionState, r: Record) -> None:
        entry = state.user_tasks.get(r.key)
        if entry is None:
            return
        moved = {
            k: r.value[k] for k in ("processDefinitionKey", "processDefinitionVersion", "bpmnProcessId", "elementId")
        }
        entry["value"] = {**entry["value"], **moved}
        if entry["transition"] is not None:
            entry["transition"]["value"] = {**entry["transition"]["value"], **moved}
        state.user_tasks.put(r.key, entry)

    def _incident_migrated(self, state: PartitionState, r: Record) -> None:
        state.incidents.put(r.key, r.value)

    def _signal_subscription_migrated(self, state: PartitionState, r: Record) -> None:
        owner = r.value.get("catchEventInstanceKey", -1)
        for old in state.signal_subscriptions.of_owner(owner):
            if old["key"] == r.key:
                state.signal_subscriptions.remove(old)
        state.signal_subscriptions.put({**r.value, "key": r.key})

    def _process_subscription_migrated(self, state: PartitionState, r: Record) -> None:
        v = r.value
        sub = state.process_message_subscriptions.get(v["elementInstanceKey"], v["messageName"])
        if sub is None:
            return
        state.process_message_subscriptions.put({**v, "state": sub["state"]})
        if sub["state"] == "CREATING":  # not confirmed yet: the pending CREATE carries the migrated subscription
            state.outbox.put(outbox_key(b"I", v), _to_message_partition(v, MS.CREATE))

    def _business_id_assigned(self, state: PartitionState, r: Record) -> None:
        """Every active element of the instance takes the business id, so what they create from now on carries it
        (records already written keep what they had). Instances its call activities started keep theirs."""
        business_id = r.value["businessId"]
        pending = [r.key]
        while pending:
            inst = state.elements.get(pending.pop())
            if inst is None:
                continue
            state.elements.put(inst._replace(value=inst.value._replace(business_id=business_id)))
            pending.extend(state.elements.children(inst.key))
        v = r.value
        state.business_ids.put(v["tenantId"], v["bpmnProcessId"], business_id, r.key)

    def _instance_created(self, state: PartitionState, r: Record) -> None:
        """Indexed by business id at once (not when the instance's activation follows), so the next creation sees it."""
        v = r.value
        if v.get("businessId"):
            state.business_ids.put(v["tenantId"], v["bpmnProcessId"], v["businessId"], v["processInstanceKey"])
        request = r.value.get("awaitingResult")
        if request:
            state.awaiting_results.put(r.value["processInstanceKey"], request)

    # -- variables -------------------------------------------------------------------------------------------

    def _variable_set(self, state: PartitionState, r: Record) -> None:
        v = VariableValue.of_record(r)
        state.variables.put(v.scope_key, v.name, r.key, v.value)

    # -- jobs ------------------------------------------------------------------------------------------------

    def _job_created(self, state: PartitionState, r: Record) -> None:
        state.jobs.put(r.key, JobState.ACTIVATABLE, r.value)
        job = JobValue.of_record(r)
        inst = state.elements.get(job.element_instance_key)
        if inst is not None:
            inst = inst.with_job_key(r.key)
            if job.job_kind == JobKind.EXECUTION_LISTENER:  # the next listener runs after this one
                inst = inst.with_listener_index(inst.listener_index + 1)
            state.elements.put(inst)

    def _jobs_activated(self, state: PartitionState, r: Record) -> None:
        for key, job in zip(r.value["jobKeys"], r.value["jobs"], strict=True):
            stored = dict(job)
            stored["variables"] = {}
            stored.pop("userTask", None)  # told to the worker, not part of the job
            state.jobs.put(key, JobState.ACTIVATED, stored)

    def _job_removed(self, state: PartitionState, r: Record) -> None:
        state.jobs.remove(r.key)
        job = JobValue.of_record(r)
        inst = state.elements.get(job.element_instance_key)
        if inst is not None and inst.job_key == r.key:
            state.elements.put(inst.with_job_key(-1))
        if r.intent == JobIntent.COMPLETED and job.job_kind == "TASK_LISTENER":
            # one more listener of the user task's transition is done
            task_key = state.user_tasks.for_element(job.element_instance_key)
            entry = state.user_tasks.get(task_key) if task_key is not None else None
            if task_key is not None and entry is not None and entry["transition"] is not None:
                entry["transition"]["listener"] += 1
                state.user_tasks.put(task_key, entry)

    def _job_failed(self, state: PartitionState, r: Record) -> None:
        job = JobValue.of_record(r)
        if job.retries > 0 and job.recurring_time <= 0:
            state.jobs.put(r.key, JobState.ACTIVATABLE, _stored_job(r.value))
        else:
            state.jobs.put(r.key, JobState.FAILED, _stored_job(r.value))

    def _job_activatable(self, state: PartitionState, r: Record) -> None:
        state.jobs.put(r.key, JobState.ACTIVATABLE, _stored_job(r.value))

    def _job_updated(self, state: PartitionState, r: Record) -> None:
        job = state.jobs.get(r.key)
        if job is not None:
            state.jobs.put(r.key, job["state"], _stored_job(r.value))

    def _job_error_thrown(self, state: PartitionState, r: Record) -> None:
        state.jobs.put(r.key, JobState.ERROR_THROWN, _stored_job(r.value))

    # -- incidents -------------------------------------------------------------------------------------------

    def _incident_created(self, state: PartitionState, r: Record) -> None:
        state.incidents.put(r.key, r.value)
        incident = IncidentValue.of_record(r)
        if incident.error_type == "EXTRACT_VALUE_ERROR":
            # as in Zeebe: resolving it runs the listeners of the current event type from the first again
            inst = state.elements.get(incident.element_instance_key)
            if inst is not None and inst.listener_index:
                state.elements.put(inst.with_listener_index(0))

    def _incident_resolved(self, state: PartitionState, r: Record) -> None:
        state.incidents.remove(r.key)
        job_key = IncidentValue.of_record(r).job_key
        if job_key > 0:
            job = state.jobs.get(job_key)
            if (
                job is not None
                and job["state"] in (JobState.FAILED, JobState.ERROR_THROWN)
                and job["value"]["retries"] > 0
            ):
                value = JobValue.from_dict(job["value"])._replace(recurring_time=-1)
                state.jobs.put(job_key, JobState.ACTIVATABLE, value.to_dict())

    # -- the stream clock -----------------------------------------------------------------------------------

    def _clock_pinned(self, state: PartitionState, r: Record) -> None:
        state.meta.pin_clock(r.value["time"])

    def _clock_resetted(self, state: PartitionState, r: Record) -> None:
        state.meta.reset_clock()

    # -- command distribution -------------------------------------------------------------------------------

    def _distribution_started(self, state: PartitionState, r: Record) -> None:
        state.distributions.put(r.key, r.value["partitionId"], r.value)

    def _distribution_acknowledged(self, state: PartitionState, r: Record) -> None:
        state.distributions.remove(r.key, r.value["partitionId"])

    # -- event triggers (a caught error waiting for its scope to terminate) ----------------------------------

    def _event_triggering(self, state: PartitionState, r: Record) -> None:
        state.event_triggers.put(r.value["scopeKey"], r.value)

    def _event_triggered(self, state: PartitionState, r: Record) -> None:
        state.event_triggers.remove(r.value["scopeKey"])
        state.event_triggers.put(r.key, r.value)

    # -- timers ----------------------------------------------------------------------------------------------

    def _timer_created(self, state: PartitionState, r: Record) -> None:
        state.timers.put(r.key, r.value)

    def _timer_removed(self, state: PartitionState, r: Record) -> None:
        state.timers.remove(r.key)

    # -- messages (the message partition's side) -------------------------------------------------------------

    def _message_published(self, state: PartitionState, r: Record) -> None:
        state.messages.put(r.key, r.value)

    def _message_expired(self, state: PartitionState, r: Record) -> None:
        state.messages.remove(r.key)

    def _subscription_created(self, state: PartitionState, r: Record) -> None:
        state.message_subscriptions.put(r.value)

    def _subscription_correlating(self, state: PartitionState, r: Record) -> None:
        v = r.value
        sub = state.message_subscriptions.get(v["elementInstanceKey"], v["messageName"])
        if sub is None:
            return
        sub["correlatingMessageKey"] = v["messageKey"]
        state.message_subscriptions.put(sub)
        state.messages.mark_correlated(v["messageKey"], str(v["processInstanceKey"]))
        state.outbox.put(
            outbox_key(b"M", v),
            {
                "partitionId": v["processInstancePartitionId"],
                "valueType": ValueType.PROCESS_MESSAGE_SUBSCRIPTION.name,
                "intent": PMS.CORRELATE.name,
                "value": {
                    "elementInstanceKey": v["elementInstanceKey"],
                    "messageName": v["messageName"],
                    "messageKey": v["messageKey"],
                    "variables": v.get("variables") or {},
                    "subscriptionPartitionId": v["subscriptionPartitionId"],
                },
            },
        )

    def _subscription_correlated(self, state: PartitionState, r: Record) -> None:
        v = r.value
        state.outbox.remove(outbox_key(b"M", v))
        if v["interrupting"]:
            state.message_subscriptions.remove(v["elementInstanceKey"], v["messageName"])
            return
        sub = state.message_subscriptions.get(v["elementInstanceKey"], v["messageName"])
        if sub is not None:
            sub["correlatingMessageKey"] = -1
            state.message_subscriptions.put(sub)

    def _subscription_rejected(self, state: PartitionState, r: Record) -> None:
        v = r.value
        state.outbox.remove(outbox_key(b"M", v))
        state.message_subscriptions.remove(v["elementInstanceKey"], v["messageName"])
        state.messages.unmark_correlated(v["messageKey"], str(v["processInstanceKey"]))

    def _subscription_deleted(self, state: PartitionState, r: Record) -> None:
        v = r.value
        state.outbox.remove(outbox_key(b"M", v))
        state.message_subscriptions.remove(v["elementInstanceKey"], v["messageName"])

    def _message_start_created(self, state: PartitionState, r: Record) -> None:
        state.message_starts.put(r.value)

    def _message_start_deleted(self, state: PartitionState, r: Record) -> None:
        state.message_starts.remove(r.value)

    def _message_start_correlated(self, state: PartitionState, r: Record) -> None:
        v = r.value
        state.messages.mark_correlated(v["messageKey"], "P:" + v["bpmnProcessId"])
        if v.get("correlationKey"):
            tenant = v.get("tenantId") or TENANT
            state.message_starts.lock(tenant, v["bpmnProcessId"], v["correlationKey"], v["processInstanceKey"])

    # -- message subscriptions (the process instance's side) -------------------------------------------------

    def _process_subscription_creating(self, state: PartitionState, r: Record) -> None:
        v = r.value
        state.process_message_subscriptions.put({**v, "state": "CREATING"})
        state.outbox.put(outbox_key(b"I", v), _to_message_partition(v, MS.CREATE))

    def _process_subscription_created(self, state: PartitionState, r: Record) -> None:
        v = r.value
        sub = state.process_message_subscriptions.get(v["elementInstanceKey"], v["messageName"])
        if sub is not None and sub["state"] == "CREATING":
            sub["state"] = "CREATED"
            state.process_message_subscriptions.put(sub)
        state.outbox.remove(outbox_key(b"I", v))

    def _process_subscription_correlated(self, state: PartitionState, r: Record) -> None:
        v = r.value
        if v["interrupting"]:
            state.process_message_subscriptions.remove(v["elementInstanceKey"], v["messageName"])
            state.outbox.remove(outbox_key(b"I", v))
            return
        sub = state.process_message_subscriptions.get(v["elementInstanceKey"], v["messageName"])
        if sub is not None:
            sub["messageKey"] = v["messageKey"]
            state.process_message_subscriptions.put(sub)

    def _process_subscription_deleting(self, state: PartitionState, r: Record) -> None:
        v = r.value
        sub = state.process_message_subscriptions.get(v["elementInstanceKey"], v["messageName"])
        if sub is not None:
            sub["state"] = "DELETING"
            state.process_message_subscriptions.put(sub)
        state.outbox.put(outbox_key(b"I", v), _to_message_partition(v, MS.DELETE))

    def _process_subscription_deleted(self, state: PartitionState, r: Record) -> None:
        v = r.value
        state.process_message_subscriptions.remove(v["elementInstanceKey"], v["messageName"])
        state.outbox.remove(outbox_key(b"I", v))

    # -- signals ---------------------------------------------------------------------------------------------

    def _signal_subscription_created(self, state: PartitionState, r: Record) -> None:
        state.signal_subscriptions.put({**r.value, "key": r.key})

    def _signal_subscription_deleted(self, state: PartitionState, r: Record) -> None:
        state.signal_subscriptions.remove(r.value)

    def _signal_broadcasted(self, state: PartitionState, r: Record) -> None:
        origin = partition_of(r.key)
        if origin != r.partition_id:  # broadcast elsewhere: remembered so a redelivery triggers nothing twice
            state.signal_receipts.put(r.key, origin, r.timestamp)
        state.signal_receipts.prune(r.timestamp - SIGNAL_RECEIPT_RETENTION_MS)

    # -- compensation (a completed activity that can still be undone) -----------------------------------------

    def _compensation_subscription_put(self, state: PartitionState, r: Record) -> None:
        state.compensation_subscriptions.put(r.key, r.value)

    def _compensation_subscription_removed(self, state: PartitionState, r: Record) -> None:
        state.compensation_subscriptions.remove(r.value["processInstanceKey"], r.key)

    # -- native user tasks ------------------------------------------------------------------------------------

    def _user_task_creating(self, state: PartitionState, r: Record) -> None:
        v = r.value
        state.user_tasks.put(
            r.key,
            {
                "state": UserTaskState.CREATING,
                "value": {**v, "assignee": ""},
                "transition": {"value": v, "listener": 0},
            },
        )

    def _user_task_settled(self, state: PartitionState, r: Record) -> None:
        state.user_tasks.put(r.key, {"state": UserTaskState.CREATED, "value": r.value, "transition": None})

    def _user_task_denied(self, state: PartitionState, r: Record) -> None:
        entry = state.user_tasks.get(r.key)
        if entry is not None:
            state.user_tasks.put(r.key, {**entry, "state": UserTaskState.CREATED, "transition": None})

    def _user_task_transition(self, state: PartitionState, r: Record) -> None:
        entry = state.user_tasks.get(r.key)
        if entry is not None:
            lifecycle = UT(r.intent).name
            state.user_tasks.put(r.key, {**entry, "state": lifecycle, "transition": {"value": r.value, "listener": 0}})

    def _user_task_corrected(self, state: PartitionState, r: Record) -> None:
        entry = state.user_tasks.get(r.key)
        if entry is None or entry["transition"] is None:
            return
        before = entry["transition"]["value"]
        changed = list(before.get("changedAttributes") or [])
        changed += [name for name in r.value.get("changedAttributes") or [] if name not in changed]
        entry["transition"]["value"] = {**r.value, "changedAttributes": changed}
        state.user_tasks.put(r.key, entry)

    def _user_task_removed(self, state: PartitionState, r: Record) -> None:
        state.user_tasks.remove(r.key)

    def _async_request_received(self, state: PartitionState, r: Record) -> None:
        state.async_requests.put(r.value["scopeKey"], {**r.value, "key": r.key})

    def _async_request_processed(self, state: PartitionState, r: Record) -> None:
        state.async_requests.remove(r.value["scopeKey"])


def outbox_key(side: bytes, v: dict) -> bytes:
    """One pending command per subscription and side: ``I`` instance → message partition, ``M`` the reverse."""
    return side + u64(v["elementInstanceKey"]) + v["messageName"].encode()


def _to_message_partition(v: dict, intent: MessageSubscriptionIntent) -> dict:
    return {
        "partitionId": v["subscriptionPartitionId"],
        "valueType": ValueType.MESSAGE_SUBSCRIPTION.name,
        "intent": intent.name,
        "value": {k: val for k, val in v.items() if k != "state"},
    }


def _stored_job(value: dict) -> dict:
    """Job state never keeps the variables fetched for a worker: they belong to the activation, not the job."""
    if value.get("variables"):
        value = dict(value)
        value["variables"] = {}
    return value
