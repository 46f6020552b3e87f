"""The commit seam: "make this block durable and committed, and tell me when" — alone, or through Raft.

The partition service hands each round's block to its seam and waits; it never asks how the log is replicated.

- :class:`LocalCommit`: one replica. A block is committed once it is fsynced in the partition's own file log.
- :class:`RaftCommit`: a Raft group. A block is committed once a majority holds it (pysyncobj with Weir's fixes,
  ``broker.raft``); every replica, leader included, then appends it to its file log and fsyncs it there. The seam
  also reports roles: a replica leads only after a barrier proved it holds everything committed before its term.

Both call back into the partition through :class:`Replica`. A third implementation, for simulation, runs the same
Raft member with transport, clock and disk swapped.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import struct
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from broker import monitoring
from broker.log import LogBlock, LogStorage
from broker.logs import PartitionLog
from broker.raft import RaftConfig, RaftRole, ReplicatedLog, ReplicationError
from broker.stream.commit_marker import CommitMarker

log = logging.getLogger("weir.partition")

# A replicated block is framed with its positions; a barrier (first position 0) carries only a sequence number.
_BARRIER = struct.Struct(">QQ")


class RoundNotCommitted(Exception):
    """The round's block was not committed (lost leadership, timeout): its outcome is unknown to clients."""


class Replica(Protocol):
    """What a seam calls back into: the partition service (always on its event loop)."""

    closing: bool

    def lead(self) -> None:
        """This replica holds every committed block: it may process commands now."""

    async def follow(self) -> None:
        """This replica no longer leads (or never did): stop processing, keep applying committed blocks."""

    def apply_committed(self, block: LogBlock) -> None:
        """A block another leader processed is committed and durable here: apply its events."""

    def fail_stop(self, reason: str) -> None:
        """The partition cannot go on safely here (e.g. its log does not line up with what was committed)."""

    def spawn(self, name: str, factory: Callable[[], Coroutine[Any, Any, None]]) -> asyncio.Task[None]:
        """Run a task of the partition under its supervision (restarted if it fails)."""


class CommitSeam(Protocol):
    """One partition replica's way to commit blocks."""

    @property
    def role(self) -> str: ...

    @property
    def term(self) -> int: ...

    def start(self, replica: Replica) -> None:
        """Begin (inside the event loop): the seam calls ``replica.lead()`` once this replica may process."""

    async def commit(self, block: LogBlock) -> None:
        """Return once ``block`` is committed and durable here; raise :class:`RoundNotCommitted` otherwise."""

    def step_down(self) -> None:
        """A round failed to commit: stop leading, and lead again if the replication layer still says so."""

    async def close(self) -> None:
        """Stop replicating; blocks already durable stay so."""


class _FileLogFlush:
    """fsync the file log (worker thread), then remember the commit position for recovery (see commit_marker)."""

    def __init__(self, storage: LogStorage, marker: CommitMarker) -> None:
        self.storage = storage
        self.marker = marker

    def __call__(self) -> None:
        position = self.storage.flush()
        self.marker.record(position)


class LocalCommit:
    """A partition without replication: durable in its own log is committed."""

    def __init__(self, storage: LogStorage, marker: CommitMarker) -> None:
        self._storage = storage
        self._flush = _FileLogFlush(storage, marker)
        self._role = "INACTIVE"

    @property
    def role(self) -> str:
        return self._role

    @property
    def term(self) -> int:
        return 0

    def start(self, replica: Replica) -> None:
        self._role = "LEADER"
        replica.lead()

    async def commit(self, block: LogBlock) -> None:
        self._storage.append(block)
        await asyncio.get_running_loop().run_in_executor(None, self._flush)

    def step_down(self) -> None:  # alone, this replica always leads
        return

    async def close(self) -> None:
        return


class RaftCommit:
    """A partition replicated by a Raft group; see the module docstring."""

    def __init__(
        self,
        partition_id: int,
        storage: LogStorage,
        marker: CommitMarker,
        raft_config: RaftConfig,
        replicated_log: Callable[..., ReplicatedLog] = ReplicatedLog,
    ) -> None:
        """``replicated_log``: builds the Raft member (the production one, or the simulation's on swapped
        transport, clock and disk), called with the config and the callbacks as keywords."""
        self.partition_id = partition_id
        self._replicated_log = replicated_log
        self._storage = storage
        self._flush = _FileLogFlush(storage, marker)
        self._raft_config = raft_config
        self._log = PartitionLog(log, partition_id)
        self._replica: Replica | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.raft: ReplicatedLog | None = None
        self._role = "INACTIVE"
        self._round_block: tuple[int, int] | None = None
        self._durable = asyncio.Condition()
        self._flushing = False
        self._barriers: dict[int, asyncio.Future[None]] = {}
        self._next_barrier = 1
        self._leadership: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def role(self) -> str:
        return self._role

    @property
    def term(self) -> int:
        return self.raft.term if self.raft is not None else 0

    def start(self, replica: Replica) -> None:
        self._replica = replica
        self._loop = asyncio.get_running_loop()
        self._role = "FOLLOWER"
        self.raft = self._replicated_log(
            self._raft_config,
            on_commit=self._raft_committed,
            snapshot_provider=self._raft_snapshot,
            snapshot_installer=self._raft_install,
            on_role_change=self._raft_role_changed,
        )

    # -- committing the leader's rounds ----------------------------------------------------------------------

    async def commit(self, block: LogBlock) -> None:
        """Replicate the round's block to a majority, then wait until it is durable in the log here."""
        assert self.raft is not None
        self._round_block = (block.first_position, block.last_position)
        try:
            try:
                future = self.raft.replicate(_frame(block))
            except ReplicationError as e:
                raise RoundNotCommitted(f"replication refused: {e}") from e
            try:
                await asyncio.wrap_future(future)
            except ReplicationError as e:
                raise RoundNotCommitted(f"replication failed: {e}") from e
            async with self._durable:
                await self._durable.wait_for(
                    lambda: self._storage.commit_position >= block.last_position or self._closing
                )
        finally:
            self._round_block = None

    # -- committed blocks (every replica, in order) ----------------------------------------------------------

    def _raft_committed(self, index: int, payload: bytes) -> None:
        """Raft thread: a committed block; handled on the event loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._on_committed, payload)

    def _on_committed(self, payload: bytes) -> None:
        """Append a committed block to the log here; a follower also applies its events at once."""
        replica = self._replica
        if self._closing or replica is None or replica.closing:
            return
        first, last, body = _unframe(payload)
        if first == 0:
            waiter = self._barriers.pop(last, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
            return
        storage = self._storage
        if last <= storage.last_position:
            return  # already held: Raft re-delivers from its snapshot after a restart
        if first != storage.last_position + 1:
            replica.fail_stop(f"committed block {first}..{last} does not follow the log's end {storage.last_position}")
            return
        block = LogBlock(first, last, body)
        storage.append(block)
        self._schedule_flush()
        if self._round_block == (first, last):
            return  # the leader's own round: its transaction holds the effects and commits once this is durable
        if self._round_block is not None:
            replica.fail_stop(f"a foreign block {first}..{last} was committed while this leader's round was open")
            return
        replica.apply_committed(block)

    def _schedule_flush(self) -> None:
        """Group-commit the log here: one fsync covers every block that arrived while the previous one ran."""
        if self._flushing or self._loop is None:
            return
        self._flushing = True

        async def flush() -> None:
            try:
                while self._storage.commit_position < self._storage.last_position and not self._closing:
                    await asyncio.get_running_loop().run_in_executor(None, self._flush)
                    async with self._durable:
                        self._durable.notify_all()
            except Exception as e:
                if self._replica is not None:
                    self._replica.fail_stop(f"flushing the log failed: {e!r}")
            finally:
                self._flushing = False

        self._loop.create_task(flush())

    # -- roles -----------------------------------------------------------------------------------------------

    def _raft_role_changed(self, role: RaftRole, term: int, leader: str | None) -> None:
        """Raft thread (or the loop after a failed round): follow the role on the event loop."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def change() -> None:
            if self._closing or self._replica is None:
                return
            if self._leadership is not None:
                self._leadership.cancel()
                self._leadership = None
            monitoring.PARTITION_ROLE.labels(str(self.partition_id)).set(0 if role == RaftRole.LEADER else 1)
            if role == RaftRole.LEADER:
                self._leadership = self._replica.spawn("leadership", functools.partial(self._take_leadership, term))
            else:
                self._role = "FOLLOWER"
                self._replica.spawn("follow", self._replica.follow)

        loop.call_soon_threadsafe(change)

    async def _take_leadership(self, term: int) -> None:
        """Lead only once every block committed before this term is applied here: a barrier proves it."""
        self._log.info("partition %d: elected leader in term %d; catching up", self.partition_id, term)
        while not self._closing and self.raft is not None and self.raft.is_leader:
            barrier = self._next_barrier
            self._next_barrier += 1
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._barriers[barrier] = waiter
            try:
                await asyncio.wrap_future(self.raft.replicate(_BARRIER.pack(0, barrier)))
                await asyncio.wait_for(waiter, 10)
            except (ReplicationError, TimeoutError) as e:
                self._log.info("partition %d: barrier not committed (%s); retrying", self.partition_id, e)
                await asyncio.sleep(0.05)
                continue
            finally:
                self._barriers.pop(barrier, None)
            if self.raft is not None and self.raft.is_leader and not self._closing and self._replica is not None:
                self._role = "LEADER"
                self._replica.lead()
            return

    def step_down(self) -> None:
        self._role = "FOLLOWER"
        if self.raft is not None and self.raft.is_leader:
            self._raft_role_changed(RaftRole.LEADER, self.raft.term, None)

    # -- Raft snapshots --------------------------------------------------------------------------------------

    def _raft_snapshot(self, index: int) -> bytes:
        """Raft thread, at compaction: what this replica holds durably (its own snapshots and log keep the data)."""
        return json.dumps({"partition": self.partition_id, "position": self._storage.commit_position}).encode()

    def _raft_install(self, index: int, data: bytes) -> None:
        """Raft thread: a snapshot from the leader (or our own at restart); ours covers it, or we cannot go on."""
        try:
            position = int(json.loads(data)["position"])
        except (ValueError, KeyError, TypeError):
            position = -1
        held = self._storage.last_position
        if 0 <= position <= held:
            return
        reason = (
            f"this replica holds positions up to {held} but the leader compacted its Raft log past position "
            f"{position}; restore this partition directory from a healthy replica"
        )
        loop = self._loop
        if loop is not None and not loop.is_closed() and self._replica is not None:
            loop.call_soon_threadsafe(self._replica.fail_stop, reason)

    # -- shutdown --------------------------------------------------------------------------------------------

    async def close(self) -> None:
        self._closing = True
        if self._leadership is not None:
            self._leadership.cancel()
        if self.raft is not None:
            raft, self.raft = self.raft, None
            await asyncio.get_running_loop().run_in_executor(None, raft.close)
        async with self._durable:
            self._durable.notify_all()
        while self._flushing:
            await asyncio.sleep(0.01)


def _frame(block: LogBlock) -> bytes:
    return _BARRIER.pack(block.first_position, block.last_position) + block.payload


def _unframe(payload: bytes) -> tuple[int, int, bytes]:
    first, last = _BARRIER.unpack_from(payload)
    return first, last, payload[_BARRIER.size :]
