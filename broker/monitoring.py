"""The monitoring port: Prometheus metrics, the health, readiness and startup probes, and the admin actions.

A tiny HTTP/1.1 server on asyncio, because the probes must reflect the node's live state (which prometheus-client's
own threaded server cannot answer) and a web framework would be a large dependency for four routes.

Admin actions that change something (POST: snapshot, pause/resume exporting) are guarded; GET routes (metrics,
probes, `/admin/partitions`) stay open, because Prometheus and the kubelet call them without credentials:

- with an admin token configured (`broker.adminToken`), a POST must carry `Authorization: Bearer <token>`;
- without one, POSTs are accepted only when the port is bound to a loopback address: then only processes on the
  same host reach it, the laptop case of `weir start` and `weir cluster up`, which keep working without setup.
  Bound to anything else (0.0.0.0 in a pod) they are refused until a token is configured;
- a POST carrying an `Origin` header is always refused: browsers send one, command-line clients do not, so a web
  page cannot make a browser on an operator's machine pause exporting on a loopback-bound broker.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram, generate_latest

from broker.http_guard import is_loopback, origin_refusal

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
REST_REQUESTS = Counter(
    "weir_gateway_rest_requests_total", "REST API requests by route and HTTP status", ["route", "status"]
)
BACKPRESSURE_LIMIT = Gauge("weir_backpressure_limit", "Commands a partition leader admits in flight", ["partition"])
BACKPRESSURE_IN_FLIGHT = Gauge("weir_backpressure_in_flight", "User commands in flight", ["partition"])
BACKPRESSURE_DROPPED = Counter(
    "weir_backpressure_dropped_total", "User commands refused by admission control", ["partition"]
)


class PartitionRoundMetrics:
    """The labelled series a partition updates every round, looked up once: a ``labels()`` lookup costs more than
    the update itself, and there are six per round."""

    __slots__ = ("commands", "in_flight", "limit", "position", "records", "round_seconds")

    def __init__(self, partition_id: int) -> None:
        label = str(partition_id)
        self.records = RECORDS_PROCESSED.labels(label)
        self.commands = COMMANDS_PROCESSED.labels(label)
        self.round_seconds = ROUND_LATENCY.labels(label)
        self.position = LOG_POSITION.labels(label)
        self.limit = BACKPRESSURE_LIMIT.labels(label)
        self.in_flight = BACKPRESSURE_IN_FLIGHT.labels(label)


INSTANCES_STOPPED_BY_BUDGET = Counter(
    "weir_instances_stopped_by_step_budget_total",
    "Process instances stopped with an incident for exceeding the step budget (a loop without a wait state)",
    ["partition"],
)
PARTITION_TASK_FAILURES = Counter(
    "weir_partition_task_failures_total",
    "Unexpected failures of a partition's tasks (processor, checker, exporters); each is logged and restarted",
    ["partition", "task"],
)
SNAPSHOT_FAILURES = Counter(
    "weir_snapshot_failures_total", "Snapshots that failed or were put off for lack of disk space", ["partition"]
)
DISK_FULL = Gauge(
    "weir_partition_disk_full", "1 while free disk space is below the watermark and commands are refused", ["partition"]
)
SIGNAL_CHAINS_STOPPED = Counter(
    "weir_signal_chains_stopped_total",
    "Chains of signal broadcasts stopped for starting more process instances than broker.maxInstancesPerSignalChain",
    ["partition"],
)
RECURSIVE_CHAINS_STOPPED = Counter(
    "weir_recursive_chains_stopped_total",
    "Chains of calls stopped for starting more instances of processes on their own call stack than "
    "broker.maxRecursiveInstancesPerChain",
    ["partition"],
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

MAX_HEADER_LINES = 100
REQUEST_HEAD_SECONDS = 5.0
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    503: "Service Unavailable",
}


class _BadRequest(Exception):
    """A request head we do not answer (too long, too many lines): the connection is just closed."""


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
        admin_token: str = "",
    ) -> None:
        self.host = host
        self.port = port
        self._probes = {"/health": health, "/ready": ready, "/startup": startup}
        self._on_scrape = on_scrape
        self._actions = actions or {}
        self._admin_token = admin_token
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        try:
            self._server = await asyncio.start_server(self._handle, self.host, self.port)
        except OSError as e:
            raise OSError(
                f"could not bind the monitoring port to {self.host}:{self.port} (is the port in use?): {e}"
            ) from None
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def admin_refusal(self, method: str, headers: dict[str, str]) -> tuple[int, dict] | None:
        """Why an admin request must be refused (status, JSON body), or None to run it; see the module doc."""
        if method == "GET":
            return None
        if origin_refusal(headers) is not None:
            return 403, {"error": "admin actions are not accepted from browsers (the request has an Origin header)"}
        if self._admin_token:
            scheme, _, presented = headers.get("authorization", "").partition(" ")
            if scheme.lower() == "bearer" and hmac.compare_digest(
                presented.strip().encode(), self._admin_token.encode()
            ):
                return None
            return 401, {"error": "admin actions need 'Authorization: Bearer <broker.adminToken>'"}
        if is_loopback(self.host):
            return None
        return 403, {
            "error": f"admin actions are disabled: the monitoring port is bound to {self.host}, not loopback, and no "
            "broker.adminToken (WEIR_BROKER_ADMIN_TOKEN) is configured"
        }

    async def _read_head(self, reader: asyncio.StreamReader) -> tuple[str, dict[str, str]]:
        """Request line and headers (names lower-cased), bounded in lines, line length and time."""
        try:
            async with asyncio.timeout(REQUEST_HEAD_SECONDS):
                request_line = (await reader.readline()).decode("latin-1")
                headers: dict[str, str] = {}
                for _ in range(MAX_HEADER_LINES):
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        return request_line, headers
                    name, _, value = line.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
        except ValueError as e:  # a line longer than the reader's limit
            raise _BadRequest(str(e)) from None
        raise _BadRequest("too many header lines")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line, headers = await self._read_head(reader)
            parts = request_line.split()
            method = parts[0] if parts else "GET"
            path = parts[1].split("?", 1)[0] if len(parts) >= 2 else "/"
            extra = ""
            if (method, path) in self._actions:
                refusal = self.admin_refusal(method, headers)
                if refusal is None:
                    status, result = self._actions[(method, path)]()
                else:
                    status, result = refusal
                    peer = writer.get_extra_info("peername")
                    log.warning("refused admin %s %s from %s: %s", method, path, peer, result["error"])
                    if status == 401:
                        extra = 'WWW-Authenticate: Bearer realm="weir-admin"\r\n'
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
            head = (
                f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\nContent-Type: {ctype}\r\n{extra}"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, _BadRequest):
            pass
        except Exception:
            log.exception("monitoring request failed")
        finally:
            writer.close()
