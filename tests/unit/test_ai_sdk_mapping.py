"""``RunParts``: a run's events as AI SDK UI message stream parts (no database)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from dbos_agents.events import (
    DeltaEvent,
    MessageEvent,
    PendingEvent,
    RetractEvent,
    SessionEvent,
    StatusEvent,
    ToolCallPiece,
)
from dbos_agents.messages import ToolCall
from dbos_agents.server.ai_sdk.mapping import RunParts

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _wire(parts: RunParts, events: list[SessionEvent]) -> list[dict[str, Any]]:
    return [json.loads(p.wire()) for p in parts.feed(events)]


def _delta(text: str = "", turn: int = 1, attempt: int = 1, **tool: Any) -> DeltaEvent:
    piece = ToolCallPiece(**tool) if tool else None
    return DeltaEvent(run=1, turn=turn, attempt=attempt, text=text, tool_call=piece, cursor="1")


def _message(role: str, content: str | None = None, seq: int = 2, **kw: Any) -> MessageEvent:
    return MessageEvent(
        role=role, content=content, seq=seq, run_seq=1, created_at=NOW, cursor=str(seq), **kw
    )


def _shown(chunks: list[dict[str, Any]]) -> str:
    """What the page's text holds after these chunks (reset-step empties the step)."""
    text = ""
    for c in chunks:
        if c["type"] == "text-delta":
            text += c["delta"]
        elif c["type"] == "reset-step":
            text = ""
    return text


def test_text_streams_as_one_part_per_step_and_the_run_end_finishes() -> None:
    parts = RunParts(1, "m")
    out = _wire(parts, [_message("user", "hi", seq=1), _delta("Hel"), _delta("lo", attempt=2)])
    assert [c["type"] for c in out] == ["start-step", "text-start", "text-delta", "text-delta"]
    out += _wire(parts, [_message("assistant", "Hello")])
    out += _wire(
        parts, [StatusEvent(status="completed", run_seq=1, final_output="Hello", error=None)]
    )
    assert [c["type"] for c in out[4:]] == ["text-end", "finish-step", "finish"]
    assert out[-1] == {"type": "finish", "finishReason": "stop"}
    assert _shown(out) == "Hello" and parts.done


def test_a_retraction_resets_the_step_and_nothing_withdrawn_stays() -> None:
    parts = RunParts(1, "m")
    out = _wire(parts, [_delta("abandoned "), _delta("reply")])
    out += _wire(parts, [RetractEvent(run=1, turn=1, attempt=1, cursor="1.3")])
    assert out[-1] == {"type": "reset-step"}
    out += _wire(parts, [_delta("Fresh", attempt=2), _message("assistant", "Fresh")])
    assert _shown(out) == "Fresh"
    starts = [c["id"] for c in out if c["type"] == "text-start"]
    assert len(starts) == 2 and starts[0] != starts[1], "a new text part after the reset"


def test_withdrawing_one_tool_call_shows_the_rest_of_the_step_again() -> None:
    parts = RunParts(1, "m")
    out = _wire(
        parts,
        [
            _delta("Let me look. "),
            _delta(index=0, id="c0", name="search", arguments='{"q":'),
            _delta(index=1, id="c1", name="fetch", arguments='{"u"'),
        ],
    )
    out = _wire(parts, [RetractEvent(run=1, turn=1, attempt=1, tool_index=0, cursor="1.4")])
    assert [c["type"] for c in out] == [
        "reset-step",
        "text-start",
        "text-delta",
        "tool-input-start",
        "tool-input-delta",
    ]
    assert out[2]["delta"] == "Let me look. " and out[3]["toolCallId"] == "c1"


def test_a_client_tool_wait_fires_on_tool_call_and_ends_the_stream() -> None:
    parts = RunParts(1, "m")
    call = ToolCall(id="c1", name="confirm", arguments='{"question":"ok?"}')
    wait = PendingEvent(
        root_session_id="s",
        tool_call_id="c1",
        kind="client",
        tool="confirm",
        arguments={"question": "ok?"},
        output_schema=None,
        deadline=NOW,
    )
    out = _wire(parts, [_message("assistant", None, tool_calls=[call]), wait])
    available = [c for c in out if c["type"] == "tool-input-available"]
    assert available == [
        {
            "type": "tool-input-available",
            "toolCallId": "c1",
            "toolName": "confirm",
            "input": {"question": "ok?"},
        }
    ]
    assert out[-1] == {"type": "finish", "finishReason": "tool-calls"} and parts.done


def test_an_approval_wait_is_a_request_and_server_tools_are_provider_executed() -> None:
    parts = RunParts(1, "m")
    calls = [ToolCall(id="a", name="close"), ToolCall(id="b", name="lookup")]
    wait = PendingEvent(
        root_session_id="s",
        tool_call_id="a",
        kind="approval",
        tool="close",
        arguments={},
        output_schema=None,
        deadline=NOW,
    )
    out = _wire(parts, [_message("assistant", "", tool_calls=calls), wait])
    by_type = {(c["type"], c.get("toolCallId")): c for c in out}
    assert by_type[("tool-input-available", "a")]["providerExecuted"] is True
    assert by_type[("tool-input-available", "b")]["providerExecuted"] is True
    assert by_type[("tool-approval-request", "a")]["approvalId"] == "a"
    assert out[-1]["finishReason"] == "tool-calls"


@pytest.mark.parametrize("kind", ["approval", "client"])
def test_a_sub_agents_wait_is_asked_under_the_roots_sub_agent_call(kind: str) -> None:
    parts = RunParts(1, "m")
    call = ToolCall(id="c1", name="subagent__deputy", arguments='{"message":"go"}')
    wait = PendingEvent(
        root_session_id="s",
        tool_call_id="deep-1",
        kind=kind,  # type: ignore[arg-type]
        tool="close_account",
        arguments={"account_id": "a"},
        output_schema=None,
        deadline=NOW,
        owner_session_id="s::sub::c1::sub::c7",
    )
    out = _wire(parts, [_message("assistant", None, tool_calls=[call]), wait])
    if kind == "approval":
        assert {"type": "tool-approval-request", "approvalId": "deep-1", "toolCallId": "c1"} in out
    else:
        assert {
            "type": "tool-input-available",
            "toolCallId": "deep-1",
            "toolName": "close_account",
            "input": {"account_id": "a"},
        } in out
    assert out[-1] == {"type": "finish", "finishReason": "tool-calls"} and parts.done


def test_tool_results_map_to_outputs_errors_and_denials() -> None:
    parts = RunParts(1, "m")
    denied = {
        "error": {"kind": "approval-denied", "tool": "x", "tool_call_id": "b", "message": "no"}
    }
    failed = {"error": {"kind": "tool-error", "tool": "x", "tool_call_id": "c", "message": "boom"}}
    out = _wire(
        parts,
        [
            _message("tool", '{"closed":"acc-1"}', seq=3, tool_call_id="a"),
            _message("tool", json.dumps(denied), seq=4, tool_call_id="b"),
            _message("tool", json.dumps(failed), seq=5, tool_call_id="c"),
            _message("tool", "null", seq=6, tool_call_id="d"),
        ],
    )
    assert out == [
        {"type": "tool-output-available", "toolCallId": "a", "output": {"closed": "acc-1"}},
        {"type": "tool-output-denied", "toolCallId": "b"},
        {"type": "tool-output-error", "toolCallId": "c", "errorText": "boom"},
        {"type": "tool-output-available", "toolCallId": "d", "output": None},
    ]


def test_a_failed_run_sends_an_error_part_and_a_later_run_ends_this_one() -> None:
    parts = RunParts(1, "m")
    out = _wire(
        parts, [StatusEvent(status="failed", run_seq=1, final_output=None, error="model down")]
    )
    assert out == [
        {"type": "error", "errorText": "model down"},
        {"type": "finish", "finishReason": "error"},
    ]
    later = RunParts(1, "m")
    status = StatusEvent(status="running", run_seq=2, final_output=None, error=None)
    assert [json.loads(p.wire()) for p in later.feed([], status)][-1]["type"] == "finish"
