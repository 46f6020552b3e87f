"""One Raft group member as an OS process, driven by a test through stdin and observed through files.

    python -m tests.raft.member_runner --self 127.0.0.1:P1 --partners 127.0.0.1:P2,127.0.0.1:P3 --dir D

It plays the higher layer: `on_commit` appends `index<TAB>payload id<TAB>crc32` to `D/commits.log` and flushes
(page cache: survives kill -9); the snapshot is that whole file; acknowledged payloads go to `D/acks.log`;
`D/status.json` is rewritten every 20 ms. Commands are JSON lines on stdin, answers JSON lines on stdout:

- {"op": "load", "count": N, "size": B, "in_flight": K, "prefix": "p"}: N payloads, K at a time;
- {"op": "sync", "count": N, "size": B}: N payloads one after another, answers commit latencies;
- {"op": "writer", "size": B, "in_flight": K, "prefix": "w"}: propose continuously whenever leader;
- {"op": "writer_stop"}: stop proposing and answer once nothing is in flight any more;
- {"op": "exit"}.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
import zlib
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from broker.raft import (
    BackpressureError,
    NotLeaderError,
    RaftConfig,
    RaftRole,
    ReplicatedLog,
    ReplicationError,
)

PASSWORD = "weir-test-cluster"


class CommitFile:
    """The 'partition log' of this test member: one line per delivered block."""

    def __init__(self, path: Path, fsync: bool) -> None:
        self.path = path
        self.fsync = fsync
        self.last_index = 0
        self.count = 0
        self.installed = 0
        if path.exists():
            for line in path.read_text().splitlines():
                self.last_index = int(line.split("\t", 1)[0])
                self.count += 1
        self.file = open(path, "a")  # noqa: SIM115 - kept open for the process lifetime

    def on_commit(self, index: int, payload: bytes) -> None:
        if index <= self.last_index:
            return  # re-delivery after restart: already durable here
        payload_id = payload.split(b"|", 1)[0].decode()
        self.file.write(f"{index}\t{payload_id}\t{zlib.crc32(payload)}\n")
        self.file.flush()
        if self.fsync:
            os.fsync(self.file.fileno())
        self.last_index = index
        self.count += 1

    def snapshot(self, index: int) -> bytes:
        return self.path.read_bytes()

    def install(self, index: int, data: bytes) -> None:
        if index <= self.last_index:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_bytes(data)
        self.file.close()
        os.replace(tmp, self.path)
        self.file = open(self.path, "a")  # noqa: SIM115
        lines = data.decode().splitlines()
        self.count = len(lines)
        self.installed += 1
        self.last_index = max(index, int(lines[-1].split("\t", 1)[0]) if lines else 0)


def make_payload(payload_id: str, size: int) -> bytes:
    head = payload_id.encode() + b"|"
    return head + os.urandom(max(0, size - len(head)))


class Runner:
    def __init__(self, config: RaftConfig, commit_fsync: bool) -> None:
        self.dir = config.data_dir
        self.commits = CommitFile(self.dir / "commits.log", commit_fsync)
        self.acks = open(self.dir / "acks.log", "a")  # noqa: SIM115
        self.acks_lock = threading.Lock()
        self.out_lock = threading.Lock()
        self.roles: list[tuple[float, str, int, str | None]] = []
        self.stop = threading.Event()
        self.writer_stop = threading.Event()
        self.log = ReplicatedLog(
            config,
            on_commit=self.commits.on_commit,
            snapshot_provider=self.commits.snapshot,
            snapshot_installer=self.commits.install,
            on_role_change=self.on_role_change,
        )
        threading.Thread(target=self.status_loop, daemon=True).start()

    def on_role_change(self, role: RaftRole, term: int, leader: str | None) -> None:
        self.roles.append((time.time(), role.value, term, leader))

    def status_loop(self) -> None:
        path, tmp = self.dir / "status.json", self.dir / "status.json.tmp"
        while not self.stop.is_set():
            s = self.log.status()
            doc = {
                "pid": os.getpid(),
                "time": time.time(),
                "role": s.role.value,
                "term": s.term,
                "leader": s.leader,
                "commit_index": s.commit_index,
                "last_applied": s.last_applied,
                "last_delivered": s.last_delivered,
                "committed_blocks": self.commits.count,
                "snapshots_installed": self.commits.installed,
                "log_entries": s.log_entries,
                "in_flight": s.in_flight,
                "fatal": s.fatal_error,
                "roles": self.roles[-20:],
            }
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, path)
            time.sleep(0.02)

    def reply(self, doc: dict[str, Any]) -> None:
        with self.out_lock:
            sys.stdout.write(json.dumps(doc) + "\n")
            sys.stdout.flush()

    def record_ack(self, payload_id: str, index: int) -> None:
        with self.acks_lock:
            self.acks.write(f"{payload_id}\t{index}\t{time.time():.6f}\n")
            self.acks.flush()

    def propose(self, payload_id: str, size: int, slots: threading.Semaphore, failures: dict[str, int]) -> bool:
        """Propose one payload holding a slot until it resolves; False if this member is not the leader."""
        payload = make_payload(payload_id, size)
        while True:
            try:
                future = self.log.replicate(payload)
                break
            except BackpressureError:
                time.sleep(0.001)
            except NotLeaderError:
                slots.release()
                failures["NotLeaderError"] = failures.get("NotLeaderError", 0) + 1
                return False

        def done(f: Future[int]) -> None:
            exc = f.exception()
            if exc is None:
                self.record_ack(payload_id, f.result())
                failures["acked"] = failures.get("acked", 0) + 1
            else:
                name = type(exc).__name__
                failures[name] = failures.get(name, 0) + 1
            slots.release()

        future.add_done_callback(done)
        return True

    def load(self, cmd: dict[str, Any]) -> None:
        count, size, in_flight, prefix = cmd["count"], cmd["size"], cmd["in_flight"], cmd["prefix"]
        slots = threading.Semaphore(in_flight)
        failures: dict[str, int] = {}
        started = time.perf_counter()
        sent = 0
        for seq in range(count):
            slots.acquire()
            if not self.propose(f"{prefix}-{seq}", size, slots, failures):
                break
            sent += 1
        for _ in range(in_flight):
            slots.acquire()
        elapsed = time.perf_counter() - started
        acked = failures.pop("acked", 0)
        self.reply({"op": "load", "sent": sent, "acked": acked, "failures": failures, "seconds": elapsed})

    def sync(self, cmd: dict[str, Any]) -> None:
        latencies, failures = [], 0
        for seq in range(cmd["count"]):
            payload_id = f"{cmd['prefix']}-{seq}"
            started = time.perf_counter()
            try:
                index = self.log.replicate(make_payload(payload_id, cmd["size"])).result()
            except ReplicationError:
                failures += 1
                continue
            latencies.append(time.perf_counter() - started)
            self.record_ack(payload_id, index)
        self.reply({"op": "sync", "latencies": latencies, "failures": failures})

    def writer(self, cmd: dict[str, Any]) -> None:
        slots = threading.Semaphore(cmd["in_flight"])
        failures: dict[str, int] = {}
        seq = 0
        while not self.stop.is_set() and not self.writer_stop.is_set():
            if not self.log.is_leader:
                time.sleep(0.002)
                continue
            slots.acquire()
            if self.propose(f"{cmd['prefix']}-{os.getpid()}-{seq}", cmd["size"], slots, failures):
                seq += 1
            else:
                time.sleep(0.002)

    def serve(self) -> None:
        self.reply({"op": "started", "pid": os.getpid()})
        for line in sys.stdin:
            cmd = json.loads(line)
            op = cmd["op"]
            if op == "exit":
                break
            if op == "writer_stop":
                self.writer_stop.set()
                while self.log.in_flight:
                    time.sleep(0.01)
                self.reply({"op": "writer_stop"})
                continue
            target = {"load": self.load, "sync": self.sync, "writer": self.writer}[op]
            threading.Thread(target=target, args=(cmd,), daemon=True).start()
        self.stop.set()
        self.log.close()
        self.reply({"op": "exited"})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--self", dest="self_address", required=True)
    parser.add_argument("--partners", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--config", default="{}", help="JSON object of RaftConfig field overrides")
    parser.add_argument("--commit-fsync", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    config = RaftConfig(
        self_address=args.self_address,
        partner_addresses=tuple(a for a in args.partners.split(",") if a),
        password=PASSWORD,
        data_dir=Path(args.dir),
    ).with_changes(**json.loads(args.config))
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    Runner(config, args.commit_fsync).serve()


if __name__ == "__main__":
    main()
