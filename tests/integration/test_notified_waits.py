"""Waits that are woken, not polled: ``wait`` (sync and async), ``watch``, the CLI's
``follow`` and the HTTP event stream all learn of a change from the worker's announcement.

Each test sets the safety net's interval (``poll``) far beyond the test's own bound, so
only a notification can end the wait in time: with a per-caller poll these tests fail.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from dbos_agents import AgentClient, AgentRuntime, AsyncAgentClient, Cursor, SessionInfo
from dbos_agents.server.events import stream_events
from dbos_agents.server.follow import Limits

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

NEVER = 3600.0
"""A safety-net interval no test waits out."""
BOUND = 60.0
"""How long a woken wait may take here, at most (a liveness bound, not a timing)."""


async def _pending_id(c: AsyncAgentClient, sid: str) -> str:
    for _ in range(1200):
        rows = await c.pending(session_id=sid)
        if rows:
            return rows[0].tool_call_id
        await asyncio.sleep(0.05)
    raise TimeoutError(f"no pending call for {sid}")


async def test_sync_wait_is_woken_by_the_run_end(
    runtime: AgentRuntime, client: AgentClient, aclient: AsyncAgentClient
) -> None:
    sid = await aclient.start("asker", "ship it?")
    call_id = await _pending_id(aclient, sid)
    got: list[SessionInfo] = []
    waiter = threading.Thread(
        target=lambda: got.append(client.wait(sid, timeout=NEVER, poll=NEVER)), daemon=True
    )
    waiter.start()
    await asyncio.sleep(0.5)  # the waiter has read 'waiting' and sleeps on its watch
    assert waiter.is_alive()
    await aclient.submit_tool_result(sid, call_id, result={"ok": True})
    await asyncio.to_thread(waiter.join, BOUND)
    assert not waiter.is_alive(), "wait() was not woken by the run's end"
    assert got[0].status == "completed"


async def test_async_wait_is_woken_by_the_run_end(
    runtime: AgentRuntime, aclient: AsyncAgentClient
) -> None:
    sid = await aclient.start("asker", "ship it?")
    call_id = await _pending_id(aclient, sid)
    waiting = asyncio.ensure_future(aclient.wait(sid, timeout=NEVER, poll=NEVER))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    await aclient.submit_tool_result(sid, call_id, result={"ok": True})
    info = await asyncio.wait_for(waiting, BOUND)
    assert info.status == "completed"


async def test_a_watch_wakes_on_each_turn_and_not_for_other_sessions(
    runtime: AgentRuntime, client: AgentClient, aclient: AsyncAgentClient
) -> None:
    sid = await aclient.start("asker", "ship it?")
    call_id = await _pending_id(aclient, sid)
    other = await aclient.start("asker", "and this?")
    other_call = await _pending_id(aclient, other)
    with client.watch(sid) as watch:
        async with await aclient.watch(sid) as awatch:
            # A change to another session wakes neither.
            await aclient.submit_tool_result(other, other_call, result={"ok": True})
            await aclient.wait(other, timeout=BOUND)
            assert not await asyncio.to_thread(watch.wait, 1.0)
            assert not await awatch.wait(1.0)
            await aclient.submit_tool_result(sid, call_id, result={"ok": True})
            assert await asyncio.to_thread(watch.wait, BOUND)
            assert await awatch.wait(BOUND)
    await aclient.wait(sid, timeout=BOUND)


async def test_the_event_stream_is_woken_not_polled(
    runtime: AgentRuntime, aclient: AsyncAgentClient
) -> None:
    sid = await aclient.start("asker", "ship it?")
    call_id = await _pending_id(aclient, sid)
    stream = stream_events(aclient, sid, Cursor(), follow=True, limits=Limits(NEVER, NEVER))
    seen: list[str] = []

    async def read_until_status() -> None:
        async for event in stream:
            chunk = event.decode()
            seen.append(chunk)
            if "event: status" in chunk:
                return

    reading = asyncio.ensure_future(read_until_status())
    await asyncio.sleep(0.5)
    assert not reading.done()
    await aclient.submit_tool_result(sid, call_id, result={"ok": True})
    await asyncio.wait_for(reading, BOUND)
    await stream.aclose()
    assert '"status":"completed"' in seen[-1]
    assert any('"role":"tool"' in c for c in seen)


async def test_follow_is_woken_not_polled(
    runtime: AgentRuntime, client: AgentClient, aclient: AsyncAgentClient
) -> None:
    from dbos_agents.cli.follow import follow

    sid = await aclient.start("asker", "ship it?")
    call_id = await _pending_id(aclient, sid)
    ended: list[str] = []
    follower = threading.Thread(
        target=lambda: ended.append(follow(client, sid, as_json=True, poll=NEVER)), daemon=True
    )
    follower.start()
    await asyncio.sleep(0.5)
    assert follower.is_alive()
    await aclient.submit_tool_result(sid, call_id, result={"ok": True})
    await asyncio.to_thread(follower.join, BOUND)
    assert not follower.is_alive(), "follow was not woken by the turn"
    assert ended == ["completed"]


async def test_the_event_stream_sends_each_read_as_one_chunk(
    runtime: AgentRuntime, aclient: AsyncAgentClient
) -> None:
    """One send per read, however many events it holds (a stream behind on a busy server
    catches up in fewer writes), each event framed as it always was."""
    sid = await aclient.start("asker", "ship it?")
    await aclient.submit_tool_result(sid, await _pending_id(aclient, sid), result={"ok": True})
    await aclient.wait(sid, timeout=BOUND)
    stream = stream_events(aclient, sid, Cursor(), follow=False, limits=Limits(NEVER, NEVER))
    sent = [piece async for piece in stream]
    assert sent[0] == b"retry: 1000\n\n"
    (body,) = sent[1:]
    frames = body.decode().split("\n\n")[:-1]
    heads = [f.splitlines()[0].split(":")[0] for f in frames]
    assert heads == ["id"] * (len(frames) - 1) + ["event"] and len(frames) >= 4, frames
    assert '"status":"completed"' in frames[-1] and '"role":"tool"' in body.decode()
