"""The gateway's HTTP server: the REST API (``/v2/…``), its OpenAPI document and the web view's static files.

It runs on aiohttp in the gateway's own event loop, beside the gRPC server, over the same
:class:`GatewayCommands`. Authentication and TLS are the gRPC gateway's (gateway.security): every ``/v2`` route but
``/v2/openapi.json`` needs valid credentials in the ``Authorization`` header; static files are open (they hold no
data; the web view's API calls carry credentials).

Browsers are kept from driving it (broker.http_guard): a request whose ``Host`` does not name this server is refused
(421), and one from a page of another origin (403) unless that origin is in ``gateway.rest.allowedOrigins``, which
also get CORS answers. Connections are capped and timed (gateway.rest.connections).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from broker import monitoring
from broker.http_guard import host_refusal, origin_refusal
from gateway.auth import Authenticator, GatewaySecurity, Unauthenticated
from gateway.commands import CommandError, GatewayCommands
from gateway.directory import Directory, directory_for
from gateway.rest import openapi, problems
from gateway.rest.authentication_routes import AuthenticationRoutes
from gateway.rest.batch_routes import BatchRoutes
from gateway.rest.connections import ConnectionLimiter
from gateway.rest.endpoints import Endpoint
from gateway.rest.identity_routes import IdentityRoutes
from gateway.rest.operate_routes import OperateRoutes
from gateway.rest.policy import RestPolicy
from gateway.rest.routes import BODY_TIMEOUT, CommandRoutes, json_response
from gateway.rest.search import SearchRoutes
from gateway.rest.user_task_routes import UserTaskRoutes

log = logging.getLogger("weir.gateway.rest")

DEFAULT_REST_PORT = 8080
WEB_ROOT = Path(__file__).resolve().parent.parent / "web" / "dist"
OPEN_PATHS = frozenset({"/v2/openapi.json"})
#: The web view's policy: its own scripts, styles and API only; never inside a frame. (bpmn-js styles its elements
#: through the DOM, which style-src does not restrict, so no 'unsafe-inline'; tests/web checks the page for violations.)
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
CORS_ALLOW_HEADERS = "Authorization, Content-Type, X-Requested-With"
CORS_MAX_AGE = "600"
_CORS_ORIGIN = web.RequestKey("cors_origin", str)


@dataclass(slots=True)
class RestConfig:
    host: str = "127.0.0.1"
    port: int = DEFAULT_REST_PORT
    #: The history store searches read (sqlite:///… or postgresql://…); None: searching answers 503.
    history_url: str | None = None
    #: The configuration key that sets ``history_url``, named in the 503 when it is missing.
    history_setting: str = "gateway.history.url"
    max_request_bytes: int = 4 * 1024 * 1024
    web_root: Path = WEB_ROOT
    policy: RestPolicy = field(default_factory=RestPolicy)


class RestServer:
    """Owns the aiohttp application, its runner and the resources it opened (authenticator, history reader)."""

    def __init__(
        self,
        commands: GatewayCommands,
        config: RestConfig,
        *,
        security: GatewaySecurity | None = None,
        gateway_version: str,
        directory: Directory | None = None,
    ) -> None:
        """``directory``: what the gateway knows of callers (sign-ins with the cluster's users, /authentication/me);
        one over ``commands``' broker client when not given."""
        self.config = config
        self.security = security or GatewaySecurity()
        if directory is None:
            directory = directory_for(commands.client, self.security.auth.identity_cache_ttl_s)
        self.directory = directory
        self.authenticator = Authenticator(self.security.auth, directory)
        self.policy = config.policy
        self.search = SearchRoutes(
            config.history_url,
            setting=config.history_setting,
            policy=self.policy,
            directory=directory,
            authentication=self.authenticator.enabled,
        )
        self.endpoints: list[Endpoint] = [
            *CommandRoutes(
                commands,
                gateway_version=gateway_version,
                max_resource_bytes=config.max_request_bytes,
                clock_controlled=self.policy.clock_controlled,
            ).endpoints(),
            *UserTaskRoutes(commands).endpoints(),
            *self.search.endpoints(),
            *OperateRoutes(commands, self.search).endpoints(),
            *BatchRoutes(commands, self.search).endpoints(),
            *IdentityRoutes(commands).endpoints(),
            *AuthenticationRoutes(directory).endpoints(),
        ]
        self.openapi = openapi.document(
            self.endpoints, version=gateway_version, auth_methods=list(self.security.auth.methods)
        )
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self.connections: ConnectionLimiter | None = None
        self.port = 0

    def application(self) -> web.Application:
        app = web.Application(
            middlewares=[self._track, self._count, self._problems, self._browsers, self._authenticate],
            client_max_size=self.config.max_request_bytes + 64 * 1024,
            handler_args={
                "max_field_size": 16 * 1024,
                "keepalive_timeout": self.policy.idle_timeout,
                "logger": _ServerLog(logging.getLogger("aiohttp.server")),
            },
        )
        app[BODY_TIMEOUT] = self.policy.body_timeout
        app.on_response_prepare.append(self._security_headers)
        for endpoint in self.endpoints:
            app.router.add_route(endpoint.method, endpoint.path, endpoint.handler)
        app.router.add_get("/v2/openapi.json", self._openapi)
        root = self.config.web_root
        if (root / "index.html").is_file():
            app.router.add_get("/", self._index)
            # every path but /v2/…: an unknown API path stays a problem detail, not a missing file
            app.router.add_get(r"/{name:(?!v2/).+}", self._web_file)
        return app

    async def start(self) -> int:
        """Bind and serve; returns the port (useful when the configured one is 0)."""
        await self.authenticator.start()
        runner = web.AppRunner(self.application(), access_log=None, handle_signals=False)
        await runner.setup()
        assert runner.server is not None
        self.connections = ConnectionLimiter(
            runner.server, max_connections=self.policy.max_connections, header_timeout=self.policy.header_timeout
        )
        ssl_context = self._ssl_context()
        try:
            self._server = await asyncio.get_running_loop().create_server(
                self.connections,
                self.config.host,
                self.config.port,
                ssl=ssl_context,
                # a TLS handshake comes before the connection counts against the cap: bound it like a request head
                ssl_handshake_timeout=self.policy.header_timeout if ssl_context is not None else None,
                reuse_address=True,
            )
        except OSError as e:
            await runner.cleanup()
            await self.authenticator.close()
            raise OSError(
                f"could not bind the REST API to {self.config.host}:{self.config.port} (is the port in use?): {e}"
            ) from None
        self._runner = runner
        self.port = self._server.sockets[0].getsockname()[1]
        _warn_about_descriptors(self.policy.max_connections)
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.search.close()
        await self.authenticator.close()

    def _ssl_context(self) -> ssl.SSLContext | None:
        tls = self.security.tls
        if not tls.enabled:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls.certificate_chain_path, tls.private_key_path)
        if tls.client_ca_path:
            context.load_verify_locations(tls.client_ca_path)
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    # -- middlewares -----------------------------------------------------------------------------------------

    @web.middleware
    async def _track(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Tells the connection cap which connections are inside a request (the others may be closed for room)."""
        connections = self.connections
        if connections is None:
            return await handler(request)
        connections.request_started(request.protocol)
        try:
            return await handler(request)
        finally:
            connections.request_finished(request.protocol)

    @web.middleware
    async def _browsers(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Refuses requests that do not name this server or come from a foreign page; answers CORS preflights."""
        refusal = host_refusal(request.headers.get("Host"), self.config.host, self.policy.allowed_hosts)
        if refusal is not None:
            detail = f"Refused: {refusal}; add the name clients use to gateway.rest.allowedHosts"
            return problems.problem(421, "MISDIRECTED_REQUEST", detail, request.path)
        origin = request.headers.get("Origin")
        refusal = origin_refusal(request.headers, self.policy.allowed_origins, same_origin_ok=True)
        if refusal is not None:
            detail = f"Refused: {refusal}; allow the page's origin in gateway.rest.allowedOrigins"
            return problems.problem(403, "FORBIDDEN", detail, request.path)
        if origin is not None:
            request[_CORS_ORIGIN] = origin
            if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
                return web.Response(
                    status=204,
                    headers={
                        "Access-Control-Allow-Methods": "GET, POST, PUT, PATCH, DELETE",
                        "Access-Control-Allow-Headers": CORS_ALLOW_HEADERS,
                        "Access-Control-Max-Age": CORS_MAX_AGE,
                    },
                )
        return await handler(request)

    async def _security_headers(self, request: web.Request, response: web.StreamResponse) -> None:
        """Every answer: no sniffing, no referrer, no framing; the web view's pages: a content security policy;
        an allowed cross-origin caller: CORS headers."""
        response.headers.update(SECURITY_HEADERS)
        if not request.path.startswith("/v2/"):
            response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        origin = request.get(_CORS_ORIGIN)
        if origin is not None:
            response.headers["Access-Control-Allow-Origin"] = origin
            if origin in self.policy.allowed_origins:  # named, not merely let in by "*": may send credentials
                response.headers["Access-Control-Allow-Credentials"] = "true"
            response.headers.add("Vary", "Origin")

    @web.middleware
    async def _count(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Requests by route template (not path: keys would make a label per request) and status, for /metrics."""
        response = await handler(request)
        if request.path.startswith("/v2"):
            resource = request.match_info.route.resource
            route = f"{request.method} {resource.canonical}" if resource is not None else "unmatched"
            monitoring.REST_REQUESTS.labels(route, str(response.status)).inc()
        return response

    @web.middleware
    async def _problems(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Every error under /v2 is a problem detail: our own, aiohttp's (404 route, 405, 413) and crashes."""
        try:
            return await handler(request)
        except CommandError as e:
            return problems.from_error(e, request.path)
        except web.HTTPException as e:
            if not request.path.startswith("/v2") or e.status < 400:
                raise
            detail = e.text or e.reason
            if e.status == 404:
                detail = f"No such endpoint: {request.method} {request.path} (see /v2/openapi.json)"
            elif e.status == 405:
                detail = f"{request.method} is not allowed on {request.path}; allowed: {e.headers.get('Allow', '')}"
            elif e.status == 413:
                detail = f"The request body is larger than the {self.config.max_request_bytes} bytes allowed"
            return problems.problem(e.status, e.reason.upper().replace(" ", "_"), detail, request.path)
        except Exception:
            log.exception("%s %s failed", request.method, request.path)
            return problems.problem(
                500, "INTERNAL", "An internal error; the gateway's log has the details", request.path
            )

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.authenticator.enabled and request.path.startswith("/v2") and request.path not in OPEN_PATHS:
            try:
                await self.authenticator.remember(request.headers.get("Authorization"), request.remote or "")
            except Unauthenticated as e:
                challenge = ", ".join(
                    scheme
                    for method, scheme in (("oauth", "Bearer"), ("basic", 'Basic realm="weir"'))
                    if method in self.security.auth.methods
                )
                # The web view's own calls (marked as scripts do) get no challenge: a browser would answer a Basic one
                # with its login dialog instead of letting the page show its sign-in form.
                scripted = request.headers.get("X-Requested-With", "").lower() == "xmlhttprequest"
                headers = {} if scripted else {"WWW-Authenticate": challenge}
                return problems.problem(401, "UNAUTHORIZED", str(e), request.path, headers)
        return await handler(request)

    # -- documents -------------------------------------------------------------------------------------------

    async def _openapi(self, request: web.Request) -> web.Response:
        return json_response(self.openapi)

    async def _index(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(self.config.web_root / "index.html")

    async def _web_file(self, request: web.Request) -> web.FileResponse:
        """A file of the web view; nothing outside its folder (no '..', no symlinks out)."""
        root = self.config.web_root.resolve()
        try:
            target = (root / request.match_info["name"]).resolve()
            found = root in target.parents and target.is_file()
        except (ValueError, OSError):  # a NUL in the name, a name too long for the file system
            found = False
        if not found:
            raise web.HTTPNotFound(text=f"No such file: {request.raw_path}")
        return web.FileResponse(target)


class _ServerLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server log, where a request it cannot parse (a bad Content-Length, header or chunk) is the client's
    error, answered with 400: one debug line, not an error with a traceback anyone may add to the log at will."""

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError) and exc_info.code < 500:
            self.debug("refused a malformed HTTP request: %s", str(exc_info).splitlines()[0])
            return
        super().exception(msg, *args, exc_info=exc_info, **kwargs)


def _warn_about_descriptors(max_connections: int) -> None:
    """Connections past the process's file descriptor limit would also starve the gRPC and monitoring ports."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and max_connections > soft // 2:
        log.warning(
            "gateway.rest.maxConnections (%d) is more than half of this process's open file limit (%d): "
            "raise the limit (ulimit -n) or lower the setting",
            max_connections,
            soft,
        )
