"""Waiting for a run until it ends or waits on something the caller may answer.

The session's live watch (the worker's announcements, and the delta feed that carries a
sub-agent's wait mark) wakes the wait; each wake reads the session and, while the run
goes on, its open waits. Pieces of a reply as the model writes them wake nothing here.
``poll`` is the safety net for a notification lost with a connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ...client import AsyncAgentClient
from ...events import Cursor
from ...outcome import TERMINAL
from ...records import PendingCall

_FAR = 2**62
"""A message seq past any: the feed's rows never ask for a full read on their own."""


@dataclass(frozen=True)
class Ended:
    status: str
    output: str | None
    error: str | None


@dataclass(frozen=True)
class Waiting:
    waits: list[PendingCall]
    """The open waits the caller may answer, oldest deadline first."""


@dataclass(frozen=True)
class Running:
    """Neither by the time the wait was up."""


Settled = Ended | Waiting | Running


async def settle(
    client: AsyncAgentClient,
    session_id: str,
    run_seq: int,
    *,
    answerable: Callable[[PendingCall], bool],
    max_wait: float,
    poll: float,
) -> Settled:
    """Run ``run_seq`` of the session: ``Ended``, ``Waiting`` (on waits ``answerable``
    admits), or ``Running`` after ``max_wait`` seconds of neither."""
    deadline = time.monotonic() + max_wait
    async with await client.live_watch(session_id, check=False) as live:
        seen = 0
        while True:
            found = await _look(client, session_id, run_seq, answerable)
            if found is not None:
                return found
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return Running()
                rows = await live.wait(min(poll, left), Cursor(_FAR, seen))
                if rows is None:
                    break  # something changed (or the timer): look again
                seen = max([seen, *(r.id for r in rows)])


async def _look(
    client: AsyncAgentClient,
    session_id: str,
    run_seq: int,
    answerable: Callable[[PendingCall], bool],
) -> Settled | None:
    info = await client.session(session_id)
    if info.run_seq > run_seq:  # ended, and a newer run began since: its own outcome row
        outcome = await client.run_outcome(session_id, run_seq)
        if outcome is None:
            return Ended("failed", None, "the run's outcome was not recorded")
        return Ended(outcome.status, outcome.output, outcome.error)
    if info.status in TERMINAL:
        return Ended(info.status, info.final_output, info.error)
    waits = [
        w
        for w in await client.pending(session_id=session_id)
        if w.status == "waiting" and answerable(w)
    ]
    return Waiting(waits) if waits else None
