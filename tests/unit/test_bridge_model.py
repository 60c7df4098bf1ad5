"""``PydanticAIModel`` over Pydantic AI's in-process ``FunctionModel``: what each provider
class is asked (transcript, tools, settings, no SDK retries), what comes back (deltas,
tool calls, thinking, usage) and how failures are filed (transient or not, with the
provider's ``retry_after``). The wire of a real provider is tests/bridge."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic_ai import exceptions as pe
from pydantic_ai import messages as pm
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from dbos_agents.errors import (
    ConfigurationError,
    DefinitionError,
    ModelError,
    TransientModelError,
)
from dbos_agents.messages import Message, Thinking, ToolCall
from dbos_agents.models import (
    Completed,
    FallbackModel,
    ModelRequest,
    PydanticAIModel,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from dbos_agents.models.guard import allow_real_models, block_real_models
from dbos_agents.models.openai import Price
from dbos_agents.models.openai_stream import CONTINUE_PROMPT
from dbos_agents.models.resolve import model_from

pytestmark = pytest.mark.asyncio

Seen = list[tuple[list[pm.ModelMessage], AgentInfo]]

LOOKUP = ToolSpec(
    name="lookup",
    description="Find an order.",
    parameters={"type": "object", "properties": {"id": {"type": "string"}}},
)


def request(*messages: Message, **settings: Any) -> ModelRequest:
    return ModelRequest(
        agent="support",
        instructions="You track orders.",
        messages=list(messages) or [Message(role="user", content="where is A-1?")],
        tools=[LOOKUP],
        settings=settings,
    )


def model(reply: Any, seen: Seen | None = None) -> PydanticAIModel:
    """A bridge over a FunctionModel; ``reply`` is a list of stream pieces (str or
    {index: DeltaToolCall}) or an exception to raise."""

    def complete(messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        if seen is not None:
            seen.append((messages, info))
        if isinstance(reply, Exception):
            raise reply
        return pm.ModelResponse(
            parts=[pm.TextPart("".join(p for p in reply if isinstance(p, str)))]
        )

    async def stream(messages: list[pm.ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if seen is not None:
            seen.append((messages, info))
        for piece in reply if isinstance(reply, list) else []:
            if isinstance(piece, Exception):
                raise piece
            yield piece
        if isinstance(reply, Exception):
            raise reply

    return PydanticAIModel(FunctionModel(complete, stream_function=stream))


async def events(m: PydanticAIModel, req: ModelRequest) -> list[Any]:
    return [e async for e in m.stream(req)]


async def test_streamed_text_and_tool_calls_become_our_deltas() -> None:
    m = model(
        [
            "Let me ",
            "look.",
            {1: DeltaToolCall(name="lookup", json_args='{"id": ', tool_call_id="c1")},
            {1: DeltaToolCall(json_args='"A-1"}')},
            {2: DeltaToolCall(name="lookup", json_args='{"id": "B-2"}', tool_call_id="c2")},
        ]
    )
    got = await events(m, request())
    texts = [e.text for e in got if isinstance(e, TextDelta)]
    tools = [e for e in got if isinstance(e, ToolCallDelta)]
    assert texts == ["Let me ", "look."]
    assert [(t.index, t.id, t.name) for t in tools][::2] == [
        (0, "c1", "lookup"),
        (1, "c2", "lookup"),
    ]
    assert "".join(t.arguments for t in tools if t.index == 0) == '{"id": "A-1"}'
    done = got[-1]
    assert isinstance(done, Completed) and got.count(done) == 1
    assert done.response.text == "Let me look."
    assert done.response.tool_calls == [
        ToolCall(id="c1", name="lookup", arguments='{"id":"A-1"}'),
        ToolCall(id="c2", name="lookup", arguments='{"id":"B-2"}'),
    ]
    assert done.response.model == m.name and done.response.usage.output_tokens > 0


async def test_the_transcript_tools_and_settings_each_provider_class_is_given() -> None:
    seen: Seen = []
    m = model(["ok"], seen)
    transcript = [
        Message(role="user", content="where is A-1?"),
        Message(
            role="assistant",
            content="Looking.",
            tool_calls=[ToolCall(id="c1", name="lookup", arguments='{"id": "A-1"}')],
            thinking=[Thinking(text="look it up", signature="sig")],
        ),
        Message(role="tool", tool_call_id="c1", name="lookup", content='{"at": "depot"}'),
    ]
    await events(m, request(*transcript, temperature=0.2, max_tokens=99, unknown_key=1))
    ((messages, info),) = seen
    first, answer, results = messages
    assert isinstance(first, pm.ModelRequest) and isinstance(answer, pm.ModelResponse)
    assert [type(p).__name__ for p in first.parts] == ["SystemPromptPart", "UserPromptPart"]
    assert [type(p).__name__ for p in answer.parts] == ["ThinkingPart", "TextPart", "ToolCallPart"]
    thinking = answer.parts[0]
    assert isinstance(thinking, pm.ThinkingPart) and thinking.signature == "sig"
    assert isinstance(results, pm.ModelRequest)
    (ret,) = results.parts
    assert isinstance(ret, pm.ToolReturnPart) and ret.tool_call_id == "c1"
    (tool,) = info.function_tools
    assert tool.name == "lookup" and tool.parameters_json_schema == LOOKUP.parameters
    settings = dict(info.model_settings or {})
    assert settings["max_retries"] == 0  # the durable turn owns retries
    assert settings["temperature"] == 0.2 and settings["max_tokens"] == 99
    assert "unknown_key" not in settings


async def test_complete_returns_the_whole_reply_with_thinking() -> None:
    def reply(messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        return pm.ModelResponse(
            parts=[
                pm.ThinkingPart("hmm", signature="s1", provider_name="function"),
                pm.TextPart("A-1 is at the depot."),
            ],
            usage=pm.RequestUsage(input_tokens=1_000_000, output_tokens=1_000_000),
        )

    m = PydanticAIModel(FunctionModel(reply), prices=Price(1.0, 2.0))
    response = await m.complete(request())
    assert response.text == "A-1 is at the depot."
    assert response.thinking == [Thinking(text="hmm", signature="s1")]
    assert response.usage.cost_usd == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (pe.ModelHTTPError(429, "m", body={"message": "slow down"}), True),
        (pe.ModelHTTPError(503, "m", body={"message": "unavailable"}), True),
        (pe.ModelHTTPError(400, "m", body={"message": "bad request"}), False),
        (pe.ModelHTTPError(401, "m", body={"message": "no key"}), False),
        (pe.ModelAPIError("m", "refused"), False),
        (pe.UnexpectedModelBehavior("not the documented shape"), False),
        (ConnectionResetError("reset by peer"), True),
    ],
)
async def test_failures_are_filed_as_the_loop_retries_them(
    error: Exception, transient: bool
) -> None:
    for call in ("complete", "stream"):
        m = model(error)
        with pytest.raises(ModelError) as caught:
            if call == "complete":
                await m.complete(request())
            else:
                await events(m, request())
        assert isinstance(caught.value, TransientModelError) is transient, (call, caught.value)
        assert m.provider in str(caught.value) and m.name in str(caught.value)


async def test_retry_after_of_the_provider_reaches_the_loop() -> None:
    limited = pe.ModelHTTPError(429, "m", body={"message": "slow down"})
    limited.retry_after = 3.5
    m = model(limited)
    with pytest.raises(TransientModelError) as caught:
        await m.complete(request())
    assert caught.value.retry_after == 3.5


async def test_a_failure_after_text_was_shown_is_a_cut_reply() -> None:
    m = model(["Half an ans", pe.ModelHTTPError(400, "m", body={"message": "x"})])
    with pytest.raises(TransientModelError, match="while streaming"):
        await events(m, request())


async def test_a_cut_reply_is_continued_by_a_request_and_only_new_text_returned() -> None:
    seen: Seen = []
    m = model(["wer."], seen)
    assert m.continues
    req = request().model_copy(update={"continue_from": "Half an ans"})
    got = await events(m, req)
    assert [e.text for e in got if isinstance(e, TextDelta)] == ["wer."]
    assert isinstance(got[-1], Completed) and got[-1].response.text == "wer."
    ((messages, _),) = seen
    *_, partial, asked = messages
    assert isinstance(partial, pm.ModelResponse) and isinstance(asked, pm.ModelRequest)
    assert [p.content for p in partial.parts if isinstance(p, pm.TextPart)] == ["Half an ans"]
    assert [p.content for p in asked.parts if isinstance(p, pm.UserPromptPart)] == [CONTINUE_PROMPT]


async def test_names_and_definition_errors() -> None:
    with pytest.raises(ConfigurationError, match="Unknown model"):
        PydanticAIModel("nonesuch:model-1")
    with pytest.raises(ConfigurationError, match="not int"):
        PydanticAIModel(lambda: 3)  # type: ignore[arg-type,return-value]
    with pytest.raises(DefinitionError, match="nonesuch"):
        model_from("nonesuch:model-1")
    with pytest.MonkeyPatch.context() as env, pytest.raises(DefinitionError, match="API_KEY"):
        env.delenv("GOOGLE_API_KEY", raising=False)
        model_from("google:gemini-2.5-flash")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GOOGLE_API_KEY", "k")
        gemini = model_from("google:gemini-2.5-flash")
        assert isinstance(gemini, PydanticAIModel)
        assert (gemini.name, gemini.provider) == ("gemini-2.5-flash", "google")
        assert isinstance(FallbackModel("google:gemini-2.5-flash", model(["x"])), FallbackModel)


async def test_the_guard_refuses_a_remote_provider_before_sending() -> None:
    block_real_models()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GOOGLE_API_KEY", "k")
        gemini = PydanticAIModel("google:gemini-2.5-flash")
    with pytest.raises(ModelError, match="real model requests are blocked"):
        await gemini.complete(request())
    with pytest.raises(ModelError, match="real model requests are blocked"):
        await events(gemini, request())
    local = model(["fine"])  # Pydantic AI's in-process models are not remote
    assert (await local.complete(request())).text == "fine"
    with allow_real_models():
        assert gemini.base_url is not None
