"""What bench/recovery.py sets up and reads in its database: the effects table, progress
while a worker runs, where every session stands, and the checks after the recovery."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from _lib import pyspy
from recovery_worker import AGENT, EFFECTS

from dbos_agents.client import AgentClient
from dbos_agents.testing import PrivateCluster

TERMINAL = ("completed", "max_turns", "budget_exhausted", "failed", "interrupted")
TERMINAL_SQL = "(" + ",".join(f"'{s}'" for s in TERMINAL) + ")"
START_THREADS = 8


def setup(url: str) -> None:
    """The effects table: one row per side effect, keyed by the runtime-made idempotency
    key, with **no** unique constraint, so a duplicate shows up as a second row."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {EFFECTS} (id bigserial PRIMARY KEY, idempotency_key text NOT NULL,"
            " session_id text NOT NULL, tool_call_id text NOT NULL, tool text NOT NULL,"
            " pid integer NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())"
        )


def start_sessions(url: str, n: int) -> float:
    """Enqueue n sessions from START_THREADS threads; returns the seconds it took."""
    t0 = time.perf_counter()
    with AgentClient(url) as client, ThreadPoolExecutor(START_THREADS) as pool:
        list(pool.map(lambda i: client.start(AGENT, f"order {i}"), range(n)))
    return time.perf_counter() - t0


def private_cluster(max_connections: int) -> tuple[PrivateCluster, str]:
    """A Postgres of our own, with fsync and full_page_writes back on so commits cost what
    they cost on a normal server."""
    pg = PrivateCluster()
    pg.start()
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET fsync = on")
        conn.execute("ALTER SYSTEM SET full_page_writes = on")
        conn.execute(f"ALTER SYSTEM SET max_connections = {int(max_connections)}")
    pg.restart(mode="fast")  # max_connections needs a restart
    return pg, pg.url


@dataclass
class Progress:
    sessions: int
    terminal: int
    with_effect: int
    effects: int
    last_update: float | None
    connections: int
    """Backends connected to the bench database (the parent's own included)."""


def progress(conn: psycopg.Connection[Any]) -> Progress:
    row = conn.execute(
        f"SELECT (SELECT count(*) FROM dbos_agents.sessions),"
        f" (SELECT count(*) FROM dbos_agents.sessions WHERE status IN {TERMINAL_SQL}),"
        f" (SELECT count(DISTINCT session_id) FROM {EFFECTS}),"
        f" (SELECT count(*) FROM {EFFECTS}),"
        f" (SELECT extract(epoch FROM max(updated_at)) FROM dbos_agents.sessions"
        f"  WHERE status IN {TERMINAL_SQL}),"
        " (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database())"
    ).fetchone()
    assert row is not None
    return Progress(row[0], row[1], row[2], row[3], float(row[4]) if row[4] else None, row[5])


def snapshot(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Where every session stands: statuses, DBOS statuses, effects per session."""
    sessions = dict(conn.execute("SELECT status, count(*) FROM dbos_agents.sessions GROUP BY 1"))
    workflows = dict(
        conn.execute(
            "SELECT status, count(*) FROM dbos.workflow_status"
            " WHERE name LIKE 'dbos_agents.session.v%' GROUP BY 1"
        )
    )
    per_session = Counter(
        n
        for (n,) in conn.execute(
            f"SELECT count(e.id) FROM dbos_agents.sessions s"
            f" LEFT JOIN {EFFECTS} e ON e.session_id = s.id GROUP BY s.id"
        )
    )
    (effects,) = conn.execute(f"SELECT count(*) FROM {EFFECTS}").fetchone() or (0,)
    return {
        "sessions": sessions,
        "workflows": workflows,
        "sessions_by_effects": {str(k): v for k, v in sorted(per_session.items())},
        "effects": effects,
    }


def checks(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Duplicates and the effects/ledger agreement, after the recovery."""
    dup_rows, dup_keys = conn.execute(
        f"SELECT coalesce(sum(n - 1), 0), count(*) FROM"
        f" (SELECT count(*) AS n FROM {EFFECTS} GROUP BY idempotency_key HAVING count(*) > 1) d"
    ).fetchone() or (0, 0)
    durability = conn.execute(
        "SELECT count(*) FROM dbos_agents.tool_calls WHERE error_kind = 'tool-durability-error'"
    ).fetchone()
    durability_with_effect = conn.execute(
        f"SELECT count(*) FROM dbos_agents.tool_calls t WHERE t.error_kind ="
        f" 'tool-durability-error' AND EXISTS"
        f" (SELECT 1 FROM {EFFECTS} e WHERE e.idempotency_key = t.idempotency_key)"
    ).fetchone()
    completed_without_effect = conn.execute(
        f"SELECT count(*) FROM dbos_agents.tool_calls t WHERE t.status = 'completed' AND NOT"
        f" EXISTS (SELECT 1 FROM {EFFECTS} e WHERE e.idempotency_key = t.idempotency_key)"
    ).fetchone()
    ledger = dict(conn.execute("SELECT status, count(*) FROM dbos_agents.tool_calls GROUP BY 1"))
    effect_pids = dict(conn.execute(f"SELECT pid, count(*) FROM {EFFECTS} GROUP BY 1"))
    return {
        "duplicate_effects": int(dup_rows),
        "duplicate_keys": int(dup_keys),
        "durability_errors": durability[0] if durability else 0,
        "durability_errors_with_effect": durability_with_effect[0] if durability_with_effect else 0,
        "completed_calls_without_effect": completed_without_effect[0]
        if completed_without_effect
        else 0,
        "ledger": ledger,
        "effects_by_pid": {str(k): v for k, v in effect_pids.items()},
    }


class Stall:
    """True once when a progress signature has not changed for ``seconds`` (then re-arms)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.seen: object = None
        self.since = time.monotonic()

    def stalled(self, signature: object) -> bool:
        now = time.monotonic()
        if signature != self.seen:
            self.seen, self.since = signature, now
            return False
        if now - self.since > self.seconds:
            self.since = now
            return True
        return False


def activity(conn: psycopg.Connection[Any]) -> str:
    """What every backend of the bench database is doing (for stall reports)."""
    rows = conn.execute(
        "SELECT state, wait_event_type, wait_event, left(regexp_replace(query, '\\s+', ' ',"
        " 'g'), 90), count(*), max(round(extract(epoch FROM now() - state_change)))"
        " FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " GROUP BY 1, 2, 3, 4 ORDER BY 5 DESC"
    ).fetchall()
    return "\n".join(" | ".join(str(c) for c in r) for r in rows)


def stall_report(pid: int, conn: psycopg.Connection[Any], path: Path) -> Path:
    """pg_stat_activity of the bench database, then py-spy dump of the worker."""
    pyspy.dump(pid, path)
    path.write_text(f"{activity(conn)}\n\n{path.read_text()}")
    return path
