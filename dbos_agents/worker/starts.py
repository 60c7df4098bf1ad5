"""Start announced runs at once instead of at the queue's next poll.

DBOS's queue thread finds enqueued workflows by polling (``Settings.queue_poll_sec``, 1 s
here, 0.2 s under a worker concurrency limit): every start would wait half an interval on
average, and polling faster costs a query (and a walk over every active workflow) per
interval whether or not anything was enqueued. Instead, the transaction
that enqueues a run also sends ``NOTIFY`` on ``START_CHANNEL`` (committed with it, so a
run is never announced before it exists), and every worker listens on its own connection
and claims at once through DBOS's own claim (``_dbos.dequeue_now``).

The poll stays as the safety net: a notification lost to a reconnect is caught by one
claim pass right after every (re)connect, and at worst by the next poll. A draining
worker claims nothing. The payload names the run's queue: a worker claims only on the
queues of agents it runs (its others are another service's).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence

import psycopg

from .. import _dbos
from ..ids import START_CHANNEL
from ..loop import drain

log = logging.getLogger("dbos_agents")


class StartWatch:
    """One thread, one connection: LISTEN for announced runs and claim them."""

    def __init__(
        self, database_url: str, queues: Sequence[str], *, connect_timeout_sec: float = 5.0
    ) -> None:
        self.database_url = database_url
        self.queues = tuple(queues)
        """The queues this worker dequeues (``AgentRuntime.queues``)."""
        self.connect_timeout_sec = connect_timeout_sec
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="dbos-agents-start-watch", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _claim(self, announced: Iterable[str] | None = None) -> None:
        """Claim on the queues named (every queue of this worker when None)."""
        if drain.is_draining():
            return
        wanted = self.queues if announced is None else set(announced)
        for queue in self.queues:
            if queue not in wanted:
                continue
            try:
                _dbos.dequeue_now(queue)
            except Exception as exc:  # the queue thread's next poll claims what this missed
                log.debug("start claim failed", extra={"error": str(exc), "queue": queue})

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self.database_url,
                    autocommit=True,
                    connect_timeout=max(1, round(self.connect_timeout_sec)),
                    application_name="dbos-agents-start-watch",
                ) as conn:
                    conn.execute(f"LISTEN {START_CHANNEL}")
                    self._claim()  # runs announced while nobody listened
                    while not self._stop.is_set():
                        first = list(conn.notifies(timeout=0.5, stop_after=1))
                        if first:
                            # Coalesce: one claim per queue serves every run announced so far.
                            rest = conn.notifies(timeout=0.001)
                            self._claim({n.payload for n in (*first, *rest)})
            except Exception as exc:  # database away: retry; the queue poll covers meanwhile
                log.debug("start watch reconnecting", extra={"error": str(exc)})
                self._stop.wait(1.0)
