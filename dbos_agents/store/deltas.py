"""The live stream of model turns (``deltas``): the one module that writes and reads it.

A delta is a piece of a turn's reply as the model wrote it: text, a piece of a tool call,
or a retraction of pieces that will never be final (a tool call cut by a crash, a reply
the model must start again). The worker appends them in batches (``store.announce``); a
turn's record re-appends whatever was not flushed yet in its own transaction, before its
message, so every delta of a turn is durable before the message that ends it. A batch
appended twice (a flush retried after an unknown outcome) changes nothing:
``(session, run, turn, attempt, part)`` is unique.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .pg import Stmt
from .schema import SCHEMA as S

Kind = Literal["text", "tool_call", "retract"]


@dataclass(frozen=True)
class Delta:
    """One row. A ``retract`` with ``tool_index`` withdraws that tool call's pieces; one
    without withdraws every piece of the turn so far (the reply starts again)."""

    run_seq: int
    turn: int
    attempt: int
    part: int
    kind: Kind
    text: str = ""
    tool_index: int | None = None
    tool_call_id: str | None = None
    name: str | None = None

    @classmethod
    def of_row(cls, row: Any) -> Delta:
        return cls(**_piece(row))


@dataclass(frozen=True, kw_only=True)
class Logged(Delta):
    """A row as readers read it back: its ``id`` (the order they resume by) and the message
    it follows (``after_seq``)."""

    id: int
    after_seq: int

    @classmethod
    def of_row(cls, row: Any) -> Logged:
        return cls(id=row.id, after_seq=row.after_seq, **_piece(row))


def _piece(row: Any) -> dict[str, Any]:
    return {
        "run_seq": row.run_seq,
        "turn": row.turn,
        "attempt": row.attempt,
        "part": row.part,
        "kind": row.kind,
        "text": row.text,
        "tool_index": row.tool_index,
        "tool_call_id": row.tool_call_id,
        "name": row.name,
    }


def insert_stmt(session_id: str, rows: Sequence[Delta]) -> Stmt:
    """Append ``rows`` (in order) after the session's last message."""
    return insert_many_stmt({session_id: rows})


def insert_many_stmt(by_session: Mapping[str, Sequence[Delta]]) -> Stmt:
    """Append each session's rows (in order) after its last message: one statement for a
    whole batch, however many sessions stream."""
    pairs = [(sid, r) for sid, rows in by_session.items() for r in rows]
    return (
        f"INSERT INTO {S}.deltas (session_id, after_seq, run_seq, turn, attempt, part, kind,"
        " tool_index, tool_call_id, name, text)"
        " SELECT r.session_id, (SELECT coalesce(max(m.seq), 0)"
        f" FROM {S}.messages m WHERE m.session_id = r.session_id),"
        " r.run_seq, r.turn, r.attempt, r.part, r.kind, r.tool_index, r.tool_call_id, r.name,"
        " r.text FROM unnest(CAST(:sids AS text[]), CAST(:runs AS bigint[]),"
        " CAST(:turns AS int[]), CAST(:attempts AS int[]), CAST(:parts AS int[]),"
        " CAST(:kinds AS text[]), CAST(:tools AS int[]), CAST(:ids AS text[]),"
        " CAST(:names AS text[]), CAST(:texts AS text[])) WITH ORDINALITY"
        " AS r(session_id, run_seq, turn, attempt, part, kind, tool_index, tool_call_id, name,"
        " text, n) ORDER BY r.n"
        " ON CONFLICT (session_id, run_seq, turn, attempt, part) DO NOTHING",
        {
            "sids": [sid for sid, _ in pairs],
            "runs": [r.run_seq for _, r in pairs],
            "turns": [r.turn for _, r in pairs],
            "attempts": [r.attempt for _, r in pairs],
            "parts": [r.part for _, r in pairs],
            "kinds": [r.kind for _, r in pairs],
            "tools": [r.tool_index for _, r in pairs],
            "ids": [r.tool_call_id for _, r in pairs],
            "names": [r.name for _, r in pairs],
            "texts": [r.text for _, r in pairs],
        },
    )


_COLUMNS = "attempt, part, kind, text, tool_index, tool_call_id, name"
_PREFIXED = ", ".join(f"d.{c.strip()}" for c in _COLUMNS.split(","))


def logged_stmt(session_id: str, run_seq: int, turn: int) -> Stmt:
    """A turn's deltas so far, in order (what an earlier execution showed)."""
    return (
        f"SELECT run_seq, turn, {_COLUMNS} FROM {S}.deltas"
        " WHERE session_id = :s AND run_seq = :r AND turn = :t ORDER BY id",
        {"s": session_id, "r": run_seq, "t": turn},
    )


@dataclass
class Partial:
    """What readers were shown of a turn and still hold: the text they saw (which a
    continuation must extend), the tool calls with pieces shown and not withdrawn, and the
    last attempt that wrote any."""

    text: str = ""
    open_tools: dict[int, str | None] = field(default_factory=dict)
    """tool index -> its call id, when known."""
    attempt: int = 0


def partial(rows: Sequence[Delta]) -> Partial:
    p = Partial()
    for r in rows:
        p.attempt = max(p.attempt, r.attempt)
        if r.kind == "text":
            p.text += r.text
        elif r.kind == "tool_call":
            assert r.tool_index is not None
            p.open_tools.setdefault(r.tool_index, None)
            if r.tool_call_id:
                p.open_tools[r.tool_index] = r.tool_call_id
        elif r.tool_index is None:  # the reply withdrawn: it starts again
            p.text, p.open_tools = "", {}
        else:
            p.open_tools.pop(r.tool_index, None)
    return p


def read_stmt(session_id: str, after_id: int, limit: int, from_seq: int = 0) -> Stmt:
    """A reader's next deltas of the session: ``id > after_id``, in order, at most
    ``limit`` (each with the message ``after_seq`` it follows); none written before message
    ``from_seq``, which the reader has seen (a resume from a message skips its pieces)."""
    return (
        f"SELECT id, after_seq, run_seq, turn, {_COLUMNS} FROM {S}.deltas"
        " WHERE session_id = :s AND id > :d AND after_seq >= :f ORDER BY id LIMIT :n",
        {"s": session_id, "d": after_id, "n": limit, "f": from_seq},
    )


def feed_stmt(after: Mapping[str, int]) -> Stmt:
    """The deltas of several sessions, each after its own id, in order (the HTTP server's
    one read for every stream it holds, ``client.feed``)."""
    return (
        f"SELECT d.session_id, d.id, d.after_seq, d.run_seq, d.turn, {_PREFIXED}"
        f" FROM unnest(CAST(:sids AS text[]), CAST(:afters AS bigint[])) AS a(sid, after_id)"
        f" JOIN {S}.deltas d ON d.session_id = a.sid AND d.id > a.after_id"
        " ORDER BY d.session_id, d.id",
        {"sids": list(after), "afters": list(after.values())},
    )
