"""Logging setup: readable text for a terminal, one JSON object per line for log pipelines.

Records that concern a partition carry ``partition``, and where relevant ``key`` and ``position``, as extra fields.
"""

from __future__ import annotations

import json
import logging
import sys
import time

_EXTRA_FIELDS = ("partition", "key", "position")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _EXTRA_FIELDS:
            if hasattr(record, name):
                out[name] = getattr(record, name)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out)


def configure(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class PartitionLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger whose every line carries the partition id (and, when given, key and position) as fields."""

    def __init__(self, logger: logging.Logger, partition_id: int) -> None:
        super().__init__(logger, {"partition": partition_id})

    def process(self, msg: str, kwargs: dict) -> tuple[str, dict]:  # type: ignore[override]
        kwargs["extra"] = {**self.extra, **(kwargs.get("extra") or {})}  # type: ignore[dict-item]
        return msg, kwargs
