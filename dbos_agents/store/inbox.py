"""The operator inbox's reads: one query per list, whatever its length (no query per row).

Each list is one statement: the pending rows, filtered by tenant, joined to the chain of
sessions from the root down to the session that waits (a recursive CTE), so every row
carries its agent and sub-agent path. ``open_summary`` is the aggregate ``GET /metrics``
runs at scrape time, over the same definition of "open" as ``list_open``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from .. import _dbos
from .pending import with_decoded_arguments
from .schema import SCHEMA as S

MAX_ROWS = 500
"""A list shows at most this many calls (the page then says ``500+``)."""

_ENDED = ", ".join(f"'{s}'" for s in _dbos.ENDED)


def _open_where(system_schema: str) -> str:
    """Open = waiting or submitted, and its run has not ended (nobody would read it)."""
    return (
        "p.status IN ('waiting', 'submitted') AND NOT EXISTS (SELECT 1 FROM"
        f" {_dbos.quoted(system_schema)}.workflow_status w WHERE w.workflow_uuid = p.owner_workflow_id"
        f" AND w.status IN ({_ENDED}))"
    )


def _listing(where: str, order: str) -> str:
    return f"""
WITH RECURSIVE picked AS (
    SELECT p.root_session_id, p.tool_call_id, p.owner_session_id, p.kind, p.tool,
           p.arguments, p.output_schema, p.status, p.close_reason, p.deadline, p.created_at,
           p.resolved_at, p.submission, p.tenant_id
    FROM {S}.pending_calls p WHERE {where} ORDER BY {order} LIMIT :limit
), chain AS (
    SELECT k.root_session_id, k.tool_call_id, s.parent_session_id, s.agent, 0 AS depth
    FROM picked k JOIN {S}.sessions s ON s.id = k.owner_session_id
    UNION ALL
    SELECT c.root_session_id, c.tool_call_id, s.parent_session_id, s.agent, c.depth + 1
    FROM chain c JOIN {S}.sessions s ON s.id = c.parent_session_id
    WHERE c.depth < 64
)
SELECT k.*, (SELECT array_agg(c.agent ORDER BY c.depth DESC) FROM chain c
             WHERE c.root_session_id = k.root_session_id
               AND c.tool_call_id = k.tool_call_id) AS path
FROM picked k ORDER BY {order}
"""


def _tenant(tenant_id: str | None, params: dict[str, Any]) -> str:
    if tenant_id is None:
        return "TRUE"
    params["tenant"] = tenant_id
    return "p.tenant_id = :tenant"


def _rows(engine: sa.Engine, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Each row's columns, its arguments decoded and ``path`` (agent names from the root
    session's agent down to the one that waits) a tuple."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text(sql), params).all()
    out = []
    for r in rows:
        d = with_decoded_arguments(r._asdict())
        d["path"] = tuple(d["path"] or ())
        out.append(d)
    return out


def list_open(
    engine: sa.Engine, system_schema: str, *, tenant_id: str | None, limit: int = MAX_ROWS
) -> list[dict[str, Any]]:
    """The open calls of one tenant (``None``: every tenant), earliest deadline first."""
    params: dict[str, Any] = {"limit": limit}
    where = f"{_tenant(tenant_id, params)} AND {_open_where(system_schema)}"
    return _rows(engine, _listing(where, "deadline, tool_call_id"), params)


def list_settled(
    engine: sa.Engine,
    *,
    tenant_id: str | None,
    within_seconds: float = 3600.0,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """Calls settled in the last ``within_seconds`` (answered, timed out, cancelled,
    closed), newest first: what happened to the calls that left the list."""
    params: dict[str, Any] = {"limit": limit, "within": within_seconds}
    where = (
        f"{_tenant(tenant_id, params)} AND p.resolved_at IS NOT NULL"
        " AND p.resolved_at > now() - make_interval(secs => :within)"
    )
    return _rows(engine, _listing(where, "resolved_at DESC, tool_call_id"), params)


def list_session_calls(engine: sa.Engine, root_session_id: str) -> list[dict[str, Any]]:
    """Every call of one session tree, open or settled, oldest first (the session page)."""
    params: dict[str, Any] = {"limit": MAX_ROWS, "root": root_session_id}
    where = "p.root_session_id = :root"
    return _rows(engine, _listing(where, "created_at, tool_call_id"), params)


def open_summary(engine: sa.Engine, system_schema: str) -> tuple[int, float]:
    """How many calls are open (all tenants) and the oldest one's age in seconds."""
    sql = (
        "SELECT count(*), coalesce(extract(epoch FROM now() - min(p.created_at)), 0)"
        f" FROM {S}.pending_calls p WHERE {_open_where(system_schema)}"
    )
    with engine.connect() as conn:
        count, oldest = conn.execute(sa.text(sql)).one()
    return int(count), float(oldest)
