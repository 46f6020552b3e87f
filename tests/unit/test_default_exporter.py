"""`weir start` exports to the history (SQLite in the data folder) unless exporters are configured or turned off."""

from __future__ import annotations

import argparse
from pathlib import Path

from client.cli import _exporters


def start_args(data_dir: Path, no_exporter: bool = False) -> argparse.Namespace:
    return argparse.Namespace(command="start", data_dir=str(data_dir), no_exporter=no_exporter)


def test_weir_start_writes_the_history_into_the_data_folder(tmp_path: Path) -> None:
    exporters = _exporters(start_args(tmp_path / "data"), {"exporters": {}, "dataDir": "ignored"})
    assert exporters == {
        "history": {
            "className": "exporters.history.HistoryExporter",
            "args": {"url": f"sqlite:///{(tmp_path / 'data' / 'history.db').resolve()}"},
        }
    }


def test_no_exporter_and_configured_exporters_replace_the_history(tmp_path: Path) -> None:
    assert _exporters(start_args(tmp_path, no_exporter=True), {"exporters": {}, "dataDir": "d"}) == {}
    jsonl = {"className": "exporters.jsonl.JsonLinesExporter", "args": {"directory": str(tmp_path / "exports")}}
    assert _exporters(start_args(tmp_path), {"exporters": {"jsonl": jsonl}, "dataDir": "d"}) == {"jsonl": jsonl}
