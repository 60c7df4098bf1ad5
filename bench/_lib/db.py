"""The bench databases and the reads the scripts make of them. Each script recreates its own
database, because DBOS would recover an earlier run's leftover workflows and measure those
too."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
"""Where the bench databases are created when no URL is given."""

Connect = Callable[[sa.Engine], sa.Connection]
"""How a read gets its connection (``sa.Engine.connect``, or ``connect_retrying``)."""


def database_url(given: str | None, name: str, server: str = LOCAL_SERVER) -> str:
    """``given``, else the database ``name`` dropped and created again on ``server``."""
    from dbos_agents.testing import create_fresh_database

    return given or create_fresh_database(server, name)


def connect_retrying(engine: sa.Engine, seconds: float = 60) -> sa.Connection:
    """A connection, retried for up to ``seconds``: Postgres is shared with other
    benchmarks and may answer "too many clients" for a moment (max_connections)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return engine.connect()
        except sa.exc.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def rows(
    engine: sa.Engine, sql: str, connect: Connect = sa.Engine.connect, **params: Any
) -> Sequence[sa.Row[Any]]:
    """Every row of one read."""
    with connect(engine) as conn:
        return conn.execute(sa.text(sql), params).all()


def scalar(engine: sa.Engine, sql: str, connect: Connect = sa.Engine.connect, **params: Any) -> Any:
    """The one value of one read."""
    with connect(engine) as conn:
        return conn.execute(sa.text(sql), params).scalar_one()
