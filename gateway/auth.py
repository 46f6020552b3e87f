"""Who may call the gateway: TLS settings and a server interceptor that checks every call's credentials.

Zeebe clients authenticate the way Camunda 8 expects:

- **OAuth 2 bearer tokens.** A client gets an access token from an authorization server with the client-credentials
  grant (``ZEEBE_CLIENT_ID``, ``ZEEBE_CLIENT_SECRET``, ``ZEEBE_AUTHORIZATION_SERVER_URL``, ``ZEEBE_TOKEN_AUDIENCE``)
  and sends it on every call as ``authorization: Bearer <jwt>``. The gateway validates it offline: signature against
  the keys of a JWKS (a file, or a URL fetched at start and refreshed), then expiry, issuer and audience.
- **HTTP basic credentials** (``authorization: Basic base64(user:password)``, as zeebe-node sends with
  ``ZEEBE_BASIC_AUTH_USERNAME``/``PASSWORD``), checked against a file of scrypt password hashes.

A call without valid credentials ends with UNAUTHENTICATED and a message saying what to fix. The standard gRPC health
service stays open (load balancers probe it; it reveals nothing).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import inspect
import json
import logging
import os
import time
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import jwt

log = logging.getLogger("weir.gateway.auth")

# Calls to these services need no credentials.
OPEN_SERVICES = ("/grpc.health.v1.Health/",)
# Tokens checked recently are remembered until they expire, so a worker's calls do not each pay an RSA verification
# (a key dropped from the JWKS therefore ends its tokens only at their expiry: keep access tokens short-lived).
TOKEN_CACHE_SIZE = 10_000
# An unknown key id triggers at most one JWKS fetch per this many seconds (a key rotation), never one per call.
JWKS_MIN_REFETCH_S = 30.0
# scrypt checks of basic credentials running at once (each takes tens of milliseconds of CPU).
BASIC_VERIFY_CONCURRENCY = 2
SUPPORTED_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


class SecurityConfigError(ValueError):
    """TLS or authentication settings that cannot work (missing file, no JWKS, unknown method…)."""


@dataclass(slots=True)
class TlsConfig:
    """Server-side TLS: a certificate chain and key; with a client CA, clients must present a certificate (mTLS)."""

    certificate_chain_path: str = ""
    private_key_path: str = ""
    client_ca_path: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.certificate_chain_path or self.private_key_path)

    def server_credentials(self) -> grpc.ServerCredentials:
        if not (self.certificate_chain_path and self.private_key_path):
            raise SecurityConfigError("TLS needs both certificateChainPath and privateKeyPath")
        chain, key = _read(self.certificate_chain_path, "certificate chain"), _read(self.private_key_path, "key")
        client_ca = _read(self.client_ca_path, "client CA") if self.client_ca_path else None
        return grpc.ssl_server_credentials(
            [(key, chain)], root_certificates=client_ca, require_client_auth=client_ca is not None
        )


@dataclass(slots=True)
class OAuthConfig:
    """Offline validation of bearer JWTs: the keys (JWKS file or URL) and the claims a token must carry."""

    jwks_path: str = ""
    jwks_url: str = ""
    issuer: str = ""
    audience: str = ""
    algorithms: list[str] = field(default_factory=lambda: ["RS256"])
    jwks_refresh_interval_s: float = 300.0
    # Clock skew tolerated on exp/nbf/iat, in seconds.
    leeway_s: float = 30.0
    # CA bundle to trust when fetching jwks_url over HTTPS (empty: the system's).
    jwks_ca_path: str = ""


@dataclass(slots=True)
class AuthConfig:
    """Which credentials the gateway accepts: any of ``oauth`` and ``basic``; none means every call is let in."""

    methods: list[str] = field(default_factory=list)
    oauth: OAuthConfig = field(default_factory=OAuthConfig)
    basic_users_file: str = ""


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise SecurityConfigError(f"cannot read the {what} {path}: {e.strerror}") from None


# -- basic auth ----------------------------------------------------------------------------------------------

_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**14, 8, 1


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$N$r$p$salt$hash`` (base64), the form the basic-auth users file holds."""
    salt = salt or os.urandom(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P, dklen=32)
    b64 = base64.b64encode
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${b64(salt).decode()}${b64(digest).decode()}"


def verify_password(password: str, stored: str) -> bool:
    """Constant-time check of ``password`` against a :func:`hash_password` string."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        actual = hashlib.scrypt(
            password.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p), dklen=len(expected)
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(actual, expected)


def load_users(path: str) -> dict[str, str]:
    """``user:scrypt$…`` lines (``#`` comments and blank lines allowed) → user → stored hash."""
    users: dict[str, str] = {}
    for number, line in enumerate(_read(path, "basic-auth users file").decode().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, stored = line.partition(":")
        if not sep or not stored.startswith("scrypt$"):
            raise SecurityConfigError(
                f"{path}:{number}: expected 'user:scrypt$…' (make the hash with `weir hash-password`)"
            )
        users[name] = stored
    return users


# -- JWKS ----------------------------------------------------------------------------------------------------


class JwksKeys:
    """The keys tokens may be signed with, by key id; loaded at start and refreshed in the background."""

    def __init__(self, config: OAuthConfig) -> None:
        if not (config.jwks_path or config.jwks_url):
            raise SecurityConfigError("OAuth needs a JWKS: set jwksPath (a file) or jwksUrl")
        self._config = config
        self._keys: dict[str | None, Any] = {}
        self._fetched_at = 0.0
        self._task: asyncio.Task[None] | None = None
        self._refetch: asyncio.Task[None] | None = None

    def load(self) -> None:
        """Read the JWKS now (blocking); raises SecurityConfigError when it cannot be read or holds no usable key."""
        source = self._config.jwks_path or self._config.jwks_url
        try:
            if self._config.jwks_path:
                document = json.loads(_read(self._config.jwks_path, "JWKS file"))
            else:
                document = self._fetch_url()
            key_set = jwt.PyJWKSet.from_dict(document)
        except (ValueError, OSError, jwt.PyJWKSetError, jwt.InvalidKeyError) as e:
            raise SecurityConfigError(f"cannot load the JWKS from {source}: {e}") from None
        self._keys = {k.key_id: k for k in key_set.keys}
        self._fetched_at = time.monotonic()

    def _fetch_url(self) -> Any:
        import ssl

        context = ssl.create_default_context(cafile=self._config.jwks_ca_path or None)
        request = urllib.request.Request(self._config.jwks_url, headers={"accept": "application/json"})
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return json.loads(response.read())

    def start(self) -> None:
        """Refresh a JWKS URL (or file) every ``jwks_refresh_interval_s``; failures keep the keys we have."""
        if self._config.jwks_refresh_interval_s > 0:
            self._task = asyncio.create_task(self._refresh_loop())

    async def close(self) -> None:
        for task in (self._task, self._refetch):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self._config.jwks_refresh_interval_s)
            await self._reload()

    async def _reload(self) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.load)
        except SecurityConfigError as e:
            log.warning("keeping the previous JWKS: %s", e)

    def key(self, key_id: str | None) -> Any | None:
        """The key for ``key_id``; an unknown id schedules one early refresh (the issuer may have rotated keys)."""
        if key_id in self._keys:
            return self._keys[key_id]
        if key_id is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        idle = self._refetch is None or self._refetch.done()
        if idle and time.monotonic() - self._fetched_at >= JWKS_MIN_REFETCH_S:
            self._fetched_at = time.monotonic()
            self._refetch = asyncio.get_running_loop().create_task(self._reload())
        return None


# -- the interceptor -----------------------------------------------------------------------------------------


class Unauthenticated(Exception):
    """Credentials missing or invalid; the message tells the caller what to fix."""


class Authenticator:
    """Checks one call's ``authorization`` metadata against the configured methods."""

    def __init__(self, config: AuthConfig) -> None:
        unknown = set(config.methods) - {"oauth", "basic"}
        if unknown:
            raise SecurityConfigError(f"unknown authentication method(s) {sorted(unknown)}: use oauth and/or basic")
        self.config = config
        self.jwks = JwksKeys(config.oauth) if "oauth" in config.methods else None
        if "basic" in config.methods and not config.basic_users_file:
            raise SecurityConfigError("basic authentication needs a users file (basic.usersFile)")
        self.users = load_users(config.basic_users_file) if "basic" in config.methods else {}
        bad = set(config.oauth.algorithms) - set(SUPPORTED_ALGORITHMS)
        if self.jwks is not None and bad:
            raise SecurityConfigError(
                f"unsupported JWT algorithm(s) {sorted(bad)}; use {', '.join(SUPPORTED_ALGORITHMS)}"
            )
        self._tokens: dict[str, float] = {}  # accepted bearer token → its expiry (epoch seconds)
        self._basic: dict[bytes, str] = {}  # sha256 of accepted "user:password" → user
        self._verifying = asyncio.Semaphore(BASIC_VERIFY_CONCURRENCY)

    @property
    def enabled(self) -> bool:
        return bool(self.config.methods)

    async def start(self) -> None:
        if self.jwks is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.jwks.load)
            self.jwks.start()

    async def close(self) -> None:
        if self.jwks is not None:
            await self.jwks.close()

    def _hint(self) -> str:
        hints = []
        if "oauth" in self.config.methods:
            hints.append(
                "an OAuth access token ('authorization: Bearer <token>'; Zeebe clients fetch one when ZEEBE_CLIENT_ID, "
                "ZEEBE_CLIENT_SECRET, ZEEBE_AUTHORIZATION_SERVER_URL and ZEEBE_TOKEN_AUDIENCE are set)"
            )
        if "basic" in self.config.methods:
            hints.append(
                "a user name and password ('authorization: Basic …'; zeebe-node: ZEEBE_BASIC_AUTH_USERNAME/PASSWORD)"
            )
        return " or ".join(hints)

    async def check(self, authorization: str | None) -> str:
        """The caller's identity; raises Unauthenticated with a message a person can act on."""
        if not authorization:
            raise Unauthenticated(f"this gateway requires credentials: send {self._hint()}")
        scheme, _, credentials = authorization.strip().partition(" ")
        scheme = scheme.lower()
        if scheme == "bearer" and "oauth" in self.config.methods:
            return self._check_bearer(credentials.strip())
        if scheme == "basic" and "basic" in self.config.methods:
            return await self._check_basic(credentials.strip())
        raise Unauthenticated(f"'{scheme.capitalize()}' credentials are not accepted here: send {self._hint()}")

    def _check_bearer(self, token: str) -> str:
        now = time.time()
        expires = self._tokens.get(token)
        if expires is not None and now < expires:
            return "token"
        assert self.jwks is not None
        oauth = self.config.oauth
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise Unauthenticated(
                "the bearer token is not a JWT; send the access_token the authorization server issued"
            ) from None
        key = self.jwks.key(header.get("kid"))
        if key is None:
            raise Unauthenticated(
                f"the access token is signed with key id {header.get('kid')!r}, which is not in the gateway's JWKS; "
                "check that the client and gateway use the same authorization server"
            )
        try:
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=oauth.algorithms,
                audience=oauth.audience or None,
                issuer=oauth.issuer or None,
                leeway=oauth.leeway_s,
                options={"require": ["exp"], "verify_aud": bool(oauth.audience)},
            )
        except jwt.InvalidTokenError as e:
            raise Unauthenticated(self._explain(token, header, e)) from None
        if len(self._tokens) >= TOKEN_CACHE_SIZE:
            self._tokens.clear()
        self._tokens[token] = float(claims["exp"])
        return str(claims.get("sub", "token"))

    def _explain(self, token: str, header: dict[str, Any], error: jwt.InvalidTokenError) -> str:
        """What is wrong with a token, in terms of the client setting that fixes it."""
        oauth = self.config.oauth
        if isinstance(error, jwt.ExpiredSignatureError):
            expired = _unverified_claim(token, "exp")
            when = datetime.fromtimestamp(expired, UTC).isoformat() if isinstance(expired, int | float) else "?"
            return f"the access token expired at {when}; get a new one from the authorization server"
        if isinstance(error, jwt.InvalidAudienceError):
            return (
                f"the access token is for audience {_unverified_claim(token, 'aud')!r}, but this gateway accepts "
                f"tokens for {oauth.audience!r} (set ZEEBE_TOKEN_AUDIENCE={oauth.audience})"
            )
        if isinstance(error, jwt.InvalidIssuerError):
            return (
                f"the access token was issued by {_unverified_claim(token, 'iss')!r}, but this gateway trusts "
                f"{oauth.issuer!r}"
            )
        if isinstance(error, jwt.InvalidSignatureError):
            return "the access token's signature does not verify with the gateway's JWKS"
        if isinstance(error, jwt.InvalidAlgorithmError):
            return f"the access token is signed with {header.get('alg')!r}; this gateway accepts {oauth.algorithms}"
        return f"the access token is not valid: {error}"

    async def _check_basic(self, credentials: str) -> str:
        """Accepted credentials are remembered (by digest); new ones pay one scrypt, off the event loop.

        At most ``BASIC_VERIFY_CONCURRENCY`` scrypt checks run at once, so guessing passwords cannot occupy the
        gateway's threads or stall its calls.
        """
        digest = hashlib.sha256(credentials.encode()).digest()
        known = self._basic.get(digest)
        if known is not None:
            return known
        try:
            user, sep, password = base64.b64decode(credentials, validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            sep, user, password = "", "", ""
        if not sep:
            raise Unauthenticated("basic credentials must be base64('user:password')")
        stored = self.users.get(user)
        async with self._verifying:
            loop = asyncio.get_running_loop()
            ok = stored is not None and await loop.run_in_executor(None, verify_password, password, stored)
        if not ok:
            raise Unauthenticated(f"wrong user name or password for {user!r}")
        if len(self._basic) >= TOKEN_CACHE_SIZE:
            self._basic.clear()
        self._basic[digest] = user
        return user


def _unverified_claim(token: str, name: str) -> Any:
    try:
        return jwt.decode(token, options={"verify_signature": False}).get(name)
    except jwt.InvalidTokenError:
        return None


def _metadata_value(metadata: Sequence[tuple[str, Any]] | None, name: str) -> str | None:
    for key, value in metadata or ():
        if key == name:
            return value.decode() if isinstance(value, bytes) else str(value)
    return None


def _refusal(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same shape as ``handler`` that ends the call with UNAUTHENTICATED."""

    async def abort(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def abort_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        yield  # pragma: no cover - makes this an async generator

    kw = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(abort_stream, **kw)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(abort, **kw)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(abort_stream, **kw)
    return grpc.unary_unary_rpc_method_handler(abort, **kw)


class MetadataCheckInterceptor(grpc.aio.ServerInterceptor):
    """Runs ``check(metadata value)`` before every call outside ``open_prefixes``; a refusal ends the call.

    ``check`` (a function or a coroutine function) raises :class:`Unauthenticated` with the text the caller gets.
    """

    def __init__(self, header: str, check: Callable[[str | None], Any], open_prefixes: Sequence[str] = ()) -> None:
        self._header = header
        self._check = check
        self._open = tuple(open_prefixes)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(self._open):
            return handler
        try:
            checked = self._check(_metadata_value(handler_call_details.invocation_metadata, self._header))
            if inspect.isawaitable(checked):
                await checked
        except Unauthenticated as e:
            log.debug("refused %s: %s", handler_call_details.method, e)
            return _refusal(handler, str(e))
        return handler


def gateway_interceptors(authenticator: Authenticator | None) -> list[grpc.aio.ServerInterceptor]:
    if authenticator is None or not authenticator.enabled:
        return []
    return [MetadataCheckInterceptor("authorization", authenticator.check, OPEN_SERVICES)]


@dataclass(slots=True)
class GatewaySecurity:
    """Everything the client API needs to know about transport security and authentication."""

    tls: TlsConfig = field(default_factory=TlsConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)

    @classmethod
    def from_config(cls, security: dict[str, Any]) -> GatewaySecurity:
        """From the ``gateway.security`` section of the configuration (see broker/config.py)."""
        tls, authn = security["tls"], security["authentication"]
        oauth = authn["oauth"]
        return cls(
            tls=TlsConfig(
                certificate_chain_path=tls["certificateChainPath"] if tls["enabled"] else "",
                private_key_path=tls["privateKeyPath"] if tls["enabled"] else "",
                client_ca_path=tls["clientCaPath"] if tls["enabled"] else "",
            ),
            auth=AuthConfig(
                methods=list(authn["methods"]),
                oauth=OAuthConfig(
                    jwks_path=oauth["jwksPath"],
                    jwks_url=oauth["jwksUrl"],
                    issuer=oauth["issuer"],
                    audience=oauth["audience"],
                    algorithms=list(oauth["algorithms"]),
                    jwks_refresh_interval_s=float(oauth["jwksRefreshInterval"]),
                    leeway_s=float(oauth["leeway"]),
                    jwks_ca_path=oauth["jwksCaPath"],
                ),
                basic_users_file=authn["basic"]["usersFile"],
            ),
        )
