"""What Postgres spends on one system's database over a window, read from outside: its
client backends' CPU (found in ``pg_stat_activity`` by database, read from ``/proc``: the
server must be on this machine), ``pg_stat_database``'s transactions, ``pg_stat_statements``'
statements (where the server preloads it) and the server's WAL (exact while the system runs
alone on the server); and ``run_window``, the window every Postgres figure of the bench
comes from. Reads go through an engine on another database of the server, so their own
backend is never counted. Why the window settles first, and what each figure includes:
docs/bench-notes/concurrency.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from _lib.child import Child
from _lib.db import connect_retrying, rows, scalar
from _lib.labels import PER_TURN
from _lib.procfs import cpu_seconds, stat_cpu_seconds

BENCH = Path(__file__).resolve().parents[1]
PEERS_PYTHON = BENCH / "peers" / ".venv" / "bin" / "python"
SYSTEMS = {
    "ours": (sys.executable, BENCH / "turn_overhead.py"),
    "ours_streamed": (sys.executable, BENCH / "turn_overhead.py", "--streaming"),
    "langgraph": (str(PEERS_PYTHON), BENCH / "peers" / "langgraph_pg.py"),
    "pydantic_ai": (str(PEERS_PYTHON), BENCH / "peers" / "pydantic_ai_dbos.py"),
}
"""The scripts whose ``--concurrent N`` mode is a window's child (bench/peers/_common.burst)."""

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
    """CPU of the database's client backends over the window, summed per backend; the
    backends seen, those that connected after it began (counted from their start) and
    those gone before it ended (their CPU after the last sample is lost)."""

    cpu_s: float
    backends: int
    new_backends: int
    gone_backends: int
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


# ---------------------------------------------------------------------------- the window


def wal_lsn(engine: sa.Engine) -> int:
    """The server's WAL position in bytes."""
    sql = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
    return int(scalar(engine, sql, connect_retrying))


def admin_engine(url: str) -> sa.Engine:
    """An engine on the server's ``postgres`` database, whose reads no window counts."""
    target = sa.make_url(url).set(drivername="postgresql+psycopg", database="postgres")
    return sa.create_engine(target, pool_size=2)


def run_window(
    admin: sa.Engine,
    server_url: str,
    db: str,
    system: str,
    *,
    sessions: int,
    turns: int,
    model_ms: float = 0.0,
    sequential: bool = False,
    settle: float = STATS_IDLE_FLUSH_SEC + 1,
    with_statements: bool = True,
) -> dict[str, Any]:
    """``system``'s script in ``--concurrent`` mode on the fresh database ``db``: after its
    warm-up and ``settle`` s of quiet (so the warm-up's statistics are flushed), ``sessions``
    sessions of ``turns`` tool turns, at once or one after another; the process's CPU and
    what Postgres spent on ``db`` over that window, per tool turn."""
    from dbos_agents.testing import create_fresh_database, drop_database

    url = create_fresh_database(server_url, db)
    python, script, *extra = SYSTEMS[system]
    cmd = [python, str(script), *map(str, extra), "--database-url", url]
    cmd += ["--concurrent", str(sessions)]
    cmd += ["--turns", str(turns), "--model-ms", str(model_ms)]
    cmd += ["--sequential"] if sequential else []
    drop = ("DBOS_AGENTS_DATABASE_URL",) + (
        () if system.startswith("ours") else ("VIRTUAL_ENV", "PYTHONPATH")
    )
    env = {k: v for k, v in os.environ.items() if k not in drop}
    with tempfile.TemporaryFile("w+") as err:
        proc = Child(cmd, env=env, stderr=err, stdin=subprocess.PIPE)
        try:
            proc.expect("READY", 300)
            idle0 = cpu_seconds(proc.pid)
            time.sleep(settle)
            idle_cpu_pct = 100 * (cpu_seconds(proc.pid) - idle0) / settle
            before = db_counters(admin, db)
            stm0 = statements(admin, db) if with_statements else {}
            wal0 = wal_lsn(admin)
            backends = BackendCpu(admin, db)
            backends.start()
            proc.send("GO")
            timeout = 300 + sessions * turns * (0.2 + model_ms / 1000)
            done = json.loads(proc.expect("DONE", timeout).split(" ", 1)[1])
            pg = backends.stop()
            wal = wal_lsn(admin) - wal0
            stm = statements_delta(stm0, statements(admin, db)) if with_statements else None
            proc.close_stdin()
            proc.join(120)
            wait_gone(admin, db)
            delta = db_counters(admin, db).minus(before)
        except Exception as exc:
            err.seek(0)
            tail = "\n".join(err.read().splitlines()[-15:])
            raise RuntimeError(f"{system} at {sessions} x {model_ms:g} ms: {exc}\n{tail}") from exc
        finally:
            proc.stop(30)
            drop_database(server_url, db)
    n = max(1, done["turns"])
    return {
        "system": system,
        "sessions": sessions,
        "model_ms": model_ms,
        "turns": done["turns"],
        "model_calls": done["turns"] + sessions - done["failed"],
        "failed": done["failed"],
        "errors": done["errors"],
        "wall_s": done["wall_s"],
        "turns_per_s": done["turns"] / done["wall_s"] if done["wall_s"] > 0 else 0.0,
        "cpu_ms_per_turn": done["cpu_s"] * 1000 / n,
        "pg_cpu_ms_per_turn": pg.cpu_s * 1000 / n,
        "backends": pg.backends,
        "new_backends": pg.new_backends,
        "gone_backends": pg.gone_backends,
        "new_connections": delta.sessions,
        "xacts_per_turn": delta.xacts / n,
        "rollbacks": delta.xact_rollback,
        "stmts_per_turn": stm["calls"] / n if stm else None,
        "wal_kb_per_turn": wal / 1024 / n,
        "top_statements": stm["top"] if stm else None,
        "idle_cpu_pct": idle_cpu_pct,
        "session_s": done["session_s"],
        "measures": done.get("measures", ""),
        "versions": done.get("versions", {}),
    }


def per_model_call(w: dict[str, Any]) -> dict[str, Any]:
    """A sequential window's figures per model call, the per-turn rows' unit (a session of
    T tool turns makes T + 1 calls); turns/s stays per tool turn."""
    k = w["turns"] / max(1, w["model_calls"])
    out = {m: (None if w[m] is None else round(w[m] * k, 4)) for m in PER_TURN}
    return {**out, "turns_per_s": round(w["turns_per_s"], 2), "sessions": w["sessions"]}


def per_turn_pg(server_url: str, db: str, system: str, sessions: int, turns: int) -> dict[str, Any]:
    """``system``'s per-turn Postgres figures: ``sessions`` sessions one after another."""
    admin = admin_engine(server_url)
    try:
        why_not = statements_unavailable(admin)
        w = run_window(admin, server_url, db, system, sessions=sessions, turns=turns,
                       sequential=True, with_statements=why_not is None)  # fmt: skip
    finally:
        admin.dispose()
    return per_model_call(w)
