"""Sessions (``sessions``): the one module that writes them.

A run is fenced by its ``run_seq`` on the session row: begin, finish and interrupt all
serialize on the row, so a stale run (cancelled, or overtaken by a follow-up) can never
write over a newer one.

    (new) ──▶ queued ──▶ running ──▶ completed | max_turns | budget_exhausted | failed
                 │           └──────▶ interrupted
                 └──────────────────▶ interrupted
    any terminal status ──▶ queued    (a follow-up message: run_seq + 1)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .. import _dbos, storable
from ..messages import Usage
from ..outcome import RunSpec, SessionInfo
from . import pg
from .pg import Db, Stmt
from .schema import SCHEMA as S

EVENTS_CHANNEL = "dbos_agents_events"
"""The channel a committed change of a session is announced on (``live.announce``)."""

BUSY = ("queued", "running")


def cancelled_outside(system_schema: str, alias: str = "s") -> str:
    """SQL: the session row ``alias`` is busy but its run's DBOS workflow was cancelled
    by someone other than us (``dbos workflow cancel``): the run will never end it."""
    ws = _dbos.quoted(system_schema) + ".workflow_status"
    return (
        f"({alias}.status IN ('queued', 'running') AND EXISTS (SELECT 1 FROM {ws} w"
        f" WHERE w.workflow_uuid = {alias}.workflow_id AND w.status = 'CANCELLED'))"
    )


def _status(system_schema: str | None) -> str:
    """The status readers see: ``interrupted`` for a run cancelled outside us (the next
    message reconciles the row, ``queries.enqueue_run``); the row's own without a schema."""
    if system_schema is None:
        return "s.status"
    return f"CASE WHEN {cancelled_outside(system_schema)} THEN 'interrupted' ELSE s.status END"


# --- out of the workflow: starting runs, interrupts, reads -----------------------------------


def insert_queued(
    conn: sa.Connection, session_id: str, agent: str, user_id: str | None, tenant_id: str | None
) -> None:
    conn.execute(
        sa.text(
            f"INSERT INTO {S}.sessions (id, root_session_id, agent, status, user_id, tenant_id,"
            " run_seq, workflow_id) VALUES (:s, :s, :a, 'queued', :u, :t, 1, :s)"
        ),
        {"s": session_id, "a": agent, "u": user_id, "t": tenant_id},
    )


def lock(conn: sa.Connection, session_id: str, system_schema: str | None = None) -> Any:
    """The session row, locked until the caller's transaction ends; ``None`` if absent.
    With ``system_schema``, ``wf_cancelled``: its run's workflow was cancelled by someone
    else while busy, or while waiting on its inbox (a persistent session)."""
    cancelled = "false"
    if system_schema is not None:
        ws = _dbos.quoted(system_schema) + ".workflow_status"
        cancelled = (
            f"(s.status IN ('queued', 'running') OR s.inbox_open) AND EXISTS (SELECT 1"
            f" FROM {ws} w WHERE w.workflow_uuid = s.workflow_id AND w.status = 'CANCELLED')"
        )
    return conn.execute(
        sa.text(
            f"SELECT status, run_seq, root_session_id, parent_session_id, agent, user_id,"
            f" tenant_id, inbox_open, workflow_id, {cancelled} AS wf_cancelled"
            f" FROM {S}.sessions s WHERE id = :s FOR UPDATE OF s"
        ),
        {"s": session_id},
    ).first()


def requeue(conn: sa.Connection, session_id: str, run_seq: int, workflow_id: str) -> None:
    """A follow-up message: the next run is queued (the caller holds the row lock)."""
    conn.execute(
        sa.text(
            f"UPDATE {S}.sessions SET status = 'queued', run_seq = :r, workflow_id = :w,"
            " inbox_open = false, updated_at = now() WHERE id = :s"
        ),
        {"r": run_seq, "w": workflow_id, "s": session_id},
    )


def identity(conn: sa.Connection, session_id: str) -> sa.Row[Any] | None:
    """The session's (root_session_id, user_id, tenant_id), or None: no such session."""
    return conn.execute(
        sa.text(f"SELECT root_session_id, user_id, tenant_id FROM {S}.sessions WHERE id = :s"),
        {"s": session_id},
    ).first()


def interrupt_tree(conn: sa.Connection, root_session_id: str) -> list[sa.Row[Any]]:
    """Lock the whole tree, mark its busy sessions interrupted; returns (id, workflow_id,
    run_seq)."""
    conn.execute(
        sa.text(f"SELECT id FROM {S}.sessions WHERE root_session_id = :r ORDER BY id FOR UPDATE"),
        {"r": root_session_id},
    )
    return list(
        conn.execute(
            sa.text(
                f"UPDATE {S}.sessions SET status = 'interrupted', inbox_open = false,"
                " updated_at = now() WHERE root_session_id = :r"
                " AND status IN ('queued', 'running') RETURNING id, workflow_id, run_seq"
            ),
            {"r": root_session_id},
        ).all()
    )


def get(engine: sa.Engine, session_id: str, system_schema: str | None = None) -> SessionInfo | None:
    """The session; with DBOS's ``system_schema``, a run cancelled outside us reads
    ``interrupted`` (see ``_status``)."""
    sql, params = _get_stmt(session_id, system_schema)
    with engine.connect() as conn:
        r = conn.execute(sa.text(sql), params).first()
    return None if r is None else _info(r)


async def get_on(
    driver: pg.Driver, session_id: str, system_schema: str | None = None
) -> SessionInfo | None:
    """``get`` on an autocommit connection of the caller's loop (the async client's)."""
    rows = await pg.fetch(driver, _get_stmt(session_id, system_schema))
    return _info(rows[0]) if rows else None


@dataclass(frozen=True)
class WithRuns:
    """A session as a chat request reads it, in one statement: the session, the generation
    its tokens must carry, and where its runs' messages lie in its transcript."""

    info: SessionInfo
    token_generation: int
    first: int | None
    """The current run's first message (None: it has none yet)."""
    asked: int | None
    """The current run's last assistant message."""
    first_next: int | None
    """The first message of a run after the current one."""
    last: int
    """The transcript's last message (0: none)."""


async def get_with_runs_on(
    driver: pg.Driver, session_id: str, system_schema: str | None = None
) -> WithRuns | None:
    """``get`` with the token generation and the runs' bounds (``WithRuns``), on a
    connection of the caller's loop: a chat request's reads, one round trip, one snapshot."""
    bounds = (
        "SELECT min(m.seq) FILTER (WHERE m.run_seq >= s.run_seq) AS first_seq,"
        " max(m.seq) FILTER (WHERE m.run_seq = s.run_seq AND m.role = 'assistant')"
        " AS asked_seq, min(m.seq) FILTER (WHERE m.run_seq > s.run_seq) AS first_next_seq,"
        f" coalesce(max(m.seq), 0) AS last_seq FROM {S}.messages m WHERE m.session_id = s.id"
    )
    sql = (
        f"SELECT s.*, {_status(system_schema)} AS seen_status, b.* FROM {S}.sessions s"
        f" CROSS JOIN LATERAL ({bounds}) b WHERE s.id = :s"
    )
    rows = await pg.fetch(driver, (sql, {"s": session_id}))
    if not rows:
        return None
    r = rows[0]
    return WithRuns(
        _info(r), r.token_generation, r.first_seq, r.asked_seq, r.first_next_seq, r.last_seq
    )


def _get_stmt(session_id: str, system_schema: str | None) -> Stmt:
    return (
        f"SELECT s.*, {_status(system_schema)} AS seen_status FROM {S}.sessions s WHERE s.id = :s",
        {"s": session_id},
    )


def list_recent(
    engine: sa.Engine,
    *,
    agent: str | None = None,
    status: str | None = None,
    user_id: str | None = None,
    tenant_id: str | None = None,
    limit: int = 20,
    system_schema: str | None = None,
) -> list[SessionInfo]:
    """Sessions newest first, each filter applied when given (``dbos-agents sessions``);
    statuses as ``get`` reads them."""
    seen = _status(system_schema)
    columns = {
        "agent": "s.agent",
        "status": seen,
        "user_id": "s.user_id",
        "tenant_id": "s.tenant_id",
    }
    filters = {"agent": agent, "status": status, "user_id": user_id, "tenant_id": tenant_id}
    given = {k: v for k, v in filters.items() if v is not None}
    where = " AND ".join(f"{columns[k]} = :{k}" for k in given) or "TRUE"
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                f"SELECT s.*, {seen} AS seen_status FROM {S}.sessions s WHERE {where}"
                " ORDER BY s.created_at DESC, s.id DESC LIMIT :lim"
            ),
            {**given, "lim": limit},
        ).all()
    return [_info(r) for r in rows]


def _info(r: Any) -> SessionInfo:
    return SessionInfo(
        id=r.id,
        root_session_id=r.root_session_id,
        parent_session_id=r.parent_session_id,
        agent=r.agent,
        status=getattr(r, "seen_status", r.status),
        user_id=r.user_id,
        tenant_id=r.tenant_id,
        run_seq=r.run_seq,
        workflow_id=r.workflow_id,
        turns=r.turns,
        usage=Usage(
            input_tokens=r.input_tokens, output_tokens=r.output_tokens, cost_usd=float(r.cost_usd)
        ),
        final_output=r.final_output,
        error=r.error,
        created_at=r.created_at,
        updated_at=r.updated_at,
        forked_from=getattr(r, "forked_from", None),  # migration 0016 on
        forked_at_turn=getattr(r, "forked_at_turn", None),
    )


# --- inside the workflow (datasource transactions) -------------------------------------------


def token_generation(engine: sa.Engine, session_id: str) -> Any | None:
    """The generation a valid session token must carry, with the session's ``user_id`` and
    ``tenant_id`` for a scoped caller's check, in one read (None: no such session)."""
    sql, params = _token_generation_stmt(session_id)
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).first()


async def token_generation_on(driver: pg.Driver, session_id: str) -> Any | None:
    """``token_generation`` on a connection of the caller's loop (every request a session
    token lets in reads it)."""
    rows = await pg.fetch(driver, _token_generation_stmt(session_id))
    return rows[0] if rows else None


def _token_generation_stmt(session_id: str) -> Stmt:
    return (
        f"SELECT token_generation, user_id, tenant_id FROM {S}.sessions WHERE id = :s",
        {"s": session_id},
    )


def revoke_tokens(engine: sa.Engine, session_id: str) -> int | None:
    """Invalidate every token issued for the session so far; returns the new generation
    (None: no such session)."""
    with engine.begin() as conn:
        row = conn.execute(
            sa.text(
                f"UPDATE {S}.sessions SET token_generation = token_generation + 1"
                " WHERE id = :s RETURNING token_generation"
            ),
            {"s": session_id},
        ).first()
        if row is not None:  # open event streams close at once
            conn.execute(
                sa.text("SELECT pg_notify(:c, :s)"), {"c": EVENTS_CHANNEL, "s": session_id}
            )
    return None if row is None else int(row[0])


def begin_stmt(spec: RunSpec, workflow_id: str) -> Stmt:
    """Mark the run ``running`` (a sub-agent's row is created here); returns a row unless
    the run is fenced off: the session was interrupted, or a newer run owns it."""
    return (
        f"INSERT INTO {S}.sessions AS cur (id, root_session_id, parent_session_id, agent,"
        " status, user_id, tenant_id, run_seq, workflow_id) VALUES (:id, :root, :parent,"
        " :agent, 'running', :u, :t, :run, :wf) ON CONFLICT (id) DO UPDATE SET"
        " status = 'running', workflow_id = excluded.workflow_id, error = NULL,"
        " final_output = NULL, updated_at = now() WHERE cur.run_seq = excluded.run_seq"
        " AND cur.status IN ('queued', 'running') RETURNING id",
        {
            "id": spec["session_id"],
            "root": spec["root_session_id"],
            "parent": spec["parent_session_id"],
            "agent": spec["agent"],
            "u": spec["user_id"],
            "t": spec["tenant_id"],
            "run": spec["run_seq"],
            "wf": workflow_id,
        },
    )


def share_root_stmt(root_session_id: str) -> Stmt:
    """Hold the root's row (shared) until the transaction ends: ``interrupt_tree`` locks
    the tree before it marks it, so the two serialize."""
    return (f"SELECT 1 FROM {S}.sessions WHERE id = :r FOR SHARE", {"r": root_session_id})


def mark_interrupted_stmt(session_id: str) -> Stmt:
    """A sub-agent whose tree was interrupted as it began."""
    return (f"UPDATE {S}.sessions SET status = 'interrupted' WHERE id = :s", {"s": session_id})


def lock_stmt(session_id: str) -> Stmt:
    """Serialize the run's writes on the row (message sequence numbers)."""
    return (f"SELECT 1 FROM {S}.sessions WHERE id = :s FOR UPDATE", {"s": session_id})


RUN_FENCE_SQLSTATE = "DA001"


class RunFenced(Exception):
    """The run is no longer the session's running one (interrupted, or a newer run owns
    the row): the write that found out changed nothing."""


def lock_running_stmt(session_id: str, run_seq: int) -> Stmt:
    """``lock_stmt``, fenced: fails with ``RUN_FENCE_SQLSTATE`` (aborting the transaction)
    unless ``run_seq`` is the session's running run (migration 0010)."""
    return (
        f"SELECT {S}.lock_running_run(:s, CAST(:r AS bigint))",
        {"s": session_id, "r": run_seq},
    )


def is_fence(exc: BaseException) -> bool:
    return getattr(exc, "sqlstate", None) == RUN_FENCE_SQLSTATE


def run_seq_stmt(session_id: str) -> Stmt:
    """``lock_stmt`` that returns the row's ``run_seq``."""
    return (f"SELECT run_seq FROM {S}.sessions WHERE id = :s FOR UPDATE", {"s": session_id})


def count_running_turn_stmt(session_id: str, run_seq: int, usage: Usage) -> Stmt:
    """``lock_running_stmt`` that also counts the turn and its usage on the row, in one
    update (migration 0021): a model turn's fence."""
    return (
        f"SELECT {S}.count_running_turn(:s, CAST(:r AS bigint), CAST(:i AS bigint),"
        " CAST(:o AS bigint), CAST(:c AS numeric))",
        {"s": session_id, "r": run_seq, "i": usage.input_tokens, "o": usage.output_tokens}
        | {"c": usage.cost_usd},
    )


def finish_stmt(
    spec: RunSpec, status: str, output: str | None, error: str | None, open_inbox: bool
) -> Stmt:
    """How the run ended, only while this run still owns the row (same ``run_seq``, not
    interrupted): a no-op otherwise, so running it again changes nothing."""
    return (
        f"UPDATE {S}.sessions SET status = :st, final_output = :out, error = :err,"
        " inbox_open = :inbox, updated_at = now() WHERE id = :s AND run_seq = :run"
        " AND status IN ('queued', 'running')",
        {
            "st": status,
            "out": storable.optional_text(output),
            "err": storable.optional_text(error),
            "inbox": open_inbox,
            "s": spec["session_id"],
            "run": spec["run_seq"],
        },
    )


async def close_inbox(db: Db, session_id: str, run_seq: int) -> bool:
    """At the idle TTL: close the inbox unless a message was sent meanwhile (the sender
    bumped ``run_seq`` under the same row lock); True when the workflow may end."""
    r = await db.execute(
        sa.text(
            f"UPDATE {S}.sessions SET inbox_open = false, updated_at = now() WHERE id = :s"
            " AND run_seq = :r RETURNING id"
        ),
        {"s": session_id, "r": run_seq},
    )
    return r.first() is not None
