"""What the history must hold for a partition log, worked out from the records alone, and what it does hold.

`expected_history` reads the log the simplest way (last word per key wins), independent of the exporter's code;
`stored_history` reads the tables back with plain SQL. Tests compare the two.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.protocol.enums import RecordType, ValueType
from broker.protocol.record import Record
from exporters.history.backends import sqlite_path

# v2 user task states: transitions in progress keep their name, a finished transition leaves the task CREATED.
_TASK_STATES = {
    "CREATING": "CREATING",
    "ASSIGNING": "ASSIGNING",
    "CLAIMING": "ASSIGNING",
    "UPDATING": "UPDATING",
    "COMPLETING": "COMPLETING",
    "CANCELING": "CANCELING",
    "COMPLETED": "COMPLETED",
    "CANCELED": "CANCELED",
}
_END_STATES = {"ELEMENT_COMPLETED": "COMPLETED", "ELEMENT_TERMINATED": "TERMINATED"}


@dataclass
class History:
    definitions: set[int] = field(default_factory=set)
    instances: dict[int, str] = field(default_factory=dict)  # key → state
    elements: dict[int, tuple[int, str, str]] = field(default_factory=dict)  # key → (instance, element id, state)
    variables: dict[int, tuple[str, Any, int, int]] = field(default_factory=dict)  # key → (name, value, scope, pi)
    incidents: dict[int, tuple[int, str]] = field(default_factory=dict)  # key → (instance, state)
    jobs: dict[int, str] = field(default_factory=dict)  # key → last job event
    workers: dict[int, str] = field(default_factory=dict)  # job key → the worker that activated it last
    decisions: set[int] = field(default_factory=set)  # decision evaluation keys
    user_tasks: dict[int, tuple[str, str]] = field(default_factory=dict)  # key → (v2 state, assignee)
    callers: dict[int, int] = field(default_factory=dict)  # called instance → the instance that called it

    def with_incident(self) -> set[int]:
        """Instances with an active incident of their own or in an instance they called (at any depth)."""
        found: set[int] = set()
        for instance, state in self.incidents.values():
            while state == "ACTIVE" and instance is not None and instance not in found:
                found.add(instance)
                instance = self.callers.get(instance)
        return found


def expected_history(records: Iterable[Record]) -> History:
    h = History()
    for r in records:
        if r.record_type != RecordType.EVENT:
            continue
        intent = r.intent_enum.name
        v = r.value
        if r.value_type == ValueType.PROCESS and intent == "CREATED":
            h.definitions.add(r.key)
        elif r.value_type == ValueType.PROCESS_INSTANCE:
            kind = v["bpmnElementType"]
            if kind == "SEQUENCE_FLOW":
                continue
            if intent == "ELEMENT_ACTIVATING":
                state = "ACTIVE"
            elif intent in _END_STATES:
                state = _END_STATES[intent]
            else:
                continue
            if kind == "PROCESS":
                h.instances[r.key] = state
                caller = v.get("parentProcessInstanceKey")
                if isinstance(caller, int) and caller > 0:
                    h.callers[r.key] = caller
            else:
                h.elements[r.key] = (v["processInstanceKey"], v["elementId"], state)
        elif r.value_type == ValueType.VARIABLE and intent in ("CREATED", "UPDATED"):
            h.variables[r.key] = (v["name"], v["value"], v["scopeKey"], v["processInstanceKey"])
        elif r.value_type == ValueType.INCIDENT and intent in ("CREATED", "RESOLVED"):
            h.incidents[r.key] = (v["processInstanceKey"], "ACTIVE" if intent == "CREATED" else "RESOLVED")
        elif r.value_type == ValueType.JOB:
            h.jobs[r.key] = intent
        elif r.value_type == ValueType.JOB_BATCH and intent == "ACTIVATED":
            for key in v["jobKeys"]:
                h.workers[key] = v["worker"]
        elif r.value_type == ValueType.DECISION_EVALUATION and intent in ("EVALUATED", "FAILED"):
            h.decisions.add(r.key)
        elif r.value_type == ValueType.USER_TASK and r.record_type == RecordType.EVENT:
            state = _TASK_STATES.get(intent, "CREATED")
            h.user_tasks[r.key] = (state, v.get("assignee") or "")
    return h


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    path = sqlite_path(url)
    if path is not None:
        connection = sqlite3.connect(path)
        try:
            return connection.execute(sql).fetchall()
        finally:
            connection.close()
    import psycopg

    with psycopg.connect(url, connect_timeout=5) as connection:
        return connection.execute(sql).fetchall()


def stored_history(url: str) -> History:
    h = History()
    h.definitions = {k for (k,) in query(url, "SELECT process_definition_key FROM process_definitions")}
    h.instances = dict(query(url, "SELECT process_instance_key, state FROM process_instances"))
    sql = "SELECT element_instance_key, process_instance_key, element_id, state FROM element_instances"
    h.elements = {k: (pi, e, s) for k, pi, e, s in query(url, sql)}
    sql = "SELECT variable_key, name, value, scope_key, process_instance_key FROM variables"
    h.variables = {k: (n, json.loads(v), s, pi) for k, n, v, s, pi in query(url, sql)}
    h.incidents = {
        k: (pi, s) for k, pi, s in query(url, "SELECT incident_key, process_instance_key, state FROM incidents")
    }
    h.jobs = dict(query(url, "SELECT job_key, state FROM jobs"))
    h.workers = dict(query(url, "SELECT job_key, worker FROM jobs WHERE worker IS NOT NULL"))
    h.decisions = {k for (k,) in query(url, "SELECT DISTINCT decision_evaluation_key FROM decision_instances")}
    h.user_tasks = {k: (s, a or "") for k, s, a in query(url, "SELECT user_task_key, state, assignee FROM user_tasks")}
    return h


_JOB_STATE_OF_EVENT = {"RECURRED_AFTER_BACKOFF": "CREATED", "YIELDED": "CREATED"}


def assert_history_matches(url: str, records: list[Record]) -> History:
    """Every instance, element, variable, incident, job and decision of the log is in the history, once, as the
    log last left it; nothing else is."""
    expected = expected_history(records)
    stored = stored_history(url)
    assert stored.definitions == expected.definitions
    assert stored.instances == expected.instances
    assert stored.elements == expected.elements
    assert stored.variables == expected.variables
    assert stored.incidents == expected.incidents
    assert stored.jobs == {k: _JOB_STATE_OF_EVENT.get(s, s) for k, s in expected.jobs.items()}
    assert stored.workers == expected.workers
    assert stored.decisions == expected.decisions
    assert stored.user_tasks == expected.user_tasks
    flagged = {k for (k,) in query(url, "SELECT process_instance_key FROM process_instances WHERE has_incident = 1")}
    assert flagged == expected.with_incident()
    return expected
