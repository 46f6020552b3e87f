"""Shared fixtures: real Weir processes on free ports, with their data in pytest's tmp folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker import gc_policy
from tests.harness import WeirProcess, running

# The files that take longest in `make test` (6 processes on a 2-core machine), longest first, as `--durations=0`
# summed them per file; a file not listed runs after these, in the collection's order. With `--dist loadfile` each
# file goes whole to the next free process: handed out longest first, the run ends with short files, not with a long
# one started last (xdist's own order, by the number of tests in a file, put files of one long test last).
LONGEST_FIRST = [
    "tests/sim/test_sim_bugs.py",
    "tests/fuzz/test_hostile_inputs.py",
    "tests/web/test_web_view.py",
    "tests/sim/test_sim_seeds.py",
    "tests/integration/test_bad_input_budgets.py",
    "tests/integration/test_gateway_security.py",
    "tests/exporters/test_history_exporter.py",
    "tests/integration/test_corruption.py",
    "tests/integration/test_rest_openapi.py",
    "tests/feel/test_feel_budget.py",
    "tests/raft/test_simulation.py",
    "tests/integration/test_jobs_cli.py",
    "tests/integration/test_rest_api.py",
    "tests/integration/test_history.py",
    "tests/integration/test_workflows.py",
    "tests/integration/test_command_api_security.py",
    "tests/cluster/test_faults.py",
    "tests/integration/test_harness_ports.py",
    "tests/cluster/test_teams.py",
    "tests/integration/test_crash.py",
    "tests/integration/test_endless_chains.py",
    "tests/sim/test_sim_replicated.py",
    "tests/integration/test_python_sdk.py",
    "tests/integration/test_repair_clients.py",
    "tests/integration/test_inspect_cli.py",
    "tests/integration/test_disk.py",
    "tests/integration/test_rest_guards.py",
    "tests/deploy/test_consistency.py",
    "tests/integration/test_backpressure.py",
    "tests/integration/test_waiting.py",
    "tests/exporters/test_history_reader.py",
    "tests/integration/test_rest_reads.py",
    "tests/raft/test_cluster.py",
    "tests/feel/test_feel_size_property.py",
    "tests/integration/test_shutdown.py",
    "tests/integration/test_bad_input.py",
    "tests/integration/test_ad_hoc_sub_process.py",
    "tests/deploy/test_boot.py",
    "tests/integration/test_initial_identity.py",
    "tests/integration/test_admin_auth.py",
    "tests/integration/test_rest_ts_client.py",
    "tests/integration/test_identity_reads.py",
    "tests/integration/test_migration.py",
    "tests/integration/test_cron_timers.py",
]


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: its files in the collection's order (below)
        config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of LONGEST_FIRST first, in its order; within a file, and for the other files, the order is kept."""
    rank = {path: n for n, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def pytest_collection_finish(session: pytest.Session) -> None:
    """The garbage-collector settings of Weir's own long-running processes, once the suite is collected: the
    simulator and the engine run in test processes too, and everything collection allocated stays alive to the end
    (with CPython's defaults, a tenth of a simulator run goes to collections)."""
    gc_policy.apply_after_startup()


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
