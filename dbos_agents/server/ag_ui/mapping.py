"""One run's events as AG-UI events. What the client holds is ``live.reducer``'s; this
module encodes its operations, and keeps the client's copy of the transcript (``view``)
in step so it can replace it when something shown is withdrawn:

- a step is one assistant message (id ``dbos:<run>:<turn>:<restart>``, or
  ``dbos:<run>:m<seq>`` for a message that was not streamed); its text:
  ``TEXT_MESSAGE_START`` / ``_CONTENT`` / ``_END``; a tool call's input:
  ``TOOL_CALL_START`` (``parentMessageId``: the step's message), ``TOOL_CALL_ARGS``, and
  ``TOOL_CALL_END`` once its whole input is known (or the step ends);
- a withdrawal (``Reset``): what is withdrawn is ended and dropped from the view, and a
  ``MESSAGES_SNAPSHOT`` replaces the client's list; after a whole step was withdrawn its
  reply continues under a new message id (the restart), so no withdrawn text stays at
  the client, none twice; a single tool call withdrawn leaves the rest as it is;
- a tool's result: ``TOOL_CALL_RESULT`` (the stored text), unless the client has it
  already (a frontend tool's result it posted);
- a wait (``End`` waiting): ``RUN_FINISHED`` (success, ``pendingToolCallIds``; the client
  runs its frontend tools and posts a new run with their results), or with an
  ``interrupt`` outcome when a human must approve (answered by the next run's
  ``resume``). A frontend tool a durable tool or a sub-agent asks for (no message of the
  transcript holds its call) gets its own tool call events, under a message minted for it;
- a running tool's note: ``CUSTOM`` named ``progress``, ``value``
  ``{id, toolCallId, tool, note, fraction}`` (``id`` ``<toolCallId>-<part>`` is stable, so
  a client keeping notes across runs keys them by it);
- a committed state version: ``STATE_DELTA`` from what the page holds, or
  ``STATE_SNAPSHOT`` (``shared_state``);
- the run's end: ``completed`` is ``RUN_FINISHED``, ``interrupted`` is ``RUN_FINISHED``
  with a ``cancelled`` outcome, a later run started is ``RUN_FINISHED``, anything else
  ``RUN_ERROR`` (code: the status in capitals).
"""

from __future__ import annotations

from collections.abc import Sequence

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

from ...events import PendingEvent, ProgressEvent, SessionEvent, StatusEvent
from ...live import operations as op
from ...live.reducer import RunReducer
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

Outcome = RunFinishedInterruptOutcome | RunFinishedSuccessOutcome | RunFinishedCancelledOutcome


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
        self._reducer = RunReducer(run)
        self._step: tuple[int | None, int | None] = (None, None)
        """The step's turn and (not streamed) message seq."""
        self._restarts: dict[int | None, int] = {}
        self._message_id = ""
        self._open_text = False
        self._shown = False
        """Something of the step's message was sent (text, a tool call)."""
        self._open_tools: list[str] = []
        self._args: dict[str, str] = {}
        """Each call's input as sent."""
        self._asking = False
        """The next tool call is one a wait asked for (no message holds it)."""
        self._skip_call: str | None = None
        self._skip = 0
        """Operations to pass over: what a single call's withdrawal shows again."""
        self._waits: dict[str, PendingEvent] = {}
        """The waits the run ends on, by id (a sub-agent's comes with the message before
        it and as its own ask)."""

    @property
    def finished(self) -> bool:
        return self._reducer.done

    def feed(
        self, events: Sequence[SessionEvent], status: StatusEvent | None = None
    ) -> list[BaseEvent]:
        """The events for one read; ``status`` (a complete read's): a later run started."""
        if self.finished:
            return []
        out: list[BaseEvent] = []
        for o in self._reducer.feed(events, status):
            self._encode(o, out)
        return out

    def error(self, message: str, code: str) -> list[BaseEvent]:
        """End the AG-UI run with ``RUN_ERROR`` (the stream stops before the run ends)."""
        if self.finished:
            return []
        out: list[BaseEvent] = []
        for o in self._reducer.end("other"):
            if not isinstance(o, op.End):
                self._encode(o, out)
        out.append(RunErrorEvent(message=message, code=code))
        return out

    # --- the operations ------------------------------------------------------------------

    def _encode(self, o: op.Op, out: list[BaseEvent]) -> None:
        if self._skip:
            self._skip -= 1
            return
        match o:
            case op.TextPiece(text=text):
                self.view.add_text(self._message_id, text)
                out.append(TextMessageContentEvent(message_id=self._message_id, delta=text))
            case op.ToolArgs(call_id=cid, delta=delta):
                self._send_args(cid, delta, out)
            case op.StepStart(turn=turn, seq=seq):
                self._step = (turn, seq)
                self._name_message()
            case op.StepEnd():
                self._close(out)
            case op.TextStart():
                if not self._open_text:
                    self._open_text = self._shown = True
                    out.append(TextMessageStartEvent(message_id=self._message_id, role="assistant"))
            case op.TextEnd():
                self._end_text(out)
            case op.ToolStart(call_id=cid, name=name):
                self._start_tool(cid, name, out)
            case op.ToolCall(call_id=cid, arguments=arguments):
                self._whole_call(cid, arguments, out)
            case op.Reset():
                self._reset(o, out)
            case op.Committed(waits=waits):
                self._waits.update((w.tool_call_id, w) for w in waits)
            case op.Asked(wait=w):
                self._waits[w.tool_call_id] = w
                self._asking = w.kind == "client"
            case op.ToolOutput(call_id=cid, message=m):
                self._result(cid, m.content or "", out)
            case op.ToolFailed(call_id=cid, message=m):
                self._result(cid, m.content or "", out)
            case op.ToolDenied(call_id=cid, message=m):
                self._result(cid, m.content or "", out)
            case op.Progress(event=e):
                out.append(_progress(e))
            case op.State(event=e):
                if (s := self.state.event(e)) is not None:
                    out.append(s)
            case op.End():
                out.append(self._end(o))

    def _name_message(self) -> None:
        turn, seq = self._step
        prefix = run_prefix(self.run)
        if turn is None and seq is not None:
            self._message_id = f"{prefix}m{seq}"
        else:
            # A step an ask opened (no turn read yet): named for the waits it holds.
            name = "w" if turn is None else str(turn)
            self._message_id = f"{prefix}{name}:{self._restarts.get(turn, 0)}"
        self._open_text = self._shown = False

    def _end_text(self, out: list[BaseEvent]) -> None:
        if self._open_text:
            self._open_text = False
            out.append(TextMessageEndEvent(message_id=self._message_id))

    def _close(self, out: list[BaseEvent]) -> None:
        """End what the step has open (text, tool calls)."""
        self._end_text(out)
        out += [ToolCallEndEvent(tool_call_id=cid) for cid in self._open_tools]
        self._open_tools = []

    def _start_tool(self, call_id: str, name: str, out: list[BaseEvent]) -> None:
        parent = self._message_id
        if self._asking:
            if self.view.has_tool_call(call_id):  # the client holds it (a rerun)
                self._skip_call = call_id
                return
            parent = f"{run_prefix(self.run)}ask:{call_id}"
        else:
            self._shown = True
        self.view.add_tool_call(parent, call_id, name)
        self._open_tools.append(call_id)
        self._args[call_id] = ""
        out.append(
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, parent_message_id=parent)
        )

    def _send_args(self, call_id: str, delta: str, out: list[BaseEvent]) -> None:
        self._args[call_id] = self._args.get(call_id, "") + delta
        self.view.add_arguments(call_id, delta)
        out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=delta))

    def _whole_call(self, call_id: str, arguments: str, out: list[BaseEvent]) -> None:
        """The call's whole input: what its pieces did not show, then its end."""
        self._asking = False
        if self._skip_call == call_id:
            self._skip_call = None
            return
        shown = self._args.get(call_id, "")
        if arguments != shown and arguments.startswith(shown):
            self._send_args(call_id, arguments[len(shown) :], out)
        if call_id in self._open_tools:
            self._open_tools.remove(call_id)
            out.append(ToolCallEndEvent(tool_call_id=call_id))

    def _reset(self, o: op.Reset, out: list[BaseEvent]) -> None:
        if o.tool:  # one call withdrawn: the rest stays as the client has it
            self._skip = o.again
            cid = o.call_id
            if cid is None:
                return
            if cid in self._open_tools:
                self._open_tools.remove(cid)
                out.append(ToolCallEndEvent(tool_call_id=cid))
            self.view.drop_tool_call(cid)
            out.append(self.view.snapshot())
            return
        # The whole step withdrawn: end it, drop it at the client; it goes on anew.
        shown = self._shown or bool(self._open_tools)
        self._close(out)
        turn = self._step[0]
        self._restarts[turn] = self._restarts.get(turn, 0) + 1
        withdrawn = self._message_id
        self._step = (turn, None)
        self._name_message()
        if shown:
            self.view.drop_message(withdrawn)
            out.append(self.view.snapshot())

    def _result(self, call_id: str, content: str, out: list[BaseEvent]) -> None:
        if self.view.has_tool_result(call_id):
            return
        message_id = f"{run_prefix(self.run)}tool:{call_id}"
        self.view.add_tool_result(message_id, call_id, content)
        out.append(
            ToolCallResultEvent(
                message_id=message_id, tool_call_id=call_id, content=content, role="tool"
            )
        )

    def _end(self, o: op.End) -> BaseEvent:
        if o.reason == "waiting":
            outcome: Outcome | None = self._waiting()
        elif o.reason in ("completed", "superseded"):
            outcome = None
        elif o.reason == "interrupted":
            outcome = RunFinishedCancelledOutcome()
        else:
            return self._error(o)
        return RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)

    def _error(self, o: op.End) -> BaseEvent:
        st = o.status.status if o.status is not None else o.reason
        message = (o.status.error if o.status is not None else None) or f"the run ended: {st}"
        return RunErrorEvent(message=message, code=st.upper())

    def _waiting(self) -> Outcome:
        approvals = [p for p in self._waits.values() if p.kind == "approval"]
        if not approvals:
            return RunFinishedSuccessOutcome(pending_tool_call_ids=list(self._waits))
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
        return RunFinishedInterruptOutcome(interrupts=interrupts)


def _progress(e: ProgressEvent) -> CustomEvent:
    value = {
        "id": e.note_id,
        "toolCallId": e.tool_call_id,
        "tool": e.tool,
        "note": e.note,
        "fraction": e.fraction,
    }
    return CustomEvent(name=PROGRESS_EVENT, value=value)
