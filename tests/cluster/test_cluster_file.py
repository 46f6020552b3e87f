"""``cluster.json`` holds the Raft password: it is created readable by its owner only, whatever the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from client.cluster import read_cluster, write_cluster


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
