"""The delta log as the worker writes it: a streamed reply's pieces are durable, their text
is the turn's message, and a cut stream continues from what was shown (never repeating it)
or withdraws what cannot be final. What readers make of it: tests of the event stream."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from psycopg.rows import namedtuple_row

from dbos_agents import AgentClient, AgentRuntime

from ..delta_log import delta_rows
from .streaming_model import ASKED, LONG_REPLY

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _assistant_texts(client: AgentClient, sid: str) -> list[str | None]:
    return [m.content for m in client.history(sid) if m.role == "assistant"]


def _check_order(rows: list[Any]) -> None:
    """Parts of one attempt in order, each once; attempts in order."""
    seen = [(r.run_seq, r.turn, r.attempt, r.part) for r in rows]
    assert len(seen) == len(set(seen)), "a delta was written twice"
    assert seen == sorted(seen)


async def test_a_streamed_reply_is_its_deltas(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    sid = await asyncio.to_thread(client.start, "streamer", "tell me")
    assert (await asyncio.to_thread(client.wait, sid, timeout=60)).final_output == LONG_REPLY
    rows = delta_rows(integration_database_url, sid)
    _check_order(rows)
    assert {r.kind for r in rows} == {"text"} and {r.attempt for r in rows} == {1}
    assert len(rows) > 10, "a reply of this length comes in pieces"
    assert "".join(r.text for r in rows) == LONG_REPLY == _assistant_texts(client, sid)[0]
    # Every delta comes before the message that ends its turn (the user message is seq 1).
    assert {r.after_seq for r in rows} == {1}


async def test_a_cut_reply_continues_from_what_was_shown(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    sid = await asyncio.to_thread(client.start, "stream_cut", "cut me")
    assert (await asyncio.to_thread(client.wait, sid, timeout=60)).final_output == LONG_REPLY
    rows = delta_rows(integration_database_url, sid)
    _check_order(rows)
    assert {r.kind for r in rows} == {"text"}, "nothing to withdraw: text continues"
    first = "".join(r.text for r in rows if r.attempt == 1)
    second = "".join(r.text for r in rows if r.attempt == 2)
    assert first and second and first + second == LONG_REPLY
    assert _assistant_texts(client, sid) == [LONG_REPLY]
    asked = [r for r in ASKED if r.agent == "stream_cut" and r.messages[-1].content == "cut me"]
    assert [r.continue_from for r in asked] == [None, first]


async def test_a_tool_call_cut_mid_arguments_is_withdrawn_and_comes_whole(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    sid = await asyncio.to_thread(client.start, "stream_cut_tool", "77")
    info = await asyncio.to_thread(client.wait, sid, timeout=60)
    assert info.status == "completed" and "stream-77" in (info.final_output or "")
    rows = [r for r in delta_rows(integration_database_url, sid) if r.turn == 1]
    _check_order(rows)
    cut = [r for r in rows if r.attempt == 1]
    assert [r.kind for r in cut if r.kind != "text"] == ["tool_call", "tool_call"]
    again = [r for r in rows if r.attempt == 2]
    assert again[0].kind == "retract" and again[0].tool_index == 0
    assert not [r for r in again if r.kind == "text"], "the text was shown: not repeated"
    calls = client.tool_calls(sid)
    assert [c.tool for c in calls] == ["get_order"], "the call ran once, whole"
    text = "".join(r.text for r in rows if r.kind == "text")
    assert _assistant_texts(client, sid)[0] == text == "Let me look that order up for you. "
    # The tool's result is committed before the reply that reads it streams.
    tool_seq = next(m.seq for m in client.history(sid) if m.role == "tool")
    answer = [r for r in delta_rows(integration_database_url, sid) if r.turn == 2]
    assert answer and min(r.after_seq for r in answer) >= tool_seq


async def test_a_reply_that_fails_for_good_is_withdrawn(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    sid = await asyncio.to_thread(client.start, "stream_fail", "fail me")
    info = await asyncio.to_thread(client.wait, sid, timeout=60)
    assert info.status == "failed"
    rows = delta_rows(integration_database_url, sid)
    _check_order(rows)
    assert rows[0].kind == "text" and rows[-1].kind == "retract"
    assert rows[-1].tool_index is None
    assert _assistant_texts(client, sid) == []


def _xmins(url: str, sid: str) -> tuple[dict[str, list[str]], list[Any]]:
    """The writing transaction of each message (by role) and of each delta, in order."""
    with (
        psycopg.connect(url, autocommit=True) as conn,
        conn.cursor(row_factory=namedtuple_row) as cur,
    ):
        cur.execute(
            "SELECT role, xmin::text AS x FROM dbos_agents.messages WHERE session_id = %s"
            " ORDER BY seq",
            (sid,),
        )
        by_role: dict[str, list[str]] = {}
        for r in cur.fetchall():
            by_role.setdefault(r.role, []).append(r.x)
        cur.execute(
            "SELECT turn, after_seq, xmin::text AS x FROM dbos_agents.deltas"
            " WHERE session_id = %s ORDER BY id",
            (sid,),
        )
        return by_role, cur.fetchall()


async def test_a_tool_result_costs_a_streamed_turn_no_commit_of_its_own(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    """Readers see a tool's result before the reply that reads it, and it is written with
    that reply's first batch (a model that writes slowly) or its record (one that is done
    before the first batch): never in a transaction of its own."""
    for agent, slow in (("stream_cut_tool", False), ("slow_tool_streamer", True)):
        sid = await asyncio.to_thread(client.start, agent, "88")
        info = await asyncio.to_thread(client.wait, sid, timeout=60)
        assert info.status == "completed", info
        tool_seq = next(m.seq for m in client.history(sid) if m.role == "tool")
        by_role, rows = _xmins(integration_database_url, sid)
        answer = [r for r in rows if r.turn == 2]
        assert answer and min(r.after_seq for r in answer) >= tool_seq
        (tool_x,) = by_role["tool"]
        # With the reply's first batch, or (when the reply was done before one was
        # written) with its record; never on its own.
        assert tool_x in (answer[0].x, by_role["assistant"][1])
        if slow:
            assert tool_x == answer[0].x, "a reply written slowly: its first batch"


async def test_the_end_of_a_reply_watched_live_is_shown_by_a_batch(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    """A reply that readers watched for longer than a batch interval: its last pieces go
    out in a batch as its other pieces did, not with the turn's record (which would hold
    them until the run's end is announced); a reply done within one interval still goes
    whole with its record."""
    slow = await asyncio.to_thread(client.start, "slow_streamer", "watched")
    fast = await asyncio.to_thread(client.start, "streamer", "at once")
    for sid in (slow, fast):
        assert (await asyncio.to_thread(client.wait, sid, timeout=60)).status == "completed"
    by_role, rows = _xmins(integration_database_url, slow)
    assert len({r.x for r in rows}) > 1, "a reply written slowly comes in several batches"
    assert rows[-1].x not in by_role["assistant"], "its last piece waited for the record"
    by_role, rows = _xmins(integration_database_url, fast)
    assert {r.x for r in rows} == set(by_role["assistant"]), "a reply done at once"


async def test_a_fenced_stage_is_dropped_and_its_deltas_still_shown(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    """Statements staged for a run that is no longer running fail their batch: they are
    dropped (the turn is fenced too), and the deltas they were to precede are shown anyway."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from dbos_agents.live import deltas
    from dbos_agents.live.announce import Announcer
    from dbos_agents.store import sessions
    from dbos_agents.store.db import sqlalchemy_url

    sid = await asyncio.to_thread(client.start, "chat", "done soon")
    await asyncio.to_thread(client.wait, sid, timeout=60)
    engine = create_async_engine(sqlalchemy_url(integration_database_url))
    announcer = Announcer(engine, 0.01, fenced=sessions.is_fence)
    try:
        announcer.stage(sid, [sessions.lock_running_stmt(sid, 1)])  # run 1 has ended
        row = deltas.Delta(run_seq=1, turn=99, attempt=1, part=0, kind="text", text="late")
        announcer.append(sid, [row])
        for _ in range(100):
            await asyncio.sleep(0.05)
            if [r for r in delta_rows(integration_database_url, sid) if r.turn == 99]:
                break
        shown = [r.text for r in delta_rows(integration_database_url, sid) if r.turn == 99]
        assert shown == ["late"]
        assert not announcer.take_staged(sid)
    finally:
        await announcer.close()
        await engine.dispose()


async def test_a_batch_of_many_sessions_keeps_each_rows_text_and_order(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    """The batch statement (rows as one JSON array) keeps every field, any text, and the
    order, per session, across sessions."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from dbos_agents.live import deltas
    from dbos_agents.store import pg

    sids = [await asyncio.to_thread(client.start, "streamer", "tell me") for _ in range(2)]
    for sid in sids:
        await asyncio.to_thread(client.wait, sid, timeout=60)
    texts = ["it's", 'a "quote"', "back\\slash", "new\nline", "é 🦊 \u2028", '{"json": [1]}', ""]
    rows = [deltas.Delta(run_seq=99, turn=0, attempt=1, part=i, kind="text", text=t)
            for i, t in enumerate(texts)]  # fmt: skip
    rows += [
        deltas.Delta(run_seq=99, turn=0, attempt=1, part=len(texts), kind="tool_call",
                     text='{"q', tool_index=0, tool_call_id="c'1", name="ask"),
        deltas.Delta(run_seq=99, turn=0, attempt=2, part=0, kind="retract", tool_index=None),
    ]  # fmt: skip
    engine = create_async_engine(
        integration_database_url.replace("postgresql://", "postgresql+psycopg://")
    )
    try:
        await pg.script(engine, [deltas.insert_many_stmt({sids[0]: rows, sids[1]: rows[:2]})])
        # written again (a batch retried after an unknown outcome): nothing changes
        await pg.script(engine, [deltas.insert_many_stmt({sids[0]: rows})])
    finally:
        await engine.dispose()
    for sid, want in ((sids[0], rows), (sids[1], rows[:2])):
        got = [r for r in delta_rows(integration_database_url, sid) if r.run_seq == 99]
        fields = ("run_seq", "turn", "attempt", "part", "kind", "text", "tool_index",
                  "tool_call_id", "name")  # fmt: skip
        assert [tuple(getattr(r, f) for f in fields) for r in got] == [
            tuple(getattr(r, f) for f in fields) for r in want
        ]
        assert {r.after_seq for r in got} == {2}  # after the user message and the reply


async def test_batches_are_at_most_one_per_interval(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    """A stream of pieces costs at most one batch per interval (counted from a batch's
    start) plus the first, however fast the pieces come; none is lost or repeated."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from dbos_agents.live import deltas
    from dbos_agents.live.announce import Announcer
    from dbos_agents.store.db import sqlalchemy_url

    sid = await asyncio.to_thread(client.start, "chat", "batched")
    await asyncio.to_thread(client.wait, sid, timeout=60)
    engine = create_async_engine(sqlalchemy_url(integration_database_url))
    interval = 0.2
    announcer = Announcer(engine, interval)
    loop = asyncio.get_running_loop()
    try:
        started = loop.time()
        for i in range(40):
            row = deltas.Delta(run_seq=1, turn=77, attempt=1, part=i, kind="text", text=f"{i};")
            announcer.append(sid, [row])
            await asyncio.sleep(0.01)
        elapsed = loop.time() - started
        await announcer.close()
        assert 1 <= announcer.flushes <= int(elapsed / interval) + 2
    finally:
        await announcer.close()
        await engine.dispose()
    shown = [r.text for r in delta_rows(integration_database_url, sid) if r.turn == 77]
    assert shown == [f"{i};" for i in range(40)]


def _fake_workflow(url: str, token: str) -> str:
    """A PENDING workflow row owned by ``token`` (no executor: no recovery takes it)."""
    import uuid

    wf = f"fence-{uuid.uuid4().hex}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO dbos.workflow_status (workflow_uuid, status, name, owner_xid)"
            " VALUES (%s, 'PENDING', 'fence_test', %s)",
            (wf, token),
        )
    return wf


def _claim(url: str, wf: str, token: str | None) -> None:
    """What an adoption does to the row: a re-enqueue (no owner), then another claim."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE dbos.workflow_status SET owner_xid = %s WHERE workflow_uuid = %s", (token, wf)
        )


async def test_a_stale_writers_pieces_are_refused_by_postgres(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    """Pieces of an execution that no longer owns its workflow (adopted while it still
    streams) are refused: the batch leaves them out (another session's pieces in the same
    batch are written), the announcer drops them and the writer's later ones, and tells
    its stream; a record carrying them fails with ``STALE_SQLSTATE`` and writes nothing."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from dbos_agents.live import deltas
    from dbos_agents.live.announce import Announcer
    from dbos_agents.store import fence, pg
    from dbos_agents.store.db import sqlalchemy_url

    url = integration_database_url
    sids = [await asyncio.to_thread(client.start, "chat", f"fence {i}") for i in range(2)]
    for sid in sids:
        await asyncio.to_thread(client.wait, sid, timeout=60)
    wf = _fake_workflow(url, "tok-a")
    a = fence.Writer(workflow_id=wf, token="tok-a", system_schema='"dbos"')
    b = fence.Writer(workflow_id=wf, token="tok-b", system_schema='"dbos"')

    def piece(part: int, text: str, writer: fence.Writer | None) -> deltas.Delta:
        return deltas.Delta(
            run_seq=1, turn=55, attempt=1, part=part, kind="text", text=text, writer=writer
        )

    def shown(sid: str) -> list[str]:
        return [r.text for r in delta_rows(url, sid) if r.turn == 55]

    engine = create_async_engine(sqlalchemy_url(url))
    announcer = Announcer(engine, 0.01)
    try:
        refusal = announcer.refusal(a)
        announcer.append(sids[0], [piece(0, "owned;", a)])
        await announcer.written(sids[0])
        assert shown(sids[0]) == ["owned;"] and not refusal.done()
        _claim(url, wf, None)  # re-enqueued by an adopter
        _claim(url, wf, "tok-b")  # and claimed: this execution is stale now
        announcer.append(sids[0], [piece(1, "stale;", a)])
        announcer.append(sids[1], [piece(0, "other;", None)])
        await asyncio.wait_for(refusal, 10)
        announcer.append(sids[0], [piece(2, "later;", a)])  # dropped: the writer is refused
        await announcer.written(sids[0])
        await announcer.written(sids[1])
        assert announcer.refused(a) and not announcer.refused(b)
        assert shown(sids[0]) == ["owned;"] and shown(sids[1]) == ["other;"]
        assert await announcer.settle(sids[0]) == []
        # A record: its rows checked even when written before, and it fails as a whole.
        with pytest.raises(psycopg.Error) as caught:
            await pg.script(engine, [deltas.insert_stmt(sids[0], [piece(0, "owned;", a)])])
        assert fence.is_stale(caught.value)
        await pg.script(engine, [deltas.insert_stmt(sids[0], [piece(0, "owned;", b)])])
        await pg.script(engine, [deltas.insert_stmt(sids[0], [piece(1, "new owner;", b)])])
        assert shown(sids[0]) == ["owned;", "new owner;"]
    finally:
        announcer.release(a)
        await announcer.close()
        await engine.dispose()


async def test_the_fence_serializes_with_an_ownership_change_in_flight(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    """A batch that checks its writer while an adopter's claim is uncommitted waits for it,
    then sees the new owner and is refused: no piece of the old owner commits after the
    claim, so the adopter's read of the log after its claim has every piece it will show."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from dbos_agents.live import deltas
    from dbos_agents.store import fence, pg
    from dbos_agents.store.db import sqlalchemy_url

    url = integration_database_url
    sid = await asyncio.to_thread(client.start, "chat", "fence race")
    await asyncio.to_thread(client.wait, sid, timeout=60)
    wf = _fake_workflow(url, "tok-a")
    a = fence.Writer(workflow_id=wf, token="tok-a", system_schema='"dbos"')
    row = deltas.Delta(run_seq=1, turn=66, attempt=1, part=0, kind="text", text="x", writer=a)
    engine = create_async_engine(sqlalchemy_url(url))
    claim = psycopg.connect(url)  # a transaction: the claim, not committed yet
    try:
        claim.execute(
            "UPDATE dbos.workflow_status SET owner_xid = 'tok-b' WHERE workflow_uuid = %s", (wf,)
        )
        stmt = deltas.insert_announced_stmt({sid: [row]}, "fence_test", "+", [sid])

        async def batch() -> list[Any]:
            async with pg.driver(engine) as conn:
                return await pg.script_rows(conn, [stmt])

        task = asyncio.ensure_future(batch())
        await asyncio.sleep(0.5)
        assert not task.done(), "the batch waits for the claim in flight"
        claim.commit()
        ((result,),) = await asyncio.wait_for(task, 10)
        assert result.refused == [sid]
        assert not [r for r in delta_rows(url, sid) if r.turn == 66]
    finally:
        claim.close()
        await engine.dispose()
