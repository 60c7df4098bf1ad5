"""``AsyncAgentClient``: every method of the sync client, awaited, against the real
runtime; and ``sessions``/``events``, new on both clients."""

from __future__ import annotations

import asyncio

import pytest

from dbos_agents import (
    AccessDeniedError,
    AgentClient,
    AgentRuntime,
    AsyncAgentClient,
    InvalidRequestError,
    PendingCall,
    SessionNotFoundError,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def _pending(c: AsyncAgentClient, sid: str) -> PendingCall:
    for _ in range(600):
        rows = await c.pending(session_id=sid)
        if rows:
            return rows[0]
        await asyncio.sleep(0.05)
    raise TimeoutError(f"no pending call for {sid}")


async def test_a_session_from_start_to_follow_up(
    runtime: AgentRuntime, aclient: AsyncAgentClient
) -> None:
    sid = await aclient.start("chat", "hello", user_id="u-async", tenant_id="t-async")
    info = await aclient.wait(sid, timeout=60)
    assert info.status == "completed" and info.final_output == "echo 0: hello"
    assert (await aclient.session(sid)).id == sid
    await aclient.send(sid, "again")
    assert (await aclient.wait(sid, timeout=60)).final_output == "echo 1: again"
    history = await aclient.history(sid)
    assert [m.content for m in history if m.role == "user"] == ["hello", "again"]
    assert await aclient.tool_calls(sid) == []
    listed = await aclient.sessions(user_id="u-async", tenant_id="t-async")
    assert [s.id for s in listed] == [sid]
    assert await aclient.sessions(user_id="u-async", status="failed") == []


async def test_events_read_the_log_in_batches(
    runtime: AgentRuntime, aclient: AsyncAgentClient, client: AgentClient
) -> None:
    sid = await aclient.start("chat", "one")
    await aclient.wait(sid, timeout=60)
    snap = await aclient.events(sid)
    assert snap.status is not None and snap.status.status == "completed"
    seqs = [m.seq for m in snap.messages]
    assert len(seqs) >= 2 and seqs == sorted(seqs)
    assert [m.seq for m in (await aclient.events(sid, seqs[0], limit=1)).messages] == [seqs[1]]
    assert (await aclient.events(sid, seqs[-1])).messages == []
    assert await asyncio.to_thread(client.events, sid) == snap  # the sync twin agrees
    missing = await aclient.events("ses_no_such_session")
    assert missing.status is None and missing.messages == []
    with pytest.raises(InvalidRequestError):
        await aclient.events(sid, -1)
    with pytest.raises(InvalidRequestError):
        await aclient.sessions(limit=0)


async def test_submits_approvals_failures_and_interrupts(
    runtime: AgentRuntime, aclient: AsyncAgentClient
) -> None:
    asked = await aclient.start("asker", "ship it?")
    p = await _pending(aclient, asked)
    assert p.kind == "client"
    out = await aclient.submit_tool_result(asked, p.tool_call_id, result={"ok": True})
    assert out.status == "accepted"
    again = await aclient.submit_tool_result(asked, p.tool_call_id, result={"ok": True})
    assert again.status == "already_completed"
    assert (await aclient.wait(asked, timeout=60)).status == "completed"

    gated = await aclient.start("closer", "close it")
    g = await _pending(aclient, gated)
    assert g.kind == "approval"
    decided = await aclient.submit_approval(gated, g.tool_call_id, False, "no", decided_by="ann")
    assert decided.status == "accepted"
    assert (await aclient.wait(gated, timeout=60)).status == "completed"

    failed = await aclient.start("asker", "and this?")
    f = await _pending(aclient, failed)
    assert (await aclient.fail(failed, f.tool_call_id, "operator said no")).status == "accepted"
    await aclient.wait(failed, timeout=60)

    stopped = await aclient.start("asker", "wait forever")
    s = await _pending(aclient, stopped)
    out_i = await aclient.interrupt(stopped)
    assert out_i.cancelled_calls == [s.tool_call_id]
    late = await aclient.submit_tool_result(stopped, s.tool_call_id, result={"ok": True})
    assert late.status == "unknown_tool_call"


async def test_tokens_and_scoped_access(runtime: AgentRuntime, aclient: AsyncAgentClient) -> None:
    alice = aclient.for_identity("alice-a", "t1")
    bob = aclient.for_identity("bob-a", "t1")
    sid = await alice.start("asker", "mine?")
    p = await _pending(aclient, sid)
    assert [s.id for s in await alice.sessions()] == [sid]
    assert (await alice.events(sid)).status is not None
    for act in (bob.session(sid), bob.events(sid), bob.history(sid), bob.interrupt(sid)):
        with pytest.raises(AccessDeniedError):
            await act
    assert await bob.sessions() == []
    assert (await alice.pending())[0].tool_call_id == p.tool_call_id
    out = await alice.submit_tool_result(sid, p.tool_call_id, result={"ok": False})
    assert out.status == "accepted"
    first = await aclient.token_generation(sid)
    assert await aclient.revoke_tokens(sid) == first + 1
    with pytest.raises(SessionNotFoundError):
        await aclient.revoke_tokens("ses_nobody")


async def test_wrapping_a_sync_client_leaves_it_open(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    async with AsyncAgentClient(client) as wrapped:
        assert wrapped.sync is client
        await wrapped.ping()
    client.ping()  # still open: the wrapper did not own it
