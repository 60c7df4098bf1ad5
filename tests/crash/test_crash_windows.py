"""Crash windows of DESIGN §3, each SIGKILLing a real worker process at a named point.

Parametrized over the window table and the three tool kinds; the witness file (outside the
worker) counts side effects and model calls across the kill and the restart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from dbos_agents.ids import run_workflow_id
from dbos_agents.store import runs
from dbos_agents.testing import CRASH_POINTS, CrashHarness, DrillResult, Witness

pytestmark = [pytest.mark.integration, pytest.mark.crash]

REPO = Path(__file__).resolve().parents[2]

# window -> (model calls expected for turn 0, {tool kind: expected executions, result kind})
# Result kind: "ok", "verified" (settled by verify) or the error kind the model sees.
WINDOWS: dict[str, tuple[int, dict[str, tuple[int, str]]]] = {
    # The provider answered, nothing of the turn recorded: the model is asked again.
    "model_answered": (2, {"charge": (1, "ok"), "lookup": (1, "ok"), "refund": (1, "ok")}),
    # The turn recorded, the step not checkpointed: the recorded turn is replayed.
    "model_call": (1, {"charge": (1, "ok"), "lookup": (1, "ok"), "refund": (1, "ok")}),
    # Model step checkpointed: replayed, never asked again; ledger 'requested'.
    "after_model_step": (1, {"charge": (1, "ok"), "lookup": (1, "ok"), "refund": (1, "ok")}),
    # Ledger 'dispatched', handler never ran: side-effecting -> durability error, not run;
    # safe -> re-run; verify -> "did not happen" -> run once for real.
    "after_dispatch_mark": (
        1,
        {"charge": (0, "tool-durability-error"), "lookup": (1, "ok"), "refund": (1, "ok")},
    ),
    # Handler returned, result row not committed: side-effecting -> durability error, never
    # a second run; safe -> re-run (two reads); verify -> "it happened" -> its result.
    "after_handler": (
        1,
        {"charge": (1, "tool-durability-error"), "lookup": (2, "ok"), "refund": (1, "verified")},
    ),
    # Result row committed, step checkpoint lost: the recorded result is returned, no re-run.
    "after_tool_result": (1, {"charge": (1, "ok"), "lookup": (1, "ok"), "refund": (1, "ok")}),
    # Tool output checkpointed, not yet in the transcript: replayed and recorded by the
    # next model step, not re-run.
    "after_tool_steps": (1, {"charge": (1, "ok"), "lookup": (1, "ok"), "refund": (1, "ok")}),
    # The run's end committed, with its outcome event (session.v4): the replay reads every
    # turn and result back, ends the workflow and asks the model nothing.
    "after_run_end": (1, {"charge": (1, "ok"), "lookup": (1, "ok"), "refund": (1, "ok")}),
}


def test_the_window_table_covers_every_crash_point() -> None:
    """A new crash point cannot escape the suite: it must get a row here."""
    assert list(WINDOWS) == list(CRASH_POINTS)


CASES = [(w, k) for w in WINDOWS for k in ("charge", "lookup", "refund")]


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    logs = tmp_path_factory.mktemp("crash-logs")
    with CrashHarness("tests.crash.app:runtime", fresh_database_url, log_dir=logs, cwd=REPO) as h:
        yield h


def _workflow_status(h: CrashHarness, workflow_id: str) -> str | None:
    with h.client.engine.connect() as conn:
        status = conn.execute(
            sa.text("SELECT status FROM dbos.workflow_status WHERE workflow_uuid = :w"),
            {"w": workflow_id},
        ).scalar()
    return None if status is None else str(status)


def _result_kind(drill: DrillResult) -> str:
    (tool_msg,) = [m for m in drill.history if m.role == "tool"]
    body = json.loads(tool_msg.content or "null")
    if isinstance(body, dict) and "error" in body:
        return str(body["error"]["kind"])
    ledger = drill.tool_calls[0]
    return "verified" if ledger.result and ledger.result.get("verified") else "ok"


@pytest.mark.parametrize(("window", "tool"), CASES, ids=[f"{w}-{k}" for w, k in CASES])
def test_crash_window(harness: CrashHarness, tmp_path: Path, window: str, tool: str) -> None:
    harness.witness = tmp_path / "witness.jsonl"
    witness = Witness(harness.witness)
    drill = harness.drill("crashy", tool, crash_at=window)

    assert drill.crashed, f"crash point {window} was never reached:\n{drill.logs[0][-3000:]}"
    assert drill.session.status == "completed", drill.logs[1][-3000:]
    assert drill.session.final_output == "done"

    # Every model call was for this session, and both workers let it end in DBOS (the
    # second was stopped by SIGTERM right after the session ended: its drain waits).
    assert {ev["first"] for ev in witness.events("model")} == {tool}
    assert _workflow_status(harness, drill.session_id) == "SUCCESS"
    model_turns = witness.counter("model", "turn")
    expected_first, per_tool = WINDOWS[window]
    assert model_turns == {0: expected_first, 1: 1}, "model re-called for a checkpointed turn"

    executions, kind = per_tool[tool]
    assert witness.count("effect", tool=tool) == executions
    assert _result_kind(drill) == kind

    # Exactly one result per tool call, one ledger row, settled.
    tool_msgs = [m for m in drill.history if m.role == "tool"]
    assert len(tool_msgs) == 1 and len(drill.tool_calls) == 1
    (ledger,) = drill.tool_calls
    assert tool_msgs[0].tool_call_id == ledger.tool_call_id
    assert ledger.status == ("failed" if kind.startswith("tool-") else "completed")
    if kind == "tool-durability-error":
        body = json.loads(tool_msgs[0].content or "")
        assert body["error"]["tool"] == tool
        assert body["error"]["tool_call_id"] == ledger.tool_call_id
    assert [m.role for m in drill.history] == ["user", "assistant", "tool", "assistant"]


def test_outcome_is_published_with_the_run_end(harness: CrashHarness, tmp_path: Path) -> None:
    """A worker killed right after the run's end leaves the outcome readable before any
    worker recovers the session: its row commits with the end (``store.runs``), so a
    waiter anywhere is answered without waiting for a replay."""
    harness.witness = tmp_path / "witness.jsonl"
    sid = harness.client.start("crashy", "lookup")
    worker = harness.start_worker("after_run_end", session_id=sid)
    try:
        assert worker.popen.wait(timeout=90) == -9, worker.log()[-3000:]
    finally:
        worker.kill()
    wf = run_workflow_id(sid, 1)
    assert _workflow_status(harness, wf) == "PENDING"  # nobody replayed it yet
    outcome = runs.get(harness.client.engine, sid, 1)
    assert outcome is not None and outcome.status == "completed", outcome
    assert outcome.output == "done"
    recovering = harness.start_worker()  # the replay ends the workflow, re-runs nothing
    try:
        returned = harness.client.dbos.retrieve_workflow(wf).get_result()
        assert returned == outcome.model_dump(mode="json")
        assert runs.get(harness.client.engine, sid, 1) == outcome  # the first end's row
    finally:
        recovering.stop()
    assert Witness(harness.witness).count("effect", tool="lookup") == 1
