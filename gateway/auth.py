"""Who may call the gateway: TLS settings and a server interceptor that checks every call's credentials.

Zeebe clients authenticate the way Camunda 8 expects:

- **OAuth 2 bearer tokens.** A client gets an access token from an authorization server with the client-credentials
  grant (``ZEEBE_CLIENT_ID``, ``ZEEBE_CLIENT_SECRET``, ``ZEEBE_AUTHORIZATION_SERVER_URL``, ``ZEEBE_TOKEN_AUDIENCE``)
  and sends it on every call as ``authorization: Bearer <jwt>``. The gateway validates it offline: signature against
  the keys of a JWKS (a file, or a URL fetched at start and refreshed), then expiry, issuer and audience.
- **HTTP basic credentials** (``authorization: Basic base64(user:password)``, as zeebe-node sends with
  ``ZEEBE_BASIC_AUTH_USERNAME``/``PASSWORD``), checked against scrypt password hashes: those of a users file first
  (when one is configured), else those of the cluster's own users (``gateway/directory.py``).

A call without valid credentials ends with UNAUTHENTICATED and a message saying what to fix. The standard gRPC health
service stays open (load balancers probe it; it reveals nothing).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import logging
import os
import time
import urllib.request
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from broker.error_messages import shown
from broker.grpc_guard import MetadataCheckInterceptor, SecurityConfigError, Unauthenticated
from gateway.caller import CALLER
from gateway.directory import Directory

if TYPE_CHECKING:
    import jwt  # imported where tokens are checked: a gateway without OAuth never loads it (and cryptography's X.509)

log = logging.getLogger("weir.gateway.auth")
# Calls to these services need no credentials.
OPEN_SERVICES = ("/grpc.health.v1.Health/",)
# Tokens checked recently are remembered until they expire, so a worker's calls do not each pay an RSA verification
# (a key dropped from the JWKS therefore ends its tokens only at their expiry: keep access tokens short-lived).
TOKEN_CACHE_SIZE = 10_000
# An unknown key id triggers at most one JWKS fetch per this many seconds (a key rotation), never one per call.
JWKS_MIN_REFETCH_S = 30.0
# scrypt checks of basic credentials running at once (each takes tens of milliseconds of CPU), and waiting for a turn;
# beyond that, a check fails at once rather than queue without bound.
BASIC_VERIFY_CONCURRENCY = 2
BASIC_VERIFY_WAITING = 64
# Accepted basic credentials remembered at most (least recently used go first), and client addresses whose failures
# are counted at most (the longest quiet go first).
BASIC_CACHE_SIZE = 10_000
FAILURE_TABLE_SIZE = 10_000
MALFORMED_HEADER = (
    "the access token's header is malformed ('kid' and 'alg' must be strings); send the access_token the "
    "authorization server issued"
)
SUPPORTED_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


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
    """Which credentials the gateway accepts: any of ``oauth`` and ``basic``; none means every call is let in.

    Basic credentials that passed their scrypt check are remembered for ``basic_cache_ttl_s`` seconds (those of the
    cluster's users at most ``identity_cache_ttl_s``, the directory's bound); a client address may fail
    ``basic_failures_per_minute`` checks a minute (as a burst, refilled evenly), then its new credentials are refused
    without a check until it has waited (0: no limit).
    """

    methods: list[str] = field(default_factory=list)
    oauth: OAuthConfig = field(default_factory=OAuthConfig)
    basic_users_file: str = ""
    basic_cache_ttl_s: float = 60.0
    basic_failures_per_minute: int = 30
    identity_cache_ttl_s: float = 10.0


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


class FailureLimiter:
    """Failed credential checks per client address: a token bucket of ``per_minute`` failures each, refilled evenly.

    A check takes a token before it runs (so a burst of concurrent guesses cannot all slip in) and gets it back when
    it succeeds. At most ``size`` addresses are tracked; the one quiet longest is forgotten first (it would have
    refilled soonest). ``per_minute`` 0 disables the limit; an unknown (empty) address is not limited.
    """

    def __init__(self, per_minute: int, size: int = FAILURE_TABLE_SIZE) -> None:
        self._capacity = float(per_minute)
        self._rate = per_minute / 60.0
        self._size = size
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # address → (tokens, at)

    def take(self, address: str) -> float:
        """Take a token for ``address``: 0.0 when taken, else the seconds until one is back."""
        if self._capacity <= 0 or not address:
            return 0.0
        now = time.monotonic()
        tokens, at = self._buckets.pop(address, (self._capacity, now))
        tokens = min(self._capacity, tokens + (now - at) * self._rate)
        if tokens < 1.0:
            self._buckets[address] = (tokens, now)
            return (1.0 - tokens) / self._rate
        self._buckets[address] = (tokens - 1.0, now)
        while len(self._buckets) > self._size:
            self._buckets.popitem(last=False)
        return 0.0

    def give_back(self, address: str) -> None:
        entry = self._buckets.get(address)
        if entry is not None:
            self._buckets[address] = (min(self._capacity, entry[0] + 1.0), entry[1])


class BasicCredentials:
    """Checks ``user:password`` pairs against the users file, else the cluster's users (through ``directory``),
    cheaply for repeats and evenly for failures.

    - Accepted pairs are remembered for ``ttl_s`` (a bounded LRU keyed by an HMAC of the pair under a key made at
      start, so the table holds nothing a password could be recovered from), so a worker's calls pay scrypt once.
    - An unknown user name costs the same scrypt as a wrong password (against a dummy hash): the time of a refusal
      does not tell which user names exist.
    - Failures are limited per client address (:class:`FailureLimiter`): over the limit a new pair is refused
      without scrypt, so guessing cannot take the gateway's CPU from authenticated calls.
    - scrypt runs in worker threads, at most ``BASIC_VERIFY_CONCURRENCY`` at once with ``BASIC_VERIFY_WAITING``
      waiting; the event loop never runs it.
    """

    def __init__(
        self,
        users: dict[str, str],
        *,
        ttl_s: float,
        failures_per_minute: int,
        directory: Directory | None = None,
    ) -> None:
        self.users = users
        self._directory = directory
        self._ttl_s = ttl_s
        self._key = os.urandom(32)
        self._dummy = hash_password(os.urandom(16).hex())
        self._accepted: OrderedDict[bytes, tuple[str, float]] = OrderedDict()  # HMAC of the pair → (user, until)
        self._failures = FailureLimiter(failures_per_minute)
        self._verifying = asyncio.Semaphore(BASIC_VERIFY_CONCURRENCY)
        self._waiting = 0

    def digest(self, credentials: str) -> bytes:
        """What accepted credentials are remembered by: an HMAC under a key of this process."""
        return hmac.new(self._key, credentials.encode(), hashlib.sha256).digest()

    def remembered(self, digest: bytes) -> str | None:
        """The user of remembered credentials, while their time lasts."""
        entry = self._accepted.get(digest)
        if entry is None:
            return None
        if time.monotonic() >= entry[1]:
            del self._accepted[digest]
            return None
        self._accepted.move_to_end(digest)
        return entry[0]

    async def check(self, credentials: str, address: str) -> str:
        """The user of base64 ``credentials``; raises Unauthenticated."""
        digest = self.digest(credentials)
        user = self.remembered(digest)
        if user is not None:
            return user
        try:
            user, sep, password = base64.b64decode(credentials, validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            sep, user, password = "", "", ""
        if not sep:
            raise Unauthenticated("basic credentials must be base64('user:password')")
        wait = self._failures.take(address)
        if wait:
            raise Unauthenticated(
                f"too many failed sign-ins from {shown(address)}: try again in {max(1, round(wait))} s"
            )
        if self._waiting >= BASIC_VERIFY_WAITING:
            self._failures.give_back(address)
            raise Unauthenticated("the gateway is busy checking other credentials: try again shortly")
        stored, ttl_s = self.users.get(user), self._ttl_s
        if stored is None and self._directory is not None:
            try:
                found = await self._directory.lookup({"username": user}, password=True)
            except Exception as e:  # no broker answers: not the caller's fault, so not counted as a failure
                self._failures.give_back(address)
                log.warning("cannot look up user %r: %s", shown(user), e)
                raise Unauthenticated(
                    "the gateway cannot reach the cluster's users to check these credentials: try again shortly"
                ) from None
            stored, ttl_s = found.password_hash or None, min(ttl_s, self._directory.ttl_s)
        self._waiting += 1
        try:
            async with self._verifying:
                loop = asyncio.get_running_loop()
                ok = await loop.run_in_executor(None, verify_password, password, stored or self._dummy)
        finally:
            self._waiting -= 1
        if not ok or stored is None:
            raise Unauthenticated(f"wrong user name or password for {shown(user)!r}")
        self._failures.give_back(address)
        self._accepted[digest] = (user, time.monotonic() + ttl_s)
        while len(self._accepted) > BASIC_CACHE_SIZE:
            self._accepted.popitem(last=False)
        return user


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
        import jwt

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


# -- the authenticator ---------------------------------------------------------------------------------------


class Authenticator:
    """Checks one call's ``authorization`` metadata against the configured methods."""

    def __init__(self, config: AuthConfig, directory: Directory | None = None) -> None:
        """``directory``: the cluster's users, for basic credentials no users file holds (None: the file only)."""
        unknown = set(config.methods) - {"oauth", "basic"}
        if unknown:
            raise SecurityConfigError(f"unknown authentication method(s) {sorted(unknown)}: use oauth and/or basic")
        self.config = config
        self.jwks = JwksKeys(config.oauth) if "oauth" in config.methods else None
        if "basic" in config.methods and not config.basic_users_file and directory is None:
            raise SecurityConfigError("basic authentication needs a users file (basic.usersFile) or a directory")
        self.directory = directory
        self.basic = (
            BasicCredentials(
                load_users(config.basic_users_file) if config.basic_users_file else {},
                ttl_s=config.basic_cache_ttl_s,
                failures_per_minute=config.basic_failures_per_minute,
                directory=directory,
            )
            if "basic" in config.methods
            else None
        )
        bad = set(config.oauth.algorithms) - set(SUPPORTED_ALGORITHMS)
        if self.jwks is not None and bad:
            raise SecurityConfigError(
                f"unsupported JWT algorithm(s) {sorted(bad)}; use {', '.join(SUPPORTED_ALGORITHMS)}"
            )
        # accepted bearer token → its expiry (epoch seconds) and claims
        self._tokens: dict[str, tuple[float, dict[str, Any]]] = {}

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

    async def check(self, authorization: str | None, peer: str = "") -> str:
        """The caller's identity; raises Unauthenticated with a message a person can act on.

        ``peer`` is the client's address (failed basic checks are limited per address); empty when unknown.
        """
        caller = await self.identify(authorization, peer)
        return str(caller.get("username") or caller.get("clientId") or "token")

    async def remember(self, authorization: str | None, peer: str = "") -> str:
        """:meth:`check`, and the caller kept in :data:`CALLER` for the commands of this call (the engine decides
        from it what the caller may do)."""
        caller = await self.identify(authorization, peer)
        CALLER.set(caller)
        return str(caller.get("username") or caller.get("clientId") or "token")

    async def identify(self, authorization: str | None, peer: str = "") -> dict[str, Any]:
        """The caller as commands carry it: ``{"username"}`` for basic auth; for a bearer token its subject as
        ``username``, its client (``azp`` or ``client_id``) as ``clientId``, and its ``claims``."""
        if not authorization:
            raise Unauthenticated(f"this gateway requires credentials: send {self._hint()}")
        scheme, _, credentials = authorization.strip().partition(" ")
        scheme = scheme.lower()
        if scheme == "bearer" and "oauth" in self.config.methods:
            claims = self._check_bearer(credentials.strip())
            caller: dict[str, Any] = {"claims": claims}
            if isinstance(claims.get("sub"), str):
                caller["username"] = claims["sub"]
            client = claims.get("azp") or claims.get("client_id")
            if isinstance(client, str):
                caller["clientId"] = client
            return caller
        if scheme == "basic" and self.basic is not None:
            return {"username": await self.basic.check(credentials.strip(), client_address(peer))}
        raise Unauthenticated(
            f"'{shown(scheme.capitalize(), 20)}' credentials are not accepted here: send {self._hint()}"
        )

    def _check_bearer(self, token: str) -> dict[str, Any]:
        now = time.time()
        cached = self._tokens.get(token)
        if cached is not None and now < cached[0]:
            return cached[1]
        import jwt  # loaded already by the JWKS (JwksKeys.load)

        assert self.jwks is not None
        oauth = self.config.oauth
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise Unauthenticated(
                "the bearer token is not a JWT; send the access_token the authorization server issued"
            ) from None
        except jwt.InvalidTokenError:  # a header of the wrong shape: a 'kid' that is not a string, say
            raise Unauthenticated(MALFORMED_HEADER) from None
        kid, alg = header.get("kid"), header.get("alg")
        if not (kid is None or isinstance(kid, str)) or not isinstance(alg, str):
            raise Unauthenticated(MALFORMED_HEADER)
        key = self.jwks.key(kid)
        if key is None:
            raise Unauthenticated(
                f"the access token is signed with key id {shown(kid)!r}, which is not in the gateway's JWKS; "
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
        except Exception as e:  # a parser's surprise at crafted input is still a refusal, not an internal error
            log.debug("could not check an access token: %r", e)
            raise Unauthenticated(
                "the access token could not be read; send the access_token the authorization server issued"
            ) from None
        if len(self._tokens) >= TOKEN_CACHE_SIZE:
            self._tokens.clear()
        self._tokens[token] = (float(claims["exp"]), claims)
        return dict(claims)

    def _explain(self, token: str, header: dict[str, Any], error: jwt.InvalidTokenError) -> str:
        """What is wrong with a token, in terms of the client setting that fixes it."""
        import jwt

        oauth = self.config.oauth
        if isinstance(error, jwt.ExpiredSignatureError):
            expired = _unverified_claim(token, "exp")
            try:
                when = datetime.fromtimestamp(expired, UTC).isoformat()
            except (TypeError, ValueError, OverflowError, OSError):
                when = "?"
            return f"the access token expired at {when}; get a new one from the authorization server"
        if isinstance(error, jwt.InvalidAudienceError):
            return (
                f"the access token is for audience {shown(_unverified_claim(token, 'aud'))!r}, but this gateway "
                f"accepts tokens for {oauth.audience!r} (set ZEEBE_TOKEN_AUDIENCE={oauth.audience})"
            )
        if isinstance(error, jwt.InvalidIssuerError):
            return (
                f"the access token was issued by {shown(_unverified_claim(token, 'iss'))!r}, but this gateway trusts "
                f"{oauth.issuer!r}"
            )
        if isinstance(error, jwt.InvalidSignatureError):
            return "the access token's signature does not verify with the gateway's JWKS"
        if isinstance(error, jwt.InvalidAlgorithmError):
            alg = shown(header.get("alg"))
            return f"the access token is signed with {alg!r}; this gateway accepts {oauth.algorithms}"
        return f"the access token is not valid: {shown(error, 300)}"


def _unverified_claim(token: str, name: str) -> Any:
    import jwt

    try:
        return jwt.decode(token, options={"verify_signature": False}).get(name)
    except jwt.InvalidTokenError:
        return None


def client_address(peer: str) -> str:
    """The address part of a gRPC peer (``ipv4:10.0.0.7:51234`` → ``10.0.0.7``); other forms as given."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        return rest.rpartition(":")[0].strip("[]")
    return peer


def gateway_interceptors(authenticator: Authenticator | None) -> list[grpc.aio.ServerInterceptor]:
    if authenticator is None or not authenticator.enabled:
        return []
    return [MetadataCheckInterceptor("authorization", authenticator.remember, OPEN_SERVICES, with_peer=True)]


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
                basic_cache_ttl_s=float(authn["basic"]["cacheTtl"]),
                basic_failures_per_minute=int(authn["basic"]["failuresPerMinute"]),
                identity_cache_ttl_s=float(authn["identityCacheTtl"]),
            ),
        )
