"""Replay: rebuild state by applying the events of the log through the engine's appliers.

One function serves a restarting partition (snapshot + log tail) and the offline tools (empty state + the whole
log), so what an operator checks offline is exactly what recovery does.

Positions decide what a record means to replay:
- events above ``applied`` change state (those at or below it are already in the snapshot);
- commands above ``processed`` were written but never processed (follow-ups still queued when the broker stopped);
  they are returned in log order so the stream processor can process them again;
- every key the partition wrote (events, follow-up commands) raises the key generator, so no key is ever issued
  twice; a key a client named in a command does not (it may never have been issued).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.engine.engine import Engine
from broker.log import LogBlock
from broker.protocol.codec import decode_block_full
from broker.protocol.enums import RecordType
from broker.protocol.keys import KeyGenerator
from broker.protocol.record import Record
from broker.state.db import StateDb
from broker.state.repositories import PartitionState

# Commit long replays in slices: bounds LMDB's dirty pages, and a crash during recovery keeps the progress made.
COMMIT_EVERY_RECORDS = 50_000


@dataclass(slots=True)
class ReplayResult:
    applied_position: int
    processed_position: int
    records_read: int = 0
    events_applied: int = 0
    pending: list[Record] = field(default_factory=list)
    # The latest exporter positions a leader reported in the replayed blocks (None: none reported).
    exporter_positions: dict[str, int] | None = None


def replay_start(applied: int, processed: int) -> int:
    """The first position replay must read: unprocessed commands may sit between ``processed`` and ``applied``."""
    return min(applied, processed) + 1


def replay_blocks(
    blocks: Iterable[LogBlock],
    db: StateDb,
    state: PartitionState,
    engine: Engine,
    keys: KeyGenerator,
    *,
    applied: int,
    processed: int,
) -> ReplayResult:
    """Apply every event above ``applied`` from ``blocks`` (in log order) and persist the new positions.

    - State, positions and the key counter are committed together, in slices of COMMIT_EVERY_RECORDS records.
    - Commands above the processed position are collected in ``pending`` (not processed here).
    """
    result = ReplayResult(applied, processed)
    unprocessed: list[Record] = []
    since_commit = 0
    txn = db.begin(write=True)
    state.bind(txn)
    try:
        for block in blocks:
            block_processed, exporter_positions, records = decode_block_full(block.payload)
            if exporter_positions is not None and block.last_position > result.applied_position:
                result.exporter_positions = exporter_positions
                state.meta.set_exporter_positions(exporter_positions)
            for rec in records:
                if rec.record_type == RecordType.COMMAND and rec.position > result.processed_position:
                    unprocessed.append(rec)
                if rec.position <= result.applied_position:
                    continue
                if rec.record_type == RecordType.EVENT or (rec.is_command and rec.source_position >= 0):
                    keys.observe(rec.key)  # keys this partition wrote; a client's command may name any key
                if rec.record_type == RecordType.EVENT:
                    engine.apply_event(state, rec)
                    result.events_applied += 1
                result.records_read += 1
                since_commit += 1
            result.processed_position = max(result.processed_position, block_processed)
            result.applied_position = max(result.applied_position, block.last_position)
            if since_commit >= COMMIT_EVERY_RECORDS:
                state.meta.set_positions(result.applied_position, result.processed_position, keys.counter)
                state.flush()
                txn.commit()
                since_commit = 0
                txn = db.begin(write=True)
                state.bind(txn)
        state.meta.set_positions(result.applied_position, result.processed_position, keys.counter)
        state.flush()
        txn.commit()
    except BaseException:
        state.discard()
        txn.abort()
        raise
    finally:
        state.bind(None)
    result.pending = [r for r in unprocessed if r.position > result.processed_position]
    return result
