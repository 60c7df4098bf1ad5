"""The span tree of a run with a server tool, a client tool, an approval, a sub-agent and a
durable tool, from an in-memory exporter in the worker's process (``inmemory_run``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .spans import Span, children, named, one, tree

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(fresh_database_url: str) -> tuple[dict[str, str], list[Span]]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.traces.inmemory_run", fresh_database_url],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    print(tree(lines[1:]))
    return lines[0]["ids"], lines[1:]


def test_one_trace_under_the_callers_span(run: tuple[dict[str, str], list[Span]]) -> None:
    ids, spans = run
    start = one(spans, "caller start")
    session = ids["session"]
    ours = [
        s
        for s in spans
        if s["name"].split()[0] in ("execute_tool", "wait", "step")
        or s["name"] in ("invoke_agent tracer", "invoke_agent helper")
        or s["attributes"].get("gen_ai.conversation.id") == session
    ]
    assert len(ours) == 13  # 2 runs, 2 chats of the session, 5 calls, 2 waits, 2 steps
    assert {s["trace"] for s in ours} == {start["trace"]}
    agent = one(spans, "invoke_agent tracer")
    assert agent["parent"] == ids["start"]
    assert agent["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert agent["attributes"]["gen_ai.agent.name"] == "tracer"
    assert agent["attributes"]["gen_ai.conversation.id"] == ids["session"]
    assert agent["attributes"]["dbos_agents.run.status"] == "completed"


def test_model_calls_are_chat_spans(run: tuple[dict[str, str], list[Span]]) -> None:
    _, spans = run
    agent = one(spans, "invoke_agent tracer")
    chats = [s for s in children(spans, agent) if s["name"].startswith("chat ")]
    assert [c["attributes"]["dbos_agents.turn"] for c in chats] == [1, 2]
    first = chats[0]["attributes"]
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"] == "scripted-model"
    assert first["gen_ai.provider.name"] == "scripted"
    assert first["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert chats[1]["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]
    assert first["gen_ai.usage.input_tokens"] > 0 and first["gen_ai.usage.output_tokens"] > 0
    assert chats[0]["kind"] == "CLIENT"
    assert "gen_ai.input.messages" not in first  # content is opt-in


def test_every_kind_of_call_is_an_execute_tool_span(
    run: tuple[dict[str, str], list[Span]],
) -> None:
    _, spans = run
    agent = one(spans, "invoke_agent tracer")
    tools = {
        s["attributes"]["gen_ai.tool.name"]: s
        for s in children(spans, agent)
        if s["name"].startswith("execute_tool ")
    }
    assert set(tools) == {"lookup", "confirm", "wire", "subagent__helper", "crawl"}
    kinds = {n: s["attributes"]["dbos_agents.tool.kind"] for n, s in tools.items()}
    assert kinds == {
        "lookup": "server",
        "confirm": "client",
        "wire": "approval",
        "subagent__helper": "subagent",
        "crawl": "durable",
    }
    for s in tools.values():
        assert s["attributes"]["gen_ai.operation.name"] == "execute_tool"
        assert s["attributes"]["gen_ai.tool.call.id"]
        assert s["attributes"]["dbos_agents.tool.outcome"] == "ok"


def test_waits_link_the_submit_that_released_them(
    run: tuple[dict[str, str], list[Span]],
) -> None:
    ids, spans = run
    for tool, submit in (("confirm", ids["submit"]), ("wire", ids["approve"])):
        wait = one(spans, f"wait {tool}")
        call = one(spans, f"execute_tool {tool}")
        assert wait["parent"] == call["id"]
        assert wait["attributes"]["dbos_agents.wait.end"] == "answered"
        assert wait["links"] == [submit]
        assert submit in call["links"]


def test_sub_agent_and_durable_steps_nest_under_their_call(
    run: tuple[dict[str, str], list[Span]],
) -> None:
    _, spans = run
    helper = one(spans, "invoke_agent helper")
    assert helper["parent"] == one(spans, "execute_tool subagent__helper")["id"]
    assert [c["name"] for c in children(spans, helper)] == ["chat scripted-model"]
    crawl = one(spans, "execute_tool crawl")
    assert [c["name"] for c in children(spans, crawl)] == ["step fetch-1", "step fetch-2"]
    assert len(named(spans, "invoke_agent tracer")) == 1


def test_a_follow_up_to_a_persistent_session_is_under_its_own_caller(
    run: tuple[dict[str, str], list[Span]],
) -> None:
    """The follow-up's context rides in the inbox message the waiting workflow receives."""
    ids, spans = run
    runs = sorted(named(spans, "invoke_agent keeper"), key=lambda s: s["start"])
    assert [r["attributes"]["dbos_agents.run_seq"] for r in runs] == [1, 2]
    follow_up = one(spans, "caller follow-up")
    assert runs[1]["parent"] == ids["follow_up"]
    assert runs[1]["trace"] == follow_up["trace"]
    assert runs[0]["trace"] != follow_up["trace"]  # the first run: a trace of its own
