"""A tool attempt's writes ride out a database outage (issue: survive routine operations,
item 6): the dispatch mark waits for Postgres to come back instead of failing the step, and
a result whose connection died mid-handler is still recorded once, under the call's lock.

Runs on a private cluster that the test stops and restarts (never the shared server).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from dbos_agents.results import ToolResult
from dbos_agents.store import calls
from dbos_agents.store.db import create_sync_engine, sqlalchemy_url
from dbos_agents.store.migrate import migrate
from dbos_agents.testing import PrivateCluster

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    with PrivateCluster() as pg:
        engine = create_sync_engine(pg.url)
        migrate(engine)
        engine.dispose()
        yield pg


@pytest_asyncio.fixture(loop_scope="session")
async def engine(cluster: PrivateCluster) -> AsyncIterator[AsyncEngine]:
    eng = create_async_engine(sqlalchemy_url(cluster.url), pool_pre_ping=True)
    yield eng
    await eng.dispose()


def _new_call(cluster: PrivateCluster) -> tuple[str, str]:
    sid, cid = f"s-{uuid.uuid4().hex[:8]}", "call_1_1"
    eng = create_sync_engine(cluster.url)
    with eng.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO dbos_agents.sessions (id, root_session_id, agent, status, workflow_id)"
                " VALUES (:s, :s, 'a', 'running', :s)"
            ),
            {"s": sid},
        )
        conn.execute(
            sa.text(
                "INSERT INTO dbos_agents.tool_calls (session_id, tool_call_id, run_seq, turn, tool,"
                " arguments, idempotency_key, safe_to_retry, status) VALUES (:s, :c, 1, 1, 't',"
                " '{}', 'k', false, 'requested')"
            ),
            {"s": sid, "c": cid},
        )
    eng.dispose()
    return sid, cid


def _status(cluster: PrivateCluster, sid: str) -> tuple[str, int, object]:
    eng = create_sync_engine(cluster.url)
    with eng.connect() as conn:
        row = conn.execute(
            sa.text(
                "SELECT status, attempts, result FROM dbos_agents.tool_calls WHERE session_id = :s"
            ),
            {"s": sid},
        ).one()
    eng.dispose()
    return row.status, row.attempts, row.result


async def test_the_dispatch_mark_waits_for_the_database(
    cluster: PrivateCluster, engine: AsyncEngine
) -> None:
    sid, cid = _new_call(cluster)
    await asyncio.to_thread(cluster.stop)
    entered = asyncio.Event()

    async def run() -> str:
        async with calls.attempt(engine, sid, cid, "tok-1", exclusive=True) as a:
            entered.set()
            assert (a.prior_status, a.number, a.recorded) == ("requested", 1, None)
            return str((await a.record(ToolResult.success(cid, "t", 1))).output)

    task = asyncio.create_task(run())
    await asyncio.sleep(1.0)
    assert not entered.is_set() and not task.done()  # still retrying: nothing failed
    await asyncio.to_thread(cluster.start)
    assert await asyncio.wait_for(task, 60) == "1"
    assert _status(cluster, sid)[:2] == ("completed", 1)


async def test_a_result_is_recorded_after_the_lock_connection_died(
    cluster: PrivateCluster, engine: AsyncEngine
) -> None:
    sid, cid = _new_call(cluster)
    async with calls.attempt(engine, sid, cid, "tok-2", exclusive=True) as a:
        assert a.prior_status == "requested"
        # The handler runs while Postgres crash-restarts under it (a failover).
        await asyncio.to_thread(cluster.restart, "immediate")
        stored = await a.record(ToolResult.success(cid, "t", "done"))
    assert stored.output == "done"
    assert _status(cluster, sid) == (
        "completed",
        1,
        ToolResult.success(cid, "t", "done").model_dump(mode="json"),
    )
    # The lock was released: another attempt gets in at once and sees the recorded result.
    async with calls.attempt(engine, sid, cid, "tok-3", exclusive=True) as again:
        assert again.recorded is not None and again.recorded.output == "done"


async def test_a_result_is_recorded_after_an_outage_during_the_handler(
    cluster: PrivateCluster, engine: AsyncEngine
) -> None:
    """Postgres is down for a while mid-handler and the first write attempts fail on the
    dead connection; the attempt reconnects (discarding the closed one) and records."""
    sid, cid = _new_call(cluster)
    async with calls.attempt(engine, sid, cid, "tok-4", exclusive=True) as a:
        await asyncio.to_thread(cluster.stop, "fast")

        async def back() -> None:
            await asyncio.sleep(1.0)
            await asyncio.to_thread(cluster.start)

        starter = asyncio.create_task(back())
        stored = await a.record(ToolResult.success(cid, "t", "after outage"))
        await starter
    assert stored.output == "after outage"
    assert _status(cluster, sid)[0] == "completed"
