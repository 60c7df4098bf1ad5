"""A session's event log: its status, then its messages after a sequence number.

The log is ``dbos_agents.messages`` ordered by ``seq``. ``AgentClient.events`` reads it for
``dbos-agents follow`` and for the HTTP server's ``GET /sessions/{id}/events``; both poll.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from ..records import SessionEvents, StatusEvent
from . import transcript
from .schema import SCHEMA as S

BATCH = 500
"""Messages per read, at most: a caller that got a full batch reads again before it
reports a status."""


@dataclass(frozen=True)
class Read:
    events: SessionEvents
    identity: tuple[str | None, str | None] | None
    """The session's (user_id, tenant_id), for a scoped reader; None: no such session."""


def read_since(engine: sa.Engine, session_id: str, after_seq: int, limit: int = BATCH) -> Read:
    """The session's status, then its messages with ``seq > after_seq``: read in that
    order, so a terminal status is never reported before the messages of the run it ends."""
    with engine.connect() as conn:
        row = conn.execute(
            sa.text(
                f"SELECT status, run_seq, final_output, error, token_generation, user_id,"
                f" tenant_id FROM {S}.sessions WHERE id = :s"
            ),
            {"s": session_id},
        ).first()
        messages = transcript.entries(conn, session_id, after_seq, limit)
    if row is None:
        return Read(SessionEvents(status=None, messages=messages), None)
    fields = row._asdict()
    generation = fields.pop("token_generation")
    identity = (fields.pop("user_id"), fields.pop("tenant_id"))
    events = SessionEvents(
        status=StatusEvent.model_validate(fields), messages=messages, token_generation=generation
    )
    return Read(events, identity)
