"""What the REST port accepts and bounds, read from the configuration (``gateway.rest.*`` and ``clock.controlled``).

Kept apart from the server so that the command line can build it without importing aiohttp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class RestPolicy:
    #: Browser origins (scheme://host[:port]) whose pages may call the API (CORS); "*": any. The web view served on
    #: the same port is always allowed.
    allowed_origins: tuple[str, ...] = ()
    #: Host names clients reach the API by, besides loopback names and the bound address; "*": any.
    allowed_hosts: tuple[str, ...] = ()
    #: Open connections at most; a new one over it takes the place of the longest idle one, or is closed.
    max_connections: int = 512
    #: Seconds from a request's first byte until its head (request line and headers) is complete.
    header_timeout: float = 10.0
    #: Seconds to receive a request's body.
    body_timeout: float = 30.0
    #: Seconds a connection may stay open without a request (at the start and between keep-alive requests).
    idle_timeout: float = 60.0
    #: Bytes of variable values one search response with truncateValues=false carries at most (the page is cut).
    max_response_bytes: int = 32 * MIB
    #: Searches with truncateValues=false served at once; more wait for a turn (then 503).
    max_large_responses: int = 2
    #: PUT /v2/clock and POST /v2/clock/reset are served (Camunda's zeebe.clock.controlled).
    clock_controlled: bool = False

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> RestPolicy:
        """From a loaded configuration (broker.config.load)."""
        rest = config["gateway"]["rest"]
        return cls(
            allowed_origins=tuple(o.rstrip("/") for o in rest["allowedOrigins"]),
            allowed_hosts=tuple(h.lower() for h in rest["allowedHosts"]),
            max_connections=rest["maxConnections"],
            header_timeout=float(rest["headerTimeout"]),
            body_timeout=float(rest["bodyTimeout"]),
            idle_timeout=float(rest["idleTimeout"]),
            max_response_bytes=rest["maxResponseBytes"],
            max_large_responses=rest["maxConcurrentLargeResponses"],
            clock_controlled=bool(config["clock"]["controlled"]),
        )
