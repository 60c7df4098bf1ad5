"""A script's recurring statements run as ``EXECUTE``s of plans the session keeps
(``store/prepared``): planned once per connection, prepared again when the session lost
them, and texts that vary never fill a connection with plans."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from dbos_agents import AgentRuntime
from dbos_agents._dbos import internals as _dbos_internals
from dbos_agents.loop.context import get_context
from dbos_agents.store import pg, prepared
from dbos_agents.store.db import create_sync_engine, sqlalchemy_url

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

TABLE = "prepared_script_probe"
INSERT = f"INSERT INTO {TABLE} (k, n, note) VALUES (:k, CAST(:n AS int) + 1, :k || '%')"


@pytest_asyncio.fixture(loop_scope="session")
async def engine(integration_database_url: str) -> AsyncIterator[AsyncEngine]:
    e = create_async_engine(sqlalchemy_url(integration_database_url), pool_size=1)
    pg.keep_on(asyncio.get_running_loop())
    async with pg.driver(e) as raw:
        await raw.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (k text, n int, note text)")
    yield e
    await pg.close_idle(e)
    await e.dispose()


async def _held(engine: AsyncEngine) -> dict[str, tuple[int, int]]:
    """This connection's prepared statements of ours: name -> (generic, custom) plans."""
    async with pg.driver(engine) as raw:
        rows = await pg.fetch(
            raw,
            (
                "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE name LIKE 'dbos_agents_%'",
                {},
            ),
        )
    return {r.name: (int(r.generic_plans), int(r.custom_plans)) for r in rows}


async def _count(engine: AsyncEngine, k: str) -> int:
    async with pg.driver(engine) as raw:
        ((n,),) = await pg.fetch(raw, (f"SELECT count(*) FROM {TABLE} WHERE k = :k", {"k": k}))
    return int(n)


async def test_a_recurring_statement_is_planned_once_and_runs_as_written(
    engine: AsyncEngine,
) -> None:
    k = uuid.uuid4().hex
    for i in range(8):
        await pg.script(engine, [(INSERT, {"k": k, "n": i})])
    name = prepared.named(INSERT).name
    generic, custom = (await _held(engine))[name]
    assert generic >= 1 and custom <= 5  # Postgres settled on one plan and keeps it
    async with pg.driver(engine) as raw:
        rows = await pg.fetch(
            raw, (f"SELECT n, note FROM {TABLE} WHERE k = :k ORDER BY n", {"k": k})
        )
    assert [(r.n, r.note) for r in rows] == [(i + 1, f"{k}%") for i in range(8)]


async def test_a_session_that_lost_its_statements_prepares_them_again(
    engine: AsyncEngine,
) -> None:
    k = uuid.uuid4().hex
    for i in range(3):
        await pg.script(engine, [(INSERT, {"k": k, "n": i})])
    assert prepared.named(INSERT).name in await _held(engine)
    async with pg.driver(engine) as raw:
        await raw.execute("DEALLOCATE ALL")
    await pg.script(engine, [(INSERT, {"k": k, "n": 9})])
    assert await _count(engine, k) == 4  # written once: the failed EXECUTE changed nothing
    assert prepared.named(INSERT).name in await _held(engine)


async def test_a_failing_statement_fails_the_whole_script(engine: AsyncEngine) -> None:
    k = uuid.uuid4().hex
    for _ in range(2):
        with pytest.raises(Exception, match="invalid input syntax"):
            await pg.script(
                engine, [(INSERT, {"k": k, "n": 1}), (INSERT, {"k": k, "n": "not a number"})]
            )
    assert await _count(engine, k) == 0


async def test_texts_that_vary_are_not_kept(engine: AsyncEngine) -> None:
    before = set(await _held(engine))
    k = uuid.uuid4().hex
    for i in range(prepared.PER_CONNECTION + 20):
        varying = f"INSERT INTO {TABLE} (k, n) VALUES (:k, {i})"
        await pg.script(engine, [(varying, {"k": k})])
    held = set(await _held(engine)) - before
    assert not held  # each text was seen once: none was prepared
    assert await _count(engine, k) == prepared.PER_CONNECTION + 20


async def test_a_transaction_whose_statements_were_lost_runs_once(engine: AsyncEngine) -> None:
    k = uuid.uuid4().hex
    script = [("BEGIN", {}), (INSERT, {"k": k, "n": 1}), ("COMMIT", {}), ("SELECT 7 AS x", {})]
    for _ in range(3):
        async with pg.driver(engine) as raw:
            await pg.script_rows(raw, script)
    async with pg.driver(engine) as raw:
        await raw.execute("DEALLOCATE ALL")
        out = await pg.script_rows(raw, script)
        assert out[-1][0].x == 7 and raw.autocommit
    assert await _count(engine, k) == 4


async def test_a_statement_postgres_cannot_prepare_runs_as_written(engine: AsyncEngine) -> None:
    untyped = "SELECT :x IS NULL AS v"  # PREPARE: could not determine data type of $1
    for x in (None, "a", None, "b"):
        async with pg.driver(engine) as raw:
            ((row,),) = await pg.script_rows(raw, [(untyped, {"x": x})])
            assert row.v is (x is None) and raw.autocommit
    assert prepared.named(untyped).name not in await _held(engine)


async def test_nothing_is_prepared_inside_a_callers_transaction(engine: AsyncEngine) -> None:
    k = uuid.uuid4().hex
    stmt = f"SELECT count(*) AS n FROM {TABLE} WHERE k = :k AND n > -1"
    async with pg.driver(engine) as raw:
        await raw.execute("BEGIN")
        for _ in range(3):
            ((row,),) = await pg.script_rows(raw, [(stmt, {"k": k})])
            assert row.n == 0
        await raw.execute("ROLLBACK")
    assert prepared.named(stmt).name not in await _held(engine)


# The statements DBOS and SQLAlchemy send through the driver (a workflow's claim and
# completion, a step's checkpoint): a connection plans each once, from its second run.

_PARAMETERIZED = "SELECT CAST(:x AS int) + 41 AS answer"
_DRIVER_PREPARED = (
    "SELECT count(*) FROM pg_prepared_statements"
    " WHERE name LIKE '\\_pg3\\_%' AND statement LIKE '%+ 41 AS answer%'"
)


def _prepared_after_two_runs(c: sa.Connection) -> int:
    """Run the parameterized statement twice on ``c``; how many driver-prepared copies of
    it the connection then holds."""
    for _ in range(2):
        assert c.execute(sa.text(_PARAMETERIZED), {"x": 1}).scalar_one() == 42
    return int(c.execute(sa.text(_DRIVER_PREPARED)).scalar_one())


async def test_the_system_databases_statements_are_prepared_from_their_second_run(
    runtime: AgentRuntime,
) -> None:
    def run_twice() -> int:
        with _dbos_internals._system_database().engine.connect() as c:
            return _prepared_after_two_runs(c)

    assert await asyncio.to_thread(run_twice) == 1


async def test_a_sync_engines_statements_are_prepared_from_their_second_run(
    integration_database_url: str,
) -> None:
    """The runtime's engine (a start's transaction) and the clients'."""

    def run_twice() -> int:
        engine = create_sync_engine(integration_database_url, pool_size=1)
        try:
            with engine.connect() as c:
                return _prepared_after_two_runs(c)
        finally:
            engine.dispose()

    assert await asyncio.to_thread(run_twice) == 1


async def test_the_datasources_statements_are_prepared_from_their_second_run(
    runtime: AgentRuntime,
) -> None:
    async with get_context().ledger.ds.engine.connect() as c:
        for _ in range(2):
            assert (await c.execute(sa.text(_PARAMETERIZED), {"x": 1})).scalar_one() == 42
        assert (await c.execute(sa.text(_DRIVER_PREPARED))).scalar_one() == 1
