"""A stranger on a port, as tests see it: raw TCP clients, the kernel's listening table, a process's RSS.

Everything reads what the kernel reports (/proc), so the checks hold for whichever process owns the port.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column


def socket_inodes(pids: set[int]) -> set[str]:
    """The inodes of the sockets the processes ``pids`` hold open (from /proc/PID/fd)."""
    inodes: set[str] = set()
    for pid in pids:
        fds = Path(f"/proc/{pid}/fd")
        for fd in fds.iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return inodes


def listening_hosts(port: int, pids: set[int] | None = None) -> set[str]:
    """The local addresses with a socket listening on ``port`` (IPv4 and IPv6), from /proc/net/tcp{,6}; with
    ``pids``, only sockets those processes hold (another program may listen on the same port of another address)."""
    owned = socket_inodes(pids) if pids is not None else None
    found: set[str] = set()
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            address, _, port_hex = local.partition(":")
            if state != _LISTEN or int(port_hex, 16) != port or (owned is not None and fields[9] not in owned):
                continue
            # The kernel prints each 32-bit word of the address in host byte order.
            raw = b"".join(struct.pack("=I", int(address[i : i + 8], 16)) for i in range(0, len(address), 8))
            ip = ipaddress.ip_address(raw[:width])
            mapped = getattr(ip, "ipv4_mapped", None)  # gRPC listens on ::ffff:a.b.c.d for an IPv4 host
            found.add(str(mapped or ip))
    return found


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` (VmRSS in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def status(pid: int) -> dict[str, int]:
    """The ``Vm*`` and ``Rss*`` lines of /proc/PID/status, in bytes."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name.startswith(("Vm", "Rss")) and rest.strip().endswith("kB"):
            values[name] = int(rest.split()[0]) * 1024
    return values


class PeakMemory:
    """The highest resident memory of ``pid`` while the block runs: sampled VmRSS, and VmHWM reset at the start."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self.hwm_reset = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, status(self.pid)["VmRSS"])
            time.sleep(0.005)

    def __enter__(self) -> PeakMemory:
        try:  # "5" resets the peak resident size to the current one (proc(5), clear_refs)
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
            self.hwm_reset = True
        except OSError:
            pass
        self.before = status(self.pid)["VmRSS"]
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.hwm_reset:
            self.peak = max(self.peak, status(self.pid)["VmHWM"])

    @property
    def grown(self) -> int:
        return self.peak - self.before


@dataclass(frozen=True)
class Flood:
    """What a flooding client saw: bytes the kernel accepted from it, and whether the peer closed on it."""

    sent: int
    closed_by_peer: bool


def flood(host: str, port: int, total: int, *, length_prefix: int = 2**31 - 1, stall_timeout: float = 10.0) -> Flood:
    """Announce a ``length_prefix``-byte message the way pysyncobj frames one, then send random bytes.

    Stops at ``total`` bytes, when the peer closes or resets the connection, or when the peer has read
    nothing for ``stall_timeout`` seconds (the send blocks: the peer neither reads nor closes)."""
    garbage = os.urandom(64 * 1024)
    sent = 0
    with socket.create_connection((host, port), timeout=5) as s:
        s.settimeout(stall_timeout)
        try:
            s.sendall(struct.pack("i", length_prefix))
            while sent < total:
                sent += s.send(garbage[: total - sent])
        except (BrokenPipeError, ConnectionResetError):
            return Flood(sent, True)
        except TimeoutError:
            return Flood(sent, False)
        return Flood(sent, seconds_until_closed(s, stall_timeout) is not None)


def seconds_until_closed(s: socket.socket, timeout: float, *, trickle: float | None = None) -> float | None:
    """Seconds until the peer closes ``s`` (EOF or reset), or None if it is still open after ``timeout``.

    With ``trickle``, one byte is sent every ``trickle`` seconds meanwhile (a slow client that never finishes)."""
    started = time.monotonic()
    deadline = started + timeout
    s.setblocking(True)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        s.settimeout(min(left, trickle) if trickle else left)
        try:
            if not s.recv(4096):
                return time.monotonic() - started
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - started
        except TimeoutError:
            if trickle:
                try:
                    s.send(b"\x01")
                except (ConnectionResetError, BrokenPipeError):
                    return time.monotonic() - started
