"""This process's executor id, and the lock that keeps it this process's alone.

DBOS recovers at launch the PENDING workflows of the launching executor id: two live
processes under one id would recover, and run, each other's sessions. So every runtime
holds a session-level advisory lock keyed on its executor id, on a connection of its own,
for as long as it runs; a process that dies drops its connection and the lock with it.

With no executor id configured, a worker takes the first free *slot* of its host:
``worker-<host>`` (slot 0, the id earlier releases used for every worker), then
``worker-<host>:1``, ``worker-<host>:2``... Two workers on one host get one each, and a
restarted worker finds its old slot free again and recovers its own sessions. A slot whose
worker died for good is adopted by a peer as any dead worker is (``presence``).

A configured id that another live process holds is refused, naming that process, after
waiting ``stale_after_sec`` for it to go (a predecessor may still be exiting). The lock's
connection asks the server to probe the client (TCP keepalives) so a vanished host does not
hold its id for the two hours of Linux's default.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import socket
import threading
import time
from typing import Any

import psycopg

from .. import outages
from ..errors import ConfigurationError
from ..settings import Settings
from ..store.db import describe, libpq_url
from ..store.schema import SCHEMA as S

log = logging.getLogger("dbos_agents")

MAX_SLOTS = 256
"""Workers one host may run without configured ids."""
RETRY_SEC = 0.2
_KEEPALIVES = (
    "SET tcp_keepalives_idle = 5",
    "SET tcp_keepalives_interval = 2",
    "SET tcp_keepalives_count = 3",
    "SET tcp_user_timeout = 10000",
)


def slot_id(slot: int, host: str | None = None) -> str:
    """The executor id of ``slot`` on ``host``; slot 0 keeps the id of earlier releases, so
    an upgraded worker recovers what it left."""
    base = f"worker-{host or socket.gethostname()}"
    return base if slot == 0 else f"{base}:{slot}"


def lock_keys(executor_id: str) -> tuple[int, int]:
    """Two int4 keys from a hash of the id: the two-key lock space, which nothing else uses
    (tool calls and migrations lock on single bigint keys)."""
    digest = hashlib.sha256(f"dbos_agents.executor:{executor_id}".encode()).digest()
    return (
        int.from_bytes(digest[:4], "big", signed=True),
        int.from_bytes(digest[4:8], "big", signed=True),
    )


class ExecutorClaim:
    """Holds this process's executor id (see the module doc); ``keep`` runs the check that
    takes the lock again after its connection broke, and reports outages' ends."""

    def __init__(self, url: str, settings: Settings) -> None:
        self.url = url
        self.settings = settings
        self.executor_id: str | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _connect(self) -> psycopg.Connection[Any]:
        timeout = max(1, int(self.settings.connect_timeout_sec))
        conn = psycopg.connect(
            libpq_url(self.url),
            autocommit=True,
            connect_timeout=timeout,
            application_name="dbos_agents_executor_lock",
            keepalives=1,
            keepalives_idle=5,
            keepalives_interval=2,
            keepalives_count=3,
        )
        for setting in _KEEPALIVES:  # the server probes us; a server may refuse one
            with contextlib.suppress(psycopg.Error):
                conn.execute(setting)
        return conn

    def _try(self, conn: psycopg.Connection[Any], executor_id: str) -> bool:
        row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", lock_keys(executor_id)).fetchone()
        return bool(row and row[0])

    def acquire(self) -> str:
        """Take the configured id, or the first free slot of this host; returns it."""
        conn = self._connect()
        try:
            configured = self.settings.executor_id
            if configured is None:
                got = next((i for i in map(slot_id, range(MAX_SLOTS)) if self._try(conn, i)), None)
                if got is None:
                    raise ConfigurationError(
                        f"all {MAX_SLOTS} executor ids of host {socket.gethostname()} are in use:"
                        " set DBOS_AGENTS_EXECUTOR_ID"
                    )
            else:
                self._wait_for(conn, configured)
                got = configured
        except BaseException:
            conn.close()
            raise
        self._conn, self.executor_id = conn, got
        return got

    def _wait_for(self, conn: psycopg.Connection[Any], executor_id: str) -> None:
        """Take a configured id, waiting up to ``stale_after_sec`` for a holder to exit."""
        wait = self.settings.stale_after_sec
        start = time.monotonic()
        said = False
        while not self._try(conn, executor_id):
            holder = _holder(conn, executor_id)
            if time.monotonic() - start >= wait:
                raise ConfigurationError(
                    f"executor id {executor_id!r} is in use by another live worker{holder} on"
                    f" {describe(self.url)}: give each worker its own DBOS_AGENTS_EXECUTOR_ID,"
                    " or leave it unset to get a free one per host (worker-<host>, worker-<host>:1, ...)"
                )
            if not said and time.monotonic() - start > 1.0:  # not a predecessor's last breath
                log.warning(
                    f"executor id {executor_id} is held by another live worker{holder};"
                    f" waiting up to {wait:g}s for it to exit",
                    extra={"event": "executor_id_busy", "executor_id": executor_id},
                )
                said = True
            time.sleep(RETRY_SEC)

    def keep(self) -> None:
        """Check the lock's connection every heartbeat interval (a thread): after it broke
        (an outage, a restarted server) take the lock again on a new one."""
        self._thread = threading.Thread(target=self._run, name="dbos-agents-executor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.settings.heartbeat_interval_sec):
            try:
                self.check()
            except Exception as exc:
                if self._stop.is_set():  # released meanwhile: nothing to report
                    return
                if outages.is_connection_error(str(exc)):
                    outages.failed(exc)
                else:
                    log.warning(
                        "executor id lock not checked",
                        extra={"event": "executor_lock_check_failed", "error": str(exc)},
                    )

    def check(self) -> None:
        """One check (see ``keep``); raises the driver's error while the database is away."""
        eid = self.executor_id
        assert eid is not None
        conn = self._conn
        if conn is not None and not conn.closed:
            try:
                conn.execute("SELECT 1")
                outages.answered()
                return
            except psycopg.OperationalError:
                conn.close()
        self._conn = conn = self._connect()
        outages.answered()
        if not self._try(conn, eid):
            log.error(
                f"executor id {eid} was taken by another worker{_holder(conn, eid)} while this"
                " one could not reach the database",
                extra={"event": "executor_id_taken", "executor_id": eid},
            )

    def release(self) -> None:
        """Stop checking and drop the lock (a clean shutdown; exiting drops it too)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _holder(conn: psycopg.Connection[Any], executor_id: str) -> str:
    """`` (pid P on host H)`` from the holder's presence row, when it has one."""
    try:
        row = conn.execute(
            f"SELECT pid, hostname FROM {S}.workers WHERE executor_id = %s AND status = 'running'",
            (executor_id,),
        ).fetchone()
    except psycopg.Error:  # the table does not exist yet: nothing to name
        return ""
    return "" if row is None else f" (pid {row[0]} on host {row[1]})"
