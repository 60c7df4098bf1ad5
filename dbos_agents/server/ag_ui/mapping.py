"""A session's live log (``dbos_agents.events``) as AG-UI events, for one AG-UI run.

- ``DeltaEvent`` text: ``TEXT_MESSAGE_START`` (first piece of the turn), then
  ``TEXT_MESSAGE_CONTENT`` per piece; a tool-call piece: ``TOOL_CALL_START`` (once its id
  and name are known; ``parentMessageId`` is the turn's message), ``TOOL_CALL_ARGS``.
- ``MessageEvent``: an assistant message ends its turn (``TEXT_MESSAGE_END``,
  ``TOOL_CALL_END``; what was not streamed, a model that does not stream, is sent whole
  first); a tool message is ``TOOL_CALL_RESULT`` unless the client has that answer
  already (a frontend tool's result it posted); user and system messages are the
  client's own and are not sent back.
- ``RetractEvent``: the withdrawn message or tool call is ended, dropped from the view and
  a ``MESSAGES_SNAPSHOT`` replaces the client's list; the turn's reply then continues
  under a new message id, so no withdrawn text stays at the client, none twice.
- ``PendingEvent`` (after the read that carried it): a frontend tool ends the run with
  ``RUN_FINISHED`` (success, ``pendingToolCallIds``; the client runs the tool and posts a
  new run with the tool message); an approval ends it with ``RUN_FINISHED`` and an
  ``interrupt`` outcome (answered by the next run's ``resume``). A durable tool's ask (a
  wait no message opened) is sent the same way; a frontend tool it asks for first gets
  its own tool call events, under a message minted for it.
- ``ProgressEvent`` (a running tool's note): ``CUSTOM`` named ``progress``, ``value``
  ``{id, toolCallId, tool, note, fraction}``; ``id`` (``<toolCallId>-<part>``) is stable,
  so a client that keeps notes across runs (a rerun sends the run's notes again) keys them
  by it.
- ``StateEvent`` (a tool committed a change of the session's typed state):
  ``STATE_DELTA`` from what the page holds, or ``STATE_SNAPSHOT`` (``shared_state``).
- ``StatusEvent`` (the run's end): ``completed`` is ``RUN_FINISHED``, ``interrupted`` is
  ``RUN_FINISHED`` with a ``cancelled`` outcome, anything else ``RUN_ERROR`` (code: the
  status in capitals).

Events of runs before the one streamed are skipped (a start cursor may precede them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

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
from ...outcome import TERMINAL
from .shared_state import PageState
from .view import ClientView, run_prefix

__all__ = ["APPROVAL_SCHEMA", "PROGRESS_EVENT", "Mapper"]

PROGRESS_EVENT = "progress"
"""The name of the ``CUSTOM`` event that carries a running tool's note."""

APPROVAL_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}
"""What an approval interrupt's ``resume`` payload is."""


@dataclass
class _Tool:
    id: str | None = None
    name: str | None = None
    buffered: str = ""
    """Arguments received before the call could be started (no id or name yet)."""
    shown: str = ""
    started: bool = False
    ended: bool = False


@dataclass
class _Turn:
    run: int
    turn: int
    restart: int = 0
    text: str = ""
    open: bool = False
    tools: dict[int, _Tool] = field(default_factory=dict)
    fixed_id: str | None = None
    """The id of a message that was not streamed (named by its seq)."""

    @property
    def message_id(self) -> str:
        if self.fixed_id is not None:
            return self.fixed_id
        return f"{run_prefix(self.run)}{self.turn}:{self.restart}"


class Mapper:
    """See the module doc. ``feed`` takes the events of one read and returns what to send;
    ``finished`` is set once the AG-UI run has ended."""

    def __init__(
        self,
        view: ClientView,
        run: int,
        thread_id: str,
        run_id: str,
        state: PageState | None = None,
    ) -> None:
        self.view = view
        self.state = state or PageState(None)  # the page's state (shared_state.py)
        self.run = run
        self.thread_id = thread_id
        self.run_id = run_id
        self.finished = False
        self._turn: _Turn | None = None
        self._restarts: dict[tuple[int, int], int] = {}

    # --- the read ---------------------------------------------------------------------------

    def feed(self, events: list[SessionEvent]) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        pending: list[PendingEvent] = []
        for e in events:
            if self.finished:
                break
            if isinstance(e, PendingEvent):
                pending.append(e)
            elif isinstance(e, DeltaEvent) and e.run >= self.run:
                out += self._delta(e)
            elif isinstance(e, RetractEvent) and e.run >= self.run:
                out += self._retract(e)
            elif isinstance(e, ProgressEvent) and e.run >= self.run:
                out.append(_progress(e))
            elif isinstance(e, MessageEvent) and e.run_seq >= self.run:
                out += self._message(e)
            elif isinstance(e, StateEvent) and (e.run or 0) >= self.run:
                out += [s for s in [self.state.event(e)] if s is not None]
            elif isinstance(e, StatusEvent) and e.run_seq >= self.run and e.status in TERMINAL:
                out += self._status(e)
        if pending and not self.finished:
            out += self._waiting(pending)
        return out

    # --- deltas -----------------------------------------------------------------------------

    def _turn_of(self, run: int, turn: int) -> tuple[_Turn, list[BaseEvent]]:
        t = self._turn
        if t is not None and (t.run, t.turn) == (run, turn):
            return t, []
        out = self._close()
        t = self._turn = _Turn(run, turn, restart=self._restarts.get((run, turn), 0))
        return t, out

    def _delta(self, e: DeltaEvent) -> list[BaseEvent]:
        t, out = self._turn_of(e.run, e.turn)
        if e.tool_call is not None:
            return out + self._piece(t, e.tool_call)
        if e.text:
            out += self._text(t, e.text)
        return out

    def _text(self, t: _Turn, text: str) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if not t.open:
            t.open = True
            out.append(TextMessageStartEvent(message_id=t.message_id, role="assistant"))
        t.text += text
        self.view.add_text(t.message_id, text)
        out.append(TextMessageContentEvent(message_id=t.message_id, delta=text))
        return out

    def _piece(self, t: _Turn, p: ToolCallPiece) -> list[BaseEvent]:
        tool = t.tools.setdefault(p.index, _Tool())
        tool.id = tool.id or p.id
        tool.name = tool.name or p.name
        if tool.ended:
            return []
        out: list[BaseEvent] = []
        if not tool.started:
            tool.buffered += p.arguments
            if tool.id is None or tool.name is None:
                return []
            out += self._start_tool(t, tool.id, tool.name)
            tool.started = True
            args, tool.buffered = tool.buffered, ""
        else:
            args = p.arguments
        if args:
            out += self._args(tool, args)
        return out

    def _start_tool(self, t: _Turn, call_id: str, name: str) -> list[BaseEvent]:
        self.view.add_tool_call(t.message_id, call_id, name)
        return [
            ToolCallStartEvent(
                tool_call_id=call_id, tool_call_name=name, parent_message_id=t.message_id
            )
        ]

    def _args(self, tool: _Tool, args: str) -> list[BaseEvent]:
        assert tool.id is not None
        tool.shown += args
        self.view.add_arguments(tool.id, args)
        return [ToolCallArgsEvent(tool_call_id=tool.id, delta=args)]

    def _close(self) -> list[BaseEvent]:
        """End what the current turn has open (text, tool calls); forget the turn."""
        t, self._turn = self._turn, None
        if t is None:
            return []
        out: list[BaseEvent] = []
        if t.open:
            out.append(TextMessageEndEvent(message_id=t.message_id))
        for tool in t.tools.values():
            if tool.started and not tool.ended and tool.id is not None:
                tool.ended = True
                out.append(ToolCallEndEvent(tool_call_id=tool.id))
        return out

    # --- withdrawals ------------------------------------------------------------------------

    def _retract(self, e: RetractEvent) -> list[BaseEvent]:
        t, out = self._turn_of(e.run, e.turn)
        if e.tool_index is None:
            return out + self._withdraw(t)
        tool = t.tools.pop(e.tool_index, None)
        if tool is None or not tool.started or tool.id is None:
            return out
        if not tool.ended:
            out.append(ToolCallEndEvent(tool_call_id=tool.id))
        self.view.drop_tool_call(tool.id)
        return [*out, self.view.snapshot()]

    def _withdraw(self, t: _Turn) -> list[BaseEvent]:
        """Withdraw everything shown of turn ``t``: end it, drop it from the client's list
        (a snapshot); what follows of the turn gets a new message id."""
        shown = t.open or any(tool.started for tool in t.tools.values())
        out = self._close()
        self._restarts[(t.run, t.turn)] = t.restart + 1
        if not shown:
            return out
        self.view.drop_message(t.message_id)
        return [*out, self.view.snapshot()]

    # --- committed messages -----------------------------------------------------------------

    def _message(self, e: MessageEvent) -> list[BaseEvent]:
        if e.role == "assistant":
            return self._assistant(e)
        if e.role == "tool" and e.tool_call_id is not None:
            if self.view.has_tool_result(e.tool_call_id):
                return []
            message_id = f"{run_prefix(e.run_seq)}tool:{e.tool_call_id}"
            content = e.content or ""
            self.view.add_tool_result(message_id, e.tool_call_id, content)
            return [
                ToolCallResultEvent(
                    message_id=message_id,
                    tool_call_id=e.tool_call_id,
                    content=content,
                    role="tool",
                )
            ]
        return []

    def _assistant(self, e: MessageEvent) -> list[BaseEvent]:
        """The turn's message: send what its pieces did not show, then end it."""
        out: list[BaseEvent] = []
        t = self._turn
        if t is not None and t.run != e.run_seq:
            out += self._close()
            t = None
        content = e.content or ""
        if t is not None and not content.startswith(t.text):
            # What was shown is not the message (not expected): show the message anew.
            out += self._withdraw(t)
            t = self._turn = _Turn(t.run, t.turn, restart=self._restarts[(t.run, t.turn)])
        if t is None:  # not streamed, or its pieces precede the start cursor: sent whole
            t = self._turn = _Turn(e.run_seq, -1, fixed_id=f"{run_prefix(e.run_seq)}m{e.seq}")
        rest = content[len(t.text) :]
        if rest:
            out += self._text(t, rest)
        started = {tool.id: tool for tool in t.tools.values() if tool.started}
        for n, call in enumerate(e.tool_calls):
            tool = started.get(call.id)
            if tool is None:
                tool = t.tools[-1 - n] = _Tool(call.id, call.name, started=True)
                out += self._start_tool(t, call.id, call.name)
            if call.arguments != tool.shown and call.arguments.startswith(tool.shown):
                out += self._args(tool, call.arguments[len(tool.shown) :])
        return out + self._close()

    # --- the run's end ----------------------------------------------------------------------

    def _waiting(self, pending: list[PendingEvent]) -> list[BaseEvent]:
        out = self._close()
        for p in pending:
            if p.kind == "client" and not self.view.has_tool_call(p.tool_call_id):
                out += self._ask(p)
        approvals = [p for p in pending if p.kind == "approval"]
        if approvals:
            interrupts = [
                Interrupt(
                    id=p.tool_call_id,
                    reason="tool_approval",
                    message=f"Approve the call of {p.tool}?",
                    tool_call_id=p.tool_call_id,
                    response_schema=APPROVAL_SCHEMA,
                    expires_at=p.deadline.isoformat(),
                    metadata={"tool": p.tool, "arguments": p.arguments},
                )
                for p in approvals
            ]
            outcome: (
                RunFinishedInterruptOutcome
                | RunFinishedSuccessOutcome
                | RunFinishedCancelledOutcome
            ) = RunFinishedInterruptOutcome(interrupts=interrupts)
        else:
            outcome = RunFinishedSuccessOutcome(
                pending_tool_call_ids=[p.tool_call_id for p in pending]
            )
        self.finished = True
        out.append(RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome))
        return out

    def _ask(self, p: PendingEvent) -> list[BaseEvent]:
        """A frontend tool a durable tool asked for mid-call (no message of the transcript
        holds its call): a tool call of its own, under a message minted for it."""
        message_id = f"{run_prefix(self.run)}ask:{p.tool_call_id}"
        args = json.dumps(p.arguments)
        self.view.add_tool_call(message_id, p.tool_call_id, p.tool)
        self.view.add_arguments(p.tool_call_id, args)
        return [
            ToolCallStartEvent(
                tool_call_id=p.tool_call_id, tool_call_name=p.tool, parent_message_id=message_id
            ),
            ToolCallArgsEvent(tool_call_id=p.tool_call_id, delta=args),
            ToolCallEndEvent(tool_call_id=p.tool_call_id),
        ]

    def _status(self, e: StatusEvent) -> list[BaseEvent]:
        out = self._close()
        self.finished = True
        if e.status == "completed":
            out.append(RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id))
        elif e.status == "interrupted":
            out.append(
                RunFinishedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    outcome=RunFinishedCancelledOutcome(),
                )
            )
        else:
            message = e.error or f"the run ended: {e.status}"
            out.append(RunErrorEvent(message=message, code=e.status.upper()))
        return out

    def error(self, message: str, code: str) -> list[BaseEvent]:
        """End the AG-UI run with ``RUN_ERROR`` (the stream stops before the run ends)."""
        if self.finished:
            return []
        out = self._close()
        self.finished = True
        out.append(RunErrorEvent(message=message, code=code))
        return out


def _progress(e: ProgressEvent) -> CustomEvent:
    value = {
        "id": e.note_id,
        "toolCallId": e.tool_call_id,
        "tool": e.tool,
        "note": e.note,
        "fraction": e.fraction,
    }
    return CustomEvent(name=PROGRESS_EVENT, value=value)
