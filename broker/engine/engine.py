"""The engine: one processor per (value type, command intent), found through a table.

The engine knows nothing about logs, transactions or networks. The stream processor hands it one command at a time
with a :class:`ProcessingContext`; the engine writes events, follow-up commands, rejections and responses into it.
"""

from __future__ import annotations

from collections.abc import Callable

from broker import feel
from broker.engine import (
    batch_operations,
    clock,
    events,
    identity,
    identity_setup,
    migration,
    modification,
    resource_deletion,
    signals,
    user_tasks,
)
from broker.engine import decision_processors as decisions
from broker.engine import instance_processors as instances
from broker.engine import job_processors as jobs
from broker.engine import message_processors as messages
from broker.engine.appliers import EventAppliers
from broker.engine.behaviors import DEFAULT_MAX_PROCESS_DEPTH, Services
from broker.engine.context import ProcessingContext
from broker.engine.deployment_limits import DeploymentLimits
from broker.engine.elements import commands as elements
from broker.engine.elements import registry
from broker.engine.expressions import ExpressionEvaluator
from broker.engine.job_streams import JobStreams
from broker.engine.models import ModelCache
from broker.protocol.enums import (
    ClockIntent,
    CommandDistributionIntent,
    DecisionEvaluationIntent,
    DeploymentIntent,
    IncidentIntent,
    JobBatchIntent,
    JobIntent,
    MessageCorrelationIntent,
    MessageIntent,
    MessageSubscriptionIntent,
    ProcessInstanceBusinessIdIntent,
    ProcessInstanceCreationIntent,
    ProcessInstanceIntent,
    ProcessInstanceMigrationIntent,
    ProcessInstanceModificationIntent,
    ProcessMessageSubscriptionIntent,
    RejectionType,
    ResourceDeletionIntent,
    SignalIntent,
    TimerIntent,
    UserTaskIntent,
    ValueType,
    VariableDocumentIntent,
)
from broker.protocol.record import Record
from broker.state.repositories import PartitionState

Processor = Callable[[ProcessingContext, Record], None]


class Engine:
    """Routes commands to processors and owns what they share (models, expressions, job streams, appliers)."""

    # What the stream's step budget counts as one step of a process instance (broker/stream/step_budget.py): an
    # element activation. The stream layer knows records and chains, not which command moves an instance on.
    STEP_COMMAND: tuple[ValueType, int] = (ValueType.PROCESS_INSTANCE, int(ProcessInstanceIntent.ACTIVATE_ELEMENT))

    def __init__(
        self,
        state: PartitionState,
        job_streams: JobStreams | None = None,
        *,
        partitions_count: int = 1,
        max_message_size: int = 4 * 1024 * 1024,
        expression_limits: feel.Limits = feel.DEFAULT_LIMITS,
        deployment_limits: DeploymentLimits | None = None,
        max_process_depth: int = DEFAULT_MAX_PROCESS_DEPTH,
        business_id_uniqueness: bool = False,
        authorizations: bool = False,
    ) -> None:
        self.state = state
        # a response message also carries its own framing: jobs take at most this much of it
        self.max_batch_bytes = max_message_size - 64 * 1024
        # No expression result may be larger than a message: no worker could be sent the variable
        expressions = ExpressionEvaluator(limits=expression_limits, max_result_size=max_message_size)
        self.models = ModelCache(lambda key: state.processes.get(key))
        self.appliers = EventAppliers(self.models, registry)
        self.job_streams = job_streams if job_streams is not None else JobStreams()
        self.services = Services(
            self.models, expressions, self.job_streams, registry, partitions_count, max_process_depth
        )
        self.services.deployment_limits = deployment_limits or DeploymentLimits()
        self.services.business_id_uniqueness = business_id_uniqueness
        self.services.authorizations = authorizations
        self.services.drgs = decisions.DrgCache(lambda key: state.decision_requirements.get(key))
        pi = ProcessInstanceIntent
        ms = MessageSubscriptionIntent
        pms = ProcessMessageSubscriptionIntent
        self._table: dict[tuple[int, int], Processor] = {
            (ValueType.DEPLOYMENT, DeploymentIntent.CREATE): instances.deploy,
            (
                ValueType.PROCESS_INSTANCE_CREATION,
                ProcessInstanceCreationIntent.CREATE,
            ): instances.create_instance,
            (
                ValueType.PROCESS_INSTANCE_CREATION,
                ProcessInstanceCreationIntent.CREATE_WITH_AWAITING_RESULT,
            ): instances.create_instance,
            (ValueType.PROCESS_INSTANCE, pi.CANCEL): instances.cancel_instance,
            (
                ValueType.PROCESS_INSTANCE_BUSINESS_ID,
                ProcessInstanceBusinessIdIntent.ASSIGN,
            ): instances.assign_business_id,
            (
                ValueType.PROCESS_INSTANCE_MODIFICATION,
                ProcessInstanceModificationIntent.MODIFY,
            ): modification.modify,
            (ValueType.PROCESS_INSTANCE, pi.ACTIVATE_ELEMENT): elements.activate,
            (ValueType.PROCESS_INSTANCE, pi.COMPLETE_ELEMENT): elements.complete,
            (ValueType.PROCESS_INSTANCE, pi.TERMINATE_ELEMENT): elements.terminate,
            (ValueType.PROCESS_INSTANCE, pi.COMPLETE_EXECUTION_LISTENER): elements.complete_execution_listener,
            (ValueType.VARIABLE_DOCUMENT, VariableDocumentIntent.UPDATE): instances.update_variables,
            (ValueType.JOB_BATCH, JobBatchIntent.ACTIVATE): jobs.activate_batch,
            (ValueType.JOB, JobIntent.COMPLETE): jobs.complete,
            (ValueType.JOB, JobIntent.FAIL): jobs.fail,
            (ValueType.JOB, JobIntent.THROW_ERROR): jobs.throw_error,
            (ValueType.JOB, JobIntent.UPDATE_RETRIES): jobs.update_retries,
            (ValueType.JOB, JobIntent.UPDATE_TIMEOUT): jobs.update_timeout,
            (ValueType.JOB, JobIntent.TIME_OUT): jobs.time_out,
            (ValueType.JOB, JobIntent.RECUR_AFTER_BACKOFF): jobs.recur_after_backoff,
            (ValueType.JOB, JobIntent.YIELD): jobs.yield_job,
            (ValueType.INCIDENT, IncidentIntent.RESOLVE): jobs.resolve_incident,
            (ValueType.COMMAND_DISTRIBUTION, CommandDistributionIntent.ACKNOWLEDGE): instances.acknowledge_distribution,
            (ValueType.CLOCK, ClockIntent.PIN): clock.pin,
            (ValueType.CLOCK, ClockIntent.RESET): clock.reset,
            (ValueType.TIMER, TimerIntent.TRIGGER): events.trigger_timer,
            (ValueType.MESSAGE, MessageIntent.PUBLISH): messages.publish,
            (ValueType.MESSAGE, MessageIntent.EXPIRE): messages.expire,
            (ValueType.MESSAGE_CORRELATION, MessageCorrelationIntent.CORRELATE): messages.correlate,
            (ValueType.MESSAGE_SUBSCRIPTION, ms.CREATE): messages.subscription_create,
            (ValueType.MESSAGE_SUBSCRIPTION, ms.CORRELATE): messages.subscription_correlated,
            (ValueType.MESSAGE_SUBSCRIPTION, ms.REJECT): messages.subscription_rejected,
            (ValueType.MESSAGE_SUBSCRIPTION, ms.DELETE): messages.subscription_delete,
            (ValueType.PROCESS_MESSAGE_SUBSCRIPTION, pms.CREATE): messages.process_subscription_created,
            (ValueType.PROCESS_MESSAGE_SUBSCRIPTION, pms.CORRELATE): messages.process_subscription_correlate,
            (ValueType.PROCESS_MESSAGE_SUBSCRIPTION, pms.DELETE): messages.process_subscription_deleted,
            (ValueType.SIGNAL, SignalIntent.BROADCAST): signals.broadcast_command,
            (ValueType.DECISION_EVALUATION, DecisionEvaluationIntent.EVALUATE): decisions.evaluate_command,
            (ValueType.RESOURCE_DELETION, ResourceDeletionIntent.DELETE): resource_deletion.delete_resource,
            (ValueType.USER_TASK, UserTaskIntent.ASSIGN): user_tasks.assign,
            (ValueType.USER_TASK, UserTaskIntent.CLAIM): user_tasks.claim,
            (ValueType.USER_TASK, UserTaskIntent.UPDATE): user_tasks.update,
            (ValueType.USER_TASK, UserTaskIntent.COMPLETE): user_tasks.complete,
            (ValueType.USER_TASK, UserTaskIntent.COMPLETE_TASK_LISTENER): user_tasks.complete_task_listener,
            (ValueType.USER_TASK, UserTaskIntent.DENY_TASK_LISTENER): user_tasks.deny_task_listener,
            (ValueType.PROCESS_INSTANCE_MIGRATION, ProcessInstanceMigrationIntent.MIGRATE): migration.migrate,
            (ValueType.MESSAGE_SUBSCRIPTION, ms.MIGRATE): migration.migrate_message_subscription,
        }
        self._table.update(batch_operations.PROCESSORS)
        self._table.update(identity.PROCESSORS)
        self._table.update(identity_setup.PROCESSORS)

    def apply_event(self, state: PartitionState, record: Record) -> None:
        self.appliers.apply(state, record)

    def process(self, ctx: ProcessingContext, command: Record) -> None:
        """Process one command; an unknown (value type, intent) is rejected, never ignored."""
        ctx.command = command
        ctx.services = self.services
        ctx.max_batch_bytes = self.max_batch_bytes
        processor = self._table.get((command.value_type, command.intent))
        if processor is None:
            ctx.reject(
                RejectionType.INVALID_ARGUMENT,
                f"Expected a known command, but got {command.value_type.name}.{command.intent_enum.name}",
            )
            return
        processor(ctx, command)
