"""The model turn's retry in a real worker against the fake Anthropic server: a 529's
``retry-after`` is waited (never more than ``model_retry_after_max_sec``), and an ``error``
event mid-stream is retried with the reply shown exactly once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dbos_agents.testing import CrashHarness, WorkerProcess
from dbos_agents.testing.fake_anthropic import FakeAnthropic, serve_fake_anthropic

from ..delta_log import delta_rows, shown_text

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
ANSWER = "Your order A-42 shipped on Monday and should arrive on Thursday."
CAP_SEC = 2


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    with serve_fake_anthropic() as fake:
        yield fake


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, fake: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    with CrashHarness(
        "tests.anthropic.stream_app:runtime",
        fresh_database_url,
        env={
            "FAKE_ANTHROPIC_URL": fake.base_url,
            "DBOS_AGENTS_MODEL_BACKOFF_INITIAL_SEC": "0.05",
            "DBOS_AGENTS_MODEL_RETRY_AFTER_MAX_SEC": str(CAP_SEC),
            "DBOS_AGENTS_LOG_FORMAT": "json",
        },
        executor_id="anthropic-retry",
        log_dir=tmp_path_factory.mktemp("logs"),
        cwd=REPO,
    ) as h:
        yield h


@pytest.fixture(scope="module")
def worker(harness: CrashHarness) -> Iterator[WorkerProcess]:
    worker = harness.start_worker()
    try:
        yield worker
    finally:
        worker.stop()


def answer(harness: CrashHarness, worker: WorkerProcess, fake: FakeAnthropic) -> str:
    """Start a session, wait for its run to complete; its id."""
    sid = harness.client.start("writer", "where is A-42?")
    info = harness.client.wait(sid, timeout=60)
    assert info.status == "completed", worker.log()[-3000:]
    assert fake.pending == 0
    return sid


def retries(worker: WorkerProcess, sid: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in worker.log().splitlines() if line.startswith("{")]
    return [r for r in lines if r.get("event") == "model_retry" and r.get("session_id") == sid]


def waited(fake: FakeAnthropic) -> float:
    """Seconds between the fake receiving the failed request and the next one."""
    first, second = fake.requests
    return float(second["received_at"] - first["received_at"])


def test_a_529_waits_the_retry_after_it_asked_for(
    harness: CrashHarness, worker: WorkerProcess, fake: FakeAnthropic
) -> None:
    fake.reset()
    fake.push_error(529, "Overloaded", type="overloaded_error", retry_after=1)
    fake.push_text(ANSWER)
    sid = answer(harness, worker, fake)
    assert waited(fake) >= 1.0  # the backoff alone would be 0.05 s
    [record] = retries(worker, sid)
    assert (record["retry_after"], record["wait_sec"]) == (1, 1)
    assert "as the provider asked" in record["message"]


def test_a_retry_after_above_the_cap_waits_the_cap(
    harness: CrashHarness, worker: WorkerProcess, fake: FakeAnthropic
) -> None:
    fake.reset()
    fake.push_error(529, "Overloaded", type="overloaded_error", retry_after=3600)
    fake.push_text(ANSWER)
    sid = answer(harness, worker, fake)  # within its 60 s: not after the hour asked for
    assert waited(fake) >= CAP_SEC
    [record] = retries(worker, sid)
    assert (record["retry_after"], record["wait_sec"]) == (3600, CAP_SEC)
    assert "model_retry_after_max_sec" in record["message"]


def test_an_error_event_mid_stream_is_retried_and_shown_once(
    harness: CrashHarness, worker: WorkerProcess, fake: FakeAnthropic
) -> None:
    fake.reset()
    fake.push_text(ANSWER, error_after=8)  # message_start, ping, block start, 5 deltas
    fake.push_text(ANSWER)
    sid = answer(harness, worker, fake)
    [record] = retries(worker, sid)
    assert "Overloaded" in record["error"] and record["retry_after"] is None
    requests = fake.requests
    assert [r["continuation"] for r in requests] == ["fresh", "prefix"]
    assert requests[1]["offset"] > 0
    rows = delta_rows(harness.database_url, sid)
    assert {r.attempt for r in rows} == {1, 2}
    assert not [r for r in rows if r.kind == "retract"], "text continues: nothing withdrawn"
    assert shown_text(rows) == ANSWER
    assert [m.content for m in harness.client.history(sid) if m.role == "assistant"] == [ANSWER]
