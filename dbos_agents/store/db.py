"""Database URLs and engines: one place that knows driver names and fails fast.

Users give any of ``postgres://``, ``postgresql://`` or ``postgresql+psycopg://``; DBOS and our
sync engines get ``postgresql+psycopg://``, the async datasource the same driver in async mode.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url

from ..errors import ConfigurationError, DatabaseUnavailableError

PREPARED = {"prepare_threshold": 1}
"""psycopg's connection argument on DBOS's system engine, the datasource and our sync
engines (not the pools ``DBOSClient`` builds itself). A run's
statements (a start's inserts and claim, DBOS's completion of its ``workflow_status`` row,
a step's checkpoint) recur on every run but rarely on any one pooled connection, so
psycopg's default (prepared from a text's sixth run on a connection) left most of them
parsed and planned at every call; they are prepared from their second."""


def parse_url(url: str) -> URL:
    """Parse and normalize to the psycopg 3 driver; raises ``ConfigurationError``."""
    try:
        parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    except Exception as exc:
        raise ConfigurationError(f"invalid database URL: {exc}") from exc
    if parsed.get_backend_name() != "postgresql":
        raise ConfigurationError(
            f"dbos-agents needs PostgreSQL, got a {parsed.get_backend_name()!r} URL"
        )
    if not parsed.database:
        raise ConfigurationError("the database URL names no database")
    return parsed.set(drivername="postgresql+psycopg")


def sqlalchemy_url(url: str) -> str:
    """The URL with the psycopg driver, password kept (for engines)."""
    return parse_url(url).render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """The URL as libpq reads it (for plain psycopg connections), password kept."""
    return parse_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def describe(url: str) -> str:
    """Host, port and database for messages, never the password."""
    p = parse_url(url)
    host = p.host or (p.query.get("host") if p.query else None) or "local socket"
    return f"{host}:{p.port or 5432}/{p.database}"


def create_sync_engine(
    url: str,
    *,
    pool_size: int = 5,
    max_overflow: int | None = None,
    connect_timeout: float = 5.0,
) -> sa.Engine:
    """A pinged, pooled engine; ``max_overflow`` defaults to twice ``pool_size``."""
    return sa.create_engine(
        sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=pool_size * 2 if max_overflow is None else max_overflow,
        pool_pre_ping=True,
        connect_args={"connect_timeout": max(1, int(connect_timeout)), **PREPARED},
    )


def _server_url(url: str) -> str:
    return parse_url(url).set(database="postgres").render_as_string(hide_password=False)


def _probe(url: str, connect_timeout: float) -> sa.Engine:
    return sa.create_engine(
        url,
        isolation_level="AUTOCOMMIT",
        poolclass=sa.pool.NullPool,
        connect_args={"connect_timeout": max(1, int(connect_timeout))},
    )


def _reason(exc: sa.exc.OperationalError) -> str:
    return str(exc.orig).strip().splitlines()[-1] if exc.orig else str(exc)


def ensure_database(url: str, *, connect_timeout: float = 5.0) -> None:
    """Fail fast when the server does not answer; create the database when it is missing.

    DBOS would otherwise retry its connection for a long while before giving up, and a
    user who typed the wrong host deserves an answer in seconds that names the host.
    """
    target = parse_url(url)
    engine = _probe(sqlalchemy_url(url), connect_timeout)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        return
    except sa.exc.OperationalError as exc:
        if "does not exist" not in str(exc):
            raise DatabaseUnavailableError(
                f"Postgres at {describe(url)} does not answer: {_reason(exc)}"
            ) from exc
    finally:
        engine.dispose()
    server = _probe(_server_url(url), connect_timeout)
    try:
        with server.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{target.database}"')
    except sa.exc.ProgrammingError as exc:
        if "already exists" not in str(exc):
            raise ConfigurationError(f"cannot create database {describe(url)}: {exc}") from exc
    except sa.exc.OperationalError as exc:
        raise DatabaseUnavailableError(
            f"Postgres at {describe(url)} does not answer: {_reason(exc)}"
        ) from exc
    finally:
        server.dispose()


def ping(engine: sa.Engine) -> None:
    """One ``SELECT 1``: raises the driver's error when the database does not answer."""
    with engine.connect() as conn:
        conn.execute(sa.text("SELECT 1"))
