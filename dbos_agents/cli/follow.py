"""``follow``: a session's messages as they are written, until its run ends or Ctrl-C.

The event source is the HTTP API's (``AgentClient.events``): the session's status, then its
messages after a sequence number, read in that order, so a terminal status is never seen
before the messages of the run it ends. It reads again when the worker announces a change
(``AgentClient.watch``), with a slow timer as the safety net. Waits on a client tool or
approval of the session's tree are announced once each, with the command that answers them.
"""

from __future__ import annotations

import typer
from rich.text import Text

from ..client import AgentClient
from ..errors import SessionNotFoundError
from ..outcome import TERMINAL
from ..store.events import BATCH
from . import render
from .base import EXIT_CODES, emit, err, out

HINTS = {
    "queued": "queued: waiting for a worker (is `dbos-agents worker --app ...` running?)",
    "running": "running",
}


def follow(
    client: AgentClient,
    session_id: str,
    *,
    after: int = 0,
    as_json: bool = False,
    full: bool = False,
    poll: float = 5.0,
) -> str:
    """Print messages with ``seq > after`` as they come; return the status the run ended in.
    ``poll``: the safety net's interval (changes wake it at once).
    With ``as_json``: JSON lines ``{"event": "message"|"waiting"|"status", ...}``."""
    root = client.session(session_id).root_session_id
    announced: set[str] = set()
    last, run = after, -1
    # The spinner shares the console that prints, so rich keeps it below the messages.
    with (
        client.watch(session_id) as watch,
        (err if as_json else out).status("", spinner="dots") as spinner,
    ):
        try:
            while True:
                snap = client.events(session_id, last)
                for m in snap.messages:
                    if as_json:
                        emit({"event": "message", **m.model_dump(mode="json")})
                    else:
                        if m.run_seq != run:
                            out.print(render.run_header(m.run_seq))
                        out.print(render.message(m, full=full))
                    last, run = m.seq, m.run_seq
                if len(snap.messages) == BATCH:  # a full batch: more to catch up on
                    continue
                st = snap.status
                if st is None:
                    raise SessionNotFoundError(session_id)
                if st.status in TERMINAL:
                    if as_json:
                        emit({"event": "status", **st.model_dump(mode="json")})
                    else:
                        out.print(render.final_status(st.status, st.error, st.final_output))
                    return st.status
                for p in client.pending(session_id=root):
                    if p.tool_call_id in announced:
                        continue
                    announced.add(p.tool_call_id)
                    if as_json:
                        emit({"event": "waiting", **p.model_dump(mode="json")})
                    else:
                        out.print(render.waiting(p), soft_wrap=True)
                spinner.update(HINTS.get(st.status, st.status))
                watch.wait(poll)
        except KeyboardInterrupt:
            if not as_json:
                err.print(Text("stopped following; the session goes on", style="dim"))
            raise typer.Exit(EXIT_CODES["interrupted"]) from None


def exit_for(status: str) -> None:
    """0 when the followed run completed, else ``run_not_completed`` (13)."""
    if status != "completed":
        raise typer.Exit(EXIT_CODES["run_not_completed"])
