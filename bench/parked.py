"""Many parked sessions in one worker: memory, threads, connections, latency and burst drain.

A worker should hold many sessions waiting on client tools cheaply and resume them quickly
(the performance issue's goals: <= 20 KB RSS per waiting session, <= 64 threads, submit ->
resume p50 <= 20 ms and p99 <= 100 ms, a burst drained at >= 60 sessions/s on 2 cores).
The worker is a process of its own (``--worker``), read from ``/proc``; this process plays
the API server. What each figure is and the findings: docs/bench-notes/parked.md.

    python bench/parked.py [--sessions 10000] [--burst 1000] [--samples 300] [--warmup 5]
        [--start-wave 0] [--submit-threads 8] [--idle 10] [--quick] [--json]
        [--park-after 30|never] [--db-pool-size N] [--db-max-overflow N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from _lib import cli
from _lib.asker import AGENT, asker_runtime, asker_settings
from _lib.child import Child, hold
from _lib.db import connect_retrying, database_url, rows, scalar
from _lib.procfs import (
    cpu_seconds,
    host_busy_pct,
    host_cpu,
    loadavg,
    pg_ports,
    postgres_cpu_seconds,
    proc_status,
    raise_nofile,
)
from _lib.render import parked_section, rich_table, show
from _lib.stats import pct_or_nan
from _lib.timing import finish_times, timed_submit, tool_message_times, wait_pending_armed
from rich.console import Console

from dbos_agents import Settings
from dbos_agents.client import AgentClient

GOALS = {"rss_kb": 20.0, "threads": 64, "p50_ms": 20.0, "p99_ms": 100.0, "drain_per_s": 60.0}
WARM_SKIP = 100
"""The p50 after the first ``WARM_SKIP`` samples is printed too: by then psycopg has
prepared the resume's statements on each pooled connection."""
SETTLE_SEC = 0.1
"""A sample sleeps this long before its first poll: a poll competes with the resume it
times for the two cores, and the time comes from the row, not from the poll."""
POLL_SEC = 1.0
"""How often the burst's completion is read (the finish times come from DBOS's rows;
reading often cost Postgres more than the resumes at 100,000 parked)."""

console = Console(width=150)


# ---------------------------------------------------------------------------- reads


@dataclass
class Proc:
    """The worker process at one moment."""

    label: str
    rss_mb: float
    threads: int
    cpu_s: float
    pg_conns: int

    @classmethod
    def take(cls, label: str, pid: int) -> Proc:
        st = proc_status(pid)
        return cls(label, st["VmRSS"] / 1024, st["Threads"], cpu_seconds(pid), len(pg_ports(pid)))


def wal_written(engine: sa.Engine) -> tuple[float, int]:
    """The server's WAL bytes and full-page images so far (``pg_stat_wal``, cluster-wide)."""
    (row,) = rows(engine, "SELECT wal_bytes, wal_fpi FROM pg_stat_wal", connect_retrying)
    return float(row.wal_bytes), int(row.wal_fpi)


def pg_connections(engine: sa.Engine, pid: int) -> dict[str, int]:
    """The worker's backends, by application_name and state."""
    sql = (
        "SELECT application_name, coalesce(state, '?') AS state, count(*) AS n"
        " FROM pg_stat_activity WHERE datname = current_database()"
        " AND client_port = ANY(:p) GROUP BY 1, 2 ORDER BY 1, 2"
    )
    return {
        f"{r.application_name or '(none)'} [{r.state}]": int(r.n)
        for r in rows(engine, sql, connect_retrying, p=sorted(pg_ports(pid)))
    }


_WAITING_ARMED = (
    " FROM dbos_agents.pending_calls p WHERE p.status = 'waiting'"
    " AND EXISTS (SELECT 1 FROM dbos.operation_outputs o"
    "   WHERE o.workflow_uuid = p.owner_workflow_id AND o.function_name = 'DBOS.sleep')"
)
"""Waiting calls whose workflow is armed in ``recv``."""


def armed_count(engine: sa.Engine) -> int:
    return int(scalar(engine, "SELECT count(*)" + _WAITING_ARMED, connect_retrying))


def open_calls(engine: sa.Engine) -> list[tuple[str, str]]:
    """(root session id, tool call id) of every waiting call whose workflow is armed."""
    sql = "SELECT p.root_session_id, p.tool_call_id" + _WAITING_ARMED
    return [(r.root_session_id, r.tool_call_id) for r in rows(engine, sql, connect_retrying)]


# ---------------------------------------------------------------------------- phases


def wait_finished(client: AgentClient, wf: str, timeout: float = 60.0) -> float:
    """Sleep ``SETTLE_SEC``, then poll every 5 ms until the run ``wf`` finished (epoch ms)."""
    time.sleep(SETTLE_SEC)
    deadline = time.monotonic() + timeout
    while (fin := finish_times(client.engine, [wf], connect_retrying)[wf][1]) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{wf} did not finish within {timeout:.0f}s")
        time.sleep(0.005)
    return fin


def answered_at_once(client: AgentClient, n: int, label: str) -> list[float]:
    """Submit -> run finished (ms) of n fresh sessions, each answered once armed: the
    warm-up, and with parking on the fresh waits still in memory (a browser tool's case)."""
    out: list[float] = []
    for i in range(n):
        sid = client.start(AGENT, f"{label} {i}")
        call = wait_pending_armed(client, sid, sid)
        t0 = timed_submit(client, sid, call.tool_call_id)[0]
        out.append(wait_finished(client, sid) - t0 * 1000)
    return out


def park(client: AgentClient, pid: int, n: int, wave: int, threads: int) -> dict[str, Any]:
    """Start n sessions (in waves of ``wave``, each armed before the next; 0: all at once)."""
    engine = client.engine
    base = armed = armed_count(engine)
    cpu0, t_first, last_progress = cpu_seconds(pid), time.time(), time.monotonic()
    seen_threads: list[int] = []
    seen_conns: list[int] = [0]
    failed = 0
    with ThreadPoolExecutor(threads, thread_name_prefix="bench-start") as pool:
        for lo in range(0, n, wave or n):
            hi = min(n, lo + (wave or n))
            list(pool.map(lambda i: client.start(AGENT, f"parked {i}"), range(lo, hi)))
            while True:
                time.sleep(0.5)
                seen_threads.append(proc_status(pid)["Threads"])
                seen_conns.append(len(pg_ports(pid)))
                if (now := armed_count(engine)) != armed:
                    armed, last_progress = now, time.monotonic()
                if armed >= base + hi:
                    break
                sql = "SELECT status, count(*) AS n FROM dbos.workflow_status GROUP BY 1"
                st = {r.status: int(r.n) for r in rows(engine, sql, connect_retrying)}
                failed = sum(
                    v for k, v in st.items() if k not in ("PENDING", "ENQUEUED", "SUCCESS")
                )
                if armed + failed >= base + hi or time.monotonic() - last_progress > 120:
                    break
                if int(time.monotonic()) % 10 == 0:
                    console.log(f"park: {armed - base}/{n} armed, threads {seen_threads[-1]}")
    sql = (
        "SELECT max(coalesce(completed_at_epoch_ms, started_at_epoch_ms))"
        " FROM dbos.operation_outputs WHERE function_name = 'DBOS.sleep'"
    )
    last = scalar(engine, sql, connect_retrying)
    park_s = (float(last) / 1000 if last is not None else time.time()) - t_first
    return {
        "park_s": park_s,
        "park_worker_cpu_s": cpu_seconds(pid) - cpu0,
        "parked": armed - base,
        "failed_before_park": failed,
        "threads": seen_threads,
        "max_conns": max(seen_conns),
    }


def idle_cpu_pct(pid: int, seconds: float) -> tuple[float, float]:
    """(wall s, the worker's CPU % of one core) over ``seconds`` of doing nothing."""
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - t0
    return wall, (cpu_seconds(pid) - c0) / wall * 100


def sequential(client: AgentClient, samples: list[tuple[str, str]]) -> dict[str, Any]:
    """Submit -> run finished and -> tool message recorded (ms), one session at a time,
    and the WAL KB and full-page images written per resume."""
    t0s: dict[str, float] = {}
    wal0 = wal_written(client.engine)
    for sid, tcid in samples:
        t0s[sid] = timed_submit(client, sid, tcid)[0]
        wait_finished(client, sid)
    wal1 = wal_written(client.engine)
    fins = finish_times(client.engine, list(t0s), connect_retrying)
    tools = tool_message_times(client.engine, list(t0s), connect_retrying)
    n = max(1, len(samples))
    return {
        "lat": [fin - t0s[s] * 1000 for s in t0s if (fin := fins[s][1]) is not None],
        "tool_lat": [tools[s] - t0s[s] * 1000 for s in t0s if s in tools],
        "wal_kb_per_resume": (wal1[0] - wal0[0]) / 1024 / n,
        "fpi_per_resume": (wal1[1] - wal0[1]) / n,
    }


@dataclass
class Burst:
    t_burst: float = 0.0  # epoch s of the first submit
    submits_end: float = 0.0  # epoch s when every submit had returned
    submitted: dict[str, float] = field(default_factory=dict)  # session -> t0 (epoch s)
    errors: Counter[str] = field(default_factory=Counter)
    done: dict[str, float] = field(default_factory=dict)  # session -> finished (epoch ms)
    bad: dict[str, str] = field(default_factory=dict)  # session -> DBOS status
    max_threads: int = 0
    max_conns: int = 0

    def figures(self, k: int, cpu: tuple[float, float, float], wal: tuple[float, float],
                host_pct: float) -> dict[str, Any]:  # fmt: skip
        """The burst's figures, per resumed turn over the runs that finished."""
        n = max(1, len(self.done))
        lat = [self.done[s] - self.submitted[s] * 1000 for s in self.done if s in self.submitted]
        drain = (max(self.done.values()) / 1000 - self.t_burst) if self.done else float("nan")
        return {
            "burst": k,
            "burst_done": len(self.done),
            "burst_failed": len(self.bad) + sum(self.errors.values()),
            "drain_s": drain,
            "drain_per_s": len(self.done) / drain if self.done and drain > 0 else float("nan"),
            "submits_s": self.submits_end - self.t_burst,
            "cpu_ms_per_turn": cpu[0] * 1000 / n,
            "pg_cpu_ms_per_turn": cpu[1] * 1000 / n,
            "bench_cpu_ms_per_turn": cpu[2] * 1000 / n,
            "burst_wal_kb_per_turn": wal[0] / 1024 / n,
            "burst_fpi_per_turn": wal[1] / n,
            "burst_host_busy_pct": host_pct,
            "burst_p50_ms": pct_or_nan(lat, 50),
            "burst_p99_ms": pct_or_nan(lat, 99),
            "burst_latency_ms": lat,
        }


def burst(client: AgentClient, pid: int, calls: list[tuple[str, str]], threads: int) -> tuple[Burst, dict[str, Any]]:  # fmt: skip
    """Submit to every call at once from ``threads`` threads and wait until the runs
    finished; the worker's threads and connections sampled every 100 ms."""
    engine = client.engine
    cpu0, host0 = cpu_seconds(pid), host_cpu()
    pg_cpu0, self_cpu0, wal0 = postgres_cpu_seconds(), time.process_time(), wal_written(engine)
    b = Burst()

    def submit_one(pair: tuple[str, str]) -> None:
        try:
            b.submitted[pair[0]] = timed_submit(client, *pair)[0]
        except Exception as exc:
            b.errors[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1

    pool = ThreadPoolExecutor(threads, thread_name_prefix="bench-submit")
    b.t_burst = time.time()
    futures = [pool.submit(submit_one, pair) for pair in calls]
    left = {sid for sid, _ in calls}
    deadline = time.monotonic() + max(300, len(calls) * 0.5)
    submits_end: float | None = None
    next_poll = 0.0
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        b.max_threads = max(b.max_threads, proc_status(pid)["Threads"])
        b.max_conns = max(b.max_conns, len(pg_ports(pid)))
        if submits_end is None and all(f.done() for f in futures):
            submits_end = time.time()
        if time.monotonic() < next_poll:
            continue
        next_poll = time.monotonic() + POLL_SEC
        for wf, (status, fin) in finish_times(engine, list(left), connect_retrying).items():
            if fin is not None and status == "SUCCESS":
                b.done[wf] = fin
            elif fin is not None:
                b.bad[wf] = status
        left -= set(b.done) | set(b.bad)
        if submits_end is not None:
            left &= set(b.submitted)
    cpu = (
        cpu_seconds(pid) - cpu0,
        postgres_cpu_seconds() - pg_cpu0,
        time.process_time() - self_cpu0,
    )
    wal1 = wal_written(engine)
    host_pct = host_busy_pct(host0)
    pool.shutdown(wait=True)
    b.submits_end = submits_end or time.time()
    return b, b.figures(len(calls), cpu, (wal1[0] - wal0[0], wal1[1] - wal0[1]), host_pct)


# ---------------------------------------------------------------------------- the run


async def worker(url: str, queue_poll: float | None, park_after: float | None) -> None:
    """``--worker``: one AgentRuntime; prints ``READY`` once launched, SIGTERM stops it."""
    settings = asker_settings(
        database_url=url,
        executor_id="bench-parked",
        queue_polling_interval_sec=queue_poll,
        park_after_sec=park_after,
    )
    rt = asker_runtime(settings, timedelta(hours=12))
    await rt.launch()
    await hold(rt, "READY", lambda: None, (signal.SIGTERM, signal.SIGINT))


def start_worker(args: argparse.Namespace, url: str) -> Child:
    pool = (("db_pool_size", args.db_pool_size), ("db_max_overflow", args.db_max_overflow))
    env = dict(
        os.environ,
        PGAPPNAME="bench-parked-worker",
        **{f"DBOS_AGENTS_{k.upper()}": str(v) for k, v in pool if v is not None},
    )
    cmd = [sys.executable, __file__, "--worker", "--database-url", url]
    if args.queue_poll is not None:
        cmd += ["--queue-poll", str(args.queue_poll)]
    cmd += ["--park-after", "never" if args.park_after is None else str(args.park_after)]
    w = Child(cmd, env=env)
    w.expect("READY", 120)
    return w


def run(args: argparse.Namespace, url: str) -> dict[str, Any]:
    load_before = loadavg()
    w = start_worker(args, url)
    os.environ["PGAPPNAME"] = "bench-parked-driver"
    client = AgentClient(url, settings=Settings(database_url=url, log_level="ERROR"))
    snaps = [Proc.take("just after launch (baseline)", w.pid)]
    try:
        answered_at_once(client, args.warmup, "warm-up")
        snaps.append(Proc.take(f"after {args.warmup} warm-up sessions", w.pid))
        base_idle_cpu = idle_cpu_pct(w.pid, min(args.idle, 5.0))[1]

        console.log(f"parking {args.sessions} sessions (load avg {loadavg()})")
        pk = park(client, w.pid, args.sessions, args.start_wave, args.submit_threads)
        parked = pk["parked"]
        snaps.append(Proc.take(f"{parked} waiting", w.pid))
        if args.park_after is not None:  # the last armed park after park_after_sec
            console.log(f"letting the last waits park ({args.park_after:g} s + 2 s)")
            time.sleep(args.park_after + 2.0)
            snaps.append(Proc.take(f"{parked} waiting, parked", w.pid))
        conns_by_app = pg_connections(client.engine, w.pid)
        sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        backends = int(scalar(client.engine, sql, connect_retrying))
        console.log(f"parked {parked} in {pk['park_s']:.1f}s; idling {args.idle}s")
        idle_wall, idle_cpu = idle_cpu_pct(w.pid, args.idle)
        snaps.append(Proc.take(f"{parked} parked, +{args.idle:g} s idle", w.pid))

        calls = open_calls(client.engine)
        random.Random(7).shuffle(calls)
        samples, rest = calls[: args.samples], calls[args.samples :]
        console.log(f"latency: {len(samples)} sequential submits with {len(calls)} waiting")
        seq = sequential(client, samples)
        lat = seq["lat"]
        hot: list[float] = []
        if args.park_after is not None and args.hot_samples:
            console.log(f"latency: {args.hot_samples} fresh sessions answered within park_after")
            hot = answered_at_once(client, args.hot_samples, "hot")
        snaps.append(Proc.take("after the latency samples", w.pid))

        console.log(f"burst: {len(rest[: args.burst])} submits from {args.submit_threads} threads")
        b, bf = burst(client, w.pid, rest[: args.burst], args.submit_threads)
        snaps.append(Proc.take("after the burst", w.pid))
        base, warm, parked_snap = snaps[0], snaps[1], snaps[2]
        kb_each = 1024 / max(1, parked)  # MB above a baseline -> KB per parked session
        f = {
            "sessions": args.sessions,
            "parked": parked,
            "park_after_s": args.park_after,
            "park_s": pk["park_s"],
            "park_rate": parked / pk["park_s"] if pk["park_s"] > 0 else float("nan"),
            "park_worker_cpu_s": pk["park_worker_cpu_s"],
            "baseline_rss_mb": base.rss_mb,
            "warm_rss_mb": warm.rss_mb,
            "parked_rss_mb": parked_snap.rss_mb,
            "rss_kb_per_session": (parked_snap.rss_mb - base.rss_mb) * kb_each,
            "rss_kb_per_session_after_warmup": (parked_snap.rss_mb - warm.rss_mb) * kb_each,
            "baseline_threads": base.threads,
            "parked_threads": parked_snap.threads,
            "max_threads": max([b.max_threads, *pk["threads"], *(s.threads for s in snaps)]),
            "pg_conns_parked": parked_snap.pg_conns,
            "pg_conns_max": max(b.max_conns, pk["max_conns"], *(s.pg_conns for s in snaps)),
            "pg_conns_by_app": conns_by_app,
            "db_backends_total": backends,
            "idle_s": idle_wall,
            "idle_cpu_pct": idle_cpu,
            "base_idle_cpu_pct": base_idle_cpu,
            "samples": len(lat),
            **{f"p{q}_ms": pct_or_nan(lat, q) for q in (50, 90, 99)},
            "warm_p50_ms": pct_or_nan(lat[WARM_SKIP:], 50),
            "max_ms": max(lat) if lat else float("nan"),
            **{f"tool_p{q}_ms": pct_or_nan(seq["tool_lat"], q) for q in (50, 99)},
            "hot_samples": len(hot),
            **{f"hot_p{q}_ms": pct_or_nan(hot, q) for q in (50, 99)},
            "wal_kb_per_resume": seq["wal_kb_per_resume"],
            "fpi_per_resume": seq["fpi_per_resume"],
            "failed_before_park": pk["failed_before_park"],
            "load_avg_before": load_before,
            "load_avg_after": loadavg(),
        }
        burst_lat = bf.pop("burst_latency_ms")
        f |= bf
        report(f, snaps, b)
        return {
            "figures": f,
            "snapshots": [asdict(s) for s in snaps],
            "latency_ms": lat,
            "tool_latency_ms": seq["tool_lat"],
            "hot_latency_ms": hot,
            "burst_latency_ms": burst_lat,
            "goals": GOALS,
            "submit_errors": dict(b.errors),
            "versions": cli.versions(),
        }
    finally:
        client.close()
        w.stop(60)


# ---------------------------------------------------------------------------- report


def report(f: dict[str, Any], snaps: list[Proc], b: Burst) -> None:
    """The worker over the run, the report's section, and the figures it leaves out."""
    t = rich_table(
        f"worker process over the run ({f['parked']} parked sessions)",
        ("when", "VmRSS MB", "Threads", "worker CPU s", "PG conns"),
    )
    for s in snaps:
        t.add_row(s.label, f"{s.rss_mb:.1f}", str(s.threads), f"{s.cpu_s:.2f}", str(s.pg_conns))
    console.print(t)
    show(parked_section(f), console)
    console.print(
        f"submit -> run finished p90 {f['p90_ms']:.1f} ms, max {f['max_ms']:.1f} ms, p50 after"
        f" {WARM_SKIP} {f['warm_p50_ms']:.1f} ms; fresh waits p50 / p99 {f['hot_p50_ms']:.1f} /"
        f" {f['hot_p99_ms']:.1f} ms; -> tool message p50 / p99 {f['tool_p50_ms']:.1f} /"
        f" {f['tool_p99_ms']:.1f} ms; WAL per sequential resume {f['wal_kb_per_resume']:.1f} KB"
        f" ({f['fpi_per_resume']:.1f} full pages). Burst: submits returned after"
        f" {f['submits_s']:.1f} s; Postgres / bench CPU per turn {f['pg_cpu_ms_per_turn']:.1f} /"
        f" {f['bench_cpu_ms_per_turn']:.1f} ms; WAL per turn {f['burst_wal_kb_per_turn']:.1f} KB"
        f" ({f['burst_fpi_per_turn']:.1f}); host busy {f['burst_host_busy_pct']:.0f} %;"
        f" p50 / p99 {f['burst_p50_ms']:.0f} / {f['burst_p99_ms']:.0f} ms. Connections by"
        f" application: {f['pg_conns_by_app']}. Failed: {f['failed_before_park']} before"
        f" parking, {f['burst_failed']} in the burst. Load {f['load_avg_before']} ->"
        f" {f['load_avg_after']}."
    )
    for e, c in b.errors.items():
        console.print(f"submit failed x{c}: {e}")
    if b.bad:
        console.print(f"{len(b.bad)} burst runs ended badly: {Counter(b.bad.values())}")


def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p)
    cli.options(p, sessions=10_000, burst=1000, samples=300, hot_samples=100, warmup=5)
    p.add_argument("--start-wave", type=int, default=0, help="0 = start all at once")
    cli.options(p, submit_threads=8, idle=10.0)
    p.add_argument("--queue-poll", type=float, help="worker's queue_polling_interval_sec")
    p.add_argument(
        "--park-after",
        type=lambda v: None if v == "never" else float(v),
        default=Settings.model_fields["park_after_sec"].default,
        help="worker's park_after_sec in seconds, or 'never' (default: the Settings default)",
    )
    p.add_argument("--db-pool-size", type=int, help="worker's Settings.db_pool_size")
    p.add_argument("--db-max-overflow", type=int, help="worker's Settings.db_max_overflow")
    p.add_argument("--quick", action="store_true", help="500 sessions, burst 100, 50 samples")
    p.add_argument("--json", action="store_true", help="report on stderr, one JSON object")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    raise_nofile()
    if args.worker:
        asyncio.run(worker(args.database_url, args.queue_poll, args.park_after))
        return
    if args.quick:
        args.sessions, args.burst, args.samples, args.idle = 500, 100, 50, 3.0
        args.hot_samples = min(args.hot_samples, 30)
    url = database_url(args.database_url, "dbos_agents_bench_parked")
    global console
    if args.json:
        console = Console(stderr=True, width=150)
    with cli.report_to_stderr(args.json):
        result = run(args, url)
    if args.json:
        cli.print_json(result)


if __name__ == "__main__":
    main()
