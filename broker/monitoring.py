"""The monitoring port: Prometheus metrics and the health, readiness and startup probes.

A tiny HTTP/1.1 server on asyncio, because the probes must reflect the node's live state (which prometheus-client's
own threaded server cannot answer) and a web framework would be a large dependency for four routes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram, generate_latest

log = logging.getLogger("weir.monitoring")

RECORDS_PROCESSED = Counter(
    "weir_stream_processor_records_total", "Records written by the stream processor", ["partition"]
)
COMMANDS_PROCESSED = Counter(
    "weir_stream_processor_commands_total", "Commands processed by the stream processor", ["partition"]
)
ROUND_LATENCY = Histogram(
    "weir_stream_processor_round_seconds",
    "Time of one processing round: processing, append, fsync and commit",
    ["partition"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0),
)
PARTITION_HEALTH = Gauge("weir_partition_healthy", "1 when the partition is healthy", ["partition"])
PARTITION_ROLE = Gauge("weir_partition_role", "0 leader, 1 follower, 2 inactive", ["partition"])
BACKLOG = Gauge("weir_partition_backlog", "Commands waiting to be processed", ["partition"])
LOG_POSITION = Gauge("weir_log_last_position", "Last position appended to the partition log", ["partition"])
GRPC_REQUESTS = Counter("weir_gateway_requests_total", "Gateway requests by method and status code", ["method", "code"])
BACKPRESSURE_LIMIT = Gauge("weir_backpressure_limit", "Commands a partition leader admits in flight", ["partition"])
BACKPRESSURE_IN_FLIGHT = Gauge("weir_backpressure_in_flight", "User commands in flight", ["partition"])
BACKPRESSURE_DROPPED = Counter(
    "weir_backpressure_dropped_total", "User commands refused by admission control", ["partition"]
)
RAFT_TERM = Gauge("weir_raft_term", "Raft term of the partition's replica here", ["partition"])
LOG_BYTES = Gauge("weir_log_size_bytes", "Bytes of log segments the partition keeps", ["partition"])
SNAPSHOT_AGE = Gauge("weir_snapshot_age_seconds", "Seconds since the partition's last snapshot", ["partition"])
JOB_ACTIVATION_LATENCY = Histogram(
    "weir_job_activation_seconds",
    "Time from an ActivateJobs request to its first jobs (long polls included)",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0),
)

Probe = Callable[[], tuple[bool, dict]]
# An admin action: (status code, JSON body).
Action = Callable[[], tuple[int, dict]]


class MonitoringServer:
    """Serves /metrics, /health (liveness), /ready and /startup from probe callbacks."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        health: Probe,
        ready: Probe,
        startup: Probe,
        on_scrape: Callable[[], None] | None = None,
        actions: dict[tuple[str, str], Action] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._probes = {"/health": health, "/ready": ready, "/startup": startup}
        self._on_scrape = on_scrape
        self._actions = actions or {}
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await asyncio.wait_for(reader.readline(), 5)
            while True:
                line = await asyncio.wait_for(reader.readline(), 5)
                if line in (b"\r\n", b"\n", b""):
                    break
            parts = request_line.decode("latin-1").split()
            method = parts[0] if parts else "GET"
            path = parts[1].split("?", 1)[0] if len(parts) >= 2 else "/"
            if (method, path) in self._actions:
                status, result = self._actions[(method, path)]()
                ctype, body = "application/json", json.dumps(result).encode()
            elif path == "/metrics":
                if self._on_scrape is not None:
                    self._on_scrape()
                status, ctype, body = 200, CONTENT_TYPE_LATEST, generate_latest(REGISTRY)
            elif path in self._probes:
                ok, details = self._probes[path]()
                status, ctype = (200 if ok else 503), "application/json"
                body = json.dumps({"status": "UP" if ok else "DOWN", **details}).encode()
            else:
                status, ctype, body = 404, "text/plain", b"not found\n"
            reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 409: "Conflict", 503: "Service Unavailable"}.get(
                status, "OK"
            )
            head = (
                f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass
        except Exception:
            log.exception("monitoring request failed")
        finally:
            writer.close()
