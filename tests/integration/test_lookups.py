"""``AgentClient``'s lookups (``client/lookups.py``): what the HTTP server reads besides a
session's own log, through the client and never the store: the operator inbox's lists
(within the caller's scope), a past run's outcome, the fleet's agents."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from dbos_agents import AgentClient, AgentRuntime, InvalidRequestError
from dbos_agents.errors import AccessDeniedError

from .polling import until

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_the_inbox_lists_a_tenants_open_call_and_a_scoped_client_sees_only_its_own(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    h = await runtime.start("asker", "ship it?", user_id="u1", tenant_id=tenant)
    sid = h.session_id

    def listed() -> bool:
        return any(c.root_session_id == sid for c in client.inbox_open(tenant_id=tenant))

    await until(listed, "the wait in the inbox")
    (call,) = [c for c in client.inbox_open(tenant_id=tenant) if c.root_session_id == sid]
    assert (call.agent, call.tool, call.status, call.path) == (
        "asker",
        "confirm",
        "waiting",
        ("asker",),
    )
    assert call.arguments == {"question": "ship it?"}
    assert [c.tool_call_id for c in client.inbox_session_calls(sid)] == [call.tool_call_id]
    assert client.inbox_summary()[0] >= 1

    mine = client.for_tenant(tenant)
    assert [c.tool_call_id for c in mine.inbox_open()] == [call.tool_call_id]
    other = client.for_tenant(f"{tenant}-other")
    assert not [c for c in other.inbox_open() if c.root_session_id == sid]
    with pytest.raises(InvalidRequestError, match="outside this client's scope"):
        other.inbox_open(tenant_id=tenant)  # refused, not widened
    with pytest.raises(AccessDeniedError):
        other.inbox_session_calls(sid)
    with pytest.raises(InvalidRequestError):
        client.inbox_open(limit=0)

    assert client.run_outcome(sid, 1) is None  # still waiting
    await asyncio.to_thread(client.submit_tool_result, sid, call.tool_call_id, result={"ok": True})
    assert (await h.result()).status == "completed"
    outcome = client.run_outcome(sid, 1)
    assert outcome is not None and outcome.status == "completed"
    settled = client.inbox_settled(tenant_id=tenant)
    assert [c.tool_call_id for c in settled if c.root_session_id == sid] == [call.tool_call_id]
    assert not [c for c in client.inbox_open(tenant_id=tenant) if c.root_session_id == sid]
