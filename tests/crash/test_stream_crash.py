"""A worker SIGKILLed while its model streams keeps what readers were shown: the restarted
worker continues each reply from its partial (the fake server records a continuation at
that offset), appends only new deltas, and the stored message is exactly the deltas' text.
SIGTERM mid-stream lets the stream finish within the grace period (the turn is recorded
whole; the rest of the run waits for the next worker, as any drained run does).

The model is ``OpenAIModel`` against the fake OpenAI server, in a process of its own
(``python -m dbos_agents.testing.fake_openai``), streaming a few characters per chunk.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import namedtuple_row

from dbos_agents.testing import CrashHarness

pytestmark = [pytest.mark.integration, pytest.mark.crash]
REPO = Path(__file__).resolve().parents[2]
TEXT = " ".join(f"word{i:03d}" for i in range(120))
"""About 1 kB: 240 chunks of 4 characters, one per 20 ms, a reply streams for about 5 s."""


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dbos_agents.testing.fake_openai",
            "--text",
            TEXT,
            "--chunk-chars",
            "4",
            "--chunk-delay",
            "0.02",
        ],
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().decode().strip()
    assert url.startswith("http://127.0.0.1:"), url
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _fake_requests(url: str) -> list[dict[str, Any]]:
    base = url.removesuffix("/v1")
    with urllib.request.urlopen(f"{base}/_fake/requests", timeout=10) as r:
        body = json.loads(r.read())
    return list(body["requests"] if isinstance(body, dict) else body)


def _reset(url: str) -> None:
    base = url.removesuffix("/v1")
    req = urllib.request.Request(f"{base}/_fake/reset", method="POST")
    urllib.request.urlopen(req, timeout=10).close()


def _deltas(db: str, sid: str) -> list[Any]:
    with psycopg.connect(db, autocommit=True) as conn, conn.cursor(row_factory=namedtuple_row) as c:
        c.execute(
            "SELECT id, turn, attempt, part, kind, tool_index, text FROM dbos_agents.deltas"
            " WHERE session_id = %s ORDER BY id",
            (sid,),
        )
        return c.fetchall()


def _shown(rows: list[Any]) -> str:
    """What a reader that applied every delta and retraction holds."""
    text = ""
    for r in rows:
        if r.kind == "text":
            text += r.text
        elif r.kind == "retract" and r.tool_index is None:
            text = ""
    return text


def _streaming(db: str, sids: list[str]) -> bool:
    with psycopg.connect(db, autocommit=True) as conn:
        n = conn.execute(
            "SELECT count(*) FROM dbos_agents.deltas WHERE session_id = ANY(%s)", (sids,)
        ).fetchone()
    return bool(n and n[0])


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, fake_openai: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    with CrashHarness(
        "tests.crash.stream_app:runtime",
        fresh_database_url,
        log_dir=tmp_path_factory.mktemp("logs"),
        cwd=REPO,
        executor_id="stream-worker",
        env={"FAKE_OPENAI_URL": fake_openai, "DBOS_AGENTS_SHUTDOWN_GRACE_SEC": "15"},
    ) as h:
        yield h


def test_sigkill_mid_stream_continues_the_reply_exactly_once(
    harness: CrashHarness, fake_openai: str
) -> None:
    _reset(fake_openai)
    db = harness.database_url
    rng = random.Random(27)
    sids = [harness.client.start("writer", f"write {i}") for i in range(4)]
    kills = 0
    worker = harness.start_worker()
    try:
        for _ in range(8):
            deadline = time.monotonic() + 60
            while not _streaming(db, sids) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(rng.uniform(0.3, 1.5))  # somewhere in the middle of the replies
            if all(harness.client.session(s).status == "completed" for s in sids):
                break
            worker.kill()
            kills += 1
            worker = harness.start_worker()
        for sid in sids:
            assert harness.client.wait(sid, timeout=120).status == "completed"
    finally:
        worker.stop()
    assert kills >= 3, "the replies were too short to be cut"
    continuations = [r for r in _fake_requests(fake_openai) if r.get("continuation") != "fresh"]
    assert continuations and all(r.get("offset", 0) > 0 for r in continuations)
    for sid in sids:
        rows = _deltas(db, sid)
        parts = [(r.turn, r.attempt, r.part) for r in rows]
        assert len(parts) == len(set(parts)), "a delta was appended twice"
        assert not [r for r in rows if r.kind == "retract"], "text continues: nothing withdrawn"
        message = [m.content for m in harness.client.history(sid) if m.role == "assistant"]
        assert message == [TEXT] and _shown(rows) == TEXT
    print(
        f"\nstream crash: sessions={len(sids)} kills={kills}"
        f" continuations={len(continuations)}"
        f" attempts={sorted({(r.attempt) for s in sids for r in _deltas(db, s)})}"
    )


def test_sigterm_mid_stream_lets_the_stream_finish(
    harness: CrashHarness, fake_openai: str
) -> None:
    _reset(fake_openai)
    db = harness.database_url
    sid = harness.client.start("writer", "finish me")
    worker = harness.start_worker()
    deadline = time.monotonic() + 60
    while not _streaming(db, [sid]) and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.popen.terminate()
    assert worker.wait(60) == 0, worker.log()
    rows = _deltas(db, sid)
    assert {r.attempt for r in rows} == {1}, "the stream was not cut"
    assert [m.content for m in harness.client.history(sid) if m.role == "assistant"] == [TEXT]
    # The rest of the run waits, PENDING, for the next worker (as any drained run does).
    worker = harness.start_worker()
    try:
        assert harness.client.wait(sid, timeout=60).status == "completed"
    finally:
        worker.stop()
    assert [r.get("continuation") for r in _fake_requests(fake_openai)] == ["fresh"]
