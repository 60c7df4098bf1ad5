"""The transcript (``messages``) and token usage (``usage``): the one module writing them,
and reading a session's turns' usage (``turn_usage``).

Messages are numbered per session under the session row lock; a unique index keeps one
``tool`` message per tool call whatever a replay does.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel

from .. import storable
from ..messages import JSONValue, Message, ModelResponse
from ..outcome import RunSpec
from ..records import HistoryEntry, TurnUsage
from .pg import Stmt
from .schema import SCHEMA as S


def append_stmt(spec: RunSpec, seq: int | None, msg: Message) -> Stmt:
    """Insert ``msg`` at ``seq``, or (``None``) after the session's last message: the
    caller holds the session row lock, so the next number is free."""
    at = (
        ":seq"
        if seq is not None
        else (f"(SELECT coalesce(max(seq), 0) + 1 FROM {S}.messages WHERE session_id = :s)")
    )
    return (
        f"INSERT INTO {S}.messages (session_id, seq, run_seq, role, content, tool_calls,"
        f" tool_call_id, name, user_id, tenant_id) VALUES (:s, {at}, :run, :role, :content,"
        " CAST(:calls AS jsonb), :tcid, :name, :u, :t)",
        {
            "s": spec["session_id"],
            "seq": seq,
            "run": spec["run_seq"],
            "role": msg.role,
            "content": storable.optional_text(msg.content),
            "calls": storable.dumps([c.model_dump(mode="json") for c in msg.tool_calls]),
            "tcid": msg.tool_call_id,
            "name": storable.optional_text(msg.name),
            "u": spec["user_id"],
            "t": spec["tenant_id"],
        },
    )


def append_result_stmt(spec: RunSpec, msg: Message) -> Stmt:
    """``append_stmt`` for a tool's result message, written at most once whoever writes it
    first (a turn's record, a streamed reply's first batch, an earlier execution)."""
    sql, params = append_stmt(spec, None, msg)
    return (
        sql + " ON CONFLICT (session_id, tool_call_id) WHERE role = 'tool' DO NOTHING",
        params,
    )


def read_stmt(session_id: str, upto_seq: int | None = None) -> Stmt:
    """The session's messages in order (up to ``upto_seq`` when given); ``to_messages``."""
    upto = "" if upto_seq is None else " AND seq <= :upto"
    return (
        f"SELECT role, content, tool_calls, tool_call_id, name FROM {S}.messages"
        f" WHERE session_id = :s{upto} ORDER BY seq",
        {"s": session_id, "upto": upto_seq},
    )


def read_begun_stmt(spec: RunSpec) -> Stmt:
    """The session's messages up to the run's user message (none if the run had not
    begun): what its begin returned. Messages are only ever appended, so this reads the
    same rows whenever it runs."""
    return (
        f"SELECT role, content, tool_calls, tool_call_id, name FROM {S}.messages"
        f" WHERE session_id = :s AND seq <= (SELECT min(seq) FROM {S}.messages"
        " WHERE session_id = :s AND run_seq = :run AND role = 'user') ORDER BY seq",
        {"s": spec["session_id"], "run": spec["run_seq"]},
    )


def to_messages(rows: Iterable[Any]) -> list[Message]:
    return [
        Message(
            role=r.role,
            content=r.content,
            tool_calls=r.tool_calls or [],
            tool_call_id=r.tool_call_id,
            name=r.name,
        )
        for r in rows
    ]


def run_state_stmt(spec: RunSpec) -> Stmt:
    """What a run's begin decides on (the caller holds the session row lock): this run's
    user message (``user_seq``: set once the run began), whether it recorded a turn, the
    session's status and its parent's."""
    return (
        f"SELECT (SELECT min(seq) FROM {S}.messages WHERE session_id = :s AND run_seq = :run"
        " AND role = 'user') AS user_seq, EXISTS (SELECT 1 FROM"
        f" {S}.messages WHERE session_id = :s AND run_seq = :run AND role = 'assistant')"
        f" AS turned, (SELECT status FROM {S}.sessions WHERE id = :s) AS status,"
        f" (SELECT status FROM {S}.sessions WHERE id = :p) AS parent_status",
        {"s": spec["session_id"], "run": spec["run_seq"], "p": spec["parent_session_id"]},
    )


def record_usage_stmt(
    spec: RunSpec, turn: int, response: ModelResponse, record: BaseModel | None = None
) -> Stmt:
    """The turn's usage row: who answered (model, provider), tokens and cost; ``record``
    (the turn's output, dumped here once) makes the turn replayable without a second model
    call."""
    usage = response.usage
    return (
        f"INSERT INTO {S}.usage (session_id, run_seq, turn, model, provider, input_tokens,"
        " output_tokens, cost_usd, tenant_id, response) VALUES (:s, :run, :turn, :model,"
        " :provider, :i, :o, :c, :t, CAST(:resp AS jsonb))",
        {
            "s": spec["session_id"],
            "run": spec["run_seq"],
            "turn": turn,
            "model": storable.optional_text(response.model),
            "provider": storable.optional_text(response.provider),
            "i": usage.input_tokens,
            "o": usage.output_tokens,
            "c": usage.cost_usd,
            "t": spec["tenant_id"],
            "resp": None if record is None else storable.dumps(record.model_dump(mode="json")),
        },
    )


def turn_state_stmt(spec: RunSpec, turn: int) -> Stmt:
    """The recorded output of a turn (if any) and the owner's unseen late answers, in one
    statement (the model turn's only read); parse its row with ``turn_state``."""
    return (
        f"SELECT (SELECT response FROM {S}.usage WHERE session_id = :s AND run_seq = :run"
        " AND turn = :turn) AS recorded, (SELECT coalesce(json_agg(json_build_object("
        "'tool_call_id', tool_call_id, 'tool', tool, 'late_submission', late_submission)"
        f" ORDER BY tool_call_id), '[]') FROM {S}.pending_calls WHERE owner_session_id = :s"
        " AND late_submission IS NOT NULL AND NOT late_noticed) AS late",
        {"s": spec["session_id"], "run": spec["run_seq"], "turn": turn},
    )


def recorded_turns_stmt(spec: RunSpec) -> Stmt:
    """Every turn of the run an execution recorded so far: (turn, output), what
    ``turn_state_stmt`` reads for one turn."""
    return (
        f"SELECT turn, response FROM {S}.usage WHERE session_id = :s AND run_seq = :run"
        " AND response IS NOT NULL",
        {"s": spec["session_id"], "run": spec["run_seq"]},
    )


def turn_state(row: Any) -> tuple[JSONValue, list[Any]]:
    """(the turn's recorded output as stored, or None; the late answers)."""
    late = [SimpleNamespace(**x) for x in row.late]
    return row.recorded, late


def answered_stmt(session_id: str, tool_call_ids: list[str]) -> Stmt:
    """Which of these calls already have their tool message (rows of ``tool_call_id``)."""
    return (
        f"SELECT tool_call_id FROM {S}.messages WHERE session_id = :s AND role = 'tool'"
        " AND tool_call_id = ANY(:ids)",
        {"s": session_id, "ids": tool_call_ids},
    )


def entries_stmt(session_id: str, after_seq: int = 0, limit: int | None = None) -> Stmt:
    """The stored messages with ``seq > after_seq``, in order (at most ``limit``)."""
    return (
        f"SELECT seq, run_seq, role, content, tool_calls, tool_call_id, name, created_at"
        f" FROM {S}.messages WHERE session_id = :s AND seq > :n ORDER BY seq LIMIT :lim",
        {"s": session_id, "n": after_seq, "lim": limit},
    )


def entry_of(row: Any) -> HistoryEntry:
    return HistoryEntry.model_validate(row._asdict())


def entries(
    conn: sa.Connection, session_id: str, after_seq: int = 0, limit: int | None = None
) -> list[HistoryEntry]:
    """The stored messages with ``seq > after_seq``, in order (at most ``limit``)."""
    sql, params = entries_stmt(session_id, after_seq, limit)
    return [entry_of(r) for r in conn.execute(sa.text(sql), params).all()]


def history(engine: sa.Engine, session_id: str) -> list[HistoryEntry]:
    with engine.connect() as conn:
        return entries(conn, session_id)


def turn_usage(engine: sa.Engine, session_id: str) -> list[TurnUsage]:
    """The session's own usage rows (a sub-agent's are under its session), one per
    recorded model turn, in order."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT run_seq, turn, model, provider, input_tokens, output_tokens,"
                f" cost_usd::float8 AS cost_usd FROM {S}.usage WHERE session_id = :s"
                " ORDER BY run_seq, turn"
            ),
            {"s": session_id},
        ).all()
    return [TurnUsage.model_validate(r._asdict()) for r in rows]
