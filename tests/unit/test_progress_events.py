"""A tool's progress notes (``ctx.progress``, delta rows of kind ``progress``) without a
database: a re-executed turn's continuation ignores them, the merge gives them a cursor
like a delta, and each wire format maps them (SSE, AI SDK, AG-UI, ``follow``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from rich.console import Console

from dbos_agents.cli import render
from dbos_agents.events import Cursor, MessageEvent, ProgressEvent, StatusEvent
from dbos_agents.live import deltas
from dbos_agents.live.deltas import Logged
from dbos_agents.live.vocabulary import merge
from dbos_agents.messages import ToolCall
from dbos_agents.records import HistoryEntry
from dbos_agents.server.ag_ui.mapping import PROGRESS_EVENT, Mapper
from dbos_agents.server.ag_ui.stream import encode as encode_ag_ui
from dbos_agents.server.ag_ui.view import ClientView
from dbos_agents.server.ai_sdk.mapping import RunParts
from dbos_agents.server.events import wire

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CALL = ToolCall(id="c1", name="crawl", arguments="{}")


def note(id: int, part: int, fraction: float | None = None, after_seq: int = 2) -> Logged:
    return Logged(
        id=id,
        after_seq=after_seq,
        run_seq=1,
        turn=1,
        attempt=0,
        part=part,
        kind="progress",
        text=f"page {part}",
        tool_call_id="c1",
        name="crawl",
        fraction=fraction,
    )


def event(part: int, fraction: float | None = None, cursor: str = "2.5") -> ProgressEvent:
    return ProgressEvent(
        run=1,
        turn=1,
        tool_call_id="c1",
        tool="crawl",
        part=part,
        note=f"page {part}",
        fraction=fraction,
        cursor=cursor,
    )


def asked(seq: int = 2) -> MessageEvent:
    return MessageEvent(
        seq=seq,
        run_seq=1,
        created_at=NOW,
        role="assistant",
        content=None,
        tool_calls=[CALL],
        cursor=str(seq),
    )


def test_partial_ignores_progress_rows() -> None:
    """A note has attempt 0, no tool index and text: read as a piece it would withdraw the
    reply (a retract without index) or add to its text."""
    rows: list[deltas.Delta] = [
        deltas.Delta(run_seq=1, turn=2, attempt=1, part=0, kind="text", text="Hal"),
        note(7, 1, 0.5),
        deltas.Delta(
            run_seq=1, turn=2, attempt=2, part=0, kind="tool_call", tool_index=0, text="{"
        ),
        note(8, 2),
        deltas.Delta(run_seq=1, turn=2, attempt=2, part=1, kind="text", text="f"),
    ]
    p = deltas.partial(rows)
    assert (p.text, p.open_tools, p.attempt) == ("Half", {0: None}, 2)
    assert deltas.partial([note(7, 1)]) == deltas.Partial()


def test_progress_statement_skips_a_note_written_before() -> None:
    sql, params = deltas.progress_stmt("s", 1, 2, "c1", "crawl", 3, "page 3", 0.25)
    assert "ON CONFLICT (session_id, tool_call_id, part) WHERE kind = 'progress'" in sql
    assert "DO NOTHING" in sql
    assert (params["p"], params["note"], params["fraction"]) == (3, "page 3", 0.25)
    sql, _ = deltas.logged_stmt("s", 1, 2)
    assert "kind <> 'progress'" in sql


def test_the_merge_gives_each_note_a_cursor_between_its_message_and_the_next() -> None:
    messages = [
        HistoryEntry(seq=2, run_seq=1, created_at=NOW, role="assistant", tool_calls=[CALL]),
        HistoryEntry(seq=3, run_seq=1, created_at=NOW, role="tool", tool_call_id="c1"),
    ]
    out = merge(Cursor(1), messages, [note(5, 1, 0.5), note(6, 2)], limit=100)
    assert [(e.event, getattr(e, "cursor", None)) for e in out.events] == [
        ("message", "2"),
        ("progress", "2.5"),
        ("progress", "2.6"),
        ("message", "3.6"),
    ]
    first = out.events[1]
    assert first == event(1, 0.5, cursor="2.5")
    rest = merge(Cursor(2, 5), messages[1:], [note(6, 2)], limit=100)
    assert [e.event for e in rest.events] == ["progress", "message"]


def test_sse_sends_event_progress_with_the_cursor_as_its_id() -> None:
    fields = wire(event(1, 0.5)).decode().strip().split("\n")
    sent = dict(line.split(": ", 1) for line in fields)
    assert (sent["event"], sent["id"]) == ("progress", "2.5")
    assert json.loads(sent["data"]) == {
        "run": 1,
        "turn": 1,
        "tool_call_id": "c1",
        "tool": "crawl",
        "part": 1,
        "note": "page 1",
        "fraction": 0.5,
    }


def test_ai_sdk_sends_a_data_part_keyed_by_call_and_note() -> None:
    parts = RunParts(1, "m")
    out = [json.loads(p.wire()) for p in parts.feed([asked(), event(1, 0.5), event(2)])]
    progress = [c for c in out if c["type"] == "data-progress"]
    assert progress == [
        {
            "type": "data-progress",
            "id": "c1-1",
            "data": {"toolCallId": "c1", "tool": "crawl", "note": "page 1", "fraction": 0.5},
        },
        {
            "type": "data-progress",
            "id": "c1-2",
            "data": {"toolCallId": "c1", "tool": "crawl", "note": "page 2", "fraction": None},
        },
    ]
    # A note of an earlier run is skipped, as its other events are.
    later = RunParts(2, "m2")
    assert later.feed([event(3)]) == []
    done = StatusEvent(status="completed", run_seq=1, final_output="ok", error=None)
    assert [json.loads(p.wire())["type"] for p in parts.feed([done])][-1] == "finish"


def test_ag_ui_sends_a_custom_event_named_progress() -> None:
    mapper = Mapper(ClientView([]), 1, "t", "r")
    (sent,) = encode_ag_ui(mapper.feed([event(1, 0.5)]))
    assert json.loads(sent.decode().removeprefix("data: ")) == {
        "type": "CUSTOM",
        "name": PROGRESS_EVENT,
        "value": {
            "id": "c1-1",
            "toolCallId": "c1",
            "tool": "crawl",
            "note": "page 1",
            "fraction": 0.5,
        },
    }
    assert Mapper(ClientView([]), 2, "t", "r").feed([event(2)]) == []


def test_follow_prints_a_note_on_its_own_line() -> None:
    console = Console(width=120, record=True)
    console.print(render.progress(event(1, 0.4)))
    console.print(render.progress(event(2)))
    text = console.export_text()
    assert text.splitlines() == ["  .. crawl [c1] 40% page 1", "  .. crawl [c1] page 2"]
