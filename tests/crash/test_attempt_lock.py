"""``verify`` never runs while an earlier attempt of the same call may still be running.

While a worker is inside a slow, verify-hooked side effect, the test does what an adopter
(or a restarted twin with the same executor id) does: DBOS's own recovery re-enqueues the
PENDING workflow, and it runs again at once, concurrently with the first attempt. Before the
per-call advisory lock, the re-execution found ``dispatched``, ran ``verify`` (which saw no
effect yet) and ran the handler again: two refunds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dbos_agents.testing import CrashHarness, Witness

from .waiting import until

pytestmark = [pytest.mark.integration, pytest.mark.crash]
REPO = Path(__file__).resolve().parents[2]


def test_a_re_execution_waits_for_the_running_attempt(
    fresh_database_url: str, tmp_path: Path
) -> None:
    witness_path = tmp_path / "w.jsonl"
    witness = Witness(witness_path)
    with CrashHarness(
        "tests.crash.app:runtime",
        fresh_database_url,
        witness=witness_path,
        log_dir=tmp_path,
        cwd=REPO,
        executor_id="twin",
    ) as h:
        worker = h.start_worker()
        try:
            sid = h.client.start("crashy", "slow_refund")
            until(lambda: witness.count("started", tool="slow_refund") == 1)
            # DBOS recovery, as an adopter calls it (a private DBOS API: test-only use).
            assert h.client.dbos._sys_db.reenqueue_for_recovery(sid, ["twin"], "_dbos_internal")
            info = h.client.wait(sid, timeout=60)
        finally:
            worker.stop()
        logs = worker.log()
        assert info.status == "completed", logs[-3000:]
        assert witness.count("effect", tool="slow_refund") == 1, logs[-3000:]
        assert witness.count("verify", tool="slow_refund") == 0
        (call,) = h.client.tool_calls(sid)
        assert call.status == "completed" and call.result["ok"]
        tool_msgs = [m for m in h.client.history(sid) if m.role == "tool"]
        assert len(tool_msgs) == 1 and "durability" not in (tool_msgs[0].content or "")
        assert witness.count("started", tool="slow_refund") == 1
