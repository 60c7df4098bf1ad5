"""``follow``: a session's live log as it is written, until its run ends or Ctrl-C.

The log is ``AgentClient.stream``'s (``read_events`` driven by ``Progress``, read here
directly so the spinner can show the status between reads). What is shown of each run is
``live.reducer``'s; ``Printer`` encodes its operations as terminal lines: a reply's text is
printed as the model writes it, and its message, when it comes, adds only its tool calls
(a reply that was not streamed is printed whole); a withdrawn reply is marked so; a running
tool's progress notes print one a line, under the call. Waits on a client tool or
approval are printed with the command that answers them. A root session's log has its
sub-agents' waits too; following a sub-agent, those of the tree below it are looked up in
the tree's pending calls, at most once a second. The user's own messages and state
versions outside a run are printed as they are.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import typer
from rich.status import Status
from rich.text import Text

from ..client import AgentClient
from ..events import (
    DeltaEvent,
    MessageEvent,
    PendingEvent,
    ProgressEvent,
    RetractEvent,
    SessionEvent,
    StateEvent,
)
from ..live import operations as op
from ..live.follow import Progress, cursor_of
from ..live.reducer import RunReducer
from ..records import StatusEvent
from . import render
from .base import EXIT_CODES, emit, err, out

TREE_CHECK_SEC = 1.0

HINTS = {
    "queued": "queued: waiting for a worker (is `dbos-agents worker --app ...` running?)",
    "running": "running",
}


class Printer:
    """Human output: streamed text on one line (the spinner stopped meanwhile)."""

    def __init__(self, spinner: Status, full: bool, database_url: str | None = None) -> None:
        self.spinner, self.full = spinner, full
        self.database_url = database_url
        """Given with ``--database-url``: the ``submit`` lines printed carry it."""
        self.run = -1
        """The run whose header was printed last."""
        self.live = False
        """A reply's text is being printed (its line is open)."""
        self.streamed = False
        """The step's text was printed as it streamed (its message adds its calls only)."""
        self._streaming = False
        """The step shows its pieces as they come (its message was not streamed: no)."""
        self._reducer: RunReducer | None = None
        self._skip = 0

    def _open(self) -> None:
        if not self.live:
            self.spinner.stop()
            out.print(Text("assistant > ", style=render.ROLE_STYLE["assistant"]), end="")
            self.live = True

    def close(self) -> None:
        if self.live:
            out.print()
            self.live = False
            self.spinner.start()

    def _header(self, run: int) -> None:
        if run != self.run:
            out.print(render.run_header(run))
            self.run = run

    def show_all(self, events: Sequence[SessionEvent]) -> None:
        """One read's events, in order: each run's through its reducer."""
        segment: list[SessionEvent] = []
        seg_run: int | None = None
        for e in events:
            run = _run_of(e)
            if run is None and not isinstance(e, PendingEvent):  # the reader's own
                self._fold(segment, seg_run)
                segment, seg_run = [], None
                self._own(e)
                continue
            if run is not None and seg_run is not None and run != seg_run:
                self._fold(segment, seg_run)
                segment = []
            segment.append(e)
            seg_run = run if run is not None else seg_run
        self._fold(segment, seg_run)

    def show(self, e: SessionEvent) -> None:
        self.show_all([e])

    def wait(self, e: PendingEvent) -> None:
        """A wait found outside the log (a sub-agent's, further down the tree)."""
        self.close()
        render.print_wait(out, e, database_url=self.database_url, full=self.full)

    def _own(self, e: SessionEvent) -> None:
        self.close()
        if isinstance(e, MessageEvent):
            self._header(e.run_seq)
            out.print(render.message(e, full=self.full))
        elif isinstance(e, StateEvent):
            self._state(e)
        elif isinstance(e, PendingEvent):
            self.wait(e)

    def _fold(self, events: list[SessionEvent], run: int | None) -> None:
        if not events:
            return
        r = self._reducer
        if run is None and r is not None:
            run = r.run  # waits alone: the run read last (it goes on once answered)
        if run is not None and (r is None or r.run != run or r.done):
            r = self._reducer = RunReducer(run)
        if r is None:  # waits with no run read before them
            for e in events:
                self._own(e)
            return
        ops = r.feed(events)
        for o in ops:
            self._op(o)
        last = events[-1]
        if isinstance(last, StatusEvent) and not any(isinstance(o, op.End) for o in ops):
            self.close()  # a status the reducer does not end the run with
            out.print(render.final_status(last.status, last.error, last.final_output))

    def _op(self, o: op.Op) -> None:
        if self._skip:
            self._skip -= 1
            return
        match o:
            case op.TextPiece(text=text):
                if self._streaming:
                    self._open()
                    self.streamed = True
                    out.print(text, end="", markup=False, highlight=False)
                    out.file.flush()
            case op.StepStart(seq=seq):
                self.streamed, self._streaming = False, seq is None
            case op.Reset(tool=tool, again=again):
                if tool:
                    self._skip = again  # the text stays as printed
                elif self.streamed:
                    self.close()
                    self.streamed = False
                    out.print(Text("[withdrawn]", style="dim"))
            case op.Committed(message=m, waits=waits):
                streamed, self.streamed = self.streamed, False
                self.close()
                self._header(m.run_seq)
                if not streamed:
                    out.print(render.message(m, full=self.full))
                elif m.tool_calls:
                    out.print(render.tool_calls(m, full=self.full))
                for w in waits:
                    self.wait(w)
            case op.Asked(wait=w):
                self.wait(w)
            case op.ToolOutput(message=m) | op.ToolFailed(message=m) | op.ToolDenied(message=m):
                self.close()
                self._header(m.run_seq)
                out.print(render.message(m, full=self.full))
            case op.Progress(event=e):
                self.close()
                out.print(render.progress(e, full=self.full))
            case op.State(event=e):
                self.close()
                self._state(e)
            case op.End(status=st) if st is not None:
                self.close()
                out.print(render.final_status(st.status, st.error, st.final_output))

    def _state(self, e: StateEvent) -> None:
        text = json.dumps(e.state, separators=(",", ":"))
        if not self.full and len(text) > 200:
            text = text[:199] + "…"
        out.print(Text(f"state v{e.version}: {text}", style="dim"))


def _run_of(e: SessionEvent) -> int | None:
    """The run ``e`` belongs to; None: the reader's own line (a user's or system message, a
    state version outside a run) or a wait (it goes with what opened it)."""
    match e:
        case DeltaEvent(run=run) | RetractEvent(run=run) | ProgressEvent(run=run):
            return run
        case MessageEvent(role="assistant" | "tool", run_seq=run):
            return run
        case StatusEvent(run_seq=run):
            return run
        case StateEvent(run=run):
            return run
    return None


def follow(
    client: AgentClient,
    session_id: str,
    *,
    after: int | str = 0,
    as_json: bool = False,
    full: bool = False,
    poll: float = 5.0,
    database_url: str | None = None,
) -> str:
    """Print the log after ``after`` (a message seq or a cursor ``N.D``) as it comes;
    return the status the run ended in. ``poll``: the safety net's interval (changes wake
    it at once). With ``as_json``: JSON lines, each event with its ``"event"`` name."""
    progress = Progress(cursor_of(str(after)), follow=True)
    root = client.session(session_id).root_session_id
    shown: set[str] = set()
    next_check = 0.0
    # The spinner shares the console that prints, so rich keeps it below the messages.
    with (
        client.watch(session_id) as watch,
        (err if as_json else out).status("", spinner="dots") as spinner,
    ):
        printer = Printer(spinner, full, database_url)
        try:
            while True:
                batch = client.read_events(session_id, progress.cursor)
                events, step = progress.take(batch)
                told: list[SessionEvent] = []
                for e in events:
                    if isinstance(e, PendingEvent):
                        if e.tool_call_id in shown:
                            continue
                        shown.add(e.tool_call_id)
                    told.append(e)
                    if isinstance(e, StatusEvent):
                        break
                if as_json:
                    for e in told:
                        emit({"event": e.event, **e.model_dump(mode="json")})
                else:
                    printer.show_all(told)
                if told and isinstance(told[-1], StatusEvent):
                    return told[-1].status
                if step == "more":
                    continue
                if root != session_id and time.monotonic() >= next_check:  # the tree's waits
                    next_check = time.monotonic() + TREE_CHECK_SEC
                    for p in client.pending(session_id=root):
                        if p.tool_call_id not in shown:
                            shown.add(p.tool_call_id)
                            e = PendingEvent.model_validate(p.model_dump())
                            if as_json:
                                emit({"event": e.event, **e.model_dump(mode="json")})
                            else:
                                printer.wait(e)
                spinner.update(HINTS.get(batch.status.status, batch.status.status))
                watch.wait(poll)
        except KeyboardInterrupt:
            if not as_json:
                printer.close()
                err.print(Text("stopped following; the session goes on", style="dim"))
            raise typer.Exit(EXIT_CODES["interrupted"]) from None


def exit_for(status: str) -> None:
    """0 when the followed run completed, else ``run_not_completed`` (13)."""
    if status != "completed":
        raise typer.Exit(EXIT_CODES["run_not_completed"])
