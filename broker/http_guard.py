"""Which HTTP requests may come from a browser: the checks the monitoring port and the REST API share.

A browser on an operator's machine reaches every loopback port, so a web page the operator visits can send requests
to a local Weir. Two things tell such requests apart from those of command-line clients and SDKs:

- browsers send an ``Origin`` header with every cross-site request that can change something (and with scripted
  cross-site reads); a request from another origin is refused unless the origin is allowed by configuration;
- with DNS rebinding a page's own name resolves to 127.0.0.1, so its requests are same-origin to the browser, but
  their ``Host`` header still names the attacker's domain: a request whose ``Host`` does not name this server is
  refused (loopback names, the bound address, IP literals when bound to every interface, and configured names).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Collection, Mapping
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def is_loopback(host: str) -> bool:
    """Whether a bind address only accepts connections from this host (a name other than localhost: no)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None


def host_name(header: str) -> str:
    """The name of a ``Host`` header (or of an origin's authority) without its port, lower-cased."""
    header = header.strip().lower()
    if header.startswith("["):  # [::1]:8080
        return header[1 : header.find("]")] if "]" in header else header
    if header.count(":") == 1:
        return header.split(":", 1)[0]
    return header  # a bare name, or an IPv6 address without brackets


def host_refusal(host_header: str | None, bound_host: str, allowed_hosts: Collection[str] = ()) -> str | None:
    """Why a request's ``Host`` does not name this server (None when it does); ``*`` in ``allowed_hosts``: any."""
    if "*" in allowed_hosts:
        return None
    if not host_header:
        return "the request has no Host header"
    name = host_name(host_header)
    ip = _ip(name)
    if name in LOOPBACK_NAMES or (ip is not None and ip.is_loopback):
        return None
    if name in {h.lower() for h in allowed_hosts} or name == bound_host.lower():
        return None
    bound_ip = _ip(bound_host)
    # bound to every interface: an address literal cannot be rebound, and the machine's own name is known
    if bound_ip is not None and bound_ip.is_unspecified and (ip is not None or name == socket.gethostname().lower()):
        return None
    return f"the Host header '{host_header}' does not name this server"


def origin_refusal(
    headers: Mapping[str, str], allowed_origins: Collection[str] = (), *, same_origin_ok: bool = False
) -> str | None:
    """Why a request from a browser page must be refused (None to serve it).

    No ``Origin`` header: not a browser's cross-site request. With ``same_origin_ok`` an origin naming the server the
    request's (already checked) ``Host`` names is served: the server's own pages. ``*`` in ``allowed_origins``: any.
    """
    origin = headers.get("origin") or headers.get("Origin")
    if origin is None:
        return None
    if origin in allowed_origins or "*" in allowed_origins:
        return None
    if same_origin_ok and origin != "null":
        host = headers.get("host") or headers.get("Host") or ""
        parts = urlsplit(origin)
        if parts.scheme in ("http", "https") and parts.netloc.lower() == host.strip().lower():
            return None
    return f"requests from the web page at {origin} are not accepted (the request has a foreign Origin header)"
