"""The step budget: no process instance keeps a partition busy without ever waiting.

A command and the follow-ups it causes, transitively, form a *chain*: a client command (or a checker's, or another
partition's) starts one, and each follow-up names its cause through ``source_position``. Elements that do not wait
(gateways, pass-through tasks, FEEL script tasks) are activated by follow-ups of the previous element, so a cycle of
them that a condition keeps open is a chain that never ends, and since follow-ups are processed before new commands
it would hold the partition for good.

The budget counts the element activations (ACTIVATE_ELEMENT commands) of each process instance within one chain;
the instances a multi-instance body starts over its collection (in the body's chain) are not loop steps and do not
count.
The one that goes beyond it is not run: the element stops ACTIVATING with an incident naming the budget, the chain of
that instance ends there, and resolving the incident starts a new chain (a new count) that activates the element again.

The count is a function of the log: the chain of a command follows source positions, and the commands of a chain are
processed in log order, so the n-th activation of an instance in a chain is the same record whichever leader
processes it. Replay applies the incident event like any other. Only the counters of chains begun before this
replica started leading (commands still queued at a fail-over or restart) are not in memory: such a chain counts
again from zero, which can postpone an incident by at most one budget, never bring one early.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from broker.protocol.enums import ProcessInstanceIntent, ValueType
from broker.protocol.record import Record

DEFAULT_MAX_STEPS_PER_INSTANCE: Final = 10_000

_ACTIVATE: Final = int(ProcessInstanceIntent.ACTIVATE_ELEMENT)
_PROCESS_INSTANCE: Final = ValueType.PROCESS_INSTANCE


class StepBudget:
    """Counts element activations per (chain, process instance); ``limit`` ≤ 0 turns the budget off."""

    def __init__(self, limit: int = DEFAULT_MAX_STEPS_PER_INSTANCE) -> None:
        self.limit = limit
        self._root_of: dict[int, int] = {}  # command position → position of the command that began its chain
        self._steps: dict[tuple[int, int], int] = {}  # (chain root, process instance key) → activations so far
        self._bodies: dict[int, int] = {}  # multi-instance body element instance key → its chain root

    def charge(self, command: Record) -> str | None:
        """Count ``command`` (about to be processed, in log order) in its chain.

        Returns the incident message when it is an element activation beyond the budget, else None.
        """
        source = command.source_position
        root = self._root_of.get(source, source) if source >= 0 else command.position
        self._root_of[command.position] = root
        if command.intent != _ACTIVATE or command.value_type != _PROCESS_INSTANCE:
            return None
        value = command.value
        if value.get("bpmnElementType") == "MULTI_INSTANCE_BODY":
            self._bodies[command.key] = root
        elif self._bodies and self._bodies.get(value.get("flowScopeKey", -1)) == root:
            return None  # an instance its multi-instance body starts: a loop over a collection, not a cycle
        instance = int(value.get("processInstanceKey", -1))
        key = (root, instance)
        steps = self._steps.get(key, 0) + 1
        self._steps[key] = steps
        if self.limit <= 0 or steps <= self.limit:
            return None
        element_id = value.get("elementId", "?")
        return (
            f"Process instance {instance} activated {self.limit} elements without reaching a wait state (the step "
            f"budget per instance, broker.maxStepsPerInstance = {self.limit}), so it was stopped at '{element_id}' "
            "to keep the partition serving other instances. A loop without a wait state is likely (e.g. a gateway "
            "whose condition stays true): change the variables that keep it going, then resolve this incident to "
            "continue."
        )

    def forget_processed(self, pending: Iterable[Record]) -> None:
        """Keep only what the ``pending`` commands (queued follow-ups) still need to find their chains."""
        sources = {record.source_position for record in pending}
        if not sources:
            self.clear()
            return
        self._root_of = {p: r for p, r in self._root_of.items() if p in sources}
        roots = {self._root_of.get(s, s) for s in sources}
        self._steps = {k: n for k, n in self._steps.items() if k[0] in roots}
        self._bodies = {k: r for k, r in self._bodies.items() if r in roots}

    def clear(self) -> None:
        """Forget every chain (a rolled-back round, a change of leader): counts start again from zero."""
        self._root_of.clear()
        self._steps.clear()
        self._bodies.clear()
