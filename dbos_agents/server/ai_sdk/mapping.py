"""One run's events as UI message stream parts: the run is one assistant ``UIMessage``,
each model turn one step. What the page holds is ``live.reducer``'s; this module only
encodes its operations:

- a step: ``start-step`` / ``finish-step``; its text: ``text-start``, ``text-delta``,
  ``text-end`` (id ``<messageId>-<n>``);
- a tool call's input as it is written: ``tool-input-start`` / ``tool-input-delta``; its
  whole input: ``tool-input-available`` (``providerExecuted`` unless the call waits on the
  page, so ``onToolCall`` fires for client tools only); a call waiting on a human:
  ``tool-approval-request`` (``approvalId`` is the wait's id);
- a running tool's progress note: ``data-progress`` (id ``<toolCallId>-<part>``, data
  ``{toolCallId, tool, note, fraction}``);
- tool results: ``tool-output-available``, ``tool-output-error``, ``tool-output-denied``;
- a retraction: ``reset-step``, then what is still shown of the step sent again;
- the run's end: ``finish`` (a failed run: an ``error`` part first); the run waiting on
  the page (a client tool, an approval): ``finish`` with ``tool-calls``. State versions
  and committed messages are not parts of this protocol.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import JsonValue

from ...events import ProgressEvent, SessionEvent, StatusEvent
from ...live import operations as op
from ...live.reducer import RunReducer
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

_REASONS: dict[op.EndReason, FinishReason] = {
    "completed": "stop",
    "max_turns": "length",
    "budget_exhausted": "length",
    "failed": "error",
    "waiting": "tool-calls",
}


def message_id(chat_id: str, run_seq: int) -> str:
    """The assistant message of a run: stable, so a resumed stream replaces the partial
    message the page holds instead of adding a second one."""
    return f"{chat_id}-run-{run_seq}"


class RunParts:
    """Feed a run's events in log order (``feed``); ``done`` once ``finish`` was sent."""

    def __init__(self, run_seq: int, message_id: str) -> None:
        self.message_id = message_id
        self._run = RunReducer(run_seq)
        self._part_no, self._part_id = 0, ""

    @property
    def done(self) -> bool:
        return self._run.done

    def feed(self, events: Sequence[SessionEvent], status: StatusEvent | None = None) -> list[Part]:
        """The parts for ``events``; ``status`` (a complete read's): a later run started,
        so this one ended even if its own status was not seen."""
        return self._encode(self._run.feed(events, status))

    def _encode(self, ops: list[op.Op]) -> list[Part]:
        out: list[Part] = []
        for o in ops:
            if isinstance(o, op.End):
                if o.error is not None:
                    out.append(ErrorPart(error_text=o.error))
                out.append(Finish(finish_reason=_REASONS.get(o.reason, "other")))
            elif (part := self._part(o)) is not None:
                out.append(part)
        return out

    def _text_id(self, part: int) -> str:
        if part != self._part_no:
            self._part_no, self._part_id = part, f"{self.message_id}-{part}"
        return self._part_id

    def _part(self, o: op.Op) -> Part | None:
        match o:  # the hottest first: a streamed piece
            case op.TextPiece(part=n, text=text):
                return TextDelta(id=self._text_id(n), delta=text)
            case op.ToolArgs(call_id=cid, delta=delta):
                return ToolInputDelta(tool_call_id=cid, input_text_delta=delta)
            case op.StepStart():
                return StartStep()
            case op.StepEnd():
                return FinishStep()
            case op.TextStart(part=n):
                return TextStart(id=self._text_id(n))
            case op.TextEnd(part=n):
                return TextEnd(id=self._text_id(n))
            case op.ToolStart(call_id=cid, name=name):
                return ToolInputStart(tool_call_id=cid, tool_name=name)
            case op.Reset():
                return ResetStep()
            case op.ToolCall(call_id=cid, name=name, input=value, on_client=on_client):
                return ToolInputAvailable(
                    tool_call_id=cid,
                    tool_name=name,
                    input=value,
                    provider_executed=None if on_client else True,
                )
            case op.Approval(approval_id=aid, call_id=cid):
                return ToolApprovalRequest(approval_id=aid, tool_call_id=cid)
            case op.ToolOutput(call_id=cid, output=value):
                return ToolOutputAvailable(tool_call_id=cid, output=value)
            case op.ToolFailed(call_id=cid, text=text):
                return ToolOutputError(tool_call_id=cid, error_text=text)
            case op.ToolDenied(call_id=cid):
                return ToolOutputDenied(tool_call_id=cid)
            case op.Progress(event=e):
                return _progress(e)
        return None  # a committed message, an ask's own mark, a state version (``End``: above)


def _progress(e: ProgressEvent) -> ProgressPart:
    data: dict[str, JsonValue] = {
        "toolCallId": e.tool_call_id,
        "tool": e.tool,
        "note": e.note,
        "fraction": e.fraction,
    }
    return ProgressPart(id=e.note_id, data=data)
