"""Live streams fed between full reads: while replies stream, an async client's streams get
their new deltas from the worker's notifications (``live/feed.py``), and what they show
is exactly what a reader that reads everything afterwards gets."""

from __future__ import annotations

import asyncio

import pytest

from dbos_agents import AgentRuntime, AsyncAgentClient
from dbos_agents.events import DeltaEvent, MessageEvent, SessionEvent, StatusEvent

from .streaming_model import LONG_REPLY

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def _follow(c: AsyncAgentClient, sid: str) -> list[SessionEvent]:
    seen: list[SessionEvent] = []
    async for e in c.stream(sid, timeout=60):
        seen.append(e)
        if isinstance(e, StatusEvent):
            return seen
    raise AssertionError(f"no status for {sid}: {seen[-3:]}")


def _key(e: SessionEvent) -> tuple[str, str, str]:
    text = e.text if isinstance(e, DeltaEvent) else getattr(e, "content", "") or ""
    return (type(e).__name__, getattr(e, "cursor", ""), text)


async def test_streams_fed_between_reads_show_what_a_full_read_shows(
    runtime: AgentRuntime, aclient: AsyncAgentClient
) -> None:
    feed = aclient.sync.watches.feed
    handed = feed.handed
    sids = [await aclient.start("slow_streamer", f"feed {i}") for i in range(3)]
    live = await asyncio.gather(*(_follow(aclient, sid) for sid in sids))
    assert feed.handed > handed, "the deltas did not come with their notifications"
    for sid, events in zip(sids, live, strict=True):
        deltas = [e for e in events if isinstance(e, DeltaEvent)]
        assert "".join(d.text for d in deltas) == LONG_REPLY
        reply = [e for e in events if isinstance(e, MessageEvent) and e.role == "assistant"]
        assert [m.content for m in reply] == [LONG_REPLY]
        cursors = [e.cursor for e in events if isinstance(e, DeltaEvent | MessageEvent)]
        assert len(cursors) == len(set(cursors)), "an event was shown twice"
        after = [e async for e in aclient.stream(sid, follow=False)]
        assert [_key(e) for e in events] == [_key(e) for e in after]


async def test_two_hundred_sessions_stream_at_once_on_one_worker(
    runtime: AgentRuntime, aclient: AsyncAgentClient
) -> None:
    """200 replies streaming at once on the one worker, each followed by its own stream:
    every reader sees its reply exactly once, and it is the stored message."""
    sids = await asyncio.gather(*(aclient.start("slow_streamer", f"many {i}") for i in range(200)))
    live = await asyncio.gather(*(_follow(aclient, sid) for sid in sids))
    for events in live:
        deltas = [e for e in events if isinstance(e, DeltaEvent)]
        assert "".join(d.text for d in deltas) == LONG_REPLY
        assert len({d.cursor for d in deltas}) == len(deltas)
        reply = [e for e in events if isinstance(e, MessageEvent) and e.role == "assistant"]
        assert [m.content for m in reply] == [LONG_REPLY]
        assert isinstance(events[-1], StatusEvent) and events[-1].status == "completed"
