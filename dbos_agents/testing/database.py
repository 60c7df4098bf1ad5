"""Where integration tests get Postgres, decided once and without pytest fixtures.

Order (``DBOS_AGENTS_TEST_DATABASE=auto``, the default): an explicit server URL
(``DBOS_AGENTS_TEST_DATABASE_URL``), then a throwaway Postgres container when a Docker engine
answers, then the embedded pgserver. The last needs nothing installed, so the suite runs on
any laptop or CI box; the first lets CI point at a service container without paying for
Docker-in-Docker. ``env``, ``testcontainers`` or ``pgserver`` force one source and fail with
a typed error when it cannot be had, rather than quietly testing against another one.

The container's image is ``DBOS_AGENTS_TEST_POSTGRES_IMAGE`` (default ``postgres:16``); where
no registry is reachable, ``.ci/postgres-image/build`` makes one from Debian's packages.

Tests isolate themselves with :func:`create_fresh_database` on the provisioned server, because
DBOS keeps workflow state per database and leftovers from a previous test would be recovered.
Several processes of one run share the embedded server (``dbos_agents.testing.embedded_server``).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

from dbos_agents.errors import ConfigurationError, DatabaseUnavailableError
from dbos_agents.testing.embedded_server import open_embedded_server

TEST_DATABASE_URL_ENV = "DBOS_AGENTS_TEST_DATABASE_URL"
"""A *server* URL such as ``postgresql://postgres@127.0.0.1:5432/postgres``."""
TEST_DATABASE_ENV = "DBOS_AGENTS_TEST_DATABASE"
"""Which source to use: ``auto`` (default), ``env``, ``testcontainers`` or ``pgserver``."""
TEST_POSTGRES_IMAGE_ENV = "DBOS_AGENTS_TEST_POSTGRES_IMAGE"
"""The image testcontainers starts; any image with the official image's environment."""
DEFAULT_POSTGRES_IMAGE = "postgres:16"

_DOCKER_PING_TIMEOUT_SEC = 2
_CONNECT_TIMEOUT_SEC = 10
_ACCEPTED_SCHEMES = ("postgresql", "postgresql+psycopg", "postgres")
_log = logging.getLogger(__name__)
_BUILD_HINT = (
    "without an image registry, build a local image with .ci/postgres-image/build and set "
    f"{TEST_POSTGRES_IMAGE_ENV}=dbos-agents/postgres:15-debian (docs/testing.md)"
)

Source = Literal["env", "testcontainers", "pgserver"]
Mode = Literal["auto", "env", "testcontainers", "pgserver"]
DockerProbe = Callable[[], str | None]
"""Returns ``None`` when a Docker engine answers, else why it does not."""


@dataclass(frozen=True)
class ProvisionedDatabase:
    """A Postgres server for tests; ``url`` names a maintenance database on it.

    Create per-test databases on it with :func:`create_fresh_database`; call :meth:`close`
    when done so a container, if one was started, is stopped, and the embedded server too
    when this call started it and no other test process still uses it (an env server is not
    ours). A container nobody closed is stopped at interpreter exit, since the
    testcontainers reaper may be disabled (``TESTCONTAINERS_RYUK_DISABLED``) where its image
    cannot be pulled. ``image`` and ``container_id`` are set for a container, ``data_dir``
    for the embedded server, for logs.
    """

    url: str
    source: Source
    image: str | None = None
    container_id: str | None = None
    data_dir: Path | None = None
    _stop: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def close(self) -> None:
        """Stop the container or the embedded server, if ours. Safe to call more than once."""
        if self._stop is not None:
            self._stop()


def provision_test_database(
    name_prefix: str = "dbos_agents_test",
    *,
    mode: Mode | None = None,
    image: str | None = None,
    max_connections: int = 0,
) -> ProvisionedDatabase:
    """Return a Postgres server for integration tests: env URL, else Docker, else pgserver.

    ``mode`` and ``image`` default to ``DBOS_AGENTS_TEST_DATABASE`` and
    ``DBOS_AGENTS_TEST_POSTGRES_IMAGE``. ``name_prefix`` names the embedded data directory,
    ``<tmp>/<name_prefix>_pgserver``, which is reused across runs so that a start is warm.
    ``max_connections`` is what the embedded server should hold for several test processes:
    it is raised (a restart) when no other process uses the server. The Docker probe gives
    up within about two seconds when no engine answers.

    Raises:
        ConfigurationError: an unknown mode, or ``env`` without a URL.
        DatabaseUnavailableError: a container was wanted (forced, or Docker answered) but
            Docker does not answer or the container does not start.
    """
    source = choose_source(mode)
    if source == "env":
        env_url = os.environ.get(TEST_DATABASE_URL_ENV, "").strip()
        return ProvisionedDatabase(url=normalize_url(env_url), source="env")
    if source == "testcontainers":
        return _start_container(resolve_image(image))
    server = open_embedded_server(
        Path(tempfile.gettempdir()) / f"{name_prefix}_pgserver", max_connections
    )
    return ProvisionedDatabase(
        url=server.url, source="pgserver", data_dir=server.data_dir, _stop=server.close
    )


def choose_source(mode: Mode | None = None) -> Source:
    """Where :func:`provision_test_database` would take Postgres from, without taking it.

    For a caller that prepares the source before test processes start; raises as
    :func:`select_source` does.
    """
    env_url = os.environ.get(TEST_DATABASE_URL_ENV, "").strip()
    return select_source(resolve_mode(mode), env_url, _docker_unavailable_reason)


def resolve_mode(mode: str | None = None) -> Mode:
    """``mode``, else ``DBOS_AGENTS_TEST_DATABASE``, else ``auto``; anything else is refused."""
    value = (mode if mode is not None else os.environ.get(TEST_DATABASE_ENV, "")).strip()
    value = value.lower() or "auto"
    if value in get_args(Mode):
        return cast(Mode, value)
    raise ConfigurationError(
        f"{TEST_DATABASE_ENV}={value!r}: expected one of {', '.join(get_args(Mode))}"
    )


def resolve_image(image: str | None = None) -> str:
    """``image``, else ``DBOS_AGENTS_TEST_POSTGRES_IMAGE``, else ``postgres:16``."""
    chosen = image if image is not None else os.environ.get(TEST_POSTGRES_IMAGE_ENV, "")
    return chosen.strip() or DEFAULT_POSTGRES_IMAGE


def select_source(mode: Mode, env_url: str, docker_probe: DockerProbe) -> Source:
    """Decide where Postgres comes from; the probe runs only when the answer depends on it.

    A forced source that cannot be had raises instead of falling back, so a run meant to
    exercise containers never passes against the embedded server by accident.
    """
    if mode == "env" or (mode == "auto" and env_url):
        if not env_url:
            raise ConfigurationError(
                f"{TEST_DATABASE_ENV}=env but {TEST_DATABASE_URL_ENV} is unset"
            )
        return "env"
    if mode == "pgserver":
        return "pgserver"
    reason = docker_probe()
    if reason is None:
        return "testcontainers"
    if mode == "testcontainers":
        raise DatabaseUnavailableError(
            f"{TEST_DATABASE_ENV}=testcontainers but Docker does not answer ({reason}); "
            "start the Docker engine or choose another source"
        )
    return "pgserver"


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


def _docker_unavailable_reason() -> str | None:
    """``None`` when a Docker engine answers a ping within ~2 s, else why not; never raises.

    docker-py is imported dynamically: it ships no type information and is only a test extra.
    """
    try:
        docker: Any = importlib.import_module("docker")
        client = docker.from_env(timeout=_DOCKER_PING_TIMEOUT_SEC)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    try:
        return None if client.ping() else "ping returned false"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()


def _start_container(image: str) -> ProvisionedDatabase:
    """Start a Postgres container of ``image``; its ``test`` superuser can create databases."""
    from testcontainers.community.postgres import PostgresContainer

    # Durability is worthless in a throwaway server; without fsync every commit is cheaper.
    container = PostgresContainer(image, driver=None).with_command(
        "postgres -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    )
    lock = threading.Lock()
    stopped = False

    def stop() -> None:
        nonlocal stopped
        with lock:
            if not stopped:
                stopped = True
                container.stop()  # removes it (force); a no-op if it never got created

    started = time.monotonic()
    try:
        container.start()
        url = normalize_url(container.get_connection_url())
        container_id = str(container.get_wrapped_container().short_id)
    except BaseException as exc:
        with contextlib.suppress(Exception):
            stop()
        if isinstance(exc, Exception):
            raise DatabaseUnavailableError(
                f"no Postgres container from image {image!r}: {type(exc).__name__}: {exc}; "
                + _BUILD_HINT
            ) from exc
        raise
    atexit.register(stop)
    _log.info(
        "Postgres container %s from %s at %s, ready after %.1f s",
        container_id,
        image,
        make_url(url).render_as_string(hide_password=True),
        time.monotonic() - started,
    )
    return ProvisionedDatabase(
        url=url, source="testcontainers", image=image, container_id=container_id, _stop=stop
    )
