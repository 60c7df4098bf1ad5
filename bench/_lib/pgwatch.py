"""One database's cost on the Postgres server, read from outside while a system runs on it:
the CPU of the backends serving it, its ``pg_stat_database`` counters and, where the server
preloads it, ``pg_stat_statements``.

Every read goes through ``engine``, which should be connected to *another* database of the
same server (the bench's ``postgres``), so the reads' own backend is never counted. The
backends are found in ``pg_stat_activity`` by database name (a system on a database of its
own owns every client backend there) and their CPU is read from ``/proc`` (the server must
be on this machine): ``/proc/<pid>/schedstat``'s run time (ns; a backend is one thread),
else utime + stime of ``/proc/<pid>/stat`` (10 ms ticks).

``pg_stat_database`` counters reach shared memory when a backend flushes its pending
statistics: at most once a second while busy, after ``PGSTAT_IDLE_INTERVAL`` (10 s) once
idle, and at exit. A reading is exact only after 10 s of quiet or after the backends exited
(``wait_gone``)."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from _lib.db import connect_retrying, rows
from _lib.procfs import stat_cpu_seconds

STATS_IDLE_FLUSH_SEC = 10.0
"""PGSTAT_IDLE_INTERVAL: an idle backend's statistics reach pg_stat_database this late."""


def backend_cpu(pid: int) -> float | None:
    """CPU seconds of one (single-threaded) backend process; None once it is gone."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        return stat_cpu_seconds(f"/proc/{pid}/stat")
    except OSError:
        return None


_BACKENDS = (
    "SELECT pid, extract(epoch FROM backend_start)::float8 AS started FROM pg_stat_activity"
    " WHERE datname = :db AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
)


@dataclass
class BackendCpuResult:
    cpu_s: float
    """CPU of the client backends of the database over the window, summed per backend."""
    backends: int
    """Backends seen during the window."""
    new_backends: int
    """Of those, connected after the window began (their CPU counts from their start)."""
    gone_backends: int
    """Of those, gone before the window ended: their CPU after the last sample is lost."""
    samples: int


@dataclass
class BackendCpu:
    """Samples the client backends of ``database`` every ``interval`` s in a thread from
    ``start()`` to ``stop()``. A backend present at ``start`` counts from its reading
    then; one that connects later counts from zero (its whole life is in the window); one
    that exits counts up to its last sample."""

    engine: sa.Engine
    database: str
    interval: float = 0.2
    _first: dict[tuple[int, float], float] = field(default_factory=dict)
    _last: dict[tuple[int, float], float] = field(default_factory=dict)
    _alive: set[tuple[int, float]] = field(default_factory=set)
    _t0: float = 0.0
    _samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _sample(self) -> None:
        alive = set()
        for r in rows(self.engine, _BACKENDS, connect_retrying, db=self.database):
            key = (int(r.pid), float(r.started))
            cpu = backend_cpu(key[0])
            if cpu is None:
                continue
            alive.add(key)
            if key not in self._first:
                self._first[key] = cpu if key[1] < self._t0 else 0.0
            self._last[key] = cpu
        self._alive = alive
        self._samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(sa.exc.SQLAlchemyError):
                self._sample()

    def start(self) -> None:
        self._t0 = time.time()
        self._sample()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-pg-cpu")
        self._thread.start()

    def stop(self) -> BackendCpuResult:
        """Stop sampling after one last sample (take it before the system disconnects)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        return BackendCpuResult(
            cpu_s=sum(self._last[k] - self._first[k] for k in self._last),
            backends=len(self._last),
            new_backends=sum(1 for _, started in self._last if started >= self._t0),
            gone_backends=sum(1 for k in self._last if k not in self._alive),
            samples=self._samples,
        )


@dataclass(frozen=True)
class DbCounters:
    """``pg_stat_database`` of one database at one moment."""

    xact_commit: int
    xact_rollback: int
    sessions: int
    """Connections ever established to the database (PostgreSQL 14+)."""

    @property
    def xacts(self) -> int:
        return self.xact_commit + self.xact_rollback

    def minus(self, before: DbCounters) -> DbCounters:
        return DbCounters(
            self.xact_commit - before.xact_commit,
            self.xact_rollback - before.xact_rollback,
            self.sessions - before.sessions,
        )


def db_counters(engine: sa.Engine, database: str) -> DbCounters:
    (r,) = rows(
        engine,
        "SELECT xact_commit, xact_rollback, sessions FROM pg_stat_database WHERE datname = :db",
        connect_retrying,
        db=database,
    )
    return DbCounters(int(r.xact_commit), int(r.xact_rollback), int(r.sessions))


def wait_gone(engine: sa.Engine, database: str, timeout: float = 30.0) -> int:
    """Wait until no client backend serves ``database`` (their statistics are flushed as
    they exit), plus a moment for the last flush; returns how many were still there at
    the timeout."""
    deadline = time.monotonic() + timeout
    left = len(rows(engine, _BACKENDS, connect_retrying, db=database))
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = len(rows(engine, _BACKENDS, connect_retrying, db=database))
    time.sleep(0.5)  # a backend leaves pg_stat_activity just before its last flush
    return left


# ---------------------------------------------------------------------------- statements


def statements_unavailable(engine: sa.Engine) -> str | None:
    """None when ``pg_stat_statements`` can be read through ``engine``, else why not. The
    extension is created (IF NOT EXISTS) in ``engine``'s database only when the server
    preloads its library: its view shows every database's statements."""
    try:
        with connect_retrying(engine) as conn:
            preload = conn.execute(sa.text("SHOW shared_preload_libraries")).scalar_one()
            if "pg_stat_statements" not in str(preload):
                return "pg_stat_statements is not in the server's shared_preload_libraries"
            conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
            conn.execute(sa.text("SELECT 1 FROM pg_stat_statements LIMIT 1")).all()
            conn.commit()
    except sa.exc.DBAPIError as exc:
        return f"pg_stat_statements unusable: {str(exc.orig).splitlines()[0]}"
    return None


Statements = dict[int, tuple[str, int, float]]
"""queryid -> (query text, calls, total execution ms)."""


def statements(engine: sa.Engine, database: str) -> Statements:
    """``pg_stat_statements`` of one database, summed per queryid."""
    sql = (
        "SELECT s.queryid, min(s.query) AS query, sum(s.calls)::bigint AS calls,"
        " sum(s.total_exec_time)::float8 AS ms FROM pg_stat_statements s"
        " JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = :db GROUP BY s.queryid"
    )
    return {
        int(r.queryid): (str(r.query), int(r.calls), float(r.ms))
        for r in rows(engine, sql, connect_retrying, db=database)
        if r.queryid is not None
    }


def statements_delta(before: Statements, after: Statements, top: int = 8) -> dict[str, Any]:
    """Statements run between two readings: their total calls and the ``top`` by time."""
    diff = []
    for qid, (query, calls, ms) in after.items():
        _, calls0, ms0 = before.get(qid, ("", 0, 0.0))
        if calls > calls0:
            diff.append((ms - ms0, calls - calls0, " ".join(query.split())[:160]))
    diff.sort(reverse=True)
    return {
        "calls": sum(c for _, c, _ in diff),
        "top": [{"query": q, "calls": c, "total_ms": round(ms, 2)} for ms, c, q in diff[:top]],
    }
