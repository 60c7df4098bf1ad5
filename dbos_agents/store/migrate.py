"""Versioned SQL migrations for the ``dbos_agents`` schema.

Files ``migrations/NNNN_name.sql`` apply in order, each in its own transaction, recorded in
``dbos_agents.schema_migrations``. A transaction-scoped advisory lock serializes workers that
launch at once; the loser waits, then finds nothing left to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import sqlalchemy as sa

from .schema import SCHEMA as SCHEMA

_LOCK_KEY = 0x64626F7361670001  # "dbosag" + 1: fits a signed bigint
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations() -> list[Migration]:
    """All migrations shipped with the package, in version order."""
    found = []
    for entry in resources.files("dbos_agents.store").joinpath("migrations").iterdir():
        m = _FILE.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration versions must be 1..n without gaps, found {versions}")
    return found


def migrate(engine: sa.Engine, *, upto: int | None = None) -> list[int]:
    """Apply pending migrations (those up to version ``upto`` when given: the upgrade
    tests build every earlier schema this way); returns the versions applied by this call."""
    applied: list[int] = []
    for mig in load_migrations():
        if upto is not None and mig.version > upto:
            break
        with engine.begin() as conn:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
            conn.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"))
            conn.execute(
                sa.text(
                    f"CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_migrations ("
                    "version integer PRIMARY KEY, name text NOT NULL, "
                    "applied_at timestamptz NOT NULL DEFAULT now())"
                )
            )
            done = conn.execute(
                sa.text(f"SELECT 1 FROM {SCHEMA}.schema_migrations WHERE version = :v"),
                {"v": mig.version},
            ).first()
            if done:
                continue
            conn.exec_driver_sql(mig.sql)
            conn.execute(
                sa.text(f"INSERT INTO {SCHEMA}.schema_migrations (version, name) VALUES (:v, :n)"),
                {"v": mig.version, "n": mig.name},
            )
            applied.append(mig.version)
    return applied


def current_version(engine: sa.Engine) -> int:
    """The highest applied migration, 0 when the schema is absent."""
    with engine.connect() as conn:
        exists = conn.execute(
            sa.text("SELECT to_regclass(:t)"), {"t": f"{SCHEMA}.schema_migrations"}
        ).scalar()
        if exists is None:
            return 0
        return int(
            conn.execute(
                sa.text(f"SELECT coalesce(max(version), 0) FROM {SCHEMA}.schema_migrations")
            ).scalar_one()
        )


def prepare_database(
    url: str, *, connect_timeout: float = 5.0, system_schema: str = "dbos"
) -> None:
    """Everything a process needs before touching the database, safe to run concurrently:
    the database exists (fail fast otherwise), DBOS's system schema and ours are current.

    Clients and the CLI call this too, so a client that starts a session before any worker
    has launched finds the tables it writes to.
    """
    from dbos import DBOS

    from .db import create_sync_engine, ensure_database, sqlalchemy_url

    ensure_database(url, connect_timeout=connect_timeout)
    DBOS.migrate(sqlalchemy_url(url), schema=system_schema)
    engine = create_sync_engine(url, pool_size=1, connect_timeout=connect_timeout)
    try:
        migrate(engine)
    finally:
        engine.dispose()
