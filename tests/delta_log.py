"""What a session's delta log holds, read straight from its table: the tests of live
streams across crashes and retries check the log itself, not a reader of it."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import namedtuple_row


def delta_rows(database_url: str, session_id: str) -> list[Any]:
    """The session's delta rows in the order they were written."""
    with (
        psycopg.connect(database_url, autocommit=True) as conn,
        conn.cursor(row_factory=namedtuple_row) as cur,
    ):
        cur.execute(
            "SELECT id, after_seq, run_seq, turn, attempt, part, kind, tool_index, tool_call_id,"
            " name, text FROM dbos_agents.deltas WHERE session_id = %s ORDER BY id",
            (session_id,),
        )
        return cur.fetchall()


def shown_text(rows: list[Any]) -> str:
    """What a reader that applied every delta and retraction holds."""
    text = ""
    for r in rows:
        if r.kind == "text":
            text += r.text
        elif r.kind == "retract" and r.tool_index is None:
            text = ""
    return text
