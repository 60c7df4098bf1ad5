"""A submit whose notification is lost still wakes its session, via the batched re-check.

DBOS re-checks each waiting ``recv`` on its own; the runtime turns that off and re-checks
all waiters in one query (``ListenerWatch``, every ``wake_recheck_interval_sec``: 1 s in
this suite). The notifications trigger is disabled around the submit, so only that
re-check can wake the session; without it the test fails at its 20 s bound.
"""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from dbos_agents import AgentClient, AgentRuntime
from dbos_agents.runtime import _dbos_compat as compat

from .test_client_tools import _pending

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _armed(workflow_id: str) -> bool:
    waiters = compat._system_database().notifications_map.snapshot()
    return any(c[0] == workflow_id for _, c, _ in waiters)


def _trigger(client: AgentClient, enable: bool) -> None:
    with client.engine.begin() as conn:
        verb = "ENABLE" if enable else "DISABLE"
        conn.execute(
            sa.text(f"ALTER TABLE dbos.notifications {verb} TRIGGER dbos_notifications_trigger")
        )


async def test_a_submit_whose_notification_is_lost_wakes_the_session(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    assert runtime.settings.wake_recheck_interval_sec <= 2
    watch = runtime._listen_watch
    assert watch is not None
    for _ in range(100):  # its first pass (at launch) must not be what wakes the session
        if watch.passes:
            break
        await asyncio.sleep(0.05)
    h = await runtime.start("asker", "ship it?")
    (p,) = await _pending(client, h.session_id)
    for _ in range(400):
        if _armed(h.workflow_id):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the run never waited in recv")
    await asyncio.to_thread(_trigger, client, False)
    try:
        out = await asyncio.to_thread(
            client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
        )
    finally:
        await asyncio.to_thread(_trigger, client, True)
    assert out.status == "accepted"
    passes = watch.passes
    res = await asyncio.wait_for(h.result(), 20)
    assert watch.passes > passes
    assert res.status == "completed"
