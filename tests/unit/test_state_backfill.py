"""A state written before an index existed gets the index filled when a newer Weir opens it."""

from pathlib import Path

import lmdb

from broker.state.db import StateDb, pack, u64
from broker.state.repositories import ProcessState


def _root(key: int, definition: int, element_type: str = "PROCESS", scope: int = -1) -> bytes:
    value = {
        "bpmnProcessId": "p",
        "version": 1,
        "processDefinitionKey": definition,
        "processInstanceKey": key,
        "elementId": "p",
        "flowScopeKey": scope,
        "bpmnElementType": element_type,
        "bpmnEventType": "UNSPECIFIED",
    }
    return pack({"key": key, "state": 3, "value": value, "children": 0, "flows": 0, "jobKey": -1})


def test_running_instances_are_counted_from_an_older_state(tmp_path: Path) -> None:
    env = lmdb.open(str(tmp_path), map_size=1 << 26, max_dbs=8)
    with env.begin(write=True) as txn:  # the sub-databases an older Weir had, with two instances of 7, one of 9
        db = env.open_db(b"element_instances", txn=txn)
        env.open_db(b"meta", txn=txn)
        txn.put(u64(1), _root(1, 7), db=db)
        txn.put(u64(2), _root(2, 7), db=db)
        txn.put(u64(3), _root(3, 9), db=db)
        txn.put(u64(4), _root(1, 7, "SERVICE_TASK", scope=1), db=db)  # not a process instance
    env.close()

    sdb = StateDb(tmp_path, map_size=1 << 26)
    try:
        processes = ProcessState(sdb)
        with sdb.begin() as txn:
            processes.txn = txn
            assert processes.running_instances(7) == 2
            assert processes.running_instances(9) == 1
            assert processes.running_instances(8) == 0
    finally:
        sdb.close()


def test_a_new_state_and_a_reopened_one_are_left_alone(tmp_path: Path) -> None:
    sdb = StateDb(tmp_path, map_size=1 << 26)
    with sdb.begin(write=True) as txn:
        txn.put(u64(5), u64(3), db=sdb.dbs["process_running_instances"])
    sdb.close()
    sdb = StateDb(tmp_path, map_size=1 << 26)
    try:
        with sdb.begin() as txn:
            assert txn.get(u64(5), db=sdb.dbs["process_running_instances"]) == u64(3)
    finally:
        sdb.close()
