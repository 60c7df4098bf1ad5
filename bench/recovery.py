"""Crash recovery at scale: SIGKILL a worker with 1,000 sessions in flight, restart it.

The goal measured (performance issue): "SIGKILL a worker with 1,000 sessions in flight;
after restart all finish within 20 s, with 0 duplicate effects."

What runs:

1. The parent recreates its own database (``dbos_agents_bench_recovery``), creates the
   effects table ``bench_recovery_effects`` (one row per side effect, keyed by the
   runtime-made idempotency key, **no** unique constraint, so a duplicate shows up as a
   second row) and enqueues N sessions through ``AgentClient`` (8 threads) before any worker
   runs, so all N are dequeued together.
2. Worker 1 (``python bench/recovery.py --worker``, a real subprocess running
   ``dbos_agents.worker.serve_forever``, executor id and application version pinned) runs
   agent ``recovery``: ``--turns`` turns (default 3), each calling one side-effecting server
   tool (``charge``, ``send_email``, ``ship``, in turn), then a final answer, from a
   ``ScriptedModel``. Each tool inserts its effect row (autocommit, its own connection, as
   an external provider would) and returns.
3. The parent polls one aggregate query every 0.1 s and SIGKILLs worker 1 as soon as
   ``--kill-at`` (default 0.8) of the sessions have at least one effect (or, as a safety,
   when 10 % have finished). The state at the kill (session statuses, DBOS workflow
   statuses, effects so far, sessions by number of effects) is recorded after the process
   is gone.
4. Worker 2 is spawned with the same executor id: DBOS re-enqueues the PENDING workflows at
   launch and the agent queue runs them again from their checkpoints. Measured:
   spawn -> imports done -> ``runtime.launch()`` returned ("ready" line) -> all sessions
   terminal (``max(sessions.updated_at)``, the recording transaction's clock, read after the
   fact); sessions/s over the recovery; worker 2 CPU seconds (all threads, and the main
   thread = the event loop) from ``/proc``, host CPU busy %, the CPU of the Postgres
   backends serving the bench database, peak connections, the load average (other
   benchmarks on the host inflate every wall-clock figure: compare CPU seconds).
5. Checks: duplicate effects (rows beyond the first per idempotency key; must be 0),
   effects whose call ended with a ``tool-durability-error`` (the kill landed between the
   handler's insert and the result row), completed ledger rows without an effect (must be
   0), sessions not ``completed`` (status breakdown) and sessions still not terminal after
   ``--timeout`` (stuck).

``--profile PATH`` attaches ``py-spy record`` (raw collapsed stacks, 100 Hz; with
``--profile-gil`` only the GIL holder is sampled, which is what limits a GIL-bound worker) to
worker 2 from its spawn until all sessions are terminal, and prints the shares per thread,
per function handed to an executor thread, and per function (inclusive and self). When no
session finishes and no effect lands for 15 s, the parent writes ``pg_stat_activity`` and a
``py-spy dump`` of the worker to ``stall-*.txt`` in the log directory.

    python bench/recovery.py [--sessions 1000] [--turns 3] [--kill-at 0.8] [--quick]
        [--private-cluster [--max-connections 200]] [--worker-concurrency N]
        [--timeout 300] [--profile /tmp/rec.txt [--profile-gil]] [--json]

``--quick`` is a smoke run (100 sessions, under a minute). ``--json`` moves the report to
stderr and prints one JSON object on stdout. By default the database
``dbos_agents_bench_recovery`` is recreated on ``--server-url`` (the local server at
127.0.0.1:5432). A worker with unlimited concurrency holds ~60 connections, so on a shared
server with ``max_connections = 100`` use ``--private-cluster``: a throwaway ``initdb``
cluster of its own (fsync on), removed at the end. Findings: docs/bench-notes/recovery.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import psycopg
from rich.console import Console
from rich.table import Table

from dbos_agents import Agent, AgentRuntime, ModelResponse, ToolContext, tool
from dbos_agents.client import AgentClient
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from dbos_agents.testing import PrivateCluster, create_fresh_database
from dbos_agents.worker import serve_forever

AGENT = "recovery"
TOOLS = ("charge", "send_email", "ship")
EFFECTS = "bench_recovery_effects"
EXECUTOR_ID = "bench-recovery-worker"
APP_VERSION = "bench-recovery-1"
DB_NAME = "dbos_agents_bench_recovery"
TERMINAL = ("completed", "max_turns", "budget_exhausted", "failed", "interrupted")
TERMINAL_SQL = "(" + ",".join(f"'{s}'" for s in TERMINAL) + ")"
POLL_SEC = 0.1
START_THREADS = 8
STALL_SEC = 15.0  # no session finished for this long: py-spy dump the worker
EFFECT_POOL_SIZE = 4
GOAL_SEC = 20.0
CLK_TCK = os.sysconf("SC_CLK_TCK")

# ------------------------------------------------------------------------------ the worker


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


# ------------------------------------------------------------------------------ the parent


class Worker:
    """A worker subprocess; a reader thread timestamps its stdout lines."""

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
        self.popen = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker"],
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=env,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            now = time.time()
            self.log.write(line)
            if line.startswith("imported "):
                self.events["imported"] = float(line.split()[1])
            elif line.startswith("dbos-agents worker ready"):
                self.events["ready"] = now

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while "ready" not in self.events:
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start; log {self.log_path}")
            time.sleep(0.01)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
        self.wait(10)

    def stop(self) -> None:
        """SIGTERM (drain), SIGKILL after 30 s."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.popen.send_signal(signal.SIGKILL)
        self.wait(10)

    def wait(self, timeout: float) -> None:
        self.popen.wait(timeout=timeout)
        self._reader.join(timeout=5)
        self.log.close()

    def cpu(self) -> tuple[float, float]:
        """(all threads, main thread) CPU seconds so far."""
        return _proc_cpu(f"/proc/{self.pid}/stat"), _proc_cpu(
            f"/proc/{self.pid}/task/{self.pid}/stat"
        )


def _proc_cpu(path: str) -> float:
    try:
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def postgres_cpu() -> float:
    """CPU seconds of the live Postgres backends serving the bench database (their process
    title names it; backends that exit in between, and the server's own background
    processes, are not counted)."""
    total = 0.0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            title = Path(f"/proc/{d}/cmdline").read_bytes()
        except OSError:
            continue
        if title.startswith(b"postgres:") and f" {DB_NAME} ".encode() in title:
            total += _proc_cpu(f"/proc/{d}/stat")
    return total


def host_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the host, from /proc/stat."""
    parts = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = parts[3] + parts[4]
    return sum(parts) - idle, sum(parts)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def setup(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {EFFECTS} (id bigserial PRIMARY KEY, idempotency_key text NOT NULL,"
            " session_id text NOT NULL, tool_call_id text NOT NULL, tool text NOT NULL,"
            " pid integer NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())"
        )


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


def start_sessions(url: str, n: int) -> float:
    """Enqueue n sessions from START_THREADS threads; returns the seconds it took."""
    t0 = time.perf_counter()
    with AgentClient(url) as client, ThreadPoolExecutor(START_THREADS) as pool:
        list(pool.map(lambda i: client.start(AGENT, f"order {i}"), range(n)))
    return time.perf_counter() - t0


class Profiler:
    """py-spy record (raw collapsed stacks) attached to a pid, stopped with SIGINT."""

    def __init__(self, pid: int, path: str, gil: bool) -> None:
        spy = Path(sys.executable).with_name("py-spy")
        cmd = [str(spy), "record", "--pid", str(pid), "--rate", "100", "--format", "raw"]
        cmd += ["--threads", "--nonblocking", "-o", path] + (["--gil"] if gil else [])
        self.path = path
        self.popen = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGINT)
        try:
            self.popen.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.popen.kill()


_FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def _frame_name(frame: str) -> str:
    m = _FRAME.match(frame)
    if not m:
        return frame
    return f"{m['fn']} ({m['file'].split('site-packages/')[-1].split('/work/main/')[-1]})"


def summarize_profile(path: str, top: int = 30) -> dict[str, Any]:
    """Shares of py-spy's raw samples: per thread group (thread names without their
    numbers), per function handed to an executor thread (the frame under
    ``_WorkItem.run``: what the event loop pushed off to threads), and per function,
    inclusive and self."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    offloaded: Counter[str] = Counter()
    total = 0
    for line in Path(path).read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_s)
        frames = stack.split(";")
        head = 1 if frames[0].startswith("thread") else 0
        thread = frames[0].split(": ", 1)[-1] if head else "?"
        names = [_frame_name(f) for f in frames[head:]]
        total += count
        group = re.sub(r"[_-]*\d+$", "", thread)
        if group in ("?", "thread") or not group:
            group = next(
                (
                    n
                    for n in names
                    if not n.startswith(("Thread.", "_bootstrap", "<module>", "run (threading"))
                ),
                "?",
            )
        threads[group] += count
        for i, name in enumerate(names[:-1]):
            if name.startswith("_WorkItem.run "):
                offloaded[names[i + 1]] += count
                break
        for name in set(names):
            inclusive[name] += count
        if names:
            own[names[-1]] += count

    def shares(c: Counter[str]) -> list[tuple[str, int, float]]:
        return [(f, n, n / total) for f, n in c.most_common(top)] if total else []

    return {
        "samples": total,
        "threads": shares(threads),
        "offloaded": shares(offloaded),
        "inclusive": shares(inclusive),
        "self": shares(own),
    }


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
    profile: dict[str, Any] | None = None
    load_after: str = ""


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
    py_spy_dump(pid, path)
    path.write_text(f"{activity(conn)}\n\n{path.read_text()}")
    return path


def py_spy_dump(pid: int, path: Path) -> Path:
    spy = Path(sys.executable).with_name("py-spy")
    out = subprocess.run(
        [str(spy), "dump", "--pid", str(pid), "--locals"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    path.write_text(out.stdout + out.stderr)
    return path


def run(args: argparse.Namespace, out: Console) -> Result:
    cluster = None
    try:
        if args.private_cluster:
            cluster, server = private_cluster(args.max_connections)
        else:
            server = args.server_url
        url = args.database_url or create_fresh_database(server, DB_NAME)
        return _run(args, out, url)
    finally:
        if cluster is not None:
            cluster.close()


def _run(args: argparse.Namespace, out: Console, url: str) -> Result:
    n = args.sessions
    res = Result(
        args={k: v for k, v in vars(args).items() if k != "worker"},
        versions={
            "python": platform.python_version(),
            "dbos": version("dbos"),
            "dbos-agents": version("dbos-agents"),
            "sqlalchemy": version("sqlalchemy"),
            "nproc": str(os.cpu_count()),
        },
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
    dumps: list[str] = []
    stall = Stall(STALL_SEC)
    try:
        while True:
            p = progress(conn)
            peak1 = max(peak1, p.connections)
            if stall.stalled((p.terminal, p.effects)) and len(dumps) < 2:
                dumps.append(str(stall_report(w1.pid, conn, logs / f"stall-1-{len(dumps)}.txt")))
                out.print(f"worker 1: no progress for {STALL_SEC:.0f}s; py-spy dump {dumps[-1]}")
            if p.with_effect >= args.kill_at * n or p.terminal >= 0.1 * n:
                break
            if w1.popen.poll() is not None:
                raise RuntimeError(f"worker 1 exited early; log {w1.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker 1 made no progress; log {w1.log_path}; dumps {dumps}")
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
    host0, pg0 = host_cpu(), postgres_cpu()
    w2 = Worker(url, args.turns, logs / "worker-2.log", env)
    prof = Profiler(w2.pid, args.profile, args.profile_gil) if args.profile else None
    deadline = time.monotonic() + args.timeout
    stuck = False
    cpu_series: list[tuple[float, float, float, int]] = []
    peak2 = 0
    stall = Stall(STALL_SEC)
    try:
        while True:
            p = progress(conn)
            peak2 = max(peak2, p.connections)
            cpu_all, cpu_main = w2.cpu()
            cpu_series.append((round(time.time() - w2.t_spawn, 2), cpu_all, cpu_main, p.terminal))
            if p.terminal >= n:
                break
            if stall.stalled((p.terminal, p.effects)) and len(dumps) < 4:
                dumps.append(str(stall_report(w2.pid, conn, logs / f"stall-2-{len(dumps)}.txt")))
                out.print(f"worker 2: no progress for {STALL_SEC:.0f}s; py-spy dump {dumps[-1]}")
            if w2.popen.poll() is not None:
                raise RuntimeError(f"worker 2 exited; log {w2.log_path}")
            if time.monotonic() > deadline:
                stuck = True
                break
            time.sleep(POLL_SEC)
        t_seen = time.time()
        w2_cpu, w2_main = w2.cpu()
        host1, pg1 = host_cpu(), postgres_cpu()
        if prof is not None:
            prof.stop()
    finally:
        if prof is not None:
            prof.stop()
        w2.stop()
    t_done = t_seen if stuck else (p.last_update or t_seen)
    ready = w2.events.get("ready", float("nan"))
    imported = w2.events.get("imported", float("nan"))
    remaining = n - done_at_kill
    busy = (host1[0] - host0[0]) / max(1, host1[1] - host0[1])
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
        "postgres_cpu_sec": round(pg1 - pg0, 2),
        "host_cpu_busy_pct": round(100 * busy, 1),
        "stuck": stuck,
        "stall_dumps": dumps,
        "peak_connections": peak2,
        "cpu_series": [
            (t, round(a, 2), round(m, 2), done) for t, a, m, done in cpu_series[:: max(1, 5)]
        ],
        "logs": str(logs),
    }
    res.final = snapshot(conn)
    res.checks = checks(conn)
    conn.close()
    res.load_after = loadavg()
    if prof is not None:
        try:
            res.profile = summarize_profile(args.profile)
            res.profile["mode"] = (
                "--gil: GIL holder only" if args.profile_gil else "wall, all threads"
            )
        except OSError as exc:
            err = prof.popen.stderr.read().decode() if prof.popen.stderr else ""
            res.profile = {"error": f"{exc}; py-spy: {err[-500:]}"}
    return res


def report(res: Result, out: Console) -> None:
    n = res.args["sessions"]
    rec, chk, kill, fin = res.recovery, res.checks, res.at_kill, res.final
    done_at_kill = sum(v for k, v in kill["sessions"].items() if k in TERMINAL)
    completed = fin["sessions"].get("completed", 0)
    not_terminal = sum(v for k, v in fin["sessions"].items() if k not in TERMINAL)
    conc = res.args["worker_concurrency"] or "unlimited"
    t = Table(
        title=f"SIGKILL with {n} sessions in flight, restart, recover"
        f" ({res.args['turns']} tool turns + answer per session, worker concurrency {conc})"
    )
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_row("worker 1: spawn -> SIGKILL", f"{res.first_run_sec:.1f} s")
    t.add_row("at kill: finished / in flight", f"{done_at_kill} / {n - done_at_kill}")
    t.add_row("at kill: sessions", _fmt(kill["sessions"]))
    t.add_row("at kill: DBOS workflows", _fmt(kill["workflows"]))
    t.add_row("at kill: sessions by effects done", _fmt(kill["sessions_by_effects"]))
    t.add_row("at kill: effects recorded", str(kill["effects"]))
    t.add_row(
        "peak connections to the bench db (worker 1 / 2)",
        f"{kill['peak_connections']} / {rec['peak_connections']}",
    )
    t.add_row("worker 2: spawn -> imports done", f"{rec['spawn_to_imported_sec']:.2f} s")
    t.add_row("worker 2: imports -> launch() returned", f"{rec['imported_to_ready_sec']:.2f} s")
    over = ">" if rec["stuck"] else ""
    t.add_row(
        "[bold]restart (spawn) -> all finished[/]",
        f"[bold]{over}{rec['spawn_to_all_done_sec']:.2f} s[/] (goal {GOAL_SEC:.0f} s)",
    )
    t.add_row("DBOS launch -> all finished", f"{over}{rec['ready_to_all_done_sec']:.2f} s")
    t.add_row(
        "throughput (recovered sessions / s)",
        f"{rec['sessions_per_sec']:.1f} from spawn, {rec['sessions_per_sec_after_ready']:.1f}"
        " from launch",
    )
    t.add_row(
        "worker 2 CPU (all threads / event loop thread)",
        f"{rec['worker_cpu_sec']:.1f} s / {rec['worker_main_thread_cpu_sec']:.1f} s",
    )
    t.add_row("postgres backends CPU over the recovery", f"{rec['postgres_cpu_sec']:.1f} s")
    t.add_row("host CPU busy over the recovery", f"{rec['host_cpu_busy_pct']:.0f} %")
    t.add_row("[bold]duplicate effects[/]", f"[bold]{chk['duplicate_effects']}[/]")
    t.add_row(
        "durability errors (with effect)",
        f"{chk['durability_errors']} ({chk['durability_errors_with_effect']})",
    )
    t.add_row("completed calls without an effect", str(chk["completed_calls_without_effect"]))
    t.add_row("effects by worker pid", _fmt(chk["effects_by_pid"]))
    t.add_row("final sessions", _fmt(fin["sessions"]))
    t.add_row("final DBOS workflows", _fmt(fin["workflows"]))
    t.add_row(
        "failed / stuck sessions",
        f"{n - completed - not_terminal} / {not_terminal}" + (" (timeout)" if rec["stuck"] else ""),
    )
    t.add_row("load average before / after", f"{res.load_before} / {res.load_after}")
    out.print(t)
    if res.profile and "error" not in res.profile:
        titles = {
            "threads": "by thread",
            "offloaded": "by function run on an executor thread",
            "inclusive": "inclusive, by function",
            "self": "self, by function",
        }
        for kind, title in titles.items():
            pt = Table(
                title=f"py-spy on worker 2 ({res.profile['mode']}), {title},"
                f" share of {res.profile['samples']} samples"
            )
            pt.add_column("function (file)")
            pt.add_column("samples", justify="right")
            pt.add_column("share", justify="right")
            for name, c, share in res.profile[kind][
                : 12 if kind in ("threads", "offloaded") else 25
            ]:
                pt.add_row(name, str(c), f"{100 * share:.1f} %")
            out.print(pt)
    elif res.profile:
        out.print(f"profile: {res.profile['error']}")
    for dump in rec["stall_dumps"]:
        out.print(f"stalled recovery, py-spy dump: {dump}")
    ok = (
        chk["duplicate_effects"] == 0
        and completed == n
        and rec["spawn_to_all_done_sec"] <= GOAL_SEC
    )
    out.print(
        f"goal (all finish within {GOAL_SEC:.0f} s of restart, 0 duplicates):"
        f" {'MET' if ok else 'NOT MET'}; logs in {rec['logs']}"
    )


def _fmt(d: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in d.items()) or "-"


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--server-url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help=f"server on which {DB_NAME} is recreated",
    )
    p.add_argument("--database-url", default=None, help="use this (fresh) database instead")
    p.add_argument(
        "--private-cluster",
        action="store_true",
        help="run on a throwaway Postgres of our own (initdb, fsync on)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=200,
        help="the private cluster's max_connections (below ~60 the worker runs out)",
    )
    p.add_argument("--sessions", type=int, default=1000)
    p.add_argument("--turns", type=int, default=3, help="tool-calling turns per session")
    p.add_argument(
        "--kill-at", type=float, default=0.8, help="SIGKILL when this share has an effect"
    )
    p.add_argument("--queue-polling-interval", type=float, default=0.2)
    p.add_argument(
        "--worker-concurrency", type=int, default=0, help="sessions per worker (0: unlimited)"
    )
    p.add_argument("--timeout", type=float, default=300.0, help="per phase; then 'stuck'")
    p.add_argument("--profile", default=None, help="py-spy raw output path for worker 2")
    p.add_argument("--profile-gil", action="store_true", help="py-spy --gil (GIL holders only)")
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
        print(json.dumps(res.__dict__, default=str), flush=True)


if __name__ == "__main__":
    main()
