"""The element-instance entity: one running element of a process instance (the process itself included)."""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from broker.protocol.values import ProcessInstanceValue


class ElementInstance(NamedTuple):
    """What the engine keeps about an element instance while it runs.

    - ``state``: the last lifecycle intent (a ``ProcessInstanceIntent`` ELEMENT_* value).
    - ``children``: element instances inside it (flow scopes only).
    - ``flows``: sequence flows taken inside it whose target has not been activated yet (tokens in flight).
    - ``job_key``: the job it waits for, or -1.
    - ``activated_children`` / ``completed_children`` / ``terminated_children``: how many children it has had
      (flow scopes only; a multi-instance body counts its instances with them, and numbers its loop with the first).
    - ``called_child_key``: for a call activity, the process instance it started (kept after that ended), or -1.
    - ``listener_index``: how many execution listener jobs of the current event type (start while activating, end
      while completing) were created; the next one to run, or where the element's own behaviour goes on.

    Frozen: a change is a new instance (the ``with_*`` / ``after_*`` methods) written back through the repository,
    so no caller can change what another one holds. The methods build the copy directly: appliers make one for
    almost every event, and ``_replace`` costs several times as much. A named tuple for the reason given in
    :mod:`broker.protocol.values`.
    """

    key: int
    state: int
    value: ProcessInstanceValue
    children: int = 0
    flows: int = 0
    job_key: int = -1
    activated_children: int = 0
    completed_children: int = 0
    terminated_children: int = 0
    called_child_key: int = -1
    listener_index: int = 0

    def _copy(
        self,
        state: int,
        children: int,
        flows: int,
        job_key: int,
        activated: int,
        completed: int,
        terminated: int,
        called: int,
    ) -> ElementInstance:
        return _new(
            ElementInstance,
            (
                self.key,
                state,
                self.value,
                children,
                flows,
                job_key,
                activated,
                completed,
                terminated,
                called,
                self.listener_index,
            ),
        )

    def with_state(self, state: int) -> ElementInstance:
        return self._copy(
            state,
            self.children,
            self.flows,
            self.job_key,
            self.activated_children,
            self.completed_children,
            self.terminated_children,
            self.called_child_key,
        )

    def with_flows(self, flows: int) -> ElementInstance:
        """Sequence flows taken inside it and not yet consumed by an activation."""
        return self._copy(
            self.state,
            self.children,
            flows,
            self.job_key,
            self.activated_children,
            self.completed_children,
            self.terminated_children,
            self.called_child_key,
        )

    def with_job_key(self, job_key: int) -> ElementInstance:
        return self._copy(
            self.state,
            self.children,
            self.flows,
            job_key,
            self.activated_children,
            self.completed_children,
            self.terminated_children,
            self.called_child_key,
        )

    def with_called_child(self, key: int) -> ElementInstance:
        return self._copy(
            self.state,
            self.children,
            self.flows,
            self.job_key,
            self.activated_children,
            self.completed_children,
            self.terminated_children,
            key,
        )

    def with_listener_index(self, index: int) -> ElementInstance:
        return ElementInstance(
            self.key,
            self.state,
            self.value,
            self.children,
            self.flows,
            self.job_key,
            self.activated_children,
            self.completed_children,
            self.terminated_children,
            self.called_child_key,
            index,
        )

    def after_child_activated(self, flows_consumed: int) -> ElementInstance:
        """A child is ACTIVATING: one more child, the sequence flows its activation consumed gone."""
        return self._copy(
            self.state,
            self.children + 1,
            self.flows - flows_consumed,
            self.job_key,
            self.activated_children + 1,
            self.completed_children,
            self.terminated_children,
            self.called_child_key,
        )

    def after_child_ended(self, *, completed: bool, flows_in_flight: int = 0) -> ElementInstance:
        """A child is COMPLETED or TERMINATED (``flows_in_flight``: a token it left travelling, e.g. a link jump)."""
        return self._copy(
            self.state,
            self.children - 1,
            self.flows + flows_in_flight,
            self.job_key,
            self.activated_children,
            self.completed_children + int(completed),
            self.terminated_children + int(not completed),
            self.called_child_key,
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ElementInstance:
        get = d.get
        return _new(
            cls,
            (
                d["key"],
                d["state"],
                ProcessInstanceValue.from_dict(d["value"]),
                get("children", 0),
                get("flows", 0),
                get("jobKey", -1),
                get("activatedChildren", 0),
                get("completedChildren", 0),
                get("terminatedChildren", 0),
                get("calledChildKey", -1),
                get("listenerIndex", 0),
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        d = {
            "key": self.key,
            "state": self.state,
            "value": self.value.to_dict(),
            "children": self.children,
            "flows": self.flows,
            "jobKey": self.job_key,
        }
        if self.activated_children:  # only flow scopes have children: leave the zeros of the others out
            d["activatedChildren"] = self.activated_children
            d["completedChildren"] = self.completed_children
            d["terminatedChildren"] = self.terminated_children
        if self.called_child_key > 0:  # only call activities have one: other instances are stored as before
            d["calledChildKey"] = self.called_child_key
        if self.listener_index:  # only elements with execution listeners count them
            d["listenerIndex"] = self.listener_index
        return d


_new: Final = tuple.__new__  # builds the tuple without the generated ``__new__`` (a Python function) in between
