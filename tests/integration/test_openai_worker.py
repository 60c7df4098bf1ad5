"""OpenAIModel end to end: a real worker process, the real openai client, a local server
speaking the OpenAI wire format. No network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbos_agents.testing import CrashHarness
from dbos_agents.testing.fake_openai import FakeToolCall, serve_fake_openai

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def test_support_desk_on_openai_wire_with_429_parallel_calls_and_bad_arguments(
    fresh_database_url: str, tmp_path: Path
) -> None:
    with serve_fake_openai() as fake:
        fake.push_error(429, "slow down", type="rate_limit_exceeded")
        fake.push_tool_calls(
            FakeToolCall("get_order", '{"order_id": "A-42"}', id="c1"),
            FakeToolCall("issue_refund", '{"order_id": "A-42", "cents": ', id="c2"),
        )
        fake.push_text("Your order A-42 is an espresso machine; I could not refund it yet.")
        with CrashHarness(
            "dbos_agents.examples.support_desk:runtime",
            fresh_database_url,
            env={
                "OPENAI_BASE_URL": fake.base_url,
                "DBOS_AGENTS_MODEL_BACKOFF_INITIAL_SEC": "0.05",
                "DBOS_AGENTS_DEMO_PAYMENTS": str(tmp_path / "payments.jsonl"),
            },
            executor_id="openai-worker",
            log_dir=tmp_path,
            cwd=REPO,
        ) as h:
            worker = h.start_worker()
            try:
                sid = h.client.start("support", "Refund order A-42 please")
                info = h.client.wait(sid, timeout=60)
            finally:
                worker.stop()
            history = h.client.history(sid)
            turns = h.client.usage(sid)
        assert info.status == "completed", worker.log()[-3000:]
        assert info.final_output and info.final_output.startswith("Your order A-42")
        # The 429 was retried by the durable model step: 3 requests for 2 answers.
        assert len(fake.requests) == 3
        assert fake.requests[0] == fake.requests[1]
        first = fake.requests[1]
        assert first["parallel_tool_calls"] is True
        assert {t["function"]["name"] for t in first["tools"]} == {
            "get_order",
            "confirm_with_customer",
            "issue_refund",
        }
        assert first["messages"][0]["role"] == "system"
        tools = {m.tool_call_id: json.loads(m.content or "") for m in history if m.role == "tool"}
        assert tools["c1"]["id"] == "A-42"
        assert tools["c2"]["error"]["kind"] == "invalid-arguments"
        # The last request carried both tool results back, with their ids.
        last = fake.requests[-1]["messages"]
        assert [m.get("tool_call_id") for m in last if m["role"] == "tool"] == ["c1", "c2"]
        assert info.usage.input_tokens == 20 and info.usage.cost_usd > 0
        # The adapter leaves the provider to the loop, which takes the model's own.
        assert [(t.turn, t.provider) for t in turns] == [(1, "openai"), (2, "openai")]
        assert sum(t.input_tokens for t in turns) == info.usage.input_tokens
        assert not (tmp_path / "payments.jsonl").exists()  # the malformed refund never ran
