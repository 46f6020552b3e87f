"""Basic authentication under password guessing: authenticated throughput and the timing of refusals.

Against a fresh ``weir start`` with basic authentication (one user), per run:
1. authenticated throughput: ``--clients`` loops calling Topology with the right credentials for ``--seconds``;
2. refusal times: a known user with a wrong password and an unknown user, ``--probes`` calls each, alternating
   (the medians should match: the time of a refusal must not tell which user names exist);
3. the gateway's CPU time per wrong password while they arrive at ``--guess-rate`` a second (from another process,
   on the same address, as guessing through a shared proxy would);
4. authenticated throughput again while the guessing goes on;
5. the time of a refusal once the guesser is over the per-address failure limit.
Prints each figure as the median of ``--runs`` runs (a fresh process each). ``--repo`` runs another checkout's
gateway (e.g. one made with ``git archive main | tar -x -C /tmp/main``), to compare before and after.

    .venv/bin/python tests/bench/basic_auth_bench.py --runs 3
    .venv/bin/python tests/bench/basic_auth_bench.py --runs 3 --repo /tmp/main
"""

import argparse
import asyncio
import base64
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from multiprocessing.queues import Queue
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import grpc

from gateway.api import gateway_pb2 as pb
from gateway.api import gateway_pb2_grpc as pb_grpc
from gateway.auth import hash_password
from tests.harness import REPO, WeirProcess

USER, PASSWORD = "alice", "correct horse battery staple"


def basic(user: str, password: str) -> tuple[tuple[str, str]]:
    return (("authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()),)


async def throughput(stub: pb_grpc.GatewayStub, clients: int, seconds: float) -> float:
    """Authenticated Topology calls per second."""
    done = 0
    deadline = time.monotonic() + seconds

    async def loop() -> None:
        nonlocal done
        while time.monotonic() < deadline:
            await stub.Topology(pb.TopologyRequest(), metadata=basic(USER, PASSWORD), timeout=30)
            done += 1

    started = time.monotonic()
    await asyncio.gather(*(loop() for _ in range(clients)))
    return done / (time.monotonic() - started)


async def refusal_ms(stub: pb_grpc.GatewayStub, user: str, password: str, timeout: float = 30) -> float:
    started = time.perf_counter()
    try:
        await stub.Topology(pb.TopologyRequest(), metadata=basic(user, password), timeout=timeout)
    except grpc.aio.AioRpcError as e:
        assert e.code() == grpc.StatusCode.UNAUTHENTICATED, e
    else:
        raise AssertionError("a wrong password was accepted")
    return (time.perf_counter() - started) * 1000


async def guess(address: str, rate: float, seconds: float) -> int:
    """Wrong passwords at ``rate`` a second for ``seconds`` (open loop: a guesser does not slow down when answers
    take long; at most 256 waiting, each for 10 s at most); how many were answered in time."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.GatewayStub(channel)
        waiting: set[asyncio.Task[float]] = set()
        answered, n, started = 0, 0, time.monotonic()

        def count(task: asyncio.Task[float]) -> None:
            nonlocal answered
            answered += task.exception() is None  # a guess can time out behind others waiting for scrypt

        while time.monotonic() < started + seconds:
            n += 1
            if len(waiting) < 256:
                task = asyncio.create_task(refusal_ms(stub, USER, f"guess-{n}", timeout=10))
                waiting.add(task)
                task.add_done_callback(waiting.discard)
                task.add_done_callback(count)
            await asyncio.sleep(max(0.0, started + n / rate - time.monotonic()))
        await asyncio.gather(*waiting, return_exceptions=True)
        return answered


def _guesser(address: str, rate: float, seconds: float, answered: Queue) -> None:
    answered.put(asyncio.run(guess(address, rate, seconds)))


def start_guesser(address: str, rate: float, seconds: float) -> tuple[multiprocessing.Process, Queue]:
    """A process of its own guesses (as an attacker elsewhere would), so it takes no time from the measuring loop."""
    context = multiprocessing.get_context("spawn")
    answered = context.Queue()
    process = context.Process(target=_guesser, args=(address, rate, seconds, answered))
    process.start()
    return process, answered


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_run(weir: WeirProcess, args: argparse.Namespace) -> dict[str, float]:
    address = weir.address
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.GatewayStub(channel)
        await stub.Topology(pb.TopologyRequest(), metadata=basic(USER, PASSWORD), timeout=30)  # warm the cache
        figures = {"throughput (calls/s)": await throughput(stub, args.clients, args.seconds)}
        known, unknown = [], []
        for n in range(args.probes):
            known.append(await refusal_ms(stub, USER, f"wrong-{n}"))
            unknown.append(await refusal_ms(stub, f"nobody-{n}", "wrong"))
        figures["refusal, known user (ms)"] = statistics.median(known)
        figures["refusal, unknown user (ms)"] = statistics.median(unknown)
        cpu = cpu_seconds(weir.pid)
        guesser, answered = start_guesser(address, args.guess_rate, args.seconds)
        guesses = await asyncio.to_thread(answered.get, timeout=args.seconds + 60)
        guesser.join()
        figures["gateway CPU per wrong password (ms)"] = (cpu_seconds(weir.pid) - cpu) * 1000 / max(1, guesses)
        guesser, answered = start_guesser(address, args.guess_rate, args.seconds + 2)
        await asyncio.sleep(1)  # the guesser is under way
        figures["throughput while guessing (calls/s)"] = await throughput(stub, args.clients, args.seconds)
        figures["guesses answered (/s)"] = await asyncio.to_thread(answered.get, timeout=args.seconds + 60) / (
            args.seconds + 2
        )
        guesser.join()
        figures["refusal over the limit (ms)"] = statistics.median(
            [await refusal_ms(stub, USER, "again") for _ in range(args.probes)]
        )
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--guess-rate", type=float, default=100.0, help="wrong passwords a second while measuring")
    parser.add_argument("--probes", type=int, default=7)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose gateway runs")
    args = parser.parse_args()
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        users = Path(tmp) / "users"
        users.write_text(f"{USER}:{hash_password(PASSWORD)}\n")
        env = {
            "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "basic",
            "WEIR_GATEWAY_SECURITY_AUTHENTICATION_BASIC_USERS_FILE": str(users),
        }
        for n in range(args.runs):
            weir = WeirProcess(Path(tmp) / f"run-{n}", env=env, repo=args.repo).start()
            try:
                runs.append(asyncio.run(one_run(weir, args)))
            finally:
                weir.stop()
            print(f"run {n + 1}: " + ", ".join(f"{k} {v:.1f}" for k, v in runs[-1].items()), flush=True)
    print(f"medians of {len(runs)} runs ({args.repo}):")
    for key in runs[0]:
        print(f"  {key:40} {statistics.median(r[key] for r in runs):10.1f}")


if __name__ == "__main__":
    main()
