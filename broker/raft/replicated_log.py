"""`ReplicatedLog`: one member of a partition's Raft group, replicating opaque blocks of bytes.

Contract
- `replicate(block)` on the leader returns a `concurrent.futures.Future[int]` that resolves with the block's
  Raft index once a majority holds it, or fails with a `ReplicationError`. It never resolves for an entry that
  is not committed. From asyncio: `index = await asyncio.wrap_future(log.replicate(block))` (the call itself
  does not block: it checks, queues and wakes the Raft thread).
- `on_commit(index, block)` runs on EVERY member, on the member's Raft thread (pysyncobj's tick thread, named
  "raft-<address>"), in index order, exactly once per committed block per process lifetime. Indexes increase
  strictly but have gaps (Raft's own entries, e.g. the no-op each new leader appends, and blocks fenced off as
  described below are not delivered). After a restart the member re-delivers from its last snapshot (or from
  the start of its journal): the higher layer skips indexes it already holds durably.
- Fencing: a block is delivered only if it was appended to the log by the member that accepted the `replicate`
  call, in the term it accepted it. A block whose leader lost leadership between the call and the append is
  skipped by every member alike, so a deposed leader's output never reaches the partition log.
- `on_role_change(role, term, leader_address)` runs on the Raft thread within one tick of any change.
- Backpressure: at most `max_in_flight` calls wait for commit; the next call raises `BackpressureError` at
  once. Blocks larger than `max_payload_bytes` raise `ValueError`.

Snapshots (pysyncobj's log compaction, never forked)
- When the Raft log holds more than `compaction_min_entries` entries or `compaction_min_seconds` have passed,
  pysyncobj calls `snapshot_provider(index)` on the Raft thread, right after delivering everything up to
  `index` (the last applied Raft index; the last delivered block may be lower). It must return, quickly and
  without blocking on other members, bytes from which a member with NOTHING can rebuild everything the
  partition needs up to `index`: the state snapshot (e.g. an LMDB copy tagged with its position) plus every
  log block the higher layer has not compacted itself (exporters may still need them). After it returns,
  pysyncobj deletes its log entries up to `index - 1`.
- `snapshot_installer(index, data)` runs on the Raft thread (a) on a follower whose next entry the leader has
  compacted away: the leader streams the snapshot file and the follower continues from `index + 1` without
  `on_commit` for anything up to `index`; (b) at every restart, with the member's own latest snapshot, before
  the journal tail is re-delivered. The higher layer must replace its state and log by `data` atomically and
  durably when `index` is beyond what it holds, and ignore it otherwise.

Durability (pysyncobj itself never fsyncs; see /work/shared/PYSYNCOBJ.md)
- With `fsync=True` (default) a follower fdatasyncs its Raft journal before acknowledging an AppendEntries,
  the leader fdatasyncs new entries before sending them (so before any majority can count them), term and
  vote are fsynced before a vote is sent, snapshots are fsynced before the journal entries they cover are
  dropped. A committed block therefore survives kill -9 or power loss of any minority, as Raft requires.
  Measured cost (tests/bench/raft_bench.py, 3 members on one shared 2-core box, ext4, medians of 3 runs): one
  synchronous replicate p50 1.4-2.0 ms with fsync vs 0.7 ms without; with 64 in flight 2.9k-4.4k vs 4.8k
  blocks/s (1 KiB) and 0.5k-1.0k vs 0.7k blocks/s (10 KiB): run-to-run noise is larger than the fsync cost.
- Known limit: pysyncobj's compaction rewrites its journal in place; a power loss in that window can cost the
  member its uncompacted tail (kill -9 cannot: the page cache survives).
- The higher layer must still make its own FileLog durable in `on_commit` before it acknowledges anything
  to a client derived from that block.

Threads: construct the log from a long-lived thread (e.g. the main thread): pysyncobj stops its Raft thread
when the constructing thread exits.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from pysyncobj import FAIL_REASON

from broker.raft._member import FENCED, RaftMember, RaftRole
from broker.raft.config import RaftConfig
from broker.raft.errors import (
    BackpressureError,
    LeadershipLostError,
    NotLeaderError,
    ReplicaStoppedError,
    ReplicationError,
    ReplicationTimeoutError,
)

logger = logging.getLogger(__name__)

CommitCallback = Callable[[int, bytes], None]
RoleCallback = Callable[[RaftRole, int, str | None], None]
SnapshotProvider = Callable[[int], bytes]
SnapshotInstaller = Callable[[int, bytes], None]

_TIMEOUT_SCAN_SECONDS = 0.02


@dataclass(frozen=True, slots=True)
class RaftStatus:
    """A point-in-time view for metrics and health checks."""

    address: str
    role: RaftRole
    term: int
    leader: str | None
    commit_index: int
    last_applied: int
    last_delivered: int
    log_entries: int
    in_flight: int
    fatal_error: str | None


@dataclass(slots=True)
class _Pending:
    future: Future[int]
    term: int
    deadline: float


class ReplicatedLog:
    """One Raft group member; see the module docstring for the contract.

    `broker.raft.simulation.SimulatedReplicatedLog` reuses all of this with a member it ticks itself: it
    overrides `_make_member` and `_now` (the clock that deadlines are measured on) only."""

    _now: Callable[[], float] = staticmethod(time.monotonic)

    def __init__(
        self,
        config: RaftConfig,
        *,
        on_commit: CommitCallback,
        snapshot_provider: SnapshotProvider,
        snapshot_installer: SnapshotInstaller,
        on_role_change: RoleCallback | None = None,
    ) -> None:
        self._config = config.validate()
        self._on_commit = on_commit
        self._on_role_change = on_role_change
        self._snapshot_provider = snapshot_provider
        self._snapshot_installer = snapshot_installer
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._next_call = 0
        self._next_timeout_scan = 0.0
        self._last_delivered = 0
        self._reported: tuple[RaftRole, int, str | None] | None = None
        self._fatal: str | None = None
        self._stopped = False
        self._member: RaftMember | None = None
        self._member = self._make_member(self._config)

    def _make_member(self, config: RaftConfig) -> RaftMember:
        member = RaftMember(config, self)
        thread = member._SyncObj__thread
        if thread is not None:
            thread.name = f"raft-{config.self_address}"
        return member

    # ----------------------------------------------------------------- public API

    def replicate(self, payload: bytes, timeout: float | None = None) -> Future[int]:
        """Propose `payload` (leader only). Raises at once: `NotLeaderError`, `BackpressureError`,
        `ReplicaStoppedError`, `ValueError` (too large). The future fails with `LeadershipLostError` or
        `ReplicationTimeoutError` (outcome unknown) or `NotLeaderError` (fenced off: never delivered)."""
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise TypeError(f"payload must be bytes, not {type(payload).__name__}")
        payload = bytes(payload)
        if len(payload) > self._config.max_payload_bytes:
            raise ValueError(f"payload of {len(payload)} bytes exceeds max_payload_bytes")
        member = self._member
        if member is None or self._stopped or self._fatal is not None:
            raise ReplicaStoppedError(self._fatal or "replicated log is closed")
        term = member.raftCurrentTerm
        if not member._isLeader():
            raise NotLeaderError(f"{self._config.self_address} is not the leader", member.leader_address)
        future: Future[int] = Future()
        future.set_running_or_notify_cancel()  # cancelling cannot un-propose: make cancel() refuse
        deadline = self._now() + (self._config.default_timeout_seconds if timeout is None else timeout)
        with self._lock:
            if len(self._pending) >= self._config.max_in_flight:
                raise BackpressureError(f"{len(self._pending)} replicate calls in flight")
            call = self._next_call
            self._next_call += 1
            self._pending[call] = _Pending(future, term, deadline)
        member.propose(term, payload, lambda result, reason: self._on_result(call, result, reason))
        return future

    @property
    def is_leader(self) -> bool:
        member = self._member
        return member is not None and not self._stopped and bool(member._isLeader())

    @property
    def leader(self) -> str | None:
        member = self._member
        return None if member is None else member.leader_address

    @property
    def term(self) -> int:
        member = self._member
        return 0 if member is None else int(member.raftCurrentTerm)

    @property
    def commit_index(self) -> int:
        member = self._member
        return 0 if member is None else int(member.raftCommitIndex)

    @property
    def last_applied(self) -> int:
        member = self._member
        return 0 if member is None else int(member.raftLastApplied)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def status(self) -> RaftStatus:
        member = self._member
        assert member is not None
        return RaftStatus(
            address=self._config.self_address,
            role=RaftRole.STOPPED if self._stopped else member.role,
            term=int(member.raftCurrentTerm),
            leader=member.leader_address,
            commit_index=int(member.raftCommitIndex),
            last_applied=int(member.raftLastApplied),
            last_delivered=self._last_delivered,
            log_entries=member.log_entry_count,
            in_flight=len(self._pending),
            fatal_error=self._fatal,
        )

    def close(self, timeout: float = 5.0) -> None:
        """Stop the member and wait for its Raft thread; pending calls fail with `ReplicaStoppedError`."""
        self._stopped = True
        member = self._member
        if member is None:
            return
        member.destroy()
        thread = member._SyncObj__thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._fail_all(lambda: ReplicaStoppedError("replicated log is closed"))

    # ----------------------------------------------------------------- called by the member (Raft thread)

    def _deliver(self, index: int, payload: bytes) -> None:
        if self._fatal is not None:
            return
        if index <= self._last_delivered:
            self._on_fatal(f"index {index} delivered twice (last delivered {self._last_delivered})")
            return
        try:
            self._on_commit(index, payload)
        except Exception as exc:
            logger.exception("on_commit failed at index %d", index)
            self._on_fatal(f"on_commit failed at index {index}: {exc!r}")
            return
        self._last_delivered = index

    def _take_snapshot(self, index: int) -> bytes:
        data = self._snapshot_provider(index)
        if not isinstance(data, bytes):
            raise TypeError(f"snapshot_provider returned {type(data).__name__}, not bytes")
        return data

    def _install_snapshot(self, index: int, data: bytes) -> None:
        self._snapshot_installer(index, data)
        self._last_delivered = max(self._last_delivered, index)

    def _on_fatal(self, reason: str) -> None:
        if self._fatal is None:
            logger.critical("raft member %s stops: %s", self._config.self_address, reason)
            self._fatal = reason

    def _on_tick(self) -> None:
        member = self._member
        if member is None or self._stopped:
            return
        if self._fatal is not None:
            self._stopped = True
            member.destroy()
            reason = self._fatal
            self._fail_all(lambda: ReplicaStoppedError(reason))
            self._report_role(RaftRole.STOPPED, int(member.raftCurrentTerm), None)
            return
        role, term = member.role, int(member.raftCurrentTerm)
        self._report_role(role, term, member.leader_address)
        if not self._pending:
            return
        now = self._now()
        if role is not RaftRole.LEADER:
            self._fail_where(lambda p: True, lambda: LeadershipLostError(f"no longer leader (term {term})"))
        else:
            self._fail_where(lambda p: p.term != term, lambda: LeadershipLostError(f"term moved on to {term}"))
        if now >= self._next_timeout_scan:
            self._next_timeout_scan = now + _TIMEOUT_SCAN_SECONDS
            self._fail_where(lambda p: p.deadline <= now, lambda: ReplicationTimeoutError("not committed in time"))

    # ----------------------------------------------------------------- internals

    def _on_result(self, call: int, result: Any, reason: int) -> None:
        with self._lock:
            pending = self._pending.pop(call, None)
        if pending is None:
            return
        if self._fatal is not None:
            pending.future.set_exception(ReplicaStoppedError(self._fatal))
        elif reason == FAIL_REASON.SUCCESS and isinstance(result, int) and result > 0:
            pending.future.set_result(result)
        elif reason == FAIL_REASON.SUCCESS and result == FENCED:
            pending.future.set_exception(NotLeaderError("leadership changed before the block was appended"))
        else:
            pending.future.set_exception(_failure(reason))

    def _report_role(self, role: RaftRole, term: int, leader: str | None) -> None:
        current = (role, term, leader)
        if current == self._reported:
            return
        self._reported = current
        if self._on_role_change is not None:
            try:
                self._on_role_change(role, term, leader)
            except Exception:
                logger.exception("on_role_change failed")

    def _fail_where(self, condition: Callable[[_Pending], bool], error: Callable[[], ReplicationError]) -> None:
        with self._lock:
            doomed = [call for call, pending in self._pending.items() if condition(pending)]
            failed = [self._pending.pop(call) for call in doomed]
        for pending in failed:
            pending.future.set_exception(error())

    def _fail_all(self, error: Callable[[], ReplicationError]) -> None:
        self._fail_where(lambda p: True, error)


def _failure(reason: int) -> ReplicationError:
    if reason in (FAIL_REASON.MISSING_LEADER, FAIL_REASON.NOT_LEADER):
        return NotLeaderError(f"not appended: pysyncobj reason {reason}")
    if reason == FAIL_REASON.QUEUE_FULL:
        return BackpressureError("pysyncobj command queue full")
    if reason == FAIL_REASON.DISCARDED:
        return LeadershipLostError("entry was overwritten by a newer leader: not committed")
    return LeadershipLostError(f"outcome unknown: pysyncobj reason {reason}")
