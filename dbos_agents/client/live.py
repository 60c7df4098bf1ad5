"""``AgentClient``'s reads of a session as it changes: ``events``, ``read_events``,
``stream``, ``watch`` and ``wait`` (a base class of ``AgentClient``, kept apart so each
module stays readable).

The reads, the vocabulary and the waits are ``live/``'s (``live.log``, ``live.follow``'s
``Progress``, ``live.watch``): these methods check their arguments and the caller's scope
and call into it. The watch is made before the first read, so a change committed between
a read and the wait still wakes it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import sqlalchemy as sa

from .. import storable
from ..errors import SessionNotFoundError
from ..events import Cursor, SessionEvent
from ..live import log as event_log
from ..live.follow import EventBatch, Progress, cursor_of
from ..live.watch import SessionWatch
from ..outcome import TERMINAL, SessionInfo
from ..records import SessionEvents
from ..settings import Settings
from ..store.unavailable import translated
from .scope import Scope


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
