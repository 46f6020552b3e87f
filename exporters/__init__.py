"""Exporters: plugins that ship a partition's committed records elsewhere (the SQL history, Elasticsearch, JSON lines).

The SPI (`Exporter`, `Context`, `Controller`, `RecordFilter`) is all a custom exporter needs; the broker runs
exporters through `ExporterDirector` on each partition leader.
"""

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use, so that a process that needs one part (the history writer process needs neither the
# director nor asyncio) does not load all of them.
_EXPORTS = {
    "Context": "exporters.api",
    "Controller": "exporters.api",
    "Exporter": "exporters.api",
    "ExporterConfigurationError": "exporters.api",
    "RecordFilter": "exporters.api",
    "ScheduledTask": "exporters.api",
    "broker_version": "exporters.api",
    "NO_EXPORTER_BOUND": "exporters.director",
    "ExporterDirector": "exporters.director",
    "load_exporter_class": "exporters.director",
    "validate_exporter_configs": "exporters.director",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'exporters' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
