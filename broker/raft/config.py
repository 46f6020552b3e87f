"""Configuration of one Raft group member, checked before pysyncobj ever sees it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from pysyncobj import SyncObjConf

# Timers measured on a 2-core box with three members as separate processes on 127.0.0.1 (see
# tests/bench/raft_bench.py): the 10 ms tick bounds the wait for the Raft thread when it is not woken;
# heartbeats every 50 ms keep followers' commit index fresh; elections after 0.25-0.5 s of silence give
# ~0.7 s failover without spurious elections while the leader's process is busy with 10-KiB blocks.
DEFAULT_TICK_SECONDS = 0.01
DEFAULT_HEARTBEAT_SECONDS = 0.05
DEFAULT_ELECTION_MIN_SECONDS = 0.25
DEFAULT_ELECTION_MAX_SECONDS = 0.5


class RaftConfigError(ValueError):
    """A `RaftConfig` that cannot work; the message names the field and the rule it breaks."""


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Everything one member of one Raft group needs.

    - `self_address` / `partner_addresses`: "host:port" of this member and of the others of the group. Raft
      ports carry pickled messages: bind them to trusted interfaces only.
    - `bind_host`: the interface the Raft port listens on (the broker's `broker.host`); None: the host of
      `self_address`. pysyncobj alone would listen on every interface (0.0.0.0).
    - `password`: required; encrypts and authenticates all Raft traffic (pysyncobj + `cryptography`), so a
      stranger reaching the port cannot make the member unpickle arbitrary data.
    - `handshake_max_bytes` / `handshake_timeout_seconds` / `max_handshaking_connections`: what a connection
      to the Raft port may buffer, how long it may take, and how many may be pending before it proves the
      password (see `broker.raft._transport`); the handshake itself is a few hundred bytes and milliseconds.
    - `data_dir`: holds the Raft journal (`raft.journal`, `.meta`) and the snapshot (`raft.snapshot`).
    - `max_in_flight` / `max_payload_bytes`: backpressure; `replicate` fails fast beyond them.
    - `batch_size_bytes`: bytes per AppendEntries message; must exceed `max_payload_bytes` so one block never
      needs pysyncobj's multi-message "transmission" path.
    - `compaction_min_entries` / `compaction_min_seconds`: pysyncobj compacts its log (calling the snapshot
      provider) when either is exceeded; keep them large, the provider runs on the Raft thread.
    - `fsync`: persist the journal before acknowledging an entry (see `broker.raft.replicated_log`).
    - `apply_load_fixes`: False only in tests that show what stock pysyncobj 0.3.17 does under load.
    """

    self_address: str
    partner_addresses: tuple[str, ...]
    password: str
    data_dir: Path
    tick_seconds: float = DEFAULT_TICK_SECONDS
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    election_min_seconds: float = DEFAULT_ELECTION_MIN_SECONDS
    election_max_seconds: float = DEFAULT_ELECTION_MAX_SECONDS
    leader_lease_seconds: float = 1.0
    connection_timeout_seconds: float = 1.0
    connection_retry_seconds: float = 0.1
    max_in_flight: int = 256
    max_payload_bytes: int = 256 * 1024
    batch_size_bytes: int = 512 * 1024
    default_timeout_seconds: float = 5.0
    compaction_min_entries: int = 5_000
    compaction_min_seconds: float = 600.0
    send_on_propose: bool = True
    fsync: bool = True
    apply_load_fixes: bool = True
    bind_host: str | None = None
    handshake_max_bytes: int = 16 * 1024
    handshake_timeout_seconds: float = 5.0
    max_handshaking_connections: int = 32

    def __post_init__(self) -> None:
        object.__setattr__(self, "partner_addresses", tuple(self.partner_addresses))
        object.__setattr__(self, "data_dir", Path(self.data_dir))

    def validate(self) -> RaftConfig:
        """Raise `RaftConfigError` naming the first broken rule; return self so calls can be chained."""
        _check_address("self_address", self.self_address)
        for address in self.partner_addresses:
            _check_address("partner_addresses", address)
        if self.self_address in self.partner_addresses:
            raise RaftConfigError(f"partner_addresses must not contain self_address {self.self_address!r}")
        if len(set(self.partner_addresses)) != len(self.partner_addresses):
            raise RaftConfigError(f"partner_addresses has duplicates: {self.partner_addresses!r}")
        if not self.password:
            raise RaftConfigError("password is required: Raft messages are pickles and must be authenticated")
        _check_positive(self, "tick_seconds", "heartbeat_seconds", "election_min_seconds")
        _check_positive(self, "connection_retry_seconds", "default_timeout_seconds", "compaction_min_seconds")
        if self.heartbeat_seconds < self.tick_seconds:
            raise RaftConfigError("heartbeat_seconds must be >= tick_seconds: heartbeats are sent from ticks")
        if self.election_min_seconds <= 3 * self.heartbeat_seconds:
            raise RaftConfigError("election_min_seconds must exceed 3 x heartbeat_seconds (pysyncobj's rule)")
        if self.election_max_seconds <= self.election_min_seconds:
            raise RaftConfigError("election_max_seconds must exceed election_min_seconds (randomised timeout)")
        if self.connection_timeout_seconds < self.election_max_seconds:
            raise RaftConfigError("connection_timeout_seconds must be >= election_max_seconds")
        if self.leader_lease_seconds <= self.heartbeat_seconds:
            raise RaftConfigError("leader_lease_seconds must exceed heartbeat_seconds")
        if self.max_in_flight < 1:
            raise RaftConfigError("max_in_flight must be >= 1")
        if self.max_payload_bytes < 1:
            raise RaftConfigError("max_payload_bytes must be >= 1")
        if self.batch_size_bytes <= self.max_payload_bytes + 1024:
            raise RaftConfigError(
                "batch_size_bytes must exceed max_payload_bytes + 1 KiB (a block must fit one message)"
            )
        if self.compaction_min_entries < 2:
            raise RaftConfigError("compaction_min_entries must be >= 2")
        if self.bind_host is not None and not self.bind_host.strip():
            raise RaftConfigError("bind_host must be a host or address (None: the host of self_address)")
        if self.handshake_max_bytes < 1024:
            raise RaftConfigError("handshake_max_bytes must be >= 1024 (pysyncobj's handshake messages must fit)")
        _check_positive(self, "handshake_timeout_seconds")
        if self.max_handshaking_connections < 1:
            raise RaftConfigError("max_handshaking_connections must be >= 1")
        return self

    def with_changes(self, **changes: object) -> RaftConfig:
        """A copy with some fields replaced (tests and the benchmark tune timers this way)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @property
    def journal_path(self) -> Path:
        return self.data_dir / "raft.journal"

    @property
    def snapshot_path(self) -> Path:
        return self.data_dir / "raft.snapshot"

    @property
    def bind_address(self) -> str:
        """The host:port the Raft port listens on: `bind_host` (or this member's host) and this member's port."""
        host, _, port = self.self_address.rpartition(":")
        return f"{self.bind_host or host}:{port}"

    def to_syncobj_conf(self, **overrides: object) -> SyncObjConf:
        """pysyncobj's configuration; `overrides` carries the callbacks that the member wires in (and, for the
        simulator, `autoTick=False` and `password=None`: its messages never leave the process)."""
        settings: dict[str, object] = dict(
            password=self.password,
            bindAddress=self.bind_address,
            autoTick=True,
            autoTickPeriod=self.tick_seconds,
            commandsQueueSize=self.max_in_flight * 2,
            raftMinTimeout=self.election_min_seconds,
            raftMaxTimeout=self.election_max_seconds,
            appendEntriesPeriod=self.heartbeat_seconds,
            connectionTimeout=self.connection_timeout_seconds,
            connectionRetryTime=self.connection_retry_seconds,
            leaderFallbackTimeout=self.leader_lease_seconds,
            appendEntriesUseBatch=True,
            appendEntriesBatchSizeBytes=self.batch_size_bytes,
            sendBufferSize=2**20,
            recvBufferSize=2**20,
            logCompactionMinEntries=self.compaction_min_entries,
            logCompactionMinTime=self.compaction_min_seconds,
            logCompactionBatchSize=self.batch_size_bytes,
            commandsWaitLeader=False,
            journalFile=str(self.journal_path),
            fullDumpFile=str(self.snapshot_path),
            useFork=False,
            dynamicMembershipChange=False,
        )
        settings.update(overrides)
        return SyncObjConf(**settings)


def _check_address(field: str, address: str) -> None:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RaftConfigError(f"{field}: {address!r} is not 'host:port'")


def _check_positive(config: RaftConfig, *fields: str) -> None:
    for field in fields:
        if not getattr(config, field) > 0:
            raise RaftConfigError(f"{field} must be > 0, got {getattr(config, field)!r}")
