"""``GET /sessions/{id}/events``: a session's live log as server-sent events (sse-starlette).

The log is ``AgentClient.stream``'s (``dbos_agents.events``): model pieces as the model
writes them and committed messages, merged. Each event that moves the resume point has
``id: <cursor>`` (``N`` or ``N.D``: the last message seq and the last delta id seen):

- ``event: delta``, data ``{run, turn, attempt, text}`` plus ``tool_call: {index, id, name,
  arguments}`` for a piece of a tool call;
- ``event: retract``, data ``{run, turn, attempt, tool_index, tool_call_id}``: withdraw
  that tool call's pieces, or (``tool_index`` null) all of the turn's shown so far;
- ``event: progress``, data ``{run, turn, tool_call_id, tool, part, note, fraction}``: a
  note a running tool reported (``ctx.progress``; ``fraction`` 0..1 or null), after the
  message that made the call;
- ``event: message``, data ``{seq, run_seq, role, content, tool_calls, tool_call_id, name,
  created_at}``: a committed message (an assistant message's text is its turn's deltas).

Without an ``id`` (they do not move the resume point): ``event: pending`` (a wait opened by
the message just before it, or, on a root's stream, by a sub-agent of its tree: its
``owner_session_id`` says which), ``event: status`` (``{status, run_seq, final_output,
error}``, once per run end) and ``event: expired``. A client resumes with ``Last-Event-ID`` (what
``EventSource`` sends on reconnect; it wins) or ``?offset=``: it misses nothing and sees
nothing twice.

``follow=true`` (default): the stream stays open across runs; it reads again when the worker
announces a change (``AsyncAgentClient.watch``) or, as a safety net, every
``events_poll_interval_sec``; sse-starlette pings every ``events_keepalive_sec`` and drops
a client that takes ``events_send_timeout_sec`` to accept a send; the stream closes after
``events_max_stream_sec`` or when the database stops answering (reconnect with
Last-Event-ID). ``follow=false``: what exists now, one ``status`` event, then the end.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing

from sse_starlette import ServerSentEvent

from ..client import AsyncAgentClient
from ..events import (
    Cursor,
    DeltaEvent,
    MessageEvent,
    PendingEvent,
    ProgressEvent,
    RetractEvent,
    SessionEvent,
    StateEvent,
    StatusEvent,
)
from .follow import Limits, Stop
from .follow import follow as follow_log

RETRY_MS = 1000
"""The reconnect delay an ``EventSource`` is told to use."""

SEP = "\n"
"""Line ends of the wire format (what it has always been; ``\\r\\n`` is sse-starlette's)."""


def sse(event: str, data: str | None = None, event_id: str | None = None) -> ServerSentEvent:
    return ServerSentEvent(data, event=event, id=event_id, sep=SEP)


def wire(e: SessionEvent) -> bytes:
    """One event on the wire: its cursor is the ``id``, not part of the data (nor a
    delta's ``tool_call`` when it is a piece of text). Written here rather than through
    ``ServerSentEvent`` (every piece of every stream passes this): the same bytes, since a
    cursor and an event name are one line each and pydantic's JSON has no line break,
    which is all ``ServerSentEvent`` would split or strip (``tests/unit/test_sse_encoding``
    holds it to sse-starlette's encoder)."""
    if isinstance(e, StatusEvent | PendingEvent | StateEvent):
        return f"event: {e.event}{SEP}data: {e.model_dump_json()}{SEP}{SEP}".encode()
    return f"id: {e.cursor}{SEP}event: {e.event}{SEP}data: {_data(e)}{SEP}{SEP}".encode()


def _data(e: DeltaEvent | RetractEvent | ProgressEvent | MessageEvent) -> str:
    text = isinstance(e, DeltaEvent) and e.tool_call is None
    return e.model_dump_json(exclude=_TEXT_PIECE if text else _CURSOR)


_CURSOR = {"cursor"}
_TEXT_PIECE = {"cursor", "tool_call"}


def chunk(events: list[SessionEvent]) -> bytes:
    """A read's events as one piece of the body: one send, however many events."""
    return b"".join([wire(e) for e in events])


async def stream_events(
    client: AsyncAgentClient,
    session_id: str,
    after: Cursor,
    *,
    follow: bool,
    limits: Limits,
) -> AsyncIterator[bytes]:
    """The SSE body (see the module doc), one chunk per read. A stream a token let in
    (``limits`` carry its expiry and generation) sends an ``expired`` event and closes when
    the token expires or is revoked; past ``max_duration``, or when the database stops
    answering, it closes."""
    yield ServerSentEvent(retry=RETRY_MS, sep=SEP).encode()
    async with aclosing(
        follow_log(client, session_id, after, limits, keep_following=follow)
    ) as log_:
        async for item in log_:
            if isinstance(item, Stop):
                reason = _EXPIRED.get(item.code)
                if reason is not None:
                    yield sse("expired", json.dumps({"reason": reason})).encode()
                return
            if item.events:
                yield chunk(item.events)


_EXPIRED = {
    "TOKEN_EXPIRED": "token expired: refresh it and resume",
    "TOKEN_REVOKED": "token revoked",
}
