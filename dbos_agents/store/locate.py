"""Which Postgres to use when the caller names none: one rule for every ``dbos-agents``
command and for ``AgentClient()`` / ``AsyncAgentClient.connect()``, so a script finds the
database the CLI uses without being told where it is.

In order: a URL the caller gives, then ``Settings.database_url``
(``DBOS_AGENTS_DATABASE_URL`` or the settings file), else the embedded Postgres in
``<Settings.data_dir>/pgdata`` (``.dbos_agents/pgdata`` under the current folder), created
and started on first use. Whoever opens it then brings the schema up to date, as for any
database. Its postmaster outlives the process that started it (the CLI, workers and scripts
share it), so a caller that started it says so: ``describe`` is that sentence.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import psycopg

from ..errors import DatabaseUnavailableError
from ..settings import Settings
from .embedded import EmbeddedStatus, embedded_database_url, embedded_status

log = logging.getLogger("dbos_agents")

STOP_HINT = "`dbos-agents db stop` stops it"


@dataclass(frozen=True)
class Located:
    """The URL to use and, for the embedded database, its state before this call."""

    url: str
    before: EmbeddedStatus | None = None
    """``None``: a configured URL. Else ``missing`` (created now), ``stopped`` (started
    now) or ``running`` (adopted)."""

    @property
    def started(self) -> bool:
        """This call created or started a postmaster that keeps running after it."""
        return self.before is not None and self.before.state != "running"


def embedded_pgdata(settings: Settings) -> Path:
    """Where the embedded cluster lives: ``<data_dir>/pgdata`` (``data_dir`` is
    ``DBOS_AGENTS_DATA_DIR``, default ``.dbos_agents``, relative to the current folder)."""
    return Path(settings.data_dir) / "pgdata"


def configured_url(settings: Settings, *urls: str | None) -> str | None:
    """The first URL given, else the settings' one; ``None`` means the embedded database."""
    return next((u for u in urls if u), None) or settings.database_url


def locate_database(
    settings: Settings | None = None,
    *urls: str | None,
    starting: Callable[[EmbeddedStatus], AbstractContextManager[object]] | None = None,
) -> Located:
    """The database to use (see the module doc); ``starting(status)`` wraps the start of
    the embedded one (the CLI's spinner). Callers then say what happened: ``describe``
    (the CLI's line on stderr) or ``log_located`` (the clients' log record)."""
    settings = settings or Settings()
    url = configured_url(settings, *urls)
    if url:
        return Located(url)
    pgdata = embedded_pgdata(settings)
    before = embedded_status(pgdata)
    around = starting(before) if starting is not None else contextlib.nullcontext()
    try:
        with around:
            url = embedded_database_url(pgdata)
    except (RuntimeError, OSError, subprocess.SubprocessError, psycopg.Error) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DatabaseUnavailableError(
            f"could not start the embedded Postgres in {shown(before.pgdata)}: {first}"
            f" (its log: {shown(before.pgdata / 'log')})"
        ) from exc
    return Located(url, before)


def describe(located: Located) -> str:
    """One line on the database in use; a started one says how to stop it."""
    if located.before is None:
        return "database: the configured Postgres"
    where = shown(located.before.pgdata)
    port = _port(located.url)
    if located.before.state == "missing":
        return (
            f"created the embedded Postgres in {where}/ (first use) on {port};"
            f" it keeps running: {STOP_HINT}"
        )
    if located.before.state == "stopped":
        return f"started the embedded Postgres in {where}/ on {port}; it keeps running: {STOP_HINT}"
    return f"database: the embedded Postgres in {where}/ on {port}"


def shown(path: Path) -> str:
    """A path as a user would type it: relative to the current folder when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _port(url: str) -> str:
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return f"{parsed.host}:{parsed.port}" if parsed.port else str(parsed.host or "a local socket")


def log_located(located: Located) -> None:
    """What a client says about the embedded database: a started postmaster at WARNING
    (it outlives the script), an adopted one at INFO."""
    if located.before is None:
        return
    log.log(
        logging.WARNING if located.started else logging.INFO,
        describe(located),
        extra={"event": "embedded_database", "state": located.before.state},
    )
