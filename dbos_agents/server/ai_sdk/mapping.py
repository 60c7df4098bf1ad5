"""One run's events as UI message stream parts: the run is one assistant ``UIMessage``,
each model turn one step.

- text deltas: ``text-delta`` of one text part per step (a worker restarted mid-turn
  continues the same text: its deltas extend it, nothing is sent twice);
- tool-call pieces: ``tool-input-start`` / ``tool-input-delta``; the turn's message:
  ``tool-input-available`` (``providerExecuted`` unless the call waits on the page, so
  ``onToolCall`` fires for client tools only) and, for a call waiting on a human,
  ``tool-approval-request`` (``approvalId`` is the tool call id);
- a wait no message opened (a durable tool's ask, a sub-agent's client tool or approval):
  a client tool gets a part of its own (the wait's id), an approval is requested on the
  part of the run's call it comes from (the durable tool's, the sub-agent call's);
- a running tool's progress note: ``data-progress`` (id ``<toolCallId>-<part>``, data
  ``{toolCallId, tool, note, fraction}``), after the message that made the call;
- tool results: ``tool-output-available``, ``tool-output-error``, ``tool-output-denied``;
- a retraction (pieces withdrawn after a crash or a restarted reply): ``reset-step``, then
  what is still shown of the step sent again, so the page never keeps withdrawn text;
- the run's end: ``finish`` (a failed run: an ``error`` part first); the run waiting on
  the page (a client tool, an approval): ``finish`` with ``tool-calls``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from ...events import (
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
from ...ids import asking_call, root_call
from ...outcome import TERMINAL
from .parts import (
    ErrorPart,
    Finish,
    FinishReason,
    FinishStep,
    Part,
    ProgressPart,
    ResetStep,
    StartStep,
    TextDelta,
    TextEnd,
    TextStart,
    ToolApprovalRequest,
    ToolInputAvailable,
    ToolInputDelta,
    ToolInputStart,
    ToolOutputAvailable,
    ToolOutputDenied,
    ToolOutputError,
)

_REASONS: dict[str, FinishReason] = {
    "completed": "stop",
    "max_turns": "length",
    "budget_exhausted": "length",
    "interrupted": "other",
    "failed": "error",
}


def message_id(chat_id: str, run_seq: int) -> str:
    """The assistant message of a run: stable, so a resumed stream replaces the partial
    message the page holds instead of adding a second one."""
    return f"{chat_id}-run-{run_seq}"


@dataclass
class _ToolShown:
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""
    started: bool = False


class RunParts:
    """Feed a run's events in log order (``feed``); ``done`` once ``finish`` was sent."""

    def __init__(self, run_seq: int, message_id: str) -> None:
        self.run = run_seq
        self.message_id = message_id
        self.done = False
        self._n = 0
        self._step = False
        self._turn: int | None = None
        self._committed = False
        """The step's assistant message arrived: the next piece starts a new step."""
        self._text = ""
        self._text_id: str | None = None
        self._tools: dict[int, _ToolShown] = {}
        self._waits = False

    def feed(self, events: Sequence[SessionEvent], status: StatusEvent | None = None) -> list[Part]:
        """The parts for ``events``; ``status`` (a complete read's): a later run started,
        so this one ended even if its own status was not seen."""
        out: list[Part] = []
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
                continue  # not a part of the AI SDK's UI message stream
            run = e.run_seq if isinstance(e, MessageEvent) else e.run
            if run < self.run:
                continue
            if run > self.run:
                self._end(out, "other")
                break
            if isinstance(e, DeltaEvent):
                self._delta(e, out)
            elif isinstance(e, RetractEvent):
                self._retract(e, out)
            elif isinstance(e, ProgressEvent):
                out.append(_progress(e))
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
            self._end(out, "tool-calls")
        if not self.done and status is not None and status.run_seq > self.run:
            self._end(out, "other")
        return out

    def end(self, reason: FinishReason, error: str | None = None) -> list[Part]:
        out: list[Part] = []
        if not self.done:
            self._end(out, reason, error)
        return out

    # --- steps and text ---------------------------------------------------------------

    def _next_id(self) -> str:
        self._n += 1
        return f"{self.message_id}-{self._n}"

    def _close_text(self, out: list[Part]) -> None:
        if self._text_id is not None:
            out.append(TextEnd(id=self._text_id))
            self._text_id = None

    def _new_step(self, turn: int | None, out: list[Part]) -> None:
        self._close_text(out)
        if self._step:
            out.append(FinishStep())
        out.append(StartStep())
        self._step, self._turn, self._committed = True, turn, False
        self._text, self._tools = "", {}

    def _say(self, text: str, out: list[Part]) -> None:
        if self._text_id is None:
            self._text_id = self._next_id()
            out.append(TextStart(id=self._text_id))
        out.append(TextDelta(id=self._text_id, delta=text))
        self._text += text

    def _show_again(self, out: list[Part]) -> None:
        """``reset-step``, then what is still shown of the step."""
        self._text_id = None
        out.append(ResetStep())
        text, self._text = self._text, ""
        if text:
            self._say(text, out)
        for t in self._tools.values():
            if t.started and t.call_id is not None and t.name is not None:
                out.append(ToolInputStart(tool_call_id=t.call_id, tool_name=t.name))
                if t.arguments:
                    out.append(ToolInputDelta(tool_call_id=t.call_id, input_text_delta=t.arguments))

    def _end(self, out: list[Part], reason: FinishReason, error: str | None = None) -> None:
        self._close_text(out)
        if self._step:
            out.append(FinishStep())
            self._step = False
        if error is not None:
            out.append(ErrorPart(error_text=error))
        out.append(Finish(finish_reason=reason))
        self.done = True

    # --- events -------------------------------------------------------------------------

    def _status(self, e: StatusEvent, out: list[Part]) -> None:
        if e.run_seq > self.run:
            self._end(out, "other")
        elif e.run_seq == self.run and e.status in TERMINAL:
            error = (e.error or "the run failed") if e.status == "failed" else None
            self._end(out, _REASONS.get(e.status, "other"), error)

    def _delta(self, e: DeltaEvent, out: list[Part]) -> None:
        if not self._step or self._committed or e.turn != self._turn:
            self._new_step(e.turn, out)
        if e.tool_call is not None:
            self._piece(e.tool_call, out)
        elif e.text:
            self._say(e.text, out)

    def _piece(self, p: ToolCallPiece, out: list[Part]) -> None:
        t = self._tools.setdefault(p.index, _ToolShown())
        t.call_id = p.id or t.call_id
        t.name = p.name or t.name
        t.arguments += p.arguments
        if t.started:
            if p.arguments and t.call_id is not None:
                out.append(ToolInputDelta(tool_call_id=t.call_id, input_text_delta=p.arguments))
        elif t.call_id is not None and t.name is not None:
            # Pieces before the id and name were held back; they go out with the start.
            t.started = True
            out.append(ToolInputStart(tool_call_id=t.call_id, tool_name=t.name))
            if t.arguments:
                out.append(ToolInputDelta(tool_call_id=t.call_id, input_text_delta=t.arguments))

    def _retract(self, e: RetractEvent, out: list[Part]) -> None:
        if not self._step or self._committed or e.turn != self._turn:
            return  # nothing of that turn is shown in this step
        if e.tool_index is None:
            self._text, self._tools = "", {}
        else:
            self._tools.pop(e.tool_index, None)
        self._show_again(out)

    def _message(self, m: MessageEvent, waits: list[PendingEvent], out: list[Part]) -> None:
        if m.role == "tool":
            self._result(m, out)
            return
        if m.role != "assistant":
            return  # the user's message: the page has it
        if not self._step or self._committed:
            self._new_step(None, out)
        content = m.content or ""
        if not content.startswith(self._text):
            # Shown text the message does not start with (never expected: the deltas
            # concatenate to it): show the message instead.
            self._text, self._tools = "", {}
            self._show_again(out)
        if len(content) > len(self._text):
            self._say(content[len(self._text) :], out)
        self._close_text(out)
        started = {t.call_id for t in self._tools.values() if t.started}
        by_call = {w.tool_call_id: w for w in waits}
        for call in m.tool_calls:
            if call.id not in started:
                out.append(ToolInputStart(tool_call_id=call.id, tool_name=call.name))
            w = by_call.get(call.id)
            out.append(
                ToolInputAvailable(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    input=_json(call.arguments or "{}"),
                    provider_executed=None if w is not None and w.kind == "client" else True,
                )
            )
            if w is not None and w.kind == "approval":
                out.append(ToolApprovalRequest(approval_id=call.id, tool_call_id=call.id))
        self._waits = self._waits or bool(waits)
        self._committed = True

    def _ask(self, w: PendingEvent, out: list[Part], call_id: str) -> None:
        """A wait no message of the run opened (a durable tool's ask mid-call, a sub-agent's
        wait): an approval is requested on the part of ``call_id``, the run's call it
        comes from (its approval id: the wait's); a client tool gets a part of its own
        (the wait's id) for the page to run. Answered like any other."""
        if not self._step:
            self._new_step(None, out)
        self._close_text(out)
        if w.kind == "approval":
            out.append(ToolApprovalRequest(approval_id=w.tool_call_id, tool_call_id=call_id))
        else:
            out.append(ToolInputStart(tool_call_id=w.tool_call_id, tool_name=w.tool))
            out.append(
                ToolInputAvailable(tool_call_id=w.tool_call_id, tool_name=w.tool, input=w.arguments)
            )
        self._waits = True

    def _result(self, m: MessageEvent, out: list[Part]) -> None:
        call_id = m.tool_call_id
        if call_id is None:
            return
        value = _json(m.content or "")
        error = value.get("error") if isinstance(value, dict) and len(value) == 1 else None
        if isinstance(error, dict) and isinstance(error.get("kind"), str):
            if error["kind"] == "approval-denied":
                out.append(ToolOutputDenied(tool_call_id=call_id))
            else:
                text = error.get("message")
                out.append(
                    ToolOutputError(
                        tool_call_id=call_id,
                        error_text=text if isinstance(text, str) else str(error["kind"]),
                    )
                )
            return
        out.append(ToolOutputAvailable(tool_call_id=call_id, output=value))


def _sub_agents_call(w: PendingEvent) -> str | None:
    """The root's sub-agent call under which ``w`` waits, if a sub-agent opened it."""
    return None if w.owner_session_id is None else root_call(w.owner_session_id)


def _progress(e: ProgressEvent) -> ProgressPart:
    data: dict[str, JsonValue] = {
        "toolCallId": e.tool_call_id,
        "tool": e.tool,
        "note": e.note,
        "fraction": e.fraction,
    }
    return ProgressPart(id=e.note_id, data=data)


def _json(text: str) -> JsonValue:
    """A tool's arguments or result as JSON, or the text itself when it is not JSON."""
    try:
        value: JsonValue = json.loads(text)
    except ValueError:
        return text
    return value
