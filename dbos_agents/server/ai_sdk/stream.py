"""A run's events, live, as an AI SDK UI message stream (SSE ``data:`` lines, then
``data: [DONE]``), on the loop every stream route shares (``server/follow.py``): read the log after a cursor, map,
wait for the worker's announcement (or the safety net's timer), read again. The stream
ends when the run does, when it waits on the page (a client tool, an approval), when the
token that let it in expires or is revoked (an ``error`` part), after
``events_max_stream_sec``, or when the database stops answering (an ``error`` part: the
page resumes with ``resumeStream``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

from sse_starlette import EventSourceResponse, ServerSentEvent

from ...client import AsyncAgentClient
from ...events import Cursor
from ..events import SEP
from ..follow import Limits, Stop, follow
from ..settings import ServerSettings
from .mapping import RunParts
from .parts import ErrorPart, Part, Start

HEADERS = {
    "Cache-Control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
}
"""What ``createUIMessageStreamResponse`` sends (sse-starlette adds the content type and
``X-Accel-Buffering: no``)."""

TOKEN_HEADER = "x-dbos-agents-token"


async def run_parts(
    client: AsyncAgentClient,
    session_id: str,
    parts: RunParts,
    after: Cursor,
    limits: Limits,
) -> AsyncIterator[list[Part]]:
    """The run's parts after ``after`` until ``parts.done`` (see the module doc), a list
    per read (sent as one chunk)."""
    async with aclosing(follow(client, session_id, after, limits)) as log_:
        async for item in log_:
            if isinstance(item, Stop):
                if item.code != "STREAM_TIMEOUT":
                    yield [ErrorPart(error_text=_STOPPED[item.code])]
                return
            read = parts.feed(item.events, item.status)
            if read:
                yield read
            if parts.done:
                return


_STOPPED = {
    "TOKEN_EXPIRED": "the session token expired: refresh it and resume",
    "TOKEN_REVOKED": "the session token was revoked",
    "DATABASE_UNAVAILABLE": "the stream was cut short: resume it",
}


def _frame(data: str) -> bytes:
    return ServerSentEvent(data, sep=SEP).encode()


async def _wire(start: Start, body: AsyncIterator[list[Part]]) -> AsyncIterator[bytes]:
    yield _frame(start.wire())
    async for read in body:
        yield b"".join(_frame(p.wire()) for p in read)
    yield _frame("[DONE]")


def respond(
    settings: ServerSettings,
    start: Start,
    body: AsyncIterator[list[Part]],
    headers: dict[str, str] | None = None,
) -> EventSourceResponse:
    """The SSE response: ``start``, the body's parts (a chunk per list), ``[DONE]``."""
    return EventSourceResponse(
        _wire(start, body),
        headers={**HEADERS, **(headers or {})},
        ping=settings.events_keepalive_sec,
        sep=SEP,
        send_timeout=settings.events_send_timeout_sec,
    )


async def parts_of(*parts: Part) -> AsyncIterator[list[Part]]:
    yield list(parts)
