"""Waiting for a session to change without polling: ``AgentClient.watch`` and ``wait``.

The worker announces every committed change of a session (``live.announce``) and every
run's end (``store.runs``). A sync watch holds a LISTEN connection of its own (a CLI, a
script); the async client shares one listener per client among all its watches (the HTTP
server's event streams). Either way a watcher re-reads what it shows after each wake, and
a slow timer of the caller's choosing covers a notification lost with a connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import psycopg
import sqlalchemy as sa

from ..events import Cursor
from ..store.db import libpq_url
from . import announce
from .deltas import Logged
from .feed import DeltaFeed, Subscription
from .listen import Listener


class SessionWatch:
    """Wakes when ``session_id`` changes (sync; a LISTEN connection of its own).

    Listening starts when the watch is made, so a change committed after that and before a
    ``wait`` is not missed: make the watch, read, then ``wait``."""

    def __init__(self, database_url: str, session_id: str, connect_timeout_sec: float) -> None:
        self.session_id = session_id
        self._url = libpq_url(database_url)
        self._timeout = max(1, round(connect_timeout_sec))
        self._conn: psycopg.Connection[object] | None = None
        self._connect()

    def _connect(self) -> None:
        conn: psycopg.Connection[object] = psycopg.connect(
            self._url, autocommit=True, connect_timeout=self._timeout
        )
        for channel in announce.CHANNELS:
            conn.execute(f"LISTEN {channel}")
        self._conn = conn

    def wait(self, timeout: float) -> bool:
        """Block until the session changes (True) or ``timeout`` seconds pass (False).
        A lost connection counts as a change: what it would have announced is unknown."""
        deadline = time.monotonic() + timeout
        try:
            if self._conn is None or self._conn.closed:
                self._connect()
                return True
            while (left := deadline - time.monotonic()) > 0:
                for note in self._conn.notifies(timeout=left, stop_after=1):
                    if announce.session_of(note.channel, note.payload) == self.session_id:
                        return True
            return False
        except psycopg.OperationalError:
            self.close()
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            return True

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def __enter__(self) -> SessionWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Watches:
    """One LISTEN connection shared by an async client's watches, opened on first use, and
    the delta feed of its live streams (``feed.py``)."""

    def __init__(self, database_url: str, connect_timeout_sec: float, engine: sa.Engine) -> None:
        self._url = libpq_url(database_url)
        self._connect_timeout = connect_timeout_sec
        self._lock = threading.Lock()
        self._listener: Listener | None = None
        self.feed = DeltaFeed(engine)

    def started(self) -> Listener | None:
        """The listener if it is running already (no lock, no thread hop: the common case)."""
        return self._listener

    def listener(self) -> Listener:
        with self._lock:
            if self._listener is None:
                self._listener = Listener(
                    self._url,
                    announce.CHANNELS,
                    connect_timeout_sec=self._connect_timeout,
                    key=announce.key_of,
                    tap=self.feed.heard,
                )
                self._listener.start()
                # Listening before the first watch is armed, so its first wake is news
                # (a connect wakes every waiter). A database that does not answer yet
                # leaves the watches to the listener's reconnects and their timers.
                self._listener.listening.wait(self._connect_timeout)
            return self._listener

    def stop(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()
        self.feed.close()


class AsyncSessionWatch:
    """Wakes when ``session_id`` changes (async; holds no thread and no connection of its
    own). Armed when made: make it, read, then ``wait``; each wake re-arms it."""

    def __init__(self, listener: Listener, session_id: str) -> None:
        self.session_id = session_id
        self._listener = listener
        self._note = listener.waiter(session_id)

    async def wait(self, timeout: float) -> bool:  # noqa: ASYNC109 -- a bounded wait is the point
        """Until the session changes (True) or ``timeout`` seconds pass (False)."""
        done, _ = await asyncio.wait({self._note}, timeout=timeout)
        if not done:
            return False
        self.rearm()  # before the caller reads again
        return True

    @property
    def note(self) -> asyncio.Future[None]:
        """Resolved at the next change (for waiting on it with other things)."""
        return self._note

    def fired(self) -> bool:
        return self._note.done()

    def rearm(self) -> None:
        """After a wake: wait for the next change."""
        self._note = self._listener.waiter(self.session_id)

    def close(self) -> None:
        self._listener.discard(self.session_id, self._note)

    async def __aenter__(self) -> AsyncSessionWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class LiveWatch:
    """A stream's wait between full reads: its session's watch (a committed change) and
    its feed subscription (new deltas). Make it before the first full read."""

    def __init__(self, watch: AsyncSessionWatch, feed: DeltaFeed, session_id: str) -> None:
        self.watch = watch
        self._feed = feed
        self._sub = feed.subscribe(session_id, 0)

    async def wait(self, timeout: float, cursor: Cursor) -> list[Logged] | None:  # noqa: ASYNC109
        """New deltas after ``cursor`` that a reader up to date with messages may show as
        they are; None: read in full (something else changed, a row follows a message
        the reader has not read, a tool's note or a sub-agent's wait came, or ``timeout``
        seconds passed)."""
        rows = self._sub.take(cursor.delta)
        if not rows and not self.watch.fired():
            await _either(self.watch.note, self._sub, timeout)
            rows = self._sub.take(cursor.delta)
        if self.watch.fired():
            self.watch.rearm()
            return None
        if not rows or any(r.after_seq > cursor.seq or r.kind == "progress" for r in rows):
            return None  # a note may come with its wait, which only a full read reads
        return rows

    def close(self) -> None:
        self._feed.unsubscribe(self._sub)
        self.watch.close()

    async def __aenter__(self) -> LiveWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


async def _either(
    note: asyncio.Future[None],
    sub: Subscription,
    timeout: float,  # noqa: ASYNC109 -- a bounded wait is the point
) -> None:
    """Until ``note`` is done, the feed hands ``sub`` rows, or ``timeout`` seconds pass:
    ``asyncio.wait``'s ``FIRST_COMPLETED`` without the sets and callbacks it makes for any
    number of awaitables (a stream waits once per piece it shows). The hand-over resolves
    this wait's future itself."""
    if sub.rows or note.done():
        return
    woken = sub.loop.create_future()

    def wake(_: object = None) -> None:
        if not woken.done():
            woken.set_result(None)

    sub.waiter = woken
    note.add_done_callback(wake)
    timer = sub.loop.call_later(timeout, wake)
    try:
        await woken
    finally:
        timer.cancel()
        note.remove_done_callback(wake)
        sub.waiter = None
