"""A worker SIGKILLed while ``AnthropicModel`` streams keeps what readers were shown: the
restarted worker continues the reply with the shown text as an assistant prefill (the fake
Anthropic server, in a process of its own, records that continuation and its offset),
appends only new deltas, and the stored message is the answer exactly once."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dbos_agents.testing import CrashHarness
from dbos_agents.testing.loopback import serve_in_process

from ..delta_log import delta_rows, shown_text

pytestmark = [pytest.mark.integration, pytest.mark.crash]
REPO = Path(__file__).resolve().parents[2]
TEXT = " ".join(f"word{i:03d}" for i in range(100))
"""About 800 characters: 200 deltas of 4 characters, one per 20 ms (4 s of streaming);
a piece that ends in a space makes the prefill drop it (the API refuses one that ends in
whitespace) and the continuation write it again."""


@pytest.fixture(scope="module")
def fake_anthropic() -> Iterator[str]:
    with serve_in_process(
        "dbos_agents.testing.fake_anthropic",
        "--text",
        TEXT,
        "--chunk-chars",
        "4",
        "--chunk-delay",
        "0.02",
    ) as url:
        yield url


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, fake_anthropic: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    with CrashHarness(
        "tests.anthropic.stream_app:runtime",
        fresh_database_url,
        log_dir=tmp_path_factory.mktemp("logs"),
        cwd=REPO,
        executor_id="anthropic-worker",
        env={"FAKE_ANTHROPIC_URL": fake_anthropic},
    ) as h:
        yield h


def _requests(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/_fake/requests", timeout=10) as r:
        return list(json.loads(r.read()))


def test_sigkill_mid_stream_continues_the_reply_exactly_once(
    harness: CrashHarness, fake_anthropic: str
) -> None:
    db = harness.database_url
    sid = harness.client.start("writer", "write it")
    worker = harness.start_worker()
    try:
        deadline = time.monotonic() + 60
        while len(delta_rows(db, sid)) < 30 and time.monotonic() < deadline:
            time.sleep(0.05)  # a good part of the reply is shown, not all of it
        assert harness.client.session(sid).status != "completed", "the reply was not cut"
        worker.kill()
        shown_before = shown_text(delta_rows(db, sid))
        assert shown_before and TEXT.startswith(shown_before)
        worker = harness.start_worker()
        assert harness.client.wait(sid, timeout=120).status == "completed"
    finally:
        worker.stop()
    rows = delta_rows(db, sid)
    parts = [(r.turn, r.attempt, r.part) for r in rows]
    assert len(parts) == len(set(parts)), "a delta was appended twice"
    assert not [r for r in rows if r.kind == "retract"], "text continues: nothing withdrawn"
    assert {r.attempt for r in rows} == {1, 2}
    assert shown_text(rows) == TEXT
    assert [m.content for m in harness.client.history(sid) if m.role == "assistant"] == [TEXT]
    requests = _requests(fake_anthropic)
    assert [r["continuation"] for r in requests] == ["fresh", "prefix"]
    prefill = requests[1]["messages"][-1]
    assert prefill["role"] == "assistant"
    assert prefill["content"][0]["text"] == shown_before.rstrip()
    assert requests[1]["offset"] == len(shown_before.rstrip()) > 0
