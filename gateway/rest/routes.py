"""REST endpoints that send commands (Camunda 8.9 Orchestration Cluster API, v2): each reads and checks its body,
calls the transport-neutral :class:`GatewayCommands` and renders the record it returns in the v2 shape."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import operator
import re
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from exporters.history.rows import rest_decision_type
from gateway.commands import (
    TENANT,
    ActivateInstruction,
    GatewayCommands,
    MoveInstruction,
    check_variables,
    invalid,
)
from gateway.job_results import job_result
from gateway.rest.endpoints import ANY_OBJECT, INTEGER, KEY, STRING, Endpoint, obj
from gateway.rest.schema import Body, Field, parse_key
from gateway.rest.shapes import business_fields

#: Camunda's default physical tenant: Weir has only that one.
PHYSICAL_TENANT = "default"
TENANT_FIELD = Field(
    "string", "The tenant: required with gateway.multiTenancy.enabled; without, only <default> (or none) is accepted"
)
VARIABLES_FIELD = Field("object", "Variables as a JSON object")
OPERATION_REFERENCE = Field(
    "integer", "A reference echoed by Camunda for batch tracking; accepted and ignored", minimum=1
)


#: How deep JSON bodies may nest (objects and arrays); deeper ones are refused before anything walks them.
MAX_JSON_DEPTH = 64
#: Seconds to receive a request body when the application sets none (gateway.rest.bodyTimeout).
DEFAULT_BODY_TIMEOUT = 30.0
BODY_TIMEOUT = web.AppKey("body_timeout", float)


@contextlib.asynccontextmanager
async def receiving_body(request: web.Request) -> AsyncIterator[None]:
    """Bounds the time to receive the request body: a 408 problem when it takes longer than the body timeout."""
    timeout = request.config_dict.get(BODY_TIMEOUT, DEFAULT_BODY_TIMEOUT)
    try:
        async with asyncio.timeout(timeout):
            yield
    except TimeoutError:
        raise web.HTTPRequestTimeout(
            text=f"The request body did not arrive within {timeout:g} seconds (gateway.rest.bodyTimeout)"
        ) from None


async def read_body(request: web.Request) -> bytes:
    async with receiving_body(request):
        return await request.read()


async def read_json_value(request: web.Request) -> Any:
    """The JSON value of the request body (None when it is empty).

    A body needs a JSON content type (415 otherwise): a browser page may send a text/plain body to any site without
    asking it first, but not a JSON one. Nesting is bounded (MAX_JSON_DEPTH) so that nothing recurses on it.
    """
    raw = await read_body(request)
    if not raw.strip():
        return None
    ctype = request.content_type.lower()
    if not (ctype == "application/json" or (ctype.startswith("application/") and ctype.endswith("+json"))):
        raise web.HTTPUnsupportedMediaType(
            text=f"Expected the request body with the content type application/json, but it is '{ctype}'"
        )
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        invalid(f"Expected the request body to be JSON, but it is not valid JSON: {e}")
    if _nests_deeper(raw, MAX_JSON_DEPTH):
        invalid(f"Expected the request body to nest at most {MAX_JSON_DEPTH} objects or arrays deep, but it is deeper")
    return value


_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
#: an opening bracket counts 2 and a closing one 0: the depth after n brackets is their sum minus n
_WEIGHTS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def _nests_deeper(text: bytes, limit: int) -> bool:
    """Whether valid JSON nests deeper than ``limit`` (brackets inside strings do not count); runs at C speed."""
    weights = _STRINGS.sub(b"", text).translate(None, _NOT_BRACKETS).translate(_WEIGHTS)
    depths = map(operator.sub, itertools.accumulate(weights), range(1, len(weights) + 1))
    return max(depths, default=0) > limit


async def read_json(request: web.Request, body: Body, *, optional: bool = False) -> dict[str, Any]:
    """The request's JSON body checked against ``body``; an empty body reads as {} when ``optional``."""
    value = await read_json_value(request)
    if value is None:
        if optional:
            return {}
        invalid("Expected a JSON object as the request body, but the body is empty")
    return body.read(value)


def _no_constant(name: str) -> Any:
    raise ValueError(f"'{name}' is not a JSON value")


def path_key(request: web.Request, name: str) -> int:
    return parse_key(name, request.match_info[name])


def json_response(value: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(value, ensure_ascii=False), content_type="application/json")


def _ancestor_key(value: str | None) -> int:
    """A modification's ancestor selection: a key, or -1 (or nothing) for none."""
    if value is None or value == "-1":
        return -1
    return parse_key("ancestorElementInstanceKey", value)


def _variable_instructions(instruction: dict[str, Any], element_id: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    return tuple(
        (v.get("scopeId", ""), check_variables(v["variables"], f"variables of the '{element_id}' activation"))
        for v in instruction.get("variableInstructions") or []
    )


def _move(m: dict[str, Any]) -> MoveInstruction:
    """A REST move instruction (Camunda 8.9's shape) as the gateway's."""
    source = m["sourceElementInstruction"]
    source_type = source["sourceType"]
    if source_type == "byId" and source.get("sourceElementId"):
        source_id, source_key = source["sourceElementId"], -1
    elif source_type == "byKey" and "sourceElementInstanceKey" in source:
        source_id, source_key = "", source["sourceElementInstanceKey"]
    else:
        invalid(
            'Expected \'sourceElementInstruction\' to be {"sourceType": "byId", "sourceElementId": …} or '
            '{"sourceType": "byKey", "sourceElementInstanceKey": …}'
        )
    scope = m.get("ancestorScopeInstruction") or {"ancestorScopeType": "direct"}
    ancestor = scope["ancestorScopeType"]
    if ancestor not in ("direct", "inferred", "sourceParent"):
        invalid(f"Expected 'ancestorScopeType' to be direct, inferred or sourceParent, but got '{ancestor}'")
    return MoveInstruction(
        m["targetElementId"],
        source_id,
        source_key,
        ancestor,
        _ancestor_key(scope.get("ancestorElementInstanceKey")) if ancestor == "direct" else -1,
        _variable_instructions(m, m["targetElementId"]),
    )


def no_content() -> web.Response:
    return web.Response(status=204)


def _key(value: int) -> str:
    return str(value)


# -- response schemas ----------------------------------------------------------------------------------------------


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"oneOf": [schema, {"type": "null"}]}


PROCESS_DEFINITION_DEPLOYMENT = obj(
    {
        "processDefinitionId": STRING,
        "processDefinitionVersion": INTEGER,
        "resourceName": STRING,
        "tenantId": STRING,
        "processDefinitionKey": KEY,
    }
)
DECISION_DEFINITION_DEPLOYMENT = obj(
    {
        "decisionDefinitionId": STRING,
        "version": INTEGER,
        "name": STRING,
        "tenantId": STRING,
        "decisionRequirementsId": STRING,
        "decisionDefinitionKey": KEY,
        "decisionRequirementsKey": KEY,
    }
)
DECISION_REQUIREMENTS_DEPLOYMENT = obj(
    {
        "decisionRequirementsId": STRING,
        "version": INTEGER,
        "decisionRequirementsName": STRING,
        "tenantId": STRING,
        "resourceName": STRING,
        "decisionRequirementsKey": KEY,
    }
)
FORM_DEPLOYMENT = obj(
    {"formId": STRING, "version": INTEGER, "resourceName": STRING, "tenantId": STRING, "formKey": KEY}
)
#: What a deployment item may be; each item has all of them, null but one (``resource``: Weir deploys no other kind).
DEPLOYMENT_KINDS = ("processDefinition", "decisionDefinition", "decisionRequirements", "form", "resource")
DEPLOYMENT_RESPONSE = obj(
    {
        "deploymentKey": KEY,
        "tenantId": STRING,
        "deployments": {
            "type": "array",
            "items": obj(
                {
                    "processDefinition": _nullable(PROCESS_DEFINITION_DEPLOYMENT),
                    "decisionDefinition": _nullable(DECISION_DEFINITION_DEPLOYMENT),
                    "decisionRequirements": _nullable(DECISION_REQUIREMENTS_DEPLOYMENT),
                    "form": _nullable(FORM_DEPLOYMENT),
                    "resource": {"type": "null", "description": "Another kind of resource (none in Weir)"},
                },
                "One deployed resource: exactly one of the properties is not null",
                required=list(DEPLOYMENT_KINDS),
            ),
        },
    },
    required=["deploymentKey", "tenantId", "deployments"],
)
TOPOLOGY_RESPONSE = obj(
    {
        "brokers": {
            "type": "array",
            "items": obj(
                {
                    "nodeId": INTEGER,
                    "brokerId": {**STRING, "description": "The node id as text"},
                    "host": STRING,
                    "port": INTEGER,
                    "version": STRING,
                    "partitions": {
                        "type": "array",
                        "items": obj(
                            {
                                "partitionId": INTEGER,
                                "role": {"type": "string", "enum": ["leader", "follower", "inactive"]},
                                "health": {"type": "string", "enum": ["healthy", "unhealthy", "dead"]},
                                "state": {
                                    "type": "string",
                                    "enum": ["active", "joining", "learner", "leaving", "recovering", "unknown"],
                                    "description": "The partition's membership; always active (Weir does not move "
                                    "partitions)",
                                },
                            }
                        ),
                    },
                }
            ),
        },
        "clusterId": {"type": ["string", "null"], "description": "The cluster id (none in Weir: null)"},
        "clusterSize": INTEGER,
        "partitionsCount": INTEGER,
        "replicationFactor": INTEGER,
        "gatewayVersion": {**STRING, "description": "The API level the gateway implements"},
        "lastCompletedChangeId": {**STRING, "description": "The last completed cluster change (none: -1)"},
    },
    required=[
        "brokers",
        "clusterId",
        "clusterSize",
        "partitionsCount",
        "replicationFactor",
        "gatewayVersion",
        "lastCompletedChangeId",
    ],
)
CREATE_INSTANCE_RESPONSE = obj(
    {
        "processDefinitionId": STRING,
        "processDefinitionVersion": INTEGER,
        "tenantId": STRING,
        "variables": {**ANY_OBJECT, "description": "The instance's variables at completion (awaitCompletion; else {})"},
        "processDefinitionKey": KEY,
        "processInstanceKey": KEY,
        "tags": {"type": "array", "items": STRING},
        "businessId": {"type": ["string", "null"]},
    },
    required=[
        "processDefinitionId",
        "processDefinitionVersion",
        "tenantId",
        "variables",
        "processDefinitionKey",
        "processInstanceKey",
        "tags",
        "businessId",
    ],
)
ACTIVATED_JOB = obj(
    {
        "jobKey": KEY,
        "type": STRING,
        "processDefinitionId": STRING,
        "processDefinitionVersion": INTEGER,
        "processDefinitionKey": KEY,
        "processInstanceKey": KEY,
        "elementId": STRING,
        "elementInstanceKey": KEY,
        "customHeaders": ANY_OBJECT,
        "worker": STRING,
        "retries": INTEGER,
        "deadline": {**INTEGER, "description": "When the job times out, epoch milliseconds"},
        "variables": ANY_OBJECT,
        "tenantId": STRING,
        "kind": {"type": "string", "description": "BPMN_ELEMENT, or TASK_LISTENER for a user task's listener"},
        "listenerEventType": STRING,
        "userTask": {
            "type": ["object", "null"],
            "description": "A task listener's user task: its attributes and action (null for other jobs)",
        },
        "physicalTenantId": {**STRING, "description": "The physical tenant the activation went to: default"},
        "priority": {**INTEGER, "description": "The job's priority (Weir has none: 0)"},
        "tags": {"type": "array", "items": STRING},
        "rootProcessInstanceKey": {"type": ["string", "null"]},
        "businessId": {"type": ["string", "null"]},
    }
)
ACTIVATION_RESPONSE = obj({"jobs": {"type": "array", "items": ACTIVATED_JOB}}, required=["jobs"])
EVALUATED_DECISION = obj(
    {
        "decisionDefinitionId": STRING,
        "decisionDefinitionName": STRING,
        "decisionDefinitionVersion": INTEGER,
        "decisionDefinitionType": STRING,
        "decisionDefinitionKey": KEY,
        "decisionEvaluationInstanceKey": {**STRING, "description": "<decisionEvaluationKey>-<position, from 1>"},
        "output": STRING,
        "tenantId": STRING,
        "matchedRules": {
            "type": "array",
            "items": obj(
                {
                    "ruleId": STRING,
                    "ruleIndex": INTEGER,
                    "evaluatedOutputs": {
                        "type": "array",
                        "items": obj(
                            {
                                "outputId": STRING,
                                "outputName": STRING,
                                "outputValue": STRING,
                                "ruleId": STRING,
                                "ruleIndex": INTEGER,
                            }
                        ),
                    },
                }
            ),
        },
        "evaluatedInputs": {
            "type": "array",
            "items": obj({"inputId": STRING, "inputName": STRING, "inputValue": STRING}),
        },
    }
)
EVALUATION_RESPONSE = obj(
    {
        "decisionDefinitionId": STRING,
        "decisionDefinitionKey": KEY,
        "decisionDefinitionName": STRING,
        "decisionDefinitionVersion": INTEGER,
        "decisionRequirementsId": STRING,
        "decisionRequirementsKey": KEY,
        "output": {"type": "string", "description": "The decision's output as a JSON document"},
        "failedDecisionDefinitionId": {"type": ["string", "null"], "description": "The decision that failed, if any"},
        "failureMessage": {"type": ["string", "null"], "description": "Why it failed, if it did"},
        "tenantId": STRING,
        "decisionInstanceKey": KEY,
        "decisionEvaluationKey": KEY,
        "evaluatedDecisions": {"type": "array", "items": EVALUATED_DECISION},
    }
)

# -- request bodies ------------------------------------------------------------------------------------------------

CREATE_INSTANCE = Body(
    {
        "processDefinitionId": Field("string", "The BPMN process id; with processDefinitionVersion, or its latest"),
        "processDefinitionVersion": Field("integer", "The version (-1: the latest)", minimum=-1),
        "processDefinitionKey": Field("key", "The process definition key (instead of the id and version)"),
        "variables": VARIABLES_FIELD,
        "tenantId": TENANT_FIELD,
        "operationReference": OPERATION_REFERENCE,
        "awaitCompletion": Field("boolean", "Answer when the instance completes, with its variables"),
        "fetchVariables": Field("strings", "With awaitCompletion: the variables to return (all when empty)"),
        "requestTimeout": Field("integer", "With awaitCompletion: milliseconds to wait (0: the gateway default)"),
        "tags": Field("strings", "At most 10 tags: a letter, then letters, digits, _, -, : or . (100 characters)"),
        "businessId": Field(
            "string",
            "Your id for the instance (256 characters); unique among active root instances "
            "of the process when broker.businessIdUniqueness is on",
        ),
        "startInstructions": Field(
            "nested-list",
            "Start the instance at these elements instead of its none start event (their sub-processes are "
            "created around them)",
            body=Body({"elementId": Field("string", "The element to start at", required=True, min_length=1)}),
        ),
    },
    "Either processDefinitionId (and optionally processDefinitionVersion) or processDefinitionKey.",
)
VARIABLE_INSTRUCTIONS = Field(
    "nested-list",
    "Variables to create on the element or one of its flow scopes as it is activated",
    body=Body(
        {
            "variables": Field("object", "Variables as a JSON object", required=True),
            "scopeId": Field(
                "string", "The element id of the scope (the element or a flow scope of it); empty: the process instance"
            ),
        }
    ),
)
ANCESTOR_KEY_FIELD = Field(
    "string",
    "The flow scope instance (or an ancestor of it) to activate the element in, as a key; -1 (default): the only "
    "active one, or a new one when none is",
)
MODIFY_INSTANCE = Body(
    {
        "operationReference": OPERATION_REFERENCE,
        "activateInstructions": Field(
            "nested-list",
            "Elements to activate, in order",
            body=Body(
                {
                    "elementId": Field("string", "The element to activate", required=True, min_length=1),
                    "ancestorElementInstanceKey": ANCESTOR_KEY_FIELD,
                    "variableInstructions": VARIABLE_INSTRUCTIONS,
                }
            ),
        ),
        "moveInstructions": Field(
            "nested-list",
            "Move tokens (Camunda 8.9): terminate the source element's active instances (or one instance) and "
            "activate the target element for each",
            body=Body(
                {
                    "sourceElementInstruction": Field(
                        "nested",
                        "What to move: sourceType byId with sourceElementId, or byKey with sourceElementInstanceKey",
                        required=True,
                        body=Body(
                            {
                                "sourceType": Field("string", "byId or byKey", required=True),
                                "sourceElementId": Field("string", "byId: the element whose instances move"),
                                "sourceElementInstanceKey": Field("key", "byKey: the element instance that moves"),
                            }
                        ),
                    ),
                    "targetElementId": Field("string", "The element to activate", required=True, min_length=1),
                    "ancestorScopeInstruction": Field(
                        "nested",
                        "Where to activate the target: ancestorScopeType direct (with ancestorElementInstanceKey; "
                        "the default, with -1), inferred (the nearest instance above the source that encloses the "
                        "target) or sourceParent (the source's flow scope instance)",
                        body=Body(
                            {
                                "ancestorScopeType": Field("string", "direct, inferred or sourceParent", required=True),
                                "ancestorElementInstanceKey": ANCESTOR_KEY_FIELD,
                            }
                        ),
                    ),
                    "variableInstructions": VARIABLE_INSTRUCTIONS,
                }
            ),
        ),
        "terminateInstructions": Field(
            "nested-list",
            "What to terminate (after the activations): an elementInstanceKey, or an elementId (every active "
            "instance of the element)",
            body=Body(
                {
                    "elementInstanceKey": Field("key", "The element instance to terminate"),
                    "elementId": Field("string", "The element whose active instances to terminate", min_length=1),
                }
            ),
        ),
    }
)
OPERATION_ONLY = Body({"operationReference": OPERATION_REFERENCE})
ASSIGN_BUSINESS_ID = Body(
    {"businessId": Field("string", "The business id (256 characters at most)", required=True, min_length=1)}
)
MIGRATE_INSTANCE = Body(
    {
        "targetProcessDefinitionKey": Field("key", "The process definition to migrate to", required=True),
        "mappingInstructions": Field(
            "nested-list",
            "Which element of the source definition becomes which element of the target (every active element needs "
            "one)",
            required=True,
            body=Body(
                {
                    "sourceElementId": Field("string", "An element of the instance's definition", required=True),
                    "targetElementId": Field("string", "The element of the target definition", required=True),
                }
            ),
        ),
        "operationReference": OPERATION_REFERENCE,
    }
)
ACTIVATE_JOBS = Body(
    {
        "type": Field("string", "The job type", required=True, min_length=1),
        "worker": Field("string", "The worker's name, recorded on the jobs"),
        "timeout": Field(
            "integer", "Milliseconds the jobs stay exclusively with this worker", required=True, minimum=1
        ),
        "maxJobsToActivate": Field("integer", "At most this many jobs", required=True, minimum=1),
        "fetchVariable": Field("strings", "The variables to fetch (all when empty)"),
        "requestTimeout": Field(
            "integer", "Milliseconds to long-poll for jobs (0: the gateway's default, negative: no waiting)"
        ),
        "tenantIds": Field(
            "strings",
            "Tenants to activate jobs of: required with gateway.multiTenancy.enabled; without, only <default>",
        ),
    }
)
COMPLETE_JOB = Body(
    {
        "variables": VARIABLES_FIELD,
        "result": Field(
            "nested",
            "What the worker decided: a task listener denies the user task's transition or corrects its attributes "
            "(type userTask); a job-worker ad-hoc sub-process's worker chooses the elements to activate (type "
            "adHocSubProcess)",
            body=Body(
                {
                    "type": Field("string", "userTask (the default) or adHocSubProcess"),
                    "denied": Field("boolean", "Deny the transition the listener was called for"),
                    "deniedReason": Field("string", "Why it was denied"),
                    "corrections": Field(
                        "nested",
                        "New values of the task's attributes",
                        body=Body(
                            {
                                "assignee": Field("string", "The assignee"),
                                "dueDate": Field("string", "The due date (ISO 8601)"),
                                "followUpDate": Field("string", "The follow-up date (ISO 8601)"),
                                "candidateUsers": Field("strings", "The candidate users"),
                                "candidateGroups": Field("strings", "The candidate groups"),
                                "priority": Field("integer", "The priority, 0 to 100", minimum=0),
                            }
                        ),
                    ),
                    "activateElements": Field(
                        "nested-list",
                        "Ad-hoc sub-process: the inner elements to activate",
                        body=Body(
                            {
                                "elementId": Field("string", "The inner element", required=True, min_length=1),
                                "variables": Field("object", "Variables local to this activation"),
                            }
                        ),
                    ),
                    "isCompletionConditionFulfilled": Field(
                        "boolean", "Ad-hoc sub-process: complete it once what still runs inside has ended"
                    ),
                    "isCancelRemainingInstances": Field(
                        "boolean", "Ad-hoc sub-process: terminate what still runs inside and complete at once"
                    ),
                }
            ),
        ),
    }
)
FAIL_JOB = Body(
    {
        "retries": Field("integer", "Retries left; 0 raises an incident", minimum=0),
        "errorMessage": Field("string", "Why the job failed"),
        "retryBackOff": Field("integer", "Milliseconds before the job may be activated again"),
        "variables": Field("object", "Variables set on the job's element (local)"),
    }
)
THROW_ERROR = Body(
    {
        "errorCode": Field("string", "The BPMN error code an error event catches", required=True, min_length=1),
        "errorMessage": Field("string", "A message for the incident when nothing catches the error"),
        "variables": Field("object", "Variables for the catching error event"),
    }
)
UPDATE_JOB = Body(
    {
        "changeset": Field(
            "nested",
            "The fields to change",
            required=True,
            body=Body(
                {
                    "retries": Field("integer", "The new retries", minimum=1),
                    "timeout": Field("integer", "New timeout in milliseconds, from now", minimum=1),
                }
            ),
        ),
        "operationReference": OPERATION_REFERENCE,
    }
)
PUBLISH_MESSAGE = Body(
    {
        "name": Field("string", "The message name", required=True, min_length=1),
        "correlationKey": Field("string", "The correlation key (empty for message start events)"),
        "timeToLive": Field("integer", "Milliseconds the message waits to be correlated", minimum=0),
        "messageId": Field("string", "A unique id: a second message with the same id is rejected while buffered"),
        "variables": VARIABLES_FIELD,
        "tenantId": TENANT_FIELD,
    }
)
CORRELATE_MESSAGE = Body(
    {
        "name": Field("string", "The message name", required=True, min_length=1),
        "correlationKey": Field("string", "The correlation key (empty for message start events)"),
        "variables": VARIABLES_FIELD,
        "tenantId": TENANT_FIELD,
    }
)
BROADCAST_SIGNAL = Body(
    {
        "signalName": Field("string", "The signal name", required=True, min_length=1),
        "variables": VARIABLES_FIELD,
        "tenantId": TENANT_FIELD,
    }
)
EVALUATE_DECISION = Body(
    {
        "decisionDefinitionId": Field("string", "The decision id (its latest version)"),
        "decisionDefinitionKey": Field("key", "The decision definition key"),
        "variables": VARIABLES_FIELD,
        "tenantId": TENANT_FIELD,
    },
    "Either decisionDefinitionId or decisionDefinitionKey.",
)
PIN_CLOCK = Body(
    {"timestamp": Field("integer", "The time in epoch milliseconds to pin the clock at", required=True, minimum=0)}
)
SET_VARIABLES = Body(
    {
        "variables": Field("object", "The variables to set", required=True),
        "local": Field("boolean", "Set them on this scope only, instead of where they are defined"),
        "operationReference": OPERATION_REFERENCE,
    }
)


class CommandRoutes:
    """The command endpoints over one :class:`GatewayCommands`."""

    def __init__(
        self,
        commands: GatewayCommands,
        *,
        gateway_version: str,
        max_resource_bytes: int,
        clock_controlled: bool = False,
    ) -> None:
        self.commands = commands
        self.gateway_version = gateway_version
        self.max_resource_bytes = max_resource_bytes
        self.clock_controlled = clock_controlled

    # -- cluster ---------------------------------------------------------------------------------------------

    async def topology(self, request: web.Request) -> web.Response:
        topo = self.commands.topology()
        brokers = [
            {
                "nodeId": b.node_id,
                "brokerId": str(b.node_id),
                "host": b.host,
                "port": b.port,
                "version": b.version,
                "partitions": [
                    {
                        "partitionId": p.partition_id,
                        "role": p.role.lower(),
                        "health": "healthy" if p.healthy else "unhealthy",
                        "state": "active",
                    }
                    for p in b.partitions
                ],
            }
            for b in topo.brokers
        ]
        return json_response(
            {
                "brokers": brokers,
                "clusterId": None,
                "clusterSize": topo.cluster_size,
                "partitionsCount": topo.partitions_count,
                "replicationFactor": topo.replication_factor,
                "gatewayVersion": self.gateway_version,
                "lastCompletedChangeId": "-1",
            }
        )

    # -- resources -------------------------------------------------------------------------------------------

    async def deploy(self, request: web.Request) -> web.Response:
        if not request.content_type.startswith("multipart/"):
            invalid(
                f"Expected a multipart/form-data body with the files as 'resources' parts, but the content type is "
                f"'{request.content_type}'"
            )
        async with receiving_body(request):
            resources, tenant_id = await self._read_resources(request)
        tenant = self.commands.tenant("Deploy Resources", tenant_id)
        rec = await self.commands.deploy(resources, tenant)
        value = rec.value
        deployments: list[dict[str, Any]] = [
            {
                "processDefinition": {
                    "processDefinitionId": m["bpmnProcessId"],
                    "processDefinitionVersion": m["version"],
                    "resourceName": m["resourceName"],
                    "tenantId": tenant,
                    "processDefinitionKey": _key(m["processDefinitionKey"]),
                }
            }
            for m in value["processesMetadata"]
        ]
        deployments += [
            {
                "decisionDefinition": {
                    "decisionDefinitionId": m["decisionId"],
                    "version": m["version"],
                    "name": m["decisionName"],
                    "tenantId": tenant,
                    "decisionRequirementsId": m["decisionRequirementsId"],
                    "decisionDefinitionKey": _key(m["decisionKey"]),
                    "decisionRequirementsKey": _key(m["decisionRequirementsKey"]),
                }
            }
            for m in value.get("decisionsMetadata") or []
        ]
        deployments += [
            {
                "decisionRequirements": {
                    "decisionRequirementsId": m["decisionRequirementsId"],
                    "version": m["decisionRequirementsVersion"],
                    "decisionRequirementsName": m["decisionRequirementsName"],
                    "tenantId": tenant,
                    "resourceName": m["resourceName"],
                    "decisionRequirementsKey": _key(m["decisionRequirementsKey"]),
                }
            }
            for m in value.get("decisionRequirementsMetadata") or []
        ]
        deployments += [
            {
                "form": {
                    "formId": m["formId"],
                    "version": m["version"],
                    "resourceName": m["resourceName"],
                    "tenantId": tenant,
                    "formKey": _key(m["formKey"]),
                }
            }
            for m in value.get("formMetadata") or []
        ]
        # 8.9 names every kind on each item, null but the one deployed
        deployments = [{**dict.fromkeys(DEPLOYMENT_KINDS), **item} for item in deployments]
        return json_response({"deploymentKey": _key(rec.key), "tenantId": tenant, "deployments": deployments})

    async def _read_resources(self, request: web.Request) -> tuple[list[tuple[str, bytes]], str]:
        """The files of a multipart deployment body ('resources' parts), within the resource size bound, and the
        tenant its 'tenantId' part names ("" when none)."""
        resources: list[tuple[str, bytes]] = []
        tenant_id = ""
        total = 0
        try:
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if not isinstance(part, BodyPartReader):
                    invalid("Expected flat form parts, but got a nested multipart part")
                if part.name == "tenantId":
                    tenant_id = (await part.text()).strip()
                    self.commands.tenant("Deploy Resources", tenant_id)
                    continue
                if part.name != "resources":
                    invalid(f"Unknown form part '{part.name}'; the parts are: resources, tenantId")
                self.commands.check_deployment_size(len(resources) + 1)
                content = await part.read()
                total += len(content)
                if total > self.max_resource_bytes:
                    invalid(
                        f"Expected the resources to take at most {self.max_resource_bytes} bytes, but they take more"
                    )
                name = part.filename or ""
                if not name:
                    invalid("Expected every 'resources' part to have a file name (Content-Disposition filename)")
                resources.append((name, bytes(content)))
        except (ValueError, AssertionError, HttpProcessingError) as e:
            invalid(f"Expected a valid multipart/form-data body, but it is not: {e}")
        return resources, tenant_id

    async def delete_resource(self, request: web.Request) -> web.Response:
        await read_json(request, OPERATION_ONLY, optional=True)
        key = path_key(request, "resourceKey")
        await self.commands.delete_resource(key)
        return json_response({"resourceKey": _key(key), "batchOperation": None})

    # -- process instances -----------------------------------------------------------------------------------

    async def create_process_instance(self, request: web.Request) -> web.Response:
        body = await read_json(request, CREATE_INSTANCE)
        tenant = self.commands.tenant("Create Process Instance", body.get("tenantId", ""))
        if "processDefinitionKey" in body and "processDefinitionId" in body:
            invalid("Expected either 'processDefinitionId' or 'processDefinitionKey', but both given")
        if "processDefinitionKey" not in body and not body.get("processDefinitionId"):
            invalid("Expected either 'processDefinitionId' or 'processDefinitionKey', but none given")
        # fetchVariables and requestTimeout apply with awaitCompletion only; without it they are ignored, as in
        # Camunda (clients send their defaults for them on every creation)
        await_completion = body.get("awaitCompletion", False)
        rec = await self.commands.create_process_instance(
            body.get("processDefinitionId", ""),
            body.get("processDefinitionVersion", -1),
            body.get("processDefinitionKey", -1),
            check_variables(body.get("variables")),
            await_result=await_completion,
            fetch_variables=body.get("fetchVariables"),
            request_timeout_ms=body.get("requestTimeout", 0),
            business_id=body.get("businessId", ""),
            tags=body.get("tags"),
            start_instructions=[i["elementId"] for i in body.get("startInstructions") or []],
            tenant_id=tenant,
        )
        v = rec.value
        response = {
            "processDefinitionId": v["bpmnProcessId"],
            "processDefinitionVersion": v["version"],
            "tenantId": v.get("tenantId") or tenant,
            "variables": (v.get("variables") or {}) if await_completion else {},
            "processDefinitionKey": _key(v["processDefinitionKey"]),
            "processInstanceKey": _key(v["processInstanceKey"]),
            **business_fields(v),
        }
        return json_response(response)

    async def modify_process_instance(self, request: web.Request) -> web.Response:
        key = path_key(request, "processInstanceKey")
        body = await read_json(request, MODIFY_INSTANCE)
        activate = [
            ActivateInstruction(
                a["elementId"],
                _ancestor_key(a.get("ancestorElementInstanceKey")),
                _variable_instructions(a, a["elementId"]),
            )
            for a in body.get("activateInstructions") or []
        ]
        move = [_move(m) for m in body.get("moveInstructions") or []]
        terminate: list[int | str] = []
        for n, t in enumerate(body.get("terminateInstructions") or []):
            if ("elementInstanceKey" in t) == ("elementId" in t):
                invalid(f"Expected either 'elementInstanceKey' or 'elementId' in 'terminateInstructions[{n}]'")
            terminate.append(t["elementInstanceKey"] if "elementInstanceKey" in t else t["elementId"])
        await self.commands.modify_process_instance(key, activate, terminate, move)
        return no_content()

    async def assign_business_id(self, request: web.Request) -> web.Response:
        body = await read_json(request, ASSIGN_BUSINESS_ID)
        await self.commands.assign_business_id(path_key(request, "processInstanceKey"), body["businessId"])
        return no_content()

    async def migrate_process_instance(self, request: web.Request) -> web.Response:
        body = await read_json(request, MIGRATE_INSTANCE)
        mapping = [(m["sourceElementId"], m["targetElementId"]) for m in body["mappingInstructions"]]
        key = path_key(request, "processInstanceKey")
        await self.commands.migrate_process_instance(key, body["targetProcessDefinitionKey"], mapping)
        return no_content()

    async def cancel_process_instance(self, request: web.Request) -> web.Response:
        await read_json(request, OPERATION_ONLY, optional=True)
        await self.commands.cancel_process_instance(path_key(request, "processInstanceKey"))
        return no_content()

    async def set_variables(self, request: web.Request) -> web.Response:
        key = path_key(request, "elementInstanceKey")
        body = await read_json(request, SET_VARIABLES)
        variables = check_variables(body["variables"])
        await self.commands.set_variables(key, variables, local=body.get("local", False))
        return no_content()

    async def resolve_incident(self, request: web.Request) -> web.Response:
        await read_json(request, OPERATION_ONLY, optional=True)
        await self.commands.resolve_incident(path_key(request, "incidentKey"))
        return no_content()

    # -- the clock -------------------------------------------------------------------------------------------

    def _check_clock_controlled(self) -> None:
        """Moving the clock fires every due timer on every partition: only where a setting allows it (tests)."""
        if not self.clock_controlled:
            raise web.HTTPForbidden(
                text="The clock is not controllable here: set clock.controlled (WEIR_CLOCK_CONTROLLED=true) to pin "
                "and reset it, as zeebe.clock.controlled does for Camunda; meant for tests, not production"
            )

    async def pin_clock(self, request: web.Request) -> web.Response:
        self._check_clock_controlled()
        body = await read_json(request, PIN_CLOCK)
        await self.commands.pin_clock(body["timestamp"])
        return no_content()

    async def reset_clock(self, request: web.Request) -> web.Response:
        self._check_clock_controlled()
        await self.commands.reset_clock()
        return no_content()

    # -- jobs ------------------------------------------------------------------------------------------------

    async def activate_jobs(self, request: web.Request) -> web.StreamResponse:
        body = await read_json(request, ACTIVATE_JOBS)
        tenants = self.commands.tenants("Activate Jobs", body.get("tenantIds", []))
        activated: list[tuple[int, dict]] = []
        batches = self.commands.activate_jobs(
            body["type"],
            body.get("worker"),
            body["timeout"],
            body["maxJobsToActivate"],
            body.get("fetchVariable", []),
            body.get("requestTimeout", 0),
            tenant_ids=tenants,
        )
        try:
            async for batch in batches:
                activated.extend(batch)
        except BaseException:
            if activated:  # the request failed or was cancelled after some jobs were activated for it
                self.commands.give_back(activated)
            raise
        response = json_response({"jobs": [_activated_job(k, j) for k, j in activated]})
        try:
            await response.prepare(request)
            await response.write_eof()
        except (ConnectionError, RuntimeError):  # the client went away: its jobs go back at once
            if activated:
                self.commands.give_back(activated)
            raise
        return response

    async def complete_job(self, request: web.Request) -> web.Response:
        key = path_key(request, "jobKey")
        body = await read_json(request, COMPLETE_JOB, optional=True)
        result = None
        if "result" in body:
            given = body["result"]
            result = job_result(
                given.get("type", "userTask"),
                denied=given.get("denied", False),
                denied_reason=given.get("deniedReason", ""),
                corrections=given.get("corrections", {}),
                activate_elements=[
                    (item["elementId"], check_variables(item.get("variables")))
                    for item in given.get("activateElements", [])
                ],
                completion_condition_fulfilled=given.get("isCompletionConditionFulfilled", False),
                cancel_remaining_instances=given.get("isCancelRemainingInstances", False),
            )
        await self.commands.complete_job(key, check_variables(body.get("variables")), result=result)
        return no_content()

    async def fail_job(self, request: web.Request) -> web.Response:
        key = path_key(request, "jobKey")
        body = await read_json(request, FAIL_JOB, optional=True)
        await self.commands.fail_job(
            key,
            body.get("retries", 0),
            body.get("errorMessage", ""),
            body.get("retryBackOff", 0),
            check_variables(body.get("variables")),
        )
        return no_content()

    async def throw_error(self, request: web.Request) -> web.Response:
        key = path_key(request, "jobKey")
        body = await read_json(request, THROW_ERROR)
        await self.commands.throw_error(
            key, body["errorCode"], body.get("errorMessage", ""), check_variables(body.get("variables"))
        )
        return no_content()

    async def update_job(self, request: web.Request) -> web.Response:
        key = path_key(request, "jobKey")
        changeset = (await read_json(request, UPDATE_JOB))["changeset"]
        if not changeset:
            invalid("Expected 'changeset' to change at least one of 'retries' and 'timeout', but it is empty")
        if "retries" in changeset:
            await self.commands.update_job_retries(key, changeset["retries"])
        if "timeout" in changeset:
            await self.commands.update_job_timeout(key, changeset["timeout"])
        return no_content()

    # -- messages, signals, decisions ------------------------------------------------------------------------

    async def publish_message(self, request: web.Request) -> web.Response:
        body = await read_json(request, PUBLISH_MESSAGE)
        tenant = self.commands.tenant("Publish Message", body.get("tenantId", ""))
        rec = await self.commands.publish_message(
            body["name"],
            body.get("correlationKey", ""),
            body.get("timeToLive", 0),
            body.get("messageId", ""),
            check_variables(body.get("variables")),
            tenant,
        )
        return json_response({"tenantId": tenant, "messageKey": _key(rec.key)})

    async def correlate_message(self, request: web.Request) -> web.Response:
        body = await read_json(request, CORRELATE_MESSAGE)
        tenant = self.commands.tenant("Correlate Message", body.get("tenantId", ""))
        rec = await self.commands.correlate_message(
            body["name"], body.get("correlationKey", ""), check_variables(body.get("variables")), tenant
        )
        return json_response(
            {
                "tenantId": tenant,
                "messageKey": _key(rec.key),
                "processInstanceKey": _key(rec.value["processInstanceKey"]),
            }
        )

    async def broadcast_signal(self, request: web.Request) -> web.Response:
        body = await read_json(request, BROADCAST_SIGNAL)
        tenant = self.commands.tenant("Broadcast Signal", body.get("tenantId", ""))
        rec = await self.commands.broadcast_signal(body["signalName"], check_variables(body.get("variables")), tenant)
        return json_response({"tenantId": tenant, "signalKey": _key(rec.key)})

    async def evaluate_decision(self, request: web.Request) -> web.Response:
        body = await read_json(request, EVALUATE_DECISION)
        tenant = self.commands.tenant("Evaluate Decision", body.get("tenantId", ""))
        if "decisionDefinitionId" in body and "decisionDefinitionKey" in body:
            invalid("Expected either 'decisionDefinitionId' or 'decisionDefinitionKey', but both given")
        rec = await self.commands.evaluate_decision(
            body.get("decisionDefinitionId", ""),
            body.get("decisionDefinitionKey", -1),
            check_variables(body.get("variables")),
            tenant,
        )
        v = rec.value
        return json_response(
            {
                "decisionDefinitionId": v["decisionId"],
                "decisionDefinitionKey": _key(v["decisionKey"]),
                "decisionDefinitionName": v["decisionName"],
                "decisionDefinitionVersion": v["decisionVersion"],
                "decisionRequirementsId": v["decisionRequirementsId"],
                "decisionRequirementsKey": _key(v["decisionRequirementsKey"]),
                "output": v["decisionOutput"],
                "failedDecisionDefinitionId": v["failedDecisionId"] or None,
                "failureMessage": v["evaluationFailureMessage"] or None,
                "tenantId": v.get("tenantId") or tenant,
                "decisionInstanceKey": _key(rec.key),
                "decisionEvaluationKey": _key(rec.key),
                "evaluatedDecisions": [
                    _evaluated_decision(d, f"{rec.key}-{i}") for i, d in enumerate(v["evaluatedDecisions"], start=1)
                ],
            }
        )

    # -- the registry ----------------------------------------------------------------------------------------

    def endpoints(self) -> list[Endpoint]:
        none = (204, ("Done", None))
        return [
            Endpoint(
                "GET",
                "/v2/topology",
                "The cluster's brokers and their partitions",
                self.topology,
                "Cluster",
                responses={200: ("The topology", TOPOLOGY_RESPONSE)},
            ),
            Endpoint(
                "POST",
                "/v2/deployments",
                "Deploy BPMN, DMN and form resources",
                self.deploy,
                "Resource",
                multipart={
                    "type": "object",
                    "properties": {
                        "resources": {"type": "array", "items": {"type": "string", "format": "binary"}},
                        "tenantId": {"type": "string"},
                    },
                    "required": ["resources"],
                },
                responses={200: ("The deployed resources", DEPLOYMENT_RESPONSE)},
            ),
            Endpoint(
                "POST",
                "/v2/resources/{resourceKey}/deletion",
                "Delete a decision requirements graph (with its decisions) or a form",
                self.delete_resource,
                "Resource",
                body=OPERATION_ONLY,
                body_optional=True,
                responses={
                    200: (
                        "Deleted (at once: no batch operation)",
                        obj(
                            {"resourceKey": KEY, "batchOperation": {"type": ["object", "null"]}},
                            required=["resourceKey", "batchOperation"],
                        ),
                    )
                },
                errors=(404,),
            ),
            Endpoint(
                "POST",
                "/v2/process-instances",
                "Create a process instance (optionally awaiting its completion)",
                self.create_process_instance,
                "Process instance",
                body=CREATE_INSTANCE,
                responses={200: ("The created instance", CREATE_INSTANCE_RESPONSE)},
                errors=(404, 504),
            ),
            Endpoint(
                "POST",
                "/v2/process-instances/{processInstanceKey}/cancellation",
                "Cancel a process instance",
                self.cancel_process_instance,
                "Process instance",
                body=OPERATION_ONLY,
                body_optional=True,
                responses=dict([none]),
                errors=(404, 409),
            ),
            Endpoint(
                "POST",
                "/v2/process-instances/{processInstanceKey}/modification",
                "Modify a process instance: activate elements and terminate element instances, in one command",
                self.modify_process_instance,
                "Process instance",
                body=MODIFY_INSTANCE,
                responses=dict([none]),
                errors=(404, 409),
            ),
            Endpoint(
                "POST",
                "/v2/process-instances/{processInstanceKey}/migration",
                "Migrate a process instance to another process definition",
                self.migrate_process_instance,
                "Process instance",
                body=MIGRATE_INSTANCE,
                responses=dict([none]),
                errors=(404, 409),
                description="Every active element must be mapped to an element of the same type in the same flow "
                "scope; jobs, user tasks, incidents, variables and subscriptions move with their elements, as in Zeebe "
                "8.8. A refused migration changes nothing (409, or 400 for a mapping naming unknown elements).",
            ),
            Endpoint(
                "POST",
                "/v2/process-instances/{processInstanceKey}/business-id-assignment",
                "Give a running process instance without a business id one (Camunda 8.10)",
                self.assign_business_id,
                "Process instance",
                body=ASSIGN_BUSINESS_ID,
                responses=dict([none]),
                errors=(404, 409),
            ),
            Endpoint(
                "PUT",
                "/v2/element-instances/{elementInstanceKey}/variables",
                "Set variables on an element instance's scope",
                self.set_variables,
                "Element instance",
                body=SET_VARIABLES,
                responses=dict([none]),
                errors=(404, 409),
            ),
            Endpoint(
                "POST",
                "/v2/incidents/{incidentKey}/resolution",
                "Resolve an incident",
                self.resolve_incident,
                "Incident",
                body=OPERATION_ONLY,
                body_optional=True,
                responses=dict([none]),
                errors=(404, 409),
            ),
            Endpoint(
                "POST",
                "/v2/jobs/activation",
                "Activate jobs of a type (long-polling until some exist or requestTimeout passes)",
                self.activate_jobs,
                "Job",
                body=ACTIVATE_JOBS,
                responses={200: ("The activated jobs (possibly none)", ACTIVATION_RESPONSE)},
            ),
            Endpoint(
                "POST",
                "/v2/jobs/{jobKey}/completion",
                "Complete a job",
                self.complete_job,
                "Job",
                body=COMPLETE_JOB,
                body_optional=True,
                responses=dict([none]),
                errors=(404, 409),
            ),
            Endpoint(
                "POST",
                "/v2/jobs/{jobKey}/failure",
                "Fail a job (with retries left it is activated again, with none it raises an incident)",
                self.fail_job,
                "Job",
                body=FAIL_JOB,
                body_optional=True,
                responses=dict([none]),
                errors=(404, 409),
            ),
            Endpoint(
                "POST",
                "/v2/jobs/{jobKey}/error",
                "Throw a BPMN error from a job",
                self.throw_error,
                "Job",
                body=THROW_ERROR,
                responses=dict([none]),
                errors=(404, 409),
            ),
            Endpoint(
                "PATCH",
                "/v2/jobs/{jobKey}",
                "Change a job's retries and/or timeout",
                self.update_job,
                "Job",
                body=UPDATE_JOB,
                responses=dict([none]),
                errors=(404, 409),
            ),
            Endpoint(
                "POST",
                "/v2/messages/publication",
                "Publish a message (it waits timeToLive milliseconds to be correlated)",
                self.publish_message,
                "Message",
                body=PUBLISH_MESSAGE,
                responses={
                    200: (
                        "The published message",
                        obj({"tenantId": STRING, "messageKey": KEY}, required=["messageKey"]),
                    )
                },
                errors=(409,),
            ),
            Endpoint(
                "POST",
                "/v2/messages/correlation",
                "Correlate a message to the instance waiting for it now (it is not buffered: 404 when none waits)",
                self.correlate_message,
                "Message",
                body=CORRELATE_MESSAGE,
                responses={
                    200: (
                        "The correlated message and the process instance it correlated to",
                        obj(
                            {"tenantId": STRING, "messageKey": KEY, "processInstanceKey": KEY},
                            required=["messageKey", "processInstanceKey"],
                        ),
                    )
                },
                errors=(404,),
            ),
            Endpoint(
                "POST",
                "/v2/signals/broadcast",
                "Broadcast a signal",
                self.broadcast_signal,
                "Signal",
                body=BROADCAST_SIGNAL,
                responses={
                    200: ("The broadcast signal", obj({"tenantId": STRING, "signalKey": KEY}, required=["signalKey"]))
                },
            ),
            Endpoint(
                "PUT",
                "/v2/clock",
                "Pin the engine's clock at a time",
                self.pin_clock,
                "Clock",
                body=PIN_CLOCK,
                responses={204: ("The clock is pinned", None)},
                description="Processing time stands still at the given time on every partition (timers, job "
                "deadlines and message expiries fall due by it) until it is pinned again or reset.",
            ),
            Endpoint(
                "POST",
                "/v2/clock/reset",
                "Reset the engine's clock to the system time",
                self.reset_clock,
                "Clock",
                responses={204: ("The clock follows the system time again", None)},
            ),
            Endpoint(
                "POST",
                "/v2/decision-definitions/evaluation",
                "Evaluate a decision",
                self.evaluate_decision,
                "Decision definition",
                body=EVALUATE_DECISION,
                responses={
                    200: ("The evaluation (a failed evaluation says why in failureMessage)", EVALUATION_RESPONSE)
                },
                errors=(404,),
            ),
        ]


def _activated_job(key: int, job: dict) -> dict[str, Any]:
    rendered = {
        "jobKey": _key(key),
        "type": job["type"],
        "processDefinitionId": job["bpmnProcessId"],
        "processDefinitionVersion": job["processDefinitionVersion"],
        "processDefinitionKey": _key(job["processDefinitionKey"]),
        "processInstanceKey": _key(job["processInstanceKey"]),
        "elementId": job["elementId"],
        "elementInstanceKey": _key(job["elementInstanceKey"]),
        "customHeaders": job.get("customHeaders") or {},
        "worker": job.get("worker", ""),
        "retries": job["retries"],
        "deadline": job["deadline"],
        "variables": job.get("variables") or {},
        "tenantId": job.get("tenantId") or TENANT,
        "kind": job.get("jobKind") or "BPMN_ELEMENT",
        "listenerEventType": job.get("jobListenerEventType") or "UNSPECIFIED",
        "userTask": None,
        "physicalTenantId": PHYSICAL_TENANT,
        "priority": job.get("priority") or 0,
        "rootProcessInstanceKey": _optional_key(job.get("rootProcessInstanceKey")),
        **business_fields(job),
    }
    if job.get("userTask"):
        task = job["userTask"]
        rendered["userTask"] = {
            **task,
            "userTaskKey": _key(task["userTaskKey"]),
            "formKey": _key(task["formKey"]) if isinstance(task.get("formKey"), int) and task["formKey"] > 0 else None,
        }
    return rendered


def _optional_key(value: Any) -> str | None:
    """A key as text, or null where the record has none (absent, or the protocol's -1/0)."""
    return _key(value) if isinstance(value, int) and value > 0 else None


def _evaluated_decision(d: dict, evaluation_instance_key: str) -> dict[str, Any]:
    return {
        "decisionDefinitionId": d["decisionId"],
        "decisionDefinitionName": d["decisionName"],
        "decisionDefinitionVersion": d["decisionVersion"],
        "decisionDefinitionType": rest_decision_type(d["decisionType"]),
        "decisionDefinitionKey": _key(d["decisionKey"]),
        "decisionEvaluationInstanceKey": evaluation_instance_key,
        "output": d["decisionOutput"],
        "tenantId": d.get("tenantId") or TENANT,
        "matchedRules": [
            {
                "ruleId": r["ruleId"],
                "ruleIndex": r["ruleIndex"],
                "evaluatedOutputs": [
                    {
                        "outputId": o["outputId"],
                        "outputName": o["outputName"],
                        "outputValue": o["outputValue"],
                        "ruleId": r["ruleId"],
                        "ruleIndex": r["ruleIndex"],
                    }
                    for o in r["evaluatedOutputs"]
                ],
            }
            for r in d["matchedRules"]
        ],
        "evaluatedInputs": [
            {"inputId": i["inputId"], "inputName": i["inputName"], "inputValue": i["inputValue"]}
            for i in d["evaluatedInputs"]
        ],
    }
