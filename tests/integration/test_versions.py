"""The session workflow's DBOS operation sequence, which recovery replays: one registered
workflow (``dbos_agents.session.v4``). Its model turns, server tools and the run's end,
with the outcome event, replay from our own rows and record no DBOS operation; a wait
records its ``recv`` and the ``recv``'s sleep; an approved call runs its tool as a DBOS
step. A change to this sequence keeps the previous release's runs recoverable
(docs/architecture.md, "Releases"; ``tests/upgrade``)."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from dbos_agents import AgentClient, AgentRuntime
from dbos_agents.ids import WORKFLOW_NAME
from dbos_agents.store import runs

from .polling import until

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


async def _one_pending(client: AgentClient, sid: str) -> Any:
    rows = await until(lambda: client.pending(session_id=sid), f"no pending call for {sid}")
    return rows[0]


async def test_a_run_without_waits_records_no_dbos_operation(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    h = await runtime.start("support", "refund please")
    out = await h.result()
    assert out.status == "completed"
    name, steps = await asyncio.to_thread(_steps, integration_database_url, h.workflow_id)
    assert name == WORKFLOW_NAME
    # No model or tool step, no begin or end transaction, no outcome event operation: the
    # outcome is a row the run's end writes (``store.runs``).
    assert steps == [], steps
    assert await asyncio.to_thread(runs.get, client.engine, h.session_id, 1) == out
    calls = await asyncio.to_thread(client.tool_calls, h.session_id)
    assert [(c.tool, c.status, c.attempts) for c in calls] == [
        ("get_order", "completed", 1),
        ("refund", "completed", 1),
    ]


async def test_a_wait_opens_with_the_turn_and_records_only_its_recv(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    """A client-tool wait: its pending row and the call's dispatch mark commit with the
    model turn (no datasource transaction, no deadline step), so the run's only DBOS
    operations are the recv and its sleep."""
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
    (call,) = await asyncio.to_thread(client.tool_calls, h.session_id)
    assert (call.status, call.attempts) == ("completed", 1)


async def test_an_approved_call_runs_its_tool_as_a_dbos_step(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    h = await runtime.start("closer", "close acct-1")
    p = await _one_pending(client, h.session_id)
    outcome = await asyncio.to_thread(
        client.submit_approval, h.session_id, p.tool_call_id, True, decided_by="ops"
    )
    assert outcome.status == "accepted"
    assert (await h.result()).status == "completed"
    _, steps = await asyncio.to_thread(_steps, integration_database_url, h.workflow_id)
    assert steps == ["DBOS.recv", "DBOS.sleep", "dbos_agents.tool.v1:close_account"], steps
