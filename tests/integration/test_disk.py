"""A full disk and a deleted history database, with a real `weir start` (its data folder on a small tmpfs).

A full disk refuses commands with RESOURCE_EXHAUSTED and says why (health details, metric), the history writer
holds its writes below its watermark instead of filling the disk, and everything resumes by itself, without a
restart and without losing an acknowledged instance, once the space is back.
"""

from __future__ import annotations

import errno
import json
import stat
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest

from tests.exporters.history_check import query
from tests.harness import WeirProcess, eventually
from tests.integration.clients import Stub, create, deploy
from tests.integration.test_exporting import MiB, free_bytes, is_disk_rejection, log_position, metric, small_disk
from tests.integration.test_history import history_position, wait_until_exported

HISTORY = "exporters.history.HistoryExporter"


def fill(disk: Path, name: str, leave: int | None) -> Path:
    """Write a file on ``disk`` until only ``leave`` bytes are free (None: until the disk is full)."""
    path = disk / name
    chunk = b"\xa5" * MiB
    with path.open("ab") as f:
        while leave is None or free_bytes(disk) - MiB > leave:
            try:
                f.write(chunk)
                f.flush()
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
    return path


def instances_in_history(url: str) -> set[int]:
    return {row[0] for row in query(url, "SELECT process_instance_key FROM process_instances")}


def test_a_full_disk_refuses_commands_says_why_and_everything_resumes_when_space_returns(tmp_path: Path) -> None:
    watermark = 8 * MiB
    history_watermark = 24 * MiB
    with small_disk(tmp_path / "disk", "48m") as disk:
        data = disk / "data"
        url = f"sqlite:///{data / 'history.db'}"
        env = {
            "WEIR_BROKER_MIN_FREE_DISK_BYTES": str(watermark),
            "WEIR_BROKER_LOG_SEGMENT_SIZE": str(2 * MiB),
            "WEIR_BROKER_EXPORTERS_HISTORY_CLASSNAME": HISTORY,
            "WEIR_BROKER_EXPORTERS_HISTORY_ARGS_URL": url,
            "WEIR_BROKER_EXPORTERS_HISTORY_ARGS_FLUSH_DELAY": "0.2",
            # The writer stops before the broker does: its hold is seen while commands are still taken.
            "WEIR_BROKER_EXPORTERS_HISTORY_ARGS_MIN_FREE_DISK_BYTES": str(history_watermark),
        }
        # Snapshots every second: they are attempted while the disk is full. The output goes outside the disk.
        weir = WeirProcess(data, env=env, extra_args=["--snapshot-period", "1"])
        weir.log_path = tmp_path / "weir.log"
        weir.start()
        pid = weir.pid
        channel = grpc.insecure_channel(weir.address)
        stub = Stub(channel)
        try:
            process_id = deploy(stub, "pass-through.bpmn").pid()
            acknowledged = [create(stub, process_id, {"n": n}) for n in range(5)]
            wait_until_exported(weir)

            # 1. Below the writer's watermark, above the broker's: commands are taken, the history waits for room.
            filler = fill(disk, "filler", leave=(watermark + history_watermark) // 2)
            acknowledged += [create(stub, process_id, {"n": n}) for n in range(5, 10)]
            eventually(lambda: metric(weir, "weir_history_disk_full", partition="1") == 1, what="the writer to hold")
            time.sleep(1.0)  # five flush delays
            assert history_position(weir) < log_position(weir), "the writer wrote below its watermark"
            assert free_bytes(disk) > watermark

            # 2. The disk is full: commands are refused with the reason, which health and a metric report too.
            fill(disk, "filler", leave=None)
            eventually(lambda: metric(weir, "weir_partition_disk_full", partition="1") == 1, what="the watermark")
            with pytest.raises(grpc.RpcError) as refused:
                create(stub, process_id, {"n": -1})
            assert is_disk_rejection(refused.value), refused.value
            assert "free disk space" in (refused.value.details() or "")
            time.sleep(2.5)  # snapshots (every second) are attempted on the full disk
            status, health = weir.probe("/health")
            details = health["partitions"]["1"]
            assert "free disk space" in details.get("diskFull", ""), health
            assert status == 200 and "problem" not in details, health  # refusing, not broken
            with pytest.raises(grpc.RpcError) as still_refused:
                create(stub, process_id, {"n": -1})
            assert is_disk_rejection(still_refused.value), still_refused.value

            # 3. Space comes back: commands are taken again and the history catches up, with the same process.
            filler.unlink()

            def accepted() -> int:
                try:
                    return create(stub, process_id, {"n": 99})
                except grpc.RpcError as e:
                    if is_disk_rejection(e):
                        return 0
                    raise

            acknowledged.append(eventually(accepted, timeout=30, interval=0.2, what="commands to be taken again"))
            wait_until_exported(weir)
            assert metric(weir, "weir_history_disk_full", partition="1") == 0
            assert metric(weir, "weir_partition_disk_full", partition="1") == 0
            assert weir.probe("/health")[0] == 200
            assert weir.pid == pid, "no restart was needed"
            missing = set(acknowledged) - instances_in_history(url)
            assert not missing, f"{len(missing)} acknowledged instances are not in the history"
            assert weir.stop() == 0
        finally:
            channel.close()
            weir.kill()
        assert "failed unexpectedly" not in weir.log(), weir.log()


def test_the_data_folder_and_the_history_database_are_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    weir = WeirProcess(data).start()
    channel = grpc.insecure_channel(weir.address)
    try:
        stub = Stub(channel)
        create(stub, deploy(stub, "pass-through.bpmn").pid(), {})
        wait_until_exported(weir)
        files = [data / "history.db", data / "history.db-wal", data / "history.db-shm"]
        eventually(lambda: all(f.exists() for f in files), what="the history database and its WAL files")
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        for f in files:
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f"{f.name}: {oct(f.stat().st_mode)}"
        assert weir.stop() == 0
    finally:
        channel.close()
        weir.kill()


def search_instances(weir: WeirProcess) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{weir.rest_url}/v2/process-instances/search",
        data=json.dumps({"page": {"limit": 100}}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_a_history_database_deleted_while_running_is_noticed_and_rebuilt_from_the_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    url = f"sqlite:///{(data / 'history.db').resolve()}"
    weir = WeirProcess(data).start()
    channel = grpc.insecure_channel(weir.address)
    try:
        stub = Stub(channel)
        process_id = deploy(stub, "pass-through.bpmn").pid()
        acknowledged = [create(stub, process_id, {"n": n}) for n in range(5)]
        wait_until_exported(weir)
        assert search_instances(weir)[1]["page"]["totalItems"] == 5
        for suffix in ("", "-wal", "-shm"):
            (data / f"history.db{suffix}").unlink(missing_ok=True)
        status, body = search_instances(weir)  # searches say so rather than reading an empty file made for them
        if status != 503:  # only when the writer noticed first (it looks about once a second) and made a new one
            assert metric(weir, "weir_history_database_replaced_total", partition="1") == 1, (status, body)
        else:
            assert "does not exist" in json.dumps(body), body
        eventually(  # noticed while idle: nothing is exported meanwhile
            lambda: metric(weir, "weir_history_database_replaced_total", partition="1") == 1,
            timeout=20,
            what="the deleted database to be noticed",
        )
        acknowledged += [create(stub, process_id, {"n": n}) for n in range(5, 8)]
        eventually(lambda: set(acknowledged) <= instances_in_history(url), timeout=30, what="the history to be rebuilt")
        _status, found = eventually(
            lambda: (r := search_instances(weir))[0] == 200 and r[1]["page"]["totalItems"] == 8 and r,
            timeout=20,
            what="searches to read the rebuilt database",
        )
        assert {int(item["processInstanceKey"]) for item in found["items"]} == set(acknowledged)

        # Deleted while the broker is down: found empty at start, rebuilt the same way.
        assert weir.stop() == 0
        for suffix in ("", "-wal", "-shm"):
            (data / f"history.db{suffix}").unlink(missing_ok=True)
        weir.start()
        eventually(lambda: set(acknowledged) <= instances_in_history(url), timeout=30, what="the history rebuilt")
        assert metric(weir, "weir_history_database_replaced_total", partition="1") == 1
        assert weir.stop() == 0
    finally:
        channel.close()
        weir.kill()
    assert "was deleted or replaced while in use" in weir.log(), weir.log()
