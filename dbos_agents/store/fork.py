"""History by turn and forks: a session's rows up to a turn, read or copied.

**Turn n** is the session's n-th assistant message (by ``seq``), counted from 1 across all
its runs: the same number the loop gives the model turn that wrote it (``turn_no``), so it
is also the ``turn`` of that turn's ``usage`` and ``tool_calls`` rows.

**The session as it was after turn n** (``upto``): every message up to and including that
assistant message, plus the tool messages answering *its* calls that the transcript holds
(recorded later: in the next model turn's transaction, or the next run's begin). Messages
written after it for anything else (the next run's user message, late-answer notices) are
not part of it. Its ledger rows are the calls of turns 1..n, its usage the rows of turns
1..n, its state versions those committed before the first state version of a later turn.

**A fork** copies exactly those rows, as recorded (ids, results, idempotency keys, run
numbers), into a new session in one transaction with the enqueue of its next run, so it is
all or nothing and reads one snapshot (``REPEATABLE READ``) of a source that may be running.
The new run's ``run_seq`` is past every copied one: its begin finds no user message of its
own (it has not begun), settles copied calls of turn n that have no tool message yet like
an interrupted run's (the recorded result, else an ``interrupted`` error), appends the new
message and returns the copied transcript; its first model turn is n + 1, with no recorded
output under the new run: nothing before the fork point runs again. Waits (``pending_calls``)
and live-stream pieces (``deltas``) are not copied: they belong to the source's runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from dbos import DBOSClient

from ..errors import SessionNotFoundError, TurnNotFoundError
from ..ids import START_CHANNEL, WORKFLOW_NAME, agent_queue, new_session_id, run_workflow_id
from ..outcome import RunSpec
from ..records import HistoryEntry
from .schema import SCHEMA as S

_COPIED = ("messages", "tool_calls", "usage", "runs", "session_states")
"""Tables a fork copies rows of; every column is copied (``_columns``), so a column a later
migration adds is copied too."""


@dataclass(frozen=True)
class TurnPoint:
    """Where turn n is in a session's transcript."""

    session_id: str
    turn: int
    seq: int
    """The ``seq`` of the turn's assistant message."""
    run_seq: int
    """The run that recorded it."""
    call_ids: list[str]
    """The ids of the calls it requested."""


def turn_point(conn: sa.Connection, session_id: str, turn: int) -> TurnPoint:
    """Turn ``turn`` of the session, or ``TurnNotFoundError`` (naming how many it has)."""
    row = conn.execute(
        sa.text(
            f"SELECT (SELECT count(*) FROM {S}.messages WHERE session_id = :s"
            " AND role = 'assistant') AS turns, a.seq, a.run_seq, a.tool_calls FROM"
            f" (SELECT 1) one LEFT JOIN LATERAL (SELECT seq, run_seq, tool_calls FROM"
            f" {S}.messages WHERE session_id = :s AND role = 'assistant' ORDER BY seq"
            " OFFSET :skip LIMIT 1) a ON true"
        ),
        {"s": session_id, "skip": max(turn - 1, 0)},
    ).one()
    if turn < 1 or row.seq is None:
        raise TurnNotFoundError(session_id, turn, int(row.turns))
    ids = [str(c["id"]) for c in row.tool_calls or []]
    return TurnPoint(session_id, turn, int(row.seq), int(row.run_seq), ids)


_UPTO = "(seq <= :cut OR (role = 'tool' AND tool_call_id = ANY(:ids)))"
"""The messages of the session as it was after a turn (see the module doc)."""


def _upto_params(point: TurnPoint) -> dict[str, Any]:
    return {"s": point.session_id, "cut": point.seq, "ids": point.call_ids}


def history_at(engine: sa.Engine, session_id: str, turn: int) -> list[HistoryEntry]:
    """The transcript as it was after turn ``turn`` (one snapshot)."""
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
        point = turn_point(conn, session_id, turn)
        rows = conn.execute(
            sa.text(
                "SELECT seq, run_seq, role, content, tool_calls, tool_call_id, name,"
                f" created_at FROM {S}.messages WHERE session_id = :s AND {_UPTO}"
                " ORDER BY seq"
            ),
            _upto_params(point),
        ).all()
    return [HistoryEntry.model_validate(r._asdict()) for r in rows]


def _columns(conn: sa.Connection) -> dict[str, list[str]]:
    """Each copied table's columns, in order (generated columns excluded)."""
    rows = conn.execute(
        sa.text(
            "SELECT c.relname, array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid ="
            " c.relnamespace WHERE n.nspname = :schema AND c.relname = ANY(:tables)"
            " AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''"
            " GROUP BY c.relname"
        ),
        {"schema": S, "tables": list(_COPIED)},
    ).all()
    return {str(r[0]): list(r[1]) for r in rows}


def _copy_stmt(table: str, columns: list[str], where: str) -> str:
    """Copy the source session's rows of ``table`` matching ``where`` under ``:new``."""
    values = [":new" if c == "session_id" else c for c in columns]
    return (
        f"INSERT INTO {S}.{table} ({', '.join(columns)}) SELECT {', '.join(values)}"
        f" FROM {S}.{table} WHERE session_id = :s AND {where}"
    )


_STATE_CUT = (
    f"version < coalesce((SELECT min(version) FROM {S}.session_states WHERE session_id = :s"
    " AND turn > :turn), 9223372036854775807)"
)
"""State versions committed before the first one of a later turn: the state after turn n
(versions only grow, turn by turn)."""


@dataclass(frozen=True)
class Forked:
    """A fork's new session and its first run."""

    spec: RunSpec
    workflow_id: str
    source_session_id: str
    """The root session it was copied from."""


def fork(
    engine: sa.Engine,
    client: DBOSClient,
    queue_name: str,
    *,
    session_id: str,
    turn: int,
    message: str,
) -> Forked:
    """Fork the root of ``session_id`` at its turn ``turn`` and enqueue the new session's
    run with ``message`` (see the module doc); ``SessionNotFoundError`` or
    ``TurnNotFoundError`` and nothing written. The caller checked that it may act on the
    session (its root has the same user and tenant)."""
    new = new_session_id()
    snapshot = engine.connect().execution_options(isolation_level="REPEATABLE READ")
    with snapshot as conn, conn.begin():
        src = conn.execute(
            sa.text(
                f"SELECT r.id, r.agent, r.user_id, r.tenant_id FROM {S}.sessions s"
                f" JOIN {S}.sessions r ON r.id = s.root_session_id WHERE s.id = :s"
            ),
            {"s": session_id},
        ).first()
        if src is None:
            raise SessionNotFoundError(session_id)
        point = turn_point(conn, src.id, turn)
        params = {**_upto_params(point), "new": new, "turn": turn, "run": point.run_seq}
        last_run = conn.execute(
            sa.text(f"SELECT max(run_seq) FROM {S}.messages WHERE session_id = :s AND {_UPTO}"),
            params,
        ).scalar_one()
        spec = RunSpec(
            session_id=new,
            root_session_id=new,
            parent_session_id=None,
            agent=src.agent,
            run_seq=int(last_run) + 1,  # past every copied run: the new run has not begun
            message=message,
            user_id=src.user_id,
            tenant_id=src.tenant_id,
        )
        workflow_id = run_workflow_id(new, spec["run_seq"])
        conn.execute(sa.text(_INSERT_SESSION), {**params, **dict(spec), "wf": workflow_id})
        columns = _columns(conn)
        for table, where in _WHERE.items():
            if table in columns:  # session_states: from migration 0015 on
                conn.execute(sa.text(_copy_stmt(table, columns[table], where)), params)
        queue = agent_queue(queue_name, src.agent)
        client.enqueue_in_transaction(
            conn,
            {"queue_name": queue, "workflow_name": WORKFLOW_NAME, "workflow_id": workflow_id},
            spec,
        )
        # Delivered at commit: workers claim the run now, not at their next poll.
        conn.execute(sa.text("SELECT pg_notify(:c, :q)"), {"c": START_CHANNEL, "q": queue})
    return Forked(spec, workflow_id, src.id)


_INSERT_SESSION = (
    f"INSERT INTO {S}.sessions (id, root_session_id, agent, status, user_id, tenant_id,"
    " run_seq, workflow_id, turns, input_tokens, output_tokens, cost_usd, forked_from,"
    " forked_at_turn) SELECT :new, :new, :agent, 'queued', :user_id, :tenant_id, :run_seq,"
    " :wf, :turn, coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),"
    f" coalesce(sum(cost_usd), 0), :s, :turn FROM {S}.usage WHERE session_id = :s"
    " AND turn <= :turn"
)
"""The fork's row: queued for its next run, its totals those of the copied usage rows."""

_WHERE = {
    "messages": _UPTO,
    "tool_calls": "turn <= :turn",
    "usage": "turn <= :turn",
    "runs": "run_seq < :run",
    "session_states": _STATE_CUT,
}
"""Which source rows each copied table's copy takes (see the module doc)."""
