"""An asyncio event loop on simulated time: the production coroutines run unchanged, only the clock is swapped.

- ``time()`` is a number the loop advances itself: when nothing is ready, it jumps straight to the next timer, so a
  simulated minute of heartbeats and timeouts passes in the CPU time its callbacks take.
- There are no threads: ``run_in_executor`` runs the function at once (an fsync in the simulation is a call on the
  simulated disk) and ``call_soon_threadsafe`` is ``call_soon``.
- There is no I/O: nothing may open a socket or wait on a file descriptor (the base loop refuses readers and writers).

With the callbacks of a run fixed by its inputs, the order in which they run is fixed too (ready callbacks in FIFO
order, timers by due time and then by scheduling order), so a seed replays the same interleaving.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class _NoIO:
    """Stands in for the selector: a "poll" with a timeout is the moment the loop lets simulated time pass."""

    def __init__(self, loop: SimLoop) -> None:
        self._loop = loop

    def select(self, timeout: float | None) -> list[Any]:
        if timeout is None:
            raise RuntimeError("the simulated loop has nothing ready and no timer: it would wait forever")
        if timeout > 0:
            self._loop.advance(timeout)
        return []

    def close(self) -> None:
        return


class SimLoop(asyncio.BaseEventLoop):
    """See the module docstring."""

    def __init__(self, start: float = 0.0) -> None:
        super().__init__()
        self._now = start
        self._selector = _NoIO(self)  # type: ignore[assignment]
        # A simulated slow disk: how long each executor call (an fsync) takes to answer; None: at once.
        self.executor_delay: Callable[[], float] | None = None

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move simulated time forward (the loop does this itself when idle; faults may jump it further)."""
        self._now += seconds

    def _process_events(self, event_list: list[Any]) -> None:
        return

    def _write_to_self(self) -> None:
        return

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., Any], *args: Any
    ) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = self.create_future()
        delay = self.executor_delay() if self.executor_delay is not None else 0.0
        if delay > 0:
            # the work happens when it ends (an fsync is durable only once it returned): a crash before loses it
            self.call_later(delay, _run_into, future, func, args)
        else:
            _run_into(future, func, args)
        return future


def _run_into(future: asyncio.Future[Any], func: Callable[..., Any], args: tuple[Any, ...]) -> None:
    if future.done():  # cancelled: the caller is gone (a crashed replica), and so is its work
        return
    try:
        result = func(*args)
    except BaseException as e:  # handed to the awaiting coroutine, as an executor would
        future.set_exception(e)
        return
    future.set_result(result)
