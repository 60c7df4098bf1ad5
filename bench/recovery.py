"""Crash recovery at scale: SIGKILL a worker with 1,000 sessions in flight, restart it.

The goal (performance issue): "SIGKILL a worker with 1,000 sessions in flight; after
restart all finish within 20 s, with 0 duplicate effects."

The parent enqueues N sessions before any worker runs (so all are dequeued together);
worker 1 (``recovery.py --worker``: the real ``serve_forever`` loop, executor id and
application version pinned) runs the agent ``recovery``, ``--turns`` side-effecting tool
turns and an answer, each tool inserting an effect row as an external provider would. The
parent SIGKILLs worker 1 once ``--kill-at`` of the sessions have an effect, then spawns
worker 2 with the same executor id (DBOS re-enqueues the PENDING workflows at launch) and
times spawn -> imports -> launch -> all sessions terminal, with the CPU of the worker, the
Postgres backends and the host. Then the checks: duplicate effects (must be 0), effects
whose call ended in a ``tool-durability-error``, completed calls without an effect, and
sessions not completed or stuck. Each step and the findings: docs/bench-notes/recovery.md.

``--profile PATH`` attaches ``py-spy record`` to worker 2 (``--profile-gil``: the GIL holder
only) and prints the shares per thread, per function handed to an executor thread, and per
function. When nothing progresses for 15 s, ``pg_stat_activity`` and a ``py-spy dump`` of the
worker go to ``stall-*.txt`` in the log directory.

    python bench/recovery.py [--sessions 1000] [--turns 3] [--kill-at 0.8] [--quick]
        [--private-cluster [--max-connections 200]] [--worker-concurrency N]
        [--timeout 300] [--profile /tmp/rec.txt [--profile-gil]] [--json]

``--quick`` is a smoke run (100 sessions, under a minute). ``--json`` moves the report to
stderr and prints one JSON object on stdout. By default the database
``dbos_agents_bench_recovery`` is recreated on ``--server-url`` (the local server at
127.0.0.1:5432). A worker with unlimited concurrency holds ~60 connections, so on a shared
server with ``max_connections = 100`` use ``--private-cluster``: a throwaway ``initdb``
cluster of its own (fsync on), removed at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from _lib import cli, pyspy
from _lib.child import Child
from _lib.db import LOCAL_SERVER, database_url
from _lib.procfs import backend_cpu_seconds, cpu_seconds_or_nan, host_cpu, loadavg
from recovery_db import (
    TERMINAL,
    Stall,
    checks,
    private_cluster,
    progress,
    setup,
    snapshot,
    stall_report,
    start_sessions,
)
from recovery_report import Result, report
from recovery_worker import worker_main
from rich.console import Console

EXECUTOR_ID = "bench-recovery-worker"
APP_VERSION = "bench-recovery-1"
DB_NAME = "dbos_agents_bench_recovery"
POLL_SEC = 0.1
STALL_SEC = 15.0  # no session finished for this long: py-spy dump the worker


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
        return cpu_seconds_or_nan(f"/proc/{self.pid}/stat"), cpu_seconds_or_nan(
            f"/proc/{self.pid}/task/{self.pid}/stat"
        )


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
            if w1.proc.poll() is not None:
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
    host0, pg0 = host_cpu(), backend_cpu_seconds(DB_NAME)
    w2 = Worker(url, args.turns, logs / "worker-2.log", env)
    prof = None
    deadline = time.monotonic() + args.timeout
    stuck = False
    cpu_series: list[tuple[float, float, float, int]] = []
    peak2 = 0
    stall = Stall(STALL_SEC)
    try:
        if args.profile:
            flags = ["--threads", *(["--gil"] if args.profile_gil else [])]
            prof = pyspy.record(w2.pid, args.profile, *flags, stderr=subprocess.PIPE)
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
            if w2.proc.poll() is not None:
                raise RuntimeError(f"worker 2 exited; log {w2.log_path}")
            if time.monotonic() > deadline:
                stuck = True
                break
            time.sleep(POLL_SEC)
        t_seen = time.time()
        w2_cpu, w2_main = w2.cpu()
        host1, pg1 = host_cpu(), backend_cpu_seconds(DB_NAME)
        if prof is not None:
            pyspy.stop(prof)
    finally:
        if prof is not None:
            pyspy.stop(prof)
        w2.drain()
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
            res.profile = pyspy.summarize(args.profile)
            res.profile["mode"] = (
                "--gil: GIL holder only" if args.profile_gil else "wall, all threads"
            )
        except OSError as exc:
            err = prof.stderr.read().decode() if prof.stderr else ""
            res.profile = {"error": f"{exc}; py-spy: {err[-500:]}"}
    return res


def main() -> None:
    p = cli.parser(__doc__)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--server-url", default=LOCAL_SERVER, help=f"server on which {DB_NAME} is recreated"
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
    cli.options(p, sessions=1000)
    p.add_argument("--turns", type=int, default=3, help="tool-calling turns per session")
    p.add_argument(
        "--kill-at", type=float, default=0.8, help="SIGKILL when this share has an effect"
    )
    cli.options(p, queue_polling_interval=0.2)
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
        cli.print_json(res.__dict__, default=str)


if __name__ == "__main__":
    main()
