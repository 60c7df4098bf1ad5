"""Following a session's live log: the loop every live reader runs (``AgentClient.stream``,
the async client's, the HTTP event stream and the chat-UI adapters, ``dbos-agents follow``).

A watch is made before the first read (so no change falls between them); reads go on
until the log's end, then a wait that new deltas (the feed) or the worker's announcements
end, with ``poll_interval`` as the safety net. ``Progress`` is the reader's place between
reads (its cursor, the run ends it reported). The loop stops on its own when it must (a
``Stop``): it has lasted ``max_duration``, or the token that let it in expired or was
revoked. A consumer that is done early (its run ended, it waits on the client) leaves the
loop; wrap it in ``contextlib.aclosing`` so the watch is closed at once.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from ..events import Cursor, SessionEvent
from ..outcome import TERMINAL
from ..records import StatusEvent
from .deltas import Logged
from .vocabulary import shown
from .watch import LiveWatch

__all__ = ["EventBatch", "Limits", "Progress", "Read", "Stop", "cursor_of", "follow"]

Step = Literal["more", "wait", "end"]
StopCode = Literal["STREAM_TIMEOUT", "TOKEN_EXPIRED", "TOKEN_REVOKED", "DATABASE_UNAVAILABLE"]


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
    """A reader between reads: its cursor and the run ends it reported."""

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
        events, self.cursor = shown(self.cursor, rows)
        return events


def cursor_of(after: str | Cursor | None) -> Cursor:
    if after is None:
        return Cursor()
    return after if isinstance(after, Cursor) else Cursor.parse(after)


@dataclass(frozen=True)
class Limits:
    poll_interval: float
    max_duration: float
    valid_until: float | None = None
    """The expiry (unix seconds) of the token that let the reader in, if one did."""
    generation: int | None = None
    """That token's generation: a revoke ends the stream."""
    clock: Callable[[], float] = time.time


@dataclass(frozen=True)
class Read:
    """Events to hand out now; ``status`` after a read that reached the log's end."""

    events: list[SessionEvent]
    status: StatusEvent | None = None


@dataclass(frozen=True)
class Stop:
    """The stream must end now; the reader resumes from the last event it got."""

    code: StopCode
    message: str


async def follow(
    read: Callable[[Cursor], Awaitable[EventBatch]],
    live: LiveWatch,
    after: Cursor,
    limits: Limits,
    *,
    keep_following: bool = True,
) -> AsyncGenerator[Read | Stop, None]:
    """The log after ``after`` (see the module doc): ``read`` is a full read from a
    cursor, ``live`` the reader's watch, made before this starts. ``keep_following=False``:
    what exists now (its last ``Read`` carries the status), then the end. A read's error
    ends the loop with that error."""
    started = time.monotonic()
    progress = Progress(after, keep_following)
    while True:
        batch = await read(progress.cursor)
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
        # safety net's timer) ends the wait with a full read, and its checks above: so
        # does the time limit or the token's expiry passing between pieces.
        ends = started + limits.max_duration
        while True:
            left = min(limits.poll_interval, ends - time.monotonic())
            if limits.valid_until is not None:
                left = min(left, limits.valid_until - limits.clock())
            if left <= 0:
                break
            rows = await live.wait(max(0.01, left), progress.cursor)
            if rows is None:
                break
            yield Read(progress.shown(rows))


def _stop(limits: Limits, started: float, generation: int | None) -> Stop | None:
    if time.monotonic() - started >= limits.max_duration:
        return Stop("STREAM_TIMEOUT", "the stream reached its time limit")
    if limits.valid_until is not None and limits.clock() >= limits.valid_until:
        return Stop("TOKEN_EXPIRED", "the session token expired: refresh it")
    if limits.generation is not None and generation != limits.generation:
        return Stop("TOKEN_REVOKED", "the session token was revoked")
    return None
