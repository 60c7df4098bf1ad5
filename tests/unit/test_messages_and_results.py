"""Transcript and tool-result types: exact JSON round-trips (what crosses DBOS step
boundaries), argument parsing, usage arithmetic and the text the model reads back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from dbos_agents import Message, ModelResponse, ToolCall, ToolError, ToolResult, Usage
from dbos_agents.results import durability_error

CALL = ToolCall(id="call_1_1", name="lookup", arguments='{"order_id": "A-1", "n": 2}')
USAGE = Usage(input_tokens=120, output_tokens=30, cost_usd=0.00123)

SAMPLES: list[BaseModel] = [
    CALL,
    ToolCall(id="c", name="bad", arguments="{not json"),
    Message(role="system", content="You are terse."),
    Message(role="user", content="Où est ma commande ? 📦"),
    Message(role="assistant", content=None, tool_calls=[CALL, ToolCall(id="c2", name="x")]),
    Message(role="tool", content='{"ok":true}', tool_call_id="call_1_1", name="lookup"),
    USAGE,
    Usage(),
    ModelResponse(text="done", usage=USAGE, model="scripted"),
    ModelResponse(tool_calls=[CALL]),
    ToolResult.success("call_1_1", "lookup", {"status": "shipped", "items": [1, 2.5, None]}),
    ToolResult.success("call_1_2", "echo", "plain text", verified=True),
    ToolResult.success("call_1_3", "noop", None),
    ToolResult.failure("call_1_4", "lookup", "invalid-arguments", "bad", details=[{"loc": ["x"]}]),
    durability_error("call_1_5", "charge", reason="worker restarted"),
]


@pytest.mark.parametrize("obj", SAMPLES, ids=lambda o: type(o).__name__)
def test_model_dump_json_round_trips_exactly(obj: BaseModel) -> None:
    dumped = obj.model_dump(mode="json")
    again = type(obj).model_validate(dumped)
    assert again == obj
    assert again.model_dump(mode="json") == dumped


@pytest.mark.parametrize("obj", SAMPLES, ids=lambda o: type(o).__name__)
def test_round_trip_through_json_text(obj: BaseModel) -> None:
    text = json.dumps(obj.model_dump(mode="json"))
    again = type(obj).model_validate(json.loads(text))
    assert again == obj
    assert json.dumps(again.model_dump(mode="json")) == text


def test_round_trip_equality_is_not_vacuous() -> None:
    dumped = CALL.model_dump(mode="json")
    dumped["arguments"] = "{}"
    assert ToolCall.model_validate(dumped) != CALL


def test_nested_tool_calls_come_back_as_tool_calls() -> None:
    msg = Message(role="assistant", tool_calls=[CALL])
    again = Message.model_validate(json.loads(json.dumps(msg.model_dump(mode="json"))))
    assert isinstance(again.tool_calls[0], ToolCall)
    assert again.tool_calls[0].parsed_arguments() == {"order_id": "A-1", "n": 2}


def test_tool_result_error_comes_back_as_tool_error() -> None:
    result = ToolResult.failure("c", "t", "tool-error", "boom")
    again = ToolResult.model_validate(json.loads(json.dumps(result.model_dump(mode="json"))))
    assert isinstance(again.error, ToolError)
    assert again.error.kind == "tool-error"


def test_message_role_is_checked() -> None:
    with pytest.raises(ValidationError):
        Message(role="robot", content="hi")  # type: ignore[arg-type]


def test_tool_call_is_frozen() -> None:
    with pytest.raises(ValidationError):
        CALL.arguments = "{}"  # type: ignore[misc]


def test_tool_error_kind_is_checked() -> None:
    with pytest.raises(ValidationError):
        ToolResult.failure("c", "t", "made-up-kind", "x")  # type: ignore[arg-type]


# --- ToolCall.parsed_arguments -------------------------------------------------------------


def test_parsed_arguments_of_an_object() -> None:
    assert CALL.parsed_arguments() == {"order_id": "A-1", "n": 2}


@pytest.mark.parametrize("raw", ["", "{}"])
def test_parsed_arguments_of_empty_text_is_an_empty_dict(raw: str) -> None:
    assert ToolCall(id="c", name="t", arguments=raw).parsed_arguments() == {}


def test_parsed_arguments_default() -> None:
    assert ToolCall(id="c", name="t").arguments == "{}"
    assert ToolCall(id="c", name="t").parsed_arguments() == {}


@pytest.mark.parametrize("raw", ["{not json", '{"a": 1', "nul", "{'a': 1}"])
def test_parsed_arguments_of_malformed_json_raises_value_error(raw: str) -> None:
    with pytest.raises(ValueError):
        ToolCall(id="c", name="t", arguments=raw).parsed_arguments()


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "3", "null", "true"])
def test_parsed_arguments_of_non_object_raises_value_error(raw: str) -> None:
    with pytest.raises(ValueError, match="must be a JSON object"):
        ToolCall(id="c", name="t", arguments=raw).parsed_arguments()


# --- Usage ---------------------------------------------------------------------------------


def test_usage_addition() -> None:
    total = Usage(input_tokens=10, output_tokens=5, cost_usd=0.1) + Usage(
        input_tokens=1, output_tokens=2, cost_usd=0.2
    )
    assert total == Usage(input_tokens=11, output_tokens=7, cost_usd=0.3)
    assert total.total_tokens == 18


def test_usage_addition_rounds_float_noise() -> None:
    assert (Usage(cost_usd=0.1) + Usage(cost_usd=0.2)).cost_usd == 0.3


def test_usage_addition_with_zero_is_identity() -> None:
    assert USAGE + Usage() == USAGE
    assert Usage() + USAGE == USAGE


def test_usage_sum_over_many() -> None:
    total = Usage()
    for _ in range(10):
        total = total + Usage(input_tokens=3, output_tokens=1, cost_usd=0.01)
    assert (total.input_tokens, total.output_tokens, total.cost_usd) == (30, 10, 0.1)


# --- ToolResult.content --------------------------------------------------------------------


def test_success_string_output_passes_through() -> None:
    assert ToolResult.success("c", "t", 'raw "text" {}').content() == 'raw "text" {}'


def test_success_dict_output_is_compact_sorted_json() -> None:
    result = ToolResult.success("c", "t", {"b": 1, "a": {"z": None, "y": [1, "é"]}})
    assert result.content() == '{"a":{"y":[1,"é"],"z":null},"b":1}'


@pytest.mark.parametrize(
    ("output", "text"), [(None, "null"), (3, "3"), ([1, 2], "[1,2]"), (True, "true")]
)
def test_success_other_outputs_are_json(output: Any, text: str) -> None:
    assert ToolResult.success("c", "t", output).content() == text


def test_failure_content_is_an_error_object_with_kind() -> None:
    result = ToolResult.failure(
        "call_9", "lookup", "invalid-arguments", "order_id is required", details={"loc": ["x"]}
    )
    assert result.ok is False
    assert result.output is None
    parsed = json.loads(result.content())
    assert parsed == {
        "error": {
            "kind": "invalid-arguments",
            "tool": "lookup",
            "tool_call_id": "call_9",
            "message": "order_id is required",
            "details": {"loc": ["x"]},
        }
    }
    assert result.content() == json.dumps(parsed, separators=(",", ":"), sort_keys=True)


def test_failure_content_omits_missing_details() -> None:
    parsed = json.loads(ToolResult.failure("c", "t", "unknown-tool", "no such tool").content())
    assert "details" not in parsed["error"]
    assert parsed["error"]["kind"] == "unknown-tool"


def test_success_and_failure_flags() -> None:
    ok = ToolResult.success("c", "t", 1)
    assert (ok.ok, ok.error, ok.verified) == (True, None, False)
    assert ToolResult.success("c", "t", 1, verified=True).verified is True


# --- durability_error ----------------------------------------------------------------------


def test_durability_error_names_tool_call_and_tells_the_model_what_to_do() -> None:
    result = durability_error("call_2_1", "charge_card")
    assert result.ok is False
    assert result.tool == "charge_card"
    assert result.tool_call_id == "call_2_1"
    assert result.error is not None
    assert result.error.kind == "tool-durability-error"
    assert result.error.tool == "charge_card"
    assert result.error.tool_call_id == "call_2_1"
    message = result.error.message
    assert "'charge_card'" in message
    assert "call_2_1" in message
    assert "unknown whether its side effect happened" in message
    assert "not run again" in message
    assert "Check the effect" in message
    assert "tell the user the outcome is uncertain" in message
    assert json.loads(result.content())["error"]["kind"] == "tool-durability-error"


def test_durability_error_appends_reason() -> None:
    without = durability_error("c", "t").error
    with_reason = durability_error("c", "t", reason="lease expired").error
    assert without is not None and with_reason is not None
    assert with_reason.message == without.message + " (lease expired)"
