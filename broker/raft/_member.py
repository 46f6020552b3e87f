"""pysyncobj 0.3.17 with Weir's fixes: correct under load, durable before acknowledging, never forking.

Everything that touches pysyncobj's private (name-mangled) members lives in this module and in
`broker.raft._transport` (limits on unauthenticated connections to the Raft port), so an upgrade is checked in
two files (`test_pysyncobj_seams_we_override_still_exist` in tests/raft/test_units.py fails if a seam
disappears). We wrap the original methods; we never replace pysyncobj's logic with a copy of it.

Overrides and why:

- `_SyncObj__onMessageReceived` (load fix 1, leader side): a successful `next_node_idx` ack for an older batch
  made the leader rewind a follower's next index and resend entries the follower already has; after the
  original handler runs we restore the next index if an ack moved it backwards. Conversely a reset only moves
  it backwards: with batches pipelined, the "no entry at prev" resets for later batches overwrote the "term
  conflict" reset for the first one, and a deposed leader rejoining never caught up (found by the R4 test).
  Nor may the answers to an earlier heartbeat's batches, which arrive after the next heartbeat has advanced
  the index optimistically again: the leader keeps the lowest conflict a follower reported in this term as a
  floor until that follower's next success (under load, a paused and resumed leader stayed behind for good;
  found by R4 on a busy machine). The follower, in turn, answers a term conflict with the first index of its
  conflicting term's run (past what it applied), so catching up takes a round trip per term, not per entry.
- `_SyncObj__onMessageReceived` (load fix 2, follower side): the original handler deletes every entry after
  `prevLogIdx` whenever the follower holds more, even entries it already applied. Before handing an
  AppendEntries message on, we drop the entries the follower already holds with the same term and move
  `prevLogIdx` past them (Raft §5.3: truncate only from the first conflicting entry); when nothing is left,
  `_SyncObj__deleteEntriesFrom` is suppressed for that message so a matching suffix survives (or, when the
  member's last entry is from the leader's own term, the ack covers the whole log). The leader's
  commit index is clamped to the last entry the message vouches for (a kept suffix may hold stale entries).
- `_SyncObj__onMessageReceived` (load fix 5, found by the simulator): a snapshot-transfer AppendEntries carries
  no `prevLogIdx`, yet pysyncobj raises the follower's commit index to the leader's over the follower's own,
  possibly conflicting, log; such a follower applied entries that the leader had replaced. The commit index
  such a message carries is clamped to the member's own.
- `_SyncObj__loadDumpFile` (load fix 4, found by the soak test): a snapshot from the leader covering no more
  than the member applied is refused (pysyncobj would move the applied index back and apply entries twice);
  the member answers with a reset to its applied index instead of a success. Likewise a snapshot whose last
  entry the member's log already holds (found by the simulator): pysyncobj would clear the journal and drop
  entries after it that the member had acknowledged; the member asks for the entry after the snapshot. A
  snapshot that arrives damaged (its checksum fails: a transfer in chunks that lost or repeated one) is refused
  the same way and asked for again; it used to stop the member (found by the simulator, small batches on lossy
  links).
- `_SyncObj__deleteEntriesTo` (load fix 3): compaction refuses to leave fewer than two entries instead of
  emptying the log (which made every later tick raise IndexError). It also fsyncs the data directory first so
  the renamed snapshot is durable before the journal forgets the entries it covers.
- `_SyncObj__sendNextNodeIdx`: a follower fsyncs its journal before a successful ack leaves the process.
- `_SyncObj__sendAppendEntries` and `_checkCommandsToApply`: the leader fsyncs new entries before sending them
  (so before anyone can count them), and sends right after appending instead of waiting for the heartbeat.
- `_SyncObj__setCurrentTerm`: term and vote are fsynced before the vote or request that carries them is sent.
- `_SyncObj__loadDumpFile`: a snapshot received from the leader is fsynced (file and directory) before it
  replaces the journal; pysyncobj wrote it unsynced, and after a power loss the member found a synced journal
  starting past a missing or empty snapshot and never applied an entry again (found by the simulator).

Wire: pysyncobj zlib-compresses every message at level 3, which ran at ~34 MB/s on incompressible blocks and
took ~75 % of a leader's CPU with 10-KiB blocks. Weir blocks are compressed upstream, so this module points
pysyncobj's transport at a zlib whose `compress` stores (level 0). The format on the wire is unchanged (still
zlib, any peer decompresses it); the effect is process-wide, which is what every Raft group here wants.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import threading
import zlib
from collections.abc import Callable
from typing import Any, Protocol

import pysyncobj.tcp_connection
from pysyncobj import SyncObj, replicated
from pysyncobj.node import Node, TCPNode
from pysyncobj.pipe_notifier import PipeNotifier
from pysyncobj.transport import Transport
from pysyncobj.version import VERSION as PYSYNCOBJ_VERSION

from broker.raft._transport import GuardedTransport
from broker.raft.config import RaftConfig
from broker.raft.snapshot import (
    RaftSnapshot,
    SnapshotCorruptError,
    read_snapshot_file,
    write_snapshot_file,
)

logger = logging.getLogger(__name__)

SUPPORTED_PYSYNCOBJ = "0.3.17"
CONFLICT_KEY = "weir_conflict"
"""Marks a follower's reset as a term conflict at `prevLogIdx` (pysyncobj's leader ignores keys it does not know)."""
FENCED = -1
"""Result of applying an entry that a different leader (or term) appended than the one that accepted it."""

_base_on_message: Callable[..., None] = SyncObj._SyncObj__onMessageReceived  # type: ignore[attr-defined]
_base_delete_from: Callable[..., None] = SyncObj._SyncObj__deleteEntriesFrom  # type: ignore[attr-defined]
_base_delete_to: Callable[..., None] = SyncObj._SyncObj__deleteEntriesTo  # type: ignore[attr-defined]
_base_send_ack: Callable[..., None] = SyncObj._SyncObj__sendNextNodeIdx  # type: ignore[attr-defined]
_base_send_append: Callable[..., None] = SyncObj._SyncObj__sendAppendEntries  # type: ignore[attr-defined]
_base_set_term: Callable[..., None] = SyncObj._SyncObj__setCurrentTerm  # type: ignore[attr-defined]
_base_load_dump: Callable[..., None] = SyncObj._SyncObj__loadDumpFile  # type: ignore[attr-defined]


WIRE_COMPRESSION_LEVEL = 0


class _StoringZlib:
    """Stands in for the `zlib` module inside pysyncobj's transport: same format, no compression effort."""

    error = zlib.error
    decompress = staticmethod(zlib.decompress)

    @staticmethod
    def compress(data: bytes, level: int = -1) -> bytes:
        return zlib.compress(data, WIRE_COMPRESSION_LEVEL)


pysyncobj.tcp_connection.zlib = _StoringZlib()  # type: ignore[assignment]


_keeping_suffix = threading.local()


class _KeptSuffixFilter(logging.Filter):
    """pysyncobj logs "truncating already-applied log entries" before it truncates; when load fix 2 suppresses
    that truncation, the line would be a false alarm that hides real ones, so it is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        kept = getattr(_keeping_suffix, "active", False)
        return not (kept and str(record.msg).startswith("truncating already-applied"))


logging.getLogger("pysyncobj.syncobj").addFilter(_KeptSuffixFilter())


class RaftRole(enum.Enum):
    FOLLOWER = "follower"
    CANDIDATE = "candidate"
    LEADER = "leader"
    STOPPED = "stopped"


_ROLE_BY_STATE = {0: RaftRole.FOLLOWER, 1: RaftRole.CANDIDATE, 2: RaftRole.LEADER}


class MemberOwner(Protocol):
    """What the member calls back into (`ReplicatedLog`); every call comes from the Raft thread."""

    def _deliver(self, index: int, payload: bytes) -> None: ...

    def _take_snapshot(self, index: int) -> bytes: ...

    def _install_snapshot(self, index: int, data: bytes) -> None: ...

    def _on_tick(self) -> None: ...

    def _on_fatal(self, reason: str) -> None: ...


class MemberDisk(Protocol):
    """Where the member's own durability points go (pysyncobj's journal itself is created by pysyncobj).

    `FileDisk` is the real one; the simulator (`broker.raft.simulation`) passes a disk that records what was
    synced, so that a simulated crash loses exactly the rest."""

    def prepare(self) -> None: ...

    def sync_journal(self) -> None: ...

    def sync_term(self) -> None: ...

    def sync_directory(self) -> None: ...

    def sync_snapshot(self, path: str) -> None: ...

    def write_snapshot(self, path: str, snapshot: RaftSnapshot) -> None: ...

    def read_snapshot(self, path: str) -> RaftSnapshot: ...

    def close(self) -> None: ...


class FileDisk:
    """The member's data directory on the real file system: fdatasync/fsync as described in the module docstring."""

    def __init__(self, config: RaftConfig) -> None:
        self._config = config
        self._journal_fd: int | None = None

    def prepare(self) -> None:
        self._config.data_dir.mkdir(parents=True, exist_ok=True)

    def sync_journal(self) -> None:
        """fdatasync on the file writes back the mmap's dirty pages; ~0.1 ms here, msync ~3 ms."""
        if self._journal_fd is None:
            self._journal_fd = os.open(self._config.journal_path, os.O_RDWR)
        os.fdatasync(self._journal_fd)

    def sync_term(self) -> None:
        meta = f"{self._config.journal_path}.meta"
        if os.path.exists(meta):
            _fsync_path(meta)
        _fsync_directory(self._config.data_dir)

    def sync_directory(self) -> None:
        _fsync_directory(self._config.data_dir)

    def sync_snapshot(self, path: str) -> None:
        _fsync_path(path)
        _fsync_directory(self._config.data_dir)

    def write_snapshot(self, path: str, snapshot: RaftSnapshot) -> None:
        write_snapshot_file(path, snapshot, fsync=self._config.fsync)

    def read_snapshot(self, path: str) -> RaftSnapshot:
        return read_snapshot_file(path)

    def close(self) -> None:
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None


class RaftMember(SyncObj):  # type: ignore[misc]
    """One pysyncobj group member carrying opaque payloads; see the module docstring for what is changed.

    Production passes only `config` and `owner`. The keyword arguments are the simulator's seam: another disk,
    an in-memory transport, nodes with a deterministic hash, and pysyncobj settings such as `autoTick=False`
    (the caller ticks; no thread)."""

    def __init__(
        self,
        config: RaftConfig,
        owner: MemberOwner,
        *,
        disk: MemberDisk | None = None,
        transport_class: type[Transport] = GuardedTransport,
        node_class: type[Node] = TCPNode,
        syncobj_overrides: dict[str, object] | None = None,
    ) -> None:
        if PYSYNCOBJ_VERSION != SUPPORTED_PYSYNCOBJ:
            logger.warning("pysyncobj %s is not the verified %s", PYSYNCOBJ_VERSION, SUPPORTED_PYSYNCOBJ)
        self._weir_disk: MemberDisk = FileDisk(config) if disk is None else disk
        self._weir_disk.prepare()
        self._weir_config = config
        self._weir_owner = owner
        self._weir_fixes = config.apply_load_fixes
        self._weir_keep_suffix = False
        self._weir_refused_snapshot: int | None = None
        """After refusing a snapshot from the leader: the index to ask for instead."""
        self._weir_conflict_next: int | None = None
        """While handling an AppendEntries whose prev entry conflicts: the index the leader should resume from."""
        self._weir_conflict_floor: dict[Any, tuple[int, int]] = {}
        """Leader: per follower, (term, lowest index a term conflict sent it back to) until its next success."""
        self._weir_flushed: tuple[int, int, int, int] | None = None
        self._weir_wakeup: PipeNotifier | None = None
        self._weir_wakeup_pending = False
        conf = config.to_syncobj_conf(
            serializer=self._weir_serialize, deserializer=self._weir_deserialize, **(syncobj_overrides or {})
        )
        self._weir_auto_tick = bool(conf.autoTick)
        super().__init__(
            config.self_address,
            list(config.partner_addresses),
            conf=conf,
            nodeClass=node_class,
            transportClass=transport_class,
        )
        self.addOnTickCallback(self._weir_tick)

    # ----------------------------------------------------------------- the replicated operation

    @replicated
    def _weir_append(self, proposal_term: int, payload: bytes) -> int:
        """Applied on every member in log order. Delivered only if the entry's term is the term in which the
        proposing leader accepted it: an entry forwarded to another leader is skipped by everyone alike."""
        index = self.raftLastApplied + 1
        log = self._SyncObj__raftLog
        entry_term = log[index - log[0][1]][2]
        if entry_term != proposal_term:
            return FENCED
        self._weir_owner._deliver(index, payload)
        return index

    def propose(self, proposal_term: int, payload: bytes, callback: Callable[[Any, int], None]) -> None:
        """Queue `payload` for the Raft thread; `callback(result, fail_reason)` runs there later."""
        self._weir_append(proposal_term, payload, callback=callback)
        if self._weir_config.send_on_propose and not self._weir_wakeup_pending and self._weir_wakeup:
            self._weir_wakeup_pending = True
            with contextlib.suppress(BlockingIOError):  # the pipe is full of wake-ups already
                self._weir_wakeup.notify()

    # ----------------------------------------------------------------- read-only views

    @property
    def role(self) -> RaftRole:
        return _ROLE_BY_STATE[self._SyncObj__raftState]

    @property
    def leader_address(self) -> str | None:
        leader = self._getLeader()
        return None if leader is None else str(leader.address)

    @property
    def log_entry_count(self) -> int:
        return len(self._SyncObj__raftLog)

    @property
    def last_log_index(self) -> int:
        return int(self._SyncObj__raftLog[-1][1])

    # ----------------------------------------------------------------- load fixes 1 and 2

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
        if not self._weir_fixes or not isinstance(message, dict):
            _base_on_message(self, node, message)
            return
        kind = message.get("type")
        regular_append = "prevLogIdx" in message and "transmission" not in message
        if kind == "append_entries" and "prevLogIdx" not in message and message["term"] >= self.raftCurrentTerm:
            # Load fix 5: a snapshot chunk vouches for no entry of this member's log, but pysyncobj moves the
            # commit index up to the leader's anyway, over entries that may conflict with the leader's.
            message = dict(message, commit_index=min(message["commit_index"], self.raftCommitIndex))
            _base_on_message(self, node, message)
            return
        if kind == "append_entries" and regular_append and message["term"] >= self.raftCurrentTerm:
            message, keep_suffix = self._weir_trim_known_entries(message)
            self._weir_keep_suffix = _keeping_suffix.active = keep_suffix
            self._weir_conflict_next = self._weir_conflict_hint(message)
            try:
                _base_on_message(self, node, message)
            finally:
                self._weir_keep_suffix = _keeping_suffix.active = False
                self._weir_conflict_next = None
            return
        if kind == "next_node_idx" and self._isLeader():
            next_index = self._SyncObj__raftNextIndex
            before = next_index.get(node)
            _base_on_message(self, node, message)
            if before is None or node not in next_index:
                return
            if message.get("reset"):
                # A reset only ever moves the next index back: pipelined batches answered "no entry at prev"
                # after a batch answered "term conflict at prev" must not undo the step back (livelock). Nor
                # may the answers to a previous heartbeat's batches, which arrive after this heartbeat advanced
                # the index again: the lowest conflict reported in this term is a floor until a success.
                lowest = next_index[node]
                floor_term, floor = self._weir_conflict_floor.get(node, (self.raftCurrentTerm, lowest))
                if floor_term == self.raftCurrentTerm:
                    lowest = min(lowest, floor)
                if message.get(CONFLICT_KEY):
                    self._weir_conflict_floor[node] = (self.raftCurrentTerm, lowest)
                next_index[node] = min(lowest, before)
            elif message.get("success"):
                self._weir_conflict_floor.pop(node, None)
                next_index[node] = max(next_index[node], before)
            return
        _base_on_message(self, node, message)

    def _weir_conflict_hint(self, message: dict[str, Any]) -> int | None:
        """Where the leader should resume when this member's entry at `prevLogIdx` has another term: the first
        entry of that term's run in this member's log, but past what it applied (applied entries are committed,
        so the leader holds them too). One round trip per conflicting term instead of one per entry (Raft §5.3)."""
        log = self._SyncObj__raftLog
        first, last = log[0][1], log[-1][1]
        prev_index = message["prevLogIdx"]
        if prev_index is None or not first <= prev_index <= last:
            return None
        conflicting_term = log[prev_index - first][2]
        if conflicting_term == message["prevLogTerm"]:
            return None
        lowest = max(first + 1, self.raftLastApplied + 1)
        index = prev_index
        while index > lowest and log[index - 1 - first][2] == conflicting_term:
            index -= 1
        return min(index, prev_index)

    def _weir_trim_known_entries(self, message: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The same message minus the entries this member already holds with the same term, and whether the
        suffix after the message must be kept (no conflicting entry is left to truncate from)."""
        log = self._SyncObj__raftLog
        first, last = log[0][1], log[-1][1]
        prev_index, prev_term = message["prevLogIdx"], message["prevLogTerm"]
        if prev_index is None or not first <= prev_index <= last or log[prev_index - first][2] != prev_term:
            return message, False  # the original handler answers with a reset; nothing is truncated
        entries = message.get("entries", [])
        held = 0
        while held < len(entries):
            index, term = entries[held][1], entries[held][2]
            if index > last or log[index - first][2] != term:
                break
            held += 1
        vouched_until = entries[-1][1] if entries else prev_index
        trimmed = dict(message)
        if held:
            trimmed["prevLogIdx"], trimmed["prevLogTerm"] = entries[held - 1][1], entries[held - 1][2]
        trimmed["entries"] = entries[held:]
        if held == len(entries) and log[-1][2] == message["term"]:
            # Our last entry comes from this very leader (one leader per term), so by Log Matching our whole
            # log is a prefix of the leader's: acknowledge up to its end and nothing needs truncating.
            vouched_until = last
            trimmed["prevLogIdx"], trimmed["prevLogTerm"] = last, log[-1][2]
        trimmed["commit_index"] = min(message["commit_index"], vouched_until)
        return trimmed, held == len(entries) and vouched_until != last

    def _weir_refuses(self, last: tuple[bytes, int, int]) -> bool:
        """Load fix 4's decision; on refusal, `_weir_refused_snapshot` is the index to ask the leader for."""
        index, term = last[1], last[2]
        if index <= self.raftLastApplied:
            logger.info("refusing snapshot up to %d: applied up to %d already", index, self.raftLastApplied)
            self._weir_refused_snapshot = self.raftLastApplied + 1
            return True
        if self._weir_holds(index, term):
            logger.info("refusing snapshot up to %d: the log holds that entry already", index)
            self._weir_refused_snapshot = index + 1
            return True
        return False

    def _weir_holds(self, index: int, term: int) -> bool:
        log = self._SyncObj__raftLog
        first = log[0][1]
        return bool(first <= index <= log[-1][1] and log[index - first][2] == term)

    def _SyncObj__deleteEntriesFrom(self, from_index: int) -> None:
        if self._weir_keep_suffix:
            return
        if self._weir_fixes and from_index <= self.raftLastApplied:
            self._weir_owner._on_fatal(f"asked to truncate applied entries from {from_index}")
        _base_delete_from(self, from_index)

    # ----------------------------------------------------------------- load fix 3 and compaction

    def _SyncObj__deleteEntriesTo(self, to_index: int) -> None:
        if self._weir_fixes and to_index + 1 > self.last_log_index:
            logger.error("skipping compaction up to %d: the log ends at %d", to_index, self.last_log_index)
            return
        if self._weir_config.fsync:
            self._weir_disk.sync_directory()
        _base_delete_to(self, to_index)
        self._weir_flush_journal()

    def _SyncObj__loadDumpFile(self, clearJournal: bool) -> None:
        """Load fix 4: a snapshot from the leader is refused when it brings nothing new: it covers no more than
        this member already applied, or this member's log already holds the snapshot's last entry (same index
        and term; found by the simulator, seed 307). pysyncobj would load it anyway: move the applied index
        backwards and deliver entries again (a transfer for a lagging follower that finished after it caught
        up), or clear a journal that ran past the snapshot, dropping entries this member had acknowledged."""
        path = str(self._weir_config.snapshot_path)
        if clearJournal and self._weir_config.fsync:
            # pysyncobj renamed the leader's snapshot over ours without syncing it. Loaded, it replaces the
            # journal (synced before the ack); refused, it is still our snapshot file from now on. Either way a
            # later directory sync would otherwise make the name durable and the content lost on power loss.
            self._weir_disk.sync_snapshot(path)
        if self._weir_fixes:
            try:
                last = self._weir_disk.read_snapshot(path).last
            except (OSError, SnapshotCorruptError) as exc:
                if clearJournal:
                    # A transfer that arrived damaged: refuse it and ask for it again (it would stop this member).
                    logger.warning("refusing a snapshot from the leader that cannot be read (%s); asking again", exc)
                    self._weir_refused_snapshot = self.raftLastApplied + 1
                    self._weir_replace_received_snapshot()
                    return
                last = None
            if last is not None and clearJournal and self._weir_refuses(last):
                self._weir_replace_received_snapshot()
                return
            behind = last is not None and self._SyncObj__raftLog[0][1] < last[1] - 1
            if last is not None and not clearJournal and behind and self._weir_holds(last[1], last[2]):
                # A restart before that compaction: the journal must start at the snapshot's boundary, or
                # pysyncobj clears it and forgets the entries after the snapshot that this member acknowledged.
                self._SyncObj__deleteEntriesTo(last[1] - 1)
        _base_load_dump(self, clearJournal)

    def _weir_replace_received_snapshot(self) -> None:
        """A refused snapshot from the leader lies in our snapshot file: our own snapshot, aligned with our journal,
        replaces it at the next tick (even if one was already taken at the current applied index: that file is
        gone)."""
        self._SyncObj__lastSerializedEntry = None
        self.forceLogCompaction()

    def _weir_serialize(self, path: str, data: tuple[Any, ...]) -> None:
        """pysyncobj's `serializer` hook: runs inline on the Raft thread at compaction (never in a fork)."""
        last, previous = data[0], data[1]
        user_data = self._weir_owner._take_snapshot(int(last[1]))
        snapshot = RaftSnapshot(last=tuple(last), previous=tuple(previous), user_data=user_data)  # type: ignore[arg-type]
        self._weir_disk.write_snapshot(path, snapshot)

    def _weir_deserialize(self, path: str) -> tuple[Any, ...]:
        """pysyncobj's `deserializer` hook: at restart and when a snapshot from the leader has arrived."""
        try:
            snapshot = self._weir_disk.read_snapshot(path)
        except (OSError, SnapshotCorruptError) as exc:
            self._weir_owner._on_fatal(f"unreadable snapshot {path}: {exc}")
            raise
        self._weir_owner._install_snapshot(snapshot.index, snapshot.user_data)
        cluster = frozenset((self._weir_config.self_address, *self._weir_config.partner_addresses))
        return snapshot.last, snapshot.previous, cluster

    # ----------------------------------------------------------------- durability and latency

    def _SyncObj__sendNextNodeIdx(
        self, node: Any, reset: bool = False, nextNodeIdx: int | None = None, success: bool = False
    ) -> None:
        if success and self._weir_refused_snapshot is not None:
            # Not installed: tell the leader where this member really is.
            reset, success, nextNodeIdx = True, False, self._weir_refused_snapshot
            self._weir_refused_snapshot = None
        if reset and not success and self._weir_conflict_next is not None:
            # A term conflict at prev: say so, and where to resume (the leader keeps it as a floor).
            self._SyncObj__transport.send(
                node,
                {
                    "type": "next_node_idx",
                    "next_node_idx": self._weir_conflict_next,
                    "reset": True,
                    "success": False,
                    CONFLICT_KEY: True,
                },
            )
            return
        if success:
            self._weir_flush_journal()
        _base_send_ack(self, node, reset=reset, nextNodeIdx=nextNodeIdx, success=success)

    def _SyncObj__sendAppendEntries(self) -> None:
        self._weir_flush_journal()
        _base_send_append(self)

    def _checkCommandsToApply(self) -> None:
        self._weir_wakeup_pending = False
        before = self.last_log_index
        super()._checkCommandsToApply()
        if self.last_log_index != before and self._isLeader():
            self._weir_flush_journal()
            if self._weir_config.send_on_propose:
                self._SyncObj__sendAppendEntries()

    def _SyncObj__setCurrentTerm(self, term: int, voted_for: Any) -> None:
        _base_set_term(self, term, voted_for)
        if self._weir_config.fsync:
            self._weir_disk.sync_term()

    def _weir_flush_journal(self) -> None:
        """Sync the journal if it changed since the last flush (pysyncobj never flushes its mmap journal)."""
        if not self._weir_config.fsync:
            return
        log = self._SyncObj__raftLog
        marker = (log[0][1], log[-1][1], log[-1][2], len(log))
        if marker == self._weir_flushed:
            return
        self._weir_disk.sync_journal()
        self._weir_flushed = marker

    # ----------------------------------------------------------------- tick and shutdown

    def _weir_tick(self) -> None:
        if self._weir_wakeup is None and self._weir_config.send_on_propose and self._weir_auto_tick:
            self._weir_wakeup = PipeNotifier(self._poller)
        self._weir_owner._on_tick()

    def _doDestroy(self) -> None:
        super()._doDestroy()
        self._weir_disk.close()


def _fsync_directory(path: os.PathLike[str] | str) -> None:
    _fsync_path(path, os.O_DIRECTORY)


def _fsync_path(path: os.PathLike[str] | str, flags: int = 0) -> None:
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
