"""What bench/parked.py reads while it runs: the worker process from /proc, and the bench
database's counts, WAL and connections. Every read retries its connection: Postgres is
shared with other benchmarks and may refuse one for a moment."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from _lib.db import connect_retrying, rows, scalar
from _lib.procfs import cpu_seconds, pg_ports, proc_status


@dataclass
class Proc:
    """The worker process at one moment."""

    label: str
    rss_mb: float
    threads: int
    cpu_s: float
    pg_conns: int

    @classmethod
    def take(cls, label: str, pid: int) -> Proc:
        st = proc_status(pid)
        return cls(label, st["VmRSS"] / 1024, st["Threads"], cpu_seconds(pid), len(pg_ports(pid)))


def wal_written(engine: sa.Engine) -> tuple[float, int]:
    """The server's WAL bytes and full-page images written so far (``pg_stat_wal``,
    cluster-wide; the bench's reads write none). A commit waits for its WAL to be flushed,
    and the first change to a page after a checkpoint writes the whole 8 KB page."""
    (row,) = rows(engine, "SELECT wal_bytes, wal_fpi FROM pg_stat_wal", connect_retrying)
    return float(row.wal_bytes), int(row.wal_fpi)


def pg_connections(engine: sa.Engine, pid: int) -> dict[str, int]:
    """The worker's backends in pg_stat_activity, by application_name (and state)."""
    sql = (
        "SELECT application_name, coalesce(state, '?') AS state, count(*) AS n"
        " FROM pg_stat_activity WHERE datname = current_database()"
        " AND client_port = ANY(:p) GROUP BY 1, 2 ORDER BY 1, 2"
    )
    return {
        f"{r.application_name or '(none)'} [{r.state}]": int(r.n)
        for r in rows(engine, sql, connect_retrying, p=sorted(pg_ports(pid)))
    }


def db_backends(engine: sa.Engine) -> int:
    sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
    return int(scalar(engine, sql, connect_retrying))


_WAITING_ARMED = (
    " FROM dbos_agents.pending_calls p WHERE p.status = 'waiting'"
    " AND EXISTS (SELECT 1 FROM dbos.operation_outputs o"
    "   WHERE o.workflow_uuid = p.owner_workflow_id AND o.function_name = 'DBOS.sleep')"
)
"""Waiting calls whose workflow is armed in ``recv``."""


def armed_count(engine: sa.Engine) -> int:
    return int(scalar(engine, "SELECT count(*)" + _WAITING_ARMED, connect_retrying))


def status_counts(engine: sa.Engine) -> dict[str, int]:
    sql = "SELECT status, count(*) AS n FROM dbos.workflow_status GROUP BY 1"
    return {r.status: int(r.n) for r in rows(engine, sql, connect_retrying)}


def last_armed_ms(engine: sa.Engine) -> float | None:
    """Epoch ms of the latest arming checkpoint (the DBOS.sleep row recv writes)."""
    sql = (
        "SELECT max(coalesce(completed_at_epoch_ms, started_at_epoch_ms))"
        " FROM dbos.operation_outputs WHERE function_name = 'DBOS.sleep'"
    )
    v = scalar(engine, sql, connect_retrying)
    return None if v is None else float(v)


def open_calls(engine: sa.Engine) -> list[tuple[str, str]]:
    """(root session id, tool call id) of every waiting call whose workflow is armed."""
    sql = "SELECT p.root_session_id, p.tool_call_id" + _WAITING_ARMED
    return [(r.root_session_id, r.tool_call_id) for r in rows(engine, sql, connect_retrying)]
