"""The fake Gemini API server, driven over loopback HTTP by the official ``google-genai``
client and by Pydantic AI's ``GoogleModel`` (``pydantic_ai.direct``): text, streamed text,
function calls (a round trip, parallel calls, thought signatures), usage, errors and the
retries of each client, a cut stream, and the requests the real API refuses. No Postgres."""

from __future__ import annotations

import asyncio
import base64
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors, types
from pydantic_ai import exceptions as pe
from pydantic_ai.direct import model_request, model_request_stream
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider
from pydantic_ai.tools import ToolDefinition

from dbos_agents.testing.fake_gemini import (
    FakeFunctionCall,
    FakeGemini,
    FakeReply,
    serve_fake_gemini,
)
from dbos_agents.testing.fake_gemini_stream import SIGNATURE_PREFIX

pytestmark = pytest.mark.asyncio(loop_scope="session")

KEY = "fake-gemini-key"
FLASH = "gemini-2.5-flash"
ANSWER = "Your order A-42 shipped on Monday and should arrive on Thursday."
LOOKUP = ToolDefinition(
    name="lookup",
    description="Find an order.",
    parameters_json_schema={"type": "object", "properties": {"id": {"type": "string"}}},
)
CLOCK = ToolDefinition(name="clock", description="The time.")
TOOLS = ModelRequestParameters(function_tools=[LOOKUP, CLOCK])


@pytest.fixture(scope="module")
def server() -> Iterator[FakeGemini]:
    with serve_fake_gemini() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeGemini) -> Iterator[FakeGemini]:
    server.reset()
    server.chunk_chars = 8
    server.api_key = None
    yield server
    assert server.pending == 0, "the test did not consume every scripted reply"


@pytest.fixture
def sdk(fake: FakeGemini) -> genai.Client:
    """A client held for the whole test: one dropped mid-request closes its connections."""
    return client(fake)


def client(fake: FakeGemini, **options: Any) -> genai.Client:
    http_options = types.HttpOptions(base_url=fake.base_url, **options)
    return genai.Client(api_key=KEY, http_options=http_options)


def google(fake: FakeGemini, name: str = FLASH) -> GoogleModel:
    return GoogleModel(name, provider=GoogleProvider(client=client(fake)))


def ask(text: str = "Where is A-42?") -> list[ModelMessage]:
    return [ModelRequest.user_text_prompt(text, instructions="You track orders.")]


# -- the google-genai client -------------------------------------------------------------------


async def test_sdk_text_and_what_it_sent(fake: FakeGemini, sdk: genai.Client) -> None:
    fake.push_text(ANSWER, input_tokens=12, output_tokens=7)
    config = types.GenerateContentConfig(system_instruction="You track orders.", temperature=0)
    r = await sdk.aio.models.generate_content(model=FLASH, contents="Where is A-42?", config=config)
    assert r.text == ANSWER
    assert r.candidates and r.candidates[0].finish_reason == types.FinishReason.STOP
    assert r.usage_metadata is not None
    assert (r.usage_metadata.prompt_token_count, r.usage_metadata.candidates_token_count) == (12, 7)
    assert r.usage_metadata.total_token_count == 19
    assert r.model_version == FLASH
    [sent] = fake.requests
    assert (sent["model"], sent["stream"], sent["api_key"]) == (FLASH, False, KEY)
    assert sent["contents"] == [{"role": "user", "parts": [{"text": "Where is A-42?"}]}]
    assert sent["systemInstruction"] == {"role": "user", "parts": [{"text": "You track orders."}]}
    assert sent["generationConfig"] == {"temperature": 0}


async def test_sdk_streams_text_in_chunks(fake: FakeGemini, sdk: genai.Client) -> None:
    fake.chunk_chars = 10
    fake.push_text(ANSWER, input_tokens=12, output_tokens=7)
    stream = await sdk.aio.models.generate_content_stream(model=FLASH, contents="Where is A-42?")
    chunks = [c async for c in stream]
    assert len(chunks) == 7
    assert "".join(c.text or "" for c in chunks) == ANSWER
    assert [c.candidates[0].finish_reason for c in chunks if c.candidates][-1] == "STOP"
    assert all(c.candidates and c.candidates[0].finish_reason is None for c in chunks[:-1])
    assert [c.usage_metadata and c.usage_metadata.candidates_token_count for c in chunks] == [
        None
    ] * 6 + [7]
    assert len({c.response_id for c in chunks}) == 1
    assert fake.requests[0]["stream"] is True


async def test_sdk_function_call_round_trip(fake: FakeGemini, sdk: genai.Client) -> None:
    fake.push_function_calls(FakeFunctionCall("lookup", {"id": "A-42"}), output_tokens=9)
    fake.push_text(ANSWER)
    tool = types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="lookup", parameters_json_schema=LOOKUP.parameters_json_schema
            )
        ]
    )
    config = types.GenerateContentConfig(tools=[tool])
    asked = types.Content(role="user", parts=[types.Part(text="Where is A-42?")])
    aio = sdk.aio
    first = await aio.models.generate_content(model=FLASH, contents=[asked], config=config)
    assert first.function_calls is not None
    [call] = first.function_calls
    assert (call.name, call.args, call.id) == ("lookup", {"id": "A-42"}, None)
    assert first.candidates and first.candidates[0].content is not None
    assert first.candidates[0].content.parts
    assert first.candidates[0].content.parts[0].thought_signature  # the first call is signed
    answer = types.Part.from_function_response(name="lookup", response={"status": "shipped"})
    second = await aio.models.generate_content(
        model=FLASH,
        contents=[asked, first.candidates[0].content, types.Content(role="user", parts=[answer])],
        config=config,
    )
    assert second.text == ANSWER
    declared = fake.requests[0]["tools"][0]["functionDeclarations"][0]
    assert declared["parameters_json_schema"] == LOOKUP.parameters_json_schema  # snake_case
    sent = fake.requests[1]["contents"]
    assert [c["role"] for c in sent] == ["user", "model", "user"]
    assert sent[1]["parts"][0]["functionCall"] == {"name": "lookup", "args": {"id": "A-42"}}
    assert sent[2]["parts"] == [
        {"functionResponse": {"name": "lookup", "response": {"status": "shipped"}}}
    ]


async def test_sdk_streams_parallel_function_calls_whole(
    fake: FakeGemini, sdk: genai.Client
) -> None:
    fake.chunk_chars = 4
    fake.push_function_calls(
        FakeFunctionCall("lookup", {"id": "A-42"}, id="call-1"),
        FakeFunctionCall("clock", id="call-2"),
        text="Checking both.",
    )
    stream = await sdk.aio.models.generate_content_stream(
        model=FLASH, contents="Where is A-42, and what time is it?"
    )
    chunks = [c async for c in stream]
    assert "".join(c.text or "" for c in chunks[:-1]) == "Checking both."
    last = chunks[-1]
    assert last.function_calls is not None
    assert [(c.name, c.args, c.id) for c in last.function_calls] == [
        ("lookup", {"id": "A-42"}, "call-1"),
        ("clock", {}, "call-2"),
    ]
    assert last.candidates and last.candidates[0].finish_reason == "STOP"
    assert last.usage_metadata and last.usage_metadata.total_token_count == 15


@pytest.mark.parametrize(
    ("status", "error", "status_name"),
    [(429, errors.ClientError, "RESOURCE_EXHAUSTED"), (503, errors.ServerError, "UNAVAILABLE")],
)
async def test_sdk_errors_are_not_retried_by_default(
    fake: FakeGemini, sdk: genai.Client, status: int, error: type[errors.APIError], status_name: str
) -> None:
    fake.push_error(status, "Try again later.", retry_after=2)
    with pytest.raises(error) as raised:
        await sdk.aio.models.generate_content(model=FLASH, contents="hi")
    assert (raised.value.code, raised.value.status) == (status, status_name)
    assert raised.value.message == "Try again later."
    assert raised.value.details["error"]["details"][0]["retryDelay"] == "2s"
    assert len(fake.requests) == 1


async def test_sdk_retries_when_given_retry_options(fake: FakeGemini) -> None:
    fake.push_error(503, "The model is overloaded. Please try again later.")
    fake.push_text(ANSWER)
    retry = types.HttpRetryOptions(attempts=2, initial_delay=0.01, jitter=0)
    retrying = client(fake, retry_options=retry)
    r = await retrying.aio.models.generate_content(model=FLASH, contents="hi")
    assert r.text == ANSWER
    assert len(fake.requests) == 2


async def test_sdk_cut_stream_raises(fake: FakeGemini, sdk: genai.Client) -> None:
    fake.push_text(ANSWER, cut_after=2)
    stream = await sdk.aio.models.generate_content_stream(model=FLASH, contents="hi")
    seen: list[str] = []
    with pytest.raises(httpx.RemoteProtocolError):
        async for chunk in stream:
            seen.append(chunk.text or "")
    assert "".join(seen) == ANSWER[:16]
    assert len(fake.requests) == 1  # no resume without a continuation token


def call(name: str, signature: bytes | None = None, **fields: Any) -> dict[str, Any]:
    part: dict[str, Any] = {"function_call": {"name": name, "args": {}, **fields}}
    return part | ({"thought_signature": signature} if signature else {})


def answer(name: str, **fields: Any) -> dict[str, Any]:
    return {"function_response": {"name": name, "response": {"ok": True}, **fields}}


def user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": list(parts) or [{"text": "hi"}]}


def model(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": list(parts) or [{"text": "hello"}]}


@pytest.mark.parametrize(
    ("name", "contents", "needle"),
    [
        ("gemini-2.5-flash", [user(), model(), model()], "alternate between user and model"),
        ("gemini-2.5-flash", [model(), user()], "alternate between user and model"),
        ("gemini-2.5-flash", [user(), user(answer("lookup"))], "immediately after a function"),
        (
            "gemini-2.5-flash",
            [user(), model(call("lookup")), user(answer("clock"))],
            "answers no functionCall",
        ),
        (
            "gemini-2.5-flash",
            [user(), model(call("lookup", id="a")), user(answer("lookup", id="b"))],
            "answers no functionCall",
        ),
        (
            "gemini-2.5-flash",
            [user(), model(call("lookup"), call("clock")), user(answer("lookup"))],
            "number of function response parts",
        ),
        ("gemini-2.5-flash", [user(), model(call("lookup")), user()], "number of function"),
        (
            "gemini-2.5-flash",
            [user(), model(call("lookup", b"tampered")), user(answer("lookup"))],
            "Corrupted thought signature",
        ),
        (
            "gemini-3-flash-preview",
            [user(), model(call("lookup")), user(answer("lookup"))],
            "missing a thought_signature",
        ),
    ],
)
async def test_refuses_what_the_api_refuses(
    fake: FakeGemini, sdk: genai.Client, name: str, contents: list[dict[str, Any]], needle: str
) -> None:
    with pytest.raises(errors.ClientError) as raised:
        await sdk.aio.models.generate_content(model=name, contents=contents)
    assert (raised.value.code, raised.value.status) == (400, "INVALID_ARGUMENT")
    assert needle in (raised.value.message or "")


@pytest.mark.parametrize(
    "contents",
    [
        [user(), model(call("lookup")), user(answer("lookup")), user()],  # users merge
        [
            user(),
            model(call("lookup", b"skip_thought_signature_validator")),
            user(answer("lookup")),
        ],
        [
            user(),
            model(call("lookup", SIGNATURE_PREFIX + b"\xfb\xff")),  # sent URL-safe: "-_"
            user(answer("lookup")),
        ],
        [user(), model(call("lookup")), user(answer("lookup")), model(), user()],  # not current
    ],
)
async def test_accepts_what_the_api_accepts(
    fake: FakeGemini, sdk: genai.Client, contents: list[dict[str, Any]]
) -> None:
    fake.push_text(ANSWER)
    r = await sdk.aio.models.generate_content(
        model="gemini-3-flash-preview",
        contents=contents,
    )
    assert r.text == ANSWER


async def test_empty_queue_missing_key_and_wrong_key(fake: FakeGemini, sdk: genai.Client) -> None:
    with pytest.raises(errors.ClientError) as raised:
        await sdk.aio.models.generate_content(model=FLASH, contents="hi")
    assert raised.value.message == "FakeGemini has no scripted reply for request 1"
    url = f"{fake.base_url}/v1beta/models/{FLASH}:generateContent"
    async with httpx.AsyncClient() as http:
        no_key = await http.post(url, json={"contents": [user()]})
        empty = await http.post(url, json={"contents": []}, headers={"x-goog-api-key": KEY})
    assert no_key.status_code == 403
    assert no_key.json()["error"]["status"] == "PERMISSION_DENIED"
    assert empty.status_code == 400
    assert "contents is not specified" in empty.json()["error"]["message"]
    fake.api_key = "another-key"
    with pytest.raises(pe.ModelHTTPError) as wrong:
        await model_request(google(fake), ask())
    assert isinstance(wrong.value, pe.ModelAuthenticationError)
    assert wrong.value.status_code == 400


async def test_respond_answers_an_empty_queue(fake: FakeGemini) -> None:
    seen: list[str] = []

    def respond(request: dict[str, Any]) -> FakeReply:
        seen.append(request["model"])
        return FakeReply(
            200, fake.response(f"echo {request['contents'][-1]['parts'][0]['text']}", [])
        )

    with serve_fake_gemini(FakeGemini(respond=respond)) as other:
        sdk = client(other)
        r = await sdk.aio.models.generate_content(model=FLASH, contents="ping")
    assert r.text == "echo ping"
    assert r.model_version == FLASH
    assert seen == [FLASH]


# -- Pydantic AI's GoogleModel -----------------------------------------------------------------


async def test_pydantic_ai_text_and_usage(fake: FakeGemini) -> None:
    fake.push_text(ANSWER, input_tokens=120, output_tokens=14, thinking_tokens=30)
    response = await model_request(google(fake), ask())
    assert response.parts == [TextPart(ANSWER)]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (120, 44)
    assert response.finish_reason == "stop"
    assert response.model_name == FLASH
    assert response.provider_response_id and response.provider_response_id.startswith("fake-")
    sent = fake.requests[0]
    assert sent["systemInstruction"]["parts"] == [{"text": "You track orders."}]
    assert sent["generationConfig"] == {"responseModalities": ["TEXT"]}


async def test_pydantic_ai_streams_thinking_and_text(fake: FakeGemini) -> None:
    fake.chunk_chars = 6
    fake.push_text(ANSWER, thinking="Let me look.", input_tokens=12, output_tokens=7)
    async with model_request_stream(google(fake), ask()) as stream:
        events = [e async for e in stream]
        response = stream.get()
    assert sum(isinstance(e, PartDeltaEvent) for e in events) == 1 + 10
    thinking, text = response.parts
    assert isinstance(thinking, ThinkingPart) and thinking.content == "Let me look."
    assert isinstance(text, TextPart) and text.content == ANSWER
    assert text.provider_details and "thought_signature" in text.provider_details
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 7)
    assert response.finish_reason == "stop"
    assert fake.requests[0]["stream"] is True


async def test_pydantic_ai_parallel_calls_round_trip_with_signatures(fake: FakeGemini) -> None:
    gemini3 = google(fake, "gemini-3-flash-preview")
    fake.push_function_calls(
        FakeFunctionCall("lookup", {"id": "A-42"}),
        FakeFunctionCall("clock"),
        thinking="Two things to look up.",
    )
    fake.push_text(ANSWER)
    history: list[ModelMessage] = ask("Where is A-42, and what time is it?")
    first = await model_request(gemini3, history, model_request_parameters=TOOLS)
    thinking, lookup, clock = first.parts
    assert isinstance(thinking, ThinkingPart) and thinking.content == "Two things to look up."
    assert isinstance(lookup, ToolCallPart) and isinstance(clock, ToolCallPart)
    assert (lookup.tool_name, lookup.args, clock.tool_name) == ("lookup", {"id": "A-42"}, "clock")
    assert lookup.provider_details and "thought_signature" in lookup.provider_details
    assert first.finish_reason == "stop"  # Gemini finishes function calls with STOP too
    history += [
        first,
        ModelRequest(
            parts=[
                ToolReturnPart("lookup", {"status": "shipped"}, tool_call_id=lookup.tool_call_id),
                ToolReturnPart("clock", "10:00", tool_call_id=clock.tool_call_id),
            ]
        ),
    ]
    second = await model_request(gemini3, history, model_request_parameters=TOOLS)
    assert second.parts == [TextPart(ANSWER)]
    replayed, answered = fake.requests[1]["contents"][1:]
    signed = base64.urlsafe_b64decode(replayed["parts"][1]["thoughtSignature"])  # the SDK's
    assert signed == base64.b64decode(lookup.provider_details["thought_signature"])
    made_up = [p["functionCall"]["id"] for p in replayed["parts"][1:]]
    assert made_up == [lookup.tool_call_id, clock.tool_call_id]  # Pydantic AI's own ids
    assert [p["functionResponse"]["id"] for p in answered["parts"]] == made_up
    assert answered["parts"][1]["functionResponse"]["response"] == {"return_value": "10:00"}


async def test_pydantic_ai_replay_without_signature_gets_the_placeholder(fake: FakeGemini) -> None:
    fake.push_text(ANSWER)
    call = ToolCallPart("lookup", {"id": "A-42"}, tool_call_id="c1")
    history: list[ModelMessage] = [
        *ask(),
        ModelResponse(parts=[call]),  # a signature lost in a store
        ModelRequest(parts=[ToolReturnPart("lookup", "shipped", tool_call_id="c1")]),
    ]
    gemini3 = google(fake, "gemini-3-flash-preview")
    await model_request(gemini3, history, model_request_parameters=TOOLS)
    part = fake.requests[0]["contents"][1]["parts"][0]
    assert part["thoughtSignature"] == "c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I="


@pytest.mark.parametrize(
    ("status", "category"), [(429, pe.ModelRateLimitError), (503, pe.ModelOverloadedError)]
)
async def test_pydantic_ai_http_errors(
    fake: FakeGemini, status: int, category: type[pe.ModelHTTPError]
) -> None:
    fake.push_error(status, "The model is overloaded. Please try again later.", retry_after=2)
    with pytest.raises(pe.ModelHTTPError) as raised:
        await model_request(google(fake), ask())
    assert isinstance(raised.value, category)
    assert raised.value.status_code == status
    assert raised.value.retry_after == 2
    assert len(fake.requests) == 1  # GoogleModel adds no retries of its own


async def test_pydantic_ai_max_retries_turns_on_the_sdk_retries(fake: FakeGemini) -> None:
    fake.push_error(429, "Resource exhausted.")
    fake.push_text(ANSWER)
    retry = types.HttpRetryOptions(initial_delay=0.01, jitter=0)
    model = GoogleModel(FLASH, provider=GoogleProvider(client=client(fake, retry_options=retry)))
    response = await model_request(model, ask(), model_settings={"max_retries": 1})
    assert response.parts == [TextPart(ANSWER)]
    assert len(fake.requests) == 2


async def test_pydantic_ai_cut_stream_raises(fake: FakeGemini) -> None:
    fake.push_text(ANSWER, cut_after=1)
    fake.push_text(ANSWER, cut_after=1)
    # A client the caller builds speaks httpx; GoogleModel maps only httpx2's transport
    # errors, so the cut comes through as httpx's own error.
    with pytest.raises(httpx.RemoteProtocolError):
        async with model_request_stream(google(fake), ask()) as stream:
            _ = [e async for e in stream]
    # The provider's own client speaks httpx2: the cut is Pydantic AI's connection error.
    provider = GoogleProvider(api_key=KEY, base_url=fake.base_url)
    with pytest.raises(pe.ModelConnectionError):
        async with model_request_stream(GoogleModel(FLASH, provider=provider), ask()) as stream:
            _ = [e async for e in stream]
    assert len(fake.requests) == 2


async def test_runs_as_a_separate_process() -> None:
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "dbos_agents.testing.fake_gemini", "--text", ANSWER],
        *["--chunk-chars", "20"],
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        base_url = (await process.stdout.readline()).decode().strip()
        c = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=base_url))
        stream = await c.aio.models.generate_content_stream(model=FLASH, contents="hi")
        chunks = [chunk.text async for chunk in stream]
        assert chunks == [ANSWER[i : i + 20] for i in range(0, len(ANSWER), 20)]
        async with httpx.AsyncClient() as http:
            recorded = (await http.get(f"{base_url}/_fake/requests")).json()
        assert [r["model"] for r in recorded] == [FLASH]
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=10)
