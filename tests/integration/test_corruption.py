"""Corruption is loud, torn writes are repaired, bad snapshots are skipped: real brokers, real files.

- A flipped byte anywhere in committed log data (an early block, or the last one after a graceful stop or a kill -9)
  makes the broker refuse to start, naming the segment file, the byte offset and the positions; /ready never
  turns 200.
- A torn final write (a partial frame after the committed end, as a crash mid-write leaves it) is cut and the
  broker serves with nothing acknowledged lost. Cutting bytes off a committed block is not a torn write: refused.
- A snapshot that fails its checksum is skipped; an older one (or a replay of the whole log) is used instead.
"""

import re
import time
from pathlib import Path

import grpc
import pytest
from pyzeebe.proto import gateway_pb2, gateway_pb2_grpc

from broker.log import LogBlock
from broker.log.frame import HEADER_SIZE, encode_header, verify_frame
from broker.log.segment import list_segment_files
from broker.stream import snapshots
from broker.tools.inspect import diff_dumps, dump_state, iter_records, replay
from tests.harness import BPMN, WeirProcess


def stub(weir: WeirProcess) -> gateway_pb2_grpc.GatewayStub:
    return gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(weir.address))


def deploy(weir: WeirProcess) -> None:
    resource = gateway_pb2.Resource(name="one-task.bpmn", content=(BPMN / "one-task.bpmn").read_bytes())
    stub(weir).DeployResource(gateway_pb2.DeployResourceRequest(resources=[resource]), timeout=10)


def create(weir: WeirProcess, count: int) -> list[int]:
    """Create instances one request at a time, so the log holds many blocks."""
    s = stub(weir)
    request = gateway_pb2.CreateProcessInstanceRequest(bpmnProcessId="one-task", version=-1, variables="{}")
    return [s.CreateProcessInstance(request, timeout=10).processInstanceKey for _ in range(count)]


def waiting_jobs(weir: WeirProcess) -> int:
    """How many instances wait at their task: activate every job (they stay activated, nothing completes)."""
    request = gateway_pb2.ActivateJobsRequest(
        type="test", worker="audit", timeout=60_000, maxJobsToActivate=1000, requestTimeout=200
    )
    return sum(len(r.jobs) for r in stub(weir).ActivateJobs(request, timeout=10))


def partition_dir(weir: WeirProcess) -> Path:
    return weir.data_dir / "partitions" / "1"


def last_segment(weir: WeirProcess) -> Path:
    return list_segment_files(partition_dir(weir) / "log")[-1][1]


def frames(path: Path) -> list[tuple[int, int, int, int]]:
    """(offset, size, first position, last position) of every frame in a segment file."""
    data = path.read_bytes()
    out, offset = [], 0
    while offset < len(data):
        h = verify_frame(data, offset)
        out.append((offset, h.frame_size, h.first_position, h.last_position))
        offset += h.frame_size
    return out


def flip_byte(path: Path, offset: int) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x5A]))


def expect_refusal(weir: WeirProcess, *patterns: str) -> str:
    """Start the broker and check it exits non-zero, never ready, with a log that matches every pattern."""
    weir.start(wait=False)
    assert weir.proc is not None
    deadline = time.monotonic() + 30
    while weir.proc.poll() is None and time.monotonic() < deadline:
        try:
            status, _ = weir.probe("/ready")
        except OSError:
            status = None
        assert status != 200, "a broker with corrupt committed data must never become ready"
        time.sleep(0.05)
    assert weir.proc.returncode not in (None, 0), f"the broker should refuse to start; log:\n{weir.log()}"
    log = weir.log()
    for pattern in patterns:
        assert re.search(pattern, log), f"expected {pattern!r} in the log:\n{log[-3000:]}"
    return log


def assert_replay_equals_live(weir: WeirProcess, scratch: Path) -> None:
    live = dump_state(partition_dir(weir) / "runtime")
    differences = diff_dumps(live, replay(partition_dir(weir), scratch / f"replay-{time.monotonic_ns()}"))
    assert not differences, "\n".join(differences)


def instances_in_log(weir: WeirProcess) -> set[int]:
    return {
        r.key
        for r in iter_records(partition_dir(weir))
        if r.is_event and r.value.get("bpmnElementType") == "PROCESS" and r.intent_enum.name == "ELEMENT_ACTIVATING"
    }


# -- damaged log ---------------------------------------------------------------------------------------------


def test_flipped_byte_in_an_earlier_committed_block_refuses_to_start(fresh_weir: WeirProcess) -> None:
    fresh_weir.start()
    deploy(fresh_weir)
    create(fresh_weir, 10)
    assert fresh_weir.stop() == 0
    segment = last_segment(fresh_weir)
    offset, size, first, last = frames(segment)[2]
    flip_byte(segment, offset + HEADER_SIZE + (size - HEADER_SIZE) // 2)
    expect_refusal(
        fresh_weir,
        re.escape(str(segment)),
        rf"corrupt at byte {offset} \(positions {first}\.\.{last}\)",
        "checksum mismatch",
    )


@pytest.mark.parametrize("stop", ["graceful", "kill"])
def test_flipped_byte_in_the_last_block_refuses_to_start(fresh_weir: WeirProcess, stop: str) -> None:
    """The last block is committed too: after a kill -9 only the commit marker tells damage from a torn write."""
    fresh_weir.start()
    deploy(fresh_weir)
    create(fresh_weir, 5)
    if stop == "graceful":
        assert fresh_weir.stop() == 0
    else:
        fresh_weir.kill()
    segment = last_segment(fresh_weir)
    offset, size, first, last = frames(segment)[-1]
    flip_byte(segment, offset + size - 2)
    expect_refusal(fresh_weir, re.escape(str(segment)), rf"corrupt at byte {offset} \(positions {first}\.\.{last}\)")


def test_truncated_committed_block_is_refused_not_cut(fresh_weir: WeirProcess) -> None:
    """Bytes missing from an acknowledged block are data loss, not a torn write: the broker must not drop it."""
    fresh_weir.start()
    deploy(fresh_weir)
    create(fresh_weir, 5)
    fresh_weir.kill()
    segment = last_segment(fresh_weir)
    offset, _size, first, _last = frames(segment)[-1]
    with segment.open("r+b") as f:
        f.truncate(segment.stat().st_size - 7)
    expect_refusal(fresh_weir, re.escape(str(segment)), rf"corrupt at byte {offset} \(positions (from )?{first}")


def test_torn_write_after_the_committed_end_is_cut_and_the_broker_serves(
    fresh_weir: WeirProcess, tmp_path: Path
) -> None:
    fresh_weir.start()
    deploy(fresh_weir)
    acknowledged = create(fresh_weir, 8)
    fresh_weir.kill()
    segment = last_segment(fresh_weir)
    good_size = segment.stat().st_size
    last = frames(segment)[-1][3]
    # What a crash in the middle of the next write leaves: a header, and only part of its payload.
    payload = bytes(range(256)) * 4
    torn = encode_header(LogBlock(last + 1, last + 3, payload)) + payload[:300]
    with segment.open("ab") as f:
        f.write(torn)

    fresh_weir.start()
    assert "torn tail" in fresh_weir.log()
    assert segment.stat().st_size == good_size
    more = create(fresh_weir, 3)
    assert waiting_jobs(fresh_weir) == len(acknowledged) + len(more)
    assert fresh_weir.stop() == 0
    assert set(acknowledged + more) <= instances_in_log(fresh_weir)
    assert_replay_equals_live(fresh_weir, tmp_path)


# -- damaged snapshots ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("corrupt", ["newest", "all"])
def test_corrupt_snapshot_is_skipped_and_nothing_is_lost(fresh_weir: WeirProcess, tmp_path: Path, corrupt: str) -> None:
    fresh_weir.start()
    deploy(fresh_weir)
    keys = create(fresh_weir, 4)
    assert fresh_weir.stop() == 0  # snapshot 1
    fresh_weir.start()
    keys += create(fresh_weir, 4)
    assert fresh_weir.stop() == 0  # snapshot 2
    kept = snapshots.list_snapshots(partition_dir(fresh_weir) / "snapshots")
    assert len(kept) == 2
    for snap in kept[: 1 if corrupt == "newest" else 2]:
        flip_byte(snap.data_file, snap.data_file.stat().st_size // 2)

    earlier = fresh_weir.log_path.stat().st_size
    fresh_weir.start()
    log = fresh_weir.log_path.read_bytes()[earlier:].decode(errors="replace")
    assert "skipping corrupt snapshot" in log and "failed its checksum" in log
    expected_base = str(kept[1].applied_position) if corrupt == "newest" else "none"
    assert re.search(rf"recovered: snapshot={expected_base} ", log), log[-3000:]
    assert waiting_jobs(fresh_weir) == len(keys)
    assert fresh_weir.stop() == 0
    assert set(keys) <= instances_in_log(fresh_weir)
    assert_replay_equals_live(fresh_weir, tmp_path)


def test_unreadable_commit_marker_is_only_a_lost_hint(fresh_weir: WeirProcess, tmp_path: Path) -> None:
    """The marker is a hint: garbage in it is reported and recovery falls back to the snapshot position."""
    fresh_weir.start()
    deploy(fresh_weir)
    keys = create(fresh_weir, 3)
    fresh_weir.kill()
    (partition_dir(fresh_weir) / "commit-position").write_bytes(b"not a marker")
    fresh_weir.start()
    assert "ignoring unreadable commit marker" in fresh_weir.log()
    assert waiting_jobs(fresh_weir) == len(keys)
    assert fresh_weir.stop() == 0
    assert_replay_equals_live(fresh_weir, tmp_path)
