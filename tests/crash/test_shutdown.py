"""SIGTERM drains: running steps finish, the rest stays PENDING, nothing ends in ERROR.

A worker armed with ``DBOS_AGENTS_CRASH_SIGNAL=SIGTERM`` sends itself SIGTERM at the named
crash point and carries on, as a deploy would stop it mid-step. It must exit 0 without any
workflow recorded as failed; a restart with the same executor id finishes the session, the
side effect happened exactly once (no durability error: the step finished within the grace),
and the session accepts a follow-up message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from dbos_agents.testing import CRASH_POINTS, CrashHarness, Witness

pytestmark = [pytest.mark.integration, pytest.mark.crash]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    with CrashHarness(
        "tests.crash.ops_app:runtime",
        fresh_database_url,
        log_dir=tmp_path_factory.mktemp("logs"),
        cwd=REPO,
        executor_id="shutdown-worker",
        env={"DBOS_AGENTS_CRASH_SIGNAL": "SIGTERM", "DBOS_AGENTS_SHUTDOWN_GRACE_SEC": "10"},
    ) as h:
        yield h


def _failed_workflows(h: CrashHarness) -> list[tuple[str, str]]:
    with h.client.engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT workflow_uuid, error FROM dbos.workflow_status WHERE status = 'ERROR'")
        ).all()
    return [(r[0], (r[1] or "")[:300]) for r in rows]


def _workflow_status(h: CrashHarness, workflow_id: str) -> str | None:
    with h.client.engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT status FROM dbos.workflow_status WHERE workflow_uuid = :w"),
            {"w": workflow_id},
        ).scalar()


def _tool_error_kinds(h: CrashHarness, sid: str) -> list[str]:
    kinds = []
    for m in h.client.history(sid):
        if m.role == "tool":
            body = json.loads(m.content or "null")
            if isinstance(body, dict) and "error" in body:
                kinds.append(str(body["error"]["kind"]))
    return kinds


def _sigterm_then_restart(h: CrashHarness, tmp_path: Path, tool: str, crash_at: str) -> str:
    h.witness = tmp_path / "witness.jsonl"
    first = h.start_worker(crash_at)
    try:
        sid = h.client.start("crashy", tool)
        code = first.wait(timeout=90)
    finally:
        first.kill()
    assert code == 0, f"worker exit code {code}:\n{first.log()[-3000:]}"
    assert "crash point" in first.log(), f"{crash_at} never reached:\n{first.log()[-3000:]}"
    assert _failed_workflows(h) == [], first.log()[-3000:]
    if h.client.session(sid).status == "completed":  # the run ended before the drain
        assert _workflow_status(h, sid) == "SUCCESS", "a drain left an ended run PENDING"
    second = h.start_worker()
    try:
        info = h.client.wait(sid, timeout=90)
        assert info.status == "completed", second.log()[-3000:]
        assert info.final_output == "done"
        follow = h.client.start("crashy", "lookup", session_id=sid)  # no SessionBusyError
        assert follow == sid
        assert h.client.wait(sid, timeout=90).status == "completed"
    finally:
        assert second.stop(timeout=60) == 0, second.log()[-3000:]
    assert _failed_workflows(h) == []
    witness = Witness(h.witness)
    assert witness.count("effect", tool=tool, session=sid) == 1
    assert _tool_error_kinds(h, sid) == [], "a step did not finish within the grace"
    assert witness.counter("model", "turn")[0] == 1, "a checkpointed model call was made again"
    return sid


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_sigterm_at_every_crash_point(harness: CrashHarness, tmp_path: Path, point: str) -> None:
    _sigterm_then_restart(harness, tmp_path, "charge", point)


def test_sigterm_during_a_slow_tool_lets_it_finish(harness: CrashHarness, tmp_path: Path) -> None:
    # SIGTERM as the slow tool starts (its dispatch mark): it runs 2 s more, within the grace.
    sid = _sigterm_then_restart(harness, tmp_path, "slow_charge", "after_dispatch_mark")
    witness = Witness(harness.witness)
    assert witness.count("start", tool="slow_charge", session=sid) == 1
