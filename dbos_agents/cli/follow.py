"""``follow``: a session's live log as it is written, until its run ends or Ctrl-C.

The log is ``AgentClient.stream``'s (``read_events`` driven by ``Progress``, read here
directly so the spinner can show the status between reads): a reply's text is printed as
the model writes it, and its message, when it comes, adds only its tool calls; a running
tool's progress notes print one a line, under the call. Waits on a
client tool or approval come as ``pending`` events, right after the message that opened
them, with the command that answers them. A root session's log has its sub-agents' waits
too; following a sub-agent, those of the tree below it are looked up in the tree's
pending calls, at most once a second.
"""

from __future__ import annotations

import json
import time

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
from ..live.follow import Progress, cursor_of
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
        self.live = False
        """A reply's text is being printed (its line is open)."""
        self.streamed = False
        """The next assistant message's text was printed as it streamed (the previous
        turn's tool results, committed with the turn, may come in between)."""

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

    def show(self, e: SessionEvent) -> None:
        if isinstance(e, DeltaEvent):
            if e.text:  # tool-call pieces show whole, with the message
                self._open()
                self.streamed = True
                out.print(e.text, end="", markup=False, highlight=False)
                out.file.flush()
        elif isinstance(e, RetractEvent):
            if e.tool_index is None and self.streamed:
                self.close()
                self.streamed = False
                out.print(Text("[withdrawn]", style="dim"))
        elif isinstance(e, MessageEvent):
            streamed = self.streamed and e.role == "assistant"
            if e.role == "assistant":
                self.streamed = False
            self.close()
            if e.run_seq != self.run:
                out.print(render.run_header(e.run_seq))
                self.run = e.run_seq
            if not streamed:
                out.print(render.message(e, full=self.full))
            elif e.tool_calls:
                out.print(render.tool_calls(e, full=self.full))
        elif isinstance(e, ProgressEvent):
            self.close()
            out.print(render.progress(e, full=self.full))
        elif isinstance(e, PendingEvent):
            self.close()
            render.print_wait(out, e, database_url=self.database_url, full=self.full)
        elif isinstance(e, StateEvent):
            self.close()
            text = json.dumps(e.state, separators=(",", ":"))
            if not self.full and len(text) > 200:
                text = text[:199] + "…"
            out.print(Text(f"state v{e.version}: {text}", style="dim"))
        else:
            self.close()
            out.print(render.final_status(e.status, e.error, e.final_output))


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
                for e in events:
                    if isinstance(e, PendingEvent):
                        if e.tool_call_id in shown:
                            continue
                        shown.add(e.tool_call_id)
                    if as_json:
                        emit({"event": e.event, **e.model_dump(mode="json")})
                    else:
                        printer.show(e)
                    if isinstance(e, StatusEvent):
                        return e.status
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
                                printer.show(e)
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
