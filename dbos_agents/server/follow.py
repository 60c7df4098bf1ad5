"""A live stream for one HTTP response: ``live.follow``'s loop over the server's async
client, with the limits of the server's settings and of the token that let the reader
in, ending with a ``Stop`` (never an error) once the response has started."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing

from ..client import AsyncAgentClient
from ..errors import DatabaseUnavailableError, SessionNotFoundError
from ..events import Cursor
from ..live import follow as live
from ..live.follow import Read, Stop
from .auth import VerifiedToken
from .settings import ServerSettings

log = logging.getLogger("dbos_agents.server")

__all__ = ["Limits", "Read", "Stop", "follow"]


class Limits(live.Limits):
    """``live.follow.Limits`` as the server sets them."""

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


async def follow(
    client: AsyncAgentClient,
    session_id: str,
    after: Cursor,
    limits: live.Limits,
    *,
    keep_following: bool = True,
) -> AsyncGenerator[Read | Stop, None]:
    """The log after ``after`` (``live.follow``); the caller has read the session through
    its scope already. A database that stops answering ends it with a ``Stop``: the
    response has started, the client resumes from its cursor."""

    async def read(cursor: Cursor) -> live.EventBatch:
        return await client.read_events(session_id, cursor)

    async with await client.live_watch(session_id, check=False) as watch:
        items = live.follow(read, watch, after, limits, keep_following=keep_following)
        try:
            async with aclosing(items):
                async for item in items:
                    yield item
        except (DatabaseUnavailableError, SessionNotFoundError) as exc:
            log.warning("event stream ended early: %r", exc, extra={"error": str(exc)})
            yield Stop("DATABASE_UNAVAILABLE", "the event stream ended early")
