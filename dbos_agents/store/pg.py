"""The hot path's statements on the psycopg driver, bypassing SQLAlchemy's execution layer.

A turn writes about ten rows. Through SQLAlchemy's async layer each statement costs a
greenlet switch, a compile-cache lookup and a result proxy (about 0.3 ms of CPU here); on
the driver, sent as one script (or pipelined where a result is read in between), the
whole turn is one round trip. The SQL itself stays in the module
that owns its table, written once in SQLAlchemy's ``:name`` style (a ``Stmt``), and runs
unchanged through either path. Connections still come from the datasource's pool, so the
connection bound in settings holds.
"""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.rows import namedtuple_row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

Stmt = tuple[str, Mapping[str, Any]]
"""SQL in SQLAlchemy's ``:name`` parameter style, and its parameters."""

Db = AsyncSession | AsyncConnection
"""A datasource transaction's session, or a plain connection in a step's own transaction."""

Driver = psycopg.AsyncConnection[Any]

_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")


@functools.lru_cache(maxsize=512)
def psycopg_sql(sql: str) -> str:
    """``:name`` -> ``%(name)s`` (``::`` casts and literal ``%`` are left meaning the same)."""
    return _PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))


async def execute(db: Db, stmt: Stmt) -> sa.Result[Any]:
    """Run one statement through SQLAlchemy (the datasource transactions' path)."""
    sql, params = stmt
    return await db.execute(sa.text(sql), dict(params))


async def checkout(engine: AsyncEngine, *, autocommit: bool) -> tuple[AsyncConnection, Driver]:
    """A pooled connection and its psycopg driver; close the first to return both."""
    conn = await engine.connect()
    try:
        if autocommit:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        raw = (await conn.get_raw_connection()).driver_connection
    except BaseException:
        await conn.close()
        raise
    assert raw is not None
    return conn, raw


@asynccontextmanager
async def driver(engine: AsyncEngine, *, autocommit: bool = False) -> AsyncIterator[Driver]:
    """A pooled connection's psycopg driver. A connection left broken by a failure is
    invalidated, so the pool never hands it out again."""
    conn, raw = await checkout(engine, autocommit=autocommit)
    try:
        yield raw
    except BaseException:
        if raw.broken or raw.closed:
            await conn.invalidate()
        raise
    finally:
        await conn.close()


async def fetch(pg: Driver, stmt: Stmt) -> list[Any]:
    """One statement on the driver; its rows as named tuples (none for a write)."""
    sql, params = stmt
    async with pg.cursor(row_factory=namedtuple_row) as cur:
        await cur.execute(psycopg_sql(sql), params)
        return await cur.fetchall() if cur.description is not None else []


async def fetch_all(pg: Driver, stmts: Sequence[Stmt]) -> list[list[Any]]:
    """Several statements in one round trip (pipelined); the rows of each. In autocommit
    they share one implicit transaction, so a statement that must commit before the
    next runs is wrapped in its own ``BEGIN`` / ``COMMIT``."""
    cursors = []
    async with pg.pipeline():
        for sql, params in stmts:
            cur = pg.cursor(row_factory=namedtuple_row)
            await cur.execute(psycopg_sql(sql), params)
            cursors.append(cur)
    return [await c.fetchall() if c.description is not None else [] for c in cursors]


async def script(engine: AsyncEngine, stmts: Sequence[Stmt]) -> None:
    """Run writes as one script: bound on the client (psycopg's quoting), sent as one
    multi-statement query, which Postgres runs as one implicit transaction: all or
    nothing, one round trip, and a fraction of a pipeline's CPU (no per-statement
    protocol messages). For writes whose results nobody reads."""
    async with driver(engine, autocommit=True) as pg:
        cur = psycopg.AsyncClientCursor(pg)
        try:
            text = ";\n".join(cur.mogrify(psycopg_sql(sql), params) for sql, params in stmts)
            await cur.execute(text)
        finally:
            await cur.close()


class Batch:
    """Statements queued on a pipeline: sent without waiting, run in order (each sees the
    ones before), their results read when first asked for (which waits once for all sent)."""

    def __init__(self, pg: Driver) -> None:
        self._pg = pg

    async def send(self, stmt: Stmt) -> psycopg.AsyncCursor[Any]:
        sql, params = stmt
        cur = self._pg.cursor(row_factory=namedtuple_row)
        await cur.execute(psycopg_sql(sql), params)
        return cur

    async def send_all(self, stmts: Iterable[Stmt]) -> None:
        for stmt in stmts:
            await self.send(stmt)


@asynccontextmanager
async def transaction(engine: AsyncEngine) -> AsyncIterator[Batch]:
    """One transaction, pipelined: BEGIN, every statement sent and COMMIT cost one round
    trip unless a result is read in between. The first failing statement raises (and the
    transaction rolls back)."""
    async with driver(engine) as pg, pg.pipeline(), pg.transaction():
        yield Batch(pg)
