"""``ScriptedModel.stream``: the same turn as ``complete``, in pieces, and continuable."""

from __future__ import annotations

import asyncio
import time

import pytest

from dbos_agents import Message, ModelError, ModelResponse, ToolCall, Usage
from dbos_agents.models import (
    Completed,
    ModelEvent,
    ModelRequest,
    ScriptedModel,
    StreamingModel,
    TextDelta,
    ToolCallDelta,
    call,
    calls,
)

USER = Message(role="user", content="where is my order?")
ANSWER = "Your order A-42 left the warehouse this morning."


def request(*messages: Message, continue_from: str | None = None) -> ModelRequest:
    return ModelRequest(agent="a", messages=list(messages) or [USER], continue_from=continue_from)


def events(model: ScriptedModel, req: ModelRequest) -> list[ModelEvent]:
    async def run() -> list[ModelEvent]:
        return [event async for event in model.stream(req)]

    return asyncio.run(run())


def complete(model: ScriptedModel, req: ModelRequest) -> ModelResponse:
    return asyncio.run(model.complete(req))


def completed(seen: list[ModelEvent]) -> ModelResponse:
    """The one ``Completed``, which must come last."""
    assert [type(e) for e in seen].count(Completed) == 1
    last = seen[-1]
    assert isinstance(last, Completed)
    return last.response


def text_of(seen: list[ModelEvent]) -> str:
    return "".join(e.text for e in seen if isinstance(e, TextDelta))


def test_is_a_streaming_model_that_continues() -> None:
    model = ScriptedModel(["x"])
    assert isinstance(model, StreamingModel)
    assert model.continues is True


def test_text_arrives_in_chunks_that_concatenate_to_complete() -> None:
    model = ScriptedModel([ANSWER], chunk_chars=8)
    seen = events(model, request())
    deltas = [e.text for e in seen if isinstance(e, TextDelta)]
    assert deltas == [ANSWER[i : i + 8] for i in range(0, len(ANSWER), 8)]
    assert len(deltas) == 6 and all(0 < len(d) <= 8 for d in deltas)
    response = completed(seen)
    assert "".join(deltas) == response.text == ANSWER
    assert response == complete(model, request())


def test_default_chunk_is_eight_characters_and_chunk_size_is_configurable() -> None:
    default = events(ScriptedModel(["abcdefghijk"]), request())
    assert [e.text for e in default if isinstance(e, TextDelta)] == ["abcdefgh", "ijk"]
    one = events(ScriptedModel(["abc"], chunk_chars=1), request())
    assert [e.text for e in one if isinstance(e, TextDelta)] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="chunk_chars"):
        ScriptedModel(["x"], chunk_chars=0)
    with pytest.raises(ValueError, match="pace_sec"):
        ScriptedModel(["x"], pace_sec=-1)


def test_tool_calls_stream_after_the_text_with_complete_ids_and_usage() -> None:
    turn = calls(
        call("lookup", {"order_id": "A-42", "verbose": True}),
        call("search", {"q": "espresso"}, id="given"),
        text="checking",
    )
    model = ScriptedModel([turn], chunk_chars=5, usd_per_1k_tokens=2.0)
    seen = events(model, request())
    response = completed(seen)
    expected = complete(model, request())
    assert response == expected
    assert [c.id for c in response.tool_calls] == ["call_1_1", "given"]
    assert response.usage.cost_usd > 0 and response.model == "scripted"

    kinds = [e.kind for e in seen]
    assert kinds.index("tool_call") > max(i for i, k in enumerate(kinds) if k == "text")
    tool_deltas = [e for e in seen if isinstance(e, ToolCallDelta)]
    for index, expected_call in enumerate(expected.tool_calls):
        pieces = [d for d in tool_deltas if d.index == index]
        head, rest = pieces[0], pieces[1:]
        assert (head.id, head.name) == (expected_call.id, expected_call.name)
        assert all(d.id is None and d.name is None for d in rest)
        assert len(rest) > 1 and all(len(d.arguments) <= 5 for d in rest)
        assembled = ToolCall(
            id=head.id or "",
            name=head.name or "",
            arguments="".join(d.arguments for d in pieces),
        )
        assert assembled == expected_call
    assert text_of(seen) == "checking"


def test_continue_from_streams_only_the_remainder() -> None:
    model = ScriptedModel([ANSWER], chunk_chars=4)
    shown = ANSWER[:13]
    seen = events(model, request(continue_from=shown))
    response = completed(seen)
    assert text_of(seen) == response.text == ANSWER[13:]
    assert shown + (response.text or "") == ANSWER
    assert next(e.text for e in seen if isinstance(e, TextDelta)) == ANSWER[13:17]
    # the prefix was sent back as input; only the new text is output
    fresh = complete(model, request())
    assert response.usage.output_tokens < fresh.usage.output_tokens
    assert response.usage.input_tokens > fresh.usage.input_tokens


def test_continue_from_keeps_tool_calls_and_their_ids() -> None:
    turn = calls(call("lookup", {"order_id": "A"}), text="let me look that up")
    model = ScriptedModel([turn])
    seen = events(model, request(continue_from="let me "))
    response = completed(seen)
    assert response.text == text_of(seen) == "look that up"
    assert response.tool_calls == complete(model, request()).tool_calls


def test_continue_from_the_whole_text_streams_nothing_new() -> None:
    seen = events(ScriptedModel([ANSWER]), request(continue_from=ANSWER))
    assert text_of(seen) == completed(seen).text == ""
    assert len(seen) == 1


def test_a_prefix_the_script_does_not_start_with_streams_the_whole_text() -> None:
    seen = events(ScriptedModel([ANSWER]), request(continue_from="Something else"))
    assert text_of(seen) == completed(seen).text == ANSWER


def test_continuation_follows_the_transcript_turn() -> None:
    model = ScriptedModel(["first answer", "second answer"])
    req = request(
        USER, Message(role="assistant", content="first answer"), USER, continue_from="sec"
    )
    assert completed(events(model, req)).text == "ond answer"


def test_pace_sleeps_between_pieces() -> None:
    model = ScriptedModel(["a" * 40], chunk_chars=8, pace_sec=0.03)
    started = time.monotonic()
    seen = events(model, request())
    assert time.monotonic() - started >= 4 * 0.03 * 0.9  # 5 pieces, 4 gaps
    assert text_of(seen) == "a" * 40


def test_pieces_arrive_before_the_reply_is_finished() -> None:
    """A consumer sees the first piece while later ones are still being paced out."""
    model = ScriptedModel(["abcdefgh" * 4], pace_sec=0.2)

    async def first_piece() -> tuple[ModelEvent, float]:
        started = time.monotonic()
        stream = model.stream(request())
        event = await anext(stream)
        await stream.aclose()  # type: ignore[attr-defined]
        return event, time.monotonic() - started

    event, elapsed = asyncio.run(first_piece())
    assert event == TextDelta(text="abcdefgh")
    assert elapsed < 0.2


def test_on_call_sees_the_streamed_request_and_errors_match_complete() -> None:
    seen: list[ModelRequest] = []
    model = ScriptedModel(["only"], on_call=seen.append)
    req = request(USER, Message(role="assistant", content="only"))
    with pytest.raises(ModelError, match="turn 2 was requested"):
        events(model, req)
    assert seen == [req]


def test_explicit_usage_and_model_are_kept_when_streaming() -> None:
    given = Usage(input_tokens=7, output_tokens=8, cost_usd=0.5)
    model = ScriptedModel([ModelResponse(text="x", usage=given, model="other")])
    response = completed(events(model, request()))
    assert (response.usage, response.model) == (given, "other")
