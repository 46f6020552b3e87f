"""``cluster.json`` and its secrets file: readable by their owner only, whatever the umask; settings recorded so a
restart reproduces each process, secrets kept out of ``cluster.json``."""

from __future__ import annotations

import argparse
import json
import os
import stat
from pathlib import Path

import pytest

import client.cluster as cluster_module
from client.cluster import is_secret, plan, process_env, read_cluster, start_broker, write_cluster


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_cluster_file_is_owner_only_even_over_a_world_readable_one_and_a_leftover(tmp_path: Path) -> None:
    for name in ("cluster.json", "cluster.json.tmp"):  # an older file and a temporary one left by a crash
        (tmp_path / name).write_text("{}")
        (tmp_path / name).chmod(0o644)
    cluster = {"brokers": [{"nodeId": 0, "env": {"WEIR_BROKER_CLUSTER_RAFT_PASSWORD": "secret"}}]}
    previous = os.umask(0)  # the loosest umask: the mode must come from os.open, not from the umask
    try:
        write_cluster(tmp_path, cluster)
    finally:
        os.umask(previous)
    assert mode(tmp_path / "cluster.json") == 0o600
    assert not (tmp_path / "cluster.json.tmp").exists()
    assert read_cluster(tmp_path) == cluster


def test_up_records_settings_in_cluster_json_and_secrets_in_an_owner_only_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart from another shell starts each process with exactly the settings `up` saw, secrets included, but
    no secret is written to cluster.json."""
    for name in [n for n in os.environ if n.startswith("WEIR_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("WEIR_COMMAND_API_TLS_ENABLED", "true")
    monkeypatch.setenv("WEIR_COMMAND_API_TLS_PRIVATE_KEY_PATH", "/etc/weir/node.key")
    monkeypatch.setenv("WEIR_BROKER_ADMIN_TOKEN", "admin-token-value")
    monkeypatch.setenv("WEIR_BROKER_EXPORTERS_H_ARGS_URL", "postgresql://weir:pg-password@db/weir")
    args = argparse.Namespace(
        data_dir=str(tmp_path), brokers=2, partitions=1, replication=2, broker_hosts=None, broker_netns=None,
        broker_args=[], gateway_port=0,
    )  # fmt: skip
    cluster = plan(args)
    write_cluster(tmp_path, cluster)
    text = (tmp_path / "cluster.json").read_text()
    secrets = json.loads((tmp_path / "cluster-secrets.json").read_text())
    assert mode(tmp_path / "cluster-secrets.json") == 0o600
    assert set(secrets) == {
        "WEIR_BROKER_CLUSTER_RAFT_PASSWORD",
        "WEIR_COMMAND_API_SECRET",
        "WEIR_BROKER_ADMIN_TOKEN",
        "WEIR_BROKER_EXPORTERS_H_ARGS_URL",
    }
    for value in secrets.values():
        assert value not in text
    for process in [*cluster["brokers"], cluster["gateway"]]:
        env = process_env(read_cluster(tmp_path), process)
        assert env["WEIR_COMMAND_API_TLS_ENABLED"] == "true"
        assert env["WEIR_COMMAND_API_TLS_PRIVATE_KEY_PATH"] == "/etc/weir/node.key"
        assert env["WEIR_COMMAND_API_SECRET"] == secrets["WEIR_COMMAND_API_SECRET"]
    assert process_env(cluster, cluster["brokers"][1])["WEIR_BROKER_CLUSTER_NODE_ID"] == "1"
    assert is_secret("WEIR_GATEWAY_HISTORY_URL") and not is_secret("WEIR_COMMAND_API_TLS_CA_PATH")


def test_a_broker_s_data_folder_is_made_owner_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`up` makes each broker's folder before the broker runs, and a broker leaves an existing folder as it is: so
    `up` makes it 0700 itself, as a broker would."""
    monkeypatch.setattr(cluster_module, "_spawn", lambda command, env, log: 4242)
    args = argparse.Namespace(
        data_dir=str(tmp_path), brokers=1, partitions=1, replication=1, broker_hosts=None, broker_netns=None,
        broker_args=[], gateway_port=0,
    )  # fmt: skip
    cluster = plan(args)
    previous = os.umask(0o022)
    try:
        start_broker(cluster, cluster["brokers"][0])
    finally:
        os.umask(previous)
    assert mode(Path(cluster["brokers"][0]["dataDir"])) == 0o700
