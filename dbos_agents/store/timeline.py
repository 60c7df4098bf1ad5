"""A session's timeline from our own records: its runs, model turns, tool calls and waits,
with when each began and ended and the tokens and dollars of each turn and run (``runs``,
``usage``, ``tool_calls``, ``pending_calls``, and the user messages that began the runs),
its sub-agents' included. What an operator without a tracing backend reads (the inbox's
timeline page); ``AgentClient.timeline``."""

from __future__ import annotations

import sqlalchemy as sa

from ..records import TimelineEvent
from .schema import SCHEMA as S

_ROWS = sa.text(
    f"""
WITH RECURSIVE tree AS (
    SELECT id, 0 AS depth FROM {S}.sessions WHERE id = :s
    UNION ALL
    SELECT c.id, t.depth + 1 FROM {S}.sessions c JOIN tree t ON c.parent_session_id = t.id
)
SELECT 'run' AS kind, m.session_id, t.depth, m.run_seq, NULL::integer AS turn,
       s.agent AS label, m.created_at AS began, r.ended_at AS ended, r.status,
       r.input_tokens, r.output_tokens, r.cost_usd::float8 AS cost_usd
  FROM {S}.messages m JOIN tree t ON t.id = m.session_id
  JOIN {S}.sessions s ON s.id = m.session_id
  LEFT JOIN {S}.runs r ON r.session_id = m.session_id AND r.run_seq = m.run_seq
 WHERE m.role = 'user'
UNION ALL
SELECT 'turn', u.session_id, t.depth, u.run_seq, u.turn,
       coalesce(u.model, 'model') || coalesce(' · ' || u.provider, ''),
       u.created_at, u.created_at, NULL,
       u.input_tokens, u.output_tokens, u.cost_usd::float8
  FROM {S}.usage u JOIN tree t ON t.id = u.session_id
UNION ALL
SELECT 'tool', c.session_id, t.depth, c.run_seq, c.turn, c.tool,
       coalesce(c.dispatched_at, c.requested_at), c.completed_at,
       coalesce(c.error_kind, c.status), NULL, NULL, NULL
  FROM {S}.tool_calls c JOIN tree t ON t.id = c.session_id
UNION ALL
SELECT 'wait', p.owner_session_id, t.depth, NULL, NULL, p.tool || ' (' || p.kind || ')',
       p.created_at, coalesce(p.submitted_at, p.resolved_at), p.status, NULL, NULL, NULL
  FROM {S}.pending_calls p JOIN tree t ON t.id = p.owner_session_id
"""
)


def read(engine: sa.Engine, session_id: str) -> list[TimelineEvent]:
    with engine.connect() as conn:
        rows = conn.execute(_ROWS, {"s": session_id})
        return [TimelineEvent.model_validate(r._asdict()) for r in rows]
