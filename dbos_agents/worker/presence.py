"""A worker's presence: heartbeats, adoption of dead peers, and LISTEN catch-up.

Each runs on a thread of its own, never on an event loop: a tool that blocks the loop (a
sync call inside an async tool) must not silence the heartbeat and get its live worker
adopted.

Adoption judges a peer dead only by what *this* worker watched: the peer's ``beat`` counter
unchanged for ``stale_after_sec`` of this worker's own unbroken, connected observation.
Database clocks are never compared, so an outage makes nobody stale: a failed tick, or a
gap between successful ticks of more than three intervals (this worker stalled or was
disconnected), restarts every observation from zero. The claim re-checks the exact row
version seen, so a heartbeat that lands first wins (``store/workers.py``).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from .. import _dbos, outages
from ..page_contract import PageContract
from ..settings import Settings
from ..store import workers
from ..store.db import sqlalchemy_url

log = logging.getLogger("dbos_agents")

GAP_FACTOR = 3.0
"""A tick gap over this many intervals breaks the observation (see the module doc)."""


def presence_engine(url: str, settings: Settings) -> sa.Engine:
    """A fresh connection per tick (no pooled connection left dead by a restart), bounded
    so a blackholed network fails a tick instead of hanging the thread."""
    timeout = max(2, int(settings.heartbeat_interval_sec + 0.999))
    return sa.create_engine(
        sqlalchemy_url(url),
        poolclass=NullPool,
        connect_args={
            "connect_timeout": timeout,
            "application_name": "dbos_agents_presence",
            "tcp_user_timeout": timeout * 1000,
            "keepalives": 1,
            "keepalives_idle": timeout,
            "keepalives_interval": 1,
            "keepalives_count": 2,
        },
    )


class Observer:
    """What this worker has seen of its peers; pure bookkeeping, fed one tick at a time."""

    def __init__(self, stale_after_sec: float, interval_sec: float) -> None:
        self.stale_after = stale_after_sec
        self.max_gap = GAP_FACTOR * interval_sec
        self._since: dict[str, tuple[workers.PeerBeat, float]] = {}
        self._last_ok: float | None = None

    def broken(self) -> None:
        """A tick failed: nothing watched so far counts any more."""
        self._last_ok = None
        self._since.clear()

    def observe(self, peers: list[workers.PeerBeat], now: float) -> list[workers.PeerBeat]:
        """Record a successful read of the peers at ``now``; returns those silent for
        ``stale_after`` of unbroken observation."""
        continuous = self._last_ok is not None and now - self._last_ok <= self.max_gap
        self._last_ok = now
        if not continuous:
            self._since = {p.executor_id: (p, now) for p in peers}
            return []
        since = {}
        for p in peers:
            prev = self._since.get(p.executor_id)
            since[p.executor_id] = prev if prev is not None and prev[0] == p else (p, now)
        self._since = since
        return [p for p, t in since.values() if now - t >= self.stale_after]


class Presence:
    """Registers this process, then heartbeats and adopts from a daemon thread."""

    def __init__(
        self,
        engine: sa.Engine,
        settings: Settings,
        on_adopted: Callable[[], None],
        *,
        executor_id: str,
        agents: list[str] | None = None,
        contracts: Mapping[str, PageContract] | None = None,
    ) -> None:
        self.engine = engine
        self.contracts = contracts
        """What a chat page may send each agent (``page_contract``), published with them."""
        self.settings = settings
        self.executor_id = executor_id
        self.agents = agents
        """Published on the row, so servers refuse sessions for agents nobody serves."""
        self.instance_id = uuid.uuid4().hex
        self.adopting = True
        """Cleared during a drain: a worker on its way out takes on no one's sessions."""
        self._on_adopted = on_adopted
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._to_recover: set[str] = set()

    def register(self) -> None:
        workers.register(
            self.engine,
            self.executor_id,
            self.instance_id,
            self.settings.application_version,
            self.agents,
            self.contracts,
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dbos-agents-presence", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def mark_stopped(self) -> None:
        workers.mark_stopped(self.engine, self.executor_id, self.instance_id)

    def _run(self) -> None:
        s = self.settings
        observer = Observer(s.stale_after_sec, s.heartbeat_interval_sec)
        try:  # claims an earlier process of this executor id made but may not have recovered
            self._to_recover.update(workers.adopted_by(self.engine, self.executor_id))
        except Exception as exc:
            log.warning("could not list adopted workers", extra={"error": str(exc)})
        while not self._stop.wait(s.heartbeat_interval_sec):
            try:
                mine = workers.heartbeat(self.engine, self.executor_id, self.instance_id)
            except Exception as exc:
                observer.broken()
                if outages.is_connection_error(str(exc)):
                    outages.failed(exc)  # said once, until the database answers again
                else:
                    log.warning(
                        "heartbeat failed", extra={"event": "heartbeat_failed", "error": str(exc)}
                    )
                continue
            outages.answered()
            if not mine:
                if not self._stop.is_set():
                    log.error(self._lost_row(), extra={"event": "worker_row_lost"})
                    self._hand_back_claims()
                    self._on_adopted()
                return
            if not self.adopting:
                observer.broken()
                continue
            try:
                self._adopt(observer)
            except Exception as exc:
                observer.broken()
                log.warning(
                    "adoption failed", extra={"event": "adoption_failed", "error": str(exc)}
                )

    def _hand_back_claims(self) -> None:
        """Adopted while alive (a frozen host that woke): the runs this process claimed
        after its adopter re-enqueued its work would stay PENDING under an executor id
        nobody recovers, so they go back on their queues before it exits. Not when another
        process holds this executor id: those runs are that process's."""
        try:
            row = workers.get(self.engine, self.executor_id)
            if row is None or row.status != "adopted":
                return
            ids = _dbos.recover_pending_workflows(
                [self.executor_id], self.settings.application_version
            )
        except Exception as exc:  # exiting anyway; the runs stay for a restart of this id
            log.warning("could not hand back claimed runs", extra={"error": str(exc)})
            return
        if ids:
            log.warning(
                f"handed back {len(ids)} run(s) claimed after the adoption",
                extra={"event": "claims_handed_back", "workflows": ids},
            )

    def _lost_row(self) -> str:
        """Why this process's row is no longer its own, naming who took it."""
        try:
            row = workers.get(self.engine, self.executor_id)
        except Exception:
            row = None
        if row is not None and row.status == "adopted":
            return (
                f"this worker ({self.executor_id}) was adopted by another worker"
                f" ({row.adopted_by}), which"
                f" saw no heartbeat from it for {self.settings.stale_after_sec:g}s (was this"
                " process frozen or cut off from the database?); exiting at once"
            )
        if row is not None and row.instance_id != self.instance_id:
            return (
                f"executor id {self.executor_id} was taken over by another process (pid"
                f" {row.pid} on host {row.hostname}): two workers share one executor id; give"
                " each its own DBOS_AGENTS_EXECUTOR_ID or leave it unset; exiting at once"
            )
        return f"this worker's row ({self.executor_id}) is no longer its own; exiting at once"

    def _adopt(self, observer: Observer) -> None:
        s = self.settings
        peers = workers.peers(self.engine, self.executor_id, s.application_version)
        for dead in observer.observe(peers, time.monotonic()):
            if workers.claim(self.engine, self.executor_id, dead):
                self._to_recover.add(dead.executor_id)
        if self._to_recover:  # kept until DBOS re-enqueued them: a claim is never stranded
            claimed = sorted(self._to_recover)
            ids = _dbos.recover_pending_workflows(claimed, s.application_version)
            self._to_recover.clear()
            log.warning(
                f"adopted the sessions of dead worker(s) {', '.join(claimed)}:"
                f" {len(ids)} workflow(s) re-enqueued",
                extra={"event": "workers_adopted", "executor_ids": claimed, "workflows": ids},
            )


class ListenerWatch:
    """Wakes waiters whose notification was lost, with one query per waiter kind for all.

    Postgres delivers NOTIFY only to connected listeners; DBOS's ``recv`` would otherwise
    find such a message only at its 60 s fallback poll, which re-checks every waiter on its
    own (``_dbos.after_launch`` turns that off). After every reconnect (a
    new connection object, its LISTEN done once the listener's lock is free), and every
    ``recheck_sec`` in any case, one query per waiter kind wakes exactly the waiters that
    have something to read.
    """

    def __init__(self, poll_sec: float = 0.25, recheck_sec: float = 60.0) -> None:
        self.poll_sec = poll_sec
        self.recheck_sec = recheck_sec
        self.passes = 0
        """Catch-up passes done (after reconnects and periodic re-checks)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="dbos-agents-listen-watch", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        seen: object | None = None
        next_recheck = time.monotonic() + self.recheck_sec
        while not self._stop.wait(self.poll_sec):
            try:
                conn, lock = _dbos.listener_connection()
                if conn is None:
                    continue
                reason = "reconnect" if conn is not seen else None
                if reason is None and time.monotonic() >= next_recheck:
                    reason = "recheck"
                if reason is None:
                    continue
                with lock:  # the listener holds it until its LISTEN statements ran
                    pass
                woken = _dbos.catch_up_waiters()
                seen = conn
                self.passes += 1
                next_recheck = time.monotonic() + self.recheck_sec
                if woken:
                    log.info(
                        "woke waiters whose notification was lost",
                        extra={"event": "listen_catch_up", "woken": woken, "after": reason},
                    )
            except Exception as exc:  # the database is still away: try again next poll
                log.debug("listen catch-up failed", extra={"error": str(exc)})
