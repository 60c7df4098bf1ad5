"""Interrupts and run ends under races: fenced on the session row, all or nothing, and no
wait left open (issue: survive routine operations, items 3 and 5)."""

from __future__ import annotations

import asyncio
import json

import pytest
import sqlalchemy as sa

from dbos_agents import AgentClient, AgentRuntime, InterruptFailedError, SessionBusyError, Settings
from dbos_agents.records import PendingCall

from .agents import EFFECTS, GATES
from .polling import until

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def _workflow_status(client: AgentClient, wf: str) -> str | None:
    st = await asyncio.to_thread(lambda: client.dbos.retrieve_workflow(wf).get_status())
    return None if st is None else str(st.status)


async def _workflow_ends(client: AgentClient, wf: str) -> str:
    async def ended() -> str | None:
        st = await _workflow_status(client, wf)
        return st if st in ("SUCCESS", "ERROR", "CANCELLED") else None

    for _ in range(600):
        if st := await ended():
            return st
        await asyncio.sleep(0.05)
    raise TimeoutError(f"workflow {wf} did not end")


async def test_an_interrupt_that_cannot_cancel_changes_nothing(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """Postgres refuses the cancellation (a trigger stands in for any failure mid-way):
    the interrupt raises, and the session, its wait and its workflow are untouched."""
    h = await runtime.start("asker", "keep going")
    (p,) = await until(lambda: client.pending(session_id=h.session_id), "pending call")
    trigger = (
        "CREATE OR REPLACE FUNCTION dbos.refuse_cancel() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN IF NEW.status = 'CANCELLED' AND OLD.workflow_uuid = '" + h.workflow_id + "'"
        " THEN RAISE EXCEPTION 'cancel refused'; END IF; RETURN NEW; END $$;"
        " CREATE TRIGGER refuse_cancel BEFORE UPDATE ON dbos.workflow_status"
        " FOR EACH ROW EXECUTE FUNCTION dbos.refuse_cancel();"
    )
    with client.engine.begin() as conn:
        conn.execute(sa.text(trigger))
    try:
        with pytest.raises(InterruptFailedError, match="cancel refused"):
            await asyncio.to_thread(client.interrupt, h.session_id)
    finally:
        with client.engine.begin() as conn:
            conn.execute(sa.text("DROP TRIGGER refuse_cancel ON dbos.workflow_status"))
    assert (await asyncio.to_thread(client.session, h.session_id)).status == "running"
    assert [q.status for q in await asyncio.to_thread(client.pending, session_id=h.session_id)] == [
        "waiting"
    ]
    assert await _workflow_status(client, h.workflow_id) == "PENDING"
    # The run goes on, and is still the only one: a follow-up is refused, not started.
    with pytest.raises(SessionBusyError):
        await asyncio.to_thread(client.send, h.session_id, "a second run?")
    out = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
    )
    assert out.status == "accepted"
    assert (await h.result()).status == "completed"


async def test_a_run_that_begins_after_an_interrupt_stays_interrupted(
    runtime: AgentRuntime, integration_database_url: str
) -> None:
    """The interrupt lands while the run is still queued; the workflow runs anyway (here a
    DBOS resume forces it, as a race with the dequeue would). Its begin is fenced off:
    the session stays interrupted and nothing runs."""
    idle = AgentClient(integration_database_url, settings=Settings(queue_name="nobody_serves"))
    try:
        sid = await asyncio.to_thread(idle.start, "support", "refund order 9")
        out = await asyncio.to_thread(idle.interrupt, sid)
        assert out.interrupted_sessions == [sid]
        assert await _workflow_status(idle, sid) == "CANCELLED"
        await asyncio.to_thread(idle.dbos.resume_workflow, sid)
        assert await _workflow_ends(idle, sid) == "SUCCESS"
        result = await asyncio.to_thread(lambda: idle.dbos.retrieve_workflow(sid).get_result())
        assert result["status"] == "interrupted"
        info = await asyncio.to_thread(idle.session, sid)
        assert info.status == "interrupted" and info.turns == 0
        assert await asyncio.to_thread(idle.tool_calls, sid) == []
    finally:
        idle.close()


async def test_a_resumed_interrupted_run_never_runs_its_tool_again(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """Interrupted while a side-effecting call runs; a follow-up closes the call with its
    recorded result; then an operator resumes the cancelled run: the guard returns the
    recorded result (any status past 'requested' may have run) and the stale run cannot
    write over the follow-up's outcome."""
    h = await runtime.start("holder", "charge")
    key = f"held:{h.session_id}"
    await until(lambda: EFFECTS[key] == 1, "handler started")
    await asyncio.to_thread(client.interrupt, h.session_id)
    GATES[h.session_id].set()  # the handler returns; its attempt records the result
    await until(
        lambda: [c.status for c in client.tool_calls(h.session_id)] == ["completed"],
        "result row",
    )
    h2 = await runtime.send(h.session_id, "again")
    res2 = await h2.result()
    assert res2.status == "completed"
    tool_msgs = [m for m in await h2.history() if m.role == "tool"]
    assert [json.loads(m.content or "") for m in tool_msgs] == [{"charged": 7}]
    await asyncio.to_thread(client.dbos.resume_workflow, h.workflow_id)
    await _workflow_ends(client, h.workflow_id)
    assert EFFECTS[key] == 1
    info = await asyncio.to_thread(client.session, h.session_id)
    assert (info.status, info.run_seq, info.final_output) == ("completed", 2, res2.output)


async def test_the_waits_of_an_ended_run_are_closed(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """A run ended without reading its wait (here an operator cancelled its workflow with
    DBOS directly): the wait is no longer pending, and a submit says why."""
    h = await runtime.start("asker", "cancelled behind our back")
    (p,) = await until(lambda: client.pending(session_id=h.session_id), "pending call")
    await asyncio.to_thread(client.dbos.cancel_workflow, h.workflow_id)
    assert await asyncio.to_thread(client.pending, session_id=h.session_id) == []
    out = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
    )
    assert (out.status, out.reason) == ("unknown_tool_call", "run_ended")
    rows: list[PendingCall] = await asyncio.to_thread(
        client.pending, session_id=h.session_id, include_resolved=True
    )
    assert [r.status for r in rows] == ["closed"]


async def test_the_handle_of_an_interrupted_run_returns_interrupted(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """An interrupt cancels the workflow, which publishes no outcome: ``result()`` returns
    the ``interrupted`` outcome instead of raising DBOS's cancellation error."""
    h = await runtime.start("asker", "wait for me")
    await until(lambda: client.pending(session_id=h.session_id), "the wait never opened")
    out = await asyncio.to_thread(client.interrupt, h.session_id)
    assert h.session_id in out.interrupted_sessions, out
    res = await asyncio.wait_for(h.result(), 20)
    assert (res.session_id, res.run_seq, res.status) == (h.session_id, 1, "interrupted")
