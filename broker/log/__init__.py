"""A partition's append-only log: the `LogStorage` seam and its file-backed and in-memory implementations."""

from broker.log.file_log import DEFAULT_SEGMENT_SIZE, FileLog
from broker.log.memory_log import MemoryLog
from broker.log.storage import (
    CommitListener,
    LogBlock,
    LogCorruptionError,
    LogPositionCompactedError,
    LogStorage,
    LogWriteError,
)

__all__ = [
    "DEFAULT_SEGMENT_SIZE",
    "CommitListener",
    "FileLog",
    "LogBlock",
    "LogCorruptionError",
    "LogPositionCompactedError",
    "LogStorage",
    "LogWriteError",
    "MemoryLog",
]
