"""Received signals are remembered long enough to ignore redeliveries, and forgotten after the retention period."""

from pathlib import Path

from broker.engine.appliers import SIGNAL_RECEIPT_RETENTION_MS
from broker.engine.engine import Engine
from broker.protocol.enums import RecordType, SignalIntent, ValueType
from broker.protocol.keys import KeyGenerator
from broker.protocol.record import Record
from broker.state.db import StateDb
from broker.state.repositories import PartitionState


def broadcasted(key: int, timestamp: int, partition_id: int = 1) -> Record:
    value = {"signalName": "s", "variables": {}, "tenantId": "<default>"}
    return Record(
        -1,
        key,
        RecordType.EVENT,
        ValueType.SIGNAL,
        SignalIntent.BROADCASTED,
        timestamp,
        value,
        partition_id=partition_id,
    )


def test_receipts_of_other_partitions_signals_expire_after_the_retention(tmp_path: Path) -> None:
    db = StateDb(tmp_path / "state")
    state = PartitionState(db)
    engine = Engine(state)
    from_two = KeyGenerator(2)
    first, second = from_two.next_key(), from_two.next_key()
    txn = db.begin(write=True)
    state.bind(txn)
    engine.apply_event(state, broadcasted(first, 1_000))
    engine.apply_event(state, broadcasted(second, 2_000))
    assert state.signal_receipts.get(first) == 2 and state.signal_receipts.get(second) == 2
    # A signal broadcast here (partition 1) leaves no receipt, but its record time prunes old ones.
    engine.apply_event(state, broadcasted(KeyGenerator(1).next_key(), 1_500 + SIGNAL_RECEIPT_RETENTION_MS))
    assert state.signal_receipts.get(first) is None
    assert state.signal_receipts.get(second) == 2
    engine.apply_event(state, broadcasted(from_two.next_key(), 2_001 + SIGNAL_RECEIPT_RETENTION_MS))
    assert state.signal_receipts.get(second) is None
    assert len(list(state.iter_all("signal_receipts"))) == len(list(state.iter_all("signal_receipt_times"))) == 1
    state.flush()
    txn.commit()
    state.bind(None)
    db.close()
