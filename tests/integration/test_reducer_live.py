"""``live.reducer`` over real logs: runs of the integration runtime whose replies are cut
and continued, cut in a tool call's arguments, failed mid-reply, or wait on a human in the
middle of a durable tool (its own, or a sub-agent's), read back through the client as a
reader reads them (the whole log, and resumed from each cursor) and folded. What the
reader holds is the stored transcript: each step's text is its assistant message, each
call it started is a call the model made, nothing twice."""

from __future__ import annotations

import asyncio

import pytest

from dbos_agents import AgentClient, AgentRuntime, Cursor, PendingEvent, SessionEvent
from dbos_agents.events import ProgressEvent
from dbos_agents.live import operations as op
from dbos_agents.live.reducer import RunReducer
from dbos_agents.records import StatusEvent

from ..reducer_view import Held, held
from .polling import until

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _log(client: AgentClient, sid: str, after: Cursor | None = None) -> list[SessionEvent]:
    """The log after ``after``, to its end, then its status (as a reader's reads give it)."""
    events: list[SessionEvent] = []
    cursor = after or Cursor()
    while True:
        batch = client.read_events(sid, cursor)
        events += batch.events
        cursor = batch.cursor
        if batch.complete:
            return [*events, batch.status]


def _folded(client: AgentClient, sid: str) -> Held:
    """The whole log folded, and the same from every cursor a reader cut off may resume
    from: one reading."""
    events = _log(client, sid)
    whole = held(RunReducer(1).feed(events))
    for cut in range(1, len(events) - 1):
        cursor = getattr(events[cut - 1], "cursor", None)
        if cursor is None:
            continue  # a wait or a state version: no resume point of its own
        r = RunReducer(1)
        first = r.feed(events[:cut])
        rest = _log(client, sid, Cursor.parse(cursor))
        assert held([*first, *r.feed(rest)]) == whole, f"resumed at {cursor}"
    return whole


@pytest.mark.parametrize(
    ("agent", "status"),
    [
        ("streamer", "completed"),
        ("stream_cut", "completed"),  # continued from its partial after a dropped stream
        ("stream_cut_tool", "completed"),  # cut in a tool call's arguments: retracted
        ("slow_tool_streamer", "completed"),
        ("stream_fail", "failed"),  # withdrawn, then the run fails
    ],
)
async def test_what_a_reader_holds_is_the_stored_transcript(
    runtime: AgentRuntime, client: AgentClient, agent: str, status: str
) -> None:
    h = await runtime.start(agent, "hello")
    out = await asyncio.wait_for(h.result(), 60)
    assert out.status == status
    sid = h.session_id
    got = await asyncio.to_thread(_folded, client, sid)
    history = await asyncio.to_thread(client.history, sid)
    replies = [m.content or "" for m in history if m.role == "assistant"]
    assert got.steps[: len(replies)] == replies
    assert all(s == "" for s in got.steps[len(replies) :]), "a failed turn is withdrawn"
    calls = {c.id: c for m in history for c in m.tool_calls}
    assert set(got.calls) == set(got.tools) == set(calls)
    for cid, call in calls.items():
        assert got.tools[cid] == call.arguments, "the shown input is the call's"
    assert got.end is not None and got.end.reason == status
    if status == "failed":
        assert got.end.error


def _open_wait(client: AgentClient, sid: str) -> PendingEvent | None:
    waits = [e for e in _log(client, sid) if isinstance(e, PendingEvent)]
    return waits[-1] if waits else None


@pytest.mark.parametrize(("agent", "sub_agent"), [("refunder", False), ("refund_boss", True)])
async def test_a_durable_tools_asks_are_shown_on_the_call_they_come_from(
    runtime: AgentRuntime, client: AgentClient, agent: str, sub_agent: bool
) -> None:
    """An approval, then a browser tool, asked mid-call by a durable tool (of the run's own
    agent, or of a sub-agent): each ends the reader's run waiting, shown on the run's call
    it comes from; the notes come as they were written."""
    h = await runtime.start(agent, "700")
    sid = h.session_id
    wait = await until(lambda: _open_wait(client, sid), "the approval ask")
    assert wait.kind == "approval"
    got = await asyncio.to_thread(lambda: held(RunReducer(1).feed(_log(client, sid))))
    history = await asyncio.to_thread(client.history, sid)
    (call,) = [c for m in history for c in m.tool_calls]
    assert got.approvals == [op.Approval(wait.tool_call_id, call.id)]
    assert got.end == op.End("waiting")
    if not sub_agent:
        notes = [e for e in _log(client, sid) if isinstance(e, ProgressEvent)]
        assert got.notes == [n.note_id for n in notes] and notes
    await asyncio.to_thread(client.submit_approval, sid, wait.tool_call_id, True, decided_by="ops")

    ask = await until(
        lambda: (w := _open_wait(client, sid)) is not None and w.kind == "client" and w,
        "the browser ask",
    )
    got = await asyncio.to_thread(lambda: held(RunReducer(1).feed(_log(client, sid))))
    assert got.calls[ask.tool_call_id].on_client
    assert got.calls[ask.tool_call_id].input == ask.arguments
    assert got.end == op.End("waiting")
    await asyncio.to_thread(
        client.submit_tool_result, sid, ask.tool_call_id, result={"ok": True, "note": "yes"}
    )
    assert (await asyncio.wait_for(h.result(), 30)).status == "completed"
    got = await asyncio.to_thread(_folded, client, sid)
    history = await asyncio.to_thread(client.history, sid)
    assert got.steps == [m.content or "" for m in history if m.role == "assistant"]
    assert got.end is not None and got.end.reason == "completed"
    assert isinstance(got.end.status, StatusEvent)
