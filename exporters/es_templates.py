"""Index mappings of the Elasticsearch exporter: Zeebe's record fields, strict, per value type.

One component template holds the record envelope; one index template per value type composes it and adds the
value's fields. Mappings are strict, so a field that is not declared fails the bulk item loudly instead of
growing the mapping by guesswork; booleans are JSON booleans (some servers ignore the string "false").
Field names and types follow Zeebe's Elasticsearch exporter, so Zeebe users' queries keep working.
"""

from __future__ import annotations

from typing import Any

from broker.protocol.enums import ValueType

Mapping = dict[str, Any]

KEYWORD: Mapping = {"type": "keyword"}
LONG: Mapping = {"type": "long"}
INTEGER: Mapping = {"type": "integer"}
TEXT: Mapping = {"type": "text"}
BOOLEAN: Mapping = {"type": "boolean"}
DATE: Mapping = {"type": "date"}
STORED_ONLY: Mapping = {"enabled": False}  # kept in _source, not indexed (documents, binary resources)


def _object(**properties: Mapping) -> Mapping:
    return {"properties": properties}


RECORD_PROPERTIES: Mapping = {
    "partitionId": INTEGER,
    "position": LONG,
    "sourceRecordPosition": LONG,
    "key": LONG,
    "timestamp": DATE,
    "recordType": KEYWORD,
    "valueType": KEYWORD,
    "intent": KEYWORD,
    "rejectionType": KEYWORD,
    "rejectionReason": TEXT,
    "brokerVersion": KEYWORD,
    "recordVersion": INTEGER,
    "authorizations": STORED_ONLY,
}

_JOB_FIELDS: Mapping = {
    "type": KEYWORD,
    "worker": KEYWORD,
    "retries": LONG,
    "retryBackoff": LONG,
    "recurringTime": LONG,
    "deadline": LONG,
    "timeout": LONG,
    "customHeaders": STORED_ONLY,
    "variables": STORED_ONLY,
    "errorMessage": TEXT,
    "errorCode": TEXT,
    "elementId": TEXT,
    "elementInstanceKey": LONG,
    "processInstanceKey": LONG,
    "bpmnProcessId": KEYWORD,
    "processDefinitionVersion": INTEGER,
    "processDefinitionKey": LONG,
    "tenantId": KEYWORD,
    "jobKind": KEYWORD,
    "jobListenerEventType": KEYWORD,
    "changedAttributes": TEXT,
    "tags": KEYWORD,
    "businessId": KEYWORD,
    "rootProcessInstanceKey": LONG,
    # the worker's job result: a task listener's denial or corrections, an ad-hoc sub-process's choice
    "result": STORED_ONLY,
}

_PROCESS_METADATA: Mapping = _object(
    bpmnProcessId=KEYWORD,
    processName=KEYWORD,
    version=LONG,
    processDefinitionKey=LONG,
    resourceName=TEXT,
    checksum=STORED_ONLY,
    duplicate=BOOLEAN,
    tenantId=KEYWORD,
    deploymentKey=LONG,
    versionTag=KEYWORD,
)

VALUE_PROPERTIES: dict[ValueType, Mapping] = {
    ValueType.JOB: _JOB_FIELDS,
    ValueType.JOB_BATCH: {
        "type": KEYWORD,
        "worker": KEYWORD,
        "timeout": LONG,
        "maxJobsToActivate": INTEGER,
        "jobKeys": LONG,
        "jobs": {
            "type": "nested",
            "dynamic": "strict",
            "properties": {**_JOB_FIELDS, "deadline": DATE, "listenerEventType": KEYWORD, "userTask": STORED_ONLY},
        },
        "truncated": BOOLEAN,
        "tenantIds": KEYWORD,
    },
    ValueType.PROCESS_INSTANCE: {
        "bpmnProcessId": KEYWORD,
        "version": INTEGER,
        "processDefinitionKey": LONG,
        "processInstanceKey": LONG,
        "elementId": KEYWORD,
        "flowScopeKey": LONG,
        "bpmnElementType": KEYWORD,
        "bpmnEventType": KEYWORD,
        "parentProcessInstanceKey": LONG,
        "parentElementInstanceKey": LONG,
        "tenantId": KEYWORD,
        "elementInstancePath": STORED_ONLY,
        "processDefinitionPath": STORED_ONLY,
        "callingElementPath": STORED_ONLY,
        "tags": KEYWORD,
        "businessId": KEYWORD,
        "rootProcessInstanceKey": LONG,
    },
    ValueType.PROCESS_INSTANCE_CREATION: {
        "bpmnProcessId": KEYWORD,
        "version": INTEGER,
        "processDefinitionKey": LONG,
        "processInstanceKey": LONG,
        "variables": STORED_ONLY,
        "startInstructions": _object(elementId=KEYWORD),
        "tenantId": KEYWORD,
        "tags": KEYWORD,
        "businessId": KEYWORD,
        "rootProcessInstanceKey": LONG,
    },
    ValueType.PROCESS_INSTANCE_MODIFICATION: {
        "processInstanceKey": LONG,
        "tenantId": KEYWORD,
        "terminateInstructions": _object(elementInstanceKey=LONG, elementId=KEYWORD),
        "moveInstructions": _object(
            sourceElementId=KEYWORD,
            sourceElementInstanceKey=LONG,
            targetElementId=KEYWORD,
            ancestorScopeKey=LONG,
            inferAncestorScopeFromSourceHierarchy=BOOLEAN,
            useSourceParentKeyAsAncestorScope=BOOLEAN,
            variableInstructions=_object(elementId=KEYWORD, variables=STORED_ONLY),
        ),
        "activateInstructions": _object(
            elementId=KEYWORD,
            ancestorScopeKey=LONG,
            ancestorScopeKeys=LONG,
            variableInstructions=_object(elementId=KEYWORD, variables=STORED_ONLY),
        ),
    },
    # batch operations (broker/engine/batch_operations.py)
    ValueType.BATCH_OPERATION_CREATION: {
        "batchOperationKey": LONG,
        "batchOperationType": KEYWORD,
        "filter": STORED_ONLY,
        "migrationPlan": STORED_ONLY,
        "modificationPlan": STORED_ONLY,
        "partitionIds": INTEGER,
        "coordinatorPartitionId": INTEGER,
        "itemsCount": LONG,
        "items": STORED_ONLY,  # on the CREATE distributed to a partition: its own items
        "partitionItems": STORED_ONLY,  # on the CREATE the gateway sends
        "distributedFrom": INTEGER,
        "caller": STORED_ONLY,  # its creator (username, clientId, claims): each item is checked with its permissions
    },
    ValueType.BATCH_OPERATION_CHUNK: {
        "batchOperationKey": LONG,
        "chunkIndex": INTEGER,
        "items": _object(itemKey=LONG, processInstanceKey=LONG),
    },
    ValueType.BATCH_OPERATION_EXECUTION: {
        "batchOperationKey": LONG,
        "batchOperationType": KEYWORD,
        "chunkIndex": INTEGER,
        "itemKeys": LONG,
        "items": _object(itemKey=LONG, processInstanceKey=LONG, state=KEYWORD, errorMessage=TEXT),
    },
    ValueType.BATCH_OPERATION_LIFECYCLE_MANAGEMENT: {
        "batchOperationKey": LONG,
        "batchOperationType": KEYWORD,
        "distributedFrom": INTEGER,
    },
    ValueType.BATCH_OPERATION_PARTITION_LIFECYCLE: {
        "batchOperationKey": LONG,
        "partitionId": INTEGER,
        "completedCount": LONG,
        "failedCount": LONG,
        "distributedFrom": INTEGER,
    },
    ValueType.PROCESS_INSTANCE_MIGRATION: {
        "processInstanceKey": LONG,
        "targetProcessDefinitionKey": LONG,
        "processDefinitionKey": LONG,
        "mappingInstructions": _object(sourceElementId=KEYWORD, targetElementId=KEYWORD),
        "tenantId": KEYWORD,
    },
    ValueType.VARIABLE: {
        "name": KEYWORD,
        "value": {"type": "keyword", "ignore_above": 8191},
        "scopeKey": LONG,
        "processInstanceKey": LONG,
        "processDefinitionKey": LONG,
        "bpmnProcessId": KEYWORD,
        "tenantId": KEYWORD,
        "rootProcessInstanceKey": LONG,
    },
    ValueType.VARIABLE_DOCUMENT: {
        "scopeKey": LONG,
        "updateSemantics": KEYWORD,
        "variables": STORED_ONLY,
        "tenantId": KEYWORD,
    },
    ValueType.INCIDENT: {
        "errorType": KEYWORD,
        "errorMessage": TEXT,
        "bpmnProcessId": KEYWORD,
        "processDefinitionKey": LONG,
        "processInstanceKey": LONG,
        "elementId": KEYWORD,
        "elementInstanceKey": LONG,
        "jobKey": LONG,
        "variableScopeKey": LONG,
        "tenantId": KEYWORD,
        "elementInstancePath": STORED_ONLY,
        "processDefinitionPath": STORED_ONLY,
        "callingElementPath": STORED_ONLY,
        "rootProcessInstanceKey": LONG,
    },
    ValueType.PROCESS: {
        "bpmnProcessId": KEYWORD,
        "name": KEYWORD,
        "version": LONG,
        "processDefinitionKey": LONG,
        "resourceName": TEXT,
        "resource": STORED_ONLY,
        "checksum": STORED_ONLY,
        "duplicate": BOOLEAN,
        "tenantId": KEYWORD,
        "deploymentKey": LONG,
        "versionTag": KEYWORD,
    },
    ValueType.DEPLOYMENT: {
        "resources": _object(resource=STORED_ONLY, resourceName=TEXT),
        "processesMetadata": _PROCESS_METADATA,
        "decisionRequirementsMetadata": STORED_ONLY,
        "decisionsMetadata": STORED_ONLY,
        "formMetadata": STORED_ONLY,
        "resourceMetadata": STORED_ONLY,
        "tenantId": KEYWORD,
        "deploymentKey": LONG,
    },
    ValueType.DECISION: {
        "decisionId": KEYWORD,
        "decisionName": KEYWORD,
        "version": LONG,
        "decisionKey": LONG,
        "decisionRequirementsId": KEYWORD,
        "decisionRequirementsKey": LONG,
        "duplicate": BOOLEAN,
        "tenantId": KEYWORD,
        "deploymentKey": LONG,
        "versionTag": KEYWORD,
    },
    ValueType.DECISION_REQUIREMENTS: {
        "decisionRequirementsId": KEYWORD,
        "decisionRequirementsName": KEYWORD,
        "decisionRequirementsVersion": LONG,
        "decisionRequirementsKey": LONG,
        "namespace": KEYWORD,
        "resourceName": TEXT,
        "checksum": STORED_ONLY,
        "resource": STORED_ONLY,
        "duplicate": BOOLEAN,
        "tenantId": KEYWORD,
        "deploymentKey": LONG,
    },
    ValueType.DECISION_EVALUATION: {
        "decisionKey": LONG,
        "decisionId": KEYWORD,
        "decisionName": KEYWORD,
        "decisionVersion": LONG,
        "decisionRequirementsId": KEYWORD,
        "decisionRequirementsKey": LONG,
        "decisionOutput": STORED_ONLY,
        "variables": STORED_ONLY,
        "bpmnProcessId": KEYWORD,
        "processDefinitionKey": LONG,
        "processInstanceKey": LONG,
        "elementId": KEYWORD,
        "elementInstanceKey": LONG,
        "evaluatedDecisions": STORED_ONLY,
        "evaluationFailureMessage": TEXT,
        "failedDecisionId": KEYWORD,
        "tenantId": KEYWORD,
        "rootProcessInstanceKey": LONG,
    },
    ValueType.FORM: {
        "formId": KEYWORD,
        "version": LONG,
        "formKey": LONG,
        "resourceName": TEXT,
        "checksum": STORED_ONLY,
        "resource": STORED_ONLY,
        "duplicate": BOOLEAN,
        "tenantId": KEYWORD,
        "deploymentKey": LONG,
        "versionTag": KEYWORD,
    },
    ValueType.RESOURCE_DELETION: {
        "resourceKey": LONG,
        "tenantId": KEYWORD,
    },
    ValueType.USER_TASK: {
        "userTaskKey": LONG,
        "assignee": KEYWORD,
        "candidateGroupsList": KEYWORD,
        "candidateUsersList": KEYWORD,
        "dueDate": KEYWORD,
        "followUpDate": KEYWORD,
        "formKey": LONG,
        "externalFormReference": KEYWORD,
        "variables": STORED_ONLY,
        "customHeaders": STORED_ONLY,
        "bpmnProcessId": KEYWORD,
        "processDefinitionVersion": INTEGER,
        "processDefinitionKey": LONG,
        "processInstanceKey": LONG,
        "elementId": KEYWORD,
        "elementInstanceKey": LONG,
        "tenantId": KEYWORD,
        "changedAttributes": KEYWORD,
        "action": KEYWORD,
        "creationTimestamp": LONG,
        "priority": INTEGER,
        "deniedReason": TEXT,
        "corrections": STORED_ONLY,  # on COMPLETE_TASK_LISTENER commands
        "tags": KEYWORD,
        "businessId": KEYWORD,
        "rootProcessInstanceKey": LONG,
    },
    ValueType.PROCESS_EVENT: {
        "scopeKey": LONG,
        "processInstanceKey": LONG,
        "processDefinitionKey": LONG,
        "targetElementId": KEYWORD,
        "variables": STORED_ONLY,
        "tenantId": KEYWORD,
    },
}

EXPORTABLE_VALUE_TYPES: frozenset[ValueType] = frozenset(VALUE_PROPERTIES)


def value_type_slug(value_type: ValueType) -> str:
    """The value type in index names and aliases: ``PROCESS_INSTANCE`` → ``process-instance``."""
    return value_type.name.lower().replace("_", "-")


def component_template(number_of_shards: int, number_of_replicas: int) -> Mapping:
    """The record envelope shared by every value type's index."""
    return {
        "template": {
            "settings": {
                "number_of_shards": number_of_shards,
                "number_of_replicas": number_of_replicas,
                "index.queries.cache.enabled": False,
            },
            "mappings": {"dynamic": "strict", "properties": RECORD_PROPERTIES},
        }
    }


def index_template(
    prefix: str,
    value_type: ValueType,
    version: str,
    *,
    number_of_shards: int,
    number_of_replicas: int,
    lifecycle_policy: str | None,
) -> Mapping:
    """The index template of one value type: its index pattern, alias and value mapping."""
    slug = value_type_slug(value_type)
    value_mapping = {"dynamic": "strict", "properties": VALUE_PROPERTIES[value_type]}
    settings: Mapping = {"number_of_shards": number_of_shards, "number_of_replicas": number_of_replicas}
    if lifecycle_policy:
        settings["index.lifecycle.name"] = lifecycle_policy
    return {
        "index_patterns": [f"{prefix}_{slug}_{version}_*"],
        "composed_of": [prefix],
        "priority": 20,
        "template": {
            "settings": settings,
            "aliases": {f"{prefix}-{slug}": {}},
            "mappings": {"properties": {"value": value_mapping}},
        },
    }


def retention_policy(minimum_age: str) -> Mapping:
    """An index lifecycle policy that deletes record indices once they are ``minimum_age`` old."""
    return {"policy": {"phases": {"delete": {"min_age": minimum_age, "actions": {"delete": {}}}}}}
