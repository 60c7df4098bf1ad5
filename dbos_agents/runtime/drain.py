"""Draining on SIGTERM: the workflow stops between steps, never inside one.

A deploy sends SIGTERM. The worker then stops dequeuing and calls ``begin_drain()``. Every
step and ledger write opens with ``async with drain.step():`` which, once draining, never
enters: the workflow parks at its last checkpoint and stays PENDING, to be recovered by the
next worker with the same executor id (or adopted). Steps already inside finish normally;
``wait_idle`` tells the worker when none is left, so it exits early instead of waiting out
the whole grace period. Nothing is ever recorded as failed because of a shutdown.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

_draining = threading.Event()
_lock = threading.Lock()
_in_flight = 0


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
    await gate()
    with _lock:
        _in_flight += 1
    try:
        yield
    finally:
        with _lock:
            _in_flight -= 1


async def wait_idle(grace_sec: float, poll: float = 0.05) -> bool:
    """Wait until no step is in flight; False when ``grace_sec`` passed first."""
    try:
        async with asyncio.timeout(grace_sec):
            while _in_flight > 0:  # noqa: ASYNC110 - the counter is bumped from several loops/threads
                await asyncio.sleep(poll)
    except TimeoutError:
        return False
    return True
