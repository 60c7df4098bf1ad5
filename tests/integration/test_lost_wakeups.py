"""A submit whose notification is lost still wakes its session, via the batched re-check.

DBOS re-checks each waiting ``recv`` on its own; the runtime turns that off and re-checks
all waiters, live or parked, in one query (``ListenerWatch``, every ``wake_recheck_interval_sec``: 1 s in
this suite). The notifications trigger is disabled around the submit, so only that
re-check can wake the session; without it the test fails at its 20 s bound.
"""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from dbos_agents import AgentClient, AgentRuntime
from dbos_agents._dbos import internals as compat
from dbos_agents.loop.context import get_context

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


@pytest.mark.parametrize("parked", [False, True], ids=["in-memory", "parked"])
async def test_a_submit_whose_notification_is_lost_wakes_the_session(
    runtime: AgentRuntime, client: AgentClient, parked: bool
) -> None:
    assert runtime.settings.wake_recheck_interval_sec <= 2
    parker = get_context().receiver
    park_after, parker.park_after_sec = parker.park_after_sec, (0.3 if parked else None)
    try:
        await _lost_notification(runtime, client, parked)
    finally:
        parker.park_after_sec = park_after


async def _lost_notification(runtime: AgentRuntime, client: AgentClient, parked: bool) -> None:
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
    # A parked wait is armed by its stand-in in the same map (parking.py): the re-check
    # wakes it like a live recv.
    for _ in range(400 if parked else 0):
        if get_context().receiver.is_parked(h.workflow_id):
            break
        await asyncio.sleep(0.05)
    else:
        assert not parked, "the wait never parked"
    await asyncio.to_thread(_trigger, client, False)
    # Counted before the submit: a re-check pass that runs between the submit's commit and
    # a later read would wake the session and already be in the count.
    passes = watch.passes
    try:
        out = await asyncio.to_thread(
            client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
        )
    finally:
        await asyncio.to_thread(_trigger, client, True)
    assert out.status == "accepted"
    res = await asyncio.wait_for(h.result(), 20)
    assert watch.passes > passes
    assert res.status == "completed"
