"""Gateway and command API security settings: what start-up refuses, and how credentials are checked."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest

from broker.command_api import CommandApiSecurity
from broker.config import ConfigError, load
from gateway.auth import (
    AuthConfig,
    Authenticator,
    OAuthConfig,
    SecurityConfigError,
    Unauthenticated,
    hash_password,
    load_users,
    verify_password,
)
from tests.security import Certificates, TokenIssuer, make_certificates


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "kerberos"}, "'kerberos' is not one of oauth, basic"),
        ({"WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "oauth"}, "oauth needs jwksPath or jwksUrl"),
        (
            {
                "WEIR_GATEWAY_SECURITY_AUTHENTICATION_METHODS": "oauth",
                "WEIR_GATEWAY_SECURITY_AUTHENTICATION_OAUTH_JWKS_URL": "https://login.example/jwks.json",
            },
            "audience: required with oauth",
        ),
        ({"WEIR_GATEWAY_SECURITY_AUTHENTICATION_IDENTITY_CACHE_TTL": "-1"}, "identityCacheTtl: must be a number"),
        ({"WEIR_GATEWAY_SECURITY_TLS_ENABLED": "true"}, "needs certificateChainPath and privateKeyPath"),
        ({"WEIR_COMMAND_API_TLS_ENABLED": "true"}, "needs certificateChainPath, privateKeyPath and caPath"),
        ({"WEIR_COMMAND_API_TLS_REQUIRE_CLIENT_CERTIFICATE": "true"}, "needs commandApi.tls.enabled"),
        ({"WEIR_GATEWAY_MAX_CONCURRENT_STREAMS": "0"}, "maxConcurrentStreams: must be a positive integer"),
    ],
)
def test_unusable_security_settings_are_refused_naming_the_key(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(env=env)


def test_defaults_are_open_and_plaintext() -> None:
    config = load(env={})
    assert config["gateway"]["security"]["authentication"]["methods"] == []
    assert not config["gateway"]["security"]["tls"]["enabled"]
    assert CommandApiSecurity.from_config(config["commandApi"]) == CommandApiSecurity()
    assert not CommandApiSecurity().closed


def test_passwords_are_hashed_with_a_salt_and_checked() -> None:
    one, two = hash_password("pw"), hash_password("pw")
    assert one != two and one.startswith("scrypt$")
    assert verify_password("pw", one) and verify_password("pw", two)
    assert not verify_password("PW", one) and not verify_password("pw", "plain-text")


def test_the_users_file_must_hold_hashes(tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text(f"# comment\n\nalice:{hash_password('a')}\n")
    assert list(load_users(str(users))) == ["alice"]
    users.write_text("bob:hunter2\n")
    with pytest.raises(SecurityConfigError, match=r"users:1: expected 'user:scrypt\$…'"):
        load_users(str(users))


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def test_bearer_tokens_are_checked_offline_against_a_jwks_file(tmp_path: Path, certs: Certificates) -> None:
    issuer = TokenIssuer(certs, {})  # not started: only its keys are used
    jwks = issuer.write_jwks(tmp_path / "jwks.json")
    users = tmp_path / "users"
    users.write_text(f"alice:{hash_password('secret')}\n")
    config = AuthConfig(
        methods=["oauth", "basic"],
        oauth=OAuthConfig(jwks_path=str(jwks), audience="weir", issuer=issuer.issuer, jwks_refresh_interval_s=0),
        basic_users_file=str(users),
    )

    async def scenario() -> None:
        authenticator = Authenticator(config)
        await authenticator.start()
        token = issuer.token("worker-1", audience="weir")
        assert await authenticator.check(f"Bearer {token}") == "worker-1"
        assert await authenticator.check(f"bearer {token}") == "worker-1"  # remembered until it expires
        with pytest.raises(Unauthenticated, match="expired at"):
            await authenticator.check(f"Bearer {issuer.token(audience='weir', lifetime_s=-60)}")
        with pytest.raises(Unauthenticated, match="ZEEBE_TOKEN_AUDIENCE=weir"):
            await authenticator.check(f"Bearer {issuer.token(audience='other')}")
        basic = base64.b64encode(b"alice:secret").decode()
        assert await authenticator.check(f"Basic {basic}") == "alice"
        with pytest.raises(Unauthenticated, match="must be base64"):
            await authenticator.check("Basic !!!")
        with pytest.raises(Unauthenticated, match="requires credentials"):
            await authenticator.check(None)
        await authenticator.close()

    asyncio.run(scenario())


def test_command_api_secret_is_required_and_compared_exactly() -> None:
    security = CommandApiSecurity(secret="s3cret")
    assert security.closed and security.metadata() == (("weir-command-secret", "s3cret"),)
    security.check("s3cret")
    for wrong in (None, "", "s3cre", "s3cret "):
        with pytest.raises(Unauthenticated):
            security.check(wrong)


def test_a_rotated_signing_key_is_fetched_from_the_jwks_url(
    certs: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token naming an unknown key id is refused, and makes the gateway fetch the JWKS again (at most every
    ``JWKS_MIN_REFETCH_S``, here 0); the next token with that key passes."""
    from gateway import auth

    monkeypatch.setattr(auth, "JWKS_MIN_REFETCH_S", 0.0)

    async def scenario(issuer: TokenIssuer) -> None:
        config = AuthConfig(
            methods=["oauth"],
            oauth=OAuthConfig(jwks_url=issuer.jwks_url, jwks_ca_path=str(certs.ca), audience="weir"),
        )
        authenticator = Authenticator(config)
        await authenticator.start()
        assert await authenticator.check(f"Bearer {issuer.token('before', audience='weir')}") == "before"
        issuer.rotate()
        rotated = f"Bearer {issuer.token('after', audience='weir')}"
        with pytest.raises(Unauthenticated, match="not in the gateway's JWKS"):
            await authenticator.check(rotated)
        for _ in range(100):
            await asyncio.sleep(0.05)
            try:
                assert await authenticator.check(rotated) == "after"
                break
            except Unauthenticated:
                continue
        else:
            raise AssertionError("the rotated key was never fetched")
        await authenticator.close()

    with TokenIssuer(certs, {}) as issuer:
        asyncio.run(scenario(issuer))


def test_an_unreachable_jwks_url_stops_start_up_with_its_address(certs: Certificates) -> None:
    config = AuthConfig(methods=["oauth"], oauth=OAuthConfig(jwks_url="https://127.0.0.1:1/jwks.json", audience="w"))
    with pytest.raises(SecurityConfigError, match=r"cannot load the JWKS from https://127.0.0.1:1/jwks.json"):
        asyncio.run(Authenticator(config).start())


def test_config_show_does_not_print_the_command_api_secret() -> None:
    from broker.config import dump

    shown = dump(load(env={"WEIR_COMMAND_API_SECRET": "do-not-print-me"}))
    assert "do-not-print-me" not in shown and "secret: (set)" in shown
