"""What the crash and cluster audits agree on: which events bring an entity into the world, and client options."""

from broker.protocol.enums import (
    DeploymentIntent,
    IncidentIntent,
    JobBatchIntent,
    JobIntent,
    ProcessInstanceCreationIntent,
    ProcessInstanceIntent,
    ProcessIntent,
    RecordType,
    ValueType,
    VariableDocumentIntent,
    VariableIntent,
)
from broker.protocol.record import Record

# Reconnect fast after a broker is killed, so a load loop keeps going.
CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 300),
]

# Events that bring a new entity into the world under a fresh key. An instance's creation event shares the key
# of the process instance (its PROCESS element), which is the same entity.
BIRTHS = {
    (ValueType.PROCESS, ProcessIntent.CREATED): "process",
    (ValueType.DEPLOYMENT, DeploymentIntent.CREATED): "deployment",
    (ValueType.PROCESS_INSTANCE_CREATION, ProcessInstanceCreationIntent.CREATED): "process-instance",
    (ValueType.PROCESS_INSTANCE, ProcessInstanceIntent.ELEMENT_ACTIVATING): "element",
    (ValueType.JOB, JobIntent.CREATED): "job",
    (ValueType.JOB_BATCH, JobBatchIntent.ACTIVATED): "job-batch",
    (ValueType.VARIABLE, VariableIntent.CREATED): "variable",
    (ValueType.VARIABLE_DOCUMENT, VariableDocumentIntent.UPDATED): "variable-document",
    (ValueType.INCIDENT, IncidentIntent.CREATED): "incident",
}


def entity_of(rec: Record) -> tuple[str, int] | None:
    """``(kind, key)`` when ``rec`` is the birth of an entity, else None."""
    kind = BIRTHS.get((rec.value_type, rec.intent))
    if kind is None or rec.record_type != RecordType.EVENT or rec.key <= 0:
        return None
    if kind == "element" and rec.value["bpmnElementType"] == "PROCESS":
        kind = "process-instance"
    return kind, rec.key
