"""Workflow versions: new runs are ``session.v4`` (the model turn, the server tools and the
run's end, with its outcome event, replay from our rows: no DBOS operation of their own);
``session.v3``, ``v2`` and ``v1`` stay registered and still run, so a run started before an
upgrade recovers on the operation sequence it began with."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from dbos import DBOS, SetWorkflowID

from dbos_agents import AgentClient, AgentRuntime
from dbos_agents.ids import (
    WORKFLOW_NAME,
    WORKFLOW_NAME_V1,
    WORKFLOW_NAME_V2,
    WORKFLOW_NAME_V3,
    new_session_id,
    run_workflow_id,
)
from dbos_agents.outcome import RunSpec
from dbos_agents.runtime.workflow import (
    session_workflow_v1,
    session_workflow_v2,
    session_workflow_v3,
)
from dbos_agents.store import sessions

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _steps(url: str, workflow_id: str) -> tuple[str, list[str]]:
    with psycopg.connect(url) as conn:
        (name,) = conn.execute(
            "SELECT name FROM dbos.workflow_status WHERE workflow_uuid = %s", (workflow_id,)
        ).fetchone() or (None,)
        steps = [
            r[0]
            for r in conn.execute(
                "SELECT function_name FROM dbos.operation_outputs WHERE workflow_uuid = %s"
                " ORDER BY function_id",
                (workflow_id,),
            )
        ]
    return str(name), steps


async def _start_old(
    client: AgentClient, workflow: Any, message: str, agent: str = "support"
) -> Any:
    """A run as a pre-upgrade worker would have started it (its workflow id is the
    session id)."""
    sid = new_session_id()
    with client.engine.begin() as conn:
        sessions.insert_queued(conn, sid, agent, None, None)
    spec = RunSpec(
        session_id=sid,
        root_session_id=sid,
        parent_session_id=None,
        agent=agent,
        run_seq=1,
        message=message,
        user_id=None,
        tenant_id=None,
    )
    with SetWorkflowID(run_workflow_id(sid, 1)):
        return await DBOS.start_workflow_async(workflow, spec)


async def test_v4_records_no_dbos_operation_and_v3_v2_v1_still_run(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    h = await runtime.start("support", "v4 please")
    out = await h.result()
    assert out.status == "completed"
    name, steps = await asyncio.to_thread(_steps, integration_database_url, h.workflow_id)
    assert name == WORKFLOW_NAME
    # No model or tool step, no begin or end transaction, no outcome event operation: the
    # event is a row of the run's end, read back by DBOS's get_event as before.
    assert steps == [], steps
    event = await DBOS.get_event_async(h.workflow_id, "run:1", 0)
    assert event == out.model_dump(mode="json")
    v3_calls = await asyncio.to_thread(client.tool_calls, h.session_id)

    handle = await _start_old(client, session_workflow_v3, "v3 please")
    assert (await handle.get_result())["status"] == "completed"
    name, steps = await asyncio.to_thread(_steps, integration_database_url, handle.workflow_id)
    assert name == WORKFLOW_NAME_V3
    assert steps == ["DBOS.setEvent"], steps
    assert [(c.tool, c.status, c.attempts) for c in v3_calls] == [
        ("get_order", "completed", 1),
        ("refund", "completed", 1),
    ]
    info = await asyncio.to_thread(client.session, h.session_id)
    assert (info.status, info.turns) == ("completed", out.turns)

    handle = await _start_old(client, session_workflow_v2, "v2 please")
    assert (await handle.get_result())["status"] == "completed"
    name, steps = await asyncio.to_thread(_steps, integration_database_url, handle.workflow_id)
    assert name == WORKFLOW_NAME_V2
    assert steps.count("dbos_agents.model.v2") == out.turns, steps
    assert "dbos_agents.finish_run.v3" in steps and "dbos_agents.begin_run.v2" in steps
    assert not [s for s in steps if s.startswith("dbos_agents.tool.v1:")], steps

    handle = await _start_old(client, session_workflow_v1, "v1 please")
    assert (await handle.get_result())["status"] == "completed"
    name, steps = await asyncio.to_thread(_steps, integration_database_url, handle.workflow_id)
    assert name == WORKFLOW_NAME_V1
    assert [s for s in steps if s.startswith("dbos_agents.tool.v1:")] == [
        "dbos_agents.tool.v1:get_order",
        "dbos_agents.tool.v1:refund",
    ]
    assert steps.count("dbos_agents.model.v2") == out.turns, steps
    for wf in (h.session_id, handle.workflow_id):  # v4 and v1 recorded the same calls
        calls = await asyncio.to_thread(client.tool_calls, wf.split(":")[0])
        assert [(c.tool, c.status, c.attempts) for c in calls] == [
            (c.tool, c.status, c.attempts) for c in v3_calls
        ]


async def _one_pending(client: AgentClient, sid: str) -> Any:
    for _ in range(600):
        rows = await asyncio.to_thread(client.pending, session_id=sid)
        if rows:
            return rows[0]
        await asyncio.sleep(0.05)
    raise TimeoutError(f"no pending call for {sid}")


async def test_v4_wait_opens_with_the_turn_and_records_only_its_recv(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    """A v4 client-tool wait: its pending row and the call's dispatch mark commit with the
    model turn (no datasource transaction, no deadline step), so the run's only DBOS
    operations are the recv and its sleep. A v3 run still records both."""
    h = await runtime.start("asker", "ship it?")
    p = await _one_pending(client, h.session_id)
    assert 590 < (p.deadline - p.created_at).total_seconds() <= 600
    (call,) = await asyncio.to_thread(client.tool_calls, h.session_id)
    assert (call.status, call.attempts) == ("dispatched", 1)
    await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
    )
    assert (await h.result()).status == "completed"
    name, steps = await asyncio.to_thread(_steps, integration_database_url, h.workflow_id)
    assert name == WORKFLOW_NAME
    assert steps == ["DBOS.recv", "DBOS.sleep"], steps

    handle = await _start_old(client, session_workflow_v3, "ship it?", agent="asker")
    sid = handle.workflow_id
    p = await _one_pending(client, sid)
    await asyncio.to_thread(client.submit_tool_result, sid, p.tool_call_id, result={"ok": True})
    assert (await handle.get_result())["status"] == "completed"
    name, steps = await asyncio.to_thread(_steps, integration_database_url, handle.workflow_id)
    assert name == WORKFLOW_NAME_V3
    assert steps == [
        "dbos_agents.dispatch_waits.v1",
        "dbos_agents.remaining.v1",
        "DBOS.recv",
        "DBOS.sleep",
        "DBOS.setEvent",
    ], steps
    (call,) = await asyncio.to_thread(client.tool_calls, sid)
    assert (call.status, call.attempts) == ("completed", 1)
