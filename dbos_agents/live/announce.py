"""Announcing that a session changed, and appending its live deltas, in batches.

A ``NOTIFY`` inside the turn's transaction would take Postgres's notify lock at every
turn's commit, serializing the commits of every session. The worker instead collects the
sessions whose writes committed, and the deltas its models are streaming, and writes them
in one script per batch (the deltas, each session's announced with its rows, then one
``pg_notify`` statement for the sessions whose writes committed), off the hot path,
at once when idle and then at most every ``interval_sec``: a reader hears of a change a few
milliseconds after it committed, never before, and a stream of tokens costs one small
transaction per batch, not one per token.

Readers (``live.watch``, the HTTP event stream, ``dbos-agents follow``) listen on
``CHANNEL`` and on ``runs.CHANNEL`` (a run's end, an interrupt) and re-read on each wake;
a slow timer of their own covers a lost notification.

One writer per session at a time: a turn takes the deltas not flushed yet (``settle``)
into its own record, after any flush in flight, so a session's delta ids grow in the
order they commit and a reader that resumes after an id misses none.

A turn may *stage* statements that must commit before its first deltas (the tool results
its reply reads, fenced by its run): that session's first batch is then a transaction of
its own, the staged statements and then its deltas; a turn whose reply is done before a
batch was written takes them back (``take_staged``) into its record. Either way they cost
no commit of their own.

A writer that no longer owns its run (``fence.Writer``, adopted while alive) has its
pieces refused by Postgres: the batch leaves them out (or, holding staged statements,
fails as a whole) and the announcer drops them, and every later piece of that writer,
instead of keeping them for the next batch; ``refusal`` resolves, so the stream stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncEngine

from ..store import fence, pg, runs
from ..store.sessions import EVENTS_CHANNEL
from . import deltas

log = logging.getLogger("dbos_agents")

CHANNEL = EVENTS_CHANNEL
"""The NOTIFY channel announcing that a session changed; the payload is its id."""

CHANNELS = (CHANNEL, runs.CHANNEL)
"""What a reader of one session listens on."""


DELTAS = "+"
"""A payload's prefix when only new deltas were written (nothing committed changed): a
reader that is up to date on messages may show just those (``live.feed``), which the
payload carries when they fit (``deltas.insert_announced_stmt``)."""


def key_of(channel: str, payload: str) -> str:
    """The session a notification on ``CHANNELS`` is about (a run's end names its run),
    with ``DELTAS`` in front when it announces only new deltas (and without the rows such
    a notification may carry, ``deltas.parse_shown``)."""
    if channel == runs.CHANNEL:
        return payload.split(":", 1)[1]
    return payload.partition(" ")[0]


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

    def __init__(
        self,
        engine: AsyncEngine,
        interval_sec: float = 0.005,
        fenced: Callable[[BaseException], bool] = lambda exc: False,
    ) -> None:
        self._engine = engine
        self._fenced = fenced
        """Whether a batch failed because staged statements were fenced off (dropped)."""
        self._interval = interval_sec
        self._queued: set[str] = set()
        self._rows: dict[str, list[deltas.Delta]] = {}
        self._staged: dict[str, list[pg.Stmt]] = {}
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._flushing: asyncio.Future[None] | None = None
        self._inflight: frozenset[str] = frozenset()
        """Sessions whose deltas the flush in flight writes."""
        self._announcing: frozenset[str] = frozenset()
        """Sessions the flush in flight announces."""
        self._next: asyncio.Future[None] | None = None
        """Resolved when the next flush is over (``written``)."""
        self._refused: set[fence.Writer] = set()
        """Writers whose pieces Postgres refused (stale executions)."""
        self._refusals: dict[fence.Writer, asyncio.Future[None]] = {}
        self.flushes = 0
        """Batches written (a figure for tests and benchmarks)."""

    def announce(self, *session_ids: str) -> None:
        """These sessions changed (their writes committed)."""
        self._queued.update(session_ids)
        self._kick()

    async def withdraw(self, session_id: str) -> bool:
        """Take the session's announcement back (a run's end, whose own notification will
        wake its readers after all of it): once no batch in flight announces it, it is
        no longer queued. Returns whether it was (``announce`` it again if the end fails)."""
        while self._flushing is not None and session_id in self._announcing:
            await asyncio.shield(self._flushing)
        queued = session_id in self._queued
        self._queued.discard(session_id)
        return queued

    def append(self, session_id: str, rows: list[deltas.Delta]) -> None:
        """Deltas of a turn of ``session_id``, shown to readers with the next batch (none
        of a refused writer's)."""
        if rows and rows[-1].writer in self._refused:
            return
        self._rows.setdefault(session_id, []).extend(rows)
        self._kick()

    def refused(self, writer: fence.Writer | None) -> bool:
        """Whether Postgres refused this writer's pieces (it no longer owns its run)."""
        return writer is not None and writer in self._refused

    def refusal(self, writer: fence.Writer) -> asyncio.Future[None]:
        """Resolved once this writer's pieces are refused (``release`` it when done)."""
        fut = self._refusals.get(writer)
        if fut is None:
            fut = self._refusals[writer] = asyncio.get_running_loop().create_future()
            if writer in self._refused:
                fut.set_result(None)
        return fut

    def release(self, writer: fence.Writer) -> None:
        self._refusals.pop(writer, None)

    def _refuse(self, by_session: dict[str, list[deltas.Delta]]) -> None:
        """These sessions' rows were refused: drop them, and whatever their writers still
        queue or staged; wake their streams."""
        for sid, rows in by_session.items():
            writer = rows[-1].writer if rows else None
            if writer is None:
                continue
            self._refused.add(writer)
            later = self._rows.pop(sid, [])
            self._staged.pop(sid, None)
            log.warning(
                f"live pieces refused: workflow {writer.workflow_id} is no longer owned by this"
                f" execution (adopted); {len(rows) + len(later)} piece(s) of session {sid} not"
                " written, its stream stops",
                extra={
                    "event": "stale_writer",
                    "session_id": sid,
                    "workflow_id": writer.workflow_id,
                    "refused": len(rows) + len(later),
                },
            )
            fut = self._refusals.get(writer)
            if fut is not None and not fut.done():
                fut.set_result(None)

    def stage(self, session_id: str, stmts: list[pg.Stmt]) -> None:
        """Statements to commit with, and before, the session's next deltas (see the
        module doc). They must hold the session's lock and be fenced by their run: a
        fenced batch drops them (the turn is fenced too) and shows its deltas anyway."""
        self._staged[session_id] = stmts

    def take_staged(self, session_id: str) -> bool:
        """Whether the session's staged statements are still unwritten (the caller writes
        them now); after ``settle``, so no batch of them is in flight."""
        return self._staged.pop(session_id, None) is not None

    @property
    def interval(self) -> float:
        return self._interval

    async def written(self, session_id: str, rounds: int = 3) -> None:
        """Wait until the batches wrote the session's deltas appended so far, for at most
        ``rounds`` flushes (``settle`` then hands the caller what is left): the end of a
        reply that readers watched live is shown as its other pieces were, not with the
        turn's record and the run's end."""
        for _ in range(rounds):
            if session_id not in self._rows and session_id not in self._inflight:
                return
            if self._next is None:
                self._next = asyncio.get_running_loop().create_future()
            waiting = self._next
            self._kick()
            await asyncio.shield(waiting)

    async def settle(self, session_id: str) -> list[deltas.Delta]:
        """The session's deltas not flushed yet, taken out of the batches (the caller
        writes them), once no flush of its deltas is in flight (a batch of others' deltas
        or of announcements does not hold it up)."""
        while self._flushing is not None and session_id in self._inflight:
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
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            started = loop.time()
            try:
                await self._flush()
            finally:
                self._flushed()
            # One batch per interval at most, counted from its start: a piece waits for
            # the interval, not for the interval and the batch before it.
            await asyncio.sleep(max(0.0, self._interval - (loop.time() - started)))

    def _flushed(self) -> None:
        done, self._next = self._next, None
        if done is not None and not done.done():
            done.set_result(None)

    async def _flush(self) -> None:
        rows, self._rows = self._rows, {}
        queued, self._queued = sorted(self._queued), set()
        if not rows and not queued:
            return
        own = {
            sid: self._staged.pop(sid) for sid in list(rows) if rows[sid] and sid in self._staged
        }
        shared = {sid: r for sid, r in rows.items() if r and sid not in own}
        only_deltas = sorted(s for s in shared if s not in queued)
        stmts = (
            [deltas.insert_announced_stmt(shared, CHANNEL, DELTAS, only_deltas)] if shared else []
        )
        if queued:
            stmts.append(notify_stmt(queued))
        self._flushing = asyncio.get_running_loop().create_future()
        self._inflight = frozenset(s for s, r in rows.items() if r)
        self._announcing = frozenset([*queued, *self._inflight])
        try:
            batches = (
                [self._write(stmts, shared, queued, {}, announced=bool(shared))] if stmts else []
            )
            batches += [
                self._write(self._own(sid, rows[sid], st), {sid: rows[sid]}, [sid], {sid: st})
                for sid, st in own.items()
            ]
            failed = await asyncio.gather(*batches)
            self.flushes += len(failed)
            if any(failed):
                assert self._wake is not None
                self._wake.set()
                await asyncio.sleep(1.0)
        finally:
            fut, self._flushing = self._flushing, None
            self._inflight = self._announcing = frozenset()
            fut.set_result(None)

    @staticmethod
    def _own(sid: str, rows: list[deltas.Delta], staged: list[pg.Stmt]) -> list[pg.Stmt]:
        """A session's batch with staged statements: they commit first, with its deltas
        (their notification says something committed, not just deltas)."""
        return [*staged, deltas.insert_stmt(sid, rows), notify_stmt([sid])]

    async def _write(
        self,
        stmts: list[pg.Stmt],
        rows: dict[str, list[deltas.Delta]],
        queued: list[str],
        staged: dict[str, list[pg.Stmt]],
        *,
        announced: bool = False,
    ) -> bool:
        """One batch; True when it was not written (what it held is kept for the next).
        ``announced``: its first statement is ``insert_announced_stmt``, which names the
        sessions whose rows it refused."""
        try:
            async with pg.driver(self._engine) as conn:
                results = await pg.script_rows(conn, stmts)
        except Exception as exc:
            if fence.is_stale(exc):  # one session's batch with staged statements
                self._refuse(rows)
                return False
            # Kept for the next batch (or the turn's own record): nothing shown is lost,
            # and a batch that did commit is not appended twice (unique parts).
            log.debug("live batch not written", extra={"error": str(exc)})
            fenced = self._fenced(exc)
            for sid, st in staged.items():
                if not fenced:  # a fenced run's results are not written (nor its turn)
                    self._staged.setdefault(sid, st)
            for sid, r in rows.items():
                self._rows[sid] = [*r, *self._rows.get(sid, [])]
            self._queued.update(queued)
            return True
        if announced and results[0] and (refused := results[0][0].refused):
            self._refuse({sid: rows[sid] for sid in refused if sid in rows})
        return False

    async def close(self) -> None:
        """Write what is queued, then stop (the worker's shutdown)."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        try:
            with contextlib.suppress(Exception):
                await self._flush()
        finally:
            self._flushed()
