"""Batch operations known to a partition: what each is, where it stands here, and the chunks of items left to work.

A batch's entry (by its key) holds its type and parameters, its state on this partition (ACTIVE, SUSPENDED,
CANCELED, COMPLETED), the next chunk to work and how many chunks it has, whether this partition finished its items,
its item counts, and — on the partition that created it (the coordinator) — the partitions that have not reported
yet. Chunks are kept apart (by batch key and chunk index) so working one never rewrites the others. Only event
appliers call the mutating methods.
"""

from __future__ import annotations

from typing import Any

from broker.state.db import StateDb, pack, prefix_keys, u64, unpack
from broker.state.repositories import _Repository


class BatchOperationState(_Repository):
    """Batch operation entries by key, and their chunks of items by (key, chunk index)."""

    __slots__ = ("_chunks",)

    def __init__(self, sdb: StateDb) -> None:
        super().__init__(sdb, "batch_operations")
        self._chunks = sdb.dbs["batch_operation_chunks"]

    def get(self, key: int) -> dict[str, Any] | None:
        v = self.txn.get(u64(key), db=self._db)
        return unpack(v) if v else None

    def put(self, key: int, entry: dict[str, Any]) -> None:
        self.txn.put(u64(key), pack(entry), db=self._db)

    @staticmethod
    def _chunk_key(key: int, index: int) -> bytes:
        return u64(key) + index.to_bytes(4, "big")

    def chunk(self, key: int, index: int) -> list[list[int]] | None:
        """The ``[item key, process instance key]`` pairs of one chunk (None once worked or dropped)."""
        v = self.txn.get(self._chunk_key(key, index), db=self._chunks)
        return unpack(v) if v else None

    def put_chunk(self, key: int, index: int, items: list[list[int]]) -> None:
        self.txn.put(self._chunk_key(key, index), pack(items), db=self._chunks)

    def remove_chunk(self, key: int, index: int) -> None:
        self.txn.delete(self._chunk_key(key, index), db=self._chunks)

    def remove_chunks(self, key: int) -> None:
        for k in list(prefix_keys(self.txn, self._chunks, u64(key))):
            self.txn.delete(k, db=self._chunks)
