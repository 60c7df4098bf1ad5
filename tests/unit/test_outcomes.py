"""Futures keyed by name and resolved from another thread (``dbos_agents.waiters``): the
in-process hand-over of run outcomes and the LISTEN fan-out both rest on them."""

from __future__ import annotations

import asyncio
import threading

import pytest

from dbos_agents.waiters import Waiters

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_waiter_gets_a_value_resolved_from_another_thread() -> None:
    w: Waiters[str] = Waiters()
    fut = w.waiter("run-1")
    other = w.waiter("run-2")
    t = threading.Thread(target=w.resolve, args=("run-1", "completed"))
    t.start()
    assert await asyncio.wait_for(fut, 5) == "completed"
    t.join()
    assert not other.done()  # another key's waiter is untouched
    w.discard("run-2", other)
    assert "run-2" not in w


async def test_a_discarded_waiter_is_forgotten_and_resolving_nobody_is_harmless() -> None:
    w: Waiters[str] = Waiters()
    fut = w.waiter("run-1")
    w.discard("run-1", fut)
    w.resolve("run-1", "completed")
    await asyncio.sleep(0)
    assert not fut.done()
    assert "run-1" not in w


async def test_resolve_all_wakes_every_key() -> None:
    w: Waiters[None] = Waiters()
    futs = [w.waiter(k) for k in ("a", "b", "b")]
    w.resolve_all(None)
    await asyncio.wait_for(asyncio.gather(*futs), 5)
    assert "a" not in w and "b" not in w
