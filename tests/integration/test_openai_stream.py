"""``OpenAIModel.stream`` through the real ``openai`` client against the fake server's
server-sent events, continuations in both styles, and the fake as a separate process.
No Postgres, no network beyond loopback."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dbos_agents import Message, ModelError, ModelResponse, ToolCall, TransientModelError
from dbos_agents.models import (
    Completed,
    ModelEvent,
    ModelRequest,
    OpenAIModel,
    StreamingModel,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from dbos_agents.models.openai import CONTINUE_PROMPT
from dbos_agents.testing.fake_openai import (
    FakeOpenAI,
    FakeReply,
    FakeToolCall,
    serve_fake_openai,
)

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

ANSWER = "Your order A-42 shipped on Monday and should arrive on Thursday."
LOOKUP = ToolSpec(name="lookup", parameters={"type": "object", "properties": {}})


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    server.reset()
    server.chunk_chars, server.chunk_delay_sec = 8, 0.0
    yield server
    assert server.pending == 0, "the test did not consume every scripted reply"


def ask(continue_from: str | None = None, tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest(
        agent="a",
        instructions="You track orders.",
        messages=[Message(role="user", content="where is A-42?")],
        tools=tools or [],
        continue_from=continue_from,
    )


def stream(model: OpenAIModel, request: ModelRequest) -> list[ModelEvent]:
    """Every event of one call, on a fresh event loop; closes the model's connections."""

    async def run() -> list[ModelEvent]:
        try:
            return [event async for event in model.stream(request)]
        finally:
            await model.aclose()

    return asyncio.run(run())


def completed(events: list[ModelEvent]) -> ModelResponse:
    assert sum(isinstance(e, Completed) for e in events) == 1
    last = events[-1]
    assert isinstance(last, Completed)
    return last.response


def texts(events: list[ModelEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


def test_is_a_streaming_model_that_continues(fake: FakeOpenAI) -> None:
    model = OpenAIModel(base_url=fake.base_url)
    assert isinstance(model, StreamingModel)
    assert model.continues is True


def test_text_arrives_in_pieces_with_usage_and_cost(fake: FakeOpenAI) -> None:
    fake.push_text(ANSWER, prompt_tokens=1000, completion_tokens=500, model="gpt-4.1-mini-2025")
    events = stream(OpenAIModel("gpt-4.1-mini", base_url=fake.base_url), ask())
    pieces = texts(events)
    assert pieces == [ANSWER[i : i + 8] for i in range(0, len(ANSWER), 8)]
    response = completed(events)
    assert "".join(pieces) == response.text == ANSWER
    assert response.tool_calls == []
    assert response.model == "gpt-4.1-mini-2025"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (1000, 500)
    assert response.usage.cost_usd == pytest.approx(1000 * 0.40 / 1e6 + 500 * 1.60 / 1e6)
    [body] = fake.requests
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][-1] == {"role": "user", "content": "where is A-42?"}
    assert (body["continuation"], body["offset"]) == ("fresh", 0)


def test_the_stream_matches_what_complete_returns(fake: FakeOpenAI) -> None:
    calls = (
        FakeToolCall("lookup", '{"order_id": "A-42", "detail": "full"}', id="c1"),
        FakeToolCall("lookup", '{"order_id": "B-7"}', id="c2"),
    )
    fake.push_tool_calls(*calls, text="checking both")
    fake.push_tool_calls(*calls, text="checking both")
    model = OpenAIModel(base_url=fake.base_url)
    events = stream(model, ask(tools=[LOOKUP]))

    async def once() -> ModelResponse:
        try:
            return await model.complete(ask(tools=[LOOKUP]))
        finally:
            await model.aclose()

    assert completed(events) == asyncio.run(once())
    assert fake.requests[0]["parallel_tool_calls"] is True


def test_tool_call_deltas_assemble_into_the_tool_calls(fake: FakeOpenAI) -> None:
    fake.chunk_chars = 4
    arguments = ['{"order_id": "A-42"}', '{"order_id": "B-7", "x": [1, 2]}']
    fake.push_tool_calls(
        FakeToolCall("lookup", arguments[0], id="call_a"),
        FakeToolCall("search", arguments[1], id="call_b"),
    )
    events = stream(OpenAIModel(base_url=fake.base_url), ask(tools=[LOOKUP]))
    response = completed(events)
    assert response.text is None and texts(events) == []
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assembled: list[ToolCall] = []
    for index in (0, 1):
        pieces = [d for d in deltas if d.index == index]
        assert len(pieces) > 3  # the arguments came in several pieces
        assert all(len(d.arguments) <= 4 for d in pieces)
        assert [d.id for d in pieces if d.id] == [f"call_{'ab'[index]}"]
        assert [d.name for d in pieces if d.name] == [("lookup", "search")[index]]
        assembled.append(
            ToolCall(
                id=pieces[0].id or "",
                name=pieces[0].name or "",
                arguments="".join(d.arguments for d in pieces),
            )
        )
    assert assembled == response.tool_calls
    assert [c.arguments for c in response.tool_calls] == arguments


def test_prefix_continuation_returns_only_the_remainder(fake: FakeOpenAI) -> None:
    shown = ANSWER[:21]
    fake.push_text(ANSWER)
    model = OpenAIModel(base_url=fake.base_url, continuation="prefix")
    events = stream(model, ask(continue_from=shown))
    response = completed(events)
    assert "".join(texts(events)) == response.text == ANSWER[21:]
    assert shown + (response.text or "") == ANSWER
    [body] = fake.requests
    assert body["messages"][-1] == {"role": "assistant", "content": shown, "prefix": True}
    assert body["messages"][-2] == {"role": "user", "content": "where is A-42?"}
    assert (body["continuation"], body["offset"]) == ("prefix", 21)


def test_request_continuation_returns_only_the_remainder(fake: FakeOpenAI) -> None:
    shown = ANSWER[:30]
    fake.push_text(ANSWER)
    model = OpenAIModel(base_url=fake.base_url)  # "request" is the default
    events = stream(model, ask(continue_from=shown))
    response = completed(events)
    assert "".join(texts(events)) == response.text == ANSWER[30:]
    [body] = fake.requests
    assert body["messages"][-2:] == [
        {"role": "assistant", "content": shown},
        {"role": "user", "content": CONTINUE_PROMPT},
    ]
    assert CONTINUE_PROMPT == (
        "Continue your previous reply exactly where it stopped. Do not repeat any of it."
    )
    assert (body["continuation"], body["offset"]) == ("request", 30)


def test_a_cut_stream_then_its_continuation_make_the_whole_answer(fake: FakeOpenAI) -> None:
    """The runtime's recovery: show what arrived, then ask again with it as continue_from."""
    fake.push_text(ANSWER, cut_after=4)  # the role chunk and three pieces of text
    fake.push_text(ANSWER)
    model = OpenAIModel(base_url=fake.base_url)
    shown: list[str] = []

    async def cut() -> None:
        try:
            async for event in model.stream(ask()):
                if isinstance(event, TextDelta):
                    shown.append(event.text)
        finally:
            await model.aclose()

    with pytest.raises(TransientModelError, match="connection"):
        asyncio.run(cut())
    assert shown == [ANSWER[0:8], ANSWER[8:16], ANSWER[16:24]]
    rest = completed(stream(model, ask(continue_from="".join(shown))))
    assert "".join(shown) + (rest.text or "") == ANSWER
    assert [(r["continuation"], r["offset"]) for r in fake.requests] == [
        ("fresh", 0),
        ("request", 24),
    ]


@pytest.mark.parametrize("status", [500, 503, 429])
def test_5xx_and_429_raise_transient(fake: FakeOpenAI, status: int) -> None:
    fake.push_error(status, "The server had an error while processing your request.")
    with pytest.raises(TransientModelError, match=f"HTTP {status}"):
        stream(OpenAIModel(base_url=fake.base_url), ask())


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_raise_model_error(fake: FakeOpenAI, status: int) -> None:
    fake.push_error(status, "Invalid value for 'messages'.", type="invalid_request_error")
    with pytest.raises(ModelError, match="Invalid value for 'messages'") as info:
        stream(OpenAIModel(base_url=fake.base_url), ask())
    assert not isinstance(info.value, TransientModelError)


def test_a_slow_stream_times_out_as_transient(fake: FakeOpenAI) -> None:
    fake.chunk_delay_sec = 0.5
    fake.push_text(ANSWER)
    with pytest.raises(TransientModelError, match="timed out"):
        stream(OpenAIModel(base_url=fake.base_url, timeout=0.2), ask())


def test_a_stream_that_ends_without_a_finish_reason_is_transient(fake: FakeOpenAI) -> None:
    """``[DONE]`` with no choice finished: the reply did not come whole, so ask again."""
    fake.push(FakeReply(200, {"id": "chatcmpl-x", "model": "gpt-4.1-mini", "choices": []}))
    with pytest.raises(TransientModelError, match="ended before the reply did"):
        stream(OpenAIModel(base_url=fake.base_url), ask())


def test_stopping_early_closes_the_stream(fake: FakeOpenAI) -> None:
    fake.chunk_delay_sec = 0.05
    fake.push_text("x" * 400)  # 50 pieces, 2.5 s in all
    model = OpenAIModel(base_url=fake.base_url)

    async def first_piece() -> ModelEvent:
        events = model.stream(ask())
        try:
            return await anext(events)
        finally:
            await events.aclose()  # type: ignore[attr-defined]
            await model.aclose()

    started = time.monotonic()
    assert asyncio.run(first_piece()) == TextDelta(text="x" * 8)
    assert time.monotonic() - started < 1.5


def test_the_fake_speaks_openais_chunk_format(fake: FakeOpenAI) -> None:
    """The raw wire, as OpenAI sends it: role first, pieces, finish reason, usage, [DONE]."""
    fake.push_tool_calls(FakeToolCall("lookup", '{"a": 1}', id="c9"), text="on it")
    fake.push_text("plain")
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
    lines = _sse(fake.base_url, {**body, "stream_options": {"include_usage": True}})
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(line) for line in lines[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert [d["content"] for d in deltas if d.get("content")] == ["on it"]
    assert deltas[2]["tool_calls"] == [
        {
            "index": 0,
            "id": "c9",
            "type": "function",
            "function": {"name": "lookup", "arguments": ""},
        }
    ]
    assert deltas[3]["tool_calls"] == [{"index": 0, "function": {"arguments": '{"a": 1}'}}]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-2])
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert all(c["usage"] is None for c in chunks[:-1])

    plain = [json.loads(line) for line in _sse(fake.base_url, body)[:-1]]  # no usage asked
    assert all(c["choices"] and "usage" not in c for c in plain)
    assert plain[-1]["choices"][0]["finish_reason"] == "stop"


def _sse(base_url: str, body: dict[str, Any]) -> list[str]:
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        raw = response.read().decode()
    events = raw.split("\n\n")
    assert events[-1] == ""
    assert all(e.startswith("data: ") for e in events[:-1])
    return [e.removeprefix("data: ") for e in events[:-1]]


# -- the fake as a separate process ---------------------------------------------------------


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _post(url: str) -> Any:
    request = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def test_the_command_line_server_streams_and_records() -> None:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dbos_agents.testing.fake_openai",
            "--port",
            "0",
            "--text",
            ANSWER,
            "--chunk-chars",
            "5",
            "--chunk-delay",
            "0.01",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        model = OpenAIModel(base_url=base_url)
        events = stream(model, ask())
        assert texts(events)[:2] == [ANSWER[:5], ANSWER[5:10]]
        assert completed(events).text == ANSWER
        rest = completed(stream(model, ask(continue_from=ANSWER[:12])))
        assert rest.text == ANSWER[12:]

        async def plain() -> ModelResponse:
            try:
                return await model.complete(ask())
            finally:
                await model.aclose()

        assert asyncio.run(plain()).text == ANSWER  # not streamed: the same answer

        root = base_url.removesuffix("/v1")
        recorded = _get(f"{root}/_fake/requests")
        assert [(r["continuation"], r["offset"], r.get("stream")) for r in recorded] == [
            ("fresh", 0, True),
            ("request", 12, True),
            ("fresh", 0, None),
        ]
        assert _post(f"{root}/_fake/reset") == {"ok": True}
        assert _get(f"{root}/_fake/requests") == []
    finally:
        process.terminate()
        process.wait(timeout=10)
