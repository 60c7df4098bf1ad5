"""``GET /sessions/{id}/events``: the session's messages as server-sent events.

The event log is ``dbos_agents.messages`` ordered by ``seq``: each message is one event
``id: <seq>`` / ``event: message`` / ``data: {seq, run_seq, role, content, tool_calls,
tool_call_id, name, created_at}``. A client resumes after event N with the
``Last-Event-ID: N`` header (what ``EventSource`` sends on reconnect; it wins) or
``?offset=N``: it gets only events with ``seq > N``.

When the session's run ends, an ``event: status`` (no ``id``, so it does not move the resume
point) carries ``{status, run_seq, final_output, error}``; once per run.

``follow=true`` (default): the stream stays open after a status event, since a follow-up
message starts a new run; it reads again when the worker announces a change to the session
(``AsyncAgentClient.watch``, one LISTEN connection per server process) or, as a safety net,
every ``events_poll_interval_sec``; it sends an SSE comment
after ``events_keepalive_sec`` of silence, and closes after ``events_max_stream_sec`` or
when the database stops answering (reconnect with Last-Event-ID). ``follow=false``: what
exists now, then one ``status`` event with the current status (terminal or not), then the
stream closes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from ..client import AsyncAgentClient
from ..client.watch import AsyncSessionWatch
from ..errors import DatabaseUnavailableError
from ..outcome import TERMINAL
from ..records import HistoryEntry
from ..store.events import BATCH

log = logging.getLogger("dbos_agents.server")

RETRY_MS = 1000
"""The reconnect delay an ``EventSource`` is told to use."""


def format_event(event: str, data: str, event_id: int | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return (
        head + f"event: {event}\n" + "".join(f"data: {line}\n" for line in data.split("\n")) + "\n"
    )


def message_event(m: HistoryEntry) -> str:
    data = m.model_dump(mode="json")
    return format_event("message", json.dumps(data, separators=(",", ":")), m.seq)


@dataclass(frozen=True)
class StreamOptions:
    poll_interval: float
    keepalive: float
    max_duration: float


async def stream_events(
    client: AsyncAgentClient,
    session_id: str,
    offset: int,
    *,
    follow: bool,
    options: StreamOptions,
    valid_until: float | None = None,
    generation: int | None = None,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[str]:
    """The SSE body (see the module doc). With ``valid_until`` (the token's expiry, unix
    seconds) and ``generation`` (the token's) the stream sends an ``expired`` event and
    closes when the token expires or is revoked."""
    yield f"retry: {RETRY_MS}\n\n"
    async with await client.watch(session_id) as watch:
        async for event in _events(
            client, watch, session_id, offset, follow, options, valid_until, generation, clock
        ):
            yield event


async def _events(
    client: AsyncAgentClient,
    watch: AsyncSessionWatch,
    session_id: str,
    offset: int,
    follow: bool,
    options: StreamOptions,
    valid_until: float | None,
    generation: int | None,
    clock: Callable[[], float],
) -> AsyncIterator[str]:
    last_seq = offset
    reported: tuple[str, int] | None = None
    started = last_sent = time.monotonic()
    while True:
        try:
            snap = await client.events(session_id, last_seq)
        except DatabaseUnavailableError as exc:
            # The response has started: close it; the client resumes with Last-Event-ID.
            log.warning("event stream lost the database", extra={"error": str(exc)})
            return
        for m in snap.messages:
            yield message_event(m)
            last_seq = m.seq
            last_sent = time.monotonic()
        if len(snap.messages) == BATCH:
            continue  # more to catch up on before reporting a status
        st = snap.status
        if not follow:
            if st is not None:
                yield format_event("status", st.model_dump_json())
            return
        if st is not None and st.status in TERMINAL and reported != (st.status, st.run_seq):
            reported = (st.status, st.run_seq)
            yield format_event("status", st.model_dump_json())
            last_sent = time.monotonic()
        now = time.monotonic()
        if now - started >= options.max_duration:
            return
        if valid_until is not None and clock() >= valid_until:
            yield format_event("expired", '{"reason": "token expired: refresh it and resume"}')
            return
        if generation is not None and snap.token_generation not in (None, generation):
            yield format_event("expired", '{"reason": "token revoked"}')
            return
        if now - last_sent >= options.keepalive:
            yield ": keepalive\n\n"
            last_sent = now
        await watch.wait(
            max(
                0.01,
                min(
                    options.poll_interval,
                    options.keepalive - (now - last_sent),
                    options.max_duration - (now - started),
                    (valid_until - clock()) if valid_until is not None else options.keepalive,
                ),
            )
        )
