"""The ``workers`` table: presence, heartbeats and adoption of dead workers' sessions.

DBOS recovers at launch only the workflows of the launching executor id. A worker that
dies and never comes back (scale-down, a lost host) would strand its sessions, so live
workers adopt it. Adopting a *live* worker would run its in-flight steps twice, so silence
is judged only by what the adopter itself watched (``worker/presence.py``): a peer's
``beat`` counter that did not move while the adopter stayed connected. The claim is one
conditional UPDATE on the exact row version seen (``beat`` and ``instance_id``): one winner,
and a heartbeat that lands first beats the claim. Each worker process has its own
``instance_id``; a live worker whose row was claimed learns it at its next heartbeat.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, cast

import sqlalchemy as sa
from pydantic import BaseModel

from ..errors import AgentUnavailableError, UnknownAgentError
from ..page_contract import PageContract

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
    instance_id: str | None = None
    beat: int = 0
    agents: list[str] | None = None


@dataclass(frozen=True)
class PeerBeat:
    """One observation of a peer's row: what a claim must still find to win."""

    executor_id: str
    instance_id: str | None
    beat: int


def register(
    engine: sa.Engine,
    executor_id: str,
    instance_id: str,
    application_version: str,
    agents: list[str] | None = None,
    contracts: Mapping[str, PageContract] | None = None,
) -> None:
    """Take this executor id's row for this process (a restarted worker takes it back, even
    from an adopter: the adopter already re-enqueued what was PENDING), publishing the
    agents it serves (``known_agents``) and what a chat page may send each
    (``page_contract``)."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                f"INSERT INTO {S}.workers (executor_id, hostname, pid, application_version,"
                " status, instance_id, beat, agents, page_contracts) VALUES (:e, :h, :p, :v,"
                " 'running', :i, 1, :a, CAST(:c AS jsonb)) ON CONFLICT (executor_id) DO UPDATE"
                " SET hostname = excluded.hostname, page_contracts = excluded.page_contracts,"
                " pid = excluded.pid, application_version = excluded.application_version,"
                " status = 'running', instance_id = excluded.instance_id,"
                " beat = workers.beat + 1, heartbeat_at = now(), started_at = now(),"
                " adopted_by = NULL, adopted_at = NULL, agents = excluded.agents"
            ),
            {
                "e": executor_id,
                "h": socket.gethostname(),
                "p": os.getpid(),
                "v": application_version,
                "i": instance_id,
                "a": None if agents is None else sorted(agents),
                "c": None if contracts is None else json.dumps(contracts),
            },
        )


@dataclass(frozen=True)
class Fleet:
    """The agents workers publish on their rows (``register``)."""

    live: frozenset[str]
    """Served by a live worker: running, a heartbeat within ``stale_after_sec`` by the
    database's own clock (one clock, so no skew)."""
    ever: frozenset[str]
    """Served by any worker with a row: live, stopped, dead or adopted."""

    def refusal(
        self, agent: str, when_no_worker: Literal["queue", "refuse"]
    ) -> UnknownAgentError | AgentUnavailableError | None:
        """Why a start of ``agent`` is refused, or None. No worker has published yet (a new
        database, only earlier releases): nothing is refused, the run waits for one."""
        if agent in self.live or not self.ever:
            return None
        if agent not in self.ever:
            return UnknownAgentError(agent, sorted(self.ever))
        return AgentUnavailableError(agent) if when_no_worker == "refuse" else None


def known_agents(engine: sa.Engine, stale_after_sec: float = 30.0) -> Fleet | None:
    """The agents workers serve now and have served; None when this role may not read the
    fleet's table (a start is then accepted, queued for a worker)."""
    try:
        with engine.connect() as conn:
            row = conn.execute(
                sa.text(
                    "SELECT array_agg(DISTINCT a) FILTER (WHERE w.status = 'running'"
                    " AND w.heartbeat_at > now() - make_interval(secs => :stale)) AS live,"
                    f" array_agg(DISTINCT a) AS ever FROM {S}.workers w,"
                    " unnest(w.agents) AS a WHERE w.agents IS NOT NULL"
                ),
                {"stale": stale_after_sec},
            ).one()
    except sa.exc.ProgrammingError:  # a role without access to the fleet's table
        return None
    return Fleet(frozenset(row.live or ()), frozenset(row.ever or ()))


def page_contract(engine: sa.Engine, agent: str, stale_after_sec: float) -> PageContract | None:
    """What a chat page may send ``agent``, as the newest live worker that serves it
    published it (a rolling deploy: the new definition); None: none published, or this
    role may not read the fleet's table."""
    try:
        with engine.connect() as conn:
            value = conn.execute(
                sa.text(
                    f"SELECT page_contracts -> :a FROM {S}.workers WHERE status = 'running'"
                    " AND heartbeat_at > now() - make_interval(secs => :stale)"
                    " AND page_contracts ? :a ORDER BY started_at DESC LIMIT 1"
                ),
                {"a": agent, "stale": stale_after_sec},
            ).scalar()
    except sa.exc.ProgrammingError:
        return None
    return cast(PageContract, value) if isinstance(value, dict) else None


class KnownAgents:
    """``known_agents`` for a client's starts, remembered for ``ttl_sec`` while it lets the
    agent asked for in (a burst of starts reads the fleet once, not once a start); a
    refusal is always read fresh, so an agent a worker just published is not refused."""

    def __init__(
        self,
        engine: sa.Engine,
        stale_after_sec: float,
        ttl_sec: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        when_no_worker: Literal["queue", "refuse"] = "queue",
    ) -> None:
        self._engine = engine
        self._stale = stale_after_sec
        self.ttl_sec = ttl_sec
        self._clock = clock
        self._when = when_no_worker
        self._last: tuple[float, Fleet | None] | None = None

    def refusing(self, agent: str) -> UnknownAgentError | AgentUnavailableError | None:
        """None when ``agent`` may start now; else the error to raise (``Fleet.refusal``)."""
        now = self._clock()
        last = self._last
        if last is not None and now - last[0] < self.ttl_sec and self._admits(last[1], agent):
            return None
        fleet = known_agents(self._engine, self._stale)
        self._last = (now, fleet)
        return None if fleet is None else fleet.refusal(agent, self._when)

    def _admits(self, fleet: Fleet | None, agent: str) -> bool:
        return fleet is None or fleet.refusal(agent, self._when) is None


def get(engine: sa.Engine, executor_id: str) -> WorkerInfo | None:
    with engine.connect() as conn:
        r = conn.execute(
            sa.text(f"SELECT * FROM {S}.workers WHERE executor_id = :e"), {"e": executor_id}
        ).first()
    return None if r is None else WorkerInfo.model_validate(r._asdict())


def heartbeat(engine: sa.Engine, executor_id: str, instance_id: str) -> bool:
    """Bump this process's beat. False: the row is no longer ours (adopted, or another
    process registered the same executor id) and this process must stop at once."""
    with engine.begin() as conn:
        row = conn.execute(
            sa.text(
                f"UPDATE {S}.workers SET beat = beat + 1, heartbeat_at = now()"
                " WHERE executor_id = :e AND instance_id = :i AND status = 'running'"
                " RETURNING beat"
            ),
            {"e": executor_id, "i": instance_id},
        ).first()
    return row is not None


def mark_stopped(engine: sa.Engine, executor_id: str, instance_id: str | None = None) -> None:
    """Record a clean stop (only while the row is still this process's, when given)."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                f"UPDATE {S}.workers SET status = 'stopped', heartbeat_at = now()"
                " WHERE executor_id = :e AND status <> 'adopted'"
                " AND (CAST(:i AS text) IS NULL OR instance_id = :i)"
            ),
            {"e": executor_id, "i": instance_id},
        )


def peers(engine: sa.Engine, me: str, application_version: str) -> list[PeerBeat]:
    """The rows an adopter watches: other workers of this version not yet adopted."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                f"SELECT executor_id, instance_id, beat FROM {S}.workers"
                " WHERE executor_id <> :me AND application_version = :v"
                " AND status IN ('running', 'stopped')"
            ),
            {"me": me, "v": application_version},
        ).all()
    return [PeerBeat(r.executor_id, r.instance_id, int(r.beat)) for r in rows]


def claim(engine: sa.Engine, adopter: str, seen: PeerBeat) -> bool:
    """Adopt ``seen`` if its row is exactly as observed; True for the one winner."""
    with engine.begin() as conn:
        row = conn.execute(
            sa.text(
                f"UPDATE {S}.workers SET status = 'adopted', adopted_by = :me,"
                " adopted_at = now() WHERE executor_id = :e AND beat = :b"
                " AND instance_id IS NOT DISTINCT FROM CAST(:i AS text)"
                " AND status IN ('running', 'stopped') RETURNING executor_id"
            ),
            {"me": adopter, "e": seen.executor_id, "b": seen.beat, "i": seen.instance_id},
        ).first()
    return row is not None


def adopted_by(engine: sa.Engine, adopter: str) -> list[str]:
    """Workers this executor id adopted and nobody restarted since: recovering them again
    is idempotent, and covers an adopter that died between its claim and the recovery."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                f"SELECT executor_id FROM {S}.workers WHERE adopted_by = :me AND status = 'adopted'"
            ),
            {"me": adopter},
        ).all()
    return [r.executor_id for r in rows]


def list_workers(engine: sa.Engine) -> list[WorkerInfo]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT * FROM {S}.workers ORDER BY executor_id")).all()
    return [WorkerInfo.model_validate(r._asdict()) for r in rows]
