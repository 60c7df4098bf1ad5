"""Persistent sessions: one long-lived workflow per session, inbox messages, idle TTL."""

from __future__ import annotations

import asyncio

import pytest

from dbos_agents import AgentClient, AgentRuntime
from dbos_agents.store import runs

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def _status(client: AgentClient, wf: str) -> str:
    return (await asyncio.to_thread(lambda: client.dbos.retrieve_workflow(wf).get_status())).status


async def test_follow_ups_run_in_the_same_workflow_until_idle_ttl(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h1 = await runtime.start("pchat", "one")
    out1 = await h1.result()
    assert (out1.status, out1.output, out1.run_seq) == ("completed", "echo 0: one", 1)
    assert await _status(client, h1.workflow_id) == "PENDING"  # waiting on its inbox
    assert (await h1.status()).status == "completed"

    h2 = await runtime.send(h1.session_id, "two")
    assert h2.workflow_id == h1.workflow_id == h1.session_id
    out2 = await h2.result()
    assert (out2.output, out2.run_seq) == ("echo 1: two", 2)
    # Each run's outcome is recorded on its own.
    ev1 = await asyncio.to_thread(runs.get, client.engine, h1.session_id, 1)
    assert ev1 is not None and ev1.output == "echo 0: one"
    assert await runtime.session(h1.session_id).result() == out2  # the latest run
    hist = await h2.history()
    assert [(m.role, m.run_seq) for m in hist] == [
        ("user", 1),
        ("assistant", 1),
        ("user", 2),
        ("assistant", 2),
    ]
    # Idle TTL (3 s): the workflow ends, the inbox closes; a later message starts a new one.
    for _ in range(200):
        if await _status(client, h1.workflow_id) == "SUCCESS":
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("persistent workflow did not end after its idle TTL")
    h3 = await runtime.send(h1.session_id, "three")
    assert h3.workflow_id == f"{h1.session_id}::run::3"
    assert (await h3.result()).output == "echo 2: three"


async def test_client_send_reaches_the_inbox(runtime: AgentRuntime, client: AgentClient) -> None:
    h1 = await runtime.start("pchat", "hello")
    await h1.result()
    sid = await asyncio.to_thread(client.send, h1.session_id, "via client")
    assert sid == h1.session_id
    info = await asyncio.to_thread(client.wait, sid, timeout=30)
    assert info.final_output == "echo 1: via client" and info.workflow_id == h1.session_id
