"""The body of an AG-UI run: the session's log from a cursor, mapped, as SSE (``EventEncoder``).

The loop is ``GET /sessions/{id}/events``'s (``server/events.py``): a live watch made
before the first read, reads until the log's end, then a wait woken by new deltas or the
worker's announcements (``events_poll_interval_sec`` as the safety net). It stops when the
mapping has ended the AG-UI run: the session's run ended, or waits on the client. When
the stream must stop first (the database stops answering, ``events_max_stream_sec``, the
token expired or was revoked) it ends the AG-UI run with ``RUN_ERROR``; the client
resumes by running the thread again (see ``reconcile``): nothing is lost or shown twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder

from ...client import AsyncAgentClient
from ...client.live import Progress
from ...errors import DatabaseUnavailableError, SessionNotFoundError
from ...events import Cursor
from .mapping import Mapper

log = logging.getLogger("dbos_agents.server")

__all__ = ["Limits", "encode", "run_stream"]

_ENCODER = EventEncoder()

RERUN = "; run the thread again to resume"


def encode(events: list[BaseEvent]) -> list[bytes]:
    """AG-UI's own SSE framing (bytes: sse-starlette sends them as they are)."""
    return [_ENCODER.encode(e).encode() for e in events]


@dataclass(frozen=True)
class Limits:
    poll_interval: float
    max_duration: float
    valid_until: float | None = None
    """The token's expiry (unix seconds), for a stream a token let in."""
    generation: int | None = None
    """That token's generation (a revoke ends the stream)."""
    clock: Callable[[], float] = time.time


def _stop(limits: Limits, started: float, generation: int | None) -> tuple[str, str] | None:
    """Why the stream must stop now (message, code), or None."""
    if time.monotonic() - started >= limits.max_duration:
        return "the stream reached its time limit" + RERUN, "STREAM_TIMEOUT"
    if limits.valid_until is not None and limits.clock() >= limits.valid_until:
        return "the session token expired: refresh it" + RERUN, "TOKEN_EXPIRED"
    if limits.generation is not None and generation != limits.generation:
        return "the session token was revoked", "TOKEN_REVOKED"
    return None


async def run_stream(
    client: AsyncAgentClient,
    session_id: str,
    start: Cursor,
    mapper: Mapper,
    opening: list[BaseEvent],
    limits: Limits,
) -> AsyncIterator[bytes]:
    """``opening`` (``RUN_STARTED`` and what precedes the log), then the log mapped."""
    for chunk in encode(opening):
        yield chunk
    started = time.monotonic()
    progress = Progress(start, follow=True)
    try:
        async with await client.live_watch(session_id, check=False) as live:
            while True:
                batch = await client.read_events(session_id, progress.cursor)
                events, step = progress.take(batch)
                for chunk in encode(mapper.feed(events)):
                    yield chunk
                if mapper.finished:
                    return
                if step == "more":
                    continue
                why = _stop(limits, started, batch.token_generation)
                if why is not None:
                    for chunk in encode(mapper.error(*why)):
                        yield chunk
                    return
                while True:
                    left = [
                        limits.poll_interval,
                        limits.max_duration - (time.monotonic() - started),
                    ]
                    if limits.valid_until is not None:
                        left.append(limits.valid_until - limits.clock())
                    rows = await live.wait(max(0.01, min(left)), progress.cursor)
                    if rows is None:
                        break  # a full read (and its checks)
                    for chunk in encode(mapper.feed(progress.shown(rows))):
                        yield chunk
                    if _stop(limits, started, limits.generation) is not None:
                        break
    except (DatabaseUnavailableError, SessionNotFoundError) as exc:
        # The response has started: end the run; the client reruns the thread to resume.
        log.warning("ag-ui stream ended early", extra={"error": str(exc)})
        for chunk in encode(mapper.error("the event stream ended early" + RERUN, exc.code)):
            yield chunk
