"""Every place bench reaches into dbos_agents' private modules, gathered here.

These are not kept stable: a module that moves breaks only the function that imports it
(each import sits in the function that needs it), and bench/resume_trace.py reports a
hooked function it cannot find and goes on. Everything else in bench/ uses the public API
(``dbos_agents``, ``dbos_agents.client``, ``dbos_agents.models``, ``dbos_agents.testing``).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import sys
import threading
import time
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


# ---------------------------------------------------------------------------- resume_trace.py

EVENTS: list[tuple[float, str]] = []
"""(epoch s, name) of every hooked event in this process."""
_lock = threading.Lock()

HOOKS = [
    ("dbos_agents.worker.parking", "Parker.wake", "woken"),
    ("dbos_agents._dbos.parking", "claim_parked", "claimed"),
    ("dbos_agents._dbos.replay", "enter_workflow", "workflow entered"),
    ("dbos_agents.loop.run_bounds", "begin", "begin"),
    ("dbos_agents.loop.turn", "model_turn", "model turn"),
    ("dbos_agents.loop.calls.waiting", "wait_for_submission", "wait returned"),
    ("dbos_agents.loop.run_bounds", "end", "run end"),
    ("dbos_agents.loop.workflow", "_finish", "outcome published"),
    ("dbos_agents.loop.workflow", "_session", "workflow returned"),
    ("dbos_agents.loop.ledger", "Ledger.turn_state", "turn_state"),
    ("dbos_agents.loop.ledger", "Ledger.record_turn", "record_turn"),
    ("dbos_agents.models.scripted", "ScriptedModel.complete", "model answered"),
    ("dbos_agents.store.pg", "checkout", "pg.checkout"),
    ("dbos_agents.store.pg", "script", "pg.script"),
    ("dbos_agents.store.pg", "fetch_all", "pg.fetch_all"),
]
"""(module, attribute, event name) of the functions whose return is a phase; the first
occurrence after a submit is "name", the k-th "name#k"."""
ENTRIES = {"pg.script", "pg.fetch_all", "record_turn", "turn_state", "model turn", "run end"}
"""Hooks whose start is recorded too (as "name>")."""


def record(name: str) -> None:
    t = time.time()
    with _lock:
        EVENTS.append((t, name))


def events_snapshot() -> list[tuple[float, str]]:
    with _lock:
        return list(EVENTS)


def _wrap(fn: Any, name: str) -> Any:
    if asyncio.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def awrapper(*a: Any, **kw: Any) -> Any:
            if name in ENTRIES:
                record(name + ">")
            try:
                return await fn(*a, **kw)
            finally:
                record(name)

        return awrapper

    @functools.wraps(fn)
    def wrapper(*a: Any, **kw: Any) -> Any:
        try:
            return fn(*a, **kw)
        finally:
            record(name)

    return wrapper


def install_hooks() -> list[str]:
    """Wrap each hooked function where it is defined and wherever it was imported by name;
    returns the hooks not found."""
    missing = []
    for modname, attr, name in HOOKS:
        mod = importlib.import_module(modname)
        owner: Any = mod
        parts = attr.split(".")
        for p in parts[:-1]:
            owner = getattr(owner, p)
        fn = getattr(owner, parts[-1], None)
        if fn is None:
            missing.append(f"{modname}.{attr}")
            continue
        wrapped = _wrap(fn, name)
        setattr(owner, parts[-1], wrapped)
        for m in list(sys.modules.values()):
            if getattr(m, "__name__", "").startswith("dbos_agents") and m is not mod:
                for k, v in list(vars(m).items()):
                    if v is fn:
                        setattr(m, k, wrapped)
    return missing


def install_script_hook() -> None:
    """``pg.script`` with its parts timed: the client-side binding, then the round trip."""
    import psycopg

    from dbos_agents.store import pg

    async def script(engine: Any, stmts: Any) -> None:
        record("pg.script>")
        async with pg.driver(engine) as conn:
            record("pg.script checked out")
            cur = psycopg.AsyncClientCursor(conn)
            try:
                text = ";\n".join(cur.mogrify(pg.psycopg_sql(sql), ps) for sql, ps in stmts)
                record("pg.script bound")
                await cur.execute(text)
                record("pg.script executed")
            finally:
                await cur.close()
        record("pg.script")

    pg.script = script


def install_dbos_hooks() -> None:
    """Time DBOS's ``recv`` phases (after launch: the system database exists then)."""
    from dbos_agents._dbos.internals import _system_database

    sys_db = _system_database()
    for meth in ("recv_setup", "recv_check", "recv_consume"):
        fn = getattr(sys_db, meth, None)
        if fn is not None:
            setattr(sys_db, meth, _wrap(fn, meth))


# ---------------------------------------------------------------------------- server_pieces.py


def announced_pieces(
    sessions: list[str], first_part: int, rows: int, text: str
) -> tuple[str, dict[str, Any]]:
    """The worker's batch as it writes it (``deltas.insert_announced_stmt``): ``rows``
    text pieces for each session's run 1, turn 1 from part ``first_part``, inserted and
    announced with the rows in each notification; SQL with ``:name`` parameters."""
    from dbos_agents.live import announce, deltas

    batch = {
        s: [deltas.Delta(1, 1, 0, first_part + j, "text", text) for j in range(rows)]
        for s in sessions
    }
    sql, params = deltas.insert_announced_stmt(batch, announce.CHANNEL, announce.DELTAS, sessions)
    return sql, dict(params)
