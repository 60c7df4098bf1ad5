"""Secure by default: what ``create_app`` refuses, warns about, and reads from the env.
No database and no server needed."""

from __future__ import annotations

import base64
import logging

import pytest
from pydantic import SecretStr

from dbos_agents import ConfigurationError
from dbos_agents.server import Principal, ServerSettings, SessionTokens, create_app
from dbos_agents.server.auth import TokenError, load_authenticate

from .conftest import SECRET

pytestmark = pytest.mark.integration
URL = "postgresql://postgres@127.0.0.1:5432/never_connected"


def _hook(request: object, operation: str, session_id: str | None) -> Principal | None:
    return None


def test_refuses_to_start_without_auth() -> None:
    with pytest.raises(ConfigurationError, match="refusing to start"):
        create_app(ServerSettings(database_url=URL, secret=SecretStr(SECRET)))
    with pytest.raises(ConfigurationError, match="refusing to start"):
        create_app(ServerSettings(database_url=URL))


def test_starts_with_a_hook_or_an_explicit_opt_out(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="dbos_agents.server"):
        create_app(ServerSettings(database_url=URL, secret=SecretStr(SECRET)), authenticate=_hook)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        create_app(ServerSettings(database_url=URL, allow_unauthenticated=True))
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "allow_unauthenticated" in warning.getMessage()


def test_refuses_a_short_secret_and_a_missing_database() -> None:
    with pytest.raises(ConfigurationError, match="at least 32"):
        create_app(ServerSettings(database_url=URL, secret=SecretStr("short")), authenticate=_hook)
    with pytest.raises(ConfigurationError, match="database_url"):
        create_app(ServerSettings(database_url=None, secret=SecretStr(SECRET)), authenticate=_hook)


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DBOS_AGENTS_SERVER_DATABASE_URL", raising=False)
    monkeypatch.setenv("DBOS_AGENTS_DATABASE_URL", "postgresql://shared/db")
    monkeypatch.setenv("DBOS_AGENTS_SERVER_SECRET", SECRET)
    monkeypatch.setenv("DBOS_AGENTS_SERVER_ALLOW_UNAUTHENTICATED", "1")
    s = ServerSettings()
    assert s.database_url == "postgresql://shared/db"
    assert s.secret is not None and s.secret.get_secret_value() == SECRET
    assert SECRET not in repr(s)
    assert s.allow_unauthenticated and s.token_ttl_sec == 3600 and s.max_body_bytes == 1 << 20
    assert s.host == "127.0.0.1"
    monkeypatch.setenv("DBOS_AGENTS_SERVER_DATABASE_URL", "postgresql://server/db")
    assert ServerSettings().database_url == "postgresql://server/db"


def test_hook_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    app = create_app(
        ServerSettings(
            database_url=URL, secret=SecretStr(SECRET), authenticate="tests.http.test_config:_hook"
        )
    )
    assert app.state.dbos_agents.authenticate is _hook
    for bad in ("nocolon", "tests.http.test_config:missing", "no_such_module_x:f"):
        with pytest.raises(ConfigurationError):
            load_authenticate(bad)


def test_tokens_are_bound_signed_and_expire() -> None:
    now = [1_000_000.0]
    tokens = SessionTokens(SECRET, 60, clock=lambda: now[0])
    issued = tokens.issue("ses_a")
    assert tokens.verify(issued.token) == "ses_a"
    assert issued.expires_at.timestamp() == 1_000_060
    other = SessionTokens(SECRET + "!", 60, clock=lambda: now[0])
    with pytest.raises(TokenError, match="signature"):
        other.verify(issued.token)
    # Every single-character change of the token is refused.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
    for i, ch in enumerate(issued.token):
        forged = issued.token[:i] + alphabet[(alphabet.index(ch) + 1) % len(alphabet)]
        forged += issued.token[i + 1 :]
        with pytest.raises(TokenError):
            tokens.verify(forged)
    now[0] += 60
    with pytest.raises(TokenError, match="expired"):
        tokens.verify(issued.token)


def test_a_refresh_chain_ends_at_the_max_lifetime_and_v1_tokens_still_verify() -> None:
    now = [1_000_000.0]
    tokens = SessionTokens(SECRET, 60, max_lifetime_seconds=100, clock=lambda: now[0])
    first = tokens.verify_full(tokens.issue("ses_a").token)
    assert (first.session_id, first.born, first.expires) == ("ses_a", 1_000_000, 1_000_060)
    now[0] += 50
    second = tokens.verify_full(tokens.issue("ses_a", born=first.born, generation=3).token)
    assert (second.born, second.expires, second.generation) == (1_000_000, 1_000_100, 3)
    now[0] += 50
    with pytest.raises(TokenError, match="lifetime"):
        tokens.issue("ses_a", born=second.born)
    # A v1 token (issued before the upgrade) verifies; its birth is taken as expiry - ttl.
    signed = f"v1.{base64.urlsafe_b64encode(b'ses_b').rstrip(b'=').decode()}.{int(now[0]) + 30}"
    v1 = f"{signed}.{tokens._sign(signed)}"
    assert tokens.verify_full(v1).born == int(now[0]) + 30 - 60
