"""A fresh ``weir cluster up`` per test (fault tests break their cluster); always torn down, by pid only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """3 brokers, 3 partitions, replication 3, one gateway."""
    c = Cluster(tmp_path / "cluster")
    try:
        yield c.up()
    finally:
        c.kill_everything()
