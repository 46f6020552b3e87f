"""Supervision of a partition's asyncio tasks: none of them may die silently.

A task that raises is logged with its partition, counted (``weir_partition_task_failures_total``), reported in the
partition's health (DOWN with the reason) and started again after a back-off that doubles up to a cap. Once the
restarted task has run for ``stable_s`` without failing, the partition reports healthy again. A task that returns
(closing, or a fail-stop that protects data) is not restarted: fail-stops stay fail-stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from broker import monitoring

TaskFactory = Callable[[], Coroutine[Any, Any, None]]


class TaskSupervisor:
    """Starts a partition's tasks and restarts the ones that fail (see the module docstring)."""

    def __init__(
        self,
        partition_id: int,
        log: logging.Logger | logging.LoggerAdapter[Any],
        *,
        initial_backoff_s: float = 0.1,
        max_backoff_s: float = 30.0,
        stable_s: float = 5.0,
    ) -> None:
        self.partition_id = partition_id
        self._log = log
        self._initial_backoff_s = initial_backoff_s
        self._max_backoff_s = max_backoff_s
        self._stable_s = stable_s
        self._failing: dict[str, str] = {}  # task name -> why it is down (until it has run stable_s again)
        self.failures = 0
        self.stopping = False
        self._stopped = asyncio.Event()

    @property
    def problem(self) -> str | None:
        """Why the partition is not healthy because of a failed task, or None."""
        if not self._failing:
            return None
        return "; ".join(f"{name}: {reason}" for name, reason in sorted(self._failing.items()))

    def stop(self) -> None:
        """Restart nothing from now on; a task waiting out its back-off ends at once."""
        self.stopping = True
        self._stopped.set()

    def spawn(self, name: str, factory: TaskFactory) -> asyncio.Task[None]:
        """Run ``factory()`` as a task named ``partition-<id>-<name>``, restarted whenever it raises."""
        return asyncio.get_running_loop().create_task(
            self._supervise(name, factory), name=f"partition-{self.partition_id}-{name}"
        )

    async def _supervise(self, name: str, factory: TaskFactory) -> None:
        loop = asyncio.get_running_loop()
        backoff = self._initial_backoff_s
        attempt = 0
        while not self.stopping:
            attempt += 1
            started = loop.time()
            healed = loop.call_later(self._stable_s, self._healed, name) if name in self._failing else None
            try:
                await factory()
                self._healed(name)
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if self.stopping:
                    return
                if loop.time() - started >= self._stable_s:
                    backoff = self._initial_backoff_s  # it had recovered: this is a new failure, not the same one
                self.failures += 1
                monitoring.PARTITION_TASK_FAILURES.labels(str(self.partition_id), name).inc()
                self._failing[name] = f"failed with {e!r}; restarting in {backoff:.1f}s (attempt {attempt})"
                self._log.exception(
                    "partition %d: task %s failed unexpectedly; restarting it in %.1fs",
                    self.partition_id,
                    name,
                    backoff,
                )
            finally:
                if healed is not None:
                    healed.cancel()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), backoff)
            backoff = min(self._max_backoff_s, backoff * 2)

    def _healed(self, name: str) -> None:
        if self._failing.pop(name, None) is not None:
            self._log.info("partition %d: task %s runs again", self.partition_id, name)
