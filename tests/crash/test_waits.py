"""Durable waits across real worker deaths: buffered submits and kept deadlines, with waits
parked after 0.5 s (``Settings.park_after_sec``), so each test also crosses a parked wait."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dbos_agents import AgentClient, PendingCall
from dbos_agents.testing import CrashHarness

pytestmark = [pytest.mark.integration, pytest.mark.crash]
REPO = Path(__file__).resolve().parents[2]
TIMEOUT = timedelta(seconds=6)  # the `ask` client tool's timeout in tests/crash/app.py
PARK_AFTER = 0.5


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    with CrashHarness(
        "tests.crash.app:runtime",
        fresh_database_url,
        log_dir=tmp_path_factory.mktemp("logs"),
        witness=tmp_path_factory.mktemp("witness") / "w.jsonl",
        cwd=REPO,
        executor_id="waits-worker",
        env={"DBOS_AGENTS_PARK_AFTER_SEC": str(PARK_AFTER)},
    ) as h:
        yield h


def _pending(client: AgentClient, sid: str, timeout: float = 60) -> PendingCall:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = client.pending(session_id=sid)
        if rows:
            return rows[0]
        time.sleep(0.05)
    raise TimeoutError(f"no pending call for {sid}")


def test_submit_while_worker_is_down_is_delivered_after_restart(harness: CrashHarness) -> None:
    client = harness.client
    worker = harness.start_worker()
    try:
        sid = client.start("waiter", "still there?")
        p = _pending(client, sid)
        time.sleep(3 * PARK_AFTER)  # parked when the worker dies
    finally:
        worker.kill()
    out = client.submit_tool_result(sid, p.tool_call_id, result={"answer": "yes"})
    assert out.status == "accepted"
    assert client.submit_tool_result(sid, p.tool_call_id, result={"answer": "no"}).status == (
        "already_completed"
    )
    worker = harness.start_worker()
    try:
        info = client.wait(sid, timeout=60)
    finally:
        worker.stop()
    assert info.status == "completed"
    assert info.final_output == 'waiter got: {"answer":"yes"}'
    tools = [m for m in client.history(sid) if m.role == "tool"]
    assert len(tools) == 1


def test_sigkill_during_a_wait_keeps_the_original_deadline(harness: CrashHarness) -> None:
    client = harness.client
    worker = harness.start_worker()
    try:
        sid = client.start("waiter", "anyone?")
        p = _pending(client, sid)
        # Let the wait arm (recv's sleep step stores the deadline) and let time pass, so a
        # wait re-armed from scratch would end clearly later than the original deadline.
        time.sleep(TIMEOUT.total_seconds() / 3)
    finally:
        worker.kill()
    restarted_at = datetime.now(UTC)
    assert restarted_at < p.deadline, "the worker must come back before the deadline"
    worker = harness.start_worker()
    try:
        worker.wait_ready()
        up_at = datetime.now(UTC)
        info = client.wait(sid, timeout=60)
    finally:
        worker.stop()
    (tomb,) = client.pending(session_id=sid, include_resolved=True)
    assert tomb.status == "timed_out" and tomb.resolved_at is not None
    assert tomb.deadline == p.deadline  # the deadline row was never re-registered
    # Order of events: registered < deadline <= timed out < launch + a fresh full timeout.
    # A wait re-armed with a fresh timeout by the recovery (which replays it once the new
    # worker has launched, however long its start took on a busy host) would time out a
    # whole TIMEOUT after that; a second's slack covers a replay that began just before the
    # ready line was read.
    assert p.created_at < tomb.deadline <= tomb.resolved_at
    assert tomb.resolved_at < up_at + TIMEOUT - timedelta(seconds=1)
    (r,) = [json.loads(m.content or "") for m in client.history(sid) if m.role == "tool"]
    assert r["error"]["kind"] == "client_tool_timeout"
    assert info.status == "completed"


def test_a_parked_wait_resumes_and_a_sigterm_leaves_parked_waits_for_the_next_worker(
    harness: CrashHarness,
) -> None:
    client = harness.client
    worker = harness.start_worker()
    try:
        first = client.start("waiter", "parked?")
        p1 = _pending(client, first)
        time.sleep(3 * PARK_AFTER)
        assert client.submit_tool_result(first, p1.tool_call_id, result={"answer": "1"}).status == (
            "accepted"
        )
        assert client.wait(first, timeout=30).final_output == 'waiter got: {"answer":"1"}'
        second = client.start("waiter", "and now?")
        p2 = _pending(client, second)
        time.sleep(3 * PARK_AFTER)
    finally:
        code = worker.stop()
    assert code == 0, worker.log()[-3000:]
    assert client.session(second).status == "running"  # a wait is part of its run
    worker = harness.start_worker()
    try:
        time.sleep(3 * PARK_AFTER)  # recovered, waiting again, parked again
        out = client.submit_tool_result(second, p2.tool_call_id, result={"answer": "2"})
        assert out.status == "accepted"
        info = client.wait(second, timeout=30)
    finally:
        worker.stop()
    assert info.final_output == 'waiter got: {"answer":"2"}', worker.log()[-3000:]
    assert len([m for m in client.history(second) if m.role == "tool"]) == 1
