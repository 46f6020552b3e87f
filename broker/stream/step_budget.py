"""The step budget: no process instance keeps a partition busy without ever waiting.

A command and the follow-ups it causes, transitively, form a *chain*: a client command (or a checker's, or another
partition's) starts one, and each follow-up names its cause through ``source_position``. Elements that do not wait
(gateways, pass-through tasks, FEEL script tasks) are activated by follow-ups of the previous element, so a cycle of
them that a condition keeps open is a chain that never ends: client commands are still served between its steps
(see scheduling.py), but it would fill the log and take most of the partition's time for good.

The budget counts the steps of each process instance within one chain: the commands the engine names as steps
(``Engine.STEP_COMMAND``, handed in when the budget is built: element activations), so this layer names no intent;
the instances a multi-instance body starts over its collection (in the body's chain) are not loop steps and do not
count.
The one that goes beyond it is not run: the element stops ACTIVATING with an incident naming the budget, the chain of
that instance ends there, and resolving the incident starts a new chain (a new count) that activates the element again.

The same chains bound how many process instances a chain may start without a parent (signal start events: a
signal whose started instances broadcast it again, each instance short, none over the step budget). The instance
beyond ``max_chain_instances`` stops ACTIVATING with an incident the same way; the stop is logged and counted per chain
(``weir_signal_chains_stopped_total``). Called instances (call activities) are bounded by the process depth, which
cannot bound a recursion that fans out (a process calling itself twice in parallel doubles its instances at each level
long before the depth limit): so a chain may also start at most ``max_recursive_instances`` called instances of a
process already on their call stack within the chain; beyond, each stops ACTIVATING with an incident the same way
(logged and counted per chain: ``weir_recursive_chains_stopped_total``). Other called instances, such as those of a
multi-instance call activity over a large collection, do not count.

The count is a function of the log: the chain of a command follows source positions, and the commands of a chain are
processed in log order, so the n-th activation of an instance in a chain is the same record whichever leader
processes it. Replay applies the incident event like any other. Only the counters of chains begun before this
replica started leading (commands still queued at a fail-over or restart) are not in memory: such a chain counts
again from zero, which can postpone an incident by at most one budget, never bring one early.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

from broker import monitoring
from broker.protocol.enums import ValueType
from broker.protocol.record import Record

DEFAULT_MAX_STEPS_PER_INSTANCE: Final = 10_000
DEFAULT_MAX_CHAIN_INSTANCES: Final = 1000

# The chain bounds, and at a chain's first stop: the counter of chains each stopped, what the warning says started,
# and its likely cause.
SIGNAL_CHAIN: Final = "signal chain"
RECURSION: Final = "recursion"
_CHAIN_REPORTS: Final = {
    SIGNAL_CHAIN: (
        monitoring.SIGNAL_CHAINS_STOPPED,
        "signal broadcasts started %d process instances",
        "a process that broadcasts the signal that starts it?",
    ),
    RECURSION: (
        monitoring.RECURSIVE_CHAINS_STOPPED,
        "calls started %d instances of processes already on their call stack",
        "a process calling itself without end?",
    ),
}


class StepBudget:
    """Counts steps (element activations) per (chain, process instance) and instances started per chain; a limit ≤ 0
    turns its count off. ``step``: the (value type, intent) of the command that is one step, from the engine."""

    __slots__ = (
        "_ancestry",
        "_bodies",
        "_chain_stops",
        "_recursive",
        "_root_of",
        "_started",
        "_step_intent",
        "_step_type",
        "_steps",
        "limit",
        "max_chain_instances",
        "max_recursive_instances",
    )

    def __init__(
        self,
        limit: int = DEFAULT_MAX_STEPS_PER_INSTANCE,
        max_chain_instances: int = DEFAULT_MAX_CHAIN_INSTANCES,
        max_recursive_instances: int = DEFAULT_MAX_CHAIN_INSTANCES,
        *,
        step: tuple[ValueType, int],
    ) -> None:
        self._step_type, self._step_intent = step[0], int(step[1])
        self.limit = limit
        self.max_chain_instances = max_chain_instances
        self.max_recursive_instances = max_recursive_instances
        self._root_of: dict[int, int] = {}  # command position → position of the command that began its chain
        self._steps: dict[tuple[int, int], int] = {}  # (chain root, process instance key) → activations so far
        self._bodies: dict[int, int] = {}  # multi-instance body element instance key → its chain root
        self._started: dict[int, int] = {}  # chain root → process instances started without a parent so far
        # process instance key started in a chain → (chain root, the process ids on its call stack, its own included)
        self._ancestry: dict[int, tuple[int, frozenset[str]]] = {}
        self._recursive: dict[int, int] = {}  # chain root → called instances of a process on their call stack so far
        # Activations stopped by a chain bound, by command position → the bound (SIGNAL_CHAIN or RECURSION) when it is
        # the chain's first stop (logged and counted), "" for a later one.
        self._chain_stops: dict[int, str] = {}

    def charge(self, command: Record) -> str | None:
        """Count ``command`` (about to be processed, in log order) in its chain.

        Returns the incident message when it is a step beyond the budget, else None.
        """
        source = command.source_position
        root = self._root_of.get(source, source) if source >= 0 else command.position
        self._root_of[command.position] = root
        if command.intent != self._step_intent or command.value_type != self._step_type:
            return None
        value = command.value
        if value.get("bpmnElementType") == "MULTI_INSTANCE_BODY":
            self._bodies[command.key] = root
        elif self._bodies and self._bodies.get(value.get("flowScopeKey", -1)) == root:
            return None  # an instance its multi-instance body starts: a loop over a collection, not a cycle
        instance = int(value.get("processInstanceKey", -1))
        if value.get("bpmnElementType") == "PROCESS":
            stop = self._charge_instance(command, root, instance, value)
            if stop is not None:
                return stop
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

    def _charge_instance(self, command: Record, root: int, instance: int, value: dict) -> str | None:
        """Count a process instance's activation: parentless ones per signal chain, recursive called ones per chain."""
        process_id = str(value.get("bpmnProcessId", ""))
        parent = int(value.get("parentProcessInstanceKey", -1))
        if parent <= 0:
            self._ancestry[instance] = (root, frozenset((process_id,)))
            started = self._started.get(root, 0) + 1
            self._started[root] = started
            if 0 < self.max_chain_instances < started:
                self._chain_stops[command.position] = SIGNAL_CHAIN if started == self.max_chain_instances + 1 else ""
                return self._chain_message(instance, value)
            return None
        # The parent's call stack is known when the parent started in this chain (a caller that waited first begins
        # a new chain: its call is counted from there).
        above = self._ancestry.get(parent)
        stack = above[1] if above is not None and above[0] == root else frozenset()
        self._ancestry[instance] = (root, stack | {process_id})
        if process_id not in stack:
            return None
        recursive = self._recursive.get(root, 0) + 1
        self._recursive[root] = recursive
        if 0 < self.max_recursive_instances < recursive:
            self._chain_stops[command.position] = RECURSION if recursive == self.max_recursive_instances + 1 else ""
            return (
                f"Process instance {instance} of '{process_id}' was not started: one chain of calls without a wait "
                f"state started {self.max_recursive_instances} instances of processes already on their call stack "
                f"(broker.maxRecursiveInstancesPerChain = {self.max_recursive_instances}). A process that calls "
                "itself without end is likely (e.g. twice in parallel, which the depth limit cannot stop in time): "
                "cancel the root process instance, or resolve this incident to let the chain go on."
            )
        return None

    def _chain_message(self, instance: int, value: dict) -> str:
        process_id = value.get("bpmnProcessId", "?")
        return (
            f"Process instance {instance} of '{process_id}' was not started: one chain of signal broadcasts (a signal, "
            f"the instances its start events start, the signals they broadcast without waiting, and so on) started "
            f"{self.max_chain_instances} process instances already (broker.maxInstancesPerSignalChain = "
            f"{self.max_chain_instances}). A process that broadcasts the signal that starts it is likely: deploy a "
            "version that does not (or that waits before it broadcasts), then cancel this instance, or resolve this "
            "incident to let the chain go on."
        )

    def report(self, stopped: Iterable[Record], partition_id: int, log: logging.Logger | logging.LoggerAdapter) -> None:
        """Log and count the activations of a committed round that were stopped with an incident."""
        label = str(partition_id)
        for command in stopped:
            value = command.value
            if command.position not in self._chain_stops:
                monitoring.INSTANCES_STOPPED_BY_BUDGET.labels(label).inc()
                log.warning(
                    "partition %d: process instance %s stopped by the step budget (%d element activations without "
                    "a wait state) at '%s'; an incident waits for its resolution",
                    partition_id,
                    value.get("processInstanceKey"),
                    self.limit,
                    value.get("elementId"),
                )
                continue
            bound = self._chain_stops.pop(command.position)
            if not bound:
                continue  # a later stop of a chain already reported
            counter, started, cause = _CHAIN_REPORTS[bound]
            counter.labels(label).inc()
            log.warning(
                "partition %d: a chain of %s; instance %s of '%s' (key %s) was stopped with an incident, and so is "
                "every further one of this chain (%s)",
                partition_id,
                started % (self.max_chain_instances if bound == SIGNAL_CHAIN else self.max_recursive_instances),
                value.get("processInstanceKey"),
                value.get("bpmnProcessId"),
                command.key,
                cause,
            )

    def forget_processed(self, pending: Iterable[Record]) -> None:
        """Keep only what the ``pending`` commands (queued follow-ups) still need to find their chains."""
        sources = {record.source_position for record in pending}
        if not sources:
            self._forget_chains()
            return
        self._root_of = {p: r for p, r in self._root_of.items() if p in sources}
        roots = {self._root_of.get(s, s) for s in sources}
        self._steps = {k: n for k, n in self._steps.items() if k[0] in roots}
        self._bodies = {k: r for k, r in self._bodies.items() if r in roots}
        self._started = {r: n for r, n in self._started.items() if r in roots}
        self._recursive = {r: n for r, n in self._recursive.items() if r in roots}
        self._ancestry = {k: a for k, a in self._ancestry.items() if a[0] in roots}

    def clear(self) -> None:
        """Forget every chain (a rolled-back round, a change of leader): counts start again from zero."""
        self._forget_chains()
        self._chain_stops.clear()

    def _forget_chains(self) -> None:
        self._root_of.clear()
        self._steps.clear()
        self._bodies.clear()
        self._started.clear()
        self._recursive.clear()
        self._ancestry.clear()
