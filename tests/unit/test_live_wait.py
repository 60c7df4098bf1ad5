"""A live stream's wait between pieces (``client/watch.py``): it ends at the first of the
session's watch and its feed, or at the safety net's timeout, and leaves nothing behind on
the watch's future, which outlives many waits (one per piece shown)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dbos_agents.live.deltas import Logged
from dbos_agents.live.feed import Subscription
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


def _row(i: int) -> Logged:
    return Logged(id=i, after_seq=0, run_seq=1, turn=1, attempt=0, part=i, kind="text", text="x")


async def test_a_wait_ends_at_the_first_of_two_and_leaves_no_callback() -> None:
    loop = asyncio.get_running_loop()
    note = Counted()
    sub = Subscription("s", loop, 0)
    for i in range(3):  # the feed hands over pieces; the watch's note stays unresolved
        loop.call_soon(sub._deliver, [_row(i + 1)])
        await asyncio.wait_for(_either(note, sub, 60.0), 5.0)
        assert [r.id for r in sub.take(i)] == [i + 1] and not note.done()
        assert sub.waiter is None
    assert note.hung == 0
    loop.call_soon(note.set_result, None)
    await asyncio.wait_for(_either(note, sub, 60.0), 5.0)
    assert sub.take(3) == [] and sub.waiter is None


async def test_a_wait_ends_at_its_timeout_or_when_cancelled() -> None:
    loop = asyncio.get_running_loop()
    note = Counted()
    sub = Subscription("s", loop, 0)
    await asyncio.wait_for(_either(note, sub, 0.01), 5.0)
    assert not note.done() and sub.waiter is None
    waiting = asyncio.ensure_future(_either(note, sub, 60.0))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert note.hung == 0 and sub.waiter is None
    sub._deliver([_row(1)])  # rows handed over later wake nothing stale
    await asyncio.sleep(0.01)
    assert [r.id for r in sub.take(0)] == [1]
