"""In-process checks: configuration rules, the snapshot format, the follower-side trim, pysyncobj's seams."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pysyncobj.tcp_server
import pytest
from pysyncobj import SyncObj
from pysyncobj.tcp_connection import TcpConnection
from pysyncobj.transport import TCPTransport
from pysyncobj.version import VERSION as PYSYNCOBJ_VERSION

from broker.raft import RaftConfig, RaftConfigError
from broker.raft._member import SUPPORTED_PYSYNCOBJ, RaftMember
from broker.raft._transport import GuardedConnection, GuardedTransport
from broker.raft.snapshot import RaftSnapshot, SnapshotCorruptError


def config(**changes: Any) -> RaftConfig:
    base = RaftConfig("127.0.0.1:7001", ("127.0.0.1:7002", "127.0.0.1:7003"), "secret", Path("/tmp/x"))
    return base.with_changes(**changes)


def test_default_config_is_valid_and_maps_to_pysyncobj() -> None:
    conf = config().validate().to_syncobj_conf()
    conf.validate()
    assert conf.password == "secret"
    assert conf.useFork is False
    assert conf.autoTickPeriod == 0.01
    assert conf.journalFile.endswith("raft.journal")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"password": ""}, "password is required"),
        ({"self_address": "nohost"}, "self_address"),
        ({"partner_addresses": ("127.0.0.1:7001",)}, "must not contain self_address"),
        ({"partner_addresses": ("127.0.0.1:7002", "127.0.0.1:7002")}, "duplicates"),
        ({"election_min_seconds": 0.1}, "3 x heartbeat_seconds"),
        ({"election_max_seconds": 0.2}, "election_max_seconds must exceed"),
        ({"heartbeat_seconds": 0.005}, "heartbeat_seconds must be >= tick_seconds"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"batch_size_bytes": 1000}, "batch_size_bytes"),
        ({"connection_timeout_seconds": 0.3}, "connection_timeout_seconds"),
    ],
)
def test_invalid_configs_are_rejected_with_a_reason(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(RaftConfigError, match=message):
        config(**changes).validate()


def test_snapshot_round_trips_and_detects_corruption() -> None:
    snapshot = RaftSnapshot(last=(b"\x00cmd", 42, 3), previous=(b"\x01", 41, 3), user_data=b"state" * 100)
    data = snapshot.encode()
    assert RaftSnapshot.decode(data) == snapshot
    assert RaftSnapshot.decode(data).index == 42
    flipped = bytearray(data)
    flipped[20] ^= 0x40
    with pytest.raises(SnapshotCorruptError):
        RaftSnapshot.decode(bytes(flipped))
    with pytest.raises(SnapshotCorruptError):
        RaftSnapshot.decode(data[:-9])


def fake_member(log: list[tuple[bytes, int, int]]) -> Any:
    return SimpleNamespace(_SyncObj__raftLog=log)


def trim(log: list[tuple[bytes, int, int]], message: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    return RaftMember._weir_trim_known_entries(fake_member(log), message)  # type: ignore[arg-type]


def entries(first: int, last: int, term: int) -> list[tuple[bytes, int, int]]:
    return [(b"e%d" % i, i, term) for i in range(first, last + 1)]


def append_entries(prev: int, prev_term: int, new: list[tuple[bytes, int, int]], commit: int) -> dict[str, Any]:
    return {"type": "append_entries", "term": 2, "prevLogIdx": prev, "prevLogTerm": prev_term,
            "entries": new, "commit_index": commit}  # fmt: skip


def test_stale_resend_keeps_the_matching_suffix() -> None:
    log = entries(1, 30, 1)
    trimmed, keep_suffix = trim(log, append_entries(10, 1, entries(11, 20, 1), commit=25))
    assert keep_suffix
    assert trimmed["entries"] == []
    assert (trimmed["prevLogIdx"], trimmed["prevLogTerm"]) == (20, 1)
    assert trimmed["commit_index"] == 20, "commit only what the message vouches for"


def test_stale_resend_within_the_leaders_term_acknowledges_the_whole_log() -> None:
    log = entries(1, 10, 1) + entries(11, 30, 2)
    trimmed, keep_suffix = trim(log, append_entries(12, 2, entries(13, 20, 2), commit=28))
    assert (trimmed["prevLogIdx"], trimmed["prevLogTerm"], trimmed["entries"]) == (30, 2, [])
    assert not keep_suffix
    assert trimmed["commit_index"] == 28


def test_conflict_truncates_from_the_first_conflicting_entry_only() -> None:
    log = entries(1, 15, 1)
    new = entries(11, 12, 1) + entries(13, 18, 2)
    trimmed, keep_suffix = trim(log, append_entries(10, 1, new, commit=5))
    assert not keep_suffix
    assert (trimmed["prevLogIdx"], trimmed["prevLogTerm"]) == (12, 1)
    assert [e[1] for e in trimmed["entries"]] == list(range(13, 19))


def test_new_entries_beyond_the_log_are_appended_without_truncation() -> None:
    log = entries(1, 12, 1)
    trimmed, keep_suffix = trim(log, append_entries(10, 1, entries(11, 16, 1), commit=16))
    assert (trimmed["prevLogIdx"], [e[1] for e in trimmed["entries"]]) == (12, [13, 14, 15, 16])
    assert not keep_suffix
    assert trimmed["commit_index"] == 16


def test_mismatching_prev_entry_is_left_to_pysyncobj_reset() -> None:
    log = entries(1, 12, 1)
    message = append_entries(10, 2, entries(11, 16, 2), commit=16)
    assert trim(log, message) == (message, False)
    beyond = append_entries(20, 1, entries(21, 22, 1), commit=16)
    assert trim(log, beyond) == (beyond, False)


def test_raft_port_binds_the_configured_host_or_the_members_own() -> None:
    """pysyncobj alone listens on 0.0.0.0; the bind address is always set, from `bind_host` or `self_address`."""
    assert config().to_syncobj_conf().bindAddress == "127.0.0.1:7001"
    assert config(bind_host="10.1.2.3").to_syncobj_conf().bindAddress == "10.1.2.3:7001"
    for bad in ({"bind_host": " "}, {"handshake_max_bytes": 100}, {"handshake_timeout_seconds": 0}):
        with pytest.raises(RaftConfigError):
            config(**bad).validate()


def test_pysyncobj_seams_we_override_still_exist() -> None:
    """A pysyncobj upgrade that renames a private method would silently disable a fix: fail here instead."""
    assert PYSYNCOBJ_VERSION == SUPPORTED_PYSYNCOBJ
    for name in (
        "_SyncObj__onMessageReceived",
        "_SyncObj__deleteEntriesFrom",
        "_SyncObj__deleteEntriesTo",
        "_SyncObj__sendNextNodeIdx",
        "_SyncObj__sendAppendEntries",
        "_SyncObj__setCurrentTerm",
        "_SyncObj__loadDumpFile",
        "_checkCommandsToApply",
        "_doDestroy",
    ):
        assert callable(getattr(SyncObj, name)), name
        assert getattr(RaftMember, name) is not getattr(SyncObj, name), f"{name} is not overridden"
    for cls, base, names in (
        (GuardedConnection, TcpConnection, ("_TcpConnection__processRead", "_TcpConnection__processParseMessage")),
        (GuardedTransport, TCPTransport, ("_onNewIncomingConnection", "_onIncomingMessageReceived", "_onTick")),
    ):
        for name in names:
            assert callable(getattr(base, name)), name
            assert getattr(cls, name) is not getattr(base, name), f"{name} is not overridden"
    # Accepted connections are built from this module-level name, and the limits live on those connections.
    assert pysyncobj.tcp_server.TcpConnection is GuardedConnection
    for private in ("_TcpConnection__readBuffer", "_TcpConnection__recvBufferSize", "_TcpConnection__socket"):
        assert private in vars(TcpConnection(poller=None)), private
    assert "_unknownConnections" in TCPTransport.__init__.__code__.co_names
    assert "_SyncObj__transport" in SyncObj.__init__.__code__.co_names  # a conflict reset is sent through it
