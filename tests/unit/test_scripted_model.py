"""``ScriptedModel``: the turn comes from the transcript, never from memory (crash-safe)."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from dbos_agents import Message, ModelError, ModelResponse, ToolCall, Usage
from dbos_agents.models import Model, ModelRequest, ScriptedModel, call, calls


def request(*messages: Message, instructions: str = "") -> ModelRequest:
    return ModelRequest(agent="a", instructions=instructions, messages=list(messages))


def complete(model: ScriptedModel, req: ModelRequest) -> ModelResponse:
    return asyncio.run(model.complete(req))


USER = Message(role="user", content="hi")


def assistant(text: str = "ok") -> Message:
    return Message(role="assistant", content=text)


def script() -> list[str | ModelResponse]:
    return [
        calls(call("lookup", {"order_id": "A"}), call("search", {"q": "x"}), text="checking"),
        calls(call("lookup", {"order_id": "B"}, id="given")),
        "final answer",
    ]


def test_is_a_model() -> None:
    model = ScriptedModel(["x"], name="demo")
    assert isinstance(model, Model)
    assert model.name == "demo"


def test_turn_is_chosen_by_number_of_assistant_messages() -> None:
    model = ScriptedModel(script())
    first = complete(model, request(USER))
    assert first.text == "checking"
    assert [c.name for c in first.tool_calls] == ["lookup", "search"]

    third = complete(
        model,
        request(
            USER,
            assistant(),
            Message(role="tool", content="{}", tool_call_id="x", name="lookup"),
            Message(role="user", content="and?"),
            assistant(),
        ),
    )
    assert third.text == "final answer"
    assert third.tool_calls == []


def test_non_assistant_messages_do_not_advance_the_turn() -> None:
    model = ScriptedModel(script())
    many = [USER, Message(role="system", content="s"), Message(role="tool", content="t")] * 3
    assert complete(model, request(*many)).text == "checking"


def test_repeated_calls_on_same_transcript_replay_the_same_turn() -> None:
    model = ScriptedModel(script())
    req = request(USER, assistant())
    assert complete(model, req) == complete(model, req)


def test_fresh_instance_on_same_transcript_returns_same_turn() -> None:
    req = request(USER, assistant("checking"))
    before_crash = complete(ScriptedModel(script()), req)
    complete(ScriptedModel(script()), request(USER))  # unrelated call on another instance
    after_restart = complete(ScriptedModel(script()), req)
    assert after_restart == before_crash
    assert after_restart.tool_calls[0].parsed_arguments() == {"order_id": "B"}


def test_tool_calls_without_id_get_turn_and_index_ids() -> None:
    model = ScriptedModel(script())
    first = complete(model, request(USER))
    assert [c.id for c in first.tool_calls] == ["call_1_1", "call_1_2"]


def test_tool_call_ids_use_the_turn_number() -> None:
    model = ScriptedModel(
        ["a", "b", calls(call("t"), call("u", id="keep"), call("v"))],
    )
    third = complete(model, request(USER, assistant(), assistant()))
    assert [c.id for c in third.tool_calls] == ["call_3_1", "keep", "call_3_3"]


def test_given_ids_are_kept() -> None:
    second = complete(ScriptedModel(script()), request(USER, assistant()))
    assert [c.id for c in second.tool_calls] == ["given"]


def test_script_is_not_mutated() -> None:
    turns = script()
    first_turn = turns[0]
    assert isinstance(first_turn, ModelResponse)
    complete(ScriptedModel(turns), request(USER))
    assert [c.id for c in first_turn.tool_calls] == ["", ""]
    assert first_turn.usage == Usage()
    assert first_turn.model is None


def test_exhausted_script_raises_model_error() -> None:
    model = ScriptedModel(["only"])
    with pytest.raises(ModelError, match="has 1 turns; turn 2 was requested"):
        complete(model, request(USER, assistant()))


def test_empty_script_raises_model_error_on_first_turn() -> None:
    with pytest.raises(ModelError, match="turn 1 was requested"):
        complete(ScriptedModel([]), request(USER))


def test_respond_function_mode() -> None:
    seen: list[int] = []

    def respond(req: ModelRequest) -> str | ModelResponse:
        seen.append(len(req.messages))
        if req.messages[-1].role == "user":
            return calls(call("lookup", {"q": req.messages[-1].content}))
        return "done"

    model = ScriptedModel(respond=respond)
    first = complete(model, request(USER))
    assert first.tool_calls[0].parsed_arguments() == {"q": "hi"}
    assert first.tool_calls[0].id == "call_1_1"
    second = complete(model, request(USER, assistant(), Message(role="tool", content="r")))
    assert second.text == "done"
    assert seen == [1, 3]


def test_respond_mode_ids_follow_the_transcript() -> None:
    model = ScriptedModel(respond=lambda req: calls(call("t"), call("t")))
    resp = complete(model, request(USER, assistant(), assistant()))
    assert [c.id for c in resp.tool_calls] == ["call_3_1", "call_3_2"]


def test_model_name_is_filled_in_unless_given() -> None:
    model = ScriptedModel(["x", ModelResponse(text="y", model="other")], name="mine")
    assert complete(model, request(USER)).model == "mine"
    assert complete(model, request(USER, assistant())).model == "other"


def test_usage_estimate_is_deterministic() -> None:
    req = request(Message(role="user", content="x" * 37), instructions="y" * 10)
    model = ScriptedModel(["z" * 9])
    usage = complete(model, req).usage
    assert usage.input_tokens == math.ceil(47 / 4) + 1 == 13
    assert usage.output_tokens == math.ceil(9 / 4) + 1 == 4
    assert usage.cost_usd == 0.0
    assert complete(ScriptedModel(["z" * 9]), req).usage == usage


def test_usage_estimate_counts_tool_calls() -> None:
    tc = call("lookup", {"order_id": "A"})
    usage = complete(ScriptedModel([calls(tc)]), request(USER)).usage
    assert usage.output_tokens == math.ceil((len("lookup") + len(tc.arguments)) / 4) + 1


def test_cost_scales_with_price() -> None:
    req = request(Message(role="user", content="x" * 400))
    cheap = complete(ScriptedModel(["a" * 40], usd_per_1k_tokens=1.0), req).usage
    dear = complete(ScriptedModel(["a" * 40], usd_per_1k_tokens=3.0), req).usage
    assert cheap.total_tokens == dear.total_tokens == 101 + 11
    assert cheap.cost_usd == pytest.approx(0.112)
    assert dear.cost_usd == pytest.approx(3 * cheap.cost_usd)


def test_explicit_usage_is_kept() -> None:
    given = Usage(input_tokens=7, output_tokens=8, cost_usd=0.5)
    model = ScriptedModel([ModelResponse(text="x", usage=given)], usd_per_1k_tokens=100.0)
    assert complete(model, request(USER)).usage == given


def test_on_call_is_invoked_with_the_request() -> None:
    seen: list[ModelRequest] = []
    model = ScriptedModel(["a"], on_call=seen.append)
    req = request(USER)
    complete(model, req)
    assert seen == [req]


def test_on_call_is_invoked_even_when_script_is_exhausted() -> None:
    seen: list[ModelRequest] = []
    model = ScriptedModel([], on_call=seen.append)
    with pytest.raises(ModelError):
        complete(model, request(USER))
    assert len(seen) == 1


def test_both_turns_and_respond_is_an_error() -> None:
    with pytest.raises(ValueError, match="either turns or respond"):
        ScriptedModel(["x"], respond=lambda req: "y")


def test_neither_turns_nor_respond_is_an_error() -> None:
    with pytest.raises(ValueError, match="either turns or respond"):
        ScriptedModel()


# --- call / calls --------------------------------------------------------------------------


def test_call_with_dict_arguments() -> None:
    tc = call("lookup", {"order_id": "A", "n": 1})
    assert isinstance(tc, ToolCall)
    assert tc.id == ""
    assert json.loads(tc.arguments) == {"order_id": "A", "n": 1}


def test_call_with_raw_string_arguments_keeps_them_verbatim() -> None:
    tc = call("lookup", '{"order_id": broken', id="c1")
    assert tc.arguments == '{"order_id": broken'
    assert tc.id == "c1"
    with pytest.raises(ValueError):
        tc.parsed_arguments()


def test_call_without_arguments() -> None:
    assert call("now").arguments == "{}"


def test_calls_builds_a_response() -> None:
    resp = calls(call("a"), call("b"), text="thinking")
    assert resp.text == "thinking"
    assert [c.name for c in resp.tool_calls] == ["a", "b"]
