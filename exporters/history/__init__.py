"""The history exporter: instances, elements, variables, incidents, jobs, user tasks and decision evaluations in
SQLite or PostgreSQL tables, and the reader the REST API's searches use (`exporters.history.reader`)."""

from exporters.history.exporter import HistoryExporter

__all__ = ["HistoryExporter"]
