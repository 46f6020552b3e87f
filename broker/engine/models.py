"""Parsed process models, cached by process definition key.

Deployment stores the resource bytes in state; the parsed, immutable model is derived from them on first use (after a
restart too), so the cache is never a source of truth and replay stays deterministic.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.engine.bpmn import Process, parse_bpmn

ProcessLoader = Callable[[int], "dict | None"]


class UnknownProcessError(LookupError):
    pass


class ModelCache:
    """Process key -> parsed Process. ``loader`` reads the stored process record from state."""

    def __init__(self, loader: ProcessLoader) -> None:
        self._loader = loader
        self._models: dict[int, Process] = {}

    def put(self, key: int, process: Process) -> None:
        self._models[key] = process

    def get(self, key: int) -> Process:
        process = self._models.get(key)
        if process is None:
            stored = self._loader(key)
            if stored is None:
                raise UnknownProcessError(f"no process definition with key {key}")
            for p in parse_bpmn(stored["resource"], stored["resourceName"]):
                if p.id == stored["bpmnProcessId"]:
                    process = p
                    break
            else:
                raise UnknownProcessError(f"process {stored['bpmnProcessId']} missing from its resource")
            self._models[key] = process
        return process

    def remove(self, key: int) -> None:
        """Forget a deleted definition's model."""
        self._models.pop(key, None)

    def clear(self) -> None:
        self._models.clear()
