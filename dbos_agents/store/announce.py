"""Announcing that a session changed, and appending its live deltas, in batches.

A ``NOTIFY`` inside the turn's transaction would take Postgres's notify lock at every
turn's commit, serializing the commits of every session. The worker instead collects the
sessions whose writes committed, and the deltas its models are streaming, and writes them
in one script per batch (the deltas, then one ``pg_notify`` statement), off the hot path,
at once when idle and then at most every ``interval_sec``: a reader hears of a change a few
milliseconds after it committed, never before, and a stream of tokens costs one small
transaction per batch, not one per token.

Readers (``client.watch``, the HTTP event stream, ``dbos-agents follow``) listen on
``CHANNEL`` and on ``runs.CHANNEL`` (a run's end, an interrupt) and re-read on each wake;
a slow timer of their own covers a lost notification.

One writer per session at a time: a turn takes the deltas not flushed yet (``settle``)
into its own record, after any flush in flight, so a session's delta ids grow in the
order they commit and a reader that resumes after an id misses none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from . import deltas, pg, runs

log = logging.getLogger("dbos_agents")

CHANNEL = "dbos_agents_events"
"""The NOTIFY channel announcing that a session changed; the payload is its id."""

CHANNELS = (CHANNEL, runs.CHANNEL)
"""What a reader of one session listens on."""


DELTAS = "+"
"""A payload's prefix when only new deltas were written (nothing committed changed): a
reader that is up to date on messages may read just those (``client.feed``)."""


def key_of(channel: str, payload: str) -> str:
    """The session a notification on ``CHANNELS`` is about (a run's end names its run),
    with ``DELTAS`` in front when it announces only new deltas."""
    return payload.split(":", 1)[1] if channel == runs.CHANNEL else payload


def session_of(channel: str, payload: str) -> str:
    """The session a notification on ``CHANNELS`` is about, whatever it announces."""
    return key_of(channel, payload).removeprefix(DELTAS)


def notify_stmt(payloads: list[str]) -> pg.Stmt:
    return (
        f"SELECT pg_notify('{CHANNEL}', s) FROM unnest(CAST(:ids AS text[])) AS s",
        {"ids": payloads},
    )


class Announcer:
    """The worker's batches (see the module doc); used on the worker's event loop."""

    def __init__(self, engine: AsyncEngine, interval_sec: float = 0.01) -> None:
        self._engine = engine
        self._interval = interval_sec
        self._queued: set[str] = set()
        self._rows: dict[str, list[deltas.Delta]] = {}
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._flushing: asyncio.Future[None] | None = None
        self.flushes = 0
        """Batches written (a figure for tests and benchmarks)."""

    def announce(self, *session_ids: str) -> None:
        """These sessions changed (their writes committed)."""
        self._queued.update(session_ids)
        self._kick()

    def append(self, session_id: str, rows: list[deltas.Delta]) -> None:
        """Deltas of a turn of ``session_id``, shown to readers with the next batch."""
        self._rows.setdefault(session_id, []).extend(rows)
        self._kick()

    async def settle(self, session_id: str) -> list[deltas.Delta]:
        """The session's deltas not flushed yet, taken out of the batches (the caller
        writes them), once no flush is in flight."""
        while self._flushing is not None:
            await asyncio.shield(self._flushing)
        return self._rows.pop(session_id, [])

    def _kick(self) -> None:
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
            await self._flush()
            await asyncio.sleep(self._interval)  # one batch per interval at most

    async def _flush(self) -> None:
        rows, self._rows = self._rows, {}
        queued, self._queued = sorted(self._queued), set()
        if not rows and not queued:
            return
        stmts = [deltas.insert_many_stmt(rows)] if any(rows.values()) else []
        payloads = queued + sorted(DELTAS + s for s, r in rows.items() if r and s not in queued)
        if payloads:
            stmts.append(notify_stmt(payloads))
        self._flushing = asyncio.get_running_loop().create_future()
        try:
            await pg.script(self._engine, stmts)
            self.flushes += 1
        except Exception as exc:
            # Kept for the next batch (or the turn's own record): nothing shown is lost,
            # and a batch that did commit is not appended twice (unique parts).
            log.debug("live batch not written", extra={"error": str(exc)})
            for sid, r in rows.items():
                self._rows[sid] = [*r, *self._rows.get(sid, [])]
            self._queued.update(queued)
            assert self._wake is not None
            self._wake.set()
            await asyncio.sleep(1.0)
        finally:
            fut, self._flushing = self._flushing, None
            fut.set_result(None)

    async def close(self) -> None:
        """Write what is queued, then stop (the worker's shutdown)."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        with contextlib.suppress(Exception):
            await self._flush()
