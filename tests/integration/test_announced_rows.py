"""A batch's notification carries its rows (``deltas.insert_announced_stmt``): what a
listener hears is exactly what was inserted, a batch too long for a payload is announced
without its rows, a retried batch is not announced again; the client's feed hands heard
rows to its streams with no read, and waits for a read of the session when one is due, so
a stream never gets rows out of order."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psycopg
import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from dbos_agents import AgentClient, AgentRuntime, AsyncAgentClient
from dbos_agents.live import announce, deltas
from dbos_agents.live.deltas import Logged
from dbos_agents.store import pg

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

CHANNEL = "test_announced_rows"


async def _session(client: AgentClient) -> str:
    sid = await asyncio.to_thread(client.start, "streamer", "announced rows")
    await asyncio.to_thread(client.wait, sid, timeout=60)
    return sid


def _rows(run_seq: int, texts: list[str]) -> list[deltas.Delta]:
    return [
        deltas.Delta(run_seq=run_seq, turn=0, attempt=1, part=i, kind="text", text=t)
        for i, t in enumerate(texts)
    ]


async def _write_and_hear(url: str, stmts: list[pg.Stmt]) -> list[str]:
    """The payloads heard on CHANNEL while ``stmts`` run as one batch."""
    engine = create_async_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with psycopg.connect(url, autocommit=True) as listen:
            listen.execute(f"LISTEN {CHANNEL}")
            await pg.script(engine, stmts)
            return [n.payload for n in listen.notifies(timeout=1.0)]
    finally:
        await engine.dispose()


def _stored(url: str, sid: str, run_seq: int) -> list[Logged]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(
            "SELECT id, after_seq, run_seq, turn, attempt, part, kind, text, tool_index,"
            " tool_call_id, name FROM dbos_agents.deltas WHERE session_id = %s"
            " AND run_seq = %s ORDER BY id",
            (sid, run_seq),
        )
        return [Logged.of_shown(list(r)) for r in cur.fetchall()]


async def test_the_notification_carries_what_was_inserted_once(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    url = integration_database_url
    a, b, quiet = await _session(client), await _session(client), await _session(client)
    texts = ["it's", 'a "quote"', "back\\slash", "new\nline", "é 🦊 \u2028", '{"json": [1]}']
    batch = {a: _rows(97, texts), b: _rows(97, texts[:2]), quiet: _rows(97, ["x"])}
    heard = await _write_and_hear(
        url, [deltas.insert_announced_stmt(batch, CHANNEL, announce.DELTAS, [a, b])]
    )
    by_session = dict(deltas.parse_shown(p) for p in heard)
    assert set(by_session) == {announce.DELTAS + a, announce.DELTAS + b}  # not ``quiet``
    for sid in (a, b):
        assert by_session[announce.DELTAS + sid] == _stored(url, sid, 97)
    assert [d.text for d in by_session[announce.DELTAS + a] or []] == texts
    # retried after an unknown outcome: nothing inserted, nothing announced
    again = await _write_and_hear(
        url, [deltas.insert_announced_stmt(batch, CHANNEL, announce.DELTAS, [a, b])]
    )
    assert again == []


async def test_a_batch_too_long_for_a_payload_is_announced_without_its_rows(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    sid = await _session(client)
    long = ["x" * 3000, "y" * 3000, "z" * 3000]
    stmt = deltas.insert_announced_stmt({sid: _rows(98, long)}, CHANNEL, announce.DELTAS, [sid])
    heard = await _write_and_hear(integration_database_url, [stmt])
    assert heard == [announce.DELTAS + sid]
    assert deltas.parse_shown(heard[0]) == (announce.DELTAS + sid, None)
    assert len(_stored(integration_database_url, sid, 98)) == 3


def _payload(sid: str, rows: list[Logged]) -> str:
    shown = [
        [r.id, r.after_seq, r.run_seq, r.turn, r.attempt, r.part, r.kind, r.text, None, None, None]
        for r in rows
    ]
    return f"{announce.DELTAS}{sid} {json.dumps(shown)}"


def _logged(sid_rows: list[tuple[int, str]]) -> list[Logged]:
    return [
        Logged(id=i, after_seq=0, run_seq=1, turn=0, attempt=1, part=i, kind="text", text=t)
        for i, t in sid_rows
    ]


async def _taken(sub: Any) -> list[int]:
    await asyncio.wait_for(asyncio.shield(sub.ready), 5)
    return [r.id for r in sub.take(0)]


async def test_the_feed_hands_heard_rows_over_unless_a_read_is_due(
    aclient: AsyncAgentClient,
) -> None:
    feed = aclient.sync.watches.feed
    sub = feed.subscribe("ses_feed_order", 0)
    try:
        reads, handed = feed.reads, feed.handed
        feed.heard("+ses_feed_order", _payload("ses_feed_order", _logged([(10, "a"), (11, "b")])))
        assert await _taken(sub) == [10, 11]
        assert (feed.reads, feed.handed) == (reads, handed + 1)
        # rows already handed out are not handed again
        feed.heard("+ses_feed_order", _payload("ses_feed_order", _logged([(11, "b"), (12, "c")])))
        assert await _taken(sub) == [12]
        # a read is due (a notification without rows): later rows wait for it, which
        # reads the table (this session has no rows there: nothing after 12 comes)
        with feed._lock:
            feed._dirty.add("ses_feed_order")
        feed.heard("+ses_feed_order", _payload("ses_feed_order", _logged([(13, "d")])))
        assert feed.handed == handed + 2, "rows were handed over past a read that was due"
    finally:
        feed.unsubscribe(sub)
