"""The per-piece fast paths of a live stream keep its wire format: ``server/events.wire``
writes the bytes sse-starlette's ``ServerSentEvent`` writes for every event kind, and
``live/vocabulary.shown`` (the rows a feed hands over) gives the events and cursor of the
general ``merge``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sse_starlette import ServerSentEvent

from dbos_agents import Cursor
from dbos_agents.events import (
    DeltaEvent,
    MessageEvent,
    PendingEvent,
    ProgressEvent,
    RetractEvent,
    SessionEvent,
    StateEvent,
    StatusEvent,
    ToolCallPiece,
)
from dbos_agents.live.deltas import WAIT_MARK, Logged
from dbos_agents.live.vocabulary import merge, shown
from dbos_agents.server.events import SEP, chunk, wire

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ODD = 'line\nbreak\r\nand \r, \u2028, \x0b, \x85, quote " and é'


def _library(e: SessionEvent) -> bytes:
    """What the stream sent through ``ServerSentEvent`` before it wrote the bytes itself."""
    if isinstance(e, StatusEvent | PendingEvent | StateEvent):
        return ServerSentEvent(e.model_dump_json(), event=e.event, sep=SEP).encode()
    text = isinstance(e, DeltaEvent) and e.tool_call is None
    exclude = {"cursor", "tool_call"} if text else {"cursor"}
    data = e.model_dump_json(exclude=exclude)
    return ServerSentEvent(data, event=e.event, id=e.cursor, sep=SEP).encode()


EVENTS: list[SessionEvent] = [
    DeltaEvent(run=1, turn=2, attempt=0, text=ODD, cursor="3.17"),
    DeltaEvent(
        run=1,
        turn=2,
        attempt=1,
        tool_call=ToolCallPiece(index=0, id="c1", name="f", arguments='{"a": "\\n'),
        cursor="3.18",
    ),
    RetractEvent(run=1, turn=2, attempt=1, tool_index=None, tool_call_id=None, cursor="3.19"),
    ProgressEvent(run=1, turn=2, tool_call_id="c1", tool="f", part=1, note=ODD, cursor="3.20"),
    MessageEvent(seq=4, run_seq=1, created_at=NOW, role="assistant", content=ODD, cursor="4.20"),
    PendingEvent(
        root_session_id="s",
        tool_call_id="c1",
        kind="client",
        tool="f",
        arguments={"q": ODD},
        output_schema=None,
        deadline=NOW,
    ),
    StateEvent(version=2, run=1, turn=1, tool_call_id="c1", state={"n": ODD}),
    StatusEvent(status="failed", run_seq=1, final_output=None, error=ODD),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_each_event_is_the_bytes_sse_starlette_writes(event: SessionEvent) -> None:
    assert wire(event) == _library(event)


def test_a_chunk_is_its_events_in_order() -> None:
    assert chunk(EVENTS) == b"".join(_library(e) for e in EVENTS)


def _row(id: int, after_seq: int, kind: str = "text", part: int = 0, **kw: object) -> Logged:
    return Logged(id=id, after_seq=after_seq, run_seq=1, turn=1, attempt=0, part=part,
                  kind=kind, **kw)  # type: ignore[arg-type]  # fmt: skip


ROWS: list[list[Logged]] = [
    [],
    [_row(7, 3, text="a")],
    [_row(7, 3, text="a"), _row(8, 3, text="b"), _row(9, 3, text=ODD)],
    [_row(9, 3, text="b"), _row(7, 3, text="a")],  # out of order: sorted as merge sorts
    [_row(5, 2, text="seen"), _row(7, 3, text="a")],  # before the reader's last message
    [_row(7, 3, "tool_call", tool_index=0, tool_call_id="c", name="f", text='{"x"')],
    [_row(7, 3, "retract"), _row(8, 3, "retract", tool_index=1, tool_call_id="c")],
    [_row(7, 3, "progress", part=1, tool_call_id="c", name="f", text="n", fraction=0.5)],
    [_row(7, 3, "progress", part=WAIT_MARK, tool_call_id="c", name="f"), _row(8, 3, text="a")],
]


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("after", [Cursor(3, 6), Cursor(3, 0)])
def test_shown_is_merge_of_deltas_alone(rows: list[Logged], after: Cursor) -> None:
    merged = merge(after, [], rows, limit=len(rows) + 1)
    assert shown(after, rows) == (merged.events, merged.cursor)
