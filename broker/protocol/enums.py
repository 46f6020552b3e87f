"""The codes a record carries: record type, value type, rejection type and one intent enum per value type.

Every numeric code here is a wire and storage code. It is written into log blocks, command responses and
exported records, and it follows Zeebe's record protocol so that Weir's records read like Zeebe's. A code
must therefore never be renumbered, and a removed or retired member's code must never be reused: old logs
would replay as something else. Add new members with new codes only.

Conventions, as in Zeebe:

- commands are imperative (``COMPLETE``), events are past tense (``COMPLETED``) or a present participle for
  a step in progress (``ELEMENT_ACTIVATING``);
- whether an intent is an event is stated explicitly per enum (``EVENTS`` below), mirroring Zeebe's
  ``Intent.isEvent()``; rejections reuse the rejected command's intent with record type
  ``COMMAND_REJECTION``;
- ``BpmnElementType`` and ``BpmnEventType`` are written by name (strings) in record values.

Members that Weir does not produce yet are still listed, so that codes stay aligned with Zeebe's and a
future feature cannot pick a code that Zeebe already gives another meaning.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum, StrEnum
from types import MappingProxyType
from typing import Final


class RecordType(IntEnum):
    """What a record is: a fact, a request for change, or the refusal of such a request."""

    EVENT = 0
    COMMAND = 1
    COMMAND_REJECTION = 2


class ValueType(IntEnum):
    """The kind of entity a record is about; selects the intent enum and the value's shape.

    Codes missing from the sequence belonged to value types Zeebe has retired (252 was REDISTRIBUTION);
    they stay unused.
    """

    JOB = 0
    DEPLOYMENT = 4
    PROCESS_INSTANCE = 5
    INCIDENT = 6
    MESSAGE = 10
    MESSAGE_SUBSCRIPTION = 11
    PROCESS_MESSAGE_SUBSCRIPTION = 12
    JOB_BATCH = 14
    TIMER = 15
    MESSAGE_START_EVENT_SUBSCRIPTION = 16
    VARIABLE = 17
    VARIABLE_DOCUMENT = 18
    PROCESS_INSTANCE_CREATION = 19
    ERROR = 20
    PROCESS_INSTANCE_RESULT = 21
    PROCESS = 22
    DEPLOYMENT_DISTRIBUTION = 23
    PROCESS_EVENT = 24
    DECISION = 25
    DECISION_REQUIREMENTS = 26
    DECISION_EVALUATION = 27
    PROCESS_INSTANCE_MODIFICATION = 28
    ESCALATION = 29
    SIGNAL_SUBSCRIPTION = 30
    SIGNAL = 31
    RESOURCE_DELETION = 32
    COMMAND_DISTRIBUTION = 33
    PROCESS_INSTANCE_BATCH = 34
    MESSAGE_BATCH = 35
    FORM = 36
    USER_TASK = 37
    PROCESS_INSTANCE_MIGRATION = 38
    COMPENSATION_SUBSCRIPTION = 39
    MESSAGE_CORRELATION = 40
    USER = 41
    CLOCK = 42
    AUTHORIZATION = 43
    ROLE = 44
    TENANT = 45
    GROUP = 46
    MAPPING_RULE = 47
    IDENTITY_SETUP = 48
    RESOURCE = 49
    BATCH_OPERATION_CREATION = 50
    BATCH_OPERATION_EXECUTION = 51
    BATCH_OPERATION_CHUNK = 52
    AD_HOC_SUB_PROCESS_ACTIVITY_ACTIVATION = 53
    BATCH_OPERATION_LIFECYCLE_MANAGEMENT = 54
    BATCH_OPERATION_PARTITION_LIFECYCLE = 55
    ASYNC_REQUEST = 56
    # Camunda 8.10: a business id given to a running root instance that has none.
    PROCESS_INSTANCE_BUSINESS_ID = 74
    # Management records, not related to process automation.
    SCALE = 253
    CHECKPOINT = 254


class RejectionType(IntEnum):
    """Why a command was rejected. ``NULL_VAL`` is carried by every record that is not a rejection.

    The gateway maps these to gRPC status codes (INVALID_STATE → FAILED_PRECONDITION, and so on).
    """

    INVALID_ARGUMENT = 0
    NOT_FOUND = 1
    ALREADY_EXISTS = 2
    INVALID_STATE = 3
    PROCESSING_ERROR = 4
    EXCEEDED_BATCH_RECORD_SIZE = 5
    UNAUTHORIZED = 6
    FORBIDDEN = 7
    # The null value of the one-byte encoding: "no rejection".
    NULL_VAL = 255


# --------------------------------------------------------------------------------------------------
# Intents, one enum per value type
# --------------------------------------------------------------------------------------------------


class JobIntent(IntEnum):
    """Lifecycle of a job, the unit of work a worker activates and completes."""

    CREATED = 0
    COMPLETE = 1
    COMPLETED = 2
    TIME_OUT = 3
    TIMED_OUT = 4
    FAIL = 5
    FAILED = 6
    UPDATE_RETRIES = 7
    RETRIES_UPDATED = 8
    # Deprecated command, kept because old logs may contain it.
    CANCEL = 9
    CANCELED = 10
    THROW_ERROR = 11
    ERROR_THROWN = 12
    RECUR_AFTER_BACKOFF = 13
    RECURRED_AFTER_BACKOFF = 14
    YIELD = 15
    YIELDED = 16
    UPDATE_TIMEOUT = 17
    TIMEOUT_UPDATED = 18
    MIGRATED = 19
    UPDATE = 20


class ProcessInstanceIntent(IntEnum):
    """Lifecycle of process and element instances, and the commands that drive it."""

    CANCEL = 0
    SEQUENCE_FLOW_TAKEN = 1
    ELEMENT_ACTIVATING = 2
    ELEMENT_ACTIVATED = 3
    ELEMENT_COMPLETING = 4
    ELEMENT_COMPLETED = 5
    ELEMENT_TERMINATING = 6
    ELEMENT_TERMINATED = 7
    ACTIVATE_ELEMENT = 8
    COMPLETE_ELEMENT = 9
    TERMINATE_ELEMENT = 10
    ELEMENT_MIGRATED = 11
    COMPLETE_EXECUTION_LISTENER = 12
    ANCESTOR_MIGRATED = 13
    CONTINUE_TERMINATING_ELEMENT = 14
    SEQUENCE_FLOW_DELETED = 15
    CANCELING = 16
    SUSPEND = 17
    SUSPENDED = 18
    RESUME = 19
    RESUMED = 20
    RESUMING = 21


class DeploymentIntent(IntEnum):
    """Deployment of resources (BPMN, DMN, forms)."""

    CREATE = 0
    CREATED = 1
    # Distribution members (2-4) are deprecated in favour of command distribution; kept for old logs.
    DISTRIBUTE = 2
    DISTRIBUTED = 3
    FULLY_DISTRIBUTED = 4
    REQUEST = 5
    REDEPLOY = 6


class IncidentIntent(IntEnum):
    """Incidents: problems that stop an instance until someone resolves them."""

    CREATED = 0
    RESOLVE = 1
    RESOLVED = 2
    MIGRATED = 3


class VariableIntent(IntEnum):
    """Changes of single variables; all of them are events."""

    CREATED = 0
    UPDATED = 1
    MIGRATED = 2
    CREATING = 3
    UPDATING = 4


class VariableDocumentIntent(IntEnum):
    """Setting a whole document of variables on a scope (the SetVariables RPC)."""

    UPDATE = 0
    UPDATED = 1
    UPDATING = 2


class ProcessInstanceCreationIntent(IntEnum):
    """Creation of a process instance from a client request."""

    CREATE = 0
    CREATED = 1
    CREATE_WITH_AWAITING_RESULT = 2


class ProcessInstanceResultIntent(IntEnum):
    """The result sent to a client that waits for an instance to complete."""

    COMPLETED = 0


class JobBatchIntent(IntEnum):
    """Activation of a batch of jobs for one worker request."""

    ACTIVATE = 0
    ACTIVATED = 1
    ACKNOWLEDGE = 2
    ACKNOWLEDGED = 3
    REJECT = 4
    REJECTED = 5


class ProcessIntent(IntEnum):
    """Process definitions: creation and deletion."""

    CREATED = 0
    DELETING = 1
    DELETED = 2
    DRAINING = 3
    DELETE_COMPLETE = 4
    DELETE_COMPLETED = 5
    FULLY_DELETED = 6


class MessageIntent(IntEnum):
    """Published messages and their expiry."""

    PUBLISH = 0
    PUBLISHED = 1
    EXPIRE = 2
    EXPIRED = 3


class MessageSubscriptionIntent(IntEnum):
    """Subscriptions on the message's partition (the correlation-key side)."""

    CREATE = 0
    CREATED = 1
    CORRELATE = 2
    CORRELATED = 3
    REJECT = 4
    REJECTED = 5
    DELETE = 6
    DELETED = 7
    CORRELATING = 8
    MIGRATE = 9
    MIGRATED = 10


class ProcessMessageSubscriptionIntent(IntEnum):
    """Subscriptions on the process instance's partition (the waiting-element side)."""

    CREATING = 0
    CREATE = 1
    CREATED = 2
    CORRELATE = 3
    CORRELATED = 4
    DELETING = 5
    DELETE = 6
    DELETED = 7
    MIGRATING = 8
    MIGRATE = 9
    MIGRATED = 10


class MessageStartEventSubscriptionIntent(IntEnum):
    """Subscriptions of message start events of deployed processes."""

    CREATED = 0
    CORRELATED = 1
    DELETED = 2


class TimerIntent(IntEnum):
    """Timers of timer events."""

    CREATED = 0
    TRIGGER = 1
    TRIGGERED = 2
    # Deprecated command, kept because old logs may contain it.
    CANCEL = 3
    CANCELED = 4
    MIGRATED = 5


class SignalIntent(IntEnum):
    """Broadcast signals."""

    BROADCAST = 0
    BROADCASTED = 1


class SignalSubscriptionIntent(IntEnum):
    """Subscriptions of signal catch and start events."""

    CREATED = 0
    DELETED = 1
    MIGRATED = 2


class ErrorIntent(IntEnum):
    """Errors recorded when processing a command failed unexpectedly."""

    CREATED = 0


class ProcessEventIntent(IntEnum):
    """Triggering of start events of process definitions (timer, message, signal start)."""

    TRIGGERING = 0
    TRIGGERED = 1


class EscalationIntent(IntEnum):
    """Outcome of a thrown escalation."""

    ESCALATED = 0
    NOT_ESCALATED = 1


class ResourceDeletionIntent(IntEnum):
    """Deletion of deployed resources."""

    DELETE = 0
    DELETING = 1
    DELETED = 2


class CommandDistributionIntent(IntEnum):
    """Distribution of a command from one partition to all others (e.g. deployments)."""

    STARTED = 0
    DISTRIBUTING = 1
    ACKNOWLEDGE = 2
    ACKNOWLEDGED = 3
    FINISHED = 4
    ENQUEUED = 5
    CONTINUATION_REQUESTED = 6
    CONTINUATION_COMPLETED = 7
    FINISH = 8


class ProcessInstanceModificationIntent(IntEnum):
    """Modification of a running instance (activate and terminate elements)."""

    MODIFY = 0
    MODIFIED = 1


class ProcessInstanceMigrationIntent(IntEnum):
    """Migration of a running instance to another process definition."""

    MIGRATE = 0
    MIGRATED = 1


class ProcessInstanceBatchIntent(IntEnum):
    """Work on many child instances split over several commands (e.g. large multi-instance bodies)."""

    TERMINATE = 0
    ACTIVATE = 1
    ACTIVATING = 2
    ACTIVATED = 3


class DecisionEvaluationIntent(IntEnum):
    """Evaluation of a DMN decision."""

    EVALUATED = 0
    FAILED = 1
    EVALUATE = 2


class DecisionIntent(IntEnum):
    """Deployed DMN decisions."""

    CREATED = 0
    DELETED = 1


class DecisionRequirementsIntent(IntEnum):
    """Deployed DMN decision requirements graphs."""

    CREATED = 0
    DELETED = 1


class FormIntent(IntEnum):
    """Deployed forms."""

    CREATED = 0
    DELETED = 1


class DeploymentDistributionIntent(IntEnum):
    """Deprecated per-deployment distribution, superseded by command distribution; kept for old logs."""

    DISTRIBUTING = 0
    COMPLETE = 1
    COMPLETED = 2


class MessageBatchIntent(IntEnum):
    """Expiry of many messages in one command."""

    EXPIRE = 0


class CompensationSubscriptionIntent(IntEnum):
    """Subscriptions of compensation handlers."""

    CREATED = 0
    TRIGGERED = 1
    COMPLETED = 2
    DELETED = 3
    MIGRATED = 4


class MessageCorrelationIntent(IntEnum):
    """Correlation of a message to exactly one instance, answered synchronously. Code 0 is unused."""

    CORRELATE = 1
    CORRELATED = 2
    NOT_CORRELATED = 3


class UserTaskIntent(IntEnum):
    """Lifecycle of a native (``zeebe:userTask``) user task and the commands on it.

    A command moves the task into a transition (ASSIGNING, CLAIMING, UPDATING, COMPLETING, CANCELING, CREATING) that
    ends once the task listeners of that event type completed: with the event that finishes it (ASSIGNED, UPDATED…),
    or, when a listener denies it, with ASSIGNMENT_DENIED, UPDATE_DENIED or COMPLETION_DENIED. CREATE and CANCEL are
    written by the engine alone; COMPLETE_TASK_LISTENER and DENY_TASK_LISTENER follow a listener job's completion.
    """

    CREATING = 0
    CREATED = 1
    COMPLETE = 2
    COMPLETING = 3
    COMPLETED = 4
    CANCELING = 5
    CANCELED = 6
    ASSIGN = 7
    ASSIGNING = 8
    ASSIGNED = 9
    CLAIM = 10
    UPDATE = 11
    UPDATING = 12
    UPDATED = 13
    MIGRATED = 14
    COMPLETE_TASK_LISTENER = 15
    DENY_TASK_LISTENER = 16
    COMPLETION_DENIED = 17
    CORRECTED = 18
    ASSIGNMENT_DENIED = 19
    CLAIMING = 20
    UPDATE_DENIED = 21
    CREATE = 22
    CANCEL = 23


class ClockIntent(IntEnum):
    """Control of the stream clock (pin it to a time, reset it to the leader's clock), as Zeebe's CLOCK records."""

    PIN = 0
    PINNED = 1
    RESET = 2
    RESETTED = 3


class ProcessInstanceBusinessIdIntent(IntEnum):
    """Camunda 8.10's late business id assignment: ASSIGN (command), ASSIGNED (event)."""

    ASSIGN = 0
    ASSIGNED = 1


class BatchOperationCreationIntent(IntEnum):
    """Creation of a batch operation (Camunda 8.8). Zeebe gives the batch value types one shared intent enum; its
    codes are kept, split by the value type each member is written with."""

    CREATE = 0
    CREATED = 1
    INITIALIZE = 2
    INITIALIZING = 3
    FINISH_INITIALIZATION = 4
    INITIALIZED = 5
    FAIL = 6
    FAILED = 7


class BatchOperationLifecycleManagementIntent(IntEnum):
    """Suspending, resuming, canceling and completing a batch operation (codes of Zeebe's shared enum)."""

    CANCEL = 8
    CANCELED = 9
    SUSPEND = 10
    SUSPENDED = 11
    RESUME = 12
    RESUMED = 13
    COMPLETE = 14
    COMPLETED = 15


class BatchOperationPartitionLifecycleIntent(IntEnum):
    """A partition done with its items of a batch operation (codes of Zeebe's shared enum)."""

    COMPLETE_PARTITION = 16
    PARTITION_COMPLETED = 17
    FAIL_PARTITION = 18
    PARTITION_FAILED = 19


class BatchOperationChunkIntent(IntEnum):
    """The items of a batch operation on one partition, recorded in chunks."""

    CREATE = 0
    CREATED = 1


class BatchOperationExecutionIntent(IntEnum):
    """One chunk of a batch operation's items worked on one partition."""

    EXECUTE = 0
    EXECUTING = 1
    EXECUTED = 2


class UserIntent(IntEnum):
    """A user of the cluster's own identity (Camunda 8.8's USER records): name, email, password hash."""

    CREATE = 0
    CREATED = 1
    UPDATE = 2
    UPDATED = 3
    DELETE = 4
    DELETED = 5


class MappingRuleIntent(IntEnum):
    """A rule that maps a token claim (name and value) to an identity that groups, roles and tenants name."""

    CREATE = 0
    CREATED = 1
    UPDATE = 2
    UPDATED = 3
    DELETE = 4
    DELETED = 5


class AuthorizationIntent(IntEnum):
    """A grant of permissions on a resource type (one resource or all) to an owner."""

    CREATE = 0
    CREATED = 1
    UPDATE = 2
    UPDATED = 3
    DELETE = 4
    DELETED = 5


class TenantIntent(IntEnum):
    """A tenant and its members (users, clients, mapping rules, groups, roles), as Camunda 8.8's TENANT records."""

    CREATE = 0
    CREATED = 1
    UPDATE = 2
    UPDATED = 3
    DELETE = 4
    DELETED = 5
    ADD_ENTITY = 6
    ENTITY_ADDED = 7
    REMOVE_ENTITY = 8
    ENTITY_REMOVED = 9


class GroupIntent(IntEnum):
    """A group and its members (users, clients, mapping rules)."""

    CREATE = 0
    CREATED = 1
    UPDATE = 2
    UPDATED = 3
    DELETE = 4
    DELETED = 5
    ADD_ENTITY = 6
    ENTITY_ADDED = 7
    REMOVE_ENTITY = 8
    ENTITY_REMOVED = 9


class RoleIntent(IntEnum):
    """A role and its members (users, clients, mapping rules, groups)."""

    CREATE = 0
    CREATED = 1
    UPDATE = 2
    UPDATED = 3
    DELETE = 4
    DELETED = 5
    ADD_ENTITY = 6
    ENTITY_ADDED = 7
    REMOVE_ENTITY = 8
    ENTITY_REMOVED = 9


class IdentitySetupIntent(IntEnum):
    """The identity configured at start (Zeebe's IDENTITY_SETUP): users, the admin role and its members, created at
    once by the first partition where missing."""

    INITIALIZE = 0
    INITIALIZED = 1


class AsyncRequestIntent(IntEnum):
    """A client request whose answer waits for later processing (a user task command waiting for its listeners)."""

    RECEIVED = 0
    PROCESSED = 1


# --------------------------------------------------------------------------------------------------
# Lookup tables
# --------------------------------------------------------------------------------------------------

INTENTS: Final[Mapping[ValueType, type[IntEnum]]] = MappingProxyType(
    {
        ValueType.JOB: JobIntent,
        ValueType.DEPLOYMENT: DeploymentIntent,
        ValueType.PROCESS_INSTANCE: ProcessInstanceIntent,
        ValueType.INCIDENT: IncidentIntent,
        ValueType.MESSAGE: MessageIntent,
        ValueType.MESSAGE_SUBSCRIPTION: MessageSubscriptionIntent,
        ValueType.PROCESS_MESSAGE_SUBSCRIPTION: ProcessMessageSubscriptionIntent,
        ValueType.JOB_BATCH: JobBatchIntent,
        ValueType.TIMER: TimerIntent,
        ValueType.MESSAGE_START_EVENT_SUBSCRIPTION: MessageStartEventSubscriptionIntent,
        ValueType.VARIABLE: VariableIntent,
        ValueType.VARIABLE_DOCUMENT: VariableDocumentIntent,
        ValueType.PROCESS_INSTANCE_CREATION: ProcessInstanceCreationIntent,
        ValueType.ERROR: ErrorIntent,
        ValueType.PROCESS_INSTANCE_RESULT: ProcessInstanceResultIntent,
        ValueType.PROCESS: ProcessIntent,
        ValueType.DEPLOYMENT_DISTRIBUTION: DeploymentDistributionIntent,
        ValueType.PROCESS_EVENT: ProcessEventIntent,
        ValueType.DECISION: DecisionIntent,
        ValueType.DECISION_REQUIREMENTS: DecisionRequirementsIntent,
        ValueType.DECISION_EVALUATION: DecisionEvaluationIntent,
        ValueType.PROCESS_INSTANCE_MODIFICATION: ProcessInstanceModificationIntent,
        ValueType.ESCALATION: EscalationIntent,
        ValueType.SIGNAL_SUBSCRIPTION: SignalSubscriptionIntent,
        ValueType.SIGNAL: SignalIntent,
        ValueType.RESOURCE_DELETION: ResourceDeletionIntent,
        ValueType.COMMAND_DISTRIBUTION: CommandDistributionIntent,
        ValueType.PROCESS_INSTANCE_BATCH: ProcessInstanceBatchIntent,
        ValueType.MESSAGE_BATCH: MessageBatchIntent,
        ValueType.FORM: FormIntent,
        ValueType.PROCESS_INSTANCE_MIGRATION: ProcessInstanceMigrationIntent,
        ValueType.COMPENSATION_SUBSCRIPTION: CompensationSubscriptionIntent,
        ValueType.MESSAGE_CORRELATION: MessageCorrelationIntent,
        ValueType.USER_TASK: UserTaskIntent,
        ValueType.CLOCK: ClockIntent,
        ValueType.USER: UserIntent,
        ValueType.MAPPING_RULE: MappingRuleIntent,
        ValueType.AUTHORIZATION: AuthorizationIntent,
        ValueType.TENANT: TenantIntent,
        ValueType.GROUP: GroupIntent,
        ValueType.ROLE: RoleIntent,
        ValueType.IDENTITY_SETUP: IdentitySetupIntent,
        ValueType.ASYNC_REQUEST: AsyncRequestIntent,
        ValueType.PROCESS_INSTANCE_BUSINESS_ID: ProcessInstanceBusinessIdIntent,
        ValueType.BATCH_OPERATION_CREATION: BatchOperationCreationIntent,
        ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT: BatchOperationLifecycleManagementIntent,
        ValueType.BATCH_OPERATION_PARTITION_LIFECYCLE: BatchOperationPartitionLifecycleIntent,
        ValueType.BATCH_OPERATION_CHUNK: BatchOperationChunkIntent,
        ValueType.BATCH_OPERATION_EXECUTION: BatchOperationExecutionIntent,
    }
)
"""The intent enum of each value type Weir knows intents for. Value types absent here (identity,
batch operations, scaling…) have no intents in Weir yet."""


def _events(*members: IntEnum) -> frozenset[IntEnum]:
    return frozenset(members)


EVENTS: Final[Mapping[type[IntEnum], frozenset[IntEnum]]] = MappingProxyType(
    {
        JobIntent: _events(
            JobIntent.CREATED,
            JobIntent.COMPLETED,
            JobIntent.TIMED_OUT,
            JobIntent.FAILED,
            JobIntent.RETRIES_UPDATED,
            JobIntent.CANCELED,
            JobIntent.ERROR_THROWN,
            JobIntent.RECURRED_AFTER_BACKOFF,
            JobIntent.YIELDED,
            JobIntent.TIMEOUT_UPDATED,
            JobIntent.MIGRATED,
        ),
        ProcessInstanceIntent: _events(
            ProcessInstanceIntent.SEQUENCE_FLOW_TAKEN,
            ProcessInstanceIntent.ELEMENT_ACTIVATING,
            ProcessInstanceIntent.ELEMENT_ACTIVATED,
            ProcessInstanceIntent.ELEMENT_COMPLETING,
            ProcessInstanceIntent.ELEMENT_COMPLETED,
            ProcessInstanceIntent.ELEMENT_TERMINATING,
            ProcessInstanceIntent.ELEMENT_TERMINATED,
            ProcessInstanceIntent.ELEMENT_MIGRATED,
            ProcessInstanceIntent.ANCESTOR_MIGRATED,
            ProcessInstanceIntent.SEQUENCE_FLOW_DELETED,
            ProcessInstanceIntent.CANCELING,
            ProcessInstanceIntent.SUSPENDED,
            ProcessInstanceIntent.RESUMING,
            ProcessInstanceIntent.RESUMED,
        ),
        DeploymentIntent: _events(
            DeploymentIntent.CREATED, DeploymentIntent.DISTRIBUTED, DeploymentIntent.FULLY_DISTRIBUTED
        ),
        IncidentIntent: _events(IncidentIntent.CREATED, IncidentIntent.RESOLVED, IncidentIntent.MIGRATED),
        VariableIntent: _events(*VariableIntent),
        VariableDocumentIntent: _events(VariableDocumentIntent.UPDATED, VariableDocumentIntent.UPDATING),
        ProcessInstanceCreationIntent: _events(ProcessInstanceCreationIntent.CREATED),
        ProcessInstanceResultIntent: _events(*ProcessInstanceResultIntent),
        JobBatchIntent: _events(JobBatchIntent.ACTIVATED, JobBatchIntent.ACKNOWLEDGED, JobBatchIntent.REJECTED),
        ProcessIntent: _events(*(member for member in ProcessIntent if member is not ProcessIntent.DELETE_COMPLETE)),
        MessageIntent: _events(MessageIntent.PUBLISHED, MessageIntent.EXPIRED),
        MessageSubscriptionIntent: _events(
            MessageSubscriptionIntent.CREATED,
            MessageSubscriptionIntent.CORRELATING,
            MessageSubscriptionIntent.CORRELATED,
            MessageSubscriptionIntent.REJECTED,
            MessageSubscriptionIntent.DELETED,
            MessageSubscriptionIntent.MIGRATED,
        ),
        ProcessMessageSubscriptionIntent: _events(
            ProcessMessageSubscriptionIntent.CREATING,
            ProcessMessageSubscriptionIntent.CREATED,
            ProcessMessageSubscriptionIntent.CORRELATED,
            ProcessMessageSubscriptionIntent.DELETING,
            ProcessMessageSubscriptionIntent.DELETED,
            ProcessMessageSubscriptionIntent.MIGRATING,
            ProcessMessageSubscriptionIntent.MIGRATED,
        ),
        MessageStartEventSubscriptionIntent: _events(*MessageStartEventSubscriptionIntent),
        TimerIntent: _events(TimerIntent.CREATED, TimerIntent.TRIGGERED, TimerIntent.CANCELED, TimerIntent.MIGRATED),
        SignalIntent: _events(SignalIntent.BROADCASTED),
        SignalSubscriptionIntent: _events(*SignalSubscriptionIntent),
        ErrorIntent: _events(*ErrorIntent),
        ProcessEventIntent: _events(*ProcessEventIntent),
        EscalationIntent: _events(*EscalationIntent),
        ResourceDeletionIntent: _events(ResourceDeletionIntent.DELETING, ResourceDeletionIntent.DELETED),
        CommandDistributionIntent: _events(
            CommandDistributionIntent.STARTED,
            CommandDistributionIntent.DISTRIBUTING,
            CommandDistributionIntent.ACKNOWLEDGED,
            CommandDistributionIntent.FINISHED,
            CommandDistributionIntent.ENQUEUED,
            CommandDistributionIntent.CONTINUATION_REQUESTED,
            CommandDistributionIntent.CONTINUATION_COMPLETED,
        ),
        ProcessInstanceModificationIntent: _events(ProcessInstanceModificationIntent.MODIFIED),
        ProcessInstanceMigrationIntent: _events(ProcessInstanceMigrationIntent.MIGRATED),
        ProcessInstanceBatchIntent: _events(
            ProcessInstanceBatchIntent.ACTIVATING, ProcessInstanceBatchIntent.ACTIVATED
        ),
        DecisionEvaluationIntent: _events(DecisionEvaluationIntent.EVALUATED, DecisionEvaluationIntent.FAILED),
        DecisionIntent: _events(*DecisionIntent),
        DecisionRequirementsIntent: _events(*DecisionRequirementsIntent),
        FormIntent: _events(*FormIntent),
        DeploymentDistributionIntent: _events(
            DeploymentDistributionIntent.DISTRIBUTING, DeploymentDistributionIntent.COMPLETED
        ),
        MessageBatchIntent: _events(),
        CompensationSubscriptionIntent: _events(*CompensationSubscriptionIntent),
        MessageCorrelationIntent: _events(MessageCorrelationIntent.CORRELATED, MessageCorrelationIntent.NOT_CORRELATED),
        UserTaskIntent: _events(
            *(
                member
                for member in UserTaskIntent
                if member.name
                not in ("COMPLETE", "ASSIGN", "CLAIM", "UPDATE", "COMPLETE_TASK_LISTENER", "DENY_TASK_LISTENER")
                and member.name not in ("CREATE", "CANCEL")
            )
        ),
        ClockIntent: _events(ClockIntent.PINNED, ClockIntent.RESETTED),
        **{
            intents: _events(*(member for member in intents if member.name.endswith("ED")))
            for intents in (UserIntent, MappingRuleIntent, AuthorizationIntent, TenantIntent, GroupIntent, RoleIntent)
        },
        IdentitySetupIntent: _events(IdentitySetupIntent.INITIALIZED),
        AsyncRequestIntent: _events(*AsyncRequestIntent),
        ProcessInstanceBusinessIdIntent: _events(ProcessInstanceBusinessIdIntent.ASSIGNED),
        BatchOperationCreationIntent: _events(
            *(member for member in BatchOperationCreationIntent if member.name.endswith(("ED", "ING")))
        ),
        BatchOperationLifecycleManagementIntent: _events(
            *(member for member in BatchOperationLifecycleManagementIntent if member.name.endswith("ED"))
        ),
        BatchOperationPartitionLifecycleIntent: _events(
            BatchOperationPartitionLifecycleIntent.PARTITION_COMPLETED,
            BatchOperationPartitionLifecycleIntent.PARTITION_FAILED,
        ),
        BatchOperationChunkIntent: _events(BatchOperationChunkIntent.CREATED),
        BatchOperationExecutionIntent: _events(
            BatchOperationExecutionIntent.EXECUTING, BatchOperationExecutionIntent.EXECUTED
        ),
    }
)
"""For each intent enum, the members that are events; every other member is a command."""


def intent_for(value_type: ValueType | int, code: int) -> IntEnum:
    """The intent member with ``code`` for ``value_type``.

    Raises ``ValueError`` for an unknown value type or an intent code the value type does not define:
    a record with such codes cannot be interpreted, and guessing would corrupt state on replay.
    """
    try:
        intent_enum = INTENTS[ValueType(value_type)]
    except KeyError:
        raise ValueError(f"value type {ValueType(value_type).name} has no intents") from None
    return intent_enum(code)


def is_event(value_type: ValueType | int, intent: IntEnum | int) -> bool:
    """Whether ``intent`` of ``value_type`` names an event (a fact) rather than a command.

    ``intent`` may be a member or a bare code; a member of another value type's enum is rejected.
    """
    intent_enum = INTENTS.get(ValueType(value_type))
    if intent_enum is None:
        raise ValueError(f"value type {ValueType(value_type).name} has no intents")
    if isinstance(intent, IntEnum) and type(intent) is not intent_enum:
        raise ValueError(f"{intent!r} is not an intent of {ValueType(value_type).name}")
    return intent_enum(intent) in EVENTS[intent_enum]


def is_command(value_type: ValueType | int, intent: IntEnum | int) -> bool:
    """The complement of :func:`is_event`, for readability at call sites."""
    return not is_event(value_type, intent)


# --------------------------------------------------------------------------------------------------
# BPMN vocabulary written into record values (by name)
# --------------------------------------------------------------------------------------------------


class BpmnElementType(StrEnum):
    """The kind of BPMN element an element instance belongs to."""

    UNSPECIFIED = "UNSPECIFIED"
    # Containers
    PROCESS = "PROCESS"
    SUB_PROCESS = "SUB_PROCESS"
    EVENT_SUB_PROCESS = "EVENT_SUB_PROCESS"
    AD_HOC_SUB_PROCESS = "AD_HOC_SUB_PROCESS"
    AD_HOC_SUB_PROCESS_INNER_INSTANCE = "AD_HOC_SUB_PROCESS_INNER_INSTANCE"
    # Events
    START_EVENT = "START_EVENT"
    INTERMEDIATE_CATCH_EVENT = "INTERMEDIATE_CATCH_EVENT"
    INTERMEDIATE_THROW_EVENT = "INTERMEDIATE_THROW_EVENT"
    BOUNDARY_EVENT = "BOUNDARY_EVENT"
    END_EVENT = "END_EVENT"
    # Tasks
    SERVICE_TASK = "SERVICE_TASK"
    RECEIVE_TASK = "RECEIVE_TASK"
    USER_TASK = "USER_TASK"
    MANUAL_TASK = "MANUAL_TASK"
    TASK = "TASK"
    # Gateways
    EXCLUSIVE_GATEWAY = "EXCLUSIVE_GATEWAY"
    PARALLEL_GATEWAY = "PARALLEL_GATEWAY"
    EVENT_BASED_GATEWAY = "EVENT_BASED_GATEWAY"
    INCLUSIVE_GATEWAY = "INCLUSIVE_GATEWAY"
    # Other
    SEQUENCE_FLOW = "SEQUENCE_FLOW"
    MULTI_INSTANCE_BODY = "MULTI_INSTANCE_BODY"
    CALL_ACTIVITY = "CALL_ACTIVITY"
    BUSINESS_RULE_TASK = "BUSINESS_RULE_TASK"
    SCRIPT_TASK = "SCRIPT_TASK"
    SEND_TASK = "SEND_TASK"


CONTAINER_ELEMENT_TYPES: Final = frozenset(
    {
        BpmnElementType.PROCESS,
        BpmnElementType.SUB_PROCESS,
        BpmnElementType.EVENT_SUB_PROCESS,
        BpmnElementType.AD_HOC_SUB_PROCESS,
        BpmnElementType.AD_HOC_SUB_PROCESS_INNER_INSTANCE,
        BpmnElementType.MULTI_INSTANCE_BODY,
    }
)
"""Element types whose instances contain other element instances (flow scopes)."""

ELEMENT_TYPE_BY_BPMN_TAG: Final[Mapping[str, BpmnElementType]] = MappingProxyType(
    {
        "process": BpmnElementType.PROCESS,
        "subProcess": BpmnElementType.SUB_PROCESS,
        "adHocSubProcess": BpmnElementType.AD_HOC_SUB_PROCESS,
        "startEvent": BpmnElementType.START_EVENT,
        "intermediateCatchEvent": BpmnElementType.INTERMEDIATE_CATCH_EVENT,
        "intermediateThrowEvent": BpmnElementType.INTERMEDIATE_THROW_EVENT,
        "boundaryEvent": BpmnElementType.BOUNDARY_EVENT,
        "endEvent": BpmnElementType.END_EVENT,
        "serviceTask": BpmnElementType.SERVICE_TASK,
        "receiveTask": BpmnElementType.RECEIVE_TASK,
        "userTask": BpmnElementType.USER_TASK,
        "manualTask": BpmnElementType.MANUAL_TASK,
        "task": BpmnElementType.TASK,
        "exclusiveGateway": BpmnElementType.EXCLUSIVE_GATEWAY,
        "parallelGateway": BpmnElementType.PARALLEL_GATEWAY,
        "eventBasedGateway": BpmnElementType.EVENT_BASED_GATEWAY,
        "inclusiveGateway": BpmnElementType.INCLUSIVE_GATEWAY,
        "sequenceFlow": BpmnElementType.SEQUENCE_FLOW,
        "callActivity": BpmnElementType.CALL_ACTIVITY,
        "businessRuleTask": BpmnElementType.BUSINESS_RULE_TASK,
        "scriptTask": BpmnElementType.SCRIPT_TASK,
        "sendTask": BpmnElementType.SEND_TASK,
    }
)
"""BPMN XML element names (local names) to element types. Event subprocesses (``subProcess`` with
``triggeredByEvent``) and multi-instance bodies have no tag of their own."""


class BpmnEventType(StrEnum):
    """The event definition of an event element (``NONE`` for none events)."""

    UNSPECIFIED = "UNSPECIFIED"
    CONDITIONAL = "CONDITIONAL"
    ERROR = "ERROR"
    ESCALATION = "ESCALATION"
    LINK = "LINK"
    MESSAGE = "MESSAGE"
    NONE = "NONE"
    SIGNAL = "SIGNAL"
    TERMINATE = "TERMINATE"
    TIMER = "TIMER"
    COMPENSATION = "COMPENSATION"


class JobKind(StrEnum):
    """What a job is for (the JOB record's ``jobKind``): the element's own work, or one of its listeners."""

    BPMN_ELEMENT = "BPMN_ELEMENT"
    EXECUTION_LISTENER = "EXECUTION_LISTENER"
    TASK_LISTENER = "TASK_LISTENER"
    AD_HOC_SUB_PROCESS = "AD_HOC_SUB_PROCESS"


class JobListenerEventType(StrEnum):
    """When a listener job runs (the JOB record's ``jobListenerEventType``); UNSPECIFIED for other jobs."""

    UNSPECIFIED = "UNSPECIFIED"
    START = "START"
    END = "END"
    CREATING = "CREATING"
    ASSIGNING = "ASSIGNING"
    UPDATING = "UPDATING"
    COMPLETING = "COMPLETING"
    CANCELING = "CANCELING"
