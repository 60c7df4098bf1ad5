"""A worker SIGKILLed while its model streams keeps what readers were shown: the restarted
worker continues each reply from its partial (the fake server records a continuation at
that offset), appends only new deltas, and the stored message is exactly the deltas' text.
SSE readers (``dbos-agents serve`` in its own process) hang up at random and reconnect
with their last event id: each sees every delta once, and what it shows is the message.
SIGTERM mid-stream lets the stream finish within the grace period (the turn is recorded
whole; the rest of the run waits for the next worker, as any drained run does).

The model is ``OpenAIModel`` against the fake OpenAI server, in a process of its own
(``python -m dbos_agents.testing.fake_openai``), streaming a few characters per chunk.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from dbos_agents.testing import CrashHarness
from dbos_agents.testing.loopback import serve_in_process

from ..delta_log import delta_rows, shown_text

pytestmark = [pytest.mark.integration, pytest.mark.crash]
REPO = Path(__file__).resolve().parents[2]
TEXT = " ".join(f"word{i:03d}" for i in range(120))
"""About 1 kB: 240 chunks of 4 characters, one per 20 ms, a reply streams for about 5 s."""


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[str]:
    with serve_in_process(
        "dbos_agents.testing.fake_openai",
        "--text",
        TEXT,
        "--chunk-chars",
        "4",
        "--chunk-delay",
        "0.02",
    ) as url:
        yield url


def _fake_requests(url: str) -> list[dict[str, Any]]:
    base = url.removesuffix("/v1")
    with urllib.request.urlopen(f"{base}/_fake/requests", timeout=10) as r:
        body = json.loads(r.read())
    return list(body["requests"] if isinstance(body, dict) else body)


def _reset(url: str) -> None:
    base = url.removesuffix("/v1")
    req = urllib.request.Request(f"{base}/_fake/reset", method="POST")
    urllib.request.urlopen(req, timeout=10).close()


def _count(db: str, sids: list[str]) -> int:
    with psycopg.connect(db, autocommit=True) as conn:
        n = conn.execute(
            "SELECT count(*) FROM dbos_agents.deltas WHERE session_id = ANY(%s)", (sids,)
        ).fetchone()
    return int(n[0]) if n else 0


def _streaming(db: str, sids: list[str], more_than: int = 0) -> bool:
    return _count(db, sids) > more_than


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


@pytest.fixture(scope="module")
def server(harness: CrashHarness) -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "dbos_agents.cli", "serve", "--allow-unauthenticated"),
            *("--port", str(port), "--database-url", harness.database_url),
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(15)


@dataclass
class Reader:
    """An SSE reader that hangs up at random and resumes with its last event id."""

    url: str
    sid: str
    token: str
    rng: random.Random
    ids: list[str] = field(default_factory=list)
    shown: str = ""
    message: str | None = None
    reconnects: int = 0
    error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:
            self.error = exc

    def _run(self) -> None:
        last: str | None = None
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            headers = {"Authorization": f"Bearer {self.token}"}
            if last is not None:
                headers["Last-Event-ID"] = last
            hang_up_after = self.rng.randint(5, 60)
            seen = 0
            with httpx.stream(
                "GET", f"{self.url}/sessions/{self.sid}/events", headers=headers, timeout=30
            ) as r:
                assert r.status_code == 200, r.read()
                event: dict[str, str] = {}
                for line in r.iter_lines():
                    if line:
                        name, _, value = line.partition(": ")
                        event[name] = value
                        continue
                    if "event" not in event:
                        event = {}
                        continue
                    kind, data = event["event"], json.loads(event.get("data") or "null")
                    if "id" in event:
                        self.ids.append(event["id"])
                        last = event["id"]
                    if kind == "delta" and data.get("tool_call") is None:
                        self.shown += data["text"]
                    elif kind == "retract" and data.get("tool_index") is None:
                        self.shown = ""
                    elif kind == "message" and data["role"] == "assistant":
                        self.message = data["content"]
                    elif kind == "status" and data["status"] in ("completed", "failed"):
                        return
                    event = {}
                    seen += 1
                    if seen >= hang_up_after:
                        break  # hang up mid-stream
            self.reconnects += 1


def test_sigkill_mid_stream_continues_the_reply_exactly_once(
    harness: CrashHarness, fake_openai: str, server: str
) -> None:
    _reset(fake_openai)
    db = harness.database_url
    rng = random.Random(27)
    created = [
        httpx.post(f"{server}/sessions", json={"agent": "writer", "message": f"write {i}"})
        for i in range(4)
    ]
    assert all(r.status_code == 201 for r in created), [r.text for r in created]
    sids = [r.json()["session_id"] for r in created]
    readers = [
        Reader(server, r.json()["session_id"], r.json()["token"], random.Random(i))
        for i, r in enumerate(created)
    ]
    threads = [threading.Thread(target=rd.run, daemon=True) for rd in readers]
    for t in threads:
        t.start()
    kills = 0
    worker = harness.start_worker()
    try:
        for _ in range(12):
            before = _count(db, sids)
            deadline = time.monotonic() + 60
            while not _streaming(db, sids, before) and time.monotonic() < deadline:
                time.sleep(0.05)  # this worker streams
            time.sleep(rng.uniform(0.2, 0.8))  # somewhere in the middle of the replies
            if all(harness.client.session(s).status == "completed" for s in sids):
                break
            worker.kill()
            kills += 1
            worker = harness.start_worker()
        for sid in sids:
            assert harness.client.wait(sid, timeout=120).status == "completed"
    finally:
        worker.stop()
    for t in threads:
        t.join(120)
    assert kills >= 6, "the replies were too short to be cut"
    for rd in readers:
        assert rd.error is None, rd.error
        assert len(rd.ids) == len(set(rd.ids)), "a reader saw an event twice"
        assert rd.shown == TEXT and rd.message == TEXT
    duplicates = sum(len(rd.ids) - len(set(rd.ids)) for rd in readers)
    continuations = [r for r in _fake_requests(fake_openai) if r.get("continuation") != "fresh"]
    assert continuations and all(r.get("offset", 0) > 0 for r in continuations)
    for sid in sids:
        rows = delta_rows(db, sid)
        parts = [(r.turn, r.attempt, r.part) for r in rows]
        assert len(parts) == len(set(parts)), "a delta was appended twice"
        assert not [r for r in rows if r.kind == "retract"], "text continues: nothing withdrawn"
        message = [m.content for m in harness.client.history(sid) if m.role == "assistant"]
        assert message == [TEXT] and shown_text(rows) == TEXT
    print(
        f"\nstream crash: sessions={len(sids)} kills={kills}"
        f" continuations={len(continuations)}"
        f" deltas={sum(len(delta_rows(db, s)) for s in sids)}"
        f" events_read={sum(len(rd.ids) for rd in readers)}"
        f" reconnects={sum(rd.reconnects for rd in readers)} duplicates_seen={duplicates}"
        f" attempts={sorted({(r.attempt) for s in sids for r in delta_rows(db, s)})}"
    )


def test_sigterm_mid_stream_lets_the_stream_finish(harness: CrashHarness, fake_openai: str) -> None:
    _reset(fake_openai)
    db = harness.database_url
    sid = harness.client.start("writer", "finish me")
    worker = harness.start_worker()
    deadline = time.monotonic() + 60
    while not _streaming(db, [sid]) and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.popen.terminate()
    assert worker.wait(60) == 0, worker.log()
    rows = delta_rows(db, sid)
    assert {r.attempt for r in rows} == {1}, "the stream was not cut"
    assert [m.content for m in harness.client.history(sid) if m.role == "assistant"] == [TEXT]
    # The rest of the run waits, PENDING, for the next worker (as any drained run does).
    worker = harness.start_worker()
    try:
        assert harness.client.wait(sid, timeout=60).status == "completed"
    finally:
        worker.stop()
    assert [r.get("continuation") for r in _fake_requests(fake_openai)] == ["fresh"]
