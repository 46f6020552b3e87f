"""Secrets never leave the process in clear: `weir config show` masks them, and a broker configured with them does
not write them to its log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.harness import REPO, WeirProcess

SECRETS = {
    "WEIR_BROKER_CLUSTER_RAFT_PASSWORD": "raft-pw-do-not-print",
    "WEIR_BROKER_ADMIN_TOKEN": "admin-token-do-not-print",
    "WEIR_COMMAND_API_SECRET": "command-secret-do-not-print",
    "WEIR_BROKER_EXPORTERS_SEARCH_CLASSNAME": "exporters.elasticsearch.ElasticsearchExporter",
    "WEIR_BROKER_EXPORTERS_SEARCH_ARGS_PASSWORD": "exporter-pw-do-not-print",
    "WEIR_BROKER_EXPORTERS_SEARCH_ARGS_API_KEY": "exporter-key-do-not-print",
    "WEIR_BROKER_EXPORTERS_SEARCH_ARGS_URL": "http://127.0.0.1:9200",
}


def test_config_show_masks_every_secret() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "client.cli", "config", "show"],
        cwd=REPO,
        env={**os.environ, **SECRETS},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    for value in SECRETS.values():
        if "do-not-print" in value:
            assert value not in done.stdout
    shown = yaml.safe_load(done.stdout)
    assert shown["broker"]["cluster"]["raftPassword"] == "(set)"
    assert shown["broker"]["adminToken"] == "(set)"
    assert shown["commandApi"]["secret"] == "(set)"
    args = shown["broker"]["exporters"]["search"]["args"]
    assert args == {"password": "(set)", "apiKey": "(set)", "url": "http://127.0.0.1:9200"}


def test_config_show_leaves_unset_secrets_empty() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    done = subprocess.run(
        [sys.executable, "-m", "client.cli", "config", "show"], cwd=REPO, env=env, capture_output=True, text=True
    )
    shown = yaml.safe_load(done.stdout)
    assert shown["broker"]["cluster"]["raftPassword"] == ""
    assert shown["broker"]["adminToken"] == "" and shown["commandApi"]["secret"] == ""


def test_a_broker_with_secrets_does_not_log_them(tmp_path: Path) -> None:
    env = {k: v for k, v in SECRETS.items() if "EXPORTERS" not in k}
    w = WeirProcess(tmp_path / "data", env=env, command_api=True)
    w.start()
    try:
        assert w.probe("/ready")[0] == 200
    finally:
        w.stop()
    log = w.log_path.read_text(errors="replace")
    assert log, "the broker wrote no log at all"
    for value in env.values():
        assert value not in log
