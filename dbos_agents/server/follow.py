"""Following a session's live log for one HTTP response: the loop every streaming route
shares (``GET /sessions/{id}/events``, the AI SDK and AG-UI adapters), each mapping what it
yields to its own wire format.

A live watch is made before the first read (so no change falls between them); reads go on
until the log's end, then a wait that new deltas (the client's feed) or the worker's
announcements end, with ``poll_interval`` as the safety net. The follower stops on its own
when it must (a ``Stop``): the response has lasted ``max_duration``, the token that let it
in expired or was revoked, or the database stopped answering. A consumer that is done
early (its run ended, it waits on the client) leaves the loop; wrap it in
``contextlib.aclosing`` so the watch is closed at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Literal

from ..client import AsyncAgentClient
from ..client.live import Progress
from ..errors import DatabaseUnavailableError, SessionNotFoundError
from ..events import Cursor, SessionEvent
from ..records import StatusEvent
from .auth import VerifiedToken
from .settings import ServerSettings

log = logging.getLogger("dbos_agents.server")

__all__ = ["Limits", "Read", "Stop", "follow"]

StopCode = Literal["STREAM_TIMEOUT", "TOKEN_EXPIRED", "TOKEN_REVOKED", "DATABASE_UNAVAILABLE"]


@dataclass(frozen=True)
class Limits:
    poll_interval: float
    max_duration: float
    valid_until: float | None = None
    """The token's expiry (unix seconds), for a stream a token let in."""
    generation: int | None = None
    """That token's generation: a revoke ends the stream."""
    clock: Callable[[], float] = time.time

    @classmethod
    def of(
        cls,
        settings: ServerSettings,
        token: VerifiedToken | None,
        clock: Callable[[], float] = time.time,
    ) -> Limits:
        return cls(
            settings.events_poll_interval_sec,
            settings.events_max_stream_sec,
            token.expires if token is not None else None,
            token.generation if token is not None else None,
            clock,
        )


@dataclass(frozen=True)
class Read:
    """Events to hand out now; ``status`` after a read that reached the log's end."""

    events: list[SessionEvent]
    status: StatusEvent | None = None


@dataclass(frozen=True)
class Stop:
    """The stream must end now; the client resumes from the last event it got."""

    code: StopCode
    message: str


async def follow(
    client: AsyncAgentClient,
    session_id: str,
    after: Cursor,
    limits: Limits,
    *,
    keep_following: bool = True,
) -> AsyncGenerator[Read | Stop, None]:
    """The log after ``after`` (see the module doc). ``keep_following=False``: what exists
    now (its last ``Read`` carries the status), then the end. The caller has read the
    session through its scope already."""
    started = time.monotonic()
    progress = Progress(after, keep_following)
    async with await client.live_watch(session_id, check=False) as live:
        while True:
            try:
                batch = await client.read_events(session_id, progress.cursor)
            except (DatabaseUnavailableError, SessionNotFoundError) as exc:
                # The response has started: end it; the client resumes from its cursor.
                log.warning("event stream ended early: %r", exc, extra={"error": str(exc)})
                yield Stop("DATABASE_UNAVAILABLE", "the event stream ended early")
                return
            events, step = progress.take(batch)
            yield Read(events, batch.status if step != "more" else None)
            if step == "end":
                return
            if step == "more":
                continue
            stop = _stop(limits, started, batch.token_generation)
            if stop is not None:
                yield stop
                return
            # New deltas are shown as the feed hands them over; anything else (or the
            # safety net's timer) ends the wait with a full read, and its checks above.
            while True:
                left = [limits.poll_interval, limits.max_duration - (time.monotonic() - started)]
                if limits.valid_until is not None:
                    left.append(limits.valid_until - limits.clock())
                rows = await live.wait(max(0.01, min(left)), progress.cursor)
                if rows is None:
                    break
                yield Read(progress.shown(rows))
                if _stop(limits, started, limits.generation) is not None:
                    break  # the checks above


def _stop(limits: Limits, started: float, generation: int | None) -> Stop | None:
    if time.monotonic() - started >= limits.max_duration:
        return Stop("STREAM_TIMEOUT", "the stream reached its time limit")
    if limits.valid_until is not None and limits.clock() >= limits.valid_until:
        return Stop("TOKEN_EXPIRED", "the session token expired: refresh it")
    if limits.generation is not None and generation != limits.generation:
        return Stop("TOKEN_REVOKED", "the session token was revoked")
    return None
