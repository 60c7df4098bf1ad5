"""Run outcomes handed from a workflow to a waiter in the same process.

Every run publishes its outcome as a DBOS event (durable, read by waiters anywhere). When
the waiter is in the process that ran the workflow, the trip through the database (the
event's NOTIFY, DBOS's listener thread, a read back in a worker thread) is the larger part
of ``result()``'s latency; the workflow also hands the outcome over here, after the event
is durable, and a local waiter takes whichever comes first. A waiter in another process
(the run was claimed by another worker) is served by the event alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

Key = tuple[str, str]  # (workflow id, event key)
_lock = threading.Lock()
_waiters: dict[Key, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]]] = {}


def waiter(workflow_id: str, key: str) -> asyncio.Future[Any]:
    """A future on the running loop that ``publish`` resolves; ``discard`` it when done."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()
    with _lock:
        _waiters.setdefault((workflow_id, key), []).append((loop, fut))
    return fut


def discard(workflow_id: str, key: str, fut: asyncio.Future[Any]) -> None:
    with _lock:
        waiting = _waiters.get((workflow_id, key), [])
        waiting[:] = [(lp, f) for lp, f in waiting if f is not fut]
        if not waiting:
            _waiters.pop((workflow_id, key), None)


def publish(workflow_id: str, key: str, value: Any) -> None:
    """Resolve this process's waiters on (workflow, key); call only once the value is
    durable (after ``set_event`` returned), so a waiter never sees what a crash could undo."""
    with _lock:
        waiting = _waiters.pop((workflow_id, key), [])
    for loop, fut in waiting:
        # A closed loop raises RuntimeError: that waiter is gone, nobody is left to wake.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_resolve, fut, value)


def _resolve(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)
