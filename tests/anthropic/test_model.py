"""``AnthropicModel`` through the real ``anthropic`` SDK against the fake Messages server
over loopback HTTP: complete and stream, tools, usage and cost, caching markers, thinking,
continuation, errors and the real-model guard. No Postgres."""

from __future__ import annotations

import asyncio
import json
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

from dbos_agents import ConfigurationError, Message, ModelError, ToolCall, TransientModelError
from dbos_agents.messages import ModelResponse, Thinking
from dbos_agents.models import (
    AnthropicModel,
    AnthropicPrice,
    Completed,
    FallbackModel,
    ModelEvent,
    ModelRequest,
    StreamingModel,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from dbos_agents.models.anthropic_request import CONTINUE_PROMPT
from dbos_agents.models.anthropic_stream import Tokens
from dbos_agents.models.guard import ALLOW_ENV, BLOCK_ENV
from dbos_agents.models.retry_after import retry_after
from dbos_agents.testing.fake_anthropic import (
    FakeAnthropic,
    FakeReply,
    FakeToolUse,
    serve_fake_anthropic,
)

REPO = Path(__file__).resolve().parents[2]
ANSWER = "Your order A-42 shipped on Monday and should arrive on Thursday."
LOOKUP = ToolSpec(
    name="lookup",
    description="Find an order.",
    parameters={"type": "object", "properties": {"id": {"type": "string"}}},
)
CLOCK = ToolSpec(name="clock")


@pytest.fixture(scope="module")
def server() -> Iterator[FakeAnthropic]:
    with serve_fake_anthropic() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeAnthropic) -> Iterator[FakeAnthropic]:
    server.reset()
    server.chunk_chars = 8
    yield server
    assert server.pending == 0, "the test did not consume every scripted reply"


def model(fake: FakeAnthropic, **options: object) -> AnthropicModel:
    return AnthropicModel("claude-haiku-4-5", base_url=fake.base_url, **options)  # type: ignore[arg-type]


def ask(*messages: Message, tools: list[ToolSpec] | None = None, **extra: object) -> ModelRequest:
    return ModelRequest(
        agent="a",
        instructions="You track orders.",
        messages=list(messages) or [Message(role="user", content="where is A-42?")],
        tools=tools or [],
        **extra,  # type: ignore[arg-type]
    )


def run_stream(m: AnthropicModel, request: ModelRequest) -> list[ModelEvent]:
    async def go() -> list[ModelEvent]:
        try:
            return [e async for e in m.stream(request)]
        finally:
            await m.aclose()

    return asyncio.run(go())


def run_complete(m: AnthropicModel, request: ModelRequest) -> ModelResponse:
    async def go() -> ModelResponse:
        try:
            return await m.complete(request)
        finally:
            await m.aclose()

    return asyncio.run(go())


def completed(events: list[ModelEvent]) -> ModelResponse:
    last = [e for e in events if isinstance(e, Completed)]
    assert len(last) == 1 and events[-1] is last[0]
    return last[0].response


def test_importing_dbos_agents_does_not_import_anthropic() -> None:
    code = "import sys, dbos_agents, dbos_agents.models; print('anthropic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.stdout.strip() == "False", out.stderr


def test_streamed_answer(fake: FakeAnthropic) -> None:
    fake.push_text(ANSWER, input_tokens=20, output_tokens=14)
    m = model(fake)
    assert isinstance(m, StreamingModel) and m.continues
    events = run_stream(m, ask())
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(texts) > 3 and "".join(texts) == ANSWER
    response = completed(events)
    assert response.text == ANSWER and response.tool_calls == [] and response.thinking == []
    assert response.model == "claude-haiku-4-5"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (20, 14)
    body = fake.requests[0]
    assert body["stream"] is True and body["model"] == "claude-haiku-4-5"
    assert body["max_tokens"] == 4096
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "where is A-42?"}]}
    ]


def test_complete_answer(fake: FakeAnthropic) -> None:
    fake.push_text(ANSWER)
    response = run_complete(model(fake), ask())
    assert response.text == ANSWER and "stream" not in fake.requests[0]


@pytest.mark.parametrize("streamed", [False, True])
def test_tool_round_trip(fake: FakeAnthropic, streamed: bool) -> None:
    fake.push_tool_uses(FakeToolUse("lookup", {"id": "A-42"}, id="toolu_1"), text="Looking.")
    fake.push_text(ANSWER)
    m = model(fake)
    first = ask(tools=[LOOKUP])
    if streamed:
        events = run_stream(m, first)
        pieces = [e for e in events if isinstance(e, ToolCallDelta)]
        assert pieces[0].id == "toolu_1" and pieces[0].name == "lookup"
        assert "".join(p.arguments for p in pieces) == '{"id": "A-42"}'
        turn = completed(events)
    else:
        turn = run_complete(m, first)
    assert turn.text == "Looking."
    [call] = turn.tool_calls
    assert call.id == "toolu_1" and call.parsed_arguments() == {"id": "A-42"}
    second = ask(
        Message(role="user", content="where is A-42?"),
        Message(role="assistant", content=turn.text, tool_calls=turn.tool_calls),
        Message(role="tool", content="shipped Monday", tool_call_id="toolu_1", name="lookup"),
        tools=[LOOKUP],
    )
    final = completed(run_stream(m, second)) if streamed else run_complete(m, second)
    assert final.text == ANSWER
    sent = fake.requests[1]["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"id": "A-42"}},
        ],
    }
    assert sent[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "shipped Monday"}],
    }
    tools = fake.requests[0]["tools"]
    assert tools[0]["name"] == "lookup" and tools[0]["input_schema"] == LOOKUP.parameters
    assert tools[0]["description"] == "Find an order."


def test_parallel_tool_calls_and_results_in_one_user_turn(fake: FakeAnthropic) -> None:
    fake.push_tool_uses(
        FakeToolUse("lookup", {"id": "A-1"}, id="t1"),
        FakeToolUse("clock", id="t2"),
        FakeToolUse("lookup", {"id": "A-2"}, id="t3"),
    )
    fake.push_text("done")
    m = model(fake)
    events = run_stream(m, ask(tools=[LOOKUP, CLOCK]))
    turn = completed(events)
    assert [(c.id, c.name) for c in turn.tool_calls] == [
        ("t1", "lookup"),
        ("t2", "clock"),
        ("t3", "lookup"),
    ]
    assert turn.tool_calls[1].arguments == "{}" and turn.text is None
    assert {e.index for e in events if isinstance(e, ToolCallDelta)} == {0, 1, 2}
    results = [
        Message(role="tool", content=f"r{i}", tool_call_id=c.id, name=c.name)
        for i, c in enumerate(turn.tool_calls)
    ]
    follow = Message(role="user", content="and now?")
    req = ask(
        Message(role="user", content="go"),
        Message(role="assistant", tool_calls=turn.tool_calls),
        *results,
        follow,
        tools=[LOOKUP, CLOCK],
    )
    assert completed(run_stream(m, req)).text == "done"
    sent = fake.requests[1]["messages"]
    assert [t["role"] for t in sent] == ["user", "assistant", "user"]
    assert [b["type"] for b in sent[2]["content"]] == ["tool_result"] * 3 + ["text"]
    assert [b.get("tool_use_id") for b in sent[2]["content"][:3]] == ["t1", "t2", "t3"]


def test_malformed_tool_input_passes_through(fake: FakeAnthropic) -> None:
    fake.push_tool_uses(FakeToolUse("lookup", '{"id": "A-4', id="t1"))
    fake.push_tool_uses(FakeToolUse("lookup", "[1, 2]", id="t2"))
    m = model(fake)
    [cut] = completed(run_stream(m, ask(tools=[LOOKUP]))).tool_calls
    assert cut.arguments == '{"id": "A-4'
    [listed] = run_complete(m, ask(tools=[LOOKUP])).tool_calls
    assert listed.arguments == "[1, 2]"
    for c in (cut, listed):
        with pytest.raises(ValueError):
            c.parsed_arguments()


def test_usage_and_cost_with_cache_tokens(fake: FakeAnthropic) -> None:
    for text in "abc":
        fake.push_text(
            text, input_tokens=1000, output_tokens=500, cache_read=20_000, cache_write=4000
        )
    streamed = completed(run_stream(model(fake), ask())).usage
    # 1000*1 + 500*5 + 4000*1.25 + 20000*0.10 = 10,500 per 1M
    assert streamed.input_tokens == 25_000 and streamed.output_tokens == 500
    assert streamed.cost_usd == pytest.approx(0.0105)
    assert run_complete(model(fake), ask()).usage == streamed
    custom = AnthropicPrice(1.0, 2.0, cache_write_per_mtok=0.5, cache_read_per_mtok=0.25)
    cost = completed(run_stream(model(fake, prices=custom), ask())).usage.cost_usd
    assert cost == pytest.approx((1000 + 1000 + 2000 + 5000) / 1e6)


def test_dated_and_unknown_models_are_priced_by_base_name() -> None:
    dated = AnthropicModel("claude-sonnet-4-5-20250929", base_url="http://127.0.0.1:9")
    assert dated._usage(Tokens(input=1_000_000), "x").cost_usd == 3.0
    unknown = AnthropicModel("claude-next", base_url="http://127.0.0.1:9")
    assert unknown._usage(Tokens(input=10), "claude-next").cost_usd == 0.0


def test_prompt_caching_markers(fake: FakeAnthropic) -> None:
    fake.push_text("a")
    fake.push_text("b")
    run_stream(model(fake), ask(tools=[LOOKUP, CLOCK]))
    run_stream(model(fake, cache_prompt=False), ask(tools=[LOOKUP, CLOCK]))
    on, off = fake.requests
    ephemeral = {"type": "ephemeral"}
    assert on["system"] == [
        {"type": "text", "text": "You track orders.", "cache_control": ephemeral}
    ]
    assert "cache_control" not in on["tools"][0] and on["tools"][1]["cache_control"] == ephemeral
    assert off["system"] == [{"type": "text", "text": "You track orders."}]
    assert all("cache_control" not in t for t in off["tools"])


def test_settings_pass_through(fake: FakeAnthropic) -> None:
    fake.push_text("a")
    settings = {"temperature": 0.2, "max_tokens": 99, "stop_sequences": ["END"], "seed": None}
    run_complete(model(fake), ask(settings=settings))
    body = fake.requests[0]
    assert (body["temperature"], body["max_tokens"], body["stop_sequences"]) == (0.2, 99, ["END"])
    assert "seed" not in body


@pytest.mark.parametrize("streamed", [False, True])
def test_thinking_is_sent_back_and_never_text(fake: FakeAnthropic, streamed: bool) -> None:
    fake.push_tool_uses(
        FakeToolUse("lookup", {"id": "A-42"}, id="t1"), thinking="I should look it up."
    )
    fake.push_text(ANSWER, thinking="It shipped.")
    m = model(fake, thinking_budget=2048, max_tokens=8000)
    events = run_stream(m, ask(tools=[LOOKUP])) if streamed else None
    turn = completed(events) if events else run_complete(m, ask(tools=[LOOKUP]))
    assert turn.text is None
    assert [t.text for t in turn.thinking] == ["I should look it up."] and turn.thinking[
        0
    ].signature
    assert not [e for e in events or [] if isinstance(e, TextDelta)]
    # the dump (a recorded turn) round-trips the blocks
    assert ModelResponse.model_validate(turn.model_dump(mode="json")) == turn
    assistant = Message(role="assistant", tool_calls=turn.tool_calls, thinking=turn.thinking)
    second = ask(
        Message(role="user", content="where is A-42?"),
        assistant,
        Message(role="tool", content="shipped", tool_call_id="t1", name="lookup"),
        tools=[LOOKUP],
    )
    final = completed(run_stream(m, second)) if streamed else run_complete(m, second)
    assert final.text == ANSWER and "It shipped" not in final.text
    first, again = fake.requests
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    blocks = again["messages"][1]["content"]
    assert blocks[0] == {
        "type": "thinking",
        "thinking": "I should look it up.",
        "signature": turn.thinking[0].signature,
    }
    assert blocks[1]["type"] == "tool_use"


def test_thinking_dropped_is_refused_like_the_api(fake: FakeAnthropic) -> None:
    """The fake holds the API's rule, so the test above proves the blocks are needed."""
    m = model(fake, thinking_budget=2048, max_tokens=8000)
    req = ask(
        Message(role="user", content="go"),
        Message(role="assistant", tool_calls=[ToolCall(id="t1", name="lookup")]),
        Message(role="tool", content="x", tool_call_id="t1", name="lookup"),
        tools=[LOOKUP],
    )
    with pytest.raises(ModelError, match=r"HTTP 400.*thinking block") as info:
        run_complete(m, req)
    assert not isinstance(info.value, TransientModelError)


def test_empty_thinking_leaves_dumps_as_before() -> None:
    assert "thinking" not in Message(role="assistant", content="x").model_dump()
    assert "thinking" not in ModelResponse(text="x").model_dump(mode="json")
    kept = Message(role="assistant", thinking=[Thinking(redacted="opaque")])
    assert Message.model_validate_json(kept.model_dump_json()) == kept


@pytest.mark.parametrize("streamed", [False, True])
def test_continuation_returns_only_the_new_text(fake: FakeAnthropic, streamed: bool) -> None:
    fake.push_text(ANSWER)
    shown = "Your order A-42 shipped "  # ends in a space: the API refuses that in a prefill
    req = ask(continue_from=shown)
    m = model(fake)
    new = completed(run_stream(m, req)).text if streamed else run_complete(m, req).text
    assert shown + (new or "") == ANSWER
    body = fake.requests[0]
    assert body["continuation"] == "prefix" and body["offset"] == len(shown.rstrip())
    assert body["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": shown.rstrip()}],
    }


def test_continuation_with_thinking_asks_instead_of_prefilling(fake: FakeAnthropic) -> None:
    fake.push_text(ANSWER)
    shown = "Your order A-42 shipped"
    m = model(fake, thinking_budget=1024, max_tokens=4096)
    events = run_stream(m, ask(continue_from=shown))
    assert shown + "".join(e.text for e in events if isinstance(e, TextDelta)) == ANSWER
    body = fake.requests[0]
    assert (
        body["continuation"] == "request"
        and body["messages"][-1]["content"][0]["text"] == CONTINUE_PROMPT
    )


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limit_error"), (529, "overloaded_error")])
@pytest.mark.parametrize("streamed", [False, True])
def test_rate_limit_and_overload_are_transient(
    fake: FakeAnthropic, status: int, kind: str, streamed: bool
) -> None:
    fake.push_error(status, "slow down", type=kind, retry_after=7)
    m = model(fake)
    with pytest.raises(TransientModelError) as info:
        run_stream(m, ask()) if streamed else run_complete(m, ask())
    text = str(info.value)
    assert f"HTTP {status}" in text and "anthropic" in text and "retry-after 7s" in text
    assert kind in text and len(fake.requests) == 1, "the SDK must not retry on its own"
    assert info.value.retry_after == 7


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "1"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "2"}, 2.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": ""}, None),
        ({}, None),
    ],
)
def test_retry_after_headers(headers: dict[str, str], expected: float | None) -> None:
    """Seconds, or OpenAI's milliseconds; a date or garbage is no wait asked for."""
    assert retry_after(headers) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"retry-after-ms": "1500"}, 1.5), ({"retry-after": "Tue, 1 Jan 2030 00:00:00 GMT"}, None)],
)
def test_the_retry_after_asked_for_is_on_the_error(
    fake: FakeAnthropic, headers: dict[str, str], expected: float | None
) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake.push(FakeReply(529, body, headers=headers))
    fake.push_error(500, "boom")
    with pytest.raises(TransientModelError) as info:
        run_complete(model(fake), ask())
    assert info.value.retry_after == expected
    assert pickle.loads(pickle.dumps(info.value)).retry_after == expected  # DBOS pickles it
    with pytest.raises(TransientModelError) as info:
        run_complete(model(fake), ask())
    assert info.value.retry_after is None and "retry-after" not in str(info.value)


def test_an_error_event_mid_stream_is_transient(fake: FakeAnthropic) -> None:
    """A 200 whose stream carries ``event: error`` (overloaded, after some deltas): the SDK
    raises ``APIStatusError`` for it, the adapter a ``TransientModelError``."""
    fake.push_text(ANSWER, error_after=6)
    events: list[ModelEvent] = []

    async def go() -> None:
        m = model(fake)
        try:
            async for e in m.stream(ask()):
                events.append(e)
        finally:
            await m.aclose()

    with pytest.raises(TransientModelError, match="Overloaded") as info:
        asyncio.run(go())
    cause = info.value.__cause__
    assert isinstance(cause, anthropic.APIStatusError) and cause.type == "overloaded_error"
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts and ANSWER.startswith("".join(texts)) and "".join(texts) != ANSWER
    assert not [e for e in events if isinstance(e, Completed)]


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_are_transient(fake: FakeAnthropic, status: int) -> None:
    fake.push_error(status, "boom")
    with pytest.raises(TransientModelError, match=f"HTTP {status}"):
        run_complete(model(fake), ask())


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
    ],
)
def test_client_errors_are_permanent(fake: FakeAnthropic, status: int, kind: str) -> None:
    fake.push_error(status, "no good", type=kind)
    with pytest.raises(ModelError) as info:
        run_stream(model(fake), ask())
    assert not isinstance(info.value, TransientModelError)
    assert str(info.value).startswith(
        "anthropic: claude-haiku-4-5"
    ) and f"HTTP {status}: no good" in str(info.value)


def test_a_cut_stream_is_transient(fake: FakeAnthropic) -> None:
    fake.push_text(ANSWER, cut_after=6)
    events: list[ModelEvent] = []

    async def go() -> None:
        m = model(fake)
        try:
            async for e in m.stream(ask()):
                events.append(e)
        finally:
            await m.aclose()

    with pytest.raises(TransientModelError):
        asyncio.run(go())
    assert events and not [e for e in events if isinstance(e, Completed)]


def test_unreachable_server_is_transient() -> None:
    m = AnthropicModel("claude-haiku-4-5", base_url="http://127.0.0.1:9", timeout=2.0)
    with pytest.raises(TransientModelError, match="connection failed"):
        run_complete(m, ask())


def test_missing_api_key_names_the_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match=r"anthropic.*ANTHROPIC_API_KEY"):
        AnthropicModel("claude-haiku-4-5")


def test_bad_thinking_budget_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="thinking_budget"):
        AnthropicModel("claude-haiku-4-5", api_key="k", thinking_budget=5000, max_tokens=4096)


def test_the_guard_refuses_a_remote_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BLOCK_ENV, "1")
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    m = AnthropicModel("claude-haiku-4-5", api_key="sk-test")  # api.anthropic.com
    assert "anthropic.com" in m.base_url
    with pytest.raises(ModelError, match="refusing to call claude-haiku-4-5"):
        run_complete(m, ask())
    with pytest.raises(ModelError, match="refusing"):
        run_stream(m, ask())


def test_the_fake_as_a_process() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "dbos_agents.testing.fake_anthropic", "--text", ANSWER],
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        m = AnthropicModel("claude-haiku-4-5", base_url=url)
        assert completed(run_stream(m, ask())).text == ANSWER
        import urllib.request

        with urllib.request.urlopen(f"{url}/_fake/requests", timeout=10) as r:
            assert [b["continuation"] for b in json.loads(r.read())] == ["fresh"]
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("reason", ["end_turn", "stop_sequence", "max_tokens", "refusal"])
def test_every_stop_reason_ends_the_reply_with_its_text(fake: FakeAnthropic, reason: str) -> None:
    """As chat completions' ``length``: a reply cut at ``max_tokens`` is the text written."""
    fake.push_text("partial answer", stop_reason=reason)
    fake.push_text("partial answer", stop_reason=reason)
    assert completed(run_stream(model(fake), ask())).text == "partial answer"
    assert run_complete(model(fake), ask()).text == "partial answer"


def test_a_tool_call_cut_at_max_tokens_has_arguments_that_do_not_parse(
    fake: FakeAnthropic,
) -> None:
    body = fake.message(None, [FakeToolUse("lookup", '{"id": "A', id="t1")])
    fake.push(FakeReply(200, {**body, "stop_reason": "max_tokens"}))
    [call] = completed(run_stream(model(fake), ask(tools=[LOOKUP]))).tool_calls
    with pytest.raises(ValueError):
        call.parsed_arguments()


def test_fallback_does_not_wait_for_the_primary_s_retry_after(fake: FakeAnthropic) -> None:
    """An overloaded primary's turn goes to the next model at once, whatever wait it
    asked for; when every model fails, the error is still transient (the loop retries)."""
    primary, second = model(fake), model(fake, max_tokens=1000)
    chain = FallbackModel(primary, second)

    async def go() -> tuple[list[ModelEvent], BaseException | None]:
        try:
            events = [e async for e in chain.stream(ask())]
            try:
                await chain.complete(ask())
            except TransientModelError as exc:
                return events, exc
            return events, None
        finally:
            await primary.aclose()
            await second.aclose()

    fake.push_error(529, "Overloaded", type="overloaded_error", retry_after=30)
    fake.push_text(ANSWER)
    fake.push_error(529, "Overloaded", type="overloaded_error", retry_after=30)
    fake.push_error(429, "slow down", type="rate_limit_error", retry_after=5)
    events, error = asyncio.run(go())
    assert completed(events).text == ANSWER and len(fake.requests) == 4
    assert isinstance(error, TransientModelError) and "every model failed" in str(error)
