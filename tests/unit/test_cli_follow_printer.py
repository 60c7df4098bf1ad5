"""``dbos-agents follow``'s terminal lines, encoded from ``live.reducer``'s operations: a
streamed reply printed once as it came (its message adds only its calls), a reply that was
not streamed printed whole, a withdrawn reply marked, a withdrawn call leaving the text as
printed, waits with their command, notes, the run's end."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from dbos_agents.cli.base import out
from dbos_agents.cli.follow import Printer
from dbos_agents.events import (
    DeltaEvent,
    MessageEvent,
    PendingEvent,
    ProgressEvent,
    RetractEvent,
    SessionEvent,
    StatusEvent,
    ToolCallPiece,
)
from dbos_agents.ids import ask_id
from dbos_agents.messages import ToolCall

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def text(t: str, turn: int = 1, attempt: int = 1, run: int = 1) -> DeltaEvent:
    return DeltaEvent(run=run, turn=turn, attempt=attempt, text=t, cursor="1")


def piece(index: int, args: str, id: str, name: str) -> DeltaEvent:
    p = ToolCallPiece(index=index, id=id, name=name, arguments=args)
    return DeltaEvent(run=1, turn=1, attempt=1, tool_call=p, cursor="1")


def message(role: str, content: str | None, seq: int, run: int = 1, **kw: Any) -> MessageEvent:
    return MessageEvent(
        role=role,  # type: ignore[arg-type]
        content=content,
        seq=seq,
        run_seq=run,
        created_at=NOW,
        cursor=str(seq),
        **kw,
    )


def status(s: str, run: int = 1) -> StatusEvent:
    return StatusEvent(status=s, run_seq=run, final_output=None, error=None)  # type: ignore[arg-type]


def wait(call_id: str, kind: str = "client") -> PendingEvent:
    return PendingEvent(
        root_session_id="s",
        tool_call_id=call_id,
        kind=kind,  # type: ignore[arg-type]
        tool="confirm",
        arguments={},
        output_schema=None,
        deadline=NOW,
    )


def printed(reads: list[list[SessionEvent]], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    with out.status("") as spinner:
        printer = Printer(spinner, full=False)
        for read in reads:
            printer.show_all(read)
        printer.close()
    return capsys.readouterr().out


def test_a_streamed_reply_prints_once_and_its_message_adds_its_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    call = ToolCall(id="c1", name="lookup", arguments="{}")
    got = printed(
        [
            [message("user", "hi", 1), text("Hel")],
            [text("lo"), message("assistant", "Hello", 2, tool_calls=[call])],
            [
                message("tool", "found", 3, tool_call_id="c1", name="lookup"),
                message("assistant", "Done.", 4),
                status("completed"),
            ],
        ],
        capsys,
    )
    assert got.count("Hello") == 1 and "assistant > Hello\n" in got
    assert "-> lookup({}) [c1]" in got and "<- lookup [c1] found" in got
    assert "assistant > Done." in got  # not streamed: printed whole
    assert got.index("-- run 1 --") < got.index("user > hi") < got.index("Hello")
    assert got.rstrip().endswith("run ended: completed")


def test_a_withdrawn_reply_is_marked_and_a_withdrawn_call_leaves_the_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    got = printed(
        [
            [
                text("The quick"),
                RetractEvent(run=1, turn=1, attempt=1, cursor="1.2"),
                text("Fresh", attempt=2),
                piece(0, "{", "c0", "search"),
                RetractEvent(run=1, turn=1, attempt=2, tool_index=0, cursor="1.4"),
                text(" reply", attempt=2),
                message("assistant", "Fresh reply", 2),
            ]
        ],
        capsys,
    )
    assert "The quick\n[withdrawn]\n" in got
    assert got.count("Fresh") == 1 and "assistant > Fresh reply\n" in got


def test_waits_notes_and_a_durable_tools_ask(capsys: pytest.CaptureFixture[str]) -> None:
    call = ToolCall(id="d1", name="research", arguments="{}")
    note = ProgressEvent(
        run=1, turn=1, tool_call_id="d1", tool="research", part=1, note="step 1", cursor="3"
    )
    got = printed(
        [
            [message("assistant", None, 2, tool_calls=[call]), note, wait(ask_id("d1", 1))],
            [message("tool", "ok", 3, tool_call_id="d1", name="research"), status("completed")],
        ],
        capsys,
    )
    assert "-> research({}) [d1]" in got and ".. research [d1] step 1" in got
    assert "client tool confirm" in got and "dbos-agents submit" in got
    assert got.index("step 1") < got.index("client tool confirm") < got.index("<- research")
    assert got.rstrip().endswith("run ended: completed")
