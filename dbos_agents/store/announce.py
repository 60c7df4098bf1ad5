"""Announcing that a session changed (a message, a status), so readers wake instead of poll.

A ``NOTIFY`` inside the turn's transaction would take Postgres's notify lock at every
turn's commit, serializing the commits of every session. The worker instead collects the
sessions whose writes committed and announces them in one statement, off the hot path, at
most every ``interval_sec``: a reader hears of a change a few milliseconds after it
committed, never before, and the announcement costs one small transaction per batch.

Readers (``client.watch``, the HTTP event stream, ``dbos-agents follow``) listen on
``CHANNEL`` and on ``runs.CHANNEL`` (a run's end, an interrupt) and re-read what they show
on each wake; a slow timer of their own covers a lost notification.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from . import pg, runs

log = logging.getLogger("dbos_agents")

CHANNEL = "dbos_agents_events"
"""The NOTIFY channel announcing that a session changed; the payload is its id."""

CHANNELS = (CHANNEL, runs.CHANNEL)
"""What a reader of one session listens on."""


def session_of(channel: str, payload: str) -> str:
    """The session a notification on ``CHANNELS`` is about (a run's end names its run)."""
    return payload.split(":", 1)[1] if channel == runs.CHANNEL else payload


def notify_stmt(session_ids: list[str]) -> pg.Stmt:
    return (
        f"SELECT pg_notify('{CHANNEL}', s) FROM unnest(CAST(:ids AS text[])) AS s",
        {"ids": session_ids},
    )


class Announcer:
    """Sends the announcements of one worker (see the module doc). ``announce`` is called
    on the worker's event loop after a write committed."""

    def __init__(self, engine: AsyncEngine, interval_sec: float = 0.01) -> None:
        self._engine = engine
        self._interval = interval_sec
        self._queued: set[str] = set()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def announce(self, *session_ids: str) -> None:
        self._queued.update(session_ids)
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())
        assert self._wake is not None
        self._wake.set()

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._queued = sorted(self._queued), set()
            if batch:
                try:
                    await pg.script(self._engine, [notify_stmt(batch)])
                except Exception as exc:  # readers' own timers cover a lost announcement
                    log.debug("announcement lost", extra={"error": str(exc)})
            await asyncio.sleep(self._interval)  # one batch per interval at most

    async def close(self) -> None:
        """Send what is queued, then stop (the worker's shutdown)."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if self._queued:
            with contextlib.suppress(Exception):
                await pg.script(self._engine, [notify_stmt(sorted(self._queued))])
            self._queued.clear()
