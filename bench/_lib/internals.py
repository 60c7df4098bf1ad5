"""Every place bench reaches into dbos_agents' private modules, gathered here.

These are not kept stable: a module that moves breaks only the function that imports it
(each import sits in the function that needs it). Everything else in bench/ uses the public API
(``dbos_agents``, ``dbos_agents.client``, ``dbos_agents.models``, ``dbos_agents.testing``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import sqlalchemy as sa

from dbos_agents import AgentRuntime

# ---------------------------------------------------------------------------- recovery.py


async def serve_forever(rt: AgentRuntime) -> None:
    """The real worker loop (``dbos-agents worker``); prints "dbos-agents worker ready ..."
    once launched."""
    from dbos_agents.worker import serve_forever

    await serve_forever(rt)


# ---------------------------------------------------------------------------- start_latency.py


def sqlalchemy_url(url: str) -> str:
    """The URL as DBOS's system database takes it (the runtime's own conversion)."""
    from dbos_agents.store.db import sqlalchemy_url

    return sqlalchemy_url(url)


def after_run_end(mark: Callable[[], None]) -> None:
    """Call ``mark`` once a run's end has committed (its outcome event with it)."""
    from dbos_agents.loop import run_bounds

    original = run_bounds.end

    async def end(*args: Any, **kwargs: Any) -> None:
        await original(*args, **kwargs)
        mark()

    run_bounds.end = end


# ---------------------------------------------------------------------------- turn_overhead.py


def raw_datasource_tx() -> Callable[[int], Awaitable[int]]:
    """A DBOS datasource transaction on the runtime's own datasource (READ COMMITTED), doing
    one trivial statement: the floor's stand-in for a turn's writes. Call after launch."""
    from dbos_agents.loop.context import get_context

    async def _raw_write(i: int) -> int:
        await get_context().ledger.ds.sql_session().execute(sa.text("SELECT :i"), {"i": i})
        return i

    tx: Callable[[int], Awaitable[int]] = get_context().ledger.ds.transaction(
        name="bench.raw_tx", isolation_level="READ COMMITTED"
    )(_raw_write)
    return tx


def announcer() -> Any:
    """The launched runtime's delta announcer (its ``flushes`` count the batches)."""
    from dbos_agents.loop.context import get_context

    return get_context().ledger.announcer
