"""The gateway's HTTP server: the REST API (``/v2/…``), its OpenAPI document and the web view's static files.

It runs on aiohttp in the gateway's own event loop, beside the gRPC server, over the same
:class:`GatewayCommands`. Authentication and TLS are the gRPC gateway's (gateway.security): every ``/v2`` route but
``/v2/openapi.json`` needs valid credentials in the ``Authorization`` header; static files are open (they hold no
data; the web view's API calls carry credentials).
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from broker import monitoring
from gateway.auth import Authenticator, GatewaySecurity, Unauthenticated
from gateway.commands import CommandError, GatewayCommands
from gateway.rest import openapi, problems
from gateway.rest.endpoints import Endpoint
from gateway.rest.routes import CommandRoutes, json_response
from gateway.rest.search import SearchRoutes
from gateway.rest.user_task_routes import UserTaskRoutes

log = logging.getLogger("weir.gateway.rest")

DEFAULT_REST_PORT = 8080
WEB_ROOT = Path(__file__).resolve().parent.parent / "web" / "dist"
OPEN_PATHS = frozenset({"/v2/openapi.json"})


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


class RestServer:
    """Owns the aiohttp application, its runner and the resources it opened (authenticator, history reader)."""

    def __init__(
        self,
        commands: GatewayCommands,
        config: RestConfig,
        *,
        security: GatewaySecurity | None = None,
        gateway_version: str,
    ) -> None:
        self.config = config
        self.security = security or GatewaySecurity()
        self.authenticator = Authenticator(self.security.auth)
        self.search = SearchRoutes(config.history_url, setting=config.history_setting)
        self.endpoints: list[Endpoint] = [
            *CommandRoutes(
                commands, gateway_version=gateway_version, max_resource_bytes=config.max_request_bytes
            ).endpoints(),
            *UserTaskRoutes(commands).endpoints(),
            *self.search.endpoints(),
        ]
        self.openapi = openapi.document(
            self.endpoints, version=gateway_version, auth_methods=list(self.security.auth.methods)
        )
        self._runner: web.AppRunner | None = None
        self.port = 0

    def application(self) -> web.Application:
        app = web.Application(
            middlewares=[self._count, self._problems, self._authenticate],
            client_max_size=self.config.max_request_bytes + 64 * 1024,
            handler_args={"max_field_size": 16 * 1024},
        )
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
        site = web.TCPSite(runner, self.config.host, self.config.port, ssl_context=self._ssl_context())
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            await self.authenticator.close()
            raise OSError(
                f"could not bind the REST API to {self.config.host}:{self.config.port} (is the port in use?): {e}"
            ) from None
        self._runner = runner
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self.config.port
        return self.port

    async def close(self) -> None:
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
                await self.authenticator.check(request.headers.get("Authorization"), request.remote or "")
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
        target = (root / request.match_info["name"]).resolve()
        if root not in target.parents or not target.is_file():
            raise web.HTTPNotFound(text=f"No such file: {request.path}")
        return web.FileResponse(target)
