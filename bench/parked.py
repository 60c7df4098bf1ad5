"""Many parked sessions in one worker: memory, threads, connections, latency and burst drain.

A worker should hold many sessions waiting on client tools (the asker agent: turn 0 calls
``confirm``, turn 1 answers) cheaply, and resume them quickly. The goals (performance
issue): RSS above the launch baseline <= 20 KB per waiting session and <= 64 OS threads;
submit -> resume p50 <= 20 ms and p99 <= 100 ms while N sessions wait; a burst of K submits
drains at >= 60 sessions/s on 2 cores.

The worker is a separate process (this script with ``--worker``: one AgentRuntime, nothing
else), so its RSS, threads, CPU and Postgres connections are read from ``/proc`` without the
bench's own client. This process plays the API server: one ``AgentClient`` that starts
sessions and submits from a thread pool. Phases: launch and warm-up; park N; idle;
sequential submits while the others wait (and, with parking on, ``--hot-samples`` fresh
waits answered at once); a burst of ``--burst`` submits at once. What each figure is
exactly, the profiling switches and the findings: docs/bench-notes/parked.md.

    python bench/parked.py [--sessions 10000] [--burst 1000] [--samples 300] [--warmup 5]
        [--start-wave 0] [--submit-threads 8] [--idle 10] [--quick] [--json]
        [--park-after 30|never] [--profile-memory] [--py-spy] [--profile-dir /tmp/parked-prof]

``--quick``: 500 sessions, burst 100, 50 samples, 3 s idle (well under a minute).
``--sessions 100000`` is the large variant. ``--json`` moves the report to stderr and prints
one JSON object on stdout. The soft ``RLIMIT_NOFILE`` of both processes is raised to the
hard limit.

Without --database-url it uses the local server at 127.0.0.1:5432, database
dbos_agents_bench_parked, dropped and recreated.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from _lib import cli
from _lib.child import Child
from _lib.db import database_url
from _lib.procfs import loadavg, raise_nofile
from _lib.stats import pct_or_nan
from parked_phases import Burst, answered_at_once, burst, idle_cpu_pct, park, sequential
from parked_probe import (
    Proc,
    db_backends,
    open_calls,
    pg_connections,
)
from parked_report import GOALS, WARM_SKIP, Figures, report
from parked_worker import worker
from rich.console import Console

from dbos_agents import Settings
from dbos_agents.client import AgentClient

DB_NAME = "dbos_agents_bench_parked"
WORKER_APPNAME = "bench-parked-worker"
DRIVER_APPNAME = "bench-parked-driver"

console = Console(width=150)


class Worker(Child):
    """``parked.py --worker`` in a subprocess, launched (``READY``) when constructed."""

    def __init__(self, args: argparse.Namespace, url: str, prof_dir: Path) -> None:
        pool = (("db_pool_size", args.db_pool_size), ("db_max_overflow", args.db_max_overflow))
        env = dict(
            os.environ,
            PGAPPNAME=WORKER_APPNAME,
            **{f"DBOS_AGENTS_{k.upper()}": str(v) for k, v in pool if v is not None},
        )
        cmd = [sys.executable, __file__, "--worker", "--database-url", url]
        if args.queue_poll is not None:
            cmd += ["--queue-poll", str(args.queue_poll)]
        cmd += ["--park-after", "never" if args.park_after is None else str(args.park_after)]
        self.report_path = str(prof_dir / "memory.json") if args.profile_memory else None
        if args.profile_memory:
            cmd += ["--trace-frames", "25", "--report-path", str(self.report_path)]
        super().__init__(cmd, env=env)
        self.expect("READY", 120)

    def memory_report(self, parked: int) -> dict[str, Any]:
        assert self.report_path
        Path(f"{self.report_path}.n").write_text(str(parked))
        os.kill(self.pid, signal.SIGUSR1)
        self.expect("MEM", 600)
        report: dict[str, Any] = json.loads(Path(self.report_path).read_text())
        return report


def run(args: argparse.Namespace, url: str) -> dict[str, Any]:
    load_before = loadavg()
    prof_dir = Path(args.profile_dir)
    if args.profile_memory or args.py_spy:
        prof_dir.mkdir(parents=True, exist_ok=True)
    w = Worker(args, url, prof_dir)
    os.environ["PGAPPNAME"] = DRIVER_APPNAME
    client = AgentClient(url, settings=Settings(database_url=url, log_level="ERROR"))
    snaps = [Proc.take("just after launch (baseline)", w.pid)]
    try:
        # 1. warm-up: a few complete sessions, one at a time
        answered_at_once(client, args.warmup, "warm-up")
        snaps.append(Proc.take(f"after {args.warmup} warm-up sessions", w.pid))
        base_idle_cpu = idle_cpu_pct(w.pid, min(args.idle, 5.0))[1]

        # 2. park N
        console.log(f"parking {args.sessions} sessions (load avg {loadavg()})")
        park_s, park_cpu, parked, failed, park_threads, park_conns = park(
            client, w.pid, args.sessions, args.start_wave, args.submit_threads, console.log
        )
        snaps.append(Proc.take(f"{parked} waiting", w.pid))
        if args.park_after is not None:  # the last armed park after park_after_sec
            console.log(f"letting the last waits park ({args.park_after:g} s + 2 s)")
            time.sleep(args.park_after + 2.0)
            snaps.append(Proc.take(f"{parked} waiting, parked", w.pid))
        conns_by_app = pg_connections(client.engine, w.pid)
        backends = db_backends(client.engine)
        console.log(f"parked {parked} in {park_s:.1f}s; idling {args.idle}s")
        idle_wall, idle_cpu = idle_cpu_pct(w.pid, args.idle)
        snaps.append(Proc.take(f"{parked} parked, +{args.idle:g} s idle", w.pid))
        mem: dict[str, Any] | None = None
        if args.profile_memory:
            console.log("writing the worker's memory report (tracemalloc + gc)")
            mem = w.memory_report(parked)
            snaps.append(Proc.take(f"{parked} parked, after the memory report", w.pid))

        calls_ = open_calls(client.engine)
        random.Random(7).shuffle(calls_)
        samples, rest = calls_[: args.samples], calls_[args.samples :]

        # 3. sequential latency while the others wait
        console.log(f"latency: {len(samples)} sequential submits with {len(calls_)} waiting")
        lat, tool_lat, wal_kb, fpi = sequential(client, samples)
        hot: list[float] = []
        if args.park_after is not None and args.hot_samples:
            console.log(f"latency: {args.hot_samples} fresh sessions answered within park_after")
            hot = answered_at_once(client, args.hot_samples, "hot")
        snaps.append(Proc.take("after the latency samples", w.pid))

        # 4. burst
        console.log(
            f"burst: {len(rest[: args.burst])} submits at once from {args.submit_threads} threads"
        )
        b = burst(
            client,
            w.pid,
            rest[: args.burst],
            args.submit_threads,
            prof_dir if args.py_spy else None,
        )
        snaps.append(Proc.take("after the burst", w.pid))
        base, warm, parked_snap = snaps[0], snaps[1], snaps[2]
        f = Figures(
            sessions=args.sessions,
            parked=parked,
            park_after_s=args.park_after,
            park_s=park_s,
            park_rate=parked / park_s if park_s > 0 else float("nan"),
            park_worker_cpu_s=park_cpu,
            baseline_rss_mb=base.rss_mb,
            warm_rss_mb=warm.rss_mb,
            parked_rss_mb=parked_snap.rss_mb,
            rss_kb_per_session=(parked_snap.rss_mb - base.rss_mb) * 1024 / max(1, parked),
            rss_kb_per_session_after_warmup=(parked_snap.rss_mb - warm.rss_mb)
            * 1024
            / max(1, parked),
            baseline_threads=base.threads,
            parked_threads=parked_snap.threads,
            max_threads=max([b.max_threads, *park_threads, *(s.threads for s in snaps)]),
            pg_conns_parked=parked_snap.pg_conns,
            pg_conns_max=max(b.max_conns, park_conns, *(s.pg_conns for s in snaps)),
            pg_conns_by_app=conns_by_app,
            db_backends_total=backends,
            idle_s=idle_wall,
            idle_cpu_pct=idle_cpu,
            base_idle_cpu_pct=base_idle_cpu,
            samples=len(lat),
            p50_ms=pct_or_nan(lat, 50),
            warm_p50_ms=pct_or_nan(lat[WARM_SKIP:], 50),
            p90_ms=pct_or_nan(lat, 90),
            p99_ms=pct_or_nan(lat, 99),
            max_ms=max(lat) if lat else float("nan"),
            tool_p50_ms=pct_or_nan(tool_lat, 50),
            tool_p99_ms=pct_or_nan(tool_lat, 99),
            hot_samples=len(hot),
            hot_p50_ms=pct_or_nan(hot, 50),
            hot_p99_ms=pct_or_nan(hot, 99),
            wal_kb_per_resume=wal_kb,
            fpi_per_resume=fpi,
            failed_before_park=failed,
            load_avg_before=load_before,
            load_avg_after=loadavg(),
            **burst_figures(b, len(rest[: args.burst])),
        )
        report(console, f, snaps, b.errors, b.bad, mem, prof_dir if args.py_spy else None)
        return {
            "figures": asdict(f),
            "snapshots": [asdict(s) for s in snaps],
            "latency_ms": lat,
            "tool_latency_ms": tool_lat,
            "hot_latency_ms": hot,
            "burst_latency_ms": b.latency_ms,
            "goals": GOALS,
            "memory_profile": mem,
            "submit_errors": dict(b.errors),
            "versions": cli.versions(),
        }
    finally:
        client.close()
        w.stop(60)


def burst_figures(b: Burst, k: int) -> dict[str, Any]:
    """The burst's fields of ``Figures``: per resumed turn, over the runs that finished."""
    n = max(1, len(b.done))
    lat = b.latency_ms
    return {
        "burst": k,
        "burst_done": len(b.done),
        "burst_failed": len(b.bad) + sum(b.errors.values()),
        "drain_s": b.drain_s,
        "drain_per_s": len(b.done) / b.drain_s if b.done and b.drain_s > 0 else float("nan"),
        "submits_s": b.submits_end - b.t_burst,
        "cpu_ms_per_turn": b.worker_cpu_s * 1000 / n,
        "pg_cpu_ms_per_turn": b.pg_cpu_s * 1000 / n,
        "bench_cpu_ms_per_turn": b.self_cpu_s * 1000 / n,
        "burst_wal_kb_per_turn": (b.wal1[0] - b.wal0[0]) / 1024 / n,
        "burst_fpi_per_turn": (b.wal1[1] - b.wal0[1]) / n,
        "burst_host_busy_pct": b.host_pct,
        "burst_p50_ms": pct_or_nan(lat, 50),
        "burst_p99_ms": pct_or_nan(lat, 99),
    }


def _park_after(value: str) -> float | None:
    return None if value == "never" else float(value)


def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p)
    cli.options(p, sessions=10_000, burst=1000, samples=300)
    p.add_argument(
        "--hot-samples",
        type=int,
        default=100,
        help="with parking on: fresh sessions answered within park_after (waits in memory)",
    )
    cli.options(p, warmup=5)
    p.add_argument("--start-wave", type=int, default=0, help="0 = start all at once")
    cli.options(p, submit_threads=8, idle=10.0)
    p.add_argument(
        "--queue-poll",
        type=float,
        default=None,
        help="worker's queue_polling_interval_sec (default: Settings' resolution, 1 s here)",
    )
    p.add_argument(
        "--park-after",
        type=_park_after,
        default=Settings.model_fields["park_after_sec"].default,
        help="worker's park_after_sec in seconds, or 'never' (default: the Settings default)",
    )
    p.add_argument(
        "--db-pool-size",
        type=int,
        default=None,
        help="worker's Settings.db_pool_size (datasource pool; default 10)",
    )
    p.add_argument(
        "--db-max-overflow",
        type=int,
        default=None,
        help="worker's Settings.db_max_overflow (default 20); lower it when the shared"
        " server's max_connections is tight",
    )
    p.add_argument("--quick", action="store_true", help="500 sessions, burst 100, 50 samples")
    p.add_argument(
        "--json", action="store_true", help="report on stderr, one JSON object on stdout"
    )
    p.add_argument("--profile-memory", action="store_true")
    p.add_argument("--py-spy", action="store_true")
    p.add_argument("--profile-dir", default="/tmp/parked-prof")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--trace-frames", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--report-path", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    raise_nofile()
    if args.worker:
        asyncio.run(
            worker(
                args.database_url,
                args.trace_frames,
                args.report_path,
                args.queue_poll,
                args.park_after,
            )
        )
        return
    if args.quick:
        args.sessions, args.burst, args.samples, args.idle = 500, 100, 50, 3.0
        args.hot_samples = min(args.hot_samples, 30)
    url = database_url(args.database_url, DB_NAME)
    global console
    if args.json:
        console = Console(stderr=True, width=150)
    with cli.report_to_stderr(args.json):
        result = run(args, url)
    if args.json:
        cli.print_json(result)


if __name__ == "__main__":
    main()
