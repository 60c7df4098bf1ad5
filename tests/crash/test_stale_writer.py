"""A stale execution is fenced off the delta log. Worker A streams a reply and is frozen
(SIGSTOP) past ``stale_after_sec``; worker B adopts its session and continues the reply
from what A had shown; A is thawed (SIGCONT) while B streams, with the rest of its own
reply waiting in its socket, and is slow to notice the adoption (``stale_app``). Postgres
refuses A's pieces: readers (one following, one that hangs up and resumes) see each delta
once, and what they show is the stored message.

The model is ``OpenAIModel`` against the fake OpenAI server in a process of its own; its
request log shows B's continuation asked from exactly A's shown text.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dbos_agents import AgentClient
from dbos_agents.events import DeltaEvent, MessageEvent, RetractEvent, StatusEvent
from dbos_agents.testing import CrashHarness
from dbos_agents.testing.loopback import serve_in_process

from ..delta_log import delta_rows, shown_text
from .waiting import until

pytestmark = [pytest.mark.integration, pytest.mark.crash]
REPO = Path(__file__).resolve().parents[2]
TEXT = " ".join(f"word{i:03d}" for i in range(120))
"""About 1 kB: 240 chunks of 4 characters, one per 40 ms: a reply streams for about 10 s."""
STALE_AFTER = 3.0


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[str]:
    with serve_in_process(
        "dbos_agents.testing.fake_openai",
        *("--text", TEXT, "--chunk-chars", "4", "--chunk-delay", "0.04"),
    ) as url:
        yield url


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, fake_openai: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    with CrashHarness(
        "tests.crash.stale_app:runtime",
        fresh_database_url,
        log_dir=tmp_path_factory.mktemp("logs"),
        cwd=REPO,
        env={
            "FAKE_OPENAI_URL": fake_openai,
            "DBOS_AGENTS_STALE_AFTER_SEC": str(STALE_AFTER),
            "DBOS_AGENTS_HEARTBEAT_INTERVAL_SEC": "0.5",
            "DBOS_AGENTS_SHUTDOWN_GRACE_SEC": "1",
            "STALE_EXIT_DELAY_SEC": "3",
        },
    ) as h:
        yield h


@dataclass
class Reader:
    """``AgentClient.stream`` in a thread; with ``hang_up_every``, it stops after that
    many events and resumes from its last cursor."""

    url: str
    sid: str
    hang_up_every: int | None = None
    cursors: list[str] = field(default_factory=list)
    shown: str = ""
    message: str | None = None
    resumes: int = 0
    error: BaseException | None = None

    def run(self) -> None:
        try:
            with AgentClient(self.url) as client:
                self._run(client)
        except BaseException as exc:
            self.error = exc

    def _run(self, client: AgentClient) -> None:
        last: str | None = None
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            events = client.stream(self.sid, last, timeout=max(1.0, deadline - time.monotonic()))
            for seen, ev in enumerate(events, 1):
                cursor = getattr(ev, "cursor", None)
                if cursor is not None:
                    self.cursors.append(cursor)
                    last = cursor
                if isinstance(ev, DeltaEvent) and ev.tool_call is None:
                    self.shown += ev.text
                elif isinstance(ev, RetractEvent) and ev.tool_index is None:
                    self.shown = ""
                elif isinstance(ev, MessageEvent) and ev.role == "assistant":
                    self.message = ev.content
                elif isinstance(ev, StatusEvent) and ev.status in ("completed", "failed"):
                    return
                if self.hang_up_every is not None and seen >= self.hang_up_every:
                    break
            self.resumes += 1


def _requests(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url.removesuffix('/v1')}/_fake/requests", timeout=10) as r:
        body = json.loads(r.read())
    return list(body["requests"] if isinstance(body, dict) else body)


def _attempt_rows(db: str, sid: str, attempt: int) -> int:
    with psycopg.connect(db, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM dbos_agents.deltas WHERE session_id = %s AND attempt = %s",
            (sid, attempt),
        ).fetchone()
    return int(row[0]) if row else 0


def test_a_stale_execution_streaming_after_its_adoption_is_refused(
    harness: CrashHarness, fake_openai: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = harness.database_url
    a = harness.start_worker(executor_id="stale-a")
    b = None
    frozen = False
    try:
        a.wait_ready()
        sid = harness.client.start("writer", "write it all")
        readers = [Reader(db, sid), Reader(db, sid, hang_up_every=17)]
        threads = [threading.Thread(target=r.run, daemon=True) for r in readers]
        for t in threads:
            t.start()
        until(lambda: _attempt_rows(db, sid, 1) >= 20)  # A streams
        os.kill(a.pid, signal.SIGSTOP)  # the fake server goes on sending into A's socket
        frozen = True
        shown_by_a = _attempt_rows(db, sid, 1)
        b = harness.start_worker(executor_id="stale-b")
        b.wait_ready()
        # B adopts A after STALE_AFTER of silence and continues the reply: attempt 2.
        until(lambda: _attempt_rows(db, sid, 2) >= 10, timeout=90)
        os.kill(a.pid, signal.SIGCONT)  # mid-stream: B is still writing
        frozen = False
        info = harness.client.wait(sid, timeout=120)
        assert info.status == "completed", info
        a_exit = a.wait(60)
        for t in threads:
            t.join(60)
    except BaseException as exc:
        tails = "\n".join(f"--- {w.pid}:\n{w.log()[-4000:]}" for w in (a, b) if w is not None)
        raise AssertionError(f"{exc!r}; the workers' logs:\n{tails}") from exc
    finally:
        if frozen:
            os.kill(a.pid, signal.SIGCONT)
        a.kill()
        if b is not None:
            b.stop()
    log_a = a.log()
    refused = [int(n) for n in re.findall(r"(\d+) piece\(s\) of session \S+ not written", log_a)]
    rows = delta_rows(db, sid)
    by_attempt = {n: [r for r in rows if r.attempt == n] for n in {r.attempt for r in rows}}
    message = [m.content for m in harness.client.history(sid) if m.role == "assistant"]
    # A wrote attempt 1 up to its freeze (a batch sent just before it may land just after),
    # never after B's claim: B continued from exactly what A had written.
    assert set(by_attempt) == {1, 2}
    assert len(by_attempt[1]) >= shown_by_a
    assert refused and sum(refused) > 0, log_a[-3000:]
    assert "lost its run to another worker" in log_a
    assert a_exit == 75  # it noticed the adoption and left
    parts = [(r.turn, r.attempt, r.part) for r in rows]
    assert len(parts) == len(set(parts)), "a delta was appended twice"
    assert not [r for r in rows if r.kind == "retract"], "nothing withdrawn: B continued"
    assert message == [TEXT] and shown_text(rows) == TEXT
    a_text = "".join(r.text for r in by_attempt[1])
    continuations = [r for r in _requests(fake_openai) if r.get("continuation") != "fresh"]
    # B continued from exactly what A had written when B claimed the run. A, thawed, may
    # also ask once more from its own text (its stream cut by the freeze: a transient
    # error) before its first batch is refused: tokens, never a piece shown. Any piece A
    # wrote after B's claim would make A's text longer than where B continued.
    offsets = [r.get("offset") for r in continuations]
    assert offsets and set(offsets) == {len(a_text)}, ("A wrote after B's claim", offsets)
    for rd in readers:
        assert rd.error is None, rd.error
        assert len(rd.cursors) == len(set(rd.cursors)), "a reader saw an event twice"
        assert rd.shown == TEXT and rd.message == TEXT
    with capsys.disabled():
        print(
            f"\nstale writer: A wrote {len(by_attempt[1])} deltas (attempt 1) before its freeze,"
            f" B {len(by_attempt[2])} (attempt 2); A's thawed stream: {sum(refused)} refused"
            f" in {len(refused)} batch(es), then stopped (exit {a_exit});"
            f" readers saw {[len(rd.cursors) for rd in readers]} events"
            f" (resumes {[rd.resumes for rd in readers]}), duplicates"
            f" {[len(rd.cursors) - len(set(rd.cursors)) for rd in readers]};"
            f" stored message == readers' text == log text: {message == [TEXT]}"
        )
