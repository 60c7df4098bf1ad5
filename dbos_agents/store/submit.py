"""The submit path (DESIGN §4) and interrupts: one Postgres transaction each.

A submit locks the pending row, decides the outcome, validates the result against the
stored output schema, marks the row submitted and sends the payload to the owning workflow
with ``DBOSClient.send_in_transaction`` (topic and idempotency key = tool call id). Row
update and message commit together, so a submit is delivered once or not at all, and 50
concurrent identical submits yield one ``accepted``.
"""

from __future__ import annotations

import contextlib
import json
import logging
from datetime import datetime
from typing import Any, Literal

import jsonschema
import sqlalchemy as sa
from dbos import DBOSClient
from pydantic import BaseModel

from ..errors import (
    InvalidRequestError,
    InvalidResultError,
    NotRootSessionError,
    SessionNotFoundError,
)

S = "dbos_agents"
BUSY = ("queued", "running")
log = logging.getLogger("dbos_agents")

SubmitStatus = Literal[
    "accepted", "already_completed", "unknown_tool_call", "late_answer_after_timeout"
]
PendingKind = Literal["client", "approval"]


class SubmitOutcome(BaseModel):
    """What happened to a submit. Only ``accepted`` woke the waiting workflow."""

    status: SubmitStatus
    session_id: str
    tool_call_id: str
    reason: str | None = None
    """For ``unknown_tool_call``: ``no_session``, ``no_pending_call`` or ``interrupted``."""


class PendingCall(BaseModel):
    """A pending (or, with ``include_resolved``, settled) client-tool call or approval."""

    root_session_id: str
    tool_call_id: str
    owner_session_id: str
    owner_workflow_id: str
    kind: PendingKind
    tool: str
    arguments: Any
    deadline: datetime
    output_schema: dict[str, Any] | None
    status: str
    submitted_at: datetime | None
    resolved_at: datetime | None
    user_id: str | None
    tenant_id: str | None
    created_at: datetime


class InterruptOutcome(BaseModel):
    session_id: str
    interrupted_sessions: list[str]
    cancelled_calls: list[str]


def _schema_errors(schema: dict[str, Any], value: Any) -> list[dict[str, object]]:
    validator = jsonschema.Draft202012Validator(schema)
    return [
        {"path": "/".join(str(p) for p in e.absolute_path) or "(root)", "message": e.message}
        for e in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    ]


def submit(
    engine: sa.Engine,
    client: DBOSClient,
    *,
    session_id: str,
    tool_call_id: str,
    kind: PendingKind,
    payload: dict[str, Any],
) -> SubmitOutcome:
    """Deliver ``payload`` to the workflow waiting on ``tool_call_id`` (see module doc)."""

    def outcome(status: SubmitStatus, reason: str | None = None) -> SubmitOutcome:
        return SubmitOutcome(
            status=status, session_id=session_id, tool_call_id=tool_call_id, reason=reason
        )

    is_error = payload.get("kind") == "error"
    with engine.begin() as conn:
        row = conn.execute(
            sa.text(
                f"SELECT kind, status, owner_workflow_id, output_schema FROM {S}.pending_calls"
                " WHERE root_session_id = :s AND tool_call_id = :id FOR UPDATE"
            ),
            {"s": session_id, "id": tool_call_id},
        ).first()
        if row is None:
            sess = conn.execute(
                sa.text(f"SELECT root_session_id FROM {S}.sessions WHERE id = :s"),
                {"s": session_id},
            ).first()
            if sess is not None and sess.root_session_id != session_id:
                raise NotRootSessionError(session_id, sess.root_session_id)
            reason = "no_session" if sess is None else "no_pending_call"
            log.warning(
                "client_tool.submit_unknown",
                extra={
                    "event": "client_tool.submit_unknown",
                    "session_id": session_id,
                    "tool_call_id": tool_call_id,
                    "reason": reason,
                },
            )
            return outcome("unknown_tool_call", reason)
        if row.status in ("submitted", "resolved"):
            return outcome("already_completed")
        if row.status == "cancelled":
            return outcome("unknown_tool_call", "interrupted")
        if not is_error and row.kind != kind:
            wanted = {"approval": "an approval", "client": "a client-tool result"}
            raise InvalidRequestError(
                f"tool call {tool_call_id!r} waits for {wanted[row.kind]}, not {wanted[kind]}"
            )
        if not is_error and row.output_schema is not None:
            errors = _schema_errors(row.output_schema, payload.get("result"))
            if errors:
                log.warning(
                    "client_tool.validation_failed",
                    extra={"event": "client_tool.validation_failed", "tool_call_id": tool_call_id},
                )
                raise InvalidResultError(
                    f"result for {tool_call_id!r} does not match the tool's output schema", errors
                )
        if row.status == "timed_out":
            conn.execute(
                sa.text(
                    f"UPDATE {S}.pending_calls SET late_submission = CAST(:p AS jsonb),"
                    " late_at = now() WHERE root_session_id = :s AND tool_call_id = :id"
                    " AND late_submission IS NULL"
                ),
                {"p": json.dumps(payload), "s": session_id, "id": tool_call_id},
            )
            log.warning(
                "client_tool.late_answer",
                extra={"event": "client_tool.late_answer", "tool_call_id": tool_call_id},
            )
            return outcome("late_answer_after_timeout")
        conn.execute(
            sa.text(
                f"UPDATE {S}.pending_calls SET status = 'submitted', submission = CAST(:p AS jsonb),"
                " submitted_at = now() WHERE root_session_id = :s AND tool_call_id = :id"
            ),
            {"p": json.dumps(payload), "s": session_id, "id": tool_call_id},
        )
        client.send_in_transaction(
            conn, row.owner_workflow_id, payload, topic=tool_call_id, idempotency_key=tool_call_id
        )
    log.info(
        "client_tool.submitted",
        extra={
            "event": "client_tool.submitted",
            "session_id": session_id,
            "tool_call_id": tool_call_id,
            "has_error": is_error,
        },
    )
    return outcome("accepted")


def pending(
    engine: sa.Engine,
    *,
    session_id: str | None = None,
    tenant_id: str | None = None,
    user_id: str | None = None,
    kind: PendingKind | None = None,
    include_resolved: bool = False,
    limit: int = 100,
) -> list[PendingCall]:
    """Open waits (oldest deadline first), filtered; ``session_id`` is a root session id."""
    where = [] if include_resolved else ["status IN ('waiting', 'submitted')"]
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
        f" tenant_id, created_at FROM {S}.pending_calls"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY deadline, tool_call_id LIMIT :limit"
    )
    with engine.connect() as conn:
        rows = conn.execute(sa.text(sql), params).all()
    out = []
    for r in rows:
        d = r._asdict()
        with contextlib.suppress(ValueError):
            d["arguments"] = json.loads(d["arguments"])
        out.append(PendingCall.model_validate(d))
    return out


def interrupt(engine: sa.Engine, client: DBOSClient, session_id: str) -> InterruptOutcome:
    """Interrupt a session tree: mark it, cancel its waits (waking them), cancel workflows."""
    with engine.begin() as conn:
        sess = conn.execute(
            sa.text(f"SELECT root_session_id FROM {S}.sessions WHERE id = :s"), {"s": session_id}
        ).first()
        if sess is None:
            raise SessionNotFoundError(session_id)
        root = sess.root_session_id
        busy = conn.execute(
            sa.text(
                f"UPDATE {S}.sessions SET status = 'interrupted', inbox_open = false,"
                " updated_at = now() WHERE root_session_id = :r"
                " AND status IN ('queued', 'running') RETURNING id, workflow_id"
            ),
            {"r": root},
        ).all()
        waits = conn.execute(
            sa.text(
                f"UPDATE {S}.pending_calls SET status = 'cancelled', resolved_at = now()"
                " WHERE root_session_id = :r AND status IN ('waiting', 'submitted')"
                " RETURNING owner_workflow_id, tool_call_id"
            ),
            {"r": root},
        ).all()
        for w in waits:
            # cancel_workflow does not wake a blocked recv: this message does.
            client.send_in_transaction(
                conn,
                w.owner_workflow_id,
                {"kind": "interrupt"},
                topic=w.tool_call_id,
                idempotency_key=f"interrupt::{w.tool_call_id}",
            )
    for b in busy:
        try:
            client.cancel_workflow(b.workflow_id)
        except Exception as exc:  # finished or never started: nothing left to cancel
            log.info("cancel skipped", extra={"workflow_id": b.workflow_id, "error": str(exc)})
    for w in waits:
        log.warning(
            "client_tool.aborted",
            extra={"event": "client_tool.aborted", "tool_call_id": w.tool_call_id},
        )
    return InterruptOutcome(
        session_id=session_id,
        interrupted_sessions=[b.id for b in busy],
        cancelled_calls=[w.tool_call_id for w in waits],
    )


def reap_tombstones(engine: sa.Engine, retention_seconds: float) -> int:
    """Delete settled pending rows older than the retention window; returns how many."""
    with engine.begin() as conn:
        r = conn.execute(
            sa.text(
                f"DELETE FROM {S}.pending_calls WHERE resolved_at IS NOT NULL"
                " AND resolved_at < now() - make_interval(secs => :s)"
                " AND status IN ('resolved', 'timed_out', 'cancelled')"
            ),
            {"s": retention_seconds},
        )
        return r.rowcount or 0
