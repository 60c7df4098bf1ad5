"""A tool's progress notes on the live log, against the real runtime: written with
``deltas.progress_stmt`` (as a durable tool's ``ctx.progress`` will) while a run waits on
its tool call, they stream between the call's message and the later messages, each with a
cursor that resumes past it, and a note written twice is shown once."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from dbos_agents import (
    AgentClient,
    AgentRuntime,
    AsyncAgentClient,
    MessageEvent,
    PendingEvent,
    SessionEvent,
    StatusEvent,
)
from dbos_agents.events import ProgressEvent, StateEvent
from dbos_agents.live import deltas
from tests.http.conftest import report_progress as report

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _progress(events: list[SessionEvent]) -> list[tuple[int, str, float | None]]:
    return [(e.part, e.note, e.fraction) for e in events if isinstance(e, ProgressEvent)]


def _shape(events: list[SessionEvent]) -> list[str]:
    """Kinds in order, the reply's pieces left out; a message as its role."""
    out: list[str] = []
    for e in events:
        if isinstance(e, MessageEvent):
            out.append(e.role)
        elif e.event != "delta":
            out.append(e.event)
    return out


async def test_notes_stream_between_the_call_and_its_result_once_each(
    runtime: AgentRuntime, client: AgentClient, aclient: AsyncAgentClient
) -> None:
    sid = await aclient.start("asker", "progress, please")
    live: list[SessionEvent] = []
    waiting = asyncio.Event()

    async def follow() -> None:
        async for e in aclient.stream(sid, timeout=60, poll=30):
            live.append(e)
            if isinstance(e, PendingEvent):
                waiting.set()
            if isinstance(e, StatusEvent):
                return

    following = asyncio.ensure_future(follow())
    await asyncio.wait_for(waiting.wait(), 60)
    (wait,) = [e for e in live if isinstance(e, PendingEvent)]
    call_id = wait.tool_call_id
    await asyncio.to_thread(report, client, sid, call_id, 1, 0.5)
    await asyncio.to_thread(report, client, sid, call_id, 2, deltas_only=True)
    await asyncio.to_thread(report, client, sid, call_id, 1, 0.5)  # a re-executed body
    for _ in range(200):  # well within ``poll``
        if len(_progress(live)) >= 2:
            break
        await asyncio.sleep(0.05)
    notes = [(1, "step 1", 0.5), (2, "step 2", None)]
    assert _progress(live) == notes  # shown live (woken long before ``poll``), once each
    await aclient.submit_tool_result(sid, call_id, result={"ok": True})
    await asyncio.wait_for(following, 60)

    shape = ["user", "assistant", "progress", "progress", "tool", "assistant"]
    assert _progress(live) == notes
    assert _shape(live) == [*shape[:2], "pending", *shape[2:], "status"]
    first = next(e for e in live if isinstance(e, ProgressEvent))
    assert (first.run, first.turn, first.tool_call_id, first.tool) == (1, 1, call_id, "confirm")

    # The whole log read again, by either client: the same notes in the same places (the
    # wait, settled now, is not read again).
    everything = list(client.stream(sid, follow=False))
    assert [e async for e in aclient.stream(sid, follow=False)] == everything
    log = everything[:-1]
    assert _shape(log) == shape and _progress(log) == notes
    assert [e for e in log if isinstance(e, ProgressEvent)] == [
        e for e in live if isinstance(e, ProgressEvent)
    ]
    # Resuming from any event's cursor (a note's included) yields exactly the rest.
    for i, e in enumerate(log):
        assert not isinstance(e, PendingEvent | StateEvent | StatusEvent)
        rest = list(client.stream(sid, e.cursor, follow=False))[:-1]
        assert rest == log[i + 1 :], f"resumed after {e.cursor}"
    after_first = [e async for e in aclient.stream(sid, first.cursor, follow=False)]
    assert _progress(after_first) == notes[1:]
    # Written once: the second report of note 1 changed nothing.
    with client.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT part FROM dbos_agents.deltas"
                " WHERE session_id = :s AND kind = 'progress' ORDER BY id"
            ),
            {"s": sid},
        ).all()
    assert [r.part for r in rows] == [1, 2]


async def test_follow_prints_the_notes(
    runtime: AgentRuntime,
    client: AgentClient,
    aclient: AsyncAgentClient,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dbos_agents.cli.follow import follow

    sid = await aclient.start("asker", "print my progress")
    call_id = ""
    async for e in aclient.stream(sid, timeout=60, poll=0.5):
        if isinstance(e, PendingEvent):
            call_id = e.tool_call_id
            break
    report(client, sid, call_id, 1, 0.25)
    await aclient.submit_tool_result(sid, call_id, result={"ok": True})
    assert await asyncio.to_thread(follow, client, sid, poll=0.5) == "completed"
    printed = capsys.readouterr().out
    assert printed.count("step 1") == 1
    assert f"  .. confirm [{call_id}] 25% step 1\n" in printed


async def test_notes_of_tools_reporting_at_once_get_ids_in_commit_order(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """A reader resuming after a delta id misses none: a note waits for another note of
    the session still uncommitted, so the later commit has the higher id."""
    sid = await asyncio.to_thread(client.start, "chat", "two tools at once")
    await asyncio.to_thread(client.wait, sid, timeout=60)

    def insert(conn: sa.Connection, call_id: str) -> None:
        sql, params = deltas.progress_stmt(sid, 1, 1, call_id, "crawl", 1, call_id, None)
        conn.execute(sa.text(sql), params)

    with client.engine.connect() as first:
        first.begin()
        # The first writer holds the lock (as its insert would) before it takes an id.
        lock = "SELECT pg_advisory_xact_lock(:k)"
        first.execute(sa.text(lock), {"k": deltas.note_lock_key(sid)})

        def second() -> None:
            with client.engine.begin() as conn:
                insert(conn, "call_b")

        other = asyncio.ensure_future(asyncio.to_thread(second))
        await asyncio.sleep(0.3)
        assert not other.done(), "the second note did not wait for the first"
        insert(first, "call_a")
        first.commit()
    await asyncio.wait_for(other, 10)
    # The second took its id after the first committed: ids in commit order.
    notes = [e for e in client.stream(sid, follow=False) if isinstance(e, ProgressEvent)]
    assert [n.tool_call_id for n in notes] == ["call_a", "call_b"]
