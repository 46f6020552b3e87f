"""Typed record values for the records the engine reads most: frozen, so a value can be shared, never changed.

Record values travel as dicts (msgpack on the log, JSON for exporters); the engine converts at that boundary with
``from_dict`` / ``to_dict`` and otherwise works with these types. Field names are the snake_case of Zeebe's record
JSON names.

The typed values are named tuples rather than frozen dataclasses: a frozen dataclass sets each field through
``object.__setattr__`` when it is built, which makes one cost about four times as much (≈16,000 machine instructions
against ≈4,000 with ten fields), and the engine builds dozens per process instance. A named tuple is as immutable
(assigning a field raises ``AttributeError``) and as typed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

TENANT: Final = "<default>"


def tenant_of(value: Mapping[str, Any]) -> str:
    """The tenant a command or stored value names; a missing or empty one is the default tenant (values written
    before tenants existed carry none), which is all a single-tenant Weir has."""
    tenant: str = value.get("tenantId") or TENANT
    return tenant


class ProcessInstanceValue(NamedTuple):
    """The value of a PROCESS_INSTANCE record: which element of which instance, inside which flow scope.

    - ``flow_scope_key``: the element instance of the enclosing process or sub-process (-1 for the process).
    - ``parent_*``: the calling instance and call activity, for instances started by a call activity (else -1).
    - ``root_process_instance_key``: the instance at the top of its chain of call activities (Camunda 8.9): a root
      instance's own key, a called instance's caller's root (-1: a called instance's value written before Weir kept
      it). Left out of the record value while it is the instance's own key, as for every element of a root instance.
    - ``business_id`` and ``tags``: what the creator named the instance by (Camunda 8.9), carried by every element so
      that jobs, user tasks and exports have them; left out of the record value while empty, to keep records small.
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
    root_process_instance_key: int = -1
    tenant_id: str = TENANT
    business_id: str = ""
    tags: tuple[str, ...] = ()

    @property
    def is_root(self) -> bool:
        """The process itself (no enclosing flow scope)."""
        return self.flow_scope_key <= 0

    def for_element(
        self, element_id: str, element_type: str, event_type: str, flow_scope_key: int
    ) -> ProcessInstanceValue:
        """The value of another element of the same instance."""
        return _new(
            ProcessInstanceValue,
            (
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
                self.root_process_instance_key,
                self.tenant_id,
                self.business_id,
                self.tags,
            ),
        )

    @classmethod
    def of_record(cls, record: Any) -> ProcessInstanceValue:
        """The typed value of a PROCESS_INSTANCE record: the one it was written from, else decoded from its dict."""
        typed = record.typed
        return typed if typed is not None else cls.from_dict(record.value)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProcessInstanceValue:
        get = d.get
        parent = get("parentProcessInstanceKey", -1)
        root = get("rootProcessInstanceKey")
        if root is None:  # a root instance's element, or a value written before Weir kept it
            root = d["processInstanceKey"] if parent <= 0 else -1
        return _new(
            cls,
            (
                d["bpmnProcessId"],
                d["version"],
                d["processDefinitionKey"],
                d["processInstanceKey"],
                d["elementId"],
                d["flowScopeKey"],
                d["bpmnElementType"],
                get("bpmnEventType", "UNSPECIFIED"),
                parent,
                get("parentElementInstanceKey", -1),
                root,
                get("tenantId", TENANT),
                get("businessId", ""),
                tuple(get("tags") or ()),
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        d = {
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
        if self.root_process_instance_key != self.process_instance_key:
            d["rootProcessInstanceKey"] = self.root_process_instance_key
        if self.business_id:
            d["businessId"] = self.business_id
        if self.tags:
            d["tags"] = list(self.tags)
        return d


# Builds a named tuple from its fields without the generated ``__new__`` (a Python function) in between.
_new: Final = tuple.__new__
