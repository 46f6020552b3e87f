"""Test credentials made on the spot: a CA with server and client certificates, and a small OAuth token issuer.

The issuer is a real HTTPS server on 127.0.0.1 that implements the client-credentials grant the way Camunda 8's
authorization servers do (``POST`` with ``grant_type=client_credentials``, the client id and secret in the form, in a
JSON body or as HTTP basic credentials, and ``audience``) and answers ``{access_token, expires_in, token_type}``. Its
tokens are RS256 JWTs; its JWKS is served at ``/jwks.json`` and can be written to a file for the gateway.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import ssl
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclass
class Certificates:
    """PEM files in one folder: ``ca.pem``, ``server.pem``/``server-key.pem``, ``client.pem``/``client-key.pem``.

    The server certificate names ``localhost`` and ``127.0.0.1`` and may also serve as a client certificate (a node
    of the cluster calling another); the client certificate is for mTLS clients.
    """

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def server_cert(self) -> Path:
        return self.directory / "server.pem"

    @property
    def server_key(self) -> Path:
        return self.directory / "server-key.pem"

    @property
    def client_cert(self) -> Path:
        return self.directory / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.directory / "client-key.pem"


def make_certificates(directory: Path, name: str = "Weir test CA") -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )  # digital signature, cert sign, CRL sign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    certs = Certificates(directory)
    certs.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))

    def leaf(common_name: str, usage: list[x509.ObjectIdentifier], cert_path: Path, key_path: Path) -> None:
        key = _key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        )
        if ExtendedKeyUsageOID.SERVER_AUTH in usage:
            san = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(_pem_key(key))

    # The server certificate is a node's: brokers serve it and present it when they call each other (mTLS).
    node_usage = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    leaf("localhost", node_usage, certs.server_cert, certs.server_key)
    leaf("weir-client", [ExtendedKeyUsageOID.CLIENT_AUTH], certs.client_cert, certs.client_key)
    return certs


class TokenIssuer:
    """An OAuth 2 authorization server (client-credentials grant only) on 127.0.0.1, over HTTPS with ``certs``."""

    def __init__(self, certs: Certificates, clients: dict[str, str], *, lifetime_s: int = 300, path: str = "/") -> None:
        """``path``: where the issuer lives on the server (a Keycloak realm's is ``/realms/<name>``)."""
        self.clients = clients
        self.base_path = path
        self.lifetime_s = lifetime_s
        self.key = _key()
        self.key_id = uuid.uuid4().hex[:12]
        self.requests: list[dict[str, str]] = []
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.endswith(("/jwks.json", "/certs")):  # ours, and Keycloak's JWKS path
                    self._reply(200, issuer.jwks())
                else:
                    self._reply(404, {"error": "not_found"})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()
                if "json" in (self.headers.get("content-type") or ""):
                    form = {k: str(v) for k, v in json.loads(body or "{}").items()}
                else:
                    form = {k: v[0] for k, v in urllib.parse.parse_qs(body).items()}
                auth = self.headers.get("authorization") or ""
                if auth.lower().startswith("basic "):
                    user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
                    form.setdefault("client_id", urllib.parse.unquote_plus(user))
                    form.setdefault("client_secret", urllib.parse.unquote_plus(password))
                issuer.requests.append(form)
                if form.get("grant_type", "client_credentials") != "client_credentials":
                    self._reply(400, {"error": "unsupported_grant_type"})
                    return
                client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
                if issuer.clients.get(client_id) != secret or not secret:
                    self._reply(401, {"error": "invalid_client"})
                    return
                token = issuer.token(client_id, audience=form.get("audience", ""))
                self._reply(200, {"access_token": token, "expires_in": issuer.lifetime_s, "token_type": "Bearer"})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(certs.server_cert, certs.server_key)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def issuer(self) -> str:
        return f"https://127.0.0.1:{self._server.server_address[1]}{self.base_path}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def token_url(self) -> str:
        return self.issuer.rstrip("/") + "/oauth/token"

    @property
    def jwks_url(self) -> str:
        return self.issuer.rstrip("/") + "/jwks.json"

    def rotate(self) -> None:
        """A new signing key under a new key id (the JWKS then lists only the new one), as key rotation does."""
        self.key = _key()
        self.key_id = uuid.uuid4().hex[:12]

    def jwks(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": self.key_id, "use": "sig", "alg": "RS256"}]}

    def write_jwks(self, path: Path) -> Path:
        path.write_text(json.dumps(self.jwks()))
        return path

    def token(
        self,
        subject: str = "tests",
        *,
        audience: str = "",
        issuer: str | None = None,
        lifetime_s: int | None = None,
        key: rsa.RSAPrivateKey | None = None,
        key_id: str | None = None,
        claims: dict[str, Any] | None = None,
    ) -> str:
        """An access token as the grant issues it, with ``claims`` besides the standard ones; the other keyword
        arguments make the bad ones tests need."""
        now = int(time.time())
        standard: dict[str, Any] = {
            "iss": self.issuer if issuer is None else issuer,
            "sub": subject,
            "iat": now,
            "exp": now + (self.lifetime_s if lifetime_s is None else lifetime_s),
            "jti": uuid.uuid4().hex,
        }
        if audience:
            standard["aud"] = audience
        headers = {"kid": self.key_id if key_id is None else key_id}
        return jwt.encode({**standard, **(claims or {})}, key or self.key, algorithm="RS256", headers=headers)

    def __enter__(self) -> TokenIssuer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
