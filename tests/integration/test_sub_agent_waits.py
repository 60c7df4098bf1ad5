"""A sub-agent's waits on its root's live log, against the real runtime: a client tool
two levels down, and a durable tool's asks in a sub-agent, come as ``pending`` events on
the root's stream (what chat UIs follow), once each, woken by the worker (the safety net's
timer is longer than the test), and no longer shown once answered."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from dbos_agents import (
    AgentClient,
    AgentRuntime,
    AsyncAgentClient,
    MessageEvent,
    PendingEvent,
    SessionEvent,
    StatusEvent,
)
from dbos_agents.ids import root_call

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _waits(events: Sequence[SessionEvent]) -> list[PendingEvent]:
    return [e for e in events if isinstance(e, PendingEvent)]


class _Follower:
    """The root's stream, read in the background; ``asked`` is set at each wait shown."""

    def __init__(self, aclient: AsyncAgentClient, sid: str) -> None:
        self.live: list[SessionEvent] = []
        self.asked = asyncio.Event()
        self.task = asyncio.ensure_future(self._follow(aclient, sid))

    async def _follow(self, aclient: AsyncAgentClient, sid: str) -> None:
        async for e in aclient.stream(sid, timeout=90, poll=60):
            self.live.append(e)
            if isinstance(e, PendingEvent):
                self.asked.set()
            if isinstance(e, StatusEvent):
                return

    async def next_wait(self) -> PendingEvent:
        await asyncio.wait_for(self.asked.wait(), 60)
        self.asked.clear()
        return _waits(self.live)[-1]


async def test_a_client_tool_two_levels_down_is_pending_on_the_roots_stream_once(
    runtime: AgentRuntime, client: AgentClient, aclient: AsyncAgentClient
) -> None:
    sid = await aclient.start("boss", "deep")
    follower = _Follower(aclient, sid)
    wait = await follower.next_wait()
    assert (wait.kind, wait.tool, wait.root_session_id) == ("client", "confirm", sid)
    owner = wait.owner_session_id
    assert owner is not None and owner.count("::sub::") == 2
    (called,) = [
        c.id
        for e in follower.live
        if isinstance(e, MessageEvent) and e.role == "assistant"
        for c in e.tool_calls
    ]
    assert root_call(owner) == called  # the root's call it waits under
    # A reader starting over while it waits sees it once too.
    batch = await aclient.read_events(sid)
    assert [w.tool_call_id for w in _waits(batch.events)] == [wait.tool_call_id]
    out = await asyncio.to_thread(
        client.submit_tool_result, sid, wait.tool_call_id, result={"ok": True, "note": "deep"}
    )
    assert out.status == "accepted", out
    await asyncio.wait_for(follower.task, 60)
    assert len(_waits(follower.live)) == 1
    last = follower.live[-1]
    assert isinstance(last, StatusEvent) and last.status == "completed"
    assert last.final_output is not None and "deep" in last.final_output
    assert not _waits((await aclient.read_events(sid)).events)  # answered: shown no more


async def test_a_durable_tools_asks_in_a_sub_agent_are_pending_on_the_roots_stream(
    runtime: AgentRuntime, client: AgentClient, aclient: AsyncAgentClient
) -> None:
    sid = await aclient.start("refund_boss", "700")
    follower = _Follower(aclient, sid)
    approval = await follower.next_wait()
    assert (approval.kind, approval.tool, approval.arguments) == (
        "approval",
        "guarded_refund",
        {"refund_cents": 700},
    )
    assert approval.owner_session_id is not None and approval.owner_session_id != sid
    out = await asyncio.to_thread(
        client.submit_approval, sid, approval.tool_call_id, True, decided_by="ops@example.com"
    )
    assert out.status == "accepted", out
    ask = await follower.next_wait()
    assert (ask.kind, ask.tool, ask.owner_session_id) == (
        "client",
        "confirm_mid",
        approval.owner_session_id,
    )
    out = await asyncio.to_thread(
        client.submit_tool_result, sid, ask.tool_call_id, result={"ok": True, "note": "yes"}
    )
    assert out.status == "accepted", out
    await asyncio.wait_for(follower.task, 60)
    assert [w.tool_call_id for w in _waits(follower.live)] == [
        approval.tool_call_id,
        ask.tool_call_id,
    ]
    last = follower.live[-1]
    assert isinstance(last, StatusEvent) and last.status == "completed"
    assert last.final_output is not None and "refunded 700" in last.final_output
