"""``PydanticAIModel`` end to end in real worker processes, on Gemini's wire format (the
official ``google-genai`` SDK under Pydantic AI's ``GoogleModel``, against
``dbos_agents.testing.fake_gemini``): a 429 retried by the durable turn, parallel function
calls answered in one turn, thinking sent back and never shown, usage and cost recorded;
and a worker SIGKILLed mid-stream: the restarted worker continues the reply with a
continuation request (the shown text as the model's turn, then ``CONTINUE_PROMPT``),
appends only new deltas, and the answer is stored exactly once."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dbos_agents.models.openai_stream import CONTINUE_PROMPT
from dbos_agents.testing import CrashHarness
from dbos_agents.testing.fake_gemini import FakeFunctionCall, serve_fake_gemini
from dbos_agents.testing.loopback import serve_in_process

from ..delta_log import delta_rows, shown_text

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
APP = "tests.bridge.gemini_app:runtime"
ANSWER = "A-42 shipped on Monday, and so did B-7."
TEXT = " ".join(f"word{i:03d}" for i in range(100))
"""About 800 characters: 200 chunks of 4 characters, one per 20 ms (4 s of streaming)."""


def test_tool_loop_with_rate_limit_parallel_calls_and_thinking(
    fresh_database_url: str, tmp_path: Path
) -> None:
    with serve_fake_gemini() as fake:
        fake.push_error(429, "Resource exhausted.", retry_after=0)
        fake.push_function_calls(
            FakeFunctionCall("lookup", {"order_id": "A-42"}),
            FakeFunctionCall("lookup", {"order_id": "B-7"}),
            thinking="Two orders: look both up.",
            input_tokens=100,
            output_tokens=20,
        )
        fake.push_text(ANSWER, thinking="Both found.", input_tokens=150, output_tokens=10)
        with CrashHarness(
            APP,
            fresh_database_url,
            env={"FAKE_GEMINI_URL": fake.base_url, "DBOS_AGENTS_MODEL_BACKOFF_INITIAL_SEC": "0.05"},
            executor_id="bridge-tools",
            log_dir=tmp_path,
            cwd=REPO,
        ) as h:
            worker = h.start_worker()
            try:
                sid = h.client.start("support", "Where are A-42 and B-7?")
                info = h.client.wait(sid, timeout=60)
            finally:
                worker.stop()
            history = h.client.history(sid)
            usage = h.client.usage(sid)
        requests = fake.requests
    assert info.status == "completed", worker.log()[-3000:]
    assert info.final_output == ANSWER
    assert len(requests) == 3 and requests[0]["contents"] == requests[1]["contents"]
    assert all(r["stream"] is True and r["model"] == "gemini-2.5-flash" for r in requests)
    contents = requests[-1]["contents"]
    model_turn = next(c for c in contents if c["role"] == "model")
    calls = [p["functionCall"] for p in model_turn["parts"] if "functionCall" in p]
    assert [c["args"] for c in calls] == [{"order_id": "A-42"}, {"order_id": "B-7"}]
    assert any("thoughtSignature" in p for p in model_turn["parts"])  # sent back
    answered = [
        p["functionResponse"] for c in contents for p in c["parts"] if "functionResponse" in p
    ]
    assert [a["id"] for a in answered] == [c["id"] for c in calls]
    assert "A-42 shipped" in json.dumps(answered[0]) and "B-7 shipped" in json.dumps(answered[1])
    shown = " ".join(m.content or "" for m in history)
    assert "Two orders" not in shown and "Both found" not in shown
    assert info.usage.input_tokens == 250 and info.usage.output_tokens >= 30
    assert info.usage.cost_usd > 0  # gemini-2.5-flash is in genai-prices' list
    assert [(u.model, u.provider) for u in usage] == [("gemini-2.5-flash", "google")] * 2


@pytest.fixture(scope="module")
def fake_gemini() -> Iterator[str]:
    with serve_in_process(
        "dbos_agents.testing.fake_gemini",
        "--text",
        TEXT,
        "--chunk-chars",
        "4",
        "--chunk-delay",
        "0.02",
    ) as url:
        yield url


def _requests(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/_fake/requests", timeout=10) as r:
        return list(json.loads(r.read()))


@pytest.mark.crash
def test_sigkill_mid_stream_continues_the_reply_exactly_once(
    fresh_database_url: str, fake_gemini: str, tmp_path: Path
) -> None:
    with CrashHarness(
        APP,
        fresh_database_url,
        env={"FAKE_GEMINI_URL": fake_gemini},
        executor_id="bridge-writer",
        log_dir=tmp_path,
        cwd=REPO,
    ) as h:
        db = h.database_url
        sid = h.client.start("writer", "write it")
        worker = h.start_worker()
        try:
            deadline = time.monotonic() + 60
            while len(delta_rows(db, sid)) < 30 and time.monotonic() < deadline:
                time.sleep(0.05)  # a good part of the reply is shown, not all of it
            assert h.client.session(sid).status != "completed", "the reply was not cut"
            worker.kill()
            shown_before = shown_text(delta_rows(db, sid))
            assert shown_before and TEXT.startswith(shown_before)
            worker = h.start_worker()
            assert h.client.wait(sid, timeout=120).status == "completed"
        finally:
            worker.stop()
        rows = delta_rows(db, sid)
        history = h.client.history(sid)
    parts = [(r.turn, r.attempt, r.part) for r in rows]
    assert len(parts) == len(set(parts)), "a delta was appended twice"
    assert not [r for r in rows if r.kind == "retract"], "text continues: nothing withdrawn"
    assert {r.attempt for r in rows} == {1, 2}
    assert shown_text(rows) == TEXT
    assert [m.content for m in history if m.role == "assistant"] == [TEXT]
    first, second = _requests(fake_gemini)
    assert second["contents"][: len(first["contents"])] == first["contents"]
    partial, asked = second["contents"][len(first["contents"]) :]
    assert partial == {"role": "model", "parts": [{"text": shown_before}]}
    assert asked["role"] == "user" and asked["parts"] == [{"text": CONTINUE_PROMPT}]
