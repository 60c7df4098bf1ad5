"""Durable tools (``durable_tools``) and their inner steps (``tool_steps``): the one module
that writes them (migration 0017).

A durable call's row is written as its workflow begins, fenced on the run like a server
tool's dispatch mark; every later execution of the body counts itself in ``executions``
(more than one: a recovery). An inner step is marked ``dispatched`` before its function
runs and gets its outcome after, one statement each: a re-executed body finds the recorded
outcome, or, for a side-effecting step still ``dispatched``, learns that its outcome is
unknown. Two executions of one body (a stale owner and its adopter) never both run a step:
only one insert of the mark succeeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .. import storable
from .pg import Stmt
from .schema import SCHEMA as S

LIVE_SQL = (
    f"SELECT EXISTS (SELECT 1 FROM {S}.sessions WHERE id = :s AND run_seq = :run"
    " AND status = 'running') AS ok"
)
"""Whether run ``:run`` is still the session's running one (the fence of every write)."""

_BEGIN = f"""
WITH live AS MATERIALIZED ({LIVE_SQL}),
ins AS (
    INSERT INTO {S}.durable_tools (session_id, tool_call_id, workflow_id, run_seq, tool,
        deadline, token)
    SELECT :s, :id, :wf, :run, :tool, CASE WHEN CAST(:timeout AS double precision) IS NULL
        THEN NULL ELSE now() + make_interval(secs => CAST(:timeout AS double precision)) END,
        :tok
    WHERE (SELECT ok FROM live)
    ON CONFLICT (session_id, tool_call_id) DO UPDATE SET token = :tok, executions =
        {S}.durable_tools.executions
        + CASE WHEN {S}.durable_tools.token = :tok THEN 0 ELSE 1 END
    RETURNING executions, status, extract(epoch FROM deadline) AS deadline, snapshot,
        snapshot_no
)
SELECT (SELECT ok FROM live) AS live, ins.* FROM (SELECT 1) AS one LEFT JOIN ins ON true
"""


@dataclass(frozen=True)
class Begun:
    """A durable call's row as an execution of its body begins."""

    live: bool
    """False: the run is no longer the session's running one (interrupted): run nothing."""
    executions: int
    deadline: float | None
    """When the tool times out (epoch seconds), fixed by the first execution."""
    snapshot: Any
    snapshot_no: int


def begin_stmt(
    session_id: str,
    tool_call_id: str,
    workflow_id: str,
    run_seq: int,
    tool: str,
    timeout_sec: float | None,
    token: str,
) -> Stmt:
    """``token`` is unique per execution of the body: a retried statement of the same
    execution does not count as another execution."""
    return (
        _BEGIN,
        {
            "tok": token,
            "s": session_id,
            "id": tool_call_id,
            "wf": workflow_id,
            "run": run_seq,
            "tool": tool,
            "timeout": timeout_sec,
        },
    )


def begun(row: Any) -> Begun:
    if not row.live:
        return Begun(False, 0, None, None, 0)
    deadline = None if row.deadline is None else float(row.deadline)
    return Begun(True, int(row.executions), deadline, row.snapshot, int(row.snapshot_no))


def end_stmt(session_id: str, tool_call_id: str, status: str) -> Stmt:
    """The call's body ended (``completed``, ``failed`` or ``interrupted``)."""
    return (
        f"UPDATE {S}.durable_tools SET status = :st, ended_at = now()"
        " WHERE session_id = :s AND tool_call_id = :id AND status = 'running'",
        {"s": session_id, "id": tool_call_id, "st": status},
    )


def checkpoint_stmt(session_id: str, tool_call_id: str, number: int, snapshot: Any) -> Stmt:
    """Replace the snapshot, unless a later checkpoint (by number) is stored already."""
    return (
        f"UPDATE {S}.durable_tools SET snapshot = CAST(:snap AS jsonb), snapshot_no = :n"
        " WHERE session_id = :s AND tool_call_id = :id AND snapshot_no < :n",
        {"s": session_id, "id": tool_call_id, "n": number, "snap": storable.dumps(snapshot)},
    )


def interrupt(conn: sa.Connection, session_ids: list[str]) -> list[str]:
    """In an interrupt's transaction: the running durable calls of these sessions end
    ``interrupted``; returns their workflow ids (to cancel)."""
    if not session_ids:
        return []
    rows = conn.execute(
        sa.text(
            f"UPDATE {S}.durable_tools SET status = 'interrupted', ended_at = now()"
            " WHERE session_id = ANY(:ids) AND status = 'running' RETURNING workflow_id"
        ),
        {"ids": session_ids},
    )
    return [r.workflow_id for r in rows]


# --- inner steps ----------------------------------------------------------------------------

_STEP = f"""
WITH live AS MATERIALIZED ({LIVE_SQL}),
old AS MATERIALIZED (
    SELECT name, status, output, error_type, error, token FROM {S}.tool_steps
    WHERE workflow_id = :wf AND seq = :seq
),
ins AS (
    INSERT INTO {S}.tool_steps (workflow_id, seq, session_id, name, safe_to_retry, status,
        token)
    SELECT :wf, :seq, :s, :name, :safe, 'dispatched', :tok WHERE (SELECT ok FROM live)
    ON CONFLICT (workflow_id, seq) DO NOTHING
    RETURNING 1
)
SELECT (SELECT ok FROM live) AS live, EXISTS (SELECT 1 FROM ins) AS fresh, old.name,
    old.status, old.output, old.error_type, old.error, old.token = :tok AS mine
FROM (SELECT 1) AS one LEFT JOIN old ON true
"""
"""One round trip: the step's mark, or what an earlier execution left of it."""


@dataclass(frozen=True)
class StepMark:
    live: bool
    fresh: bool
    """This execution marked the step (or marked it before a retried statement): run it."""
    name: str | None
    status: str | None
    """``completed``/``failed``: recorded; ``dispatched``: started, outcome unknown; None:
    another execution marked it meanwhile (treated as started)."""
    output: Any
    error_type: str | None
    error: str | None


def step_stmt(
    workflow_id: str, seq: int, session_id: str, run_seq: int, name: str, safe: bool, token: str
) -> Stmt:
    return (
        _STEP,
        {
            "wf": workflow_id,
            "seq": seq,
            "s": session_id,
            "run": run_seq,
            "name": name,
            "safe": safe,
            "tok": token,
        },
    )


def step_mark(row: Any) -> StepMark:
    fresh = bool(row.fresh) or (bool(row.mine) and row.status == "dispatched")
    return StepMark(
        bool(row.live), fresh, row.name, row.status, row.output, row.error_type, row.error
    )


def step_done_stmt(
    workflow_id: str, seq: int, output: Any, error_type: str | None, error: str | None
) -> Stmt:
    """The step's outcome: its output (JSON), or the error it raised."""
    failed = error_type is not None
    return (
        f"UPDATE {S}.tool_steps SET status = :st, output = CAST(:out AS jsonb),"
        " error_type = :et, error = :err, ended_at = now()"
        " WHERE workflow_id = :wf AND seq = :seq",
        {
            "wf": workflow_id,
            "seq": seq,
            "st": "failed" if failed else "completed",
            "out": None if failed else storable.dumps(output),
            "et": error_type,
            "err": None if error is None else storable.text(error),
        },
    )
