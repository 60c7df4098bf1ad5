"""The ``workers`` table: heartbeats and adoption of silent workers' sessions.

DBOS recovers at launch only the workflows of the launching executor id. A worker that
dies and never comes back (scale-down, a lost host) would strand its sessions, so live
workers look for heartbeats older than a threshold and adopt: one conditional UPDATE picks
a single winner, which then asks DBOS to recover the dead executor's PENDING workflows.
DBOS's ownership fencing keeps a worker that was only slow from writing over the adopter.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime

import sqlalchemy as sa
from pydantic import BaseModel

S = "dbos_agents"


class WorkerInfo(BaseModel):
    executor_id: str
    hostname: str
    pid: int
    application_version: str
    status: str
    started_at: datetime
    heartbeat_at: datetime
    adopted_by: str | None
    adopted_at: datetime | None


def heartbeat(engine: sa.Engine, executor_id: str, application_version: str) -> None:
    """Register or refresh this worker (a restarted worker takes its row back)."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                f"INSERT INTO {S}.workers (executor_id, hostname, pid, application_version,"
                " status) VALUES (:e, :h, :p, :v, 'running') ON CONFLICT (executor_id) DO UPDATE"
                " SET hostname = excluded.hostname, pid = excluded.pid,"
                " application_version = excluded.application_version, status = 'running',"
                " heartbeat_at = now(), adopted_by = CASE WHEN workers.status = 'running'"
                " THEN workers.adopted_by END, started_at = CASE WHEN workers.pid = excluded.pid"
                " THEN workers.started_at ELSE now() END"
            ),
            {
                "e": executor_id,
                "h": socket.gethostname(),
                "p": os.getpid(),
                "v": application_version,
            },
        )


def mark_stopped(engine: sa.Engine, executor_id: str) -> None:
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                f"UPDATE {S}.workers SET status = 'stopped', heartbeat_at = now()"
                " WHERE executor_id = :e"
            ),
            {"e": executor_id},
        )


def claim_stale(
    engine: sa.Engine, adopter: str, stale_after_sec: float, application_version: str
) -> list[str]:
    """Claim every silent worker of this application version; returns their executor ids.

    The UPDATE's WHERE re-checks staleness under the row lock, so when several live
    workers race, exactly one wins each silent worker.
    """
    with engine.begin() as conn:
        rows = conn.execute(
            sa.text(
                f"UPDATE {S}.workers SET status = 'adopted', adopted_by = :me, adopted_at = now()"
                " WHERE executor_id <> :me AND status IN ('running', 'stopped')"
                " AND application_version = :v"
                " AND heartbeat_at < now() - make_interval(secs => :stale)"
                " RETURNING executor_id"
            ),
            {"me": adopter, "v": application_version, "stale": stale_after_sec},
        ).all()
    return [r.executor_id for r in rows]


def list_workers(engine: sa.Engine) -> list[WorkerInfo]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT * FROM {S}.workers ORDER BY executor_id")).all()
    return [WorkerInfo.model_validate(r._asdict()) for r in rows]
