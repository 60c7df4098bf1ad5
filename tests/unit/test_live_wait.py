"""A live stream's wait between pieces (``client/watch.py``): it ends at the first of the
session's watch and its feed, or at the safety net's timeout, and leaves nothing behind on
the watch's future, which outlives many waits (one per piece shown)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dbos_agents.live.watch import _either

pytestmark = pytest.mark.asyncio


class Counted(asyncio.Future[None]):
    """A future that counts the callbacks hung on it."""

    hung = 0

    def add_done_callback(self, fn: Any, *, context: Any = None) -> None:
        self.hung += 1
        super().add_done_callback(fn, context=context)

    def remove_done_callback(self, fn: Any) -> int:
        removed = super().remove_done_callback(fn)
        self.hung -= removed
        return removed


async def test_a_wait_ends_at_the_first_of_two_and_leaves_no_callback() -> None:
    loop = asyncio.get_running_loop()
    note = Counted()
    for _ in range(3):  # the feed hands over pieces; the watch's note stays unresolved
        ready: asyncio.Future[None] = loop.create_future()
        loop.call_soon(ready.set_result, None)
        await asyncio.wait_for(_either(note, ready, 60.0), 5.0)
        assert ready.done() and not note.done()
    assert note.hung == 0
    loop.call_soon(note.set_result, None)
    await asyncio.wait_for(_either(note, loop.create_future(), 60.0), 5.0)


async def test_a_wait_ends_at_its_timeout_or_when_cancelled() -> None:
    loop = asyncio.get_running_loop()
    note, ready = Counted(), Counted()
    await asyncio.wait_for(_either(note, ready, 0.01), 5.0)
    assert not note.done() and not ready.done()
    waiting = asyncio.ensure_future(_either(note, ready, 60.0))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert (note.hung, ready.hung) == (0, 0)
    loop.call_soon(ready.set_result, None)  # resolving it later wakes nothing stale
    await asyncio.sleep(0.01)
