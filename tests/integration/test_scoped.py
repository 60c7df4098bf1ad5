"""``AgentClient.for_identity`` and ``for_tenant``: the same client class, narrowed to a
``Scope``."""

from __future__ import annotations

import asyncio

import pytest

from dbos_agents import AccessDeniedError, AgentClient, AgentRuntime, InvalidRequestError, Scope

from .test_client_tools import _pending

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_a_scoped_client_acts_only_on_its_own_sessions(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    alice = client.for_identity("alice-s", "t1")
    bob = client.for_identity("bob-s", "t1")
    alice_t2 = client.for_identity("alice-s", "t2")
    sid = await asyncio.to_thread(alice.start, "asker", "ship it?")
    other = await asyncio.to_thread(bob.start, "asker", "and mine?")
    (p,) = await _pending(client, sid)
    await _pending(client, other)
    info = await asyncio.to_thread(alice.session, sid)
    assert (info.user_id, info.tenant_id) == ("alice-s", "t1")
    assert {w.root_session_id for w in await asyncio.to_thread(alice.pending)} == {sid}
    before = await asyncio.to_thread(client.history, sid)
    for intruder in (bob, alice_t2):
        for act in (
            lambda c: c.session(sid),
            lambda c: c.history(sid),
            lambda c: c.tool_calls(sid),
            lambda c: c.pending(session_id=sid),
            lambda c: c.submit_tool_result(sid, p.tool_call_id, result={"ok": True}),
            lambda c: c.interrupt(sid),
            lambda c: c.send(sid, "hijack"),
            lambda c: c.start("asker", "hijack", session_id=sid),
        ):
            with pytest.raises(AccessDeniedError):
                await asyncio.to_thread(act, intruder)
    assert await asyncio.to_thread(client.history, sid) == before
    assert (await asyncio.to_thread(client.pending, session_id=sid))[0].status == "waiting"
    # No way to switch identity on a scoped client.
    with pytest.raises(AttributeError):
        alice.user_id = "bob-s"  # type: ignore[misc]
    assert type(alice) is AgentClient and alice.scope == Scope("alice-s", "t1")
    for switch in (lambda: alice.for_identity("bob-s", "t1"), lambda: alice.for_tenant("t1")):
        with pytest.raises(AccessDeniedError):
            switch()
    for other_identity in (
        lambda: alice.start("asker", "as bob", user_id="bob-s"),
        lambda: alice.sessions(tenant_id="t2"),
        lambda: alice.pending(user_id="bob-s"),
        lambda: alice.reap_tombstones(),
    ):
        with pytest.raises(AccessDeniedError):
            await asyncio.to_thread(other_identity)
    alice.close()  # shares the admin client's pools: closing it closes nothing
    client.ping()
    out = await asyncio.to_thread(
        alice.submit_tool_result, sid, p.tool_call_id, result={"ok": True}
    )
    assert out.status == "accepted"
    await asyncio.to_thread(client.interrupt, other)


async def test_a_tenant_scope_covers_every_user_of_its_tenant_only(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """``for_tenant`` (an operator's scope): any user's session of the tenant, never
    another tenant's; listings filtered to the tenant."""
    acme, other = client.for_tenant("acme-ts"), client.for_tenant("globex-ts")
    mine = await asyncio.to_thread(client.for_identity("u1-ts", "acme-ts").start, "asker", "a")
    theirs = await asyncio.to_thread(client.for_identity("u2-ts", "globex-ts").start, "asker", "b")
    (p,) = await _pending(client, mine)
    (q,) = await _pending(client, theirs)
    assert acme.user_id is None and acme.tenant_id == "acme-ts"
    assert (await asyncio.to_thread(acme.session, mine)).user_id == "u1-ts"
    assert {w.root_session_id for w in await asyncio.to_thread(acme.pending)} == {mine}
    assert {s.id for s in await asyncio.to_thread(acme.sessions)} == {mine}
    with pytest.raises(AccessDeniedError):
        await asyncio.to_thread(acme.submit_tool_result, theirs, q.tool_call_id, result={"ok": 1})
    assert (await asyncio.to_thread(client.pending, session_id=theirs))[0].status == "waiting"
    with pytest.raises(InvalidRequestError):
        Scope(None, None)
    ok = await asyncio.to_thread(acme.submit_tool_result, mine, p.tool_call_id, result={"ok": True})
    assert ok.status == "accepted"
    await asyncio.to_thread(other.interrupt, theirs)
