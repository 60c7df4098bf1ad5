"""Runs waiting on their agent's queue (``sessions``, ``GET /metrics``): a run of an agent
whose workers are all down waits there, visibly, until one comes up.

One aggregate over DBOS's ``workflow_status`` (its ``ENQUEUED`` rows on the agent queues,
``<queue_name>:<agent>``), joined with the agents live workers publish.
"""

from __future__ import annotations

import sqlalchemy as sa

from .. import _dbos
from ..ids import agent_queue
from ..records import QueuedRuns
from .workers import known_agents


def queued_runs(
    engine: sa.Engine, queue_name: str, system_schema: str, stale_after_sec: float
) -> list[QueuedRuns]:
    """Per agent with runs waiting to be claimed: how many, and the oldest one's wait."""
    prefix = agent_queue(queue_name, "")  # the queue names own the format, not this query
    sql = (
        "SELECT substr(w.queue_name, :n) AS agent, count(*) AS runs,"
        " greatest(0, extract(epoch FROM now()) * 1000 - min(coalesce(w.updated_at,"
        " w.created_at))) / 1000.0 AS oldest"
        f" FROM {_dbos.quoted(system_schema)}.workflow_status w"
        " WHERE w.status = 'ENQUEUED' AND starts_with(w.queue_name, :prefix)"
        " GROUP BY w.queue_name ORDER BY w.queue_name"
    )
    with engine.connect() as conn:
        rows = conn.execute(sa.text(sql), {"n": len(prefix) + 1, "prefix": prefix}).all()
    if not rows:
        return []
    fleet = known_agents(engine, stale_after_sec)
    live = fleet.live if fleet is not None else frozenset()
    return [
        QueuedRuns(
            agent=r.agent, runs=int(r.runs), oldest_age_sec=float(r.oldest), served=r.agent in live
        )
        for r in rows
    ]
