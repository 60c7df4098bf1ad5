"""The transcript (``messages``) and token usage (``usage``): the one module writing them.

Messages are numbered per session under the session row lock; a unique index keeps one
``tool`` message per tool call whatever a replay does.
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from ..messages import Message, Usage
from ..outcome import RunSpec
from ..records import HistoryEntry
from .schema import SCHEMA as S


async def next_seq(db: AsyncSession, session_id: str) -> int:
    r = await db.execute(
        sa.text(f"SELECT coalesce(max(seq), 0) + 1 FROM {S}.messages WHERE session_id = :s"),
        {"s": session_id},
    )
    return int(r.scalar_one())


async def append(db: AsyncSession, spec: RunSpec, seq: int, msg: Message) -> None:
    await db.execute(
        sa.text(
            f"INSERT INTO {S}.messages (session_id, seq, run_seq, role, content, tool_calls,"
            " tool_call_id, name, user_id, tenant_id) VALUES (:s, :seq, :run, :role, :content,"
            " CAST(:calls AS jsonb), :tcid, :name, :u, :t)"
        ),
        {
            "s": spec["session_id"],
            "seq": seq,
            "run": spec["run_seq"],
            "role": msg.role,
            "content": msg.content,
            "calls": json.dumps([c.model_dump(mode="json") for c in msg.tool_calls]),
            "tcid": msg.tool_call_id,
            "name": msg.name,
            "u": spec["user_id"],
            "t": spec["tenant_id"],
        },
    )


async def read(db: AsyncSession, session_id: str) -> list[Message]:
    rows = await db.execute(
        sa.text(
            f"SELECT role, content, tool_calls, tool_call_id, name FROM {S}.messages"
            " WHERE session_id = :s ORDER BY seq"
        ),
        {"s": session_id},
    )
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


async def record_usage(
    db: AsyncSession, spec: RunSpec, turn: int, model: str | None, usage: Usage
) -> None:
    await db.execute(
        sa.text(
            f"INSERT INTO {S}.usage (session_id, run_seq, turn, model, input_tokens,"
            " output_tokens, cost_usd, tenant_id) VALUES (:s, :run, :turn, :model, :i, :o, :c, :t)"
        ),
        {
            "s": spec["session_id"],
            "run": spec["run_seq"],
            "turn": turn,
            "model": model,
            "i": usage.input_tokens,
            "o": usage.output_tokens,
            "c": usage.cost_usd,
            "t": spec["tenant_id"],
        },
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
