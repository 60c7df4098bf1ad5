"""``AnthropicModel`` end to end in a real worker process: a 529 retried by the durable
model turn, parallel tool calls (one with arguments that are not JSON), thinking blocks
sent back within the tool loop and never shown, usage and cost recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbos_agents.testing import CrashHarness
from dbos_agents.testing.fake_anthropic import FakeToolUse, serve_fake_anthropic

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
ANSWER = "A-42 shipped on Monday; I could not read the other order number."


def test_tool_loop_with_thinking_overload_and_bad_arguments(
    fresh_database_url: str, tmp_path: Path
) -> None:
    with serve_fake_anthropic() as fake:
        fake.push_error(529, "Overloaded", type="overloaded_error", retry_after=0)
        fake.push_tool_uses(
            FakeToolUse("lookup", {"order_id": "A-42"}, id="t1"),
            FakeToolUse("lookup", '{"order_id": ', id="t2"),
            thinking="Two orders: look both up.",
            input_tokens=100,
            output_tokens=20,
        )
        fake.push_text(
            ANSWER, thinking="One failed.", input_tokens=50, output_tokens=10, cache_read=1000
        )
        with CrashHarness(
            "tests.anthropic.tools_app:runtime",
            fresh_database_url,
            env={
                "FAKE_ANTHROPIC_URL": fake.base_url,
                "DBOS_AGENTS_MODEL_BACKOFF_INITIAL_SEC": "0.05",
            },
            executor_id="anthropic-tools",
            log_dir=tmp_path,
            cwd=REPO,
        ) as h:
            worker = h.start_worker()
            try:
                sid = h.client.start("support", "Where are A-42 and the other one?")
                info = h.client.wait(sid, timeout=60)
            finally:
                worker.stop()
            history = h.client.history(sid)
        assert info.status == "completed", worker.log()[-3000:]
        assert info.final_output == ANSWER
        requests = fake.requests
        assert len(requests) == 3 and requests[0]["messages"] == requests[1]["messages"]
        assert all(r["stream"] is True for r in requests)
        last = requests[-1]["messages"]
        assert [m["role"] for m in last] == ["user", "assistant", "user"]
        assistant = last[1]["content"]
        assert assistant[0]["type"] == "thinking"
        assert assistant[0]["thinking"] == "Two orders: look both up."
        assert [b["type"] for b in assistant[1:]] == ["tool_use", "tool_use"]
        results = last[2]["content"]
        assert [b["tool_use_id"] for b in results] == ["t1", "t2"]
        assert "shipped" in results[0]["content"]
        assert json.loads(results[1]["content"])["error"]["kind"] == "invalid-arguments"
        shown = " ".join(m.content or "" for m in history)
        assert "Two orders" not in shown and "One failed" not in shown
        assert [m.content for m in history if m.role == "assistant"][-1] == ANSWER
        assert info.usage.input_tokens == 100 + 50 + 1000 and info.usage.output_tokens == 30
        # haiku 4.5: 150 * $1 + 30 * $5 + 1000 cache reads * $0.10 per 1M
        assert info.usage.cost_usd == pytest.approx(400 / 1e6)
