"""Typed record values for the records the engine reads most: frozen, so a value can be shared, never changed.

Record values travel as dicts (msgpack on the log, JSON for exporters); the engine converts at that boundary with
``from_dict`` / ``to_dict`` and otherwise works with these types. Field names are the snake_case of Zeebe's record
JSON names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

TENANT: Final = "<default>"


@dataclass(frozen=True, slots=True)
class ProcessInstanceValue:
    """The value of a PROCESS_INSTANCE record: which element of which instance, inside which flow scope.

    - ``flow_scope_key``: the element instance of the enclosing process or sub-process (-1 for the process).
    - ``parent_*``: the calling instance and call activity, for instances started by a call activity (else -1).
    """

    bpmn_process_id: str
    version: int
    process_definition_key: int
    process_instance_key: int
    element_id: str
    flow_scope_key: int
    bpmn_element_type: str
    bpmn_event_type: str
    parent_process_instance_key: int = -1
    parent_element_instance_key: int = -1
    tenant_id: str = TENANT

    @property
    def is_root(self) -> bool:
        """The process itself (no enclosing flow scope)."""
        return self.flow_scope_key <= 0

    def for_element(
        self, element_id: str, element_type: str, event_type: str, flow_scope_key: int
    ) -> ProcessInstanceValue:
        """The value of another element of the same instance."""
        return ProcessInstanceValue(  # built directly: dataclasses.replace costs several times as much
            self.bpmn_process_id,
            self.version,
            self.process_definition_key,
            self.process_instance_key,
            element_id,
            flow_scope_key,
            element_type,
            event_type,
            self.parent_process_instance_key,
            self.parent_element_instance_key,
            self.tenant_id,
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProcessInstanceValue:
        return cls(
            bpmn_process_id=d["bpmnProcessId"],
            version=d["version"],
            process_definition_key=d["processDefinitionKey"],
            process_instance_key=d["processInstanceKey"],
            element_id=d["elementId"],
            flow_scope_key=d["flowScopeKey"],
            bpmn_element_type=d["bpmnElementType"],
            bpmn_event_type=d.get("bpmnEventType", "UNSPECIFIED"),
            parent_process_instance_key=d.get("parentProcessInstanceKey", -1),
            parent_element_instance_key=d.get("parentElementInstanceKey", -1),
            tenant_id=d.get("tenantId", TENANT),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "bpmnProcessId": self.bpmn_process_id,
            "version": self.version,
            "processDefinitionKey": self.process_definition_key,
            "processInstanceKey": self.process_instance_key,
            "elementId": self.element_id,
            "flowScopeKey": self.flow_scope_key,
            "bpmnElementType": self.bpmn_element_type,
            "bpmnEventType": self.bpmn_event_type,
            "parentProcessInstanceKey": self.parent_process_instance_key,
            "parentElementInstanceKey": self.parent_element_instance_key,
            "tenantId": self.tenant_id,
        }
