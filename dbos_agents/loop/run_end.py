"""Hearing that a run ended while part of it still works: a durable tool's body, a model's
streamed reply. An interrupt ends the run in its own transaction; the worker hears it on
its LISTEN connection on run ends, confirms it with a read of the session (the fence every
write of the run checks), and the work in progress is cancelled at once instead of running
on to be fenced at its end. A slow re-check covers a missed notification.

A streamed reply also stops when Postgres refuses its pieces (``stale``: this execution no
longer owns the run, adopted while alive): the model's stream is cancelled the same way,
and the stale execution records nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from ..outcome import RunSpec
from ..store import durable as rows
from ..store.fence import StaleWriter
from ..store.retry import fetch_one
from ..store.runs import run_key
from .context import get_context

T = TypeVar("T")


class RunEnd:
    """Resolves when the run is no longer the session's running one (an interrupt). Made
    before the work starts, so an end that comes first is not missed."""

    def __init__(self, spec: RunSpec) -> None:
        self._spec = spec
        ctx = get_context()
        self._listener = ctx.run_ends.listener
        s = ctx.settings
        self._recheck = (
            s.result_recheck_sec if self._listener is None else s.wake_recheck_interval_sec
        )
        self._key = run_key(spec["session_id"], spec["run_seq"])
        self._fut = None if self._listener is None else self._listener.waiter(self._key)

    @property
    def heard(self) -> bool:
        """The worker listens on run ends (not so in a process without a listener)."""
        return self._listener is not None

    async def wait(self, look_first: bool = False) -> None:
        """Return once the run has ended; ``look_first``: read whether it already has (an
        end heard before this ``RunEnd`` was made is otherwise seen only at a re-check)."""
        engine = get_context().ledger.ds.engine
        if look_first and not await _running(engine, self._spec):
            return
        while True:
            if self._fut is not None:
                await asyncio.wait({self._fut}, timeout=self._recheck)
            else:
                await asyncio.sleep(self._recheck)
            self.close()
            if self._listener is not None:
                self._fut = self._listener.waiter(self._key)
            if not await _running(engine, self._spec):
                return

    def close(self) -> None:
        if self._fut is not None and self._listener is not None:
            self._listener.discard(self._key, self._fut)
            self._fut = None


class Ended(Exception):
    """The run ended (an interrupt) before the work did; the work was cancelled."""


async def unless_ended(
    spec: RunSpec,
    work: Awaitable[T],
    *,
    look_first: bool = False,
    stale: asyncio.Future[None] | None = None,
) -> T:
    """``work``'s result, or ``Ended`` once the run ends first (the work cancelled). Where
    the worker does not listen on run ends, the work just runs (its writes are fenced).
    ``look_first``: the run may have ended already (one read more; see ``RunEnd.wait``).
    ``stale``: resolved when this execution's writes are refused (it lost the run); the
    work is then cancelled and ``StaleWriter`` raised."""
    ended = RunEnd(spec)
    if not ended.heard and stale is None:
        ended.close()
        return await work
    task: asyncio.Future[T] = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(ended.wait(look_first)) if ended.heard else None
    waiting: set[asyncio.Future[Any]] = {task}
    waiting.update(f for f in (watch, stale) if f is not None)
    try:
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the caller was cancelled: so is the work
        task.cancel()
        raise
    finally:
        if watch is not None:
            watch.cancel()
        ended.close()
    if task in done:
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    if stale is not None and stale in done:
        raise StaleWriter(spec["session_id"])
    raise Ended(spec["session_id"])


async def _running(engine: Any, spec: RunSpec) -> bool:
    stmt = (rows.LIVE_SQL, {"s": spec["session_id"], "run": spec["run_seq"]})
    try:
        return bool((await fetch_one(engine, stmt, "the run's state")).ok)
    except Exception:  # the database away: keep running, look again later
        return True
