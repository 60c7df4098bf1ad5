"""Durable tools across SIGKILLs, SIGTERMs and restarts (a real worker subprocess, real
Postgres): completed inner steps are never run again, a side-effecting one cut by a crash
is not run again either (its unknown outcome is raised in the body, which settles it), the
tool finishes and the model reads its result; ``ctx.ask`` waits across a restart."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from dbos_agents.testing import INNER_STEP_POINTS, CrashHarness, Witness

pytestmark = [pytest.mark.integration, pytest.mark.crash]
REPO = Path(__file__).resolve().parents[2]
POINTS = INNER_STEP_POINTS


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    with CrashHarness(
        "tests.crash.durable_app:runtime",
        fresh_database_url,
        log_dir=tmp_path_factory.mktemp("durable-logs"),
        cwd=REPO,
        executor_id="durable-worker",
    ) as h:
        yield h


def _steps(h: CrashHarness, session_id: str) -> list[Any]:
    with h.client.engine.connect() as conn:
        return list(
            conn.execute(
                sa.text(
                    "SELECT seq, name, safe_to_retry, status FROM dbos_agents.tool_steps"
                    " WHERE session_id = :s ORDER BY seq"
                ),
                {"s": session_id},
            )
        )


def _check_finished(h: CrashHarness, witness: Witness, sid: str) -> dict[str, Any]:
    """The invariants every durable crash test ends with; returns the tool's result."""
    info = h.client.session(sid)
    assert info.status == "completed", info
    effects = Counter(e["step"] for e in witness.events("effect", session=sid))
    assert effects == Counter({i: 1 for i in (1, 3, 5, 7, 9)}), effects  # each exactly once
    (tool_msg,) = [m for m in h.client.history(sid) if m.role == "tool"]
    result = json.loads(tool_msg.content or "null")
    assert result["steps"] == 10 and result["total"] == 4 + 16 + 36 + 64 + 100, result
    assert result["snapshot"] == {"step": 10}
    assert info.final_output == "tool said: " + (tool_msg.content or "")
    # the model was asked for its first turn once (the tool's crashes never re-ask it)
    assert witness.count("model", turn=0) == 1
    # every step recorded its outcome, except the cut side-effecting ones the tool settled
    steps = _steps(h, sid)
    unknown = [s for s in steps if s.status != "completed"]
    assert all(s.status == "dispatched" and not s.safe_to_retry for s in unknown), steps
    assert len(unknown) == len(result["settled"]), steps
    return dict(result)


# Every boundary of every inner step with -m slow (the crash table of docs/durable-tools.md);
# by default the three that leave work to settle or redo: a side-effecting step cut before
# and after its function ran, and a safe one cut after.
DEFAULT = {("inner_step_marked", 1), ("inner_step_ran", 1), ("inner_step_ran", 2)}
CASES = [
    pytest.param(
        point,
        step,
        id=f"{point}-step{step}",
        marks=[] if (point, step) in DEFAULT else [pytest.mark.slow],
    )
    for step in range(1, 11)
    for point in POINTS
]


@pytest.mark.parametrize(("point", "step"), CASES)
def test_a_sigkill_at_an_inner_step_boundary_loses_no_work_and_repeats_no_effect(
    harness: CrashHarness, tmp_path: Path, point: str, step: int
) -> None:
    harness.witness = tmp_path / "witness.jsonl"
    witness = Witness(harness.witness)
    drill = harness.drill("stepper", "go", crash_at=f"{point}:{step}")
    assert drill.crashed, f"{point}:{step} never reached:\n{drill.logs[0][-3000:]}"
    result = _check_finished(harness, witness, drill.session_id)
    # a side-effecting step cut before its outcome was recorded is settled by the tool,
    # never run blindly; a safe one just runs again; a recorded one replays
    cut = point != "inner_step_recorded"
    side_effecting = step % 2 == 1
    assert result["settled"] == ([step] if cut and side_effecting else [])
    reads = Counter(e["step"] for e in witness.events("read", session=drill.session_id))
    assert reads == Counter(
        {i: 2 if (i == step and point == "inner_step_ran") else 1 for i in (2, 4, 6, 8, 10)}
    )


def test_sigterm_mid_tool_lets_the_step_finish_and_a_restart_completes_it(
    fresh_database_url: str, tmp_path: Path
) -> None:
    """A deploy: SIGTERM lands while inner step 3 runs; the drain lets it finish and record
    (no unknown outcome), the worker exits 0, the next one finishes the tool."""
    witness_path = tmp_path / "witness.jsonl"
    with CrashHarness(
        "tests.crash.durable_app:runtime",
        fresh_database_url,
        witness=witness_path,
        log_dir=tmp_path,
        cwd=REPO,
        executor_id="durable-deploy",
        env={
            "DBOS_AGENTS_CRASH_SIGNAL": "SIGTERM",
            "DBOS_AGENTS_SHUTDOWN_GRACE_SEC": "10",
            "DURABLE_APP_PAUSE_SEC": "0.5",
        },
    ) as h:
        sid = h.client.start("stepper", "go")
        first = h.start_worker("inner_step_marked:3", session_id=sid)
        code = first.wait(timeout=60)
        assert code == 0, first.log()[-3000:]
        assert h.client.session(sid).status == "running"
        steps = _steps(h, sid)
        assert [s.status for s in steps] == ["completed"] * 3, steps  # none left unknown
        second = h.start_worker()
        try:
            h.client.wait(sid, timeout=60)
        finally:
            second.stop()
        result = _check_finished(h, Witness(witness_path), sid)
        assert result["settled"] == []


def test_ask_waits_across_a_worker_restart(harness: CrashHarness, tmp_path: Path) -> None:
    """The approval is asked, the worker dies, the approval is given while it is down, a
    new worker continues the tool from the recorded step; then the browser's answer."""
    harness.witness = tmp_path / "witness.jsonl"
    witness = Witness(harness.witness)
    sid = harness.client.start("asker", "go")
    first = harness.start_worker()
    try:
        deadline = time.monotonic() + 60
        while not harness.client.pending(session_id=sid):
            assert time.monotonic() < deadline, first.log()[-3000:]
            time.sleep(0.05)
    finally:
        first.kill()
    (wait,) = harness.client.pending(session_id=sid)
    assert (wait.kind, wait.arguments) == ("approval", {"cents": 300})
    out = harness.client.submit_approval(sid, wait.tool_call_id, True, decided_by="ops")
    assert out.status == "accepted", out
    second = harness.start_worker()
    try:
        deadline = time.monotonic() + 60
        while not [p for p in harness.client.pending(session_id=sid) if p.kind == "client"]:
            assert time.monotonic() < deadline, second.log()[-3000:]
            time.sleep(0.05)
        (ask,) = [p for p in harness.client.pending(session_id=sid) if p.kind == "client"]
        harness.client.submit_tool_result(sid, ask.tool_call_id, result={"ok": True})
        info = harness.client.wait(sid, timeout=60)
    finally:
        second.stop()
    assert info.status == "completed", info
    assert info.final_output == "tool said: charged 300"
    # the step before the question ran once, across both workers
    assert witness.count("effect", session=sid, step=0) == 1
    assert witness.count("effect", session=sid, step=300) == 1


@pytest.mark.parametrize(
    ("crash_at", "finished"),
    [
        ("inner_step_marked:3", "from the snapshot"),  # two parts done: the hook finishes
        pytest.param(  # one part done: the hook runs the body again
            "inner_step_marked:2", "by the body", marks=pytest.mark.slow
        ),
    ],
)
def test_on_recovered_decides_with_the_snapshot(
    harness: CrashHarness, tmp_path: Path, crash_at: str, finished: str
) -> None:
    harness.witness = tmp_path / "witness.jsonl"
    witness = Witness(harness.witness)
    drill = harness.drill("resumer", "go", crash_at=crash_at)
    assert drill.crashed, drill.logs[0][-3000:]
    assert drill.session.status == "completed", drill.logs[1][-3000:]
    (tool_msg,) = [m for m in drill.history if m.role == "tool"]
    result = json.loads(tool_msg.content or "null")
    assert result["finished"] == finished, result
    done = int(crash_at[-1]) - 1
    (seen,) = witness.events("recovered", session=drill.session_id)
    assert seen["snapshot"] == {"done": done}  # the last checkpoint before the crash
    effects = Counter(e["step"] for e in witness.events("effect", session=drill.session_id))
    if finished == "from the snapshot":  # part 3 never ran
        assert effects == Counter({1: 1, 2: 1}) and result["snapshot"] == {"done": 2}
    else:  # part 1 replayed, part 2 (cut before it ran) and part 3 ran once
        assert effects == Counter({1: 1, 2: 1, 3: 1})
        assert result["recovered"] is True
