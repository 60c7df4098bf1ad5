"""Session state (``session_states``, migration 0015): the one module that writes it.

A row per committed version: ``(session_id, version)`` with ``version`` counting from 1,
the latest row being the session's state. A row is only ever written in the transaction
that records the result of the tool call that changed the state (``record_with_state``,
called by the call's attempt in ``store/calls.py``), so a crash leaves both or neither.
That transaction holds the session's state lock (a transaction-scoped advisory lock),
reads the latest version, and lets the caller fold its changes onto it: side-by-side
tool calls of one session commit one after the other, each on the other's result.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from .. import storable
from ..messages import JSONValue
from ..results import ToolResult
from . import pg
from .pg import Stmt
from .schema import SCHEMA as S

StateCommit = Callable[[JSONValue | None], tuple[ToolResult, dict[str, JSONValue] | None]]
"""Given the latest committed state (None: never changed), the result to record and the
new state to store with it (None: store none, e.g. the change no longer validates)."""


@dataclass(frozen=True)
class StateVersion:
    """One committed version of a session's state."""

    session_id: str
    version: int
    state: JSONValue
    run_seq: int | None
    turn: int | None
    tool_call_id: str | None
    created_at: datetime


def lock_key(session_id: str) -> int:
    """The session's state lock: a signed 64-bit advisory key of its own namespace (a
    tool call's lock hashes ``session \\0 call``, never this prefix)."""
    digest = hashlib.sha256(f"state\x01{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


LATEST_SQL = (
    f"SELECT state FROM {S}.session_states WHERE session_id = :s ORDER BY version DESC LIMIT 1"
)
"""The latest committed state (a scalar subquery of the call's dispatch mark, too)."""

_INSERT = f"""
INSERT INTO {S}.session_states (session_id, version, run_seq, turn, tool_call_id, state)
SELECT :s, coalesce((SELECT max(version) FROM {S}.session_states WHERE session_id = :s), 0) + 1,
    t.run_seq, t.turn, t.tool_call_id, CAST(:state AS jsonb)
FROM {S}.tool_calls t WHERE t.session_id = :s AND t.tool_call_id = :id
"""

_CALL_RESULT = (
    f"SELECT result FROM {S}.tool_calls WHERE session_id = :s AND tool_call_id = :id FOR UPDATE"
)


async def record_with_state(
    c: pg.Driver,
    session_id: str,
    tool_call_id: str,
    commit: StateCommit,
    record: Callable[[ToolResult], Stmt],
    unlock: Sequence[Stmt],
) -> tuple[JSONValue | None, ToolResult | None]:
    """Record a call's result with its state change, in one transaction and two round
    trips: lock the session's state and the call's row, read the latest state; then the
    result row, the new version, COMMIT and ``unlock`` (the call's lock, after the
    commit). Returns ``(earlier, None)`` when an earlier attempt recorded a result (its
    change is already stored: nothing is applied twice), else ``(None, result)``."""
    lock = ("SELECT pg_advisory_xact_lock(:k)", {"k": lock_key(session_id)})
    ids = {"s": session_id, "id": tool_call_id}
    _, _, called, latest = await pg.fetch_all(
        c, [("BEGIN", {}), lock, (_CALL_RESULT, ids), (LATEST_SQL, {"s": session_id})]
    )
    if called and called[0].result is not None:
        await pg.fetch_all(c, [("ROLLBACK", {}), *unlock])
        earlier: JSONValue = called[0].result
        return earlier, None
    result, new = commit(latest[0].state if latest else None)
    insert = [(_INSERT, {**ids, "state": storable.dumps(new)})] if new is not None else []
    await pg.fetch_all(c, [record(result), *insert, ("COMMIT", {}), *unlock])
    return None, result


_POSTED = f"""
WITH mine AS (
    SELECT version FROM {S}.session_states
    WHERE session_id = :s AND run_seq = :r AND turn = 0 AND tool_call_id IS NULL
), latest AS (
    SELECT coalesce(max(version), 0) AS v FROM {S}.session_states WHERE session_id = :s
), ins AS (
    INSERT INTO {S}.session_states (session_id, version, run_seq, turn, tool_call_id, state)
    SELECT :s, latest.v + 1, :r, 0, NULL, CAST(:state AS jsonb) FROM latest
    WHERE NOT EXISTS (SELECT 1 FROM mine) AND latest.v = :base
    RETURNING version
)
SELECT (SELECT version FROM mine) AS earlier, (SELECT version FROM ins) AS new,
    (SELECT v FROM latest) AS latest
"""


async def commit_posted(
    engine: AsyncEngine, session_id: str, run_seq: int, state: dict[str, JSONValue], base: int
) -> tuple[int | None, int]:
    """A state a chat page posted with run ``run_seq``, committed before the run's first
    turn (turn 0, no tool call) if the session's latest version is still ``base``; once
    per run (a replay finds its row). Returns (the version it has or got, None: refused
    as the state moved on; the latest version)."""
    lock = ("SELECT pg_advisory_xact_lock(:k)", {"k": lock_key(session_id)})
    params = {"s": session_id, "r": run_seq, "state": storable.dumps(state), "base": base}
    async with pg.driver(engine) as c:
        _, _, rows, _ = await pg.fetch_all(
            c, [("BEGIN", {}), lock, (_POSTED, params), ("COMMIT", {})]
        )
    row = rows[0]
    version = row.earlier if row.earlier is not None else row.new
    return version, int(row.latest)


# --- reads --------------------------------------------------------------------------------


async def latest(engine: AsyncEngine, session_id: str) -> JSONValue | None:
    """The session's latest state (None: never changed), for a model turn's instructions."""
    async with pg.driver(engine) as c:
        rows = await pg.fetch(c, (LATEST_SQL, {"s": session_id}))
    return rows[0].state if rows else None


_COLUMNS = "session_id, version, state, run_seq, turn, tool_call_id, created_at"


def read(engine: sa.Engine, session_id: str, *, at_turn: int | None = None) -> StateVersion | None:
    """The latest version (or the latest committed by a call of a turn <= ``at_turn``);
    None when the state was never changed."""
    where = "" if at_turn is None else " AND turn <= :t"
    with engine.connect() as conn:
        row = conn.execute(
            sa.text(
                f"SELECT {_COLUMNS} FROM {S}.session_states WHERE session_id = :s{where}"
                " ORDER BY version DESC LIMIT 1"
            ),
            {"s": session_id, "t": at_turn},
        ).first()
    return None if row is None else StateVersion(**row._asdict())


def for_calls_stmt(session_id: str, call_ids: list[str]) -> Stmt:
    """The versions these calls committed (the live log's ``state`` events)."""
    return (
        f"SELECT {_COLUMNS} FROM {S}.session_states WHERE session_id = :s"
        " AND tool_call_id = ANY(:ids)",
        {"s": session_id, "ids": call_ids},
    )


def by_call(rows: Iterable[Any]) -> dict[str, StateVersion]:
    """``for_calls_stmt``'s rows by call id."""
    return {r.tool_call_id: StateVersion(**r._asdict()) for r in rows}
