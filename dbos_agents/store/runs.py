"""How each run ended (``runs``): the one module that writes it.

A run's outcome is written once, by the statement list that ends the run (``record_stmt``
in ``run_bounds.end``) or by the interrupt that stops it, whichever commits first; a
``NOTIFY`` on ``CHANNEL`` commits with it, so ``SessionHandle.result()`` in any process
learns of the end without polling (``live.listen``).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from .. import storable
from ..messages import Usage
from ..outcome import RunOutcome
from .pg import Stmt
from .schema import SCHEMA as S

CHANNEL = "dbos_agents_runs"
"""The NOTIFY channel announcing a run's end; the payload is ``run_key``."""


def run_key(session_id: str, run_seq: int) -> str:
    return f"{run_seq}:{session_id}"


_RECORD = (
    f"INSERT INTO {S}.runs (session_id, run_seq, status, output, error, turns,"
    " input_tokens, output_tokens, cost_usd)"
    " VALUES (:s, :r, :st, :out, :err, :turns, :i, :o, :c)"
    " ON CONFLICT (session_id, run_seq) DO NOTHING"
)
_NOTIFY = f"SELECT pg_notify('{CHANNEL}', :key)"


def record_stmts(outcome: RunOutcome) -> list[Stmt]:
    """The outcome's row, unless one was recorded first, and its announcement (delivered
    when the caller's transaction commits)."""
    return [
        (
            _RECORD,
            {
                "s": outcome.session_id,
                "r": outcome.run_seq,
                "st": outcome.status,
                "out": storable.optional_text(outcome.output),
                "err": storable.optional_text(outcome.error),
                "turns": outcome.turns,
                "i": outcome.usage.input_tokens,
                "o": outcome.usage.output_tokens,
                "c": outcome.usage.cost_usd,
            },
        ),
        (_NOTIFY, {"key": run_key(outcome.session_id, outcome.run_seq)}),
    ]


def record_interrupted(conn: sa.Connection, runs: list[tuple[str, int]]) -> None:
    """In an interrupt's transaction: each stopped run ended ``interrupted``."""
    for session_id, run_seq in runs:
        for sql, params in record_stmts(
            RunOutcome(session_id=session_id, run_seq=run_seq, status="interrupted")
        ):
            conn.execute(sa.text(sql), params)


_READ = (
    f"SELECT session_id, run_seq, status, output, error, turns, input_tokens,"
    f" output_tokens, cost_usd FROM {S}.runs WHERE session_id = :s AND run_seq = :r"
)


def read_stmt(session_id: str, run_seq: int) -> Stmt:
    """The run's row (none until it ended); ``outcome_of`` reads it."""
    return (_READ, {"s": session_id, "r": run_seq})


def outcome_of(row: Any) -> RunOutcome:
    return RunOutcome(
        session_id=row.session_id,
        run_seq=row.run_seq,
        status=row.status,
        output=row.output,
        error=row.error,
        turns=row.turns,
        usage=Usage(
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            cost_usd=row.cost_usd,
        ),
    )


def get(engine: sa.Engine, session_id: str, run_seq: int) -> RunOutcome | None:
    """The run's outcome, if it ended."""
    with engine.connect() as conn:
        row = conn.execute(sa.text(_READ), {"s": session_id, "r": run_seq}).first()
    return None if row is None else outcome_of(row)
