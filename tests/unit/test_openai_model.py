"""``OpenAIModel`` through the real ``openai`` client against a loopback fake server."""

from __future__ import annotations

import asyncio
import gc
import socket
import time
from collections.abc import Iterator

import pytest

from dbos_agents import (
    ConfigurationError,
    Message,
    ModelError,
    ModelResponse,
    ToolCall,
    TransientModelError,
)
from dbos_agents.models import Model, ModelRequest, OpenAIModel, Price, ToolSpec
from dbos_agents.models.openai import PRICES
from dbos_agents.testing.fake_openai import FakeOpenAI, FakeReply, FakeToolCall, serve_fake_openai

LOOKUP = ToolSpec(
    name="lookup",
    description="Look up an order.",
    parameters={
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """The shared server with an empty queue; each test counts requests from its own start."""
    assert server.pending == 0, "a previous test left scripted replies behind"
    yield server
    assert server.pending == 0, "the test did not consume every scripted reply"


def ask(
    *messages: Message, instructions: str = "", tools: list[ToolSpec] | None = None
) -> ModelRequest:
    return ModelRequest(
        agent="a",
        instructions=instructions,
        messages=list(messages) or [Message(role="user", content="hi")],
        tools=tools or [],
    )


def complete(model: OpenAIModel, request: ModelRequest) -> ModelResponse:
    """One call on a fresh event loop, as a sync test would make it; closes its connections."""

    async def run() -> ModelResponse:
        try:
            return await model.complete(request)
        finally:
            await model.aclose()

    return asyncio.run(run())


def new_requests(fake: FakeOpenAI, before: int) -> list[dict[str, object]]:
    return fake.requests[before:]


def test_is_a_model_and_names_itself(fake: FakeOpenAI) -> None:
    model = OpenAIModel("gpt-4o", base_url=fake.base_url)
    assert isinstance(model, Model)
    assert model.name == "gpt-4o"
    assert model.base_url.rstrip("/") == fake.base_url


def test_text_turn_with_usage_and_cost(fake: FakeOpenAI) -> None:
    before = len(fake.requests)
    fake.push_text(
        "hello there", prompt_tokens=1000, completion_tokens=500, model="gpt-4.1-mini-2025-04-14"
    )
    model = OpenAIModel("gpt-4.1-mini", base_url=fake.base_url)
    response = complete(model, ask(Message(role="user", content="hi")))
    assert response.text == "hello there"
    assert response.tool_calls == []
    assert response.model == "gpt-4.1-mini-2025-04-14"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (1000, 500)
    # gpt-4.1-mini: $0.40 in / $1.60 out per 1M tokens
    assert response.usage.cost_usd == pytest.approx(1000 * 0.40 / 1e6 + 500 * 1.60 / 1e6)
    [body] = new_requests(fake, before)
    assert body["model"] == "gpt-4.1-mini"
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert "tools" not in body
    assert "parallel_tool_calls" not in body


def test_cost_from_explicit_prices_and_unknown_model(fake: FakeOpenAI) -> None:
    fake.push_text("a", prompt_tokens=2_000_000, completion_tokens=1_000_000, model="my-local")
    fake.push_text("b", prompt_tokens=2_000_000, completion_tokens=1_000_000, model="my-local")
    priced = OpenAIModel("my-local", base_url=fake.base_url, prices=Price(1.0, 3.0))
    assert complete(priced, ask()).usage.cost_usd == pytest.approx(5.0)
    unpriced = OpenAIModel("my-local", base_url=fake.base_url)
    assert complete(unpriced, ask()).usage.cost_usd == 0.0


def test_price_table_covers_the_documented_models() -> None:
    assert {"gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "gpt-4o", "gpt-4o-mini"} <= set(PRICES)
    assert all(p.input_per_mtok < p.output_per_mtok for p in PRICES.values())


def test_settings_pass_through_for_known_keys(fake: FakeOpenAI) -> None:
    before = len(fake.requests)
    fake.push_text("ok")
    model = OpenAIModel("gpt-4.1", base_url=fake.base_url)
    request = ask().model_copy(
        update={"settings": {"temperature": 0.2, "max_tokens": 50, "top_p": 0.9, "seed": 7, "x": 1}}
    )
    complete(model, request)
    [body] = new_requests(fake, before)
    assert (body["temperature"], body["max_tokens"], body["top_p"], body["seed"]) == (
        0.2,
        50,
        0.9,
        7,
    )
    assert "x" not in body


@pytest.mark.parametrize("streamed", [False, True])
def test_reasoning_settings_reach_the_wire(fake: FakeOpenAI, streamed: bool) -> None:
    """Reasoning models take ``max_completion_tokens`` (not ``max_tokens``) and
    ``reasoning_effort``; a ``None`` setting is not sent."""
    before = len(fake.requests)
    fake.push_text("ok")
    model = OpenAIModel("o4-mini", base_url=fake.base_url)
    settings = {"reasoning_effort": "low", "max_completion_tokens": 300, "temperature": None}
    request = ask().model_copy(update={"settings": settings})

    async def run() -> None:
        try:
            if streamed:
                assert [e async for e in model.stream(request)]
            else:
                await model.complete(request)
        finally:
            await model.aclose()

    asyncio.run(run())
    [body] = new_requests(fake, before)
    assert (body["reasoning_effort"], body["max_completion_tokens"]) == ("low", 300)
    assert "temperature" not in body and "max_tokens" not in body


def test_tool_call_turn(fake: FakeOpenAI) -> None:
    before = len(fake.requests)
    fake.push_tool_calls(FakeToolCall("lookup", '{"order_id": "A1"}', id="call_abc"))
    model = OpenAIModel(base_url=fake.base_url)
    response = complete(model, ask(tools=[LOOKUP]))
    assert response.text is None
    assert response.tool_calls == [
        ToolCall(id="call_abc", name="lookup", arguments='{"order_id": "A1"}')
    ]
    [body] = new_requests(fake, before)
    assert body["parallel_tool_calls"] is True
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look up an order.",
                "parameters": LOOKUP.parameters,
            },
        }
    ]


def test_parallel_tool_calls_keep_their_order(fake: FakeOpenAI) -> None:
    fake.push_tool_calls(
        FakeToolCall("lookup", '{"order_id": "A"}', id="c1"),
        FakeToolCall("search", '{"q": "x"}', id="c2"),
        FakeToolCall("lookup", '{"order_id": "B"}', id="c3"),
        text="checking",
    )
    response = complete(OpenAIModel(base_url=fake.base_url), ask(tools=[LOOKUP]))
    assert response.text == "checking"
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("c1", "lookup", '{"order_id": "A"}'),
        ("c2", "search", '{"q": "x"}'),
        ("c3", "lookup", '{"order_id": "B"}'),
    ]


@pytest.mark.parametrize("raw", ['{"order_id": "A1"', "not json at all", "[1, 2]", ""])
def test_malformed_tool_arguments_pass_through_untouched(fake: FakeOpenAI, raw: str) -> None:
    fake.push_tool_calls(FakeToolCall("lookup", raw, id="call_bad"))
    response = complete(OpenAIModel(base_url=fake.base_url), ask(tools=[LOOKUP]))
    assert response.tool_calls == [ToolCall(id="call_bad", name="lookup", arguments=raw)]


def test_transcript_mapping(fake: FakeOpenAI) -> None:
    before = len(fake.requests)
    fake.push_text("done")
    transcript = [
        Message(role="system", content="be brief"),
        Message(role="user", content="where are A and B?"),
        Message(
            role="assistant",
            content=None,
            tool_calls=[
                ToolCall(id="c1", name="lookup", arguments='{"order_id": "A"}'),
                ToolCall(id="c2", name="lookup", arguments='{"order_id": "B"'),
            ],
        ),
        Message(role="tool", tool_call_id="c1", name="lookup", content='{"status": "shipped"}'),
        Message(role="tool", tool_call_id="c2", name="lookup", content="invalid arguments"),
        Message(role="assistant", content="A shipped; B unknown."),
        Message(role="user", content="thanks"),
    ]
    model = OpenAIModel(base_url=fake.base_url)
    complete(model, ask(*transcript, instructions="You track orders.", tools=[LOOKUP]))
    [body] = new_requests(fake, before)
    assert body["messages"] == [
        {"role": "system", "content": "You track orders."},
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "where are A and B?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"order_id": "A"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"order_id": "B"'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
        {"role": "tool", "tool_call_id": "c2", "content": "invalid arguments"},
        {"role": "assistant", "content": "A shipped; B unknown."},
        {"role": "user", "content": "thanks"},
    ]


def test_empty_instructions_send_no_system_message(fake: FakeOpenAI) -> None:
    before = len(fake.requests)
    fake.push_text("ok")
    complete(OpenAIModel(base_url=fake.base_url), ask(Message(role="user", content="q")))
    [body] = new_requests(fake, before)
    assert body["messages"] == [{"role": "user", "content": "q"}]


def test_429_is_transient_and_not_retried_by_the_sdk(fake: FakeOpenAI) -> None:
    model = OpenAIModel(base_url=fake.base_url)
    before = len(fake.requests)
    fake.push_error(429, "Rate limit reached for gpt-4.1-mini", type="requests", code="rate_limit")
    with pytest.raises(TransientModelError) as info:
        complete(model, ask())
    assert "429" in str(info.value)
    assert "Rate limit reached for gpt-4.1-mini" in str(info.value)
    assert len(new_requests(fake, before)) == 1  # the SDK did not retry on its own

    fake.push_text("recovered")
    assert complete(model, ask()).text == "recovered"
    assert len(new_requests(fake, before)) == 2


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "1200", "retry-after": "2"}, 1.2),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),
        ({"retry-after": "later"}, None),
        ({}, None),
    ],
)
@pytest.mark.parametrize("status", [429, 503])
def test_the_retry_after_asked_for_is_on_the_error(
    fake: FakeOpenAI, status: int, headers: dict[str, str], expected: float | None
) -> None:
    body = {"error": {"message": "slow down", "type": "requests", "param": None, "code": None}}
    fake.push(FakeReply(status, body, headers=headers))
    with pytest.raises(TransientModelError) as info:
        complete(OpenAIModel(base_url=fake.base_url), ask())
    assert info.value.retry_after == expected
    assert ("retry-after" in str(info.value)) is (expected is not None)


def test_the_retry_after_of_a_refused_stream_is_on_the_error(fake: FakeOpenAI) -> None:
    fake.push_error(429, "Rate limit reached", code="rate_limit", retry_after=4)
    model = OpenAIModel(base_url=fake.base_url)

    async def run() -> None:
        try:
            async for _ in model.stream(ask()):
                pass
        finally:
            await model.aclose()

    with pytest.raises(TransientModelError) as info:
        asyncio.run(run())
    assert info.value.retry_after == 4


def test_429_for_an_exhausted_quota_is_permanent(fake: FakeOpenAI) -> None:
    fake.push_error(
        429,
        "You exceeded your current quota.",
        type="insufficient_quota",
        code="insufficient_quota",
    )
    with pytest.raises(ModelError, match="insufficient_quota") as info:
        complete(OpenAIModel(base_url=fake.base_url), ask())
    assert not isinstance(info.value, TransientModelError)


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503])
def test_timeouts_conflicts_and_5xx_are_transient(fake: FakeOpenAI, status: int) -> None:
    before = len(fake.requests)
    fake.push_error(status, "The server had an error while processing your request.")
    with pytest.raises(TransientModelError) as info:
        complete(OpenAIModel(base_url=fake.base_url), ask())
    assert str(status) in str(info.value)
    assert "The server had an error" in str(info.value)
    assert len(new_requests(fake, before)) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_permanent(fake: FakeOpenAI, status: int) -> None:
    before = len(fake.requests)
    fake.push_error(status, "Invalid value for 'tools'.", type="invalid_request_error")
    with pytest.raises(ModelError) as info:
        complete(OpenAIModel(base_url=fake.base_url), ask())
    assert not isinstance(info.value, TransientModelError)
    assert f"HTTP {status}" in str(info.value)
    assert "Invalid value for 'tools'." in str(info.value)
    assert len(new_requests(fake, before)) == 1


def test_no_choices_is_a_model_error(fake: FakeOpenAI) -> None:
    fake.push(
        FakeReply(
            200,
            {
                "id": "chatcmpl-empty",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-4.1-mini",
                "choices": [],
            },
        )
    )
    with pytest.raises(ModelError, match="no choices") as info:
        complete(OpenAIModel(base_url=fake.base_url), ask())
    assert not isinstance(info.value, TransientModelError)


def test_server_timeout_is_transient(fake: FakeOpenAI) -> None:
    fake.push_text("too late", delay=1.0)
    model = OpenAIModel(base_url=fake.base_url, timeout=0.2)
    with pytest.raises(TransientModelError, match="timed out"):
        complete(model, ask())


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_one_model_serves_several_event_loops(fake: FakeOpenAI) -> None:
    """The SDK's pooled connections die with their loop; the model keeps a client per loop."""
    model = OpenAIModel(base_url=fake.base_url)
    for i in range(3):
        fake.push_text(f"turn {i}")
        assert asyncio.run(model.complete(ask())).text == f"turn {i}"
    del model
    gc.collect()  # the dead loops' connections warn here, not in a later test


def test_a_supplied_client_is_used_with_retries_off(fake: FakeOpenAI) -> None:
    from openai import AsyncOpenAI

    async def run() -> None:
        async with AsyncOpenAI(api_key="k", base_url=fake.base_url, max_retries=5) as client:
            model = OpenAIModel("gpt-4o-mini", client=client)
            fake.push_error(503, "overloaded")
            with pytest.raises(TransientModelError):
                await model.complete(ask())
            await model.aclose()  # leaves a supplied client open
            fake.push_text("still open")
            assert (await model.complete(ask())).text == "still open"
            with pytest.raises(ConfigurationError, match="either client"):
                OpenAIModel(client=client, base_url=fake.base_url)

    before = len(fake.requests)
    asyncio.run(run())
    assert len(new_requests(fake, before)) == 2  # one per call: no SDK retry of the 503


def test_missing_key_without_base_url_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIModel("gpt-4.1-mini")


def test_key_from_environment_needs_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = OpenAIModel("gpt-4.1")
    assert model.name == "gpt-4.1"
    assert model.base_url.startswith("https://api.openai.com")


def test_unreachable_server_is_transient_and_fast() -> None:
    with socket.socket() as s:  # find a port, then close it: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAIModel(base_url=f"http://127.0.0.1:{port}/v1", timeout=2.0)
    started = time.monotonic()
    with pytest.raises(TransientModelError, match="connection failed"):
        complete(model, ask())
    assert time.monotonic() - started < 2.0
