"""Durable tools end to end, in-process, against real Postgres and real DBOS: the body runs
as a child workflow, inner steps are recorded one by one, checkpoints, progress notes,
questions to a human and a browser mid-tool, a timeout and an interrupt. (Crashes and
deploys: tests/crash/test_durable_crash.py.)"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import sqlalchemy as sa

from dbos_agents import (
    AgentClient,
    AgentRuntime,
    AsyncAgentClient,
    PendingEvent,
    ProgressEvent,
    SessionEvent,
    StatusEvent,
)
from dbos_agents.ids import durable_workflow_id

from .durable_agents import CANCELLED, EFFECTS, STARTED
from .polling import until

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _rows(client: AgentClient, sql: str, **params: Any) -> list[Any]:
    with client.engine.connect() as conn:
        return list(conn.execute(sa.text(sql), params))


async def _asking(
    runtime: AgentRuntime, client: AgentClient, agent: str, message: str
) -> tuple[Any, str, Any]:
    """A session whose durable tool is waiting for its approval: (handle, id, the wait)."""
    h = await runtime.start(agent, message)
    (wait,) = await until(lambda: client.pending(session_id=h.session_id), "approval wait")
    return h, h.session_id, wait


def _tool_result(history: list[Any]) -> Any:
    (msg,) = [m for m in history if m.role == "tool"]
    try:
        return json.loads(msg.content or "null")
    except json.JSONDecodeError:  # a string result is the message as is
        return msg.content


async def test_a_durable_tool_records_each_inner_step_and_its_snapshot(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("crawler", "4")
    out = await h.result()
    assert out.status == "completed", out
    sid = h.session_id
    result = _tool_result(await h.history())
    assert result == {"pages": 4, "words": 100, "snapshot": {"done": 4, "words": 100}}
    assert out.output == "result: " + json.dumps(result, separators=(",", ":"), sort_keys=True)
    # every inner step ran once and is recorded, in the order the body started them
    for n in range(1, 5):
        assert EFFECTS[f"fetch:{sid}:{n}"] == 1 and EFFECTS[f"store:{sid}:{n}"] == 1
    (call,) = await asyncio.to_thread(client.tool_calls, sid)
    assert (call.kind, call.status) == ("durable", "completed")
    wf = durable_workflow_id(h.workflow_id, call.tool_call_id)
    steps = _rows(
        client,
        "SELECT seq, name, safe_to_retry, status, output FROM dbos_agents.tool_steps"
        " WHERE workflow_id = :w ORDER BY seq",
        w=wf,
    )
    assert [(s.seq, s.name, s.safe_to_retry, s.status) for s in steps] == [
        (i * 2 + k + 1, f"{('fetch', 'store')[k]}-{i + 1}", k == 0, "completed")
        for i in range(4)
        for k in (0, 1)
    ]
    assert steps[0].output == {"n": 1, "words": 10}
    (row,) = _rows(
        client,
        "SELECT status, executions, snapshot, snapshot_no FROM dbos_agents.durable_tools"
        " WHERE workflow_id = :w",
        w=wf,
    )
    assert (row.status, row.executions, row.snapshot_no) == ("completed", 1, 4)
    assert row.snapshot == {"done": 4, "words": 100}
    status = await asyncio.to_thread(lambda: client.dbos.retrieve_workflow(wf).get_status())
    assert status is not None and status.status == "SUCCESS"


async def test_an_interrupt_cancels_a_running_durable_tool(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("long_worker", "60")
    sid = h.session_id
    await until(lambda: STARTED.get(sid) is not None and STARTED[sid].is_set(), "step started")
    await asyncio.to_thread(client.interrupt, sid)
    out = await asyncio.wait_for(h.result(), 20)
    assert out.status == "interrupted"
    # the inner step was cancelled in the middle (not left running for its 60 seconds),
    # the step after it never ran, and the tool's workflow is cancelled in DBOS
    await until(lambda: CANCELLED[sid] == 1, "inner step cancelled", within=10)
    assert EFFECTS[f"slept:{sid}"] == 0 and EFFECTS[f"after:{sid}"] == 0
    (call,) = await asyncio.to_thread(client.tool_calls, sid)
    wf = durable_workflow_id(h.workflow_id, call.tool_call_id)
    (row,) = _rows(
        client, "SELECT status FROM dbos_agents.durable_tools WHERE workflow_id = :w", w=wf
    )
    assert row.status == "interrupted"
    status = await asyncio.to_thread(lambda: client.dbos.retrieve_workflow(wf).get_status())
    assert status is not None and status.status == "CANCELLED"


async def test_a_durable_tool_past_its_timeout_is_stopped_and_the_model_reads_it(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("hasty", "30")
    out = await asyncio.wait_for(h.result(), 20)
    assert out.status == "completed", out
    result = _tool_result(await h.history())
    assert result["error"]["kind"] == "tool-timeout"
    assert "within its timeout of 1 seconds" in result["error"]["message"]
    await until(lambda: CANCELLED[h.session_id] == 1, "inner step cancelled", within=10)


async def test_a_checkpoint_that_is_not_json_fails_at_the_call_naming_the_path(
    runtime: AgentRuntime,
) -> None:
    h = await runtime.start("bad_saver", "go")
    out = await h.result()
    assert out.status == "completed", out
    error = _tool_result(await h.history())["error"]
    assert error["kind"] == "tool-error"
    assert error["message"].startswith("NotJSONError: the checkpoint is not JSON at $.ok[2].when")


async def test_an_inner_step_that_raises_is_a_typed_error_the_tool_can_catch(
    runtime: AgentRuntime,
) -> None:
    h = await runtime.start("failer", "go")
    out = await h.result()
    assert out.status == "completed", out
    assert _tool_result(await h.history()) == "caught RuntimeError: disk full"


async def test_ask_waits_for_an_approval_and_a_browser_in_the_middle_of_a_tool(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    h = await runtime.start("refunder", "700")
    sid = h.session_id
    live: list[SessionEvent] = []
    asked: list[PendingEvent] = []
    changed = asyncio.Event()

    async def follow() -> None:
        async with await AsyncAgentClient.connect(integration_database_url) as reader:
            async for e in reader.stream(sid, timeout=60, poll=30):
                live.append(e)
                if isinstance(e, PendingEvent):
                    asked.append(e)
                    changed.set()
                if isinstance(e, StatusEvent):
                    return

    following = asyncio.ensure_future(follow())
    await asyncio.wait_for(changed.wait(), 30)
    # the live stream shows the wait, right after the note the tool opened it with
    (wait,) = asked
    assert (wait.kind, wait.tool, wait.arguments) == (
        "approval",
        "guarded_refund",
        {"refund_cents": 700},
    )
    note = live[live.index(wait) - 1]
    assert isinstance(note, ProgressEvent) and note.note == "waiting for approval"
    assert wait.tool_call_id == f"{note.tool_call_id}.ask{note.part}"
    assert [p.tool_call_id for p in client.pending(session_id=sid)] == [wait.tool_call_id]
    changed.clear()
    outcome = await asyncio.to_thread(
        client.submit_approval, sid, wait.tool_call_id, True, decided_by="ops@example.com"
    )
    assert outcome.status == "accepted", outcome
    await asyncio.wait_for(changed.wait(), 30)
    ask = asked[-1]
    assert (ask.kind, ask.tool, ask.arguments) == (
        "client",
        "confirm_mid",
        {"question": "refund 700?"},
    )
    assert ask.output_schema is not None and "ok" in json.dumps(ask.output_schema)
    done = await asyncio.to_thread(
        lambda: client.submit_tool_result(sid, ask.tool_call_id, result={"ok": True, "note": "yes"})
    )
    assert done.status == "accepted", done
    out = await asyncio.wait_for(h.result(), 20)
    await asyncio.wait_for(following, 20)
    assert out.status == "completed", out
    assert _tool_result(await h.history()) == "refunded 700 (yes)"
    assert EFFECTS[f"refund:{sid}:700"] == 1
    assert len(asked) == 2
    # answered again: already completed, nothing runs twice
    again = await asyncio.to_thread(
        lambda: client.submit_tool_result(sid, ask.tool_call_id, result={"ok": True})
    )
    assert again.status == "already_completed"
    (row,) = [
        p for p in client.pending(session_id=sid, include_resolved=True) if p.kind == "approval"
    ]
    assert row.status == "resolved" and isinstance(row.submission, dict)
    assert row.submission["decided_by"] == "ops@example.com"


async def test_an_interrupt_while_a_durable_tool_asks_closes_the_wait_and_stops_it(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h, sid, wait = await _asking(runtime, client, "refunder", "900")
    await asyncio.to_thread(client.interrupt, sid)
    out = await asyncio.wait_for(h.result(), 20)
    assert out.status == "interrupted"
    late = await asyncio.to_thread(client.submit_approval, sid, wait.tool_call_id, True)
    assert late.status == "unknown_tool_call"  # the wait was cancelled with the run
    (row,) = _rows(
        client, "SELECT status FROM dbos_agents.durable_tools WHERE session_id = :s", s=sid
    )
    assert row.status == "interrupted"
    assert EFFECTS[f"refund:{sid}:900"] == 0


async def test_an_ask_past_its_deadline_raises_in_the_tool_and_closes_the_wait(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h, sid, wait = await _asking(runtime, client, "hurried", "300")
    out = await asyncio.wait_for(h.result(), 30)
    assert out.status == "completed", out
    assert _tool_result(await h.history()) == "no answer within 1s"
    assert client.pending(session_id=sid) == []  # no wait left open for an inbox to show
    (row,) = client.pending(session_id=sid, include_resolved=True)
    assert (row.tool_call_id, row.status) == (wait.tool_call_id, "timed_out")
    late = await asyncio.to_thread(client.submit_approval, sid, wait.tool_call_id, True)
    assert late.status == "late_answer_after_timeout", late
    assert EFFECTS[f"refund:{sid}:300"] == 0
