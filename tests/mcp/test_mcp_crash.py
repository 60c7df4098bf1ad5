"""MCP calls across worker SIGKILLs (real worker processes, a real MCP server in its own
process, real Postgres): a destructive call ran at most once; a read-only or idempotent
call of a trusted server ran again only where the crash cut it; the tool list a run saw
is the one its recovery uses, though the server changed meanwhile; a server's question
waits across a restart, and a stale ``requestState`` is asked again, not an error."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dbos_agents.records import PendingCall
from dbos_agents.testing import CrashHarness, Witness

from .conftest import McpServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.crash]

# (crash point of the call's attempt, executions of the tool after the recovery, whether
# the model reads the result or an unknown outcome), per policy
AT_MOST_ONCE = {
    "after_dispatch_mark": (0, "unknown"),
    "after_handler": (1, "unknown"),
    "after_tool_result": (1, "result"),
}
RUN_AGAIN = {
    "after_dispatch_mark": (1, "result"),
    "after_handler": (2, "result"),
    "after_tool_result": (1, "result"),
}
CASES = [
    ("create_ticket", {"title": "t"}, "ticket opened: t", AT_MOST_ONCE),
    ("lookup", {"query": "q"}, '"customer":"Ada"', RUN_AGAIN),
    ("set_status", {"ticket": "T1", "status": "closed"}, "T1 is closed", RUN_AGAIN),
    # the server asked a question, and the worker died before a continuation asked it:
    # the call's outcome is unknown (nothing ran on the server, but nothing says so)
    ("refund", {"cents": 1}, "refunded", {"after_handler": (0, "unknown")}),
]


# By default every window of the destructive tool and one each of the others (-m slow: all).
DEFAULT = {"create_ticket", ("lookup", "after_handler"), ("set_status", "after_dispatch_mark")}


@pytest.mark.parametrize(
    ("tool", "args", "said", "point", "expected"),
    [
        pytest.param(
            tool,
            args,
            said,
            point,
            table[point],
            id=f"{tool}-{point}",
            marks=[] if {tool, (tool, point)} & (DEFAULT | {"refund"}) else [pytest.mark.slow],
        )
        for tool, args, said, table in CASES
        for point in table
    ],
)
def test_a_sigkill_mid_call_runs_the_tool_as_its_policy_says(
    harness: CrashHarness,
    mcp_server: McpServerProcess,
    tmp_path: Path,
    tool: str,
    args: dict[str, object],
    said: str,
    point: str,
    expected: tuple[int, str],
) -> None:
    harness.witness = tmp_path / "model.jsonl"
    drill = harness.drill(f"call_{tool}", json.dumps(args), crash_at=point)
    assert drill.crashed, f"{point} never reached:\n{drill.logs[0][-3000:]}"
    executions, seen = expected
    (call,) = drill.tool_calls
    assert mcp_server.executions(tool, call.idempotency_key) == executions
    output = drill.session.final_output or ""
    if seen == "result":
        assert said.replace(" ", "") in output.replace(" ", ""), output
    else:
        assert call.error_kind == "tool-durability-error", call
        assert "unknown" in output and said.replace(" ", "") not in output.replace(" ", "")
    assert Witness(harness.witness).count("model", turn=0) == 1  # the model was asked once


def test_a_sigkill_while_the_server_runs_a_destructive_call_never_repeats_it(
    harness: CrashHarness, mcp_server: McpServerProcess, tmp_path: Path
) -> None:
    """Not at a boundary of ours: the worker dies while the server is inside the call."""
    harness.witness = tmp_path / "model.jsonl"
    sid = harness.client.start("call_create_ticket", json.dumps({"title": "slow", "delay": 3}))
    first = harness.start_worker()
    try:
        deadline = time.monotonic() + 60
        while not mcp_server.executions("create_ticket") or not harness.client.tool_calls(sid):
            assert time.monotonic() < deadline, first.log()[-2000:]
            time.sleep(0.05)
        (call,) = harness.client.tool_calls(sid)
        while mcp_server.executions("create_ticket", call.idempotency_key) == 0:
            assert time.monotonic() < deadline, first.log()[-2000:]
            time.sleep(0.02)
    finally:
        first.kill()
    second = harness.start_worker()
    try:
        info = harness.client.wait(sid, timeout=60)
    finally:
        second.stop()
    assert mcp_server.executions("create_ticket", call.idempotency_key) == 1
    (after,) = harness.client.tool_calls(sid)
    assert after.error_kind == "tool-durability-error", after
    assert info.status == "completed"


def _wait_for_question(h: CrashHarness, sid: str, after: set[str]) -> PendingCall:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        fresh = [w for w in h.client.pending(session_id=sid) if w.tool_call_id not in after]
        if fresh:
            return fresh[0]
        time.sleep(0.1)
    raise TimeoutError(f"no question for {sid}")


def test_a_question_waits_across_a_worker_sigkill_and_its_answer_finishes_the_call(
    harness: CrashHarness, mcp_server: McpServerProcess, tmp_path: Path
) -> None:
    harness.witness = tmp_path / "model.jsonl"
    sid = harness.client.start("call_refund", json.dumps({"cents": 700}))
    first = harness.start_worker()
    try:
        wait = _wait_for_question(harness, sid, set())
    finally:
        first.kill()  # SIGKILL while the session waits on the server's question
    second = harness.start_worker()
    try:
        second.wait_ready()
        outcome = harness.client.submit_tool_result(
            sid, wait.tool_call_id, result={"approve": True, "note": "after a crash"}
        )
        assert outcome.status == "accepted", outcome
        info = harness.client.wait(sid, timeout=60)
    finally:
        second.stop()
    assert info.final_output == "tool said: refunded 700 cents (after a crash)", info
    (call,) = harness.client.tool_calls(sid)
    assert mcp_server.executions("refund", call.idempotency_key) == 1


def test_a_stale_request_state_asks_the_question_again(
    harness: CrashHarness, mcp_server: McpServerProcess, tmp_path: Path
) -> None:
    """The server's state key rotates while the question waits: the retry with the old
    state is refused, so the call starts over and the server asks again."""
    harness.witness = tmp_path / "model.jsonl"
    sid = harness.client.start("call_refund", json.dumps({"cents": 5}))
    worker = harness.start_worker()
    try:
        first = _wait_for_question(harness, sid, set())
        mcp_server.restart(state_key="rotated-state-key-0123456789abcdef-0123456789")
        harness.client.submit_tool_result(
            sid, first.tool_call_id, result={"approve": False, "note": "first"}
        )
        second = _wait_for_question(harness, sid, {first.tool_call_id})
        harness.client.submit_tool_result(
            sid, second.tool_call_id, result={"approve": True, "note": "asked again"}
        )
        info = harness.client.wait(sid, timeout=60)
    finally:
        worker.stop()
        mcp_server.restart()
    assert info.final_output == "tool said: refunded 5 cents (asked again)", info


def test_a_recovery_uses_the_tool_list_its_run_recorded(
    harness: CrashHarness, mcp_server: McpServerProcess, tmp_path: Path
) -> None:
    """The server drops ``lookup`` and adds ``lookup_v2`` between the crash and the
    recovery: the recovered run offers the model the list it first saw, and its recorded
    call of ``lookup`` gets the server's answer (an unknown tool now) as a tool error."""
    harness.witness = tmp_path / "model.jsonl"
    witness = Witness(harness.witness)
    sid = harness.client.start("call_lookup", json.dumps({"query": "q"}))
    first = harness.start_worker("after_model_step", session_id=sid)
    assert first.wait(60) < 0, first.log()[-2000:]  # killed after the model's first turn
    mcp_server.restart("b")
    second = harness.start_worker()
    try:
        info = harness.client.wait(sid, timeout=60)
    finally:
        second.stop()
        mcp_server.restart()
    assert info.status == "completed", info
    turns = witness.events("model", agent="call_lookup")
    assert turns and all("lookup" in e["tools"] and "lookup_v2" not in e["tools"] for e in turns)
    (call,) = harness.client.tool_calls(sid)
    assert call.error_kind == "tool-error" and "lookup" in (info.final_output or ""), call
