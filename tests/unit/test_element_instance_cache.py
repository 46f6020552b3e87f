"""The element-instance write-back cache behaves like reading and writing LMDB directly."""

from pathlib import Path

import pytest

from broker.protocol.enums import ProcessInstanceIntent as PI
from broker.protocol.values import ProcessInstanceValue
from broker.state.db import StateDb
from broker.state.element_instance import ElementInstance
from broker.state.repositories import PartitionState


def instance(key: int, parent: int = -1, state: int = PI.ELEMENT_ACTIVATING) -> ElementInstance:
    value = ProcessInstanceValue("p", 1, 7, 9, f"e{key}", parent, "SERVICE_TASK", "UNSPECIFIED")
    return ElementInstance(key, state, value)


@pytest.fixture
def db(tmp_path: Path):
    sdb = StateDb(tmp_path / "state")
    yield sdb
    sdb.close()


def read(db: StateDb, key: int) -> ElementInstance | None:
    view = PartitionState(db)
    with db.begin() as txn:
        view.bind(txn)
        found = view.elements.get(key)
        view.bind(None)
    return found


def test_flushed_writes_are_committed_and_instances_cannot_be_changed_behind_the_cache(db: StateDb) -> None:
    state = PartitionState(db)
    txn = db.begin(write=True)
    state.bind(txn)
    state.elements.add(instance(1))
    state.elements.add(instance(2, parent=1))
    got = state.elements.get(1)
    assert got is not None
    with pytest.raises(AttributeError):
        got.state = PI.ELEMENT_COMPLETED  # type: ignore[misc]
    with pytest.raises(AttributeError):
        got.value.element_id = "changed"  # type: ignore[misc]
    assert state.elements.get(1) == instance(1)
    assert state.elements.children(1) == [2]
    state.elements.remove(2)
    state.flush()
    txn.commit()
    state.bind(None)
    assert read(db, 1) == instance(1)
    assert read(db, 2) is None


def test_a_nested_transaction_sees_the_parents_cached_writes_and_an_abort_forgets_its_own(db: StateDb) -> None:
    state = PartitionState(db)
    txn = db.begin(write=True)
    state.bind(txn)
    state.elements.add(instance(1))
    state.flush()
    child = db.begin(write=True, parent=txn)
    state.bind(child)
    assert state.elements.get(1) == instance(1)
    state.elements.put(instance(1, state=PI.ELEMENT_ACTIVATED))
    state.discard()
    child.abort()
    state.bind(txn)
    assert state.elements.get(1) == instance(1)
    state.flush()
    txn.commit()
    state.bind(None)
    assert read(db, 1) == instance(1)


def test_ending_a_transaction_with_unflushed_writes_is_an_error_not_a_silent_loss(db: StateDb) -> None:
    state = PartitionState(db)
    txn = db.begin(write=True)
    state.bind(txn)
    state.elements.add(instance(1))
    with pytest.raises(RuntimeError, match="not flushed"):
        state.bind(None)
    txn.abort()
