"""A run's end wakes its readers once: the end's own notification (``store.runs``) comes
after every write of the run, so the worker announces nothing more for the session after
it (each announcement is a full read for every stream of the session); a sub-agent's end
still announces its root, whose readers that notification does not wake."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from dbos_agents import AgentClient, AgentRuntime
from dbos_agents.live import announce
from dbos_agents.store import runs

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _heard(url: str, start: asyncio.Future[None], quiet_sec: float) -> list[tuple[str, str]]:
    """(channel, payload) of every notification on the readers' channels, from when
    ``start`` is set (LISTEN is on by then) until ``quiet_sec`` pass with none."""
    with psycopg.connect(url, autocommit=True) as conn:
        for channel in announce.CHANNELS:
            conn.execute(f"LISTEN {channel}")
        start.get_loop().call_soon_threadsafe(start.set_result, None)
        heard: list[tuple[str, str]] = []
        for _ in range(10_000):
            got = [(n.channel, n.payload) for n in conn.notifies(timeout=quiet_sec)]
            if not got:
                return heard
            heard += got
    return heard


async def test_nothing_is_announced_after_a_run_end(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    listening: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    heard_task = asyncio.create_task(
        asyncio.to_thread(_heard, integration_database_url, listening, 1.5)
    )
    await listening
    sid = await asyncio.to_thread(client.start, "streamer", "the end, once")
    await asyncio.to_thread(client.wait, sid, timeout=60)
    heard = await heard_task
    mine = [(c, p) for c, p in heard if announce.session_of(c, p) == sid]
    ends = [i for i, (c, _) in enumerate(mine) if c == runs.CHANNEL]
    assert ends, f"no run end heard: {mine}"
    after = mine[ends[-1] + 1 :]
    assert after == [], f"announced after the run's end: {after}"
