"""Crash recovery at scale: SIGKILL a worker with 1,000 sessions in flight, restart it.

The goal (performance issue): after the restart all sessions finish within 20 s, with 0
duplicate effects. Worker 1 (``--worker``: the real ``serve_forever`` loop) runs sessions
whose side-effecting tools each insert an effect row as an external provider would; it is
SIGKILLed once ``--kill-at`` of them have an effect, and worker 2, with the same executor
id, recovers them. Each step and the findings: docs/bench-notes/recovery.md.

    python bench/recovery.py [--sessions 1000] [--turns 3] [--kill-at 0.8] [--quick]
        [--private-cluster [--max-connections 200]] [--worker-concurrency N]
        [--timeout 300] [--json]

A worker with unlimited concurrency holds ~60 connections: on a shared server use
``--private-cluster`` (a throwaway ``initdb`` cluster, fsync on).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from _lib import cli
from _lib.child import Child
from _lib.db import LOCAL_SERVER, database_url
from _lib.internals import serve_forever
from _lib.procfs import Meter, cpu_seconds_or_nan, loadavg
from _lib.render import recovery_section, show
from rich.console import Console

from dbos_agents import Agent, AgentRuntime, ModelResponse, ToolContext, tool
from dbos_agents.client import AgentClient
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from dbos_agents.testing import PrivateCluster

EXECUTOR_ID = "bench-recovery-worker"
APP_VERSION = "bench-recovery-1"
DB_NAME = "dbos_agents_bench_recovery"
POLL_SEC = 0.1
AGENT = "recovery"
TOOLS = ("charge", "send_email", "ship")
EFFECTS = "bench_recovery_effects"
EFFECT_POOL_SIZE = 4
TERMINAL = ("completed", "max_turns", "budget_exhausted", "failed", "interrupted")
TERMINAL_SQL = "(" + ",".join(f"'{s}'" for s in TERMINAL) + ")"

# ---------------------------------------------------------------------------- the worker


_POOL: list[asyncio.Queue[psycopg.AsyncConnection[Any]]] = []  # one per worker event loop
_OPENED: list[int] = []  # effect connections opened so far (at most EFFECT_POOL_SIZE)


async def _effect_connection() -> psycopg.AsyncConnection[Any]:
    """A connection from the effect pool; opening one retries (as a provider client would)
    while the server refuses connections, so a busy server never loses or hangs an effect."""
    if not _POOL:
        _POOL.append(asyncio.Queue())
    pool = _POOL[0]
    while True:
        if pool.empty() and len(_OPENED) < EFFECT_POOL_SIZE:
            _OPENED.append(1)
            try:
                url = os.environ["DBOS_AGENTS_DATABASE_URL"]
                return await psycopg.AsyncConnection.connect(url, autocommit=True)
            except psycopg.OperationalError:
                _OPENED.pop()
                await asyncio.sleep(0.5)
                continue
        try:
            return await asyncio.wait_for(pool.get(), timeout=0.5)
        except TimeoutError:
            continue


async def record_effect(ctx: ToolContext) -> None:
    """The 'provider': one autocommit INSERT on a pooled connection of its own."""
    conn = await _effect_connection()
    try:
        await conn.execute(
            f"INSERT INTO {EFFECTS} (idempotency_key, session_id, tool_call_id, tool, pid)"
            " VALUES (%s, %s, %s, %s, %s)",
            (ctx.idempotency_key, ctx.session_id, ctx.tool_call_id, ctx.tool_name, os.getpid()),
        )
    finally:
        _POOL[0].put_nowait(conn)


@tool
async def charge(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Charge the customer (side-effecting: at most once)."""
    await record_effect(ctx)
    return {"charged": cents, "order_id": order_id}


@tool
async def send_email(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Email the receipt (side-effecting: at most once)."""
    await record_effect(ctx)
    return {"sent": True, "order_id": order_id}


@tool
async def ship(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Ship the order (side-effecting: at most once)."""
    await record_effect(ctx)
    return {"shipped": True, "order_id": order_id}


def respond(request: ModelRequest) -> str | ModelResponse:
    """Turn k < TURNS calls TOOLS[k % 3]; then the final answer."""
    turn = sum(1 for m in request.messages if m.role == "assistant")
    turns = int(os.environ.get("BENCH_RECOVERY_TURNS", "3"))
    if turn < turns:
        name = TOOLS[turn % len(TOOLS)]
        return calls(call(name, {"order_id": f"o{turn}", "cents": 100 + turn}))
    return "done"


def worker_main() -> None:
    """``--worker``: run the bench agent in ``serve_forever`` (the real worker loop)."""
    agent = Agent(AGENT, "charges, emails, ships", tools=[charge, send_email, ship])
    rt = AgentRuntime([agent], ScriptedModel(respond=respond))
    print(f"imported {time.time():.6f}", flush=True)
    asyncio.run(_serve(rt))


async def _serve(rt: AgentRuntime) -> None:
    """Open the effect 'provider' connections first (an external provider has capacity of
    its own; taken mid-run from a full server they could wait on connections held by the
    very tool attempts waiting for them), then the real worker loop."""
    conns = [await _effect_connection() for _ in range(EFFECT_POOL_SIZE)]
    for c in conns:
        _POOL[0].put_nowait(c)
    await serve_forever(rt)  # prints "dbos-agents worker ready ..." after launch


# ---------------------------------------------------------------------------- the database


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
    """Enqueue n sessions from 8 threads; returns the seconds it took."""
    t0 = time.perf_counter()
    with AgentClient(url) as client, ThreadPoolExecutor(8) as pool:
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


# ---------------------------------------------------------------------------- the run


class Worker(Child):
    """A worker subprocess; its stdout lines go to its log, timestamped as they arrive."""

    def __init__(self, url: str, turns: int, log_path: Path, extra_env: dict[str, str]) -> None:
        env = {
            **os.environ,
            "DBOS_AGENTS_DATABASE_URL": url,
            "DBOS_AGENTS_EXECUTOR_ID": EXECUTOR_ID,
            "DBOS_AGENTS_APPLICATION_VERSION": APP_VERSION,
            "DBOS_AGENTS_LOG_LEVEL": "WARNING",
            "BENCH_RECOVERY_TURNS": str(turns),
            **extra_env,
        }
        self.log_path = log_path
        self.log = open(log_path, "w")  # noqa: SIM115 - closed in wait()
        self.events: dict[str, float] = {}
        self.t_spawn = time.time()
        cmd = [sys.executable, os.path.abspath(__file__), "--worker"]
        super().__init__(cmd, env=env, stderr=self.log, on_line=self._line)

    def _line(self, line: str, now: float) -> None:
        self.log.write(line)
        if line.startswith("imported "):
            self.events["imported"] = float(line.split()[1])
        elif line.startswith("dbos-agents worker ready"):
            self.events["ready"] = now

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait(10)

    def drain(self) -> None:
        """SIGTERM (drain), SIGKILL after 30 s."""
        self.stop(30)
        self.wait(10)

    def wait(self, timeout: float) -> None:
        self.join(timeout)
        self.log.close()

    def cpu(self) -> tuple[float, float]:
        """(all threads, main thread) CPU seconds so far."""
        stat = f"/proc/{self.pid}/stat", f"/proc/{self.pid}/task/{self.pid}/stat"
        return cpu_seconds_or_nan(stat[0]), cpu_seconds_or_nan(stat[1])


def run(args: argparse.Namespace, out: Console) -> Result:
    cluster = None
    try:
        if args.private_cluster:
            cluster, server = private_cluster(args.max_connections)
        else:
            server = args.server_url
        return _run(args, out, database_url(args.database_url, DB_NAME, server))
    finally:
        if cluster is not None:
            cluster.close()


def _run(args: argparse.Namespace, out: Console, url: str) -> Result:
    n = args.sessions
    res = Result(
        args={k: v for k, v in vars(args).items() if k != "worker"},
        versions={**cli.versions("sqlalchemy"), "nproc": str(os.cpu_count())},
        load_before=loadavg(),
    )
    setup(url)
    res.enqueue_sec = start_sessions(url, n)
    out.print(f"enqueued {n} sessions in {res.enqueue_sec:.1f}s; load {loadavg()}")
    logs = Path(tempfile.mkdtemp(prefix="bench-recovery-"))
    env = {"DBOS_AGENTS_QUEUE_POLLING_INTERVAL_SEC": str(args.queue_polling_interval)}
    if args.worker_concurrency:
        env["DBOS_AGENTS_WORKER_CONCURRENCY"] = str(args.worker_concurrency)
    conn = psycopg.connect(url, autocommit=True)

    # -- worker 1: run until most sessions are mid-run, then SIGKILL
    w1 = Worker(url, args.turns, logs / "worker-1.log", env)
    deadline = time.monotonic() + args.timeout
    peak1 = 0
    try:
        while True:
            p = progress(conn)
            peak1 = max(peak1, p.connections)
            if p.with_effect >= args.kill_at * n or p.terminal >= 0.1 * n:
                break
            if w1.proc.poll() is not None:
                raise RuntimeError(f"worker 1 exited early; log {w1.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker 1 made no progress; log {w1.log_path}")
            time.sleep(POLL_SEC)
        w1_cpu, w1_main = w1.cpu()
    finally:
        w1.kill()
    res.first_run_sec = time.time() - w1.t_spawn
    res.at_kill = snapshot(conn)
    res.at_kill["peak_connections"] = peak1
    res.at_kill["worker_cpu_sec"] = round(w1_cpu, 2)
    res.at_kill["worker_main_thread_cpu_sec"] = round(w1_main, 2)
    res.at_kill["since_ready_sec"] = round(time.time() - w1.events.get("ready", w1.t_spawn), 2)
    done_at_kill = sum(v for k, v in res.at_kill["sessions"].items() if k in TERMINAL)
    out.print(
        f"SIGKILLed worker 1 after {res.first_run_sec:.1f}s: {done_at_kill} finished,"
        f" {n - done_at_kill} in flight, {res.at_kill['effects']} effects"
    )

    # -- worker 2: same executor id; measure until every session is terminal
    meter = Meter({}, DB_NAME)
    w2 = Worker(url, args.turns, logs / "worker-2.log", env)
    deadline = time.monotonic() + args.timeout
    stuck = False
    peak2 = 0
    try:
        while True:
            p = progress(conn)
            peak2 = max(peak2, p.connections)
            if p.terminal >= n:
                break
            if w2.proc.poll() is not None:
                raise RuntimeError(f"worker 2 exited; log {w2.log_path}")
            if time.monotonic() > deadline:
                stuck = True
                break
            time.sleep(POLL_SEC)
        t_seen = time.time()
        w2_cpu, w2_main = w2.cpu()
        used = meter.read()
    finally:
        w2.drain()
    t_done = t_seen if stuck else (p.last_update or t_seen)
    ready = w2.events.get("ready", float("nan"))
    imported = w2.events.get("imported", float("nan"))
    remaining = n - done_at_kill
    res.recovery = {
        "sessions_to_recover": remaining,
        "spawn_to_all_done_sec": round(t_done - w2.t_spawn, 3),
        "spawn_to_imported_sec": round(imported - w2.t_spawn, 3),
        "imported_to_ready_sec": round(ready - imported, 3),
        "ready_to_all_done_sec": round(t_done - ready, 3),
        "sessions_per_sec": round(remaining / max(1e-9, t_done - w2.t_spawn), 1),
        "sessions_per_sec_after_ready": round(remaining / max(1e-9, t_done - ready), 1),
        "worker_cpu_sec": round(w2_cpu, 2),
        "worker_main_thread_cpu_sec": round(w2_main, 2),
        "postgres_cpu_sec": used["postgres_cpu_s"],
        "host_cpu_busy_pct": used["host_busy_pct"],
        "stuck": stuck,
        "peak_connections": peak2,
        "logs": str(logs),
    }
    res.final = snapshot(conn)
    res.checks = checks(conn)
    conn.close()
    res.load_after = loadavg()
    return res


@dataclass
class Result:
    args: dict[str, Any]
    versions: dict[str, str]
    load_before: str
    enqueue_sec: float = 0.0
    first_run_sec: float = 0.0
    at_kill: dict[str, Any] = field(default_factory=dict)
    recovery: dict[str, Any] = field(default_factory=dict)
    final: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    load_after: str = ""


def report(res: Result, out: Console) -> None:
    """The report's section, where every session ended, and the logs."""
    show(recovery_section(res.__dict__), out)
    final = ", ".join(f"{k} {v}" for k, v in res.final["sessions"].items())
    out.print(
        f"final sessions: {final}; stuck: {res.recovery['stuck']}; logs in {res.recovery['logs']}"
    )


def main() -> None:
    p = cli.parser(__doc__)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--server-url", default=LOCAL_SERVER, help=f"{DB_NAME} is recreated there")
    p.add_argument("--database-url", help="use this (fresh) database instead")
    p.add_argument("--private-cluster", action="store_true", help="a throwaway Postgres (initdb)")
    p.add_argument("--max-connections", type=int, default=200, help="the private cluster's")
    cli.options(p, sessions=1000, turns=3, kill_at=0.8, queue_polling_interval=0.2)
    p.add_argument("--worker-concurrency", type=int, default=0, help="0: unlimited")
    p.add_argument("--timeout", type=float, default=300.0, help="per phase; then 'stuck'")
    p.add_argument("--quick", action="store_true", help="smoke run: 100 sessions")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = p.parse_args()
    if args.worker:
        worker_main()
        return
    if args.quick:
        args.sessions = min(args.sessions, 100)
    out = Console(stderr=args.json, width=120)
    res = run(args, out)
    report(res, out)
    if args.json:
        cli.print_json(res.__dict__, default=str)


if __name__ == "__main__":
    main()
