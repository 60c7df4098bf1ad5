"""Draining on SIGTERM: the workflow stops between steps, never inside one.

A deploy sends SIGTERM. The worker then stops dequeuing and calls ``begin_drain()``. Every
step and ledger write opens with ``async with drain.step():`` which, once draining, never
enters: the workflow parks at its last checkpoint and stays PENDING, to be recovered by the
next worker with the same executor id (or adopted). Steps already inside finish normally;
``wait_idle`` tells the worker when none is left, so it exits early instead of waiting out
the whole grace period. Nothing is ever recorded as failed because of a shutdown.

A step's body returning is not yet its checkpoint: DBOS records the output just after.
``step()`` therefore remembers each (workflow id, step id) it let out, and ``wait_idle``
waits until the caller's ``checkpointed`` check finds those rows too; exiting before that
would turn a finished side effect into an unknown one (a durability error on restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from dbos import DBOS

_draining = threading.Event()
_lock = threading.Lock()
_in_flight = 0
StepKey = tuple[str, int]
_exited: OrderedDict[StepKey, float] = OrderedDict()
"""Steps whose body returned, by exit time: their checkpoints may still be in flight."""
_EXIT_MEMORY_SEC = 120.0
"""A checkpoint pending longer than this means the database is away; nothing to wait for."""


def begin_drain() -> None:
    """From now on no new step starts in this process."""
    _draining.set()


def end_drain() -> None:
    """Undo ``begin_drain`` (tests that reuse a process)."""
    _draining.clear()


def is_draining() -> bool:
    return _draining.is_set()


def in_flight() -> int:
    """Steps currently between their start and their return."""
    return _in_flight


async def gate() -> None:
    """Return at once, unless draining: then never (the process exits under it)."""
    if _draining.is_set():
        await asyncio.Event().wait()


@asynccontextmanager
async def step() -> AsyncIterator[None]:
    """Wrap the body of every step: refuse to start during a drain, count while inside."""
    global _in_flight
    key = _current_step()
    with _lock:  # counted before the drain check: wait_idle never misses a step entering
        _in_flight += 1
    if _draining.is_set():
        with _lock:
            _in_flight -= 1
        await gate()
    try:
        yield
    finally:
        now = time.monotonic()
        with _lock:
            _in_flight -= 1
            if key is not None:
                _exited[key] = now
                _exited.move_to_end(key)
                while _exited and next(iter(_exited.values())) < now - _EXIT_MEMORY_SEC:
                    _exited.popitem(last=False)


def _current_step() -> StepKey | None:
    wf, sid = DBOS.workflow_id, DBOS.step_id
    return None if wf is None or sid is None else (wf, sid)


def recently_exited() -> set[StepKey]:
    """Steps that left ``step()`` within the last couple of minutes."""
    cutoff = time.monotonic() - _EXIT_MEMORY_SEC
    with _lock:
        return {k for k, t in _exited.items() if t >= cutoff}


async def wait_idle(
    grace_sec: float,
    poll: float = 0.05,
    checkpointed: Callable[[set[StepKey]], set[StepKey]] | None = None,
) -> bool:
    """Wait until no step is in flight and, with ``checkpointed`` (given the steps that
    exited, returns those whose checkpoint is written; it runs in a thread), until every
    exited step's checkpoint is written. False when ``grace_sec`` passed first."""
    try:
        async with asyncio.timeout(grace_sec):
            while True:
                if _in_flight == 0:
                    waiting = recently_exited()
                    if checkpointed is None or not waiting:
                        return True
                    with contextlib.suppress(Exception):  # database away: wait out the grace
                        waiting -= await asyncio.to_thread(checkpointed, waiting)
                    if not waiting and _in_flight == 0:
                        return True
                await asyncio.sleep(poll)
    except TimeoutError:
        return False
