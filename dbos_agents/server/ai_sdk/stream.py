"""A run's events, live, as an AI SDK UI message stream (SSE ``data:`` lines, then
``data: [DONE]``), on the loop of ``server/events.py``: read the log after a cursor, map,
wait for the worker's announcement (or the safety net's timer), read again. The stream
ends when the run does, when it waits on the page (a client tool, an approval), when the
token that let it in expires or is revoked (an ``error`` part), after
``events_max_stream_sec``, or when the database stops answering (an ``error`` part: the
page resumes with ``resumeStream``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import sqlalchemy as sa
from sse_starlette import EventSourceResponse, ServerSentEvent

from ...client import AsyncAgentClient
from ...client.live import Progress
from ...errors import DatabaseUnavailableError, SessionNotFoundError
from ...events import Cursor
from ...store.schema import SCHEMA as S
from ..events import SEP
from ..settings import ServerSettings
from .mapping import RunParts
from .parts import ErrorPart, Part, Start

log = logging.getLogger("dbos_agents.server")

HEADERS = {
    "Cache-Control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
}
"""What ``createUIMessageStreamResponse`` sends (sse-starlette adds the content type and
``X-Accel-Buffering: no``)."""

TOKEN_HEADER = "x-dbos-agents-token"


@dataclass(frozen=True)
class RunCursors:
    start: Cursor
    """Before the run's first message: a replay of the whole run."""
    asked: Cursor
    """After the run's last assistant message (the one whose calls wait): what follows an
    answer, server tools' results of that turn included."""


def run_cursors(engine: sa.Engine, session_id: str, run_seq: int) -> RunCursors:
    """Where a run's stream starts; a run with no message yet starts at the log's end."""
    with engine.connect() as conn:
        row = conn.execute(
            sa.text(
                "SELECT min(seq) FILTER (WHERE run_seq >= :r) AS first,"
                " max(seq) FILTER (WHERE run_seq = :r AND role = 'assistant') AS asked,"
                f" coalesce(max(seq), 0) AS last FROM {S}.messages WHERE session_id = :s"
            ),
            {"s": session_id, "r": run_seq},
        ).one()
    start = Cursor(row.first - 1) if row.first is not None else Cursor(row.last)
    asked = Cursor(row.asked) if row.asked is not None else start
    return RunCursors(start, asked)


@dataclass(frozen=True)
class Limits:
    poll_interval: float
    max_duration: float
    valid_until: float | None = None
    """The token's expiry (unix seconds)."""
    generation: int | None = None
    """The token's generation: a revoke ends the stream."""


async def run_parts(
    client: AsyncAgentClient,
    session_id: str,
    parts: RunParts,
    after: Cursor,
    limits: Limits,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[Part]:
    """The run's parts after ``after`` until ``parts.done`` (see the module doc)."""
    started = time.monotonic()
    progress = Progress(after, follow=True)
    async with await client.live_watch(session_id, check=False) as live:
        while True:
            try:
                batch = await client.read_events(session_id, progress.cursor)
            except (DatabaseUnavailableError, SessionNotFoundError) as exc:
                log.warning("chat stream ended early", extra={"error": str(exc)})
                yield ErrorPart(error_text="the stream was cut short: resume it")
                return
            events, step = progress.take(batch)
            for p in parts.feed(events, batch.status if step != "more" else None):
                yield p
            if parts.done:
                return
            if step == "more":
                continue
            if time.monotonic() - started >= limits.max_duration:
                return
            if limits.valid_until is not None and clock() >= limits.valid_until:
                yield ErrorPart(error_text="the session token expired: refresh it and resume")
                return
            if limits.generation is not None and batch.token_generation != limits.generation:
                yield ErrorPart(error_text="the session token was revoked")
                return
            while True:
                elapsed = time.monotonic() - started
                left = [limits.poll_interval, limits.max_duration - elapsed]
                if limits.valid_until is not None:
                    left.append(limits.valid_until - clock())
                rows = await live.wait(max(0.01, min(left)), progress.cursor)
                if rows is None:
                    break
                for p in parts.feed(progress.shown(rows)):
                    yield p
                if parts.done:
                    return
                if time.monotonic() - started >= limits.max_duration or (
                    limits.valid_until is not None and clock() >= limits.valid_until
                ):
                    break  # the checks above


def limits_of(
    settings: ServerSettings, valid_until: float | None, generation: int | None
) -> Limits:
    return Limits(
        settings.events_poll_interval_sec,
        settings.events_max_stream_sec,
        valid_until,
        generation,
    )


async def _wire(start: Start, body: AsyncIterator[Part]) -> AsyncIterator[ServerSentEvent]:
    yield ServerSentEvent(start.wire(), sep=SEP)
    async for p in body:
        yield ServerSentEvent(p.wire(), sep=SEP)
    yield ServerSentEvent("[DONE]", sep=SEP)


def respond(
    settings: ServerSettings,
    start: Start,
    body: AsyncIterator[Part],
    headers: dict[str, str] | None = None,
) -> EventSourceResponse:
    """The SSE response: ``start``, the body's parts, ``[DONE]``."""
    return EventSourceResponse(
        _wire(start, body),
        headers={**HEADERS, **(headers or {})},
        ping=settings.events_keepalive_sec,
        sep=SEP,
        send_timeout=settings.events_send_timeout_sec,
    )


async def parts_of(*parts: Part) -> AsyncIterator[Part]:
    for p in parts:
        yield p
