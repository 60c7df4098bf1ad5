"""``TurnStream``: how a turn's pieces are numbered, kept across a cut and withdrawn.

The announcer here only collects rows; what Postgres makes of them is tested in
tests/integration/test_stream_writes.py and tests/crash/test_stream_crash.py."""

from __future__ import annotations

from typing import Any, cast

from dbos_agents.live import deltas
from dbos_agents.live.announce import Announcer
from dbos_agents.loop.respond import TurnStream
from dbos_agents.models import ToolCallDelta
from dbos_agents.outcome import RunSpec


class Collect:
    def __init__(self) -> None:
        self.rows: list[deltas.Delta] = []

    def append(self, session_id: str, rows: list[deltas.Delta]) -> None:
        self.rows.extend(rows)


SPEC = cast(RunSpec, {"session_id": "s", "root_session_id": "s", "run_seq": 1})


def _stream(logged: list[deltas.Delta] | None = None) -> tuple[TurnStream, Collect]:
    c = Collect()
    return TurnStream(SPEC, 3, cast(Announcer, cast(Any, c)), logged or []), c


def test_pieces_are_numbered_per_attempt_and_kept_across_a_cut() -> None:
    s, c = _stream()
    s.next_attempt(continues=True)
    s.add_text("Hello, ")
    s.add_text("wor")
    s.cut()
    s.next_attempt(continues=True)
    assert s.shown == "Hello, wor" and s.text == ""
    s.add_text("ld")
    assert [(r.attempt, r.part, r.text) for r in c.rows] == [
        (1, 0, "Hello, "),
        (1, 1, "wor"),
        (2, 0, "ld"),
    ]
    assert deltas.partial(c.rows).text == "Hello, world"
    assert s.cut_usage.output_tokens == 3  # the cut attempt's 10 characters, estimated


def test_a_model_that_cannot_continue_withdraws_the_text_first() -> None:
    s, c = _stream()
    s.next_attempt(continues=False)
    s.add_text("abc")
    s.cut()
    s.next_attempt(continues=False)
    assert s.shown == ""
    assert [(r.attempt, r.kind, r.tool_index) for r in c.rows][-1] == (2, "retract", None)
    assert deltas.partial(c.rows).text == ""


def test_tool_call_pieces_are_withdrawn_at_the_next_attempt() -> None:
    s, c = _stream()
    s.next_attempt(continues=True)
    s.add_text("Looking. ")
    s.add_tool_call(ToolCallDelta(index=0, id="call_1", name="get_order", arguments='{"or'))
    s.cut()
    s.next_attempt(continues=True)
    retract = c.rows[-1]
    assert (retract.kind, retract.tool_index, retract.tool_call_id) == ("retract", 0, "call_1")
    p = deltas.partial(c.rows)
    assert p.text == "Looking. " and p.open_tools == {}


def test_a_re_executed_turn_resumes_after_the_logged_attempts() -> None:
    logged = [
        deltas.Delta(run_seq=1, turn=3, attempt=1, part=0, kind="text", text="Par"),
        deltas.Delta(
            run_seq=1, turn=3, attempt=1, part=1, kind="tool_call", tool_index=0, text="{"
        ),
    ]
    s, c = _stream(logged)
    s.next_attempt(continues=True)
    assert s.attempt == 2 and s.shown == "Par"
    assert [(r.attempt, r.part, r.kind, r.tool_index) for r in c.rows] == [(2, 0, "retract", 0)]


def test_withdraw_tells_readers_nothing_of_the_turn_is_final() -> None:
    s, c = _stream()
    s.next_attempt(continues=True)
    s.add_text("half")
    s.withdraw()
    assert c.rows[-1].kind == "retract" and c.rows[-1].tool_index is None
    assert c.rows[-1].attempt == 2 and deltas.partial(c.rows).text == ""


def test_a_model_with_only_complete_is_not_streamed() -> None:
    from dbos_agents import ModelResponse
    from dbos_agents.models import ModelRequest, ScriptedModel, StreamingModel

    class CompleteOnly:
        name = "complete-only"

        async def complete(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(text="whole")

    assert not isinstance(CompleteOnly(), StreamingModel)
    assert isinstance(ScriptedModel(["x"]), StreamingModel)
