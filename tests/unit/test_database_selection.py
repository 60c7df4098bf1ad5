"""Which Postgres the tests get: the choice itself, which needs no Docker and no server."""

from __future__ import annotations

import pytest

from dbos_agents.errors import ConfigurationError, DatabaseUnavailableError
from dbos_agents.testing.database import (
    DEFAULT_POSTGRES_IMAGE,
    TEST_DATABASE_ENV,
    TEST_DATABASE_URL_ENV,
    TEST_POSTGRES_IMAGE_ENV,
    Mode,
    Source,
    provision_test_database,
    resolve_image,
    resolve_mode,
    select_source,
)

URL = "postgresql://postgres@127.0.0.1:5432/postgres"


class Probe:
    """A Docker probe with a fixed answer that counts its calls."""

    def __init__(self, reason: str | None) -> None:
        self.reason = reason
        self.calls = 0

    def __call__(self) -> str | None:
        self.calls += 1
        return self.reason


@pytest.mark.parametrize(
    ("mode", "env_url", "docker_down", "expected", "probed"),
    [
        ("auto", URL, None, "env", False),  # a server URL wins without asking Docker
        ("auto", "", None, "testcontainers", True),
        ("auto", "", "no socket", "pgserver", True),
        ("testcontainers", URL, None, "testcontainers", True),  # forced: the URL is ignored
        ("pgserver", URL, None, "pgserver", False),
        ("env", URL, None, "env", False),
    ],
)
def test_select_source(
    mode: Mode, env_url: str, docker_down: str | None, expected: Source, probed: bool
) -> None:
    probe = Probe(docker_down)
    assert select_source(mode, env_url, probe) == expected
    assert probe.calls == (1 if probed else 0)


def test_forced_testcontainers_without_docker_is_an_error_not_a_fallback() -> None:
    with pytest.raises(DatabaseUnavailableError, match="Docker does not answer \\(no socket\\)"):
        select_source("testcontainers", URL, Probe("no socket"))


def test_forced_env_without_a_url_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match=TEST_DATABASE_URL_ENV):
        select_source("env", "", Probe(None))


def test_mode_comes_from_the_argument_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TEST_DATABASE_ENV, raising=False)
    assert resolve_mode() == "auto"
    monkeypatch.setenv(TEST_DATABASE_ENV, " TestContainers ")
    assert resolve_mode() == "testcontainers"
    assert resolve_mode("pgserver") == "pgserver"
    monkeypatch.setenv(TEST_DATABASE_ENV, "docker")
    with pytest.raises(ConfigurationError, match="'docker': expected one of auto, env"):
        resolve_mode()


def test_image_comes_from_the_argument_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TEST_POSTGRES_IMAGE_ENV, raising=False)
    assert resolve_image() == DEFAULT_POSTGRES_IMAGE == "postgres:16"
    monkeypatch.setenv(TEST_POSTGRES_IMAGE_ENV, "dbos-agents/postgres:15-debian")
    assert resolve_image() == "dbos-agents/postgres:15-debian"
    assert resolve_image("postgres:17") == "postgres:17"


def test_forcing_containers_where_no_engine_answers_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The real docker-py probe, pointed at a socket that does not exist.
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setenv(TEST_DATABASE_URL_ENV, URL)
    monkeypatch.setenv(TEST_DATABASE_ENV, "testcontainers")
    with pytest.raises(DatabaseUnavailableError) as raised:
        provision_test_database()
    assert raised.value.code == "DATABASE_UNAVAILABLE"
    assert "Docker does not answer" in str(raised.value)
