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

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg import pq
from psycopg.rows import namedtuple_row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from . import prepared

Stmt = tuple[str, Mapping[str, Any]]
"""SQL in SQLAlchemy's ``:name`` parameter style, and its parameters."""

Db = AsyncSession | AsyncConnection
"""A datasource transaction's session, or a plain connection in a step's own transaction."""

Driver = psycopg.AsyncConnection[Any]


@functools.lru_cache(maxsize=512)
def psycopg_sql(sql: str) -> str:
    """``:name`` -> ``%(name)s`` (``::`` casts and literal ``%`` are left meaning the same)."""
    return prepared.PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))


async def execute(db: Db, stmt: Stmt) -> sa.Result[Any]:
    """Run one statement through SQLAlchemy (the datasource transactions' path)."""
    sql, params = stmt
    return await db.execute(sa.text(sql), dict(params))


KEEP = 4
"""Autocommit connections kept checked out between uses, per engine, on the event loop
that runs the workflows (``keep_on``).

A checkout from SQLAlchemy's async pool and its return cost ~75 us of CPU (greenlet
switches, the isolation level set and reset, the pool's events), and a turn takes two or
three: a tenth of the event loop's time while 1,000 sessions recover. Kept ones are
handed out again with no such work (and their prepared statements with them); they stay
counted in the pool (checked out), which is why only a few are kept. ``close_idle``
returns them (``AgentRuntime.shutdown``)."""

_idle: dict[tuple[AsyncEngine, asyncio.AbstractEventLoop], list[tuple[AsyncConnection, Driver]]]
_idle = {}
_keeping: set[asyncio.AbstractEventLoop] = set()


def keep_on(loop: asyncio.AbstractEventLoop) -> None:
    """Keep connections released on ``loop`` (the worker's, from ``AgentRuntime.launch``);
    on any other loop they go back to the pool, which closes them properly however long
    that loop lives."""
    _keeping.add(loop)


def usable(raw: Driver) -> bool:
    """Open, in autocommit, with no transaction left: fit to hand out again."""
    return (
        not (raw.broken or raw.closed)
        and raw.autocommit
        and raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    )


async def checkout(engine: AsyncEngine) -> tuple[AsyncConnection, Driver]:
    """A pooled connection in autocommit and its psycopg driver; ``release`` returns both.
    Every statement commits as it returns; a transaction is an explicit ``BEGIN`` (or the
    driver's ``transaction()``), as in ``transaction`` below."""
    kept = _idle.get((engine, asyncio.get_running_loop()))
    while kept:
        conn, driver_conn = kept.pop()
        if usable(driver_conn):
            return conn, driver_conn
        await _close(conn, driver_conn)
    conn = await engine.connect()
    try:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        raw = (await conn.get_raw_connection()).driver_connection
    except BaseException:
        await conn.close()
        raise
    assert raw is not None
    return conn, raw


async def release(engine: AsyncEngine, conn: AsyncConnection, raw: Driver) -> None:
    """Return a connection from ``checkout``: kept for the next one when it is a healthy
    autocommit connection and fewer than ``KEEP`` are kept; otherwise to the pool (a
    broken one invalidated, so the pool never hands it out again)."""
    loop = asyncio.get_running_loop()
    if loop in _keeping and usable(raw):
        kept = _idle.setdefault((engine, loop), [])
        if len(kept) < KEEP:
            kept.append((conn, raw))
            return
    await _close(conn, raw)
    if raw.broken or raw.closed:  # the server went away: the kept ones went with it
        await close_idle(engine)


async def _close(conn: AsyncConnection, raw: Driver) -> None:
    try:
        if raw.broken or raw.closed:
            await conn.invalidate()
    finally:
        await conn.close()


async def close_idle(engine: AsyncEngine | None = None) -> int:
    """Return the connections kept on this event loop (of ``engine``; of every engine, and
    stop keeping any here, when None) to their pools; returns how many."""
    loop = asyncio.get_running_loop()
    if engine is None:
        _keeping.discard(loop)
    closed = 0
    for key in [k for k in _idle if k[1] is loop and (engine is None or k[0] is engine)]:
        for conn, raw in _idle.pop(key):
            with contextlib.suppress(Exception):
                await _close(conn, raw)
            closed += 1
    return closed


@asynccontextmanager
async def driver(engine: AsyncEngine) -> AsyncIterator[Driver]:
    """A pooled connection's psycopg driver, in autocommit (see ``checkout`` and
    ``release``)."""
    conn, raw = await checkout(engine)
    try:
        yield raw
    finally:
        await release(engine, conn, raw)


async def fetch(pg: Driver, stmt: Stmt) -> list[Any]:
    """One statement on the driver; its rows as named tuples (none for a write)."""
    sql, params = stmt
    async with pg.cursor(row_factory=namedtuple_row) as cur:
        await cur.execute(psycopg_sql(sql), params)
        return await cur.fetchall() if _returns_rows(cur) else []


def _returns_rows(cur: psycopg.AsyncCursor[Any] | psycopg.Cursor[Any]) -> bool:
    """``cur.description is not None`` (the statement returns rows, maybe none), without
    building a ``Column`` object per field for every statement read."""
    res = cur.pgresult
    return res is not None and (res.nfields > 0 or res.status == pq.ExecStatus.TUPLES_OK)


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
    return [await c.fetchall() if _returns_rows(c) else [] for c in cursors]


def pipelined(conn: sa.Connection, stmts: Sequence[Stmt]) -> list[list[Any]]:
    """Reads in one round trip on a sync SQLAlchemy connection's driver, in its transaction
    (the client's live-log read: three statements, one round trip). Rows as named tuples."""
    raw: psycopg.Connection[Any] = conn.connection.driver_connection  # type: ignore[assignment]
    cursors = []
    with raw.pipeline():
        for sql, params in stmts:
            cur = raw.cursor(row_factory=namedtuple_row)
            cur.execute(psycopg_sql(sql), params)
            cursors.append(cur)
    return [c.fetchall() if _returns_rows(c) else [] for c in cursors]


async def script(engine: AsyncEngine, stmts: Sequence[Stmt]) -> None:
    """Run writes as one script: sent as one multi-statement query, which Postgres runs
    as one implicit transaction: all or nothing, one round trip, and a fraction of a
    pipeline's CPU (no per-statement protocol messages). Statements that recur run as
    ``EXECUTE``s of plans Postgres keeps (``prepared``); a session that lost them
    (psycopg sends ``DEALLOCATE ALL`` with every ``ROLLBACK`` it runs) fails before
    anything ran and the script is sent again. For writes whose results nobody reads."""
    async with driver(engine) as pg:
        await script_rows(pg, stmts)


async def script_rows(pg: Driver, stmts: Sequence[Stmt]) -> list[list[Any]]:
    """``script`` on the caller's connection, returning the rows of each statement (none
    for one that returns none). Without a ``BEGIN`` the statements share one implicit
    transaction, committed when the last one returns; after a ``COMMIT`` in the list the
    rest run in another."""
    cur = psycopg.AsyncClientCursor(pg, row_factory=namedtuple_row)
    try:
        try:
            await cur.execute(await prepared.query(pg, cur, stmts, _bound(cur)))
        except psycopg.Error as exc:
            if not prepared.forget(pg, exc):
                raise
            await pg.rollback()  # out of a BEGIN the failed EXECUTE left aborted
            await cur.execute(await prepared.query(pg, cur, stmts, _bound(cur)))
        out = [await cur.fetchall() if _returns_rows(cur) else []]
        while cur.nextset():
            out.append(await cur.fetchall() if _returns_rows(cur) else [])
        return out
    finally:
        await cur.close()


def _bound(cur: psycopg.AsyncClientCursor[Any]) -> Callable[[str, Mapping[str, Any]], str]:
    return lambda sql, params: cur.mogrify(psycopg_sql(sql), params)


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
