"""An MCP server's tools through a real worker: listed once per run and recorded, called
with the idempotency key in ``_meta``, tool errors read by the model, bad arguments stopped
before the server, a server's question answered through the session's pending waits."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from dbos_agents import InvalidResultError
from dbos_agents.events import PendingEvent
from dbos_agents.ids import idempotency_key
from dbos_agents.records import PendingCall
from dbos_agents.testing import CrashHarness, WorkerProcess

from .conftest import McpServerProcess

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def worker(harness: CrashHarness) -> Iterator[WorkerProcess]:
    w = harness.start_worker()
    w.wait_ready()
    yield w
    w.stop()


def _run(h: CrashHarness, agent: str, args: dict[str, object]) -> tuple[str, str]:
    sid = h.client.start(agent, json.dumps(args))
    info = h.client.wait(sid, timeout=60)
    assert info.status == "completed", info
    return sid, info.final_output or ""


def _key(h: CrashHarness, sid: str) -> str:
    (call,) = h.client.tool_calls(sid)
    assert call.idempotency_key == idempotency_key(sid, call.tool_call_id)
    return call.idempotency_key


def test_a_destructive_tool_runs_once_with_the_call_key_in_meta(
    harness: CrashHarness, worker: WorkerProcess, mcp_server: McpServerProcess
) -> None:
    sid, out = _run(harness, "call_create_ticket", {"title": "printer on fire"})
    assert out == "tool said: ticket opened: printer on fire"
    assert mcp_server.executions("create_ticket", _key(harness, sid)) == 1


def test_structured_results_reach_the_model_as_json(
    harness: CrashHarness, worker: WorkerProcess
) -> None:
    _, out = _run(harness, "call_lookup", {"query": "ada@example.com"})
    assert json.loads(out.removeprefix("tool said: ")) == {
        "query": "ada@example.com",
        "customer": "Ada",
    }


def test_a_tool_error_is_the_model_s_to_read(harness: CrashHarness, worker: WorkerProcess) -> None:
    sid, out = _run(harness, "call_broken", {})
    (call,) = harness.client.tool_calls(sid)
    assert (call.kind, call.status, call.error_kind) == ("server", "failed", "tool-error")
    assert "Error executing tool broken" in out, out


def test_arguments_that_fail_the_server_schema_never_reach_it(
    harness: CrashHarness, worker: WorkerProcess, mcp_server: McpServerProcess
) -> None:
    before = mcp_server.executions("create_ticket")
    _, out = _run(harness, "call_create_ticket", {"title": 42})
    assert "invalid-arguments" in out and "title" in out, out
    assert mcp_server.executions("create_ticket") == before


def test_the_tool_list_is_read_once_per_run_and_recorded_with_its_first_turn(
    harness: CrashHarness, worker: WorkerProcess
) -> None:
    sid, _ = _run(harness, "call_lookup", {"query": "x"})
    with harness.client.engine.connect() as conn:
        recorded = conn.execute(
            sa.text(
                "SELECT turn, response->'tools' FROM dbos_agents.usage WHERE session_id = :s"
                " ORDER BY turn"
            ),
            {"s": sid},
        ).all()
    (first, listed), (_, later) = recorded
    assert first == 1 and later is None  # the run's first turn only
    (desk,) = listed
    assert desk["server"] == "desk" and desk["error"] is None
    assert "lookup" in {t["name"] for t in desk["tools"]}


def test_a_server_question_is_a_pending_wait_answered_by_a_submit(
    harness: CrashHarness, worker: WorkerProcess, mcp_server: McpServerProcess
) -> None:
    sid = harness.client.start("call_refund", json.dumps({"cents": 250}))
    deadline = time.monotonic() + 30
    waits = []
    while time.monotonic() < deadline and not waits:
        waits = harness.client.pending(session_id=sid)
        time.sleep(0.1)
    (wait,) = waits
    assert wait.tool == "refund" and wait.kind == "client"
    assert isinstance(wait.arguments, dict)
    assert wait.arguments["message"] == "Refund 250 cents?"
    assert wait.output_schema is not None and "approve" in wait.output_schema["properties"]
    assert mcp_server.executions("refund", _key(harness, sid)) == 0  # asked, not run
    # readers of the live log see the question as a wait to answer
    shown = [e for e in harness.client.read_events(sid).events if isinstance(e, PendingEvent)]
    assert [(e.tool_call_id, e.tool) for e in shown] == [(wait.tool_call_id, "refund")]
    # an answer that fails the server's schema changes nothing
    with pytest.raises(InvalidResultError) as bad:
        harness.client.submit_tool_result(sid, wait.tool_call_id, result={"approve": "maybe"})
    assert "approve" in str(bad.value.errors)
    assert [w.tool_call_id for w in harness.client.pending(session_id=sid)] == [wait.tool_call_id]
    outcome = harness.client.submit_tool_result(
        sid, wait.tool_call_id, result={"approve": True, "note": "by test"}
    )
    assert outcome.status == "accepted"
    info = harness.client.wait(sid, timeout=60)
    assert info.final_output == "tool said: refunded 250 cents (by test)", info
    assert mcp_server.executions("refund", _key(harness, sid)) == 1


def test_a_declined_question_goes_back_to_the_server_as_declined(
    harness: CrashHarness, worker: WorkerProcess, mcp_server: McpServerProcess
) -> None:
    sid = harness.client.start("call_refund", json.dumps({"cents": 9}))
    deadline = time.monotonic() + 30
    waits: list[PendingCall] = []
    while time.monotonic() < deadline and not waits:
        waits = harness.client.pending(session_id=sid)
        time.sleep(0.1)
    (wait,) = waits
    harness.client.submit_tool_result(sid, wait.tool_call_id, error="the customer said no")
    info = harness.client.wait(sid, timeout=60)
    (call,) = harness.client.tool_calls(sid)
    # the server's tool asked with an unwrapped model: a decline aborts its call
    assert call.error_kind == "tool-error", call
    assert "elicitation was decline" in (info.final_output or ""), info.final_output
    assert mcp_server.executions("refund", call.idempotency_key) == 0


def test_an_unanswered_question_is_cancelled_at_its_deadline(
    harness: CrashHarness, worker: WorkerProcess, mcp_server: McpServerProcess
) -> None:
    sid = harness.client.start("hurry_refund", json.dumps({"cents": 9}))
    info = harness.client.wait(sid, timeout=60)
    (call,) = harness.client.tool_calls(sid)
    assert call.error_kind == "tool-error", call
    assert "elicitation was cancel" in (info.final_output or ""), info.final_output
    assert mcp_server.executions("refund", call.idempotency_key) == 0


def test_a_server_down_when_the_run_starts_leaves_the_model_a_clear_note(
    harness: CrashHarness, worker: WorkerProcess
) -> None:
    sid = harness.client.start("down_lookup", json.dumps({"query": "q"}))
    info = harness.client.wait(sid, timeout=60)
    assert info.status == "completed", info
    (call,) = harness.client.tool_calls(sid)
    assert call.error_kind == "unknown-tool", call
    out = info.final_output or ""
    assert "MCP server 'gone'" in out and "unavailable in this run" in out, out
