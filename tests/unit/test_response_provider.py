"""``ModelResponse.provider``: left out of dumps while unset, so turns recorded before it
existed (and responses without it) store, serve and replay byte for byte as before; set, it
round-trips. The adapters name their provider; ``FallbackModel`` names the one that
answered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from dbos_agents import Message, ModelResponse, ToolCall, TransientModelError, Usage, storable
from dbos_agents.messages import Thinking
from dbos_agents.models import (
    AnthropicModel,
    Completed,
    FallbackModel,
    ModelEvent,
    ModelRequest,
    OpenAIModel,
    ScriptedModel,
    TextDelta,
)

REQ = ModelRequest(agent="a", instructions="", messages=[], tools=[])

# Dumps as the release before ``provider`` wrote them (``storable.dumps`` of
# ``model_dump(mode="json")``: what ``usage.response`` holds).
BEFORE = [
    (
        ModelResponse(
            text="done",
            tool_calls=[ToolCall(id="c1", name="get_order", arguments='{"id": 1}')],
            usage=Usage(input_tokens=12, output_tokens=3, cost_usd=0.0015),
            model="gpt-4.1-mini",
        ),
        '{"text": "done", "tool_calls": [{"id": "c1", "name": "get_order", "arguments":'
        ' "{\\"id\\": 1}"}], "usage": {"input_tokens": 12, "output_tokens": 3, "cost_usd":'
        ' 0.0015}, "model": "gpt-4.1-mini"}',
    ),
    (
        ModelResponse(text="x", thinking=[Thinking(text="hm", signature="sig")], model="c"),
        '{"text": "x", "tool_calls": [], "usage": {"input_tokens": 0, "output_tokens": 0,'
        ' "cost_usd": 0.0}, "model": "c", "thinking": [{"text": "hm", "signature": "sig",'
        ' "redacted": null}]}',
    ),
    (
        ModelResponse(),
        '{"text": null, "tool_calls": [], "usage": {"input_tokens": 0, "output_tokens": 0,'
        ' "cost_usd": 0.0}, "model": null}',
    ),
]


@pytest.mark.parametrize(("response", "stored"), BEFORE)
def test_a_response_without_provider_dumps_exactly_as_before(
    response: ModelResponse, stored: str
) -> None:
    assert storable.dumps(response.model_dump(mode="json")) == stored
    assert response.model_dump_json() == json.dumps(json.loads(stored), separators=(",", ":"))
    again = ModelResponse.model_validate_json(stored)  # a turn the previous release recorded
    assert again == response and again.provider is None
    assert storable.dumps(again.model_dump(mode="json")) == stored


def test_a_provider_is_dumped_after_the_model_and_round_trips() -> None:
    response = ModelResponse(text="hi", model="claude-haiku-4-5", provider="anthropic")
    dumped = response.model_dump(mode="json")
    assert list(dumped) == ["text", "tool_calls", "usage", "model", "provider"]
    assert ModelResponse.model_validate(dumped) == response
    assert ModelResponse.model_validate_json(response.model_dump_json()) == response
    empty = ModelResponse(provider="")  # empty is a value, not "unset": it round-trips
    assert ModelResponse.model_validate(empty.model_dump(mode="json")).provider == ""


def test_messages_dump_as_before() -> None:
    msg = Message(role="assistant", content="x", tool_calls=[ToolCall(id="c", name="t")])
    assert msg.model_dump(mode="json") == {
        "role": "assistant",
        "content": "x",
        "tool_calls": [{"id": "c", "name": "t", "arguments": "{}"}],
        "tool_call_id": None,
        "name": None,
    }
    assert "provider" not in Message.model_fields


def test_the_adapters_name_their_provider_read_only() -> None:
    scripted = ScriptedModel(["ok"])
    openai = OpenAIModel("gpt-4.1-mini", base_url="http://127.0.0.1:9")
    anthropic = AnthropicModel("claude-haiku-4-5", base_url="http://127.0.0.1:9")
    assert (scripted.provider, openai.provider, anthropic.provider) == (
        "scripted",
        "openai",
        "anthropic",
    )
    with pytest.raises(AttributeError):
        scripted.provider = "other"  # type: ignore[misc]
    # The loop fills ``provider`` from the model (``Model`` does not require it), so an
    # adapter leaves it unset on its responses.
    assert asyncio.run(scripted.complete(REQ)).provider is None


class Overloaded:
    name = "overloaded"
    provider = "busy-cloud"
    continues = True

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise TransientModelError("529 overloaded")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        raise TransientModelError("529 overloaded")
        yield TextDelta(text="never")


class SaysItsOwn:
    """An adapter that names the provider on its response (a gateway's upstream)."""

    name = "gateway"
    provider = "gateway-inc"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="routed", model="upstream-7b", provider="upstream")


class Unnamed:
    """A model with no ``provider``: the protocol does not require one."""

    name = "unnamed"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="plain")


def test_a_fallback_names_the_provider_of_the_model_that_answered() -> None:
    model = FallbackModel(Overloaded(), ScriptedModel(["second"], name="backup"))
    answer = asyncio.run(model.complete(REQ))
    assert (answer.text, answer.model, answer.provider) == ("second", "backup", "scripted")

    async def streamed() -> ModelResponse:
        events = [e async for e in model.stream(REQ)]
        assert isinstance(events[-1], Completed)
        return events[-1].response

    answer = asyncio.run(streamed())
    assert (answer.model, answer.provider) == ("backup", "scripted")
    own = asyncio.run(FallbackModel(Overloaded(), SaysItsOwn()).complete(REQ))
    assert (own.model, own.provider) == ("upstream-7b", "upstream")  # the adapter's word
    bare = asyncio.run(FallbackModel(Overloaded(), Unnamed()).complete(REQ))
    assert (bare.model, bare.provider) == ("unnamed", None)
    assert not hasattr(model, "provider")  # the answer says which; the fallback is none
