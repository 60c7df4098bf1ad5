"""New deltas for every live stream of a process, handed over as the worker announces them.

A streamed reply notifies its session at every batch the worker writes (up to a hundred a
second). If each open stream answered with its own full read (status, messages, deltas and
waits, in a transaction), a server holding 200 streams would run thousands of reads a
second. Instead the worker marks a notification that announces only new deltas
(``announce.DELTAS``) and puts the rows in it when they fit (``deltas.insert_announced_stmt``):
the listener's thread hands them to the session's streams as they are, with no read. A
notification without its rows (too long for a payload, or from an older worker) makes one
thread per client read the new deltas of every such session that has a subscriber, in one
statement; rows heard while a read of their session is due or under way wait for it, so a
stream gets its rows in order. A stream that is up to date on messages shows them as they
are. A notification of anything else (a message, a status) still wakes the stream's watch
for a full read, and so does a row written after a message the stream has not read.

A subscription is made before the stream's first full read: a row handed out before it was
committed before it, so that read sees it; every row handed out after it goes to it.
Rows a full read already returned are passed over by id. The feed hands out each session's
rows after the highest id it handed out and after what every subscriber has seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from dataclasses import dataclass, field

import sqlalchemy as sa

from . import announce, deltas
from .deltas import Logged

log = logging.getLogger("dbos_agents")


@dataclass(eq=False)
class Subscription:
    """One stream's share of the feed; ``rows`` and ``waiter`` live on its event loop."""

    session_id: str
    loop: asyncio.AbstractEventLoop
    after: int
    rows: list[Logged] = field(default_factory=list)
    waiter: asyncio.Future[None] | None = None
    """The stream's own wait, resolved by the hand-over itself (no future of the feed's
    in between: one wake-up per piece, not two)."""

    @property
    def ready(self) -> asyncio.Future[None]:
        """A future resolved when rows are handed over (at once if some are here)."""
        fut = self.loop.create_future()
        if self.rows:
            fut.set_result(None)
        else:
            self.waiter = fut
        return fut

    def take(self, after: int) -> list[Logged]:
        """The rows handed over after delta id ``after`` (the stream's cursor), in order."""
        rows, self.rows = self.rows, []
        if rows and (len(rows) > 1 or rows[0].id <= after):
            rows = [r for r in rows if r.id > after]
        self.after = max(self.after, after)
        return rows

    def _deliver(self, rows: list[Logged]) -> None:
        self.rows.extend(rows)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class DeltaFeed:
    """See the module doc. ``heard`` is the listener's tap; ``close`` stops the thread."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._subs: dict[str, list[Subscription]] = {}
        self._last: dict[str, int] = {}
        self._dirty: set[str] = set()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reading: set[str] = set()
        """Sessions the read under way reads (rows heard meanwhile wait for the next)."""
        self.reads = 0
        """Batched reads made (a figure for tests and benchmarks)."""
        self.handed = 0
        """Notifications whose rows were handed over with no read."""
        self._outbox: dict[asyncio.AbstractEventLoop, list[tuple[Subscription, list[Logged]]]] = {}
        """Rows on their way to each loop: one wake-up carries all that piled up meanwhile."""

    def subscribe(self, session_id: str, after: int) -> Subscription:
        sub = Subscription(session_id, asyncio.get_running_loop(), after)
        with self._lock:
            self._subs.setdefault(session_id, []).append(sub)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dbos-agents-delta-feed", daemon=True
                )
                self._thread.start()
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            subs = self._subs.get(sub.session_id, [])
            with contextlib.suppress(ValueError):
                subs.remove(sub)
            if not subs:
                self._subs.pop(sub.session_id, None)
                self._last.pop(sub.session_id, None)
                self._dirty.discard(sub.session_id)

    def heard(self, key: str, payload: str = "") -> None:
        """A notification (the listener's thread); ``""``: it reconnected. Rows it carries
        are handed over here, with no read, unless a read of that session is due or under
        way: they wait for it then (it reads them too), so each stream gets its rows in
        order."""
        if key.startswith(announce.DELTAS):
            sid = key.removeprefix(announce.DELTAS)
            if sid not in self._subs:  # no lock: a stale answer costs one read or one drop
                return
            rows = deltas.parse_shown(payload)[1]
            with self._lock:
                if sid not in self._subs:
                    return
                if rows is not None and sid not in self._dirty and sid not in self._reading:
                    self._hand(sid, rows)
                    self.handed += 1
                    return
                self._dirty.add(sid)
            self._wake.set()
        elif key == "":  # what was written while nobody listened: read every stream's
            with self._lock:
                self._dirty.update(self._subs)
            self._wake.set()

    def _hand(self, sid: str, got: list[Logged]) -> None:
        """Rows of ``sid`` in id order to each of its subscribers (the lock held)."""
        last = self._last.get(sid, 0)
        got = [d for d in got if d.id > last]
        if not got:
            return
        self._last[sid] = got[-1].id
        for sub in self._subs.get(sid, []):
            mine = [d for d in got if d.id > sub.after]
            if mine:
                self._post(sub, mine)

    def _post(self, sub: Subscription, rows: list[Logged]) -> None:
        """Queue ``rows`` for ``sub`` on its loop (the lock held); only the first of a loop's
        queued hand-overs wakes it (a thread-safe call is a syscall and a loop turn)."""
        box = self._outbox.get(sub.loop)
        if box:
            box.append((sub, rows))
            return
        self._outbox[sub.loop] = [(sub, rows)]
        try:
            sub.loop.call_soon_threadsafe(self._deliver_all, sub.loop)
        except RuntimeError:  # its loop is closed: nobody is left to read them
            del self._outbox[sub.loop]

    def _deliver_all(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            box = self._outbox.pop(loop, [])
        for sub, rows in box:
            sub._deliver(rows)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                # After what every subscriber has (a row at or below that it got, or its
                # full read did) and what this feed already handed out.
                after = {
                    sid: max(self._last.get(sid, 0), min(s.after for s in self._subs[sid]))
                    for sid in self._dirty
                    if self._subs.get(sid)
                }
                self._dirty.clear()
                self._reading = set(after)
            if not after:
                continue
            try:
                with self._engine.connect() as conn:
                    sql, params = deltas.feed_stmt(after)
                    rows = conn.execute(sa.text(sql), params).all()
                self.reads += 1
            except Exception as exc:  # the streams' own timers and full reads cover it
                log.debug("delta feed read failed", extra={"error": str(exc)})
                with self._lock:
                    self._reading = set()
                self._stop.wait(1.0)
                continue
            by_session: dict[str, list[Logged]] = {}
            for r in rows:
                by_session.setdefault(r.session_id, []).append(Logged.of_row(r))
            with self._lock:
                for sid, got in by_session.items():
                    if sid in self._subs:
                        self._hand(sid, got)
                self._reading = set()
