"""A run starts when it is announced, not at the queue's next poll (runtime/starts.py).

The worker polls its queue only every 60 s here, so each test fails at its 20 s bound if
the announcement path is missing or loses a start.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dbos_agents.store.db import libpq_url
from dbos_agents.testing import CrashHarness, WorkerProcess

from ..conftest import needs_fast_paths
from .waiting import until

pytestmark = [pytest.mark.integration, pytest.mark.crash, needs_fast_paths]
REPO = Path(__file__).resolve().parents[2]


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
        env={"DBOS_AGENTS_QUEUE_POLLING_INTERVAL_SEC": "60"},
    ) as h:
        yield h


@pytest.fixture(scope="module")
def worker(harness: CrashHarness) -> Iterator[WorkerProcess]:
    w = harness.start_worker(executor_id="starts")
    yield w
    w.stop()


def _watch_backends(url: str) -> list[int]:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = 'dbos-agents-start-watch'"
        ).fetchall()
    return [int(r[0]) for r in rows]


def test_a_started_run_is_claimed_at_once_and_one_enqueued_before_launch_too(
    harness: CrashHarness,
) -> None:
    early = harness.client.start("crashy", "lookup")  # no worker is running yet
    w = harness.start_worker(executor_id="starts-early")
    try:
        assert harness.client.wait(early, timeout=20).status == "completed"
        sid = harness.client.start("crashy", "lookup")
        assert harness.client.wait(sid, timeout=20).status == "completed"
    finally:
        w.stop()


def test_a_start_announced_while_the_listener_reconnects_is_claimed(
    harness: CrashHarness, worker: WorkerProcess
) -> None:
    sid = harness.client.start("crashy", "lookup")  # the worker is up and listening
    assert harness.client.wait(sid, timeout=20).status == "completed"
    url = harness.database_url
    (pid,) = _watch_backends(url)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    lost = harness.client.start("crashy", "lookup")  # its NOTIFY reaches nobody
    assert harness.client.wait(lost, timeout=20).status == "completed"
    until(lambda: len(_watch_backends(url)) == 1, timeout=20)
