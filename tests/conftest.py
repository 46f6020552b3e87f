"""Shared fixtures: real Weir processes on free ports, with their data in pytest's tmp folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import WeirProcess, running


@pytest.fixture(scope="module")
def weir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeirProcess]:
    """One single-node Weir for the whole test module."""
    with running(WeirProcess(tmp_path_factory.mktemp("weir") / "data")) as w:
        yield w


@pytest.fixture
def fresh_weir(tmp_path: Path) -> Iterator[WeirProcess]:
    """A single-node Weir of the test's own, for tests that kill or corrupt it."""
    w = WeirProcess(tmp_path / "data")
    yield w
    w.kill()
