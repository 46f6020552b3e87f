"""Exporters: plugins that ship a partition's committed records elsewhere (the SQL history, Elasticsearch, JSON lines).

The SPI (`Exporter`, `Context`, `Controller`, `RecordFilter`) is all a custom exporter needs; the broker runs
exporters through `ExporterDirector` on each partition leader.
"""

from exporters.api import (
    Context,
    Controller,
    Exporter,
    ExporterConfigurationError,
    RecordFilter,
    ScheduledTask,
    broker_version,
)
from exporters.director import NO_EXPORTER_BOUND, ExporterDirector, load_exporter_class, validate_exporter_configs

__all__ = [
    "NO_EXPORTER_BOUND",
    "Context",
    "Controller",
    "Exporter",
    "ExporterConfigurationError",
    "ExporterDirector",
    "RecordFilter",
    "ScheduledTask",
    "broker_version",
    "load_exporter_class",
    "validate_exporter_configs",
]
