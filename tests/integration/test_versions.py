"""Workflow versions: new runs are ``session.v2`` (server tools replay from the ledger, no
DBOS step of their own); ``session.v1`` stays registered and still runs, so a run started
before an upgrade recovers on the step sequence it began with."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from dbos import DBOS, SetWorkflowID

from dbos_agents import AgentClient, AgentRuntime
from dbos_agents.ids import WORKFLOW_NAME, WORKFLOW_NAME_V1, new_session_id, run_workflow_id
from dbos_agents.outcome import RunSpec
from dbos_agents.runtime.workflow import session_workflow_v1
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


async def test_v2_runs_tools_without_step_checkpoints_and_v1_still_runs(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    h = await runtime.start("support", "v2 please")
    out = await h.result()
    assert out.status == "completed"
    name, steps = await asyncio.to_thread(_steps, integration_database_url, h.workflow_id)
    assert name == WORKFLOW_NAME
    assert not [s for s in steps if s.startswith("dbos_agents.tool.v1:")], steps
    v2_calls = await asyncio.to_thread(client.tool_calls, h.session_id)
    assert [(c.tool, c.status, c.attempts) for c in v2_calls] == [
        ("get_order", "completed", 1),
        ("refund", "completed", 1),
    ]

    # A run as a pre-upgrade worker would have started it.
    sid = new_session_id()
    with client.engine.begin() as conn:
        sessions.insert_queued(conn, sid, "support", None, None)
    spec = RunSpec(
        session_id=sid,
        root_session_id=sid,
        parent_session_id=None,
        agent="support",
        run_seq=1,
        message="v1 please",
        user_id=None,
        tenant_id=None,
    )
    with SetWorkflowID(run_workflow_id(sid, 1)):
        handle = await DBOS.start_workflow_async(session_workflow_v1, spec)
    assert (await handle.get_result())["status"] == "completed"
    name, steps = await asyncio.to_thread(_steps, integration_database_url, handle.workflow_id)
    assert name == WORKFLOW_NAME_V1
    assert [s for s in steps if s.startswith("dbos_agents.tool.v1:")] == [
        "dbos_agents.tool.v1:get_order",
        "dbos_agents.tool.v1:refund",
    ]
    v1_calls = await asyncio.to_thread(client.tool_calls, sid)
    assert [(c.tool, c.status, c.attempts) for c in v1_calls] == [
        (c.tool, c.status, c.attempts) for c in v2_calls
    ]
