"""Database outages and stalls on a private cluster: nobody live is adopted, every session
resumes, every side effect happens once, and a submit is never left to the 60 s fallback.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest

from dbos_agents.store.workers import WorkerInfo, list_workers
from dbos_agents.testing import CrashHarness, PrivateCluster, Witness, WorkerProcess
from dbos_agents.worker.process import EXIT_ADOPTED

from .conftest import STALE_AFTER

pytestmark = [pytest.mark.integration, pytest.mark.crash]
Make = Callable[[], CrashHarness]


def _until(pred: Callable[[], object], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except Exception:  # the database may still be coming back
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{what} not met within {timeout}s")


def _rows(h: CrashHarness) -> dict[str, WorkerInfo]:
    return {w.executor_id: w for w in list_workers(h.client.engine)}


def _two_workers(h: CrashHarness) -> tuple[WorkerProcess, WorkerProcess]:
    a = h.start_worker(executor_id="out-a")
    b = h.start_worker(executor_id="out-b")
    _until(lambda: {"out-a", "out-b"} <= set(_rows(h)), what="both workers registered")
    return a, b


def _waiting_sessions(h: CrashHarness, n: int) -> dict[str, str]:
    """n sessions waiting on a client tool; session id -> tool call id."""
    sids = {h.client.start("fleet", f"order-{i}") for i in range(n)}
    _until(lambda: len(h.client.pending(kind="client")) == n, what="sessions waiting")
    waits = {p.root_session_id: p.tool_call_id for p in h.client.pending(kind="client")}
    assert set(waits) == sids
    return waits


def _answer_and_finish(h: CrashHarness, waits: dict[str, str], timeout: float = 60.0) -> None:
    for sid, call_id in waits.items():
        out = h.client.submit_tool_result(sid, call_id, result={"answer": "ok"})
        assert out.status == "accepted", out
    for sid in waits:
        info = h.client.wait(sid, timeout=timeout)
        assert info.status == "completed" and info.final_output == "fleet done", info


def _assert_nobody_adopted(h: CrashHarness, *workers: WorkerProcess) -> None:
    rows = _rows(h)
    for eid in ("out-a", "out-b"):
        assert rows[eid].status == "running" and rows[eid].adopted_by is None, rows[eid]
    for w in workers:
        assert w.popen.poll() is None, f"worker exited {w.popen.returncode}:\n{w.log()[-3000:]}"


def test_outage_longer_than_stale_adopts_nobody(
    cluster: PrivateCluster, make_harness: Make
) -> None:
    h = make_harness()
    a, b = _two_workers(h)
    try:
        waits = _waiting_sessions(h, 4)
        time.sleep(1.0)  # a few beats observed by each side
        cluster.stop("fast")
        time.sleep(3 * STALE_AFTER)  # every heartbeat goes stale by the database clock
        cluster.start()
        time.sleep(2 * STALE_AFTER)  # time for a wrong adoption to happen after reconnect
        _assert_nobody_adopted(h, a, b)
        _answer_and_finish(h, waits)
        _assert_nobody_adopted(h, a, b)
    finally:
        a.stop(timeout=30)
        b.stop(timeout=30)
    charges = Witness(h.witness).events("effect", tool="charge")
    assert sorted(c["session"] for c in charges) == sorted(waits), charges


def test_a_blocked_event_loop_is_not_adopted(make_harness: Make) -> None:
    h = make_harness()
    a, b = _two_workers(h)
    try:
        sid = h.client.start("crashy", "block_loop")  # time.sleep(8) inside an async tool
        info = h.client.wait(sid, timeout=60)
        assert info.status == "completed", info
        _assert_nobody_adopted(h, a, b)
    finally:
        a.stop(timeout=30)
        b.stop(timeout=30)
    assert Witness(h.witness).count("effect", tool="block_loop", session=sid) == 1


def test_a_submit_during_the_listener_reconnect_resumes_promptly(
    cluster: PrivateCluster, make_harness: Make
) -> None:
    h = make_harness()
    w = h.start_worker(executor_id="out-listen")
    try:
        waits = _waiting_sessions(h, 2)
        # Belt and braces: everything the test relies on is on disk before the crash.
        with h.client.engine.connect() as conn:
            conn.exec_driver_sql("CHECKPOINT")
        cluster.restart("immediate")  # what a failover looks like to clients
        t0 = time.monotonic()
        # Submitted as soon as the server answers, while the worker's LISTEN connection is
        # still down: the NOTIFY reaches nobody. DBOS alone would wake the wait after 60 s.
        _until(lambda: bool(h.client.pending(kind="client")), 30, "client reconnected")
        _answer_and_finish(h, waits, timeout=20)
        took = time.monotonic() - t0
        assert w.popen.poll() is None, w.log()[-3000:]
    finally:
        w.stop(timeout=30)
    print(f"\nsubmit during LISTEN reconnect -> both sessions completed {took:.1f}s after restart")


def test_a_worker_that_learns_it_was_adopted_exits(make_harness: Make) -> None:
    h = make_harness()
    a, b = _two_workers(h)
    try:
        waits = _waiting_sessions(h, 2)
        a.popen.send_signal(signal.SIGSTOP)  # a frozen host: alive, silent
        try:
            _until(
                lambda: (
                    _rows(h)["out-a"].status == "adopted" or _rows(h)["out-b"].status == "adopted"
                ),
                timeout=60,
                what="adoption of the frozen worker",
            )
        finally:
            a.popen.send_signal(signal.SIGCONT)
        assert _rows(h)["out-a"].adopted_by == "out-b"
        assert a.wait(timeout=30) == EXIT_ADOPTED, a.log()[-3000:]
        assert "adopted by another worker" in a.log()
        assert b.popen.poll() is None
        _answer_and_finish(h, waits)
        # A restart with the same executor id takes its row back.
        a = h.start_worker(executor_id="out-a")
        _until(lambda: _rows(h)["out-a"].status == "running", what="row taken back")
    finally:
        a.stop(timeout=30)
        b.stop(timeout=30)
    charges = Witness(h.witness).events("effect", tool="charge")
    assert sorted(c["session"] for c in charges) == sorted(waits), charges
