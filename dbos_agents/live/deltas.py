"""The live stream of a session (``deltas``): the one module that writes and reads it.

A delta is a piece of a turn's reply as the model wrote it: text, a piece of a tool call,
or a retraction of pieces that will never be final (a tool call cut by a crash, a reply
the model must start again). The worker appends them in batches (``live.announce``); a
turn's record re-appends whatever was not flushed yet in its own transaction, before its
message, so every delta of a turn is durable before the message that ends it. A batch
appended twice (a flush retried after an unknown outcome) changes nothing:
``(session, run, turn, attempt, part)`` is unique among the pieces.

A durable tool's progress note (``ctx.progress``, kind ``progress``) shares the log, so
readers see it in order and resume past it, but it is no piece of a reply: it is keyed
``(session, tool call, part)`` (a re-executed tool body reporting it again writes
nothing), and a turn continuing its reply never reads it (``logged_stmt``, ``partial``).

A wait opened in a sub-agent (its client tool or approval, from a turn or a durable tool's
ask) is marked in the root session's log by a ``progress`` row numbered ``WAIT_MARK`` and
keyed by the wait's call id (``wait_mark_stmts``): readers of the root (a chat UI talks to
the root only) are woken by it and read the wait with it (``live.log``); it is shown
as no note of its own.

A piece is written only by the execution that owns its run (``Delta.writer``,
``store.fence``): Postgres refuses a stale execution's pieces, so readers never see an
attempt twice. The batch writer's statement leaves them out and names their sessions
(``insert_announced_stmt``); a turn's record or a run's end fails (``insert_stmt``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import sqlalchemy as sa

from ..store.fence import Fence, Writer, fence
from ..store.pg import Stmt
from ..store.schema import SCHEMA as S

Kind = Literal["text", "tool_call", "retract", "progress"]


@dataclass(frozen=True)
class Delta:
    """One row. A ``retract`` with ``tool_index`` withdraws that tool call's pieces; one
    without withdraws every piece of the turn so far (the reply starts again). A
    ``progress`` row is note number ``part`` of tool call ``tool_call_id`` (``name``: the
    tool), ``text`` the note, ``fraction`` 0..1 or None; its ``attempt`` is 0."""

    run_seq: int
    turn: int
    attempt: int
    part: int
    kind: Kind
    text: str = ""
    tool_index: int | None = None
    tool_call_id: str | None = None
    name: str | None = None
    fraction: float | None = None
    writer: Writer | None = field(default=None, compare=False, repr=False)
    """Who writes it (no column): set, its insert is fenced on that execution's ownership."""

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

    @classmethod
    def of_shown(cls, v: list[Any]) -> Logged:
        """A row as a notification carries it (``insert_announced_stmt``)."""
        i, after_seq, run_seq, turn, attempt, part, kind, text, tool_index, call_id, name = v
        return cls(
            id=i,
            after_seq=after_seq,
            run_seq=run_seq,
            turn=turn,
            attempt=attempt,
            part=part,
            kind=kind,
            text=text,
            tool_index=tool_index,
            tool_call_id=call_id,
            name=name,
        )


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
        "fraction": row.fraction,
    }


def insert_stmt(session_id: str, rows: Sequence[Delta]) -> Stmt:
    """Append ``rows`` (in order) after the session's last message; if their writer no
    longer owns its run, fail with ``fence.STALE_SQLSTATE`` (the transaction writes nothing: a
    turn's record, a run's end, a batch with staged results). Rows written before are
    left as they are, yet still checked: a record may hand its last piece again to be
    fenced with it."""
    with_, insert, params = _insert({session_id: rows}, strict=True)
    return (f"WITH {with_} {insert}" if with_ else insert), params


def insert_many_stmt(by_session: Mapping[str, Sequence[Delta]]) -> Stmt:
    """Append each session's rows (in order) after its last message: one statement for a
    whole batch, however many sessions stream; a stale writer's rows are left out."""
    with_, insert, params = _insert(by_session, strict=False)
    return (f"WITH {with_} {insert}" if with_ else insert), params


def _insert(
    by_session: Mapping[str, Sequence[Delta]], *, strict: bool
) -> tuple[str, str, dict[str, Any]]:
    """The fence's ``WITH`` item (empty when no row names a writer), the ``INSERT`` and
    their parameters.

    The rows travel as one JSON array of arrays (a C ``json.dumps``), not as ten typed
    arrays, which psycopg dumps element by element in Python when it binds a script on the
    client. Postgres reads it as ``jsonb``: parsed once, where each ``->>`` on ``json``
    parses its row again (the insert's backend CPU ~15 % lower,
    docs/bench-notes/streaming.md).

    A stale writer's rows are left out, or (``strict``) fail the statement
    (``store.fence``)."""
    rows = [
        [sid, r.run_seq, r.turn, r.attempt, r.part, r.kind, r.tool_index, r.tool_call_id,
         r.name, r.text]
        for sid, piece in by_session.items()
        for r in piece
    ]  # fmt: skip
    writers = {
        sid: w for sid, piece in by_session.items() if piece and (w := piece[-1].writer) is not None
    }
    params: dict[str, Any] = {"rows": json.dumps(rows, separators=(",", ":"))}
    others = any(piece and sid not in writers for sid, piece in by_session.items())
    check = fence(writers, strict=strict, session="r.v->>0", others=others)
    if check is not None:
        params.update(check.params)
    where = "" if check is None else check.where
    insert = (
        f"INSERT INTO {S}.deltas (session_id, after_seq, run_seq, turn, attempt, part, kind,"
        " tool_index, tool_call_id, name, text)"
        " SELECT r.v->>0, (SELECT coalesce(max(m.seq), 0)"
        f" FROM {S}.messages m WHERE m.session_id = r.v->>0), CAST(r.v->>1 AS bigint),"
        " CAST(r.v->>2 AS int), CAST(r.v->>3 AS int), CAST(r.v->>4 AS int), r.v->>5,"
        " CAST(r.v->>6 AS int), r.v->>7, r.v->>8, r.v->>9"
        " FROM jsonb_array_elements(CAST(:rows AS jsonb)) WITH ORDINALITY AS r(v, n)"
        f"{where} ORDER BY r.n"
        " ON CONFLICT (session_id, run_seq, turn, attempt, part) WHERE kind <> 'progress'"
        " DO NOTHING"
    )
    return ("" if check is None else check.with_items), insert, params


NOTIFY_LIMIT = 7900
"""Bytes of a notification's payload at most (Postgres refuses 8,000 and more)."""

_SHOWN = "id, after_seq, run_seq, turn, attempt, part, kind, text, tool_index, tool_call_id, name"
"""A row as a notification carries it (``Logged.of_shown``), in this order."""


def insert_announced_stmt(
    by_session: Mapping[str, Sequence[Delta]], channel: str, prefix: str, announce: Sequence[str]
) -> Stmt:
    """``insert_many_stmt``, and for each session of ``announce`` that got new rows one
    ``NOTIFY`` on ``channel`` that carries them: ``<prefix><session id> <JSON rows>``
    (``parse_shown``), so a reader shows them without reading them back; a batch too long
    for a payload is announced as ``<prefix><session id>`` alone (the reader reads it).
    Rows a retried batch wrote before are not inserted again, nor announced again.

    Returns one row: ``refused``, the sessions whose writer no longer owns its run (their
    rows were left out), and ``notified``, how many notifications were sent."""
    with_, insert, params = _insert(by_session, strict=False)
    refused = Fence.REFUSED if with_ else "CAST(ARRAY[] AS text[])"
    return (
        f"WITH {with_ + ', ' if with_ else ''}ins AS ({insert} RETURNING session_id, {_SHOWN}),"
        " g AS (SELECT head, head || ' ' || json_agg(json_build_array("
        f"{_SHOWN}) ORDER BY id)::text AS p FROM (SELECT CAST(:prefix AS text) || session_id"
        " AS head, * FROM ins WHERE session_id = ANY(CAST(:announce AS text[]))) i"
        " GROUP BY head),"
        f" sent AS (SELECT pg_notify('{channel}', CASE WHEN octet_length(p) <= {NOTIFY_LIMIT}"
        " THEN p ELSE head END) FROM g)"
        f" SELECT {refused} AS refused, (SELECT count(*) FROM sent) AS notified",
        {**params, "prefix": prefix, "announce": list(announce)},
    )


def parse_shown(payload: str) -> tuple[str, list[Logged] | None]:
    """A ``+`` notification's session and the rows it carries (None: it carries none, read
    them)."""
    head, _, rows = payload.partition(" ")
    if not rows:
        return head, None
    return head, [Logged.of_shown(v) for v in json.loads(rows)]


def progress_stmt(
    session_id: str,
    run_seq: int,
    turn: int,
    tool_call_id: str,
    tool: str,
    part: int,
    note: str,
    fraction: float | None,
) -> Stmt:
    """Append note ``part`` (1, 2, ...) of a tool call's progress after the session's last
    message; a note already written (a re-executed tool body reports it again) is left as
    it is, so readers never see it twice. The caller announces the session after it.

    Tools of one turn may report at once, and a reader resuming after a delta id must
    miss none: the insert first takes the session's note lock (an advisory lock held until
    commit), so notes get their ids in the order they commit. Run it in a short
    transaction of its own."""
    values = {"r": run_seq, "t": turn, "p": part, "note": note, "fraction": fraction}
    return _note_stmt(session_id, ":r", tool_call_id, tool, values)


WAIT_MARK = 0
"""The ``part`` of a root's row marking a sub-agent's wait (notes are numbered from 1)."""


def wait_mark_stmts(
    session_id: str, root_session_id: str, waits: Iterable[tuple[str, str]]
) -> list[Stmt]:
    """Mark, in the root's log, the waits ``(tool call id, tool)`` that ``session_id``
    opens, when it is a sub-agent (none for a root: its own log has them). They join the
    transaction that opens the waits (written again by a replay, they are left as they
    are) and take the root's note lock, as ``progress_stmt`` does, so marks and notes get
    their ids in the order they commit; nothing else is locked after them. Each takes the
    root's current run."""
    if session_id == root_session_id:
        return []
    run = f"(SELECT r.run_seq FROM {S}.sessions r WHERE r.id = :s)"
    values = {"t": 0, "p": WAIT_MARK, "note": "", "fraction": None}
    return [_note_stmt(root_session_id, run, cid, tool, values) for cid, tool in waits]


def _note_stmt(
    session_id: str, run_sql: str, tool_call_id: str, tool: str, values: dict[str, Any]
) -> Stmt:
    """A ``progress`` row after the session's last message, under its note lock, written
    once per (tool call, part); ``run_sql``: the run's value (a parameter or a query)."""
    return (
        f"INSERT INTO {S}.deltas (session_id, after_seq, run_seq, turn, attempt, part, kind,"
        " tool_call_id, name, text, fraction)"
        f" SELECT :s, (SELECT coalesce(max(m.seq), 0) FROM {S}.messages m"
        f" WHERE m.session_id = :s), {run_sql}, :t, 0, :p, 'progress', :id, :tool, :note,"
        " CAST(:fraction AS double precision)"
        " FROM (SELECT pg_advisory_xact_lock(:k)) AS lock"
        " ON CONFLICT (session_id, tool_call_id, part) WHERE kind = 'progress' DO NOTHING",
        {
            "s": session_id,
            "k": note_lock_key(session_id),
            "id": tool_call_id,
            "tool": tool,
            **values,
        },
    )


def is_wait_mark(d: Delta) -> bool:
    return d.kind == "progress" and d.part == WAIT_MARK


def note_lock_key(session_id: str) -> int:
    """The session's note lock: a signed 64-bit advisory key of its own namespace."""
    digest = hashlib.sha256(f"progress\x01{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


_COLUMNS = "attempt, part, kind, text, tool_index, tool_call_id, name, fraction"
_PREFIXED = ", ".join(f"d.{c.strip()}" for c in _COLUMNS.split(","))


def logged_stmt(session_id: str, run_seq: int, turn: int) -> Stmt:
    """A turn's pieces so far, in order (what an earlier execution showed of its reply);
    no progress notes, which are its tools', not its reply's."""
    return (
        f"SELECT run_seq, turn, {_COLUMNS} FROM {S}.deltas"
        " WHERE session_id = :s AND run_seq = :r AND turn = :t AND kind <> 'progress'"
        " ORDER BY id",
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
        if r.kind == "progress":  # a tool's note, not a piece of the reply
            continue
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
    one read for every stream it holds, ``live.feed``)."""
    return (
        f"SELECT d.session_id, d.id, d.after_seq, d.run_seq, d.turn, {_PREFIXED}"
        f" FROM unnest(CAST(:sids AS text[]), CAST(:afters AS bigint[])) AS a(sid, after_id)"
        f" JOIN {S}.deltas d ON d.session_id = a.sid AND d.id > a.after_id"
        " ORDER BY d.session_id, d.id",
        {"sids": list(after), "afters": list(after.values())},
    )


REAP_BATCH = 5000


def reap(engine: sa.Engine, retention_seconds: float, batch: int = REAP_BATCH) -> int:
    """Delete the pieces, notes and marks of runs no longer running, once older than the
    retention window; returns how many. A run's messages hold what its pieces said: a
    reader resuming from an older cursor gets them whole. A running (or queued) run's rows
    stay, however old: a turn continuing after a crash reads them.

    Oldest first, ``batch`` rows at a time (ids grow with time), each batch its own short
    transaction, until a batch reaches rows younger than the window."""
    removed, after = 0, 0
    while True:
        with engine.begin() as conn:
            row = conn.execute(
                sa.text(
                    f"WITH walk AS (SELECT id, session_id, run_seq, created_at FROM {S}.deltas"
                    " WHERE id > :after ORDER BY id LIMIT :n),"
                    f" gone AS (DELETE FROM {S}.deltas d USING walk w WHERE d.id = w.id"
                    " AND w.created_at < now() - make_interval(secs => :s) AND NOT EXISTS"
                    f" (SELECT 1 FROM {S}.sessions s WHERE s.id = w.session_id"
                    " AND s.run_seq = w.run_seq AND s.status IN ('queued', 'running'))"
                    " RETURNING 1)"
                    " SELECT (SELECT count(*) FROM gone) AS removed, max(id) AS last,"
                    " count(*) AS walked, bool_or(created_at >= now() - make_interval(secs"
                    " => :s)) AS young FROM walk"
                ),
                {"after": after, "n": batch, "s": retention_seconds},
            ).one()
        removed += int(row.removed)
        if row.walked < batch or row.young:
            return removed
        after = int(row.last)
