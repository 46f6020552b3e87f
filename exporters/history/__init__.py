"""The history exporter: instances, elements, variables, incidents, jobs, user tasks and decision evaluations in
SQLite or PostgreSQL tables, and the reader the REST API's searches use (`exporters.history.reader`)."""

from __future__ import annotations

from typing import Any

__all__ = ["HistoryExporter"]


def __getattr__(name: str) -> Any:
    # Imported on first use: the writer process (`exporters.history.writer`) needs the package, not the exporter.
    if name == "HistoryExporter":
        from exporters.history.exporter import HistoryExporter

        return HistoryExporter
    raise AttributeError(f"module 'exporters.history' has no attribute {name!r}")
