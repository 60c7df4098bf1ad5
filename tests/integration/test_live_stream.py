"""``AgentClient.stream`` and ``AsyncAgentClient.stream`` on the real runtime: a turn's
deltas, then its message, then the run's status; resuming from any cursor yields exactly
the rest; waits arrive once, right after the message that opened them."""

from __future__ import annotations

import asyncio

import pytest

from dbos_agents import (
    AccessDeniedError,
    AgentClient,
    AgentRuntime,
    AsyncAgentClient,
    DeltaEvent,
    InvalidRequestError,
    MessageEvent,
    PendingEvent,
    RetractEvent,
    SessionEvent,
    StatusEvent,
)

from .polling import until
from .streaming_model import CLOSED, ENDLESS, PIECES

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

LONG = "tell me a long story about streams that never skip a piece"


def _until_status(client: AgentClient, sid: str, after: str | None = None) -> list[SessionEvent]:
    seen: list[SessionEvent] = []
    for e in client.stream(sid, after, timeout=60, poll=0.5):
        seen.append(e)
        if isinstance(e, StatusEvent):
            return seen
    raise AssertionError(f"no status in {seen}")


def _text_of_turn(events: list[SessionEvent], run: int, turn: int) -> str:
    text = ""
    for e in events:
        if isinstance(e, RetractEvent) and (e.run, e.turn) == (run, turn) and e.tool_index is None:
            text = ""
        elif isinstance(e, DeltaEvent) and (e.run, e.turn) == (run, turn):
            text += e.text
    return text


def _kinds(events: list[SessionEvent]) -> list[str]:
    return [e.event for e in events]


async def test_deltas_then_the_message_then_the_status(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    sid = client.start("chat", LONG)
    events = await asyncio.to_thread(_until_status, client, sid)
    deltas = [e for e in events if isinstance(e, DeltaEvent)]
    messages = [e for e in events if isinstance(e, MessageEvent)]
    assert [m.role for m in messages] == ["user", "assistant"]
    assert len(deltas) > 3  # the scripted model streams 8-character pieces
    assert _kinds(events) == ["message"] + ["delta"] * len(deltas) + ["message", "status"]
    reply = messages[1]
    assert reply.content == f"echo 0: {LONG}" == _text_of_turn(events, 1, 1)
    assert {(d.run, d.turn, d.attempt) for d in deltas} == {(1, 1, 1)}  # turns count from 1
    status = events[-1]
    assert isinstance(status, StatusEvent) and status.status == "completed"
    # Cursors only move forward; the message after the deltas carries the last delta's id.
    assert messages[0].cursor == "1"
    assert reply.cursor == f"2.{deltas[-1].cursor.split('.')[1]}"


async def test_resuming_from_every_cursor_yields_exactly_the_rest(
    runtime: AgentRuntime, client: AgentClient, aclient: AsyncAgentClient
) -> None:
    sid = client.start("chat", LONG)
    await aclient.wait(sid, timeout=60)
    client.send(sid, "and a second one, please, just as long as the first")
    await aclient.wait(sid, timeout=60)
    everything = list(client.stream(sid, follow=False))
    assert isinstance(everything[-1], StatusEvent)
    log = everything[:-1]
    assert [m.role for m in log if isinstance(m, MessageEvent)] == ["user", "assistant"] * 2
    second = "echo 1: and a second one, please, just as long as the first"
    assert _text_of_turn(log, 2, 2) == second  # turns count on across a session's runs
    for i, e in enumerate(log):
        assert not isinstance(e, (PendingEvent, StatusEvent))
        rest = list(client.stream(sid, e.cursor, follow=False))
        assert rest[:-1] == log[i + 1 :], f"resumed after {e.cursor}"
    # The async client reads the same log, and batches of one walk it all the same.
    assert [e async for e in aclient.stream(sid, follow=False)] == everything
    walked: list[SessionEvent] = []
    cursor: str | None = None
    for _ in range(10 * len(log)):
        batch = client.read_events(sid, cursor, limit=1)
        walked += batch.events
        cursor = str(batch.cursor)
        if batch.complete and not batch.events:
            break
    assert walked == log


async def test_follow_reports_each_run_end_once_across_runs(
    runtime: AgentRuntime, client: AgentClient, aclient: AsyncAgentClient
) -> None:
    sid = await aclient.start("chat", "first")
    seen: list[SessionEvent] = []

    async def read() -> None:
        async for e in aclient.stream(sid, timeout=60, poll=0.5):
            seen.append(e)
            if isinstance(e, StatusEvent) and e.run_seq == 2:
                return

    reading = asyncio.ensure_future(read())
    await aclient.wait(sid, timeout=60)
    for _ in range(200):
        if any(isinstance(e, StatusEvent) for e in seen):
            break
        await asyncio.sleep(0.05)
    await aclient.send(sid, "second")
    await asyncio.wait_for(reading, 60)
    statuses = [(e.status, e.run_seq) for e in seen if isinstance(e, StatusEvent)]
    assert statuses == [("completed", 1), ("completed", 2)]
    assert [m.content for m in seen if isinstance(m, MessageEvent)] == [
        "first", "echo 0: first", "second", "echo 1: second",
    ]  # fmt: skip


async def test_a_wait_arrives_once_right_after_its_message(
    runtime: AgentRuntime, client: AgentClient, aclient: AsyncAgentClient
) -> None:
    sid = await aclient.start("asker", "ship it?")
    seen: list[SessionEvent] = []
    async for e in aclient.stream(sid, timeout=60, poll=0.5):
        seen.append(e)
        if isinstance(e, PendingEvent):
            break
    asked = seen[-2]
    wait = seen[-1]
    assert isinstance(asked, MessageEvent) and isinstance(wait, PendingEvent)
    assert wait.tool_call_id == asked.tool_calls[0].id
    assert (wait.kind, wait.tool, wait.arguments) == ("client", "confirm", {"question": "ship it?"})
    assert wait.root_session_id == sid and wait.output_schema is not None
    # Resuming after the message does not repeat the wait.
    again = [e async for e in aclient.stream(sid, asked.cursor, follow=False)]
    assert _kinds(again) == ["status"]
    await aclient.submit_tool_result(sid, wait.tool_call_id, result={"ok": True})
    rest = await asyncio.to_thread(_until_status, client, sid, asked.cursor)
    assert [m.role for m in rest if isinstance(m, MessageEvent)] == ["tool", "assistant"]
    assert not any(isinstance(e, PendingEvent) for e in rest)
    # Read from the start once the wait is settled: no pending event at all.
    assert not any(isinstance(e, PendingEvent) for e in client.stream(sid, follow=False))


async def test_scope_and_bad_cursors(
    runtime: AgentRuntime, client: AgentClient, aclient: AsyncAgentClient
) -> None:
    sid = client.start("chat", "mine", user_id="alice")
    await aclient.wait(sid, timeout=60)
    alice, bob = client.for_identity("alice"), client.for_identity("bob")
    assert isinstance(list(alice.stream(sid, follow=False))[-1], StatusEvent)
    with pytest.raises(AccessDeniedError):
        bob.stream(sid)
    with pytest.raises(AccessDeniedError):
        async for _ in aclient.for_identity("bob").stream(sid):
            pass
    for bad in ("-1", "1.x", "abc"):
        with pytest.raises(InvalidRequestError):
            client.stream(sid, bad)


async def test_follow_prints_a_streamed_reply_once(
    runtime: AgentRuntime,
    client: AgentClient,
    aclient: AsyncAgentClient,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`dbos-agents follow` in a terminal: the reply's text as it streamed, on one line and
    not again with its message; a wait with the command that answers it."""
    from dbos_agents.cli.follow import follow

    sid = await aclient.start("chat", LONG)
    await aclient.wait(sid, timeout=60)
    assert await asyncio.to_thread(follow, client, sid, poll=0.5) == "completed"
    printed = capsys.readouterr().out
    assert printed.count(f"echo 0: {LONG}") == 1
    assert f"assistant > echo 0: {LONG}\n" in printed and "run ended: completed" in printed
    asker = await aclient.start("asker", "confirm?")
    async for e in aclient.stream(asker, timeout=60, poll=0.5):
        if isinstance(e, PendingEvent):
            break
    await aclient.submit_tool_result(asker, e.tool_call_id, result={"ok": True})
    assert await asyncio.to_thread(follow, client, asker, poll=0.5) == "completed"
    printed = capsys.readouterr().out
    assert "-> confirm(" in printed and printed.count("asker got:") == 1


async def test_the_async_stream_is_woken_not_polled(
    runtime: AgentRuntime, aclient: AsyncAgentClient
) -> None:
    sid = await aclient.start("asker", "wake me")
    seen: list[SessionEvent] = []

    async def read() -> None:
        async for e in aclient.stream(sid, timeout=3600, poll=3600):
            seen.append(e)
            if isinstance(e, StatusEvent):
                return

    reading = asyncio.ensure_future(read())
    for _ in range(1200):
        if any(isinstance(e, PendingEvent) for e in seen):
            break
        await asyncio.sleep(0.05)
    (wait,) = [e for e in seen if isinstance(e, PendingEvent)]
    await aclient.submit_tool_result(sid, wait.tool_call_id, result={"ok": True})
    await asyncio.wait_for(reading, 60)
    assert isinstance(seen[-1], StatusEvent) and seen[-1].status == "completed"


async def test_an_interrupt_mid_stream_stops_the_model_and_withdraws_the_reply(
    runtime: AgentRuntime, client: AgentClient, aclient: AsyncAgentClient
) -> None:
    h = await runtime.start("endless_streamer", "never stop")
    sid, key = h.session_id, "endless_streamer:never stop:0"
    seen: list[SessionEvent] = []

    async def read() -> None:
        async for e in aclient.stream(sid, timeout=60, poll=30):
            seen.append(e)

    reader = asyncio.ensure_future(read())
    try:
        await until(lambda: any(isinstance(e, DeltaEvent) for e in seen), "a first delta")
        await asyncio.to_thread(client.interrupt, sid)
        out = await asyncio.wait_for(h.result(), 20)
        assert out.status == "interrupted", out
        # the model's stream is closed at the interrupt, not run to its end (30 s)
        await until(lambda: CLOSED[key] == 1, "the model's stream closed", within=10)
        stopped_at = PIECES[key]
        assert stopped_at < ENDLESS
        # readers are told the partial reply will not be final, and see nothing after it
        await until(lambda: any(isinstance(e, RetractEvent) for e in seen), "a retraction")
        await asyncio.sleep(0.3)
        assert PIECES[key] == stopped_at
        tail = [e for e in seen if isinstance(e, DeltaEvent | RetractEvent)]
        assert isinstance(tail[-1], RetractEvent) and tail[-1].tool_index is None
        assert not [m for m in client.history(sid) if m.role == "assistant"]
    finally:
        reader.cancel()
