"""Live-stream retention (``AgentClient.reap_deltas``, the worker's reaping): the pieces of
runs that ended go once older than the window, their messages stay and a reader from the
start gets them whole; a run still streaming keeps its pieces however old; young pieces
stay; the admin client alone may reap."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
import sqlalchemy as sa

from dbos_agents import AgentClient, AgentRuntime, MessageEvent
from dbos_agents.errors import AccessDeniedError
from dbos_agents.live import deltas

from .streaming_model import LONG_REPLY

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _count(url: str, sid: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM dbos_agents.deltas WHERE session_id = %s", (sid,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def _age(url: str, *sids: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE dbos_agents.deltas SET created_at = now() - interval '2 days'"
            " WHERE session_id = ANY(%s)",
            (list(sids),),
        )


async def test_ended_runs_lose_their_old_pieces_and_keep_their_messages(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    url = integration_database_url
    old, young = [await asyncio.to_thread(client.start, "streamer", "tell me") for _ in range(2)]
    for sid in (old, young):
        await asyncio.to_thread(client.wait, sid, timeout=60)
    live = await runtime.start("endless_streamer", "stream on while the reaper runs")
    for _ in range(200):  # until the running run has pieces
        if _count(url, live.session_id):
            break
        await asyncio.sleep(0.05)
    try:
        _age(url, old, live.session_id)
        had = _count(url, old)
        assert had > 10 and _count(url, young) > 10
        removed = await asyncio.to_thread(client.reap_deltas, 3600)
        assert removed >= had  # other tests' ended runs may go too
        assert _count(url, old) == 0
        assert _count(url, young) > 10  # younger than the window
        assert _count(url, live.session_id) > 0  # still streaming: kept, however old
        batch = client.read_events(old)
        (reply,) = [
            e for e in batch.events if isinstance(e, MessageEvent) and e.role == "assistant"
        ]
        assert reply.content == LONG_REPLY and batch.status.status == "completed"
        # In batches of 3, the walk reaches every old row of an ended run (this process's
        # database: its earlier tests' rows too), passing over the running run's.
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE dbos_agents.deltas SET created_at = now() - interval '2 days'")
        engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
        try:
            assert await asyncio.to_thread(deltas.reap, engine, 3600, 3) >= 10
        finally:
            engine.dispose()
        with psycopg.connect(url, autocommit=True) as conn:
            left = conn.execute(
                "SELECT DISTINCT d.session_id, s.status = 'running' AND s.run_seq = d.run_seq"
                " FROM dbos_agents.deltas d JOIN dbos_agents.sessions s ON s.id = d.session_id"
                " WHERE d.created_at < now() - interval '1 day'"
            ).fetchall()
        assert (live.session_id, True) in left
        assert all(running for _, running in left), left  # only running runs' rows are left
    finally:
        await asyncio.to_thread(client.interrupt, live.session_id)
        await live.result()


async def test_a_tenants_client_may_not_reap(client: AgentClient) -> None:
    with pytest.raises(AccessDeniedError):
        client.for_tenant("t1").reap_deltas(0)
