"""The simulated world a Raft member runs in under `broker.raft.simulation`: clock, randomness, disk, network.

pysyncobj reads its clock (`monotonicTime`), its election randomness (`random`), creates its journal
(`createJournal`) and touches its snapshot files (`open`, `atomicReplace`, `os.path.isfile`) through module
globals. While a simulation runs, `world_switch()` points those globals at dispatchers that ask the calling
thread's active `NodeEnv` (set by `NodeEnv.active()`) and fall back to the real function on any other thread,
so a real member ticking in another thread of the same process is unaffected; the originals are restored when
the last simulation leaves the switch. Production never imports this module.

Disk model: a member's journal entries, its meta file (term, vote, commit index) and its snapshot files each
have a written state (what a `kill -9` leaves: the page cache survives) and a synced state (what a power loss
leaves). The member's sync points (`MemberDisk`, see `broker.raft._member`) copy written to synced; a file
rename is durable once its directory is synced. Nothing else reaches the synced state.

Network model: every ordered pair of members is a link. A member sees a partner as connected while its link
to that partner is up (so a one-way cut makes the far side look disconnected to the sender only, as a TCP
connection whose acknowledgements never arrive would). A cut, a crash or a restart resets the links involved:
messages in flight on them are lost, as with a torn-down TCP connection. On top, per message and seeded:
latency (a floor plus an exponential tail), loss, duplication, and reordering (when `fifo` is off, every copy
gets its own latency). Messages are pickled at send and unpickled at delivery, so members never share state.
"""

from __future__ import annotations

import contextlib
import heapq
import io
import os
import pickle
import random
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pysyncobj.serializer
import pysyncobj.syncobj
from pysyncobj.journal import Journal
from pysyncobj.node import Node
from pysyncobj.transport import Transport

from broker.raft.snapshot import RaftSnapshot, SnapshotCorruptError

# ----------------------------------------------------------------------------------------------- the switch

_local = threading.local()
_switch_lock = threading.Lock()
_switch_users = 0
_originals: dict[tuple[Any, str], Any] = {}


def current_env() -> NodeEnv | None:
    """The simulated member whose code runs on this thread right now, if any."""
    stack: list[NodeEnv] | None = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def _dispatch(original: Callable[..., Any], simulated: Callable[[NodeEnv], Callable[..., Any]]) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        env = current_env()
        if env is None:
            return original(*args, **kwargs)
        return simulated(env)(*args, **kwargs)

    return call


class _RandomDispatch:
    """Stands in for the `random` module inside pysyncobj.syncobj (which calls `random.random()` only)."""

    def __getattr__(self, name: str) -> Any:
        env = current_env()
        return getattr(random if env is None else env.rng, name)


class _PathDispatch:
    def isfile(self, path: str) -> bool:
        env = current_env()
        return os.path.isfile(path) if env is None else env.disk.files.isfile(path)

    def __getattr__(self, name: str) -> Any:
        return getattr(os.path, name)


class _OsDispatch:
    """Stands in for the `os` module inside pysyncobj.syncobj (which calls `os.path.isfile` only)."""

    path = _PathDispatch()

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


def _replacements() -> dict[tuple[Any, str], Any]:
    syncobj, serializer = pysyncobj.syncobj, pysyncobj.serializer
    return {
        (syncobj, "monotonicTime"): _dispatch(syncobj.monotonicTime, lambda env: env.monotonic),
        (syncobj, "createJournal"): _dispatch(syncobj.createJournal, lambda env: env.disk.create_journal),
        (syncobj, "random"): _RandomDispatch(),
        (syncobj, "os"): _OsDispatch(),
        (serializer, "open"): _dispatch(open, lambda env: env.disk.files.open),
        (serializer, "atomicReplace"): _dispatch(serializer.atomicReplace, lambda env: env.disk.files.rename),
    }


@contextlib.contextmanager
def world_switch() -> Iterator[None]:
    """Point pysyncobj's clock, randomness and file access at the dispatchers while the block runs."""
    global _switch_users
    with _switch_lock:
        if _switch_users == 0:
            for (module, name), replacement in _replacements().items():
                _originals[(module, name)] = module.__dict__.get(name, _MISSING)
                setattr(module, name, replacement)
        _switch_users += 1
    try:
        yield
    finally:
        with _switch_lock:
            _switch_users -= 1
            if _switch_users == 0:
                for (module, name), original in _originals.items():
                    if original is _MISSING:
                        delattr(module, name)
                    else:
                        setattr(module, name, original)
                _originals.clear()


_MISSING = object()


# ------------------------------------------------------------------------------------------------- the disk


class _Inode:
    __slots__ = ("data", "synced")

    def __init__(self) -> None:
        self.data = bytearray()
        self.synced: bytes | None = None


class _Writer(io.RawIOBase):
    def __init__(self, inode: _Inode) -> None:
        self._inode = inode

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._inode.data += chunk
        return len(chunk)


class SimFiles:
    """A directory of whole files with written and synced contents, and names made durable by a directory sync."""

    def __init__(self) -> None:
        self._names: dict[str, _Inode] = {}
        self._durable_names: dict[str, _Inode] = {}

    def open(self, path: str, mode: str = "r") -> io.IOBase:
        if "w" in mode:
            created = self._names[str(path)] = _Inode()
            return _Writer(created)
        return io.BytesIO(self.read(path))

    def read(self, path: str) -> bytes:
        inode = self._names.get(str(path))
        if inode is None:
            raise FileNotFoundError(path)
        return bytes(inode.data)

    def write(self, path: str, data: bytes, sync: bool) -> None:
        inode = _Inode()
        inode.data += data
        if sync:
            inode.synced = bytes(data)
        self._names[str(path)] = inode

    def sync(self, path: str) -> None:
        inode = self._names.get(str(path))
        if inode is None:
            raise FileNotFoundError(path)
        inode.synced = bytes(inode.data)

    def rename(self, source: str, target: str) -> None:
        self._names[str(target)] = self._names.pop(str(source))

    def isfile(self, path: str) -> bool:
        return str(path) in self._names

    def sync_directory(self) -> None:
        self._durable_names = dict(self._names)

    def lose_unsynced(self) -> None:
        self._names = dict(self._durable_names)
        for inode in self._names.values():
            inode.data = bytearray(inode.synced or b"")


class SimDisk:
    """One member's data directory; implements `broker.raft._member.MemberDisk` and creates its journal."""

    def __init__(self, on_sync: Callable[[], None]) -> None:
        self.entries: list[tuple[bytes, int, int]] = []
        self.synced_entries: list[tuple[bytes, int, int]] = []
        self.meta_written: dict[str, Any] = {}
        self.meta_synced: dict[str, Any] = {}
        self.files = SimFiles()
        self.skip_journal_sync = False
        """Injected bug for the simulator's self-test: the journal sync returns without syncing anything."""
        self._on_sync = on_sync

    # MemberDisk
    def prepare(self) -> None:
        pass

    def sync_journal(self) -> None:
        if not self.skip_journal_sync:
            self.synced_entries = list(self.entries)
        self._on_sync()

    def sync_term(self) -> None:
        self.meta_synced = dict(self.meta_written)
        self.files.sync_directory()
        self._on_sync()

    def sync_directory(self) -> None:
        self.files.sync_directory()
        self._on_sync()

    def sync_snapshot(self, path: str) -> None:
        self.files.sync(path)
        self.files.sync_directory()
        self._on_sync()

    def write_snapshot(self, path: str, snapshot: RaftSnapshot) -> None:
        self.files.write(path, snapshot.encode(), sync=True)
        self._on_sync()

    def read_snapshot(self, path: str) -> RaftSnapshot:
        return RaftSnapshot.decode(self.files.read(path))

    def close(self) -> None:
        pass

    # pysyncobj's side
    def create_journal(self, path: str | None = None) -> SimJournal:
        return SimJournal(self)

    def crash(self, lose_unsynced: bool) -> None:
        """What the next process finds: everything written (kill -9) or only what was synced (power loss)."""
        if lose_unsynced:
            self.entries = list(self.synced_entries)
            self.meta_written = dict(self.meta_synced)
            self.files.lose_unsynced()

    def durable_snapshot_index(self, path: str) -> int:
        """The index the snapshot a power loss would leave covers (0: none, or one that cannot be read)."""
        inode = self.files._durable_names.get(str(path))
        if inode is None or not inode.synced:
            return 0
        try:
            return RaftSnapshot.decode(inode.synced).index
        except SnapshotCorruptError:
            return 0


class SimJournal(Journal):  # type: ignore[misc]
    """pysyncobj's FileJournal semantics on a `SimDisk`: entries are written at once (the mmap), the meta file
    when the term changes and once a second (pysyncobj's own schedule); syncing is the member's business."""

    def __init__(self, disk: SimDisk) -> None:
        self._disk = disk
        self._meta = dict(disk.meta_written)
        self._meta_saved = True

    def add(self, command: bytes, idx: int, term: int) -> None:
        self._disk.entries.append((bytes(command), idx, term))

    def clear(self) -> None:
        self._disk.entries = []

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        del self._disk.entries[entryFrom:]

    def deleteEntriesTo(self, entryTo: int) -> None:
        self._disk.entries = self._disk.entries[entryTo:]

    def __getitem__(self, item: Any) -> Any:
        return self._disk.entries[item]

    def __len__(self) -> int:
        return len(self._disk.entries)

    def _destroy(self) -> None:
        pass

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        if self._meta.get("raftCommitIndex") != raftCommitIndex:
            self._meta["raftCommitIndex"] = raftCommitIndex
            self._meta_saved = False

    def getRaftCommitIndex(self) -> int:
        return int(self._meta.get("raftCommitIndex", 1))

    def setCurrentTerm(self, term: int, votedForNodeId: Any) -> None:
        self._meta["currentTerm"] = term
        self._meta["votedForNodeId"] = votedForNodeId
        self._disk.meta_written = dict(self._meta)
        self._meta_saved = True

    def getCurrentTerm(self) -> int:
        return int(self._meta.get("currentTerm", 0))

    def getVotedForNodeId(self) -> Any:
        return self._meta.get("votedForNodeId")

    def onOneSecondTimer(self) -> None:
        if not self._meta_saved:
            self._disk.meta_written = dict(self._meta)
            self._meta_saved = True


# ---------------------------------------------------------------------------------------------- the network


@dataclass(slots=True)
class LinkFaults:
    """Per-message faults of one link (probabilities per message; latency in seconds)."""

    drop: float = 0.0
    duplicate: float = 0.0
    fifo: bool = True
    latency_min: float = 0.0005
    latency_tail: float = 0.002
    bytes_per_second: float | None = None
    """Bandwidth: a message waits for the ones before it on the link to be sent (None: unlimited)."""


@dataclass(slots=True)
class _Link:
    cut: bool = False
    epoch: int = 0
    last_arrival: float = 0.0
    sending_until: float = 0.0


@dataclass(order=True, slots=True)
class _InFlight:
    arrival: float
    seq: int
    source: str = field(compare=False)
    target: str = field(compare=False)
    epoch: int = field(compare=False)
    data: bytes = field(compare=False)


class SimNetwork:
    """Links between member addresses, with the faults described in the module docstring."""

    def __init__(self, addresses: list[str], rng: random.Random) -> None:
        self._rng = rng
        self.addresses = list(addresses)
        self.links = {(a, b): _Link() for a in addresses for b in addresses if a != b}
        self.faults = {pair: LinkFaults() for pair in self.links}
        self._queue: list[_InFlight] = []
        self._seq = 0
        self.up: set[str] = set()
        self.sent = self.dropped = self.duplicated = 0

    def connected(self, source: str, target: str) -> bool:
        return source in self.up and target in self.up and not self.links[(source, target)].cut

    def send(self, source: str, target: str, message: Any, at: float) -> bool:
        if not self.connected(source, target):
            return False
        link, faults = self.links[(source, target)], self.faults[(source, target)]
        data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        self.sent += 1
        rng = self._rng
        copies = 1
        if faults.drop and rng.random() < faults.drop:
            self.dropped += 1
            copies = 0
        elif faults.duplicate and rng.random() < faults.duplicate:
            self.duplicated += 1
            copies = 2
        for _ in range(copies):
            sent_at = at
            if faults.bytes_per_second:
                sent_at = link.sending_until = max(at, link.sending_until) + len(data) / faults.bytes_per_second
            arrival = sent_at + faults.latency_min + rng.expovariate(1 / faults.latency_tail)
            if faults.fifo:
                arrival = max(arrival, link.last_arrival)
                link.last_arrival = arrival
            self._seq += 1
            heapq.heappush(self._queue, _InFlight(arrival, self._seq, source, target, link.epoch, data))
        return True

    def due(self, now: float) -> Iterator[tuple[str, str, Any]]:
        """Pop every message arriving by `now` whose link survived since it was sent, in arrival order."""
        queue = self._queue
        while queue and queue[0].arrival <= now:
            message = heapq.heappop(queue)
            link = self.links[(message.source, message.target)]
            if link.epoch != message.epoch or link.cut or message.target not in self.up:
                continue
            yield message.source, message.target, pickle.loads(message.data)

    def set_cut(self, source: str, target: str, cut: bool) -> None:
        link = self.links[(source, target)]
        if link.cut != cut:
            link.cut = cut
            link.epoch += 1

    def reset_links_of(self, address: str) -> None:
        for (source, target), link in self.links.items():
            if address in (source, target):
                link.epoch += 1

    @property
    def in_flight(self) -> int:
        return len(self._queue)

    @property
    def next_arrival(self) -> float | None:
        """When the earliest message in flight arrives (None: nothing in flight)."""
        return self._queue[0].arrival if self._queue else None


class SimNode(Node):  # type: ignore[misc]
    """pysyncobj's node with a hash that does not depend on PYTHONHASHSEED: pysyncobj iterates sets of nodes
    when it sends, and the order of those sends must be the same in every process for the same seed."""

    def __init__(self, address: str, **kwargs: Any) -> None:
        super().__init__(address, **kwargs)

    @property
    def address(self) -> str:
        return str(self.id)

    def __hash__(self) -> int:
        return zlib.crc32(str(self.id).encode())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and self.id == other.id


class SimTransport(Transport):  # type: ignore[misc]
    """pysyncobj's transport API over a `SimNetwork`; created by pysyncobj inside the member's `NodeEnv`."""

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:
        super().__init__(syncObj, selfNode, otherNodes)
        env = current_env()
        assert env is not None, "SimTransport is created inside NodeEnv.active()"
        self._env = env
        self._nodes = {str(node.id): node for node in otherNodes}
        self._connected: set[str] = set()
        self._ready = False
        env.transport = self

    @property
    def ready(self) -> bool:
        return self._ready

    def tryGetReady(self) -> None:
        self._ready = True
        self.refresh_connections()

    def refresh_connections(self) -> None:
        """Tell pysyncobj about partners that became reachable or unreachable since the last call."""
        if not self._ready:
            return
        network, me = self._env.network, self._env.address
        for address in sorted(self._nodes):
            now_connected = network.connected(me, address)
            if now_connected and address not in self._connected:
                self._connected.add(address)
                self._onNodeConnected(self._nodes[address])
            elif not now_connected and address in self._connected:
                self._connected.discard(address)
                self._onNodeDisconnected(self._nodes[address])

    def send(self, node: Any, message: Any) -> bool:
        env = self._env
        return env.network.send(env.address, str(node.id), message, max(env.world_now(), env.busy_until))

    def deliver(self, source: str, message: Any) -> None:
        self._onMessageReceived(self._nodes[source], message)

    def destroy(self) -> None:
        self._ready = False


CLOCK_READ_SECONDS = 1e-5


class NodeEnv:
    """Everything one simulated member reads from the world: its clock, randomness, disk, and network."""

    def __init__(self, address: str, world_now: Callable[[], float], network: SimNetwork, seed: int) -> None:
        self.address = address
        self.world_now = world_now
        self.network = network
        self.rng = random.Random(seed)
        self.clock_offset = 0.0
        self._last_read = float("-inf")
        self.busy_until = 0.0
        self.slow_sync_seconds = 0.0
        self.disk = SimDisk(on_sync=self._stall)
        self.transport: SimTransport | None = None
        self.inbox: deque[tuple[str, Any]] = deque()

    def monotonic(self) -> float:
        """The member's clock: world time plus its jumps, and `CLOCK_READ_SECONDS` more for every read within
        one world tick, so that pysyncobj's loops bounded by elapsed time end as they do on a real CPU."""
        now = max(self.world_now() + self.clock_offset, self._last_read + CLOCK_READ_SECONDS)
        self._last_read = now
        return now

    def busy(self) -> bool:
        return self.busy_until > self.world_now()

    def _stall(self) -> None:
        if self.slow_sync_seconds:
            self.busy_until = max(self.busy_until, self.world_now()) + self.slow_sync_seconds

    @contextlib.contextmanager
    def active(self) -> Iterator[NodeEnv]:
        """Run the block as this member: pysyncobj's globals answer from this environment."""
        stack: list[NodeEnv] | None = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()
