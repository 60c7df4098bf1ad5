"""``live.reducer.RunReducer``: what a reader of one run holds, over the event sequences
the crash and stream tests produce (a continued reply, a retracted one, tool pieces before
their id, waits on the page and on a human, a sub-agent's wait, a durable tool's notes and
ask, a run that ends, fails or is superseded). ``held`` replays the operations the way
every encoder does; the shown text must be the committed message, nothing twice."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from dbos_agents.events import (
    Cursor,
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
from dbos_agents.ids import ask_id, child_session_id
from dbos_agents.live import operations as op
from dbos_agents.live.deltas import Logged
from dbos_agents.live.reducer import RunReducer
from dbos_agents.live.vocabulary import merge
from dbos_agents.messages import ToolCall
from dbos_agents.records import HistoryEntry

from ..reducer_view import held

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def delta(text: str = "", turn: int = 1, attempt: int = 1, run: int = 1, **tool: Any) -> DeltaEvent:
    piece = ToolCallPiece(**tool) if tool else None
    return DeltaEvent(run=run, turn=turn, attempt=attempt, text=text, tool_call=piece, cursor="1")


def message(
    role: str, content: str | None = None, seq: int = 2, run: int = 1, **kw: Any
) -> MessageEvent:
    return MessageEvent(
        role=role,  # type: ignore[arg-type]
        content=content,
        seq=seq,
        run_seq=run,
        created_at=NOW,
        cursor=str(seq),
        **kw,
    )


def wait(call_id: str, kind: str = "client", tool: str = "confirm", **kw: Any) -> PendingEvent:
    return PendingEvent(
        root_session_id="s",
        tool_call_id=call_id,
        kind=kind,  # type: ignore[arg-type]
        tool=tool,
        arguments={"q": 1},
        output_schema=None,
        deadline=NOW,
        **kw,
    )


def status(st: str, run: int = 1, error: str | None = None) -> StatusEvent:
    return StatusEvent(status=st, run_seq=run, final_output=None, error=error)  # type: ignore[arg-type]


def note(call_id: str, part: int, text: str = "working") -> ProgressEvent:
    return ProgressEvent(
        run=1, turn=1, tool_call_id=call_id, tool="research", part=part, note=text, cursor="3.1"
    )


def run(events: list[SessionEvent], run_seq: int = 1) -> tuple[list[op.Op], RunReducer]:
    r = RunReducer(run_seq)
    return r.feed(events), r


def test_a_reply_continued_after_a_crash_shows_once_and_equals_the_message() -> None:
    ops, r = run(
        [
            message("user", "hi", seq=1),
            delta("Hel"),
            delta("lo, wor", attempt=2),  # the next attempt continues from the partial
            delta("ld", attempt=2),
            message("assistant", "Hello, world"),
            status("completed"),
        ]
    )
    h = held(ops)
    assert h.steps == ["Hello, world"]
    assert [o for o in ops if isinstance(o, op.TextStart)] == [op.TextStart(1)], "one text part"
    assert h.end == op.End("completed", None, status("completed")) and r.done


def test_a_retracted_reply_is_withdrawn_and_the_new_attempt_alone_is_shown() -> None:
    ops, _ = run(
        [
            delta("abandoned "),
            delta("reply"),
            RetractEvent(run=1, turn=1, attempt=1, cursor="1.3"),
            delta("Fresh", attempt=2),
            message("assistant", "Fresh"),
        ]
    )
    assert op.Reset() in ops
    assert held(ops).steps == ["Fresh"]


def test_tool_pieces_wait_for_their_id_and_name_then_go_out_with_the_start() -> None:
    ops, _ = run(
        [
            delta(index=0, arguments='{"q":'),
            delta(index=0, id="c0", name="search", arguments='"x"'),
            delta(index=0, arguments="}"),
        ]
    )
    tool_ops = [o for o in ops if isinstance(o, op.ToolStart | op.ToolArgs)]
    assert tool_ops == [
        op.ToolStart("c0", "search"),
        op.ToolArgs("c0", '{"q":"x"'),
        op.ToolArgs("c0", "}"),
    ]


def test_a_withdrawn_tool_call_leaves_the_rest_and_its_retry_is_started_once() -> None:
    call = ToolCall(id="c0b", name="search", arguments='{"q":"y"}')
    ops, _ = run(
        [
            delta("Looking. "),
            delta(index=0, id="c0", name="search", arguments='{"q":'),
            RetractEvent(run=1, turn=1, attempt=1, tool_index=0, tool_call_id="c0", cursor="1.3"),
            delta(index=0, id="c0b", name="search", arguments='{"q":"y"}', attempt=2),
            message("assistant", "Looking. ", tool_calls=[call]),
        ]
    )
    h = held(ops)
    assert h.steps == ["Looking. "] and h.tools == {"c0b": '{"q":"y"}'}
    assert h.calls["c0b"].input == {"q": "y"} and not h.calls["c0b"].on_client


def test_shown_text_the_message_does_not_start_with_is_replaced_by_the_message() -> None:
    ops, _ = run([delta("wrong"), message("assistant", "Right")])
    assert held(ops).steps == ["Right"] and op.Reset() in ops


def test_a_client_tool_wait_is_run_on_the_reader_and_ends_the_run_waiting() -> None:
    call = ToolCall(id="c1", name="confirm", arguments='{"q":1}')
    ops, r = run([message("assistant", None, tool_calls=[call]), wait("c1")])
    h = held(ops)
    assert h.calls["c1"].on_client and h.approvals == []
    assert h.end == op.End("waiting") and r.done


def test_an_approval_is_requested_on_its_call() -> None:
    calls = [ToolCall(id="a", name="close"), ToolCall(id="b", name="lookup")]
    ops, _ = run([message("assistant", "", tool_calls=calls), wait("a", kind="approval")])
    h = held(ops)
    assert h.approvals == [op.Approval("a", "a")]
    assert not h.calls["a"].on_client and not h.calls["b"].on_client
    assert h.end == op.End("waiting")


def test_a_sub_agents_wait_is_asked_on_the_root_call_it_runs_under() -> None:
    call = ToolCall(id="sub1", name="helper", arguments='{"message":"go"}')
    child = child_session_id("s", "sub1")
    approval = wait("deep", kind="approval", owner_session_id=child)
    client = wait("deep2", kind="client", tool="pick", owner_session_id=child)
    ops, _ = run([message("assistant", "", tool_calls=[call]), approval, client])
    h = held(ops)
    assert h.approvals == [op.Approval("deep", "sub1")]
    assert h.calls["deep2"].on_client and h.calls["deep2"].name == "pick"
    assert [o.call_id for o in ops if isinstance(o, op.Asked)] == ["sub1", "sub1"]
    assert h.end == op.End("waiting")


def test_a_durable_tools_notes_and_its_ask_mid_call() -> None:
    call = ToolCall(id="d1", name="research", arguments="{}")
    ops, _ = run(
        [
            message("assistant", "", tool_calls=[call]),
            note("d1", 1, "found 3 pages"),
            note("d1", 2, "summarize?"),
            wait(ask_id("d1", 2), kind="approval"),
        ]
    )
    h = held(ops)
    assert h.notes == ["d1-1", "d1-2"]
    assert h.approvals == [op.Approval(ask_id("d1", 2), "d1")]
    assert h.end == op.End("waiting")


def test_results_state_and_the_next_turn_are_steps_of_one_run() -> None:
    call = ToolCall(id="t", name="lookup", arguments="{}")
    state = StateEvent(version=2, run=1, turn=1, tool_call_id="t", state={"n": 1})
    ops, _ = run(
        [
            delta(index=0, id="t", name="lookup", arguments="{}"),
            message("assistant", "", tool_calls=[call]),
            message("tool", '{"ok": true}', seq=3, tool_call_id="t", name="lookup"),
            state,
            message("tool", '{"error": {"kind": "approval-denied"}}', seq=4, tool_call_id="u"),
            message("tool", '{"error": {"kind": "x", "message": "boom"}}', seq=5, tool_call_id="v"),
            delta("Done", turn=2),
            message("assistant", "Done", seq=6),
            status("completed"),
        ]
    )
    h = held(ops)
    assert h.steps == ["", "Done"]
    r0, r1, r2 = h.results
    assert isinstance(r0, op.ToolOutput) and (r0.call_id, r0.output) == ("t", {"ok": True})
    assert isinstance(r1, op.ToolDenied) and r1.call_id == "u"
    assert isinstance(r2, op.ToolFailed) and (r2.call_id, r2.kind, r2.text) == ("v", "x", "boom")
    assert [r.message.seq for r in (r0, r1, r2)] == [3, 4, 5]
    assert op.State(state) in ops
    assert [type(o) for o in ops].count(op.StepEnd) == 2


@pytest.mark.parametrize(
    ("events", "end"),
    [
        ([delta("a"), status("failed", error="boom")], op.End("failed", "boom")),
        ([delta("a"), status("interrupted")], op.End("interrupted")),
        ([delta("a"), delta("b", run=2)], op.End("superseded")),
        ([delta("a"), status("completed", run=2)], op.End("superseded")),
    ],
)
def test_the_run_ends_with_its_status_or_when_a_later_run_starts(
    events: list[SessionEvent], end: op.End
) -> None:
    ops, r = run(events)
    got = held(ops).end
    assert got is not None and (got.reason, got.error) == (end.reason, end.error) and r.done


def test_events_of_earlier_runs_are_passed_over() -> None:
    ops, _ = run([delta("old", run=1), message("assistant", "old", run=1), delta("new", run=2)], 2)
    assert held(ops).steps == ["new"]


def test_a_later_runs_status_in_a_complete_read_ends_the_run() -> None:
    r = RunReducer(1)
    assert held(r.feed([delta("a")], status("running", run=2))).end == op.End("superseded")


SEQUENCES: list[list[SessionEvent]] = [
    [delta("Hel"), delta("lo", attempt=2), message("assistant", "Hello"), status("completed")],
    [
        delta("x "),
        delta(index=0, id="c", name="s", arguments="{"),
        RetractEvent(run=1, turn=1, attempt=1, cursor="1.3"),
        delta("y", attempt=2),
        delta(index=0, id="c2", name="s", arguments="{}", attempt=2),
        message("assistant", "y", tool_calls=[ToolCall(id="c2", name="s", arguments="{}")]),
        message("tool", "1", seq=3, tool_call_id="c2"),
        delta("z", turn=2),
        message("assistant", "z", seq=4),
        status("completed"),
    ],
]


@pytest.mark.parametrize("events", SEQUENCES)
def test_how_the_log_is_split_into_reads_changes_nothing(events: list[SessionEvent]) -> None:
    whole, _ = run(events)
    r = RunReducer(1)
    one_by_one = [o for e in events for o in r.feed([e])]
    assert one_by_one == whole


def _row(id: int, attempt: int, kind: str, piece: str = "", **kw: Any) -> Logged:
    return Logged(
        id=id,
        after_seq=1,
        run_seq=1,
        turn=1,
        attempt=attempt,
        part=id,
        kind=kind,  # type: ignore[arg-type]
        text=piece,
        **kw,
    )


def test_the_log_of_a_crashed_and_continued_reply_read_from_any_cursor() -> None:
    """A worker killed mid-reply, the next attempt withdrawing the half-written tool call and
    continuing the text: the rows as the log holds them, merged (``live.vocabulary``) and
    reduced. A reader cut off after any event that resumes from that event's cursor gets
    the rest once, and ends up holding the stored message."""
    call = ToolCall(id="c2", name="search", arguments='{"q":"y"}')
    messages = [
        HistoryEntry(seq=1, run_seq=1, created_at=NOW, role="user", content="hi"),
        HistoryEntry(
            seq=2, run_seq=1, created_at=NOW, role="assistant", content="Hello", tool_calls=[call]
        ),
    ]
    rows = [
        _row(1, 1, "text", "Hel"),
        _row(2, 1, "tool_call", '{"q":', tool_index=0, tool_call_id="c1", name="search"),
        _row(3, 2, "retract", tool_index=0, tool_call_id="c1"),
        _row(4, 2, "text", "lo"),
        _row(5, 2, "tool_call", '{"q":"y"}', tool_index=0, tool_call_id="c2", name="search"),
    ]
    whole = merge(Cursor(), messages, rows, limit=100).events
    h = held(RunReducer(1).feed([*whole, status("completed")]))
    assert h.steps == ["Hello"] and h.tools == {"c2": '{"q":"y"}'} and list(h.calls) == ["c2"]
    assert h.end is not None and h.end.reason == "completed"
    for cut in range(1, len(whole)):
        r = RunReducer(1)
        first = r.feed(whole[:cut])
        c = Cursor.parse(getattr(whole[cut - 1], "cursor", ""))
        after = [m for m in messages if m.seq > c.seq], [d for d in rows if d.id > c.delta]
        resumed = merge(c, *after, limit=100).events
        assert resumed == whole[cut:], "nothing twice"
        assert held([*first, *r.feed([*resumed, status("completed")])]) == h


def test_a_withdrawal_says_what_it_withdrew_and_what_is_shown_again() -> None:
    """A reader that can drop one call alone (AG-UI) keeps the rest and passes over the
    operations that show it again (``again``); a whole withdrawal shows nothing again."""
    ops, _ = run(
        [
            delta("Looking. "),
            delta(index=0, id="c0", name="search", arguments='{"q":'),
            delta(index=1, id="c1", name="fetch", arguments="{}"),
            RetractEvent(run=1, turn=1, attempt=1, tool_index=0, tool_call_id="c0", cursor="1.3"),
        ]
    )
    i, reset = next((i, o) for i, o in enumerate(ops) if isinstance(o, op.Reset))
    assert (reset.tool, reset.call_id, reset.again) == (True, "c0", 4)
    assert ops[i + 1 :] == [
        op.TextStart(2),
        op.TextPiece(2, "Looking. "),
        op.ToolStart("c1", "fetch"),
        op.ToolArgs("c1", "{}"),
    ]
    unseen, _ = run([delta("a"), delta(index=0, arguments="{"), retract_tool(0)])
    assert [o for o in unseen if isinstance(o, op.Reset)] == [op.Reset(True, None, 2)]
    whole, _ = run([delta("a"), RetractEvent(run=1, turn=1, attempt=1, cursor="1.2")])
    assert whole[-1] == op.Reset()


def retract_tool(index: int) -> RetractEvent:
    return RetractEvent(run=1, turn=1, attempt=1, tool_index=index, cursor="1.3")


def test_a_step_a_message_starts_names_it_and_a_call_keeps_its_text() -> None:
    call = ToolCall(id="c9", name="lookup", arguments='{"q": 1}')
    ops, _ = run([message("assistant", "Looking.", seq=7, tool_calls=[call])])
    assert ops[0] == op.StepStart(None, 7)
    (whole,) = [o for o in ops if isinstance(o, op.ToolCall)]
    assert whole.input == {"q": 1} and whole.arguments == '{"q": 1}'
    streamed, _ = run([delta("x", turn=3)])
    assert streamed[0] == op.StepStart(3, None)
