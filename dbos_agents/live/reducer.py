"""What a reader of one run holds, folded from the live log's events, as semantic
operations: the one place that knows how the vocabulary's events combine (a turn's
pieces, tool pieces held until their id and name are known, retractions, the committed
message, waits, the run's end). Protocol encoders (the AI SDK's UI message stream, AG-UI,
a terminal) turn each operation into their own wire format and keep no state of their own.

The run is one assistant message; each model turn is one step of it. The operations, in
the order a reader shows them:

- ``StepStart`` / ``StepEnd``: a model turn's step (a piece of a new turn, or a message
  after the step's own was committed, starts the next; ``seq``: that message's);
- ``TextStart`` / ``TextPiece`` / ``TextEnd``: a text part of the step (``part``: its
  number within the run); a worker restarted mid-turn continues the same text;
- ``ToolStart`` / ``ToolArgs``: a tool call's input as the model writes it (pieces before
  its id and name are held, then sent with its start);
- ``Reset``: what the step showed is withdrawn (a retraction); what is still shown follows
  again as new parts, so a reader never keeps withdrawn text (``tool``: one call alone was
  withdrawn; ``again``: how many operations show the rest, for a reader that keeps it);
- ``Committed``: the step's assistant message, then a ``ToolCall`` per call it made (its
  whole input; ``on_client``: the call waits on the reader, a client tool) and an
  ``Approval`` per call that waits on a human;
- ``Asked``: a wait no message of the run opened (a durable tool's ask, a sub-agent's
  client tool or approval): an ``Approval`` on the run's call it comes from, or a
  ``ToolStart`` and ``ToolCall`` of its own for a client tool;
- ``ToolOutput`` / ``ToolFailed`` / ``ToolDenied``: a tool's committed result;
- ``Progress`` and ``State``: a running tool's note, a committed state version;
- ``End``: the run ended (its status), a later run started (``superseded``), or the run
  waits on the reader (``waiting``: a client tool or an approval); nothing follows it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from ..events import (
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
from ..ids import asking_call, root_call
from ..outcome import TERMINAL
from .operations import (
    Approval,
    Asked,
    Committed,
    End,
    EndReason,
    Op,
    Progress,
    Reset,
    State,
    StepEnd,
    StepStart,
    TextEnd,
    TextPiece,
    TextStart,
    ToolArgs,
    ToolCall,
    ToolDenied,
    ToolFailed,
    ToolOutput,
    ToolStart,
)


@dataclass
class _Tool:
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""
    started: bool = False


class RunReducer:
    """Feed a run's events in log order (``feed``); ``done`` once ``End`` was emitted."""

    def __init__(self, run_seq: int) -> None:
        self.run = run_seq
        self.done = False
        self._parts = 0
        self._step = False
        self._turn: int | None = None
        self._committed = False
        """The step's assistant message arrived: the next piece starts a new step."""
        self._text = ""
        self._text_part: int | None = None
        self._tools: dict[int, _Tool] = {}
        self._waits = False

    @property
    def text(self) -> str:
        """The step's text as shown now."""
        return self._text

    def feed(self, events: Sequence[SessionEvent], status: StatusEvent | None = None) -> list[Op]:
        """The operations for ``events``; ``status`` (a complete read's): a later run
        started, so this one ended even if its own status was not seen."""
        out: list[Op] = []
        i = 0
        while i < len(events) and not self.done:
            e = events[i]
            i += 1
            if isinstance(e, StatusEvent):
                self._status(e, out)
                continue
            if isinstance(e, PendingEvent):
                before = events[i - 2] if i >= 2 else None
                if isinstance(before, ProgressEvent) and before.run == self.run:
                    self._ask(e, out, asking_call(e.tool_call_id))  # a durable tool's ask
                elif (call := _sub_agents_call(e)) is not None:
                    self._ask(e, out, call)
                continue  # else taken with the message that opened it
            if isinstance(e, StateEvent):
                if e.run == self.run:
                    out.append(State(e))
                continue
            run = e.run_seq if isinstance(e, MessageEvent) else e.run
            if run < self.run:
                continue
            if run > self.run:
                self._end(out, "superseded")
                break
            if isinstance(e, DeltaEvent):
                self._delta(e, out)
            elif isinstance(e, RetractEvent):
                self._retract(e, out)
            elif isinstance(e, ProgressEvent):
                out.append(Progress(e))
            else:
                waits: list[PendingEvent] = []
                while i < len(events) and isinstance(events[i], PendingEvent):
                    w = events[i]
                    assert isinstance(w, PendingEvent)
                    waits.append(w)
                    i += 1
                self._message(e, waits, out)
                for w in waits:  # a sub-agent's, right after the message: not its call's
                    if (call := _sub_agents_call(w)) is not None:
                        self._ask(w, out, call)
        if not self.done and self._waits:
            self._end(out, "waiting")
        if not self.done and status is not None and status.run_seq > self.run:
            self._end(out, "superseded")
        return out

    def end(self, reason: EndReason, error: str | None = None) -> list[Op]:
        """End the run from outside (the reader stops); nothing if it has ended."""
        out: list[Op] = []
        if not self.done:
            self._end(out, reason, error)
        return out

    # --- steps and text ---------------------------------------------------------------

    def _close_text(self, out: list[Op]) -> None:
        if self._text_part is not None:
            out.append(TextEnd(self._text_part))
            self._text_part = None

    def _new_step(self, turn: int | None, out: list[Op], seq: int | None = None) -> None:
        self._close_text(out)
        if self._step:
            out.append(StepEnd())
        out.append(StepStart(turn, seq))
        self._step, self._turn, self._committed = True, turn, False
        self._text, self._tools = "", {}

    def _say(self, text: str, out: list[Op]) -> None:
        if self._text_part is None:
            self._parts += 1
            self._text_part = self._parts
            out.append(TextStart(self._text_part))
        out.append(TextPiece(self._text_part, text))
        self._text += text

    def _show_again(self, out: list[Op], reset: Reset) -> None:
        """``reset``, then what is still shown of the step (counted in ``reset.again``)."""
        self._text_part = None
        out.append(reset)
        before = len(out)
        text, self._text = self._text, ""
        if text:
            self._say(text, out)
        for t in self._tools.values():
            if t.started and t.call_id is not None and t.name is not None:
                out.append(ToolStart(t.call_id, t.name))
                if t.arguments:
                    out.append(ToolArgs(t.call_id, t.arguments))
        reset.again = len(out) - before

    def _end(
        self,
        out: list[Op],
        reason: EndReason,
        error: str | None = None,
        status: StatusEvent | None = None,
    ) -> None:
        self._close_text(out)
        if self._step:
            out.append(StepEnd())
            self._step = False
        out.append(End(reason, error, status))
        self.done = True

    # --- events -------------------------------------------------------------------------

    def _status(self, e: StatusEvent, out: list[Op]) -> None:
        if e.run_seq > self.run:
            self._end(out, "superseded")
        elif e.run_seq == self.run and e.status in TERMINAL:
            error = (e.error or "the run failed") if e.status == "failed" else None
            self._end(out, _REASONS.get(e.status, "other"), error, e)

    def _delta(self, e: DeltaEvent, out: list[Op]) -> None:
        if not self._step or self._committed or e.turn != self._turn:
            self._new_step(e.turn, out)
        if e.tool_call is not None:
            self._piece(e.tool_call, out)
        elif e.text:
            self._say(e.text, out)

    def _piece(self, p: ToolCallPiece, out: list[Op]) -> None:
        t = self._tools.setdefault(p.index, _Tool())
        t.call_id = p.id or t.call_id
        t.name = p.name or t.name
        t.arguments += p.arguments
        if t.started:
            if p.arguments and t.call_id is not None:
                out.append(ToolArgs(t.call_id, p.arguments))
        elif t.call_id is not None and t.name is not None:
            # Pieces before the id and name were held back; they go out with the start.
            t.started = True
            out.append(ToolStart(t.call_id, t.name))
            if t.arguments:
                out.append(ToolArgs(t.call_id, t.arguments))

    def _retract(self, e: RetractEvent, out: list[Op]) -> None:
        if not self._step or self._committed or e.turn != self._turn:
            return  # nothing of that turn is shown in this step
        if e.tool_index is None:
            self._text, self._tools = "", {}
            self._show_again(out, Reset())
            return
        t = self._tools.pop(e.tool_index, None)
        shown = t.call_id if t is not None and t.started else None
        self._show_again(out, Reset(tool=True, call_id=shown))

    def _message(self, m: MessageEvent, waits: list[PendingEvent], out: list[Op]) -> None:
        if m.role == "tool":
            self._result(m, out)
            return
        if m.role != "assistant":
            return  # the user's message: the reader has it
        if not self._step or self._committed:
            self._new_step(None, out, m.seq)
        content = m.content or ""
        if not content.startswith(self._text):
            # Shown text the message does not start with (never expected: the deltas
            # concatenate to it): show the message instead.
            self._text, self._tools = "", {}
            self._show_again(out, Reset())
        if len(content) > len(self._text):
            self._say(content[len(self._text) :], out)
        self._close_text(out)
        out.append(Committed(m, tuple(waits)))
        started = {t.call_id for t in self._tools.values() if t.started}
        by_call = {w.tool_call_id: w for w in waits}
        for call in m.tool_calls:
            if call.id not in started:
                out.append(ToolStart(call.id, call.name))
            w = by_call.get(call.id)
            on_client = w is not None and w.kind == "client"
            value = as_json(call.arguments or "{}")
            out.append(ToolCall(call.id, call.name, value, on_client, call.arguments))
            if w is not None and w.kind == "approval":
                out.append(Approval(call.id, call.id))
        self._waits = self._waits or bool(waits)
        self._committed = True

    def _ask(self, w: PendingEvent, out: list[Op], call_id: str) -> None:
        if not self._step:
            self._new_step(None, out)
        self._close_text(out)
        out.append(Asked(w, call_id))
        if w.kind == "approval":
            out.append(Approval(w.tool_call_id, call_id))
        else:
            out.append(ToolStart(w.tool_call_id, w.tool))
            text = json.dumps(w.arguments)
            out.append(ToolCall(w.tool_call_id, w.tool, w.arguments, True, text))
        self._waits = True

    def _result(self, m: MessageEvent, out: list[Op]) -> None:
        call_id = m.tool_call_id
        if call_id is None:
            return
        value = as_json(m.content or "")
        error = value.get("error") if isinstance(value, dict) and len(value) == 1 else None
        if isinstance(error, dict) and isinstance(error.get("kind"), str):
            kind = str(error["kind"])
            if kind == "approval-denied":
                out.append(ToolDenied(call_id, m))
            else:
                text = error.get("message")
                said = text if isinstance(text, str) else kind
                out.append(ToolFailed(call_id, kind, said, m))
            return
        out.append(ToolOutput(call_id, value, m))


_REASONS: dict[str, EndReason] = {
    "completed": "completed",
    "max_turns": "max_turns",
    "budget_exhausted": "budget_exhausted",
    "interrupted": "interrupted",
    "failed": "failed",
}


def _sub_agents_call(w: PendingEvent) -> str | None:
    """The root's sub-agent call under which ``w`` waits, if a sub-agent opened it."""
    return None if w.owner_session_id is None else root_call(w.owner_session_id)


def as_json(text: str) -> JsonValue:
    """A tool's arguments or result as JSON, or the text itself when it is not JSON."""
    try:
        value: JsonValue = json.loads(text)
    except ValueError:
        return text
    return value
