"""Where integration tests get Postgres, decided once and without pytest fixtures.

Order: an explicit server URL (``DBOS_AGENTS_TEST_DATABASE_URL``), then a throwaway
``postgres:16`` container when a Docker engine answers, then the embedded pgserver. The last
needs nothing installed, so the suite runs on any laptop or CI box; the first lets CI point at a
service container without paying for Docker-in-Docker.

Tests isolate themselves with :func:`create_fresh_database` on the provisioned server, because
DBOS keeps workflow state per database and leftovers from a previous test would be recovered.
"""

from __future__ import annotations

import importlib
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

from dbos_agents.store.embedded import embedded_database_url

TEST_DATABASE_URL_ENV = "DBOS_AGENTS_TEST_DATABASE_URL"
"""A *server* URL such as ``postgresql://postgres@127.0.0.1:5432/postgres``."""

_POSTGRES_IMAGE = "postgres:16"
_DOCKER_PING_TIMEOUT_SEC = 2
_CONNECT_TIMEOUT_SEC = 10
_ACCEPTED_SCHEMES = ("postgresql", "postgresql+psycopg", "postgres")

Source = Literal["env", "testcontainers", "pgserver"]


@dataclass(frozen=True)
class ProvisionedDatabase:
    """A Postgres server for tests; ``url`` names a maintenance database on it.

    Create per-test databases on it with :func:`create_fresh_database`; call :meth:`close`
    when done so a container, if one was started, is stopped (a no-op otherwise: an env
    server is not ours and the embedded server is deliberately reused across runs).
    """

    url: str
    source: Source
    _stop: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def close(self) -> None:
        """Stop the container, if any. Safe to call more than once."""
        if self._stop is not None:
            self._stop()


def provision_test_database(name_prefix: str = "dbos_agents_test") -> ProvisionedDatabase:
    """Return a Postgres server for integration tests: env URL, else Docker, else pgserver.

    ``name_prefix`` names the embedded data directory, ``<tmp>/<name_prefix>_pgserver``,
    which is reused across runs (warm start takes well under a second; cold about 1-2 s).
    The Docker probe gives up within about two seconds when no engine answers.
    """
    env_url = os.environ.get(TEST_DATABASE_URL_ENV, "").strip()
    if env_url:
        return ProvisionedDatabase(url=normalize_url(env_url), source="env")

    if _docker_available():
        return _start_container()

    data_dir = Path(tempfile.gettempdir()) / f"{name_prefix}_pgserver"
    return ProvisionedDatabase(
        url=embedded_database_url(data_dir=data_dir, database="postgres"), source="pgserver"
    )


def create_fresh_database(server_url: str, name: str) -> str:
    """Drop ``name`` (evicting its sessions) and create it empty; return its ``postgresql://`` URL.

    Dropping first, rather than failing when it exists, makes a rerun after a crashed test
    start clean.
    """
    drop_database(server_url, name)
    with _admin_connection(server_url) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return database_url(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    """Drop ``name`` if it exists, terminating any sessions still connected to it."""
    with _admin_connection(server_url) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def normalize_url(url: str) -> str:
    """Return ``url`` in plain ``postgresql://`` form, which psycopg and SQLAlchemy both take.

    Accepts ``postgresql://``, ``postgresql+psycopg://`` and ``postgres://``.
    """
    parsed = make_url(url)
    if parsed.drivername not in _ACCEPTED_SCHEMES:
        raise ValueError(f"not a Postgres URL for psycopg: {parsed.drivername}://...")
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def database_url(server_url: str, name: str) -> str:
    """The ``postgresql://`` URL of database ``name`` on the server of ``server_url``."""
    parsed = make_url(normalize_url(server_url)).set(database=name)
    return parsed.render_as_string(hide_password=False)


def _admin_connection(server_url: str) -> psycopg.Connection[Any]:
    """Autocommit connection: CREATE/DROP DATABASE cannot run inside a transaction."""
    return psycopg.connect(
        normalize_url(server_url), autocommit=True, connect_timeout=_CONNECT_TIMEOUT_SEC
    )


def _docker_available() -> bool:
    """True when a Docker engine answers a ping within ~2 s; never raises.

    docker-py is imported dynamically: it ships no type information and is only a test extra.
    """
    try:
        docker: Any = importlib.import_module("docker")
        client = docker.from_env(timeout=_DOCKER_PING_TIMEOUT_SEC)
    except Exception:
        return False
    try:
        return bool(client.ping())
    except Exception:
        return False
    finally:
        client.close()


def _start_container() -> ProvisionedDatabase:
    """Start a ``postgres:16`` container; its ``test`` superuser can create databases."""
    from testcontainers.community.postgres import PostgresContainer

    container = PostgresContainer(_POSTGRES_IMAGE, driver=None)
    container.start()
    lock = threading.Lock()
    stopped = False

    def stop() -> None:
        nonlocal stopped
        with lock:
            if not stopped:
                stopped = True
                container.stop()

    try:
        url = normalize_url(container.get_connection_url())
    except BaseException:
        stop()
        raise
    return ProvisionedDatabase(url=url, source="testcontainers", _stop=stop)
