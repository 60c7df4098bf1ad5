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

A run that has ended is let through to its last DBOS operations: ``finishing()`` wraps the
run's end and the publication of its outcome as one section (the end's own ``step()`` inside
it counts once), and for a workflow that then returns, ``wait_idle`` also waits until
DBOS has recorded it ended (the caller's ``ended`` check). Otherwise every deploy would
leave the runs that just finished PENDING, for the next worker to replay.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar

from dbos import DBOS

_draining = threading.Event()
_lock = threading.Lock()
_in_flight = 0
StepKey = tuple[str, int]
_exited: OrderedDict[StepKey, float] = OrderedDict()
"""Steps whose body returned, by exit time: their checkpoints may still be in flight."""
_EXIT_MEMORY_SEC = 120.0
"""A checkpoint pending longer than this means the database is away; nothing to wait for."""
_returning: dict[str, float] = {}
"""Workflows that left ``finishing()`` to return, by exit time: DBOS records their end."""
_section: ContextVar[str | None] = ContextVar("dbos_agents_drain_section", default=None)
"""The workflow whose ``step()`` section this code runs in (a nested ``step()`` passes)."""


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
    wf = DBOS.workflow_id
    if wf is not None and _section.get() == wf:  # inside a section of this workflow already
        yield
        return
    key = _current_step(wf)
    with _lock:  # counted before the drain check: wait_idle never misses a step entering
        _in_flight += 1
    if _draining.is_set():
        with _lock:
            _in_flight -= 1
        await gate()
    token = _section.set(wf)
    try:
        yield
    finally:
        _section.reset(token)
        now = time.monotonic()
        with _lock:
            _in_flight -= 1
            if key is not None:
                _exited[key] = now
                _exited.move_to_end(key)
                while _exited and next(iter(_exited.values())) < now - _EXIT_MEMORY_SEC:
                    _exited.popitem(last=False)


@asynccontextmanager
async def finishing(*, returns: bool) -> AsyncIterator[None]:
    """Wrap a run's end and the publication of its outcome: one ``step()`` (so a drain
    never cuts between them), and with ``returns`` (the workflow returns right after)
    ``wait_idle`` waits for DBOS to record the workflow's end too."""
    async with step():
        yield
        wf = DBOS.workflow_id
        if returns and wf is not None:
            with _lock:
                _returning[wf] = time.monotonic()


def returning() -> set[str]:
    """Workflows that left ``finishing()`` within the last couple of minutes to return."""
    cutoff = time.monotonic() - _EXIT_MEMORY_SEC
    with _lock:
        for wf in [w for w, t in _returning.items() if t < cutoff]:
            del _returning[wf]
        return set(_returning)


def _current_step(wf: str | None) -> StepKey | None:
    """(workflow id, step id) when ``step()`` wraps a DBOS step of workflow ``wf``."""
    sid = DBOS.step_id
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
    ended: Callable[[set[str]], set[str]] | None = None,
) -> bool:
    """Wait until no step is in flight and, with ``checkpointed`` (given the steps that
    exited, returns those whose checkpoint is written; it runs in a thread), until every
    exited step's checkpoint is written; with ``ended`` (given workflow ids, returns those
    DBOS recorded as ended), until every workflow that left ``finishing()`` to return has
    ended. False when ``grace_sec`` passed first."""
    try:
        async with asyncio.timeout(grace_sec):
            while True:
                if _in_flight == 0 and await _settled(checkpointed, ended) and _in_flight == 0:
                    return True
                await asyncio.sleep(poll)
    except TimeoutError:
        return False


async def _settled(
    checkpointed: Callable[[set[StepKey]], set[StepKey]] | None,
    ended: Callable[[set[str]], set[str]] | None,
) -> bool:
    """Whether what left the gate is recorded by DBOS (see ``wait_idle``)."""
    steps = recently_exited() if checkpointed is not None else set()
    workflows = returning() if ended is not None else set()
    try:  # database away: not settled, wait out the grace
        if steps and checkpointed is not None:
            steps -= await asyncio.to_thread(checkpointed, steps)
        if workflows and ended is not None:
            workflows -= await asyncio.to_thread(ended, workflows)
    except Exception:
        return False
    return not steps and not workflows
