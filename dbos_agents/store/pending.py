"""Pending calls (``pending_calls``): the one module that writes them.

A client-tool call or an approval waits on a row keyed by (root session id, tool call id):

    waiting ──▶ submitted ──▶ resolved            (a submit, then its result recorded)
       │            └───────▶ cancelled | closed
       ├──▶ timed_out                             (the deadline passed; a late answer is kept)
       ├──▶ cancelled                             (interrupt)
       └──▶ closed                                (the run ended without reading it)

Settled rows stay as tombstones for the retention window, so a duplicate submit still
answers ``already_completed``.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import sqlalchemy as sa

from .. import _dbos
from ..records import PendingCall, PendingKind
from .pg import Db, Stmt
from .schema import SCHEMA as S

OPEN = ("waiting", "submitted")


# --- inside the workflow (datasource transactions) -------------------------------------------


def open_stmt(
    *,
    root_session_id: str,
    tool_call_id: str,
    owner_session_id: str,
    owner_workflow_id: str,
    kind: str,
    tool: str,
    arguments: str,
    output_schema: dict[str, Any] | None,
    user_id: str | None,
    tenant_id: str | None,
    deadline: float,
) -> Stmt:
    """A wait's row, ``waiting`` until its absolute ``deadline`` (epoch seconds), fixed
    once: the model turn fixes it and records it with the turn, whose transaction this
    statement joins."""
    return (
        f"INSERT INTO {S}.pending_calls (root_session_id, tool_call_id, owner_session_id,"
        " owner_workflow_id, kind, tool, arguments, deadline, output_schema, status,"
        " user_id, tenant_id) VALUES (:root, :id, :owner, :wf, :kind, :tool, :args,"
        " to_timestamp(:deadline), CAST(:schema AS jsonb), 'waiting', :u, :t)",
        {
            "root": root_session_id,
            "id": tool_call_id,
            "owner": owner_session_id,
            "wf": owner_workflow_id,
            "kind": kind,
            "tool": tool,
            "args": arguments,
            "deadline": deadline,
            "schema": json.dumps(output_schema),
            "u": user_id,
            "t": tenant_id,
        },
    )


def open_once_stmt(**fields: Any) -> Stmt:
    """``open_stmt`` for a wait opened outside a model turn (a durable tool's ``ask``):
    opened again by a re-executed body, it keeps its row and its first deadline, which it
    returns (``deadline``, epoch seconds)."""
    sql, params = open_stmt(**fields)
    return (
        sql + " ON CONFLICT (root_session_id, tool_call_id) DO UPDATE"
        f" SET deadline = {S}.pending_calls.deadline"
        " RETURNING extract(epoch FROM deadline) AS deadline",
        params,
    )


async def settle_timeout(db: Db, root_session_id: str, tool_call_id: str) -> str:
    """At the deadline: ``timed_out`` unless a submit or an interrupt won the race; returns
    the status the row is left in."""
    r = await db.execute(
        sa.text(
            f"UPDATE {S}.pending_calls SET status = CASE WHEN status = 'waiting'"
            " THEN 'timed_out' ELSE status END, resolved_at = CASE WHEN status = 'waiting'"
            " THEN now() ELSE resolved_at END WHERE root_session_id = :r"
            " AND tool_call_id = :id RETURNING status"
        ),
        {"r": root_session_id, "id": tool_call_id},
    )
    return str(r.scalar_one())


def resolve_stmt(root_session_id: str, tool_call_id: str) -> Stmt:
    """The call's result was recorded: the wait is over."""
    return (
        f"UPDATE {S}.pending_calls SET status = 'resolved', resolved_at = now()"
        " WHERE root_session_id = :r AND tool_call_id = :id AND status IN ('waiting',"
        " 'submitted')",
        {"r": root_session_id, "id": tool_call_id},
    )


_CLOSE_OPEN = (
    f"UPDATE {S}.pending_calls SET status = 'closed', close_reason = :why,"
    " resolved_at = now() WHERE owner_session_id = :s AND status IN ('waiting', 'submitted')"
)


def close_open_stmt(owner_session_id: str, reason: str, run_seq: int) -> Stmt:
    """The run that owns these waits ended: nobody will read them any more. Fenced on the
    run: only while ``run_seq`` is the session's run, so a replay of a run's end after a
    newer run began closes none of the newer run's waits."""
    return (
        _CLOSE_OPEN + f" AND EXISTS (SELECT 1 FROM {S}.sessions WHERE id = :s AND"
        " run_seq = CAST(:run AS bigint))",
        {"s": owner_session_id, "why": reason, "run": run_seq},
    )


def take_late_answers_stmt(owner_session_id: str) -> Stmt:
    """Late answers not yet shown to the model, marked shown (one notice each); rows of
    ``tool_call_id, tool, late_submission`` (sort them: RETURNING has no order)."""
    return (
        f"UPDATE {S}.pending_calls SET late_noticed = true WHERE owner_session_id = :s"
        " AND late_submission IS NOT NULL AND NOT late_noticed"
        " RETURNING tool_call_id, tool, late_submission",
        {"s": owner_session_id},
    )


# --- the submit path and interrupts (caller-owned sync transactions) -------------------------


def row_for_submit(
    conn: sa.Connection,
    root_session_id: str,
    tool_call_id: str,
    system_schema: str = "dbos",
    *,
    lock: bool = True,
) -> Any:
    """The row a submit decides on (locked unless ``lock`` is false), with its run's DBOS
    status (``run_status``, ``None``: no such workflow) read by the same statement, and
    the identity a scoped client is checked against (the root session's user and tenant);
    ``None`` when there is no such wait."""
    sql, params = row_for_submit_stmt(root_session_id, tool_call_id, system_schema, lock=lock)
    return conn.execute(sa.text(sql), params).first()


def row_for_submit_stmt(
    root_session_id: str, tool_call_id: str, system_schema: str = "dbos", *, lock: bool = True
) -> Stmt:
    ws = _dbos.quoted(system_schema) + ".workflow_status"
    return (
        "SELECT p.kind, p.status, p.owner_workflow_id, p.output_schema, p.user_id, p.tenant_id,"
        f" (SELECT w.status FROM {ws} AS w WHERE w.workflow_uuid = p.owner_workflow_id)"
        f" AS run_status FROM {S}.pending_calls AS p"
        " WHERE p.root_session_id = :s AND p.tool_call_id = :id"
        + (" FOR UPDATE OF p" if lock else ""),
        {"s": root_session_id, "id": tool_call_id},
    )


def mark_if_waiting_sql() -> str:
    """An update for a CTE: the wait marked submitted only if it is still waiting, its
    owner's workflow id returned (parameters ``s``, ``id``, ``p``: the submission)."""
    return (
        f"UPDATE {S}.pending_calls SET status = 'submitted', submission = CAST(:p AS jsonb),"
        " submitted_at = now() WHERE root_session_id = :s AND tool_call_id = :id"
        " AND status = 'waiting' RETURNING owner_workflow_id"
    )


def mark_submitted(
    conn: sa.Connection, root_session_id: str, tool_call_id: str, payload: dict[str, Any]
) -> None:
    """The locked path's mark (its row is ``waiting`` under the lock): the same update as
    the two-statement path's, so both write one thing."""
    conn.execute(
        sa.text(mark_if_waiting_sql()),
        {"p": json.dumps(payload), "s": root_session_id, "id": tool_call_id},
    )


def store_late_answer(
    conn: sa.Connection, root_session_id: str, tool_call_id: str, payload: dict[str, Any]
) -> None:
    """Keep the first late answer, for audit and for one notice to the model."""
    conn.execute(
        sa.text(
            f"UPDATE {S}.pending_calls SET late_submission = CAST(:p AS jsonb), late_at = now()"
            " WHERE root_session_id = :s AND tool_call_id = :id AND late_submission IS NULL"
        ),
        {"p": json.dumps(payload), "s": root_session_id, "id": tool_call_id},
    )


def close_one(conn: sa.Connection, root_session_id: str, tool_call_id: str, reason: str) -> None:
    """A submit found the owning run already ended: close the wait it left open."""
    conn.execute(
        sa.text(
            f"UPDATE {S}.pending_calls SET status = 'closed', close_reason = :why,"
            " resolved_at = now() WHERE root_session_id = :s AND tool_call_id = :id"
            " AND status IN ('waiting', 'submitted')"
        ),
        {"s": root_session_id, "id": tool_call_id, "why": reason},
    )


def cancel_tree_stmt(root_session_id: str) -> Stmt:
    """Interrupt: cancel every open wait under the root; rows of (owner workflow, call)."""
    return (
        f"UPDATE {S}.pending_calls SET status = 'cancelled', resolved_at = now()"
        " WHERE root_session_id = :r AND status IN ('waiting', 'submitted')"
        " RETURNING owner_workflow_id, tool_call_id",
        {"r": root_session_id},
    )


def cancel_tree(conn: sa.Connection, root_session_id: str) -> list[sa.Row[Any]]:
    """``cancel_tree_stmt`` on the caller's connection (inside its transaction)."""
    sql, params = cancel_tree_stmt(root_session_id)
    return list(conn.execute(sa.text(sql), params).all())


def reap(engine: sa.Engine, retention_seconds: float) -> int:
    """Delete settled rows older than the retention window; returns how many."""
    with engine.begin() as conn:
        r = conn.execute(
            sa.text(
                f"DELETE FROM {S}.pending_calls WHERE resolved_at IS NOT NULL"
                " AND resolved_at < now() - make_interval(secs => :s)"
                " AND status IN ('resolved', 'timed_out', 'cancelled', 'closed')"
            ),
            {"s": retention_seconds},
        )
        return r.rowcount or 0


def list_pending(engine: sa.Engine, stmt: Stmt) -> list[PendingCall]:
    """A ``list_pending_stmt`` run, its rows as ``PendingCall``."""
    sql, params = stmt
    with engine.connect() as conn:
        rows = conn.execute(sa.text(sql), params).all()
    return [PendingCall.model_validate(with_decoded_arguments(r._asdict())) for r in rows]


def list_pending_stmt(
    *,
    session_id: str | None = None,
    tenant_id: str | None = None,
    user_id: str | None = None,
    kind: PendingKind | None = None,
    include_resolved: bool = False,
    limit: int = 100,
    system_schema: str = "dbos",
) -> Stmt:
    """Open waits (earliest deadline first), filtered; ``session_id`` is a root session id.

    A wait whose run has ended (its workflow finished, failed or was cancelled without
    closing it) is not open, whatever its row says: nobody would read an answer."""
    ended = ", ".join(f"'{s}'" for s in _dbos.ENDED)
    where = (
        []
        if include_resolved
        else [
            "status IN ('waiting', 'submitted')",
            f"NOT EXISTS (SELECT 1 FROM {_dbos.quoted(system_schema)}.workflow_status w"
            f" WHERE w.workflow_uuid = owner_workflow_id AND w.status IN ({ended}))",
        ]
    )
    params: dict[str, Any] = {"limit": limit}
    for col, val in (
        ("root_session_id", session_id),
        ("tenant_id", tenant_id),
        ("user_id", user_id),
        ("kind", kind),
    ):
        if val is not None:
            where.append(f"{col} = :{col}")
            params[col] = val
    sql = (
        f"SELECT root_session_id, tool_call_id, owner_session_id, owner_workflow_id, kind, tool,"
        f" arguments, deadline, output_schema, status, submitted_at, resolved_at, user_id,"
        f" tenant_id, created_at, submission FROM {S}.pending_calls"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY deadline, tool_call_id LIMIT :limit"
    )
    return sql, params


def with_decoded_arguments(row: dict[str, Any]) -> dict[str, Any]:
    """A listed row with its ``arguments`` text as JSON (kept as text when the model's
    arguments were not JSON: they are stored as the model wrote them)."""
    with contextlib.suppress(ValueError):
        row["arguments"] = json.loads(row["arguments"])
    return row
