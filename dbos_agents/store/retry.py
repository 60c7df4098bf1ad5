"""The worker's writes and reads while the database is away: retried until it answers.

A workflow step that fails because Postgres restarted would be retried by DBOS from the
step's start, or fail the run; the writes and reads here are retried in place instead,
with a capped backoff, so they land soon after Postgres returns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from . import pg
from .unavailable import is_unavailable

log = logging.getLogger("dbos_agents")
T = TypeVar("T")
_RETRY_MAX_SEC = 2.0


def is_transient(exc: BaseException) -> bool:
    """A lost connection or a server going away: worth retrying once it is back."""
    return is_unavailable(exc) or isinstance(exc, OSError)


async def retry_transient(what: str, fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn`` until it succeeds or fails for a reason other than the database being
    away; the backoff is capped so a write lands soon after Postgres returns."""
    delay = 0.05
    while True:
        try:
            return await fn()
        except Exception as exc:
            if not is_transient(exc):
                raise
            log.warning(
                f"{what}: database unavailable, retrying",
                extra={"event": "db_retry", "what": what, "error": str(exc)[:300]},
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX_SEC)


async def fetch_one(engine: AsyncEngine, stmt: pg.Stmt, what: str) -> Any:
    """The one row ``stmt`` returns, retried while the database is away."""

    async def go() -> Any:
        async with pg.driver(engine) as conn:
            (row,) = await pg.fetch(conn, stmt)
        return row

    return await retry_transient(what, go)
