"""Deliberately injected bugs, for proving that the simulator catches what it claims to catch.

Each bug is a small, realistic mistake in production code (named after the promise it breaks), switched on only for
one simulated run by patching the production function with a broken variant: ``weir sim --inject-bug NAME`` or
``with injected("NAME"): ...``. The production code carries no test switch of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.log import LogBlock
    from broker.protocol.record import Record
    from broker.stream import replay

# Each bug imports the production code it patches when it is switched on: the names of the bugs (``weir sim
# --inject-bug``'s choices, built for every ``weir`` command) come without importing the engine.


def _ack_before_commit() -> Iterator[None]:
    """The round is answered before its block is committed: the commit runs in the background."""
    from broker.stream.commit import LocalCommit, RaftCommit

    originals = {seam: seam.commit for seam in (LocalCommit, RaftCommit)}

    def early(original: Any) -> Any:
        async def commit(self: Any, block: LogBlock) -> None:
            task = asyncio.get_running_loop().create_task(original(self, block))
            _keep.add(task)
            task.add_done_callback(_keep.discard)

        return commit

    for seam, original in originals.items():
        seam.commit = early(original)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for seam, original in originals.items():
            seam.commit = original  # type: ignore[method-assign]


def _skip_fsync() -> Iterator[None]:
    """Every other flush of the log returns without making anything durable (a lost fsync)."""
    from broker.log import MemoryLog

    original = MemoryLog.flush
    calls = [0]

    def flush(self: MemoryLog) -> int:
        calls[0] += 1
        if calls[0] % 2 == 0:
            return self.commit_position
        return original(self)

    MemoryLog.flush = flush  # type: ignore[method-assign]
    try:
        yield
    finally:
        MemoryLog.flush = original  # type: ignore[method-assign]


def _apply_event_twice() -> Iterator[None]:
    """The leader applies each process-instance event it writes twice (replay applies it once)."""
    from broker.engine.context import ProcessingContext

    original = ProcessingContext.instance_event

    def instance_event(self: ProcessingContext, intent: Any, key: int, value: Any, as_dict: Any = None) -> Record:
        record = original(self, intent, key, value, as_dict)
        self._apply_event(self.state, record)
        return record

    ProcessingContext.instance_event = instance_event  # type: ignore[method-assign]
    try:
        yield
    finally:
        ProcessingContext.instance_event = original  # type: ignore[method-assign]


def _forget_keys_on_recovery() -> Iterator[None]:
    """Recovery does not raise the key generator past the keys in the log: a restarted leader reissues keys."""
    from broker.protocol.keys import KeyGenerator

    original = KeyGenerator.observe

    def observe(self: KeyGenerator, key: int) -> None:
        return None

    KeyGenerator.observe = observe  # type: ignore[method-assign]
    try:
        yield
    finally:
        KeyGenerator.observe = original  # type: ignore[method-assign]


def _drop_pending_follow_ups() -> Iterator[None]:
    """Recovery forgets the follow-up commands that were written but not processed before the crash."""
    from broker.stream.core import StreamCore

    original = StreamCore.replay

    def replay_(self: StreamCore, blocks: Any) -> replay.ReplayResult:
        result = original(self, blocks)
        self.queue.clear()
        return result

    StreamCore.replay = replay_  # type: ignore[method-assign]
    try:
        yield
    finally:
        StreamCore.replay = original  # type: ignore[method-assign]


def _keep_due_work_on_leader_change() -> Iterator[None]:
    """A replica that stops leading keeps its bookkeeping of handed-out due commands (timers, deadlines): the ones
    that were still in its inbox are never written, and when it leads again it thinks they were."""
    from broker.engine.scheduled import ScheduledWork

    original = ScheduledWork.reset

    def reset(self: ScheduledWork) -> None:
        return None

    ScheduledWork.reset = reset  # type: ignore[method-assign]
    try:
        yield
    finally:
        ScheduledWork.reset = original  # type: ignore[method-assign]


def _identity_on_one_partition() -> Iterator[None]:
    """An identity change is answered by the first partition at once and never handed to the others: the other
    partitions keep checking commands against the old users, groups and grants."""
    from broker.engine import identity

    original = identity._finish

    def finish(ctx: Any, cmd: Record, event: Record) -> None:
        ctx.respond(event)

    identity._finish = finish
    try:
        yield
    finally:
        identity._finish = original


_keep: set[asyncio.Task[None]] = set()

BUGS: dict[str, Callable[[], Iterator[None]]] = {
    "ack-before-commit": _ack_before_commit,
    "skip-fsync": _skip_fsync,
    "apply-event-twice": _apply_event_twice,
    "reuse-keys-after-restart": _forget_keys_on_recovery,
    "drop-pending-follow-ups": _drop_pending_follow_ups,
    "lose-timers-on-leader-change": _keep_due_work_on_leader_change,
    "identity-on-one-partition": _identity_on_one_partition,
}


@contextlib.contextmanager
def injected(name: str | None) -> Iterator[None]:
    """Run the block with bug ``name`` in place (None: no bug)."""
    if name is None:
        yield
        return
    if name not in BUGS:
        raise ValueError(f"unknown bug {name!r}; known: {', '.join(sorted(BUGS))}")
    yield from BUGS[name]()
