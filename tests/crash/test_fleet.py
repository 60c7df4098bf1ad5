"""Two workers on one Postgres: SIGKILL one mid-session, the other adopts and finishes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbos_agents.store.workers import list_workers
from dbos_agents.testing import CrashHarness, Witness

from .waiting import until

pytestmark = [pytest.mark.integration, pytest.mark.crash]
REPO = Path(__file__).resolve().parents[2]
STALE_AFTER = 3.0


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
        env={
            "DBOS_AGENTS_STALE_AFTER_SEC": str(STALE_AFTER),
            "DBOS_AGENTS_HEARTBEAT_INTERVAL_SEC": "0.5",
            "DBOS_AGENTS_SHUTDOWN_GRACE_SEC": "1",  # grace + 2 beats < stale (Settings.check_worker)
        },
    ) as h:
        yield h


def test_survivor_adopts_a_killed_workers_sessions(
    harness: CrashHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    client = harness.client
    a = harness.start_worker(executor_id="fleet-a")
    b = None
    try:
        sids = [client.start("fleet", f"order-{i}") for i in range(3)]
        until(lambda: len(client.pending(kind="client")) == 3)
        pending = {p.root_session_id: p for p in client.pending(kind="client")}
        assert set(pending) == set(sids)
        b = harness.start_worker(executor_id="fleet-b")
        until(lambda: any(w.executor_id == "fleet-b" for w in list_workers(client.engine)))
        t_kill = time.monotonic()
        a.kill()
        for sid, p in pending.items():  # delivered whenever the survivor gets there
            assert client.submit_tool_result(
                sid, p.tool_call_id, result={"answer": "ok"}
            ).status == ("accepted")
        t_adopt = until(
            lambda: any(
                w.executor_id == "fleet-a" and w.status == "adopted" and w.adopted_by == "fleet-b"
                for w in list_workers(client.engine)
            )
        )
        infos = [client.wait(sid, timeout=60) for sid in sids]
        t_done = time.monotonic()
    finally:
        a.kill()
        if b is not None:
            b.stop()
    assert all(i.status == "completed" and i.final_output == "fleet done" for i in infos)
    witness = Witness(harness.witness)
    charges = witness.events("effect", tool="charge")
    assert len(charges) == 3 and len({c["key"] for c in charges}) == 3  # no duplicates
    assert t_kill < t_adopt <= t_done
    with capsys.disabled():
        print(
            f"\nfleet timeline: kill -> adoption {t_adopt - t_kill:.1f}s"
            f" (stale threshold {STALE_AFTER:.0f}s) -> all 3 sessions completed"
            f" {t_done - t_kill:.1f}s after the kill"
        )


def test_sigterm_stops_cleanly_and_the_wait_survives(harness: CrashHarness) -> None:
    client = harness.client
    w = harness.start_worker(executor_id="fleet-term")
    try:
        sid = client.start("fleet", "order-term")
        until(lambda: bool(client.pending(session_id=sid)))
        (p,) = client.pending(session_id=sid)
        code = w.stop(timeout=60)  # SIGTERM: grace, then a clean exit
        assert code == 0, w.log()[-3000:]
        (row,) = [x for x in list_workers(client.engine) if x.executor_id == "fleet-term"]
        assert row.status in ("stopped", "adopted")
        w = harness.start_worker(executor_id="fleet-term")
        assert client.submit_tool_result(sid, p.tool_call_id, result={"answer": "ok"}).status == (
            "accepted"
        )
        assert client.wait(sid, timeout=60).final_output == "fleet done"
    finally:
        w.stop()
