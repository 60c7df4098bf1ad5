"""The tool-call ledger (``tool_calls``): the one module that writes it.

A call's status only moves forward:

    requested ──▶ dispatched ──▶ completed | failed
        └──────────────────────────▲  (checked before dispatch, or closed after an interrupt)

``dispatched`` means "may have run": a server tool's attempt marked it before its handler,
a client tool's wait was registered (the browser may have acted), a sub-agent was started.
An approval-gated call stays ``requested`` while it waits for the human.

A server tool's attempt (``attempt``) holds a Postgres advisory lock keyed on the call, on
a connection of its own, from the dispatch mark until its result row is committed. A
re-execution of the same call (after a crash, a recovery or an adoption) must take that
lock first, so ``verify`` never runs while an earlier attempt may still be running. The
result row is committed before the step returns: a crash after that replays the recorded
result instead of declaring the outcome unknown.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from .. import storable
from ..records import ToolCallRecord
from ..results import ToolResult
from . import pg
from . import state as state_rows
from .pg import Db, Stmt
from .retry import retry_transient
from .schema import SCHEMA as S

log = logging.getLogger("dbos_agents")
CallKind = Literal["server", "client", "approval", "subagent", "durable"]


def lock_key(session_id: str, tool_call_id: str) -> int:
    """A signed 64-bit advisory-lock key for one tool call."""
    digest = hashlib.sha256(f"{session_id}\x00{tool_call_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


async def _exec(db: Db, sql: str, **params: Any) -> sa.Result[Any]:
    return await db.execute(sa.text(sql), params)


# --- writes inside the workflow's ledger transactions ---------------------------------------


@dataclass(frozen=True)
class Requested:
    """A call the model made, as its ledger row records it."""

    tool_call_id: str
    tool: str
    kind: CallKind
    arguments: str
    idempotency_key: str
    safe_to_retry: bool


def insert_requested_stmts(
    session_id: str,
    run_seq: int,
    turn: int,
    calls: list[Requested],
    dispatched: Collection[str] = (),
) -> list[Stmt]:
    """The model turn's transaction: one ``requested`` row per call the model made, or
    ``dispatched`` (one attempt) for the calls in ``dispatched``, whose waits open in the
    same transaction."""
    return [
        (
            f"INSERT INTO {S}.tool_calls (session_id, tool_call_id, run_seq, turn, tool,"
            " arguments, idempotency_key, safe_to_retry, kind, status, attempts, dispatched_at)"
            " VALUES (:s, :id, :run, :turn, :tool, :args, :key, :safe, :kind, :status, :n,"
            " CASE WHEN :n > 0 THEN now() END)",
            {
                "s": session_id,
                "id": c.tool_call_id,
                "run": run_seq,
                "turn": turn,
                "tool": c.tool,
                "args": c.arguments,
                "key": c.idempotency_key,
                "safe": c.safe_to_retry,
                "kind": c.kind,
                "status": "dispatched" if c.tool_call_id in dispatched else "requested",
                "n": 1 if c.tool_call_id in dispatched else 0,
            },
        )
        for c in calls
    ]


def _result_params(result: ToolResult) -> dict[str, Any]:
    """The result's row values, dumped once."""
    return {
        "st": "completed" if result.ok else "failed",
        "res": storable.dumps(result.model_dump(mode="json")),
        "kind": result.error.kind if result.error is not None else None,
    }


def settle_stmt(session_id: str, result: ToolResult) -> Stmt:
    """A call's result entering the transcript (the next model turn, or the run's end),
    for a call whose attempt did not record it (a result row already there is kept: it
    is the same result)."""
    return (
        f"UPDATE {S}.tool_calls SET status = CASE WHEN result IS NULL THEN :st ELSE status END,"
        " result = coalesce(result, CAST(:res AS jsonb)),"
        " error_kind = CASE WHEN result IS NULL THEN :kind ELSE error_kind END,"
        " completed_at = coalesce(completed_at, now())"
        " WHERE session_id = :s AND tool_call_id = :id",
        {**_result_params(result), "s": session_id, "id": result.tool_call_id},
    )


def unanswered_stmt(session_id: str) -> Stmt:
    """Calls of earlier runs whose result never reached the transcript (their run was
    interrupted); ``result`` is set when an attempt finished and recorded one anyway."""
    return (
        f"SELECT t.tool_call_id, t.tool, t.kind, t.status, t.result FROM {S}.tool_calls t"
        f" WHERE t.session_id = :s AND NOT EXISTS (SELECT 1 FROM {S}.messages m"
        " WHERE m.session_id = t.session_id AND m.tool_call_id = t.tool_call_id"
        " AND m.role = 'tool') ORDER BY t.turn, t.tool_call_id",
        {"s": session_id},
    )


# --- a server tool's attempt: lock, dispatch mark, result row --------------------------------


@dataclass
class Attempt:
    """One execution of a server tool's step for one call."""

    number: int
    prior_status: str
    """The status before this attempt: anything but ``requested`` means "may have run"."""
    recorded: ToolResult | None
    """The result an earlier attempt committed, if any: return it, run nothing."""
    fenced: bool
    """The run this attempt belongs to is no longer the session's running one (an
    interrupt): nothing was marked; run nothing."""
    _record: Callable[[ToolResult, state_rows.StateCommit | None], Awaitable[ToolResult]]
    state: Any = None
    """The session's latest committed state at the dispatch mark (``with_state``)."""

    async def record(
        self, result: ToolResult, state: state_rows.StateCommit | None = None
    ) -> ToolResult:
        """Commit the result row (retrying while the database is away) and release the
        call's lock; returns the recorded result, which is an earlier writer's if one got
        there first. With ``state``, the result and the state change commit together
        (``store.state.record_with_state``)."""
        return await self._record(result, state)


_MARK = f"""
WITH lk AS MATERIALIZED (
    SELECT CASE WHEN :lock THEN pg_try_advisory_lock(:k) ELSE true END AS got
),
live AS MATERIALIZED (
    SELECT CAST(:run AS bigint) IS NULL OR EXISTS (
        SELECT 1 FROM {S}.sessions WHERE id = :s AND run_seq = CAST(:run AS bigint)
        AND status = 'running'
    ) AS ok
),
upd AS (
    UPDATE {S}.tool_calls t SET
        status = CASE WHEN t.status = 'requested' THEN 'dispatched' ELSE t.status END,
        attempts = CASE WHEN t.attempt_token IS DISTINCT FROM :tok THEN t.attempts + 1
                   ELSE t.attempts END,
        prior_status = CASE WHEN t.attempt_token IS DISTINCT FROM :tok THEN t.status
                       ELSE t.prior_status END,
        attempt_token = :tok,
        dispatched_at = coalesce(t.dispatched_at, now())
    WHERE t.session_id = :s AND t.tool_call_id = :id AND (SELECT got FROM lk)
    AND (SELECT ok FROM live)
    RETURNING t.prior_status, t.result, t.attempts
)
SELECT (SELECT got FROM lk) AS got, (SELECT ok FROM live) AS live, upd.prior_status,
    upd.result, upd.attempts,
    CASE WHEN :with_state THEN ({state_rows.LATEST_SQL}) END AS state
FROM (SELECT 1) AS one LEFT JOIN upd ON true
"""
"""One round trip: take the call's lock if free (else change nothing) and mark the attempt;
with a ``run``, only while that run is the session's running one. The update reads the
row it replaces (the latest version, as a concurrent writer left it), so it needs no
``FOR UPDATE`` of its own: one row version and one WAL record per mark."""

_RECORDED = f"SELECT result FROM {S}.tool_calls WHERE session_id = :s AND tool_call_id = :id"


def recorded_stmt(session_id: str, tool_call_id: str) -> Stmt:
    """The call's committed result, if any (the replay of a server tool call)."""
    return (_RECORDED, {"s": session_id, "id": tool_call_id})


_RECORD = f"""
WITH u AS (
    UPDATE {S}.tool_calls SET status = :st, result = CAST(:res AS jsonb), error_kind = :kind,
        completed_at = now()
    WHERE session_id = :s AND tool_call_id = :id AND result IS NULL
    RETURNING 1
)
SELECT CASE WHEN EXISTS (SELECT 1 FROM u) THEN NULL ELSE (SELECT result FROM {S}.tool_calls
    WHERE session_id = :s AND tool_call_id = :id) END AS earlier
"""
"""One round trip: the first result recorded wins; ``earlier`` is the result an earlier
writer recorded (NULL: this one was)."""

_UNLOCK = "SELECT pg_advisory_unlock(:k)"


@asynccontextmanager
async def attempt(
    engine: AsyncEngine,
    session_id: str,
    tool_call_id: str,
    token: str,
    *,
    exclusive: bool,
    run_seq: int | None = None,
    with_state: bool = False,
) -> AsyncIterator[Attempt]:
    """Begin an attempt (see the module doc). ``exclusive`` (side-effecting tools) holds the
    call's advisory lock until the attempt ends; ``token`` is unique per step execution,
    so a retried dispatch mark of the same execution is not mistaken for an earlier one.
    ``run_seq`` fences the mark on the run (``Attempt.fenced``); ``with_state`` reads the
    session's state with the mark (``Attempt.state``).

    The connection runs in autocommit on the driver (``pg``): each write commits as its one
    statement returns, so the whole attempt costs two round trips (mark; record with the
    unlock pipelined after it)."""
    key = lock_key(session_id, tool_call_id)
    conn: AsyncConnection | None = None
    raw: pg.Driver | None = None
    locked = False

    async def connect() -> pg.Driver:
        nonlocal conn, raw, locked
        if conn is not None:
            old, conn, raw = conn, None, None
            locked = False  # the lock died with the old connection's session
            with contextlib.suppress(Exception):  # often closed already by the failure
                await old.invalidate()
                await old.close()
        conn, raw = await pg.checkout(engine)
        return raw

    async def wait_for_lock(c: pg.Driver) -> None:
        nonlocal locked
        log.warning(
            "an earlier attempt of this tool call may still be running: waiting for it",
            extra={"event": "tool_attempt_wait", "tool_call_id": tool_call_id},
        )
        await pg.fetch(c, ("SELECT pg_advisory_lock(:k)", {"k": key}))
        locked = True

    async def mark() -> Any:
        nonlocal locked
        c = await connect()
        params = {"s": session_id, "id": tool_call_id, "tok": token, "k": key, "run": run_seq}
        params["with_state"] = with_state
        ((row,),) = await pg.script_rows(c, [(_MARK, {"lock": exclusive, **params})])
        if exclusive and not row.got:
            await wait_for_lock(c)
            ((row,),) = await pg.script_rows(c, [(_MARK, {"lock": False, **params})])
        locked = exclusive
        if not row.live:
            return row
        if row.attempts is None:
            raise LookupError(f"no ledger row for tool call {tool_call_id!r}")
        return row

    def record_stmt(result: ToolResult) -> pg.Stmt:
        return (_RECORD, {**_result_params(result), "s": session_id, "id": tool_call_id})

    async def record(result: ToolResult, state: state_rows.StateCommit | None) -> ToolResult:
        healthy = True

        async def write() -> ToolResult:
            nonlocal healthy, locked
            c = raw if raw is not None and healthy else await connect()
            healthy = True
            try:
                if exclusive and not locked:
                    ((got,),) = await pg.fetch(c, ("SELECT pg_try_advisory_lock(:k)", {"k": key}))
                    if got:
                        locked = True
                    else:
                        await wait_for_lock(c)
                unlock = [(_UNLOCK, {"k": key})] if locked else []
                if state is not None:  # with the state change, in two round trips
                    earlier, final = await state_rows.record_with_state(
                        c, session_id, tool_call_id, state, record_stmt, unlock
                    )
                    locked = False
                    return final if final is not None else ToolResult.model_validate(earlier)
                # Its own transaction, committed before the unlock, in one round trip.
                _, rows, *_ = await pg.script_rows(
                    c, [("BEGIN", {}), record_stmt(result), ("COMMIT", {}), *unlock]
                )
                locked = False
                ((earlier,),) = rows
            except Exception:
                healthy = False  # reconnect (and re-lock) before the next try
                raise
            return result if earlier is None else ToolResult.model_validate(earlier)

        return await retry_transient("record tool result", write)

    try:
        row = await retry_transient("dispatch mark", mark)
        yield Attempt(
            number=int(row.attempts or 0),
            prior_status=str(row.prior_status),
            recorded=ToolResult.model_validate(row.result) if row.result is not None else None,
            fenced=not row.live,
            _record=record,
            state=row.state,
        )
    finally:
        await _release(engine, conn, raw, key if exclusive and locked else None)


async def _release(
    engine: AsyncEngine, conn: AsyncConnection | None, raw: pg.Driver | None, key: int | None
) -> None:
    """Unlock and return the connection; a broken one is discarded (its lock died with it),
    and one that could not be unlocked too (a lock must never outlive its attempt)."""
    if conn is None or raw is None:
        return
    try:
        if key is not None and not (raw.broken or raw.closed):
            await pg.fetch(raw, (_UNLOCK, {"k": key}))
    except Exception:
        with contextlib.suppress(Exception):
            await conn.invalidate()
            await conn.close()
        return
    with contextlib.suppress(Exception):
        await pg.release(engine, conn, raw)


# --- reads --------------------------------------------------------------------------------


def list_for_session(engine: sa.Engine, session_id: str) -> list[ToolCallRecord]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                f"SELECT session_id, tool_call_id, run_seq, turn, tool, kind, arguments,"
                f" idempotency_key, safe_to_retry, status, attempts, result, error_kind"
                f" FROM {S}.tool_calls WHERE session_id = :s ORDER BY requested_at, tool_call_id"
            ),
            {"s": session_id},
        ).all()
    return [ToolCallRecord.model_validate(r._asdict()) for r in rows]
