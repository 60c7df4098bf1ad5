"""Run outcomes handed over inside one process (runtime/outcomes.py)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from dbos_agents.runtime import outcomes

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_waiter_gets_a_value_published_from_another_thread() -> None:
    fut = outcomes.waiter("wf-1", "run:1")
    other = outcomes.waiter("wf-1", "run:2")
    t = threading.Thread(target=outcomes.publish, args=("wf-1", "run:1", {"status": "completed"}))
    t.start()
    assert await asyncio.wait_for(fut, 5) == {"status": "completed"}
    t.join()
    assert not other.done()  # another run's waiter is untouched
    outcomes.discard("wf-1", "run:2", other)


async def test_a_discarded_waiter_is_forgotten_and_publishing_to_nobody_is_harmless() -> None:
    fut = outcomes.waiter("wf-2", "run:1")
    outcomes.discard("wf-2", "run:1", fut)
    outcomes.publish("wf-2", "run:1", {"status": "completed"})
    await asyncio.sleep(0)
    assert not fut.done()
    assert ("wf-2", "run:1") not in outcomes._waiters
