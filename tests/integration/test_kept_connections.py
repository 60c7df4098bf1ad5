"""The hot path keeps a few autocommit connections checked out between uses (``store/pg``):
reused as they are, never kept broken, mid-transaction or beyond ``KEEP``, and returned to
the pool by ``close_idle``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest
import pytest_asyncio
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from dbos_agents.store import pg
from dbos_agents.store.db import libpq_url, sqlalchemy_url

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(loop_scope="session")
async def engine(integration_database_url: str) -> AsyncIterator[AsyncEngine]:
    e = create_async_engine(sqlalchemy_url(integration_database_url), pool_size=8)
    pg.keep_on(asyncio.get_running_loop())  # the runtime's loop: it keeps them already
    yield e
    await pg.close_idle(e)
    await e.dispose()


def _checked_out(e: AsyncEngine) -> int:
    return int(e.sync_engine.pool.checkedout())  # type: ignore[attr-defined]


async def _backend(raw: pg.Driver) -> int:
    ((pid,),) = await pg.fetch(raw, ("SELECT pg_backend_pid()", {}))
    return int(pid)


async def test_a_connection_is_kept_and_handed_out_again(engine: AsyncEngine) -> None:
    async with pg.driver(engine) as raw:
        first = await _backend(raw)
    assert _checked_out(engine) == 1  # kept, not returned
    async with pg.driver(engine) as raw:
        assert await _backend(raw) == first
        assert raw.autocommit
    await pg.script(engine, [("SELECT 1", {})])
    async with pg.transaction(engine) as batch:  # a transaction on a kept connection
        cur = await batch.send(("SELECT pg_backend_pid() AS pid", {}))
        ((pid,),) = await cur.fetchall()
    assert pid == first
    assert await pg.close_idle(engine) == 1
    assert _checked_out(engine) == 0


async def test_nothing_is_kept_on_another_loop(integration_database_url: str) -> None:
    def elsewhere() -> int:
        async def use() -> int:
            e = create_async_engine(sqlalchemy_url(integration_database_url))
            async with pg.driver(e) as raw:
                await _backend(raw)
            n = _checked_out(e)
            await e.dispose()
            return n

        return asyncio.run(use())

    assert await asyncio.to_thread(elsewhere) == 0


async def test_at_most_keep_are_kept(engine: AsyncEngine) -> None:
    leases = [await pg.checkout(engine) for _ in range(pg.KEEP + 2)]
    for conn, raw in leases:
        await pg.release(engine, conn, raw)
    assert _checked_out(engine) == pg.KEEP
    assert await pg.close_idle(engine) == pg.KEEP


async def test_a_broken_or_busy_connection_is_not_kept(
    engine: AsyncEngine, integration_database_url: str
) -> None:
    conn, raw = await pg.checkout(engine)
    await raw.execute("BEGIN")  # left inside a transaction: not reusable as it is
    await pg.release(engine, conn, raw)
    assert _checked_out(engine) == 0
    leases = [await pg.checkout(engine) for _ in range(3)]
    victims = [await _backend(raw) for _, raw in leases]
    for conn, raw in leases:
        await pg.release(engine, conn, raw)
    assert _checked_out(engine) == 3
    with psycopg.connect(libpq_url(integration_database_url), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (victims,))
    await asyncio.sleep(0.2)
    # The kept connections died with their backends (as after a failover): the first use
    # fails (as a pooled one without a ping does), and all of them are dropped at once, so
    # the retry that follows does not meet the next dead one.
    with pytest.raises(psycopg.OperationalError):
        async with pg.driver(engine) as raw:
            await _backend(raw)
    assert _checked_out(engine) == 0
    async with pg.driver(engine) as raw:
        assert await _backend(raw) not in victims
