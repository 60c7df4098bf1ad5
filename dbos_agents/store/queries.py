"""Reads and out-of-workflow writes on the ``dbos_agents`` schema (sync SQLAlchemy).

Used by ``AgentRuntime`` and every out-of-worker caller. Starting or continuing a session
writes its row and enqueues the run's workflow in one transaction, so a caller that sees an
error knows nothing was started, and a caller that sees success knows the run is durable.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from dbos import DBOSClient
from pydantic import BaseModel

from ..errors import SessionBusyError, SessionNotFoundError
from ..ids import INBOX_TOPIC, WORKFLOW_NAME, new_session_id, run_workflow_id
from ..messages import Message, Usage
from ..outcome import RunSpec, SessionInfo

S = "dbos_agents"
BUSY = ("queued", "running")


class HistoryEntry(Message):
    """A stored transcript message with its position and time."""

    seq: int
    run_seq: int
    created_at: datetime


class ToolCallRecord(BaseModel):
    """A row of the tool-call ledger."""

    session_id: str
    tool_call_id: str
    run_seq: int
    turn: int
    tool: str
    arguments: str
    idempotency_key: str
    safe_to_retry: bool
    status: str
    attempts: int
    result: Any = None
    error_kind: str | None = None


def get_session(engine: sa.Engine, session_id: str) -> SessionInfo | None:
    with engine.connect() as conn:
        r = conn.execute(
            sa.text(f"SELECT * FROM {S}.sessions WHERE id = :s"), {"s": session_id}
        ).first()
    if r is None:
        return None
    return SessionInfo(
        id=r.id,
        root_session_id=r.root_session_id,
        parent_session_id=r.parent_session_id,
        agent=r.agent,
        status=r.status,
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
    )


def history(engine: sa.Engine, session_id: str) -> list[HistoryEntry]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                f"SELECT seq, run_seq, role, content, tool_calls, tool_call_id, name, created_at"
                f" FROM {S}.messages WHERE session_id = :s ORDER BY seq"
            ),
            {"s": session_id},
        ).all()
    return [HistoryEntry.model_validate(r._asdict()) for r in rows]


def tool_calls(engine: sa.Engine, session_id: str) -> list[ToolCallRecord]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                f"SELECT session_id, tool_call_id, run_seq, turn, tool, arguments, idempotency_key,"
                f" safe_to_retry, status, attempts, result, error_kind FROM {S}.tool_calls"
                " WHERE session_id = :s ORDER BY requested_at, tool_call_id"
            ),
            {"s": session_id},
        ).all()
    return [ToolCallRecord.model_validate(r._asdict()) for r in rows]


def enqueue_run(
    engine: sa.Engine,
    client: DBOSClient,
    queue_name: str,
    *,
    session_id: str,
    agent: str,
    message: str,
    user_id: str | None,
    tenant_id: str | None,
    new_session: bool,
) -> tuple[RunSpec, str]:
    """Record a queued run and enqueue its workflow, atomically; returns (spec, workflow id).

    A new session gets its row; an existing one must not be busy, and gets ``run_seq + 1``.
    The user message travels in the workflow input and is stored by the run's first step,
    so it is written exactly once however the caller or the worker fail. A persistent
    session whose workflow waits on its inbox gets the message there instead (same
    transaction, same row lock as the workflow's idle-TTL check, so none is lost).
    """
    inbox_workflow: str | None = None
    with engine.begin() as conn:
        if new_session:
            run_seq = 1
            conn.execute(
                sa.text(
                    f"INSERT INTO {S}.sessions (id, root_session_id, agent, status, user_id,"
                    " tenant_id, run_seq, workflow_id) VALUES (:s, :s, :a, 'queued', :u, :t, 1, :s)"
                ),
                {"s": session_id, "a": agent, "u": user_id, "t": tenant_id},
            )
            root, parent = session_id, None
        else:
            row = conn.execute(
                sa.text(
                    f"SELECT status, run_seq, root_session_id, parent_session_id, agent, user_id,"
                    f" tenant_id, inbox_open, workflow_id FROM {S}.sessions WHERE id = :s"
                    " FOR UPDATE"
                ),
                {"s": session_id},
            ).first()
            if row is None:
                raise SessionNotFoundError(session_id)
            if row.status in BUSY:
                raise SessionBusyError(session_id, row.status)
            run_seq = row.run_seq + 1
            agent, user_id, tenant_id = row.agent, row.user_id, row.tenant_id
            root, parent = row.root_session_id, row.parent_session_id
            inbox_workflow = row.workflow_id if row.inbox_open else None
            conn.execute(
                sa.text(
                    f"UPDATE {S}.sessions SET status = 'queued', run_seq = :r, workflow_id = :w,"
                    " inbox_open = false, updated_at = now() WHERE id = :s"
                ),
                {
                    "r": run_seq,
                    "w": inbox_workflow or run_workflow_id(session_id, run_seq),
                    "s": session_id,
                },
            )
        spec = RunSpec(
            session_id=session_id,
            root_session_id=root,
            parent_session_id=parent,
            agent=agent,
            run_seq=run_seq,
            message=message,
            user_id=user_id,
            tenant_id=tenant_id,
        )
        if inbox_workflow is not None:
            client.send_in_transaction(
                conn,
                inbox_workflow,
                {"run_seq": run_seq, "message": message},
                topic=INBOX_TOPIC,
                idempotency_key=f"inbox::{run_seq}",
            )
        else:
            client.enqueue_in_transaction(
                conn,
                {
                    "queue_name": queue_name,
                    "workflow_name": WORKFLOW_NAME,
                    "workflow_id": run_workflow_id(session_id, run_seq),
                },
                spec,
            )
    return spec, inbox_workflow or run_workflow_id(session_id, run_seq)


def start_run(
    engine: sa.Engine,
    client: DBOSClient,
    queue_name: str,
    *,
    agent: str,
    message: str,
    session_id: str | None,
    user_id: str | None,
    tenant_id: str | None,
) -> tuple[RunSpec, str]:
    """Start a new session, or continue ``session_id`` when it exists (see ``enqueue_run``)."""
    sid = session_id or new_session_id()
    exists = session_id is not None and get_session(engine, sid) is not None
    return enqueue_run(
        engine,
        client,
        queue_name,
        session_id=sid,
        agent=agent,
        message=message,
        user_id=user_id,
        tenant_id=tenant_id,
        new_session=not exists,
    )
