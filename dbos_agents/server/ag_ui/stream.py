"""The body of an AG-UI run: the session's log from a cursor, mapped, as SSE (``EventEncoder``).

The loop every stream route shares (``server/follow.py``): a live watch made
before the first read, reads until the log's end, then a wait woken by new deltas or the
worker's announcements (``events_poll_interval_sec`` as the safety net). It stops when the
mapping has ended the AG-UI run: the session's run ended, or waits on the client. When
the stream must stop first (the database stops answering, ``events_max_stream_sec``, the
token expired or was revoked) it ends the AG-UI run with ``RUN_ERROR``; the client
resumes by running the thread again (see ``reconcile``): nothing is lost or shown twice.
When the run committed a state the page posted, the stream reads the session's state
version once before the AG-UI run ends, and tells the page (``shared_state``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder

from ...client import AsyncAgentClient
from ...events import Cursor
from ..follow import Limits, Stop, follow
from .mapping import Mapper

__all__ = ["encode", "run_stream"]

_ENCODER = EventEncoder()

RERUN = "; run the thread again to resume"


def encode(events: list[BaseEvent]) -> list[bytes]:
    """AG-UI's own SSE framing (bytes: sse-starlette sends them as they are)."""
    return [_ENCODER.encode(e).encode() for e in events]


async def run_stream(
    client: AsyncAgentClient,
    session_id: str,
    start: Cursor,
    mapper: Mapper,
    opening: list[BaseEvent],
    limits: Limits,
) -> AsyncIterator[bytes]:
    """``opening`` (``RUN_STARTED`` and what precedes the log), then the log mapped: a
    chunk per read (one send, however many events)."""
    yield b"".join(encode(opening))
    async with aclosing(follow(client, session_id, start, limits)) as log_:
        async for item in log_:
            if isinstance(item, Stop):
                again = "" if item.code == "TOKEN_REVOKED" else RERUN
                yield b"".join(encode(mapper.error(item.message + again, item.code)))
                return
            events = mapper.feed(item.events, item.status)
            if mapper.finished and mapper.state.unsettled and events:
                events[-1:-1] = await _settled(client, session_id, mapper)
            read = encode(events)
            if read:
                yield b"".join(read)
            if mapper.finished:
                return


async def _settled(client: AsyncAgentClient, session_id: str, mapper: Mapper) -> list[BaseEvent]:
    """The page's own state's version, once its run committed it (``PageState.settle``)."""
    stored = await client.state_version(session_id)
    event = mapper.state.settle(0 if stored is None else stored.version)
    return [] if event is None else [event]
