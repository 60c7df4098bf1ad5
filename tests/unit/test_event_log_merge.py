"""The live log's merge (``live/vocabulary.py``) and cursors: the order a reader sees, what a
full batch holds back, and the cursor each event carries."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dbos_agents import (
    Cursor,
    DeltaEvent,
    InvalidRequestError,
    MessageEvent,
    PendingEvent,
    RetractEvent,
    ToolCall,
)
from dbos_agents.live.deltas import Logged
from dbos_agents.live.vocabulary import merge
from dbos_agents.records import HistoryEntry

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def msg(seq: int, role: str = "assistant", calls: list[ToolCall] | None = None) -> HistoryEntry:
    return HistoryEntry(
        seq=seq, run_seq=1, created_at=NOW, role=role, content=f"m{seq}", tool_calls=calls or []
    )


def text(id: int, after_seq: int, piece: str = "x") -> Logged:
    return Logged(id=id, after_seq=after_seq, run_seq=1, turn=0, attempt=1, part=0, kind="text",
                       text=piece)  # fmt: skip


def label(e: object) -> str:
    if isinstance(e, MessageEvent):
        return f"m{e.seq}@{e.cursor}"
    if isinstance(e, DeltaEvent):
        return f"d@{e.cursor}"
    if isinstance(e, RetractEvent):
        return f"r@{e.cursor}"
    assert isinstance(e, PendingEvent)
    return f"p:{e.tool_call_id}"


def test_deltas_sort_between_the_message_they_follow_and_the_next() -> None:
    out = merge(
        Cursor(),
        [msg(1, "user"), msg(2), msg(3, "user"), msg(4)],
        [text(10, 1), text(11, 1), text(12, 3)],
        limit=100,
    )
    assert [label(e) for e in out.events] == [
        "m1@1", "d@1.10", "d@1.11", "m2@2.11", "m3@3.11", "d@3.12", "m4@4.12",
    ]  # fmt: skip
    assert out.complete and out.cursor == Cursor(4, 12)


def test_cursors_start_from_the_readers() -> None:
    out = merge(Cursor(2, 11), [msg(3, "user")], [text(12, 3)], limit=100)
    assert [label(e) for e in out.events] == ["m3@3.11", "d@3.12"]
    assert merge(Cursor(5, 7), [], [], limit=100).cursor == Cursor(5, 7)


def test_deltas_before_the_readers_last_message_are_passed_over() -> None:
    """A reader at message 3 saw the turns before it: old deltas only move its cursor."""
    out = merge(Cursor(3), [msg(4)], [text(10, 1), text(11, 2), text(12, 3)], limit=3)
    assert [label(e) for e in out.events] == ["d@3.12"]
    assert not out.complete and out.cursor == Cursor(3, 12)
    assert merge(Cursor(3), [], [text(10, 1), text(11, 2)], limit=2).cursor == Cursor(3, 11)


def test_a_full_message_batch_holds_back_the_deltas_after_its_last_message() -> None:
    out = merge(Cursor(), [msg(1, "user"), msg(2)], [text(10, 1), text(11, 2), text(12, 3)],
                limit=2)  # fmt: skip
    assert [label(e) for e in out.events] == ["m1@1", "d@1.10", "m2@2.10"]
    assert not out.complete and out.cursor == Cursor(2, 10)
    rest = merge(out.cursor, [msg(3, "user")], [text(11, 2), text(12, 3)], limit=2)
    assert [label(e) for e in rest.events] == ["d@2.11", "m3@3.11", "d@3.12"]


def test_a_full_delta_batch_holds_back_the_messages_after_its_last_delta() -> None:
    out = merge(Cursor(), [msg(1, "user"), msg(2)], [text(10, 1), text(11, 1)], limit=2)
    assert [label(e) for e in out.events] == ["m1@1", "d@1.10", "d@1.11"]
    assert not out.complete and out.cursor == Cursor(1, 11)


def test_tool_pieces_retractions_and_open_waits() -> None:
    tool = Logged(id=5, after_seq=1, run_seq=1, turn=0, attempt=1, part=0, kind="tool_call",
                       text='{"q"', tool_index=0, tool_call_id="c1", name="ask")  # fmt: skip
    cut = Logged(id=6, after_seq=1, run_seq=1, turn=0, attempt=2, part=0, kind="retract",
                      tool_index=0, tool_call_id="c1")  # fmt: skip
    wait = PendingEvent(root_session_id="s", tool_call_id="c2", kind="client", tool="ask",
                        arguments={"q": 1}, output_schema=None, deadline=NOW)  # fmt: skip
    calls = [ToolCall(id="c2", name="ask", arguments="{}")]
    out = merge(Cursor(), [msg(1, "user"), msg(2, calls=calls)], [tool, cut], limit=10,
                pending={"c2": wait})  # fmt: skip
    assert [label(e) for e in out.events] == ["m1@1", "d@1.5", "r@1.6", "m2@2.6", "p:c2"]
    piece = out.events[1]
    assert isinstance(piece, DeltaEvent) and piece.text == "" and piece.tool_call is not None
    assert (piece.tool_call.index, piece.tool_call.id, piece.tool_call.arguments) == (
        0, "c1", '{"q"',
    )  # fmt: skip
    retract = out.events[2]
    assert isinstance(retract, RetractEvent) and retract.tool_index == 0


def test_a_sub_agents_wait_mark_is_its_wait_alone_and_moves_the_cursor() -> None:
    mark = Logged(id=7, after_seq=2, run_seq=1, turn=0, attempt=0, part=0, kind="progress",
                  tool_call_id="leaf-c", name="confirm")  # fmt: skip
    closed = Logged(id=8, after_seq=2, run_seq=1, turn=0, attempt=0, part=0, kind="progress",
                    tool_call_id="gone", name="confirm")  # fmt: skip
    wait = PendingEvent(root_session_id="s", tool_call_id="leaf-c", kind="client",
                        tool="confirm", arguments={}, output_schema=None, deadline=NOW,
                        owner_session_id="s::sub::c1")  # fmt: skip
    out = merge(Cursor(), [msg(1, "user"), msg(2)], [mark, closed], limit=10,
                pending={"leaf-c": wait})  # fmt: skip
    assert [label(e) for e in out.events] == ["m1@1", "m2@2", "p:leaf-c"]
    assert out.cursor == Cursor(2, 8)  # the closed wait's mark: passed over, shown as nothing


@pytest.mark.parametrize(
    ("text", "cursor"), [("0", Cursor(0, 0)), ("7", Cursor(7, 0)), ("7.42", Cursor(7, 42))]
)
def test_cursor_strings_round_trip(text: str, cursor: Cursor) -> None:
    assert Cursor.parse(text) == cursor
    assert Cursor.parse(str(cursor)) == cursor
    assert str(Cursor(3, 0)) == "3" and str(Cursor(3, 9)) == "3.9"


@pytest.mark.parametrize("bad", ["", "x", "-1", "1.-2", "1.", ".5", "1.2.3", "+3", "1e3",
                                 "9" * 19])  # fmt: skip
def test_bogus_cursors_are_refused(bad: str) -> None:
    with pytest.raises(InvalidRequestError):
        Cursor.parse(bad)
