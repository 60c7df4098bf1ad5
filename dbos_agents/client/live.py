"""``AgentClient``'s reads of a session as it changes: ``events``, ``read_events``,
``stream``, ``watch`` and ``wait`` (a base class of ``AgentClient``, kept apart so each
module stays readable).

``stream`` is a loop over ``read_events`` driven by ``Progress``, which the async client
and the HTTP event stream share: watch, read, hand out the events, wait for a change,
read again. The watch is made before the first read, so a change committed between a
read and the wait still wakes it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import sqlalchemy as sa

from .. import storable
from ..errors import SessionNotFoundError
from ..events import Cursor, SessionEvent
from ..outcome import TERMINAL, SessionInfo
from ..records import SessionEvents, StatusEvent
from ..settings import Settings
from ..store import events as event_log
from ..store.deltas import Logged
from ..store.merge import merge
from ..store.unavailable import translated
from .scope import Scope
from .watch import SessionWatch

Step = Literal["more", "wait", "end"]


@dataclass(frozen=True)
class EventBatch:
    """One read of the live log (``AgentClient.read_events``)."""

    status: StatusEvent
    events: list[SessionEvent]
    """In order, no status; each (but ``pending``) carries its cursor."""
    cursor: Cursor
    """Where the next read starts."""
    complete: bool
    """False: more was held back; read again before reporting a status."""
    token_generation: int


@dataclass
class Progress:
    """A stream between reads: its cursor and the run ends it reported."""

    cursor: Cursor
    follow: bool
    reported: tuple[str, int] | None = field(default=None)

    def take(self, batch: EventBatch) -> tuple[list[SessionEvent], Step]:
        """The events to hand out now, and what to do next: read again at once (``more``),
        wait for a change (``wait``) or stop (``end``: not following, at the end)."""
        self.cursor = batch.cursor
        events = list(batch.events)
        if not batch.complete:
            return events, "more"
        st = batch.status
        if not self.follow:
            return [*events, st], "end"
        if st.status in TERMINAL and self.reported != (st.status, st.run_seq):
            self.reported = (st.status, st.run_seq)
            events.append(st)
        return events, "wait"

    def shown(self, rows: list[Logged]) -> list[SessionEvent]:
        """New deltas handed over between full reads (``LiveWatch``), as events."""
        merged = merge(self.cursor, [], rows, limit=len(rows) + 1)
        self.cursor = merged.cursor
        return merged.events


def cursor_of(after: str | Cursor | None) -> Cursor:
    if after is None:
        return Cursor()
    return after if isinstance(after, Cursor) else Cursor.parse(after)


class LiveReads:
    """See the module doc; ``AgentClient`` provides the attributes declared here."""

    engine: sa.Engine
    settings: Settings
    database_url: str
    _scope: Scope | None

    def _own(self, session_id: str) -> SessionInfo:
        raise NotImplementedError

    @translated
    def events(
        self, session_id: str, after_seq: int = 0, *, limit: int = event_log.BATCH
    ) -> SessionEvents:
        """The session's status, then up to ``limit`` messages with ``seq > after_seq``
        (messages only: ``stream`` is the live read). ``status`` is ``None`` when there is
        no such session; a full batch means read again."""
        storable.check_id(session_id, "session_id")
        storable.check_int(after_seq, "after_seq", 0)
        storable.check_int(limit, "limit", 1, event_log.BATCH)
        read = event_log.read_since(self.engine, session_id, after_seq, limit)
        if self._scope is not None:
            if read.identity is None:
                raise SessionNotFoundError(session_id)
            self._scope.check(session_id, *read.identity)
        return read.events

    @translated
    def read_events(
        self, session_id: str, after: str | Cursor | None = None, *, limit: int = event_log.BATCH
    ) -> EventBatch:
        """One read of the live log after a cursor (``"N"`` or ``"N.D"``): what ``stream``
        repeats. At most ``limit`` messages and ``limit`` deltas."""
        storable.check_id(session_id, "session_id")
        storable.check_int(limit, "limit", 1, event_log.BATCH)
        start = cursor_of(after)
        read = event_log.read_log(
            self.engine, session_id, start, limit, self.settings.dbos_system_schema
        )
        return self._batch(session_id, read)

    def _batch(self, session_id: str, read: event_log.LogRead) -> EventBatch:
        """A read of the live log as the caller may see it (its scope checked)."""
        if read.status is None or read.identity is None or read.token_generation is None:
            raise SessionNotFoundError(session_id)
        if self._scope is not None:
            self._scope.check(session_id, *read.identity)
        log = read.log
        return EventBatch(read.status, log.events, log.cursor, log.complete, read.token_generation)

    @translated
    def stream(
        self,
        session_id: str,
        after: str | None = None,
        *,
        follow: bool = True,
        timeout: float | None = None,
        poll: float = 5.0,
    ) -> Iterator[SessionEvent]:
        """The session's events after ``after`` (an event's ``cursor``; None: from the
        start), in order: deltas as the model writes them, retractions, messages, open
        waits, and a ``StatusEvent`` when a run ends. ``follow``: keep going across runs
        until ``timeout`` seconds pass or the caller stops iterating; otherwise stop at
        the current end with the current status. Woken by the worker's announcements;
        ``poll`` is only the safety net's interval."""
        storable.check_id(session_id, "session_id")
        start = cursor_of(after)
        self._own(session_id)
        return self._streamed(session_id, start, follow, timeout, poll)

    def _streamed(
        self, session_id: str, start: Cursor, follow: bool, timeout: float | None, poll: float
    ) -> Iterator[SessionEvent]:
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        progress = Progress(start, follow)
        with self._session_watch(session_id) as watch:  # ``stream`` checked the session
            while True:
                events, step = progress.take(self.read_events(session_id, progress.cursor))
                yield from events
                if step == "end":
                    return
                if step == "more":
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                watch.wait(min(poll, left))

    @translated
    def watch(self, session_id: str) -> SessionWatch:
        """A watch on the session: ``watch.wait(timeout)`` returns True as soon as the
        worker commits a change to it (a message, a delta, a status, a run's end), False
        after ``timeout`` seconds. Read what you show after making it and after each wake.
        It holds a connection of its own: use it as a context manager."""
        self._own(session_id)
        return self._session_watch(session_id)

    def _session_watch(self, session_id: str) -> SessionWatch:
        return SessionWatch(self.database_url, session_id, self.settings.connect_timeout_sec)

    @translated
    def wait(self, session_id: str, *, timeout: float = 60.0, poll: float = 5.0) -> SessionInfo:
        """Until the session's current run ends; raises ``TimeoutError``. Woken by the
        run's end; ``poll`` is only the safety net's interval (a lost notification)."""
        storable.check_id(session_id, "session_id")
        deadline = time.monotonic() + timeout
        with self._session_watch(session_id) as w:
            while True:
                try:
                    info: SessionInfo | None = self._own(session_id)
                except SessionNotFoundError:
                    info = None
                if info is not None and info.status in TERMINAL:
                    return info
                left = deadline - time.monotonic()
                if left <= 0:
                    state = info.status if info else "not started"
                    raise TimeoutError(f"session {session_id} still {state} after {timeout}s")
                w.wait(min(poll, left))
