"""Many parked sessions in one worker: memory, threads, connections, latency and burst drain.

The performance issue's goals for a worker holding many sessions that wait on client tools
(an agent whose turn 0 calls the client tool ``confirm`` and whose turn 1 answers, the same
agent and scripted model as bench/submit_latency.py):

- RSS above the launch baseline per waiting session <= 20 KB; OS threads <= 64;
- submit -> resume p50 <= 20 ms and p99 <= 100 ms while N sessions wait;
- a burst of K submits at once drains at >= 60 sessions/s on 2 cores.

The worker is a **separate process** (this script re-run with ``--worker``: one
AgentRuntime, nothing else), so its RSS, threads, CPU time and Postgres connections are read
from ``/proc/<pid>`` without counting the bench's own client, threads and polling. This
process is the API server: one ``AgentClient``, starting sessions and submitting from a
thread pool.

Phases, in order:

1. Launch. Baseline = the worker's VmRSS / Threads right after ``runtime.launch()``, before
   any session. Then ``--warmup`` sessions run to completion one at a time (imports, caches,
   pydantic schemas), and the figures are taken again (the second per-session figure).
2. Park. ``client.start`` for N sessions from ``--submit-threads`` threads (in waves of
   ``--start-wave``, each armed before the next; 0 = all at once). A session is *armed* when
   its pending call is ``waiting`` and its workflow sits in ``recv`` (its ``DBOS.sleep``
   timeout checkpoint exists in ``dbos.operation_outputs``, the definition of
   submit_latency.py). Time to park = first start -> the last arming checkpoint's
   ``started_at_epoch_ms``/``completed_at_epoch_ms`` (read after the fact), falling back to
   the poll that saw the count reach N. With parking on (``--park-after``, default the
   ``Settings.park_after_sec`` default, 30 s; ``never`` keeps every wait in memory), the
   bench then waits ``park_after + 2`` s so the last armed waits park too, and the latency
   and burst below resume parked sessions (by replay). Then ``--idle`` seconds of nothing: the worker's CPU
   while parked (DBOS re-checks each waiter in the database every 60 s as a safety net for
   lost notifications, so the idle cost grows with N).
3. Latency. ``--samples`` of the waiting sessions, one at a time: t0 = ``time.time()`` just
   before ``client.submit_tool_result``; "resumed" = the run finished, i.e.
   ``dbos.workflow_status.updated_at`` of its outcome (secondary: ``created_at`` of the tool
   message in ``dbos_agents.messages``), read after the fact (submit_latency.py's
   definitions). The next submit goes out after the run finished: the bench first sleeps
   ``SETTLE_SEC`` (0.1 s: no poll of this process competes with the resume for the two
   cores; the time comes from the row, not from the poll), then polls every 5 ms.
   With parking on, ``--hot-samples`` fresh sessions are then started one at a time and
   each answered as soon as its wait is armed (well within ``park_after``, so the wait is
   still in memory: a browser tool's case) while the N others stay parked.
4. Burst. ``--burst`` of the waiting sessions submitted at once from ``--submit-threads``
   threads (an API server). Drain rate = K / (first t0 -> last ``updated_at``); worker CPU
   per resumed turn = the worker's utime+stime (``/proc/<pid>/stat``) over the burst / K;
   the same for every local ``postgres`` process (with its reaped backends) and for this
   bench process (the submit threads and the completion poll, once a second), so the
   host's CPU per turn is accounted for (a local server only). For the sequential samples
   and the burst, the WAL the server wrote per resumed turn and its full-page images
   (``pg_stat_wal``): each commit waits for its WAL to reach the disk, and the first change
   to a page after a checkpoint logs the whole page, which grows with the number of
   sessions whose rows a run touches.
   Threads and connections are sampled every 100 ms during the burst (max reported).

Postgres connections of the worker = rows of ``pg_stat_activity`` whose ``client_port`` is
one of the worker's TCP sockets to the server (``/proc/<pid>/fd`` + ``/proc/<pid>/net/tcp``),
by ``application_name``: ``dbos_transact`` is DBOS's system-database pool (``sys_db_pool_size``,
default 20, ``max_overflow`` 0; also the LISTEN connection), ``dbos_transact_client`` the
runtime's ``DBOSClient`` (pool 5), and the worker's own engines carry the bench's
``PGAPPNAME`` (the datasource: ``Settings.db_pool_size`` + ``db_max_overflow``, 10 + 20; the
sync engine: 5 + 10).

Profiling switches (they slow the worker down; their figures are marked as such):
``--profile-memory`` starts tracemalloc (25 frames) in the worker at launch and, once N are
parked, writes the allocation diff against the launch snapshot (by line, and by the
innermost frame in dbos_agents / dbos / sqlalchemy / pydantic / asyncio) plus gc object
counts by type to ``--profile-dir``; ``--py-spy`` records the burst with py-spy (``--gil``:
samples of the thread holding the GIL, i.e. where the worker's Python time goes) into a raw
collapsed-stack file in ``--profile-dir``.

    python bench/parked.py [--sessions 10000] [--burst 1000] [--samples 300] [--warmup 5]
        [--start-wave 0] [--submit-threads 8] [--idle 10] [--quick] [--json]
        [--park-after 30|never] [--profile-memory] [--py-spy] [--profile-dir /tmp/parked-prof]

``--quick``: 500 sessions, burst 100, 50 samples, 3 s idle (well under a minute).
``--sessions 100000`` is the large variant (see docs/bench-notes/parked.md for how long it
takes). ``--json`` moves the report to stderr and prints one JSON object on stdout. The
soft ``RLIMIT_NOFILE`` of both processes is raised to the hard limit.

Without --database-url it uses the local server at 127.0.0.1:5432, database
dbos_agents_bench_parked, dropped and recreated.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import platform
import random
import resource
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table
from submit_latency import confirm, finish_times, respond, tool_message_times, wait_armed

from dbos_agents import Agent, AgentRuntime, Settings
from dbos_agents.client import AgentClient
from dbos_agents.models import ScriptedModel
from dbos_agents.testing import create_fresh_database

AGENT = "asker"
DB_NAME = "dbos_agents_bench_parked"
WORKER_APPNAME = "bench-parked-worker"
DRIVER_APPNAME = "bench-parked-driver"
TICK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
GOALS = {"rss_kb": 20.0, "threads": 64, "p50_ms": 20.0, "p99_ms": 100.0, "drain_per_s": 60.0}

console = Console(width=150)


# The agent and scripted model are submit_latency.py's: a client tool, then an answer.


def raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ---------------------------------------------------------------------------- worker process


def _package(filename: str) -> str:
    for pkg in ("dbos_agents", "dbos", "sqlalchemy", "pydantic_core", "pydantic", "psycopg"):
        if f"/{pkg}/" in filename:
            return pkg
    if "/asyncio/" in filename:
        return "asyncio"
    if "/concurrent/" in filename or filename.endswith("threading.py"):
        return "threads"
    return "other"


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/lib/python3", "/work/main/"):
        if marker in filename:
            tail = filename.split(marker, 1)[1]
            return tail.split("/", 1)[1] if marker == "/lib/python3" else tail
    return filename


def memory_report(base_snapshot: Any, base_gc: Counter[str], parked: int) -> dict[str, Any]:
    """gc object counts by type and (if tracing) tracemalloc's allocation diff since launch."""
    import tracemalloc

    gc.collect()
    counts = Counter(type(o).__qualname__ for o in gc.get_objects())
    gc_diff = sorted(((k, counts[k] - base_gc.get(k, 0)) for k in counts), key=lambda kv: -kv[1])[
        :40
    ]
    out: dict[str, Any] = {
        "parked": parked,
        "gc_objects_total_diff": sum(counts.values()) - sum(base_gc.values()),
        "gc_by_type": [
            {"type": k, "diff": d, "per_session": d / max(1, parked)} for k, d in gc_diff
        ],
    }
    if base_snapshot is None or not tracemalloc.is_tracing():
        return out
    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    traced, peak = tracemalloc.get_traced_memory()
    out["tracemalloc_traced_mb"] = traced / 2**20
    out["tracemalloc_peak_mb"] = peak / 2**20
    by_line = snap.compare_to(base_snapshot, "lineno")
    out["total_diff_kb"] = sum(s.size_diff for s in by_line) / 1024
    out["by_line"] = [
        {
            "where": f"{_short(s.traceback[-1].filename)}:{s.traceback[-1].lineno}",
            "kb": s.size_diff / 1024,
            "count": s.count_diff,
            "bytes_per_session": s.size_diff / max(1, parked),
        }
        for s in by_line[:40]
    ]
    # Attribute each allocation to the innermost frame in a library we care about (the
    # allocation site itself is often a builtin constructor or a stdlib helper).
    by_pkg: Counter[str] = Counter()
    by_caller: Counter[str] = Counter()
    by_ours: Counter[str] = Counter()
    for s in snap.compare_to(base_snapshot, "traceback"):
        if s.size_diff <= 0:
            continue
        frames = list(reversed(s.traceback))  # innermost first
        by_pkg[_package(frames[0].filename)] += s.size_diff
        lib = next(
            (f for f in frames if _package(f.filename) not in ("other", "asyncio", "threads")),
            frames[0],
        )
        by_caller[f"{_short(lib.filename)}:{lib.lineno}"] += s.size_diff
        ours = next((f for f in frames if "dbos_agents/" in f.filename), None)
        by_ours[
            "(no dbos_agents frame)" if ours is None else f"{_short(ours.filename)}:{ours.lineno}"
        ] += s.size_diff
    out["by_package_of_allocation_site"] = {k: v / 1024 for k, v in by_pkg.most_common()}
    out["by_innermost_library_frame"] = [
        {"where": k, "kb": v / 1024, "bytes_per_session": v / max(1, parked)}
        for k, v in by_caller.most_common(40)
    ]
    out["by_innermost_dbos_agents_frame"] = [
        {"where": k, "kb": v / 1024, "bytes_per_session": v / max(1, parked)}
        for k, v in by_ours.most_common(25)
    ]
    return out


async def worker(
    url: str,
    trace_frames: int,
    report_path: str | None,
    queue_poll: float | None,
    park_after: float | None,
) -> None:
    """One AgentRuntime. Prints ``READY`` when launched; SIGUSR1 writes the memory report
    (``MEM`` when written); SIGTERM shuts down."""
    import tracemalloc

    if trace_frames:
        tracemalloc.start(trace_frames)
    settings = Settings(
        database_url=url,
        executor_id="bench-parked",
        queue_polling_interval_sec=queue_poll,
        log_level="ERROR",
        worker_concurrency=None,
        park_after_sec=park_after,
    )
    rt = AgentRuntime(
        [Agent(AGENT, tools=[confirm], max_turns=3, tool_timeout=timedelta(hours=12))],
        ScriptedModel(respond=respond),
        settings=settings,
    )
    await rt.launch()
    gc.collect()
    base_gc = Counter(type(o).__qualname__ for o in gc.get_objects())
    base_snap = tracemalloc.take_snapshot() if trace_frames else None
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)

    def dump() -> None:
        parked = 0
        with contextlib.suppress(OSError, ValueError):
            parked = int(Path(f"{report_path}.n").read_text())
        report = memory_report(base_snap, base_gc, parked)
        Path(report_path or "/tmp/parked-mem.json").write_text(json.dumps(report, indent=1))
        print("MEM", flush=True)

    loop.add_signal_handler(signal.SIGUSR1, dump)
    print("READY", flush=True)
    await stop.wait()
    await rt.shutdown()


# ---------------------------------------------------------------------------- /proc readers


@dataclass
class Proc:
    label: str
    rss_mb: float
    threads: int
    cpu_s: float
    pg_conns: int

    @classmethod
    def take(cls, label: str, pid: int) -> Proc:
        st = read_status(pid)
        return cls(label, st["VmRSS"] / 1024, st["Threads"], cpu_seconds(pid), len(pg_ports(pid)))


def read_status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Threads", "VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # fields 14, 15 of stat(5)


POLL_SEC = 1.0
"""How often the burst's completion is read (its figures do not depend on it)."""


def postgres_cpu_seconds() -> float:
    """CPU of every local ``postgres`` process, with the reaped backends' (children's) time.

    Zero when the server is not on this machine: the per-turn figure is then left out."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            with open(f"/proc/{entry}/stat") as f:
                head, _, rest = f.read().rpartition(")")
            if head.endswith("(postgres"):
                fields = rest.split()
                total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / TICK


def wal_written(engine: sa.Engine) -> tuple[float, int]:
    """The server's WAL bytes and full-page images written so far (``pg_stat_wal``,
    cluster-wide; the bench's reads write none). A commit waits for its WAL to be flushed,
    and the first change to a page after a checkpoint writes the whole 8 KB page."""
    with _connect(engine) as conn:
        row = conn.execute(sa.text("SELECT wal_bytes, wal_fpi FROM pg_stat_wal")).one()
    return float(row.wal_bytes), int(row.wal_fpi)


def host_busy() -> tuple[int, int]:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4], sum(v)


def pg_ports(pid: int, server_port: int = 5432) -> set[int]:
    """Local ports of the process's TCP sockets connected to the Postgres server port."""
    inodes: set[str] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    ports: set[int] = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{table}") as f:
            next(f)
            for line in f:
                parts = line.split()
                local, remote, state, inode = parts[1], parts[2], parts[3], parts[9]
                if (
                    inode in inodes
                    and state == "01"
                    and int(remote.rsplit(":", 1)[1], 16) == server_port
                ):
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def pg_connections(engine: sa.Engine, pid: int) -> dict[str, int]:
    """The worker's backends in pg_stat_activity, by application_name (and state)."""
    ports = sorted(pg_ports(pid))
    with _connect(engine) as conn:
        rows = conn.execute(
            sa.text(
                "SELECT application_name, coalesce(state, '?') AS state, count(*) AS n"
                " FROM pg_stat_activity WHERE datname = current_database()"
                " AND client_port = ANY(:p) GROUP BY 1, 2 ORDER BY 1, 2"
            ),
            {"p": ports},
        ).all()
    return {f"{r.application_name or '(none)'} [{r.state}]": int(r.n) for r in rows}


def db_backends(engine: sa.Engine) -> int:
    with _connect(engine) as conn:
        return int(
            conn.execute(
                sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
            ).scalar_one()
        )


# ---------------------------------------------------------------------------- DB polling


def pct(xs: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))]


_ARMED_COUNT = sa.text(
    "SELECT count(*) FROM dbos_agents.pending_calls p WHERE p.status = 'waiting'"
    " AND EXISTS (SELECT 1 FROM dbos.operation_outputs o"
    "   WHERE o.workflow_uuid = p.owner_workflow_id AND o.function_name = 'DBOS.sleep')"
)


def _connect(engine: sa.Engine) -> sa.Connection:
    """A connection, retried for up to 60 s: Postgres is shared with other benchmarks and
    may answer "too many clients" for a moment (max_connections)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return engine.connect()
        except sa.exc.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def armed_count(engine: sa.Engine) -> int:
    with _connect(engine) as conn:
        return int(conn.execute(_ARMED_COUNT).scalar_one())


def status_counts(engine: sa.Engine) -> dict[str, int]:
    with _connect(engine) as conn:
        rows = conn.execute(
            sa.text("SELECT status, count(*) AS n FROM dbos.workflow_status GROUP BY 1")
        ).all()
    return {r.status: int(r.n) for r in rows}


def last_armed_ms(engine: sa.Engine) -> float | None:
    """Epoch ms of the latest arming checkpoint (the DBOS.sleep row recv writes)."""
    with _connect(engine) as conn:
        v = conn.execute(
            sa.text(
                "SELECT max(coalesce(completed_at_epoch_ms, started_at_epoch_ms))"
                " FROM dbos.operation_outputs WHERE function_name = 'DBOS.sleep'"
            )
        ).scalar_one()
    return None if v is None else float(v)


def open_calls(engine: sa.Engine) -> list[tuple[str, str]]:
    """(root session id, tool call id) of every waiting call whose workflow is armed."""
    with _connect(engine) as conn:
        rows = conn.execute(
            sa.text(
                "SELECT p.root_session_id, p.tool_call_id FROM dbos_agents.pending_calls p"
                " WHERE p.status = 'waiting' AND EXISTS (SELECT 1 FROM dbos.operation_outputs o"
                "   WHERE o.workflow_uuid = p.owner_workflow_id"
                "   AND o.function_name = 'DBOS.sleep')"
            )
        ).all()
    return [(r.root_session_id, r.tool_call_id) for r in rows]


def timed_submit(client: AgentClient, sid: str, tool_call_id: str) -> float:
    """t0 (epoch s), taken in this thread just before the call."""
    t0 = time.time()
    out = client.submit_tool_result(sid, tool_call_id, result={"ok": True, "note": "bench"})
    if out.status != "accepted":
        raise RuntimeError(f"submit for {sid} was {out.status} ({out.reason})")
    return t0


WARM_SKIP = 100
"""Printed besides the goal's p50: the p50 of the samples after the first ``WARM_SKIP``, once
psycopg has prepared the resume's statements on each pooled connection (at a statement's
sixth run on a connection; DBOS's pool hands out its 20 in turn)."""

SETTLE_SEC = 0.1
"""How long a sample sleeps before its first poll (almost every run has finished by then):
polling every 5 ms from the start took CPU from the resume it timed (a pooled connection's
ping and a query each time, on the same two cores)."""


def wait_finished(engine: sa.Engine, wf: str, timeout: float = 60.0) -> None:
    time.sleep(SETTLE_SEC)
    deadline = time.monotonic() + timeout
    while finish_times(engine, [wf], _connect).get(wf, ("", None))[1] is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{wf} did not finish within {timeout:.0f}s")
        time.sleep(0.005)


def answered_at_once(client: AgentClient, n: int, label: str) -> list[float]:
    """Submit -> run finished (ms) for n fresh sessions, one at a time, each answered as
    soon as its wait is armed: the warm-up, and with parking on the fresh-wait sample
    (within ``park_after_sec`` the wait is still in memory, a browser tool's case, while
    the others stay parked)."""
    out: list[float] = []
    for i in range(n):
        sid = client.start(AGENT, f"{label} {i}")
        deadline = time.monotonic() + 60
        while not (rows := client.pending(session_id=sid)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{label} session {sid} never waited")
            time.sleep(0.005)
        wait_armed(client.engine, sid)
        t0 = timed_submit(client, sid, rows[0].tool_call_id)
        wait_finished(client.engine, sid)
        fin = finish_times(client.engine, [sid], _connect)[sid][1]
        if fin is not None:
            out.append(fin - t0 * 1000)
    return out


# ---------------------------------------------------------------------------- driver


class Worker:
    def __init__(
        self,
        url: str,
        trace_frames: int,
        report_path: str | None,
        env_extra: dict[str, str],
        queue_poll: float | None,
        park_after: float | None,
    ) -> None:
        env = dict(os.environ, PGAPPNAME=WORKER_APPNAME, **env_extra)
        cmd = [sys.executable, __file__, "--worker", "--database-url", url]
        if queue_poll is not None:
            cmd += ["--queue-poll", str(queue_poll)]
        cmd += ["--park-after", "never" if park_after is None else str(park_after)]
        if trace_frames:
            cmd += ["--trace-frames", str(trace_frames)]
        if report_path:
            cmd += ["--report-path", report_path]
        self.report_path = report_path
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        self.pid = self.proc.pid
        self.lines: list[str] = []
        self._cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True, name="bench-worker-stdout").start()
        self.expect("READY", 120)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cv:
                self.lines.append(line.strip())
                self._cv.notify_all()

    def expect(self, word: str, timeout: float) -> None:
        with self._cv:
            if (
                not self._cv.wait_for(
                    lambda: word in self.lines or self.proc.poll() is not None, timeout
                )
                or word not in self.lines
            ):
                raise RuntimeError(f"worker did not say {word} (exit {self.proc.poll()})")
            self.lines.remove(word)

    def memory_report(self, parked: int) -> dict[str, Any]:
        assert self.report_path
        Path(f"{self.report_path}.n").write_text(str(parked))
        os.kill(self.pid, signal.SIGUSR1)
        self.expect("MEM", 600)
        report: dict[str, Any] = json.loads(Path(self.report_path).read_text())
        return report

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Figures:
    sessions: int
    parked: int
    park_after_s: float | None  # the worker's park_after_sec (None: waits stay in memory)
    park_s: float
    park_rate: float
    park_worker_cpu_s: float
    baseline_rss_mb: float
    warm_rss_mb: float
    parked_rss_mb: float
    rss_kb_per_session: float
    rss_kb_per_session_after_warmup: float
    baseline_threads: int
    parked_threads: int
    max_threads: int
    pg_conns_parked: int
    pg_conns_max: int
    pg_conns_by_app: dict[str, int]
    db_backends_total: int
    idle_s: float
    idle_cpu_pct: float
    base_idle_cpu_pct: float
    samples: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    tool_p50_ms: float
    tool_p99_ms: float
    hot_samples: int  # answered within park_after_sec (0 when parking is off)
    hot_p50_ms: float
    hot_p99_ms: float
    burst: int
    burst_done: int
    burst_failed: int
    drain_s: float
    drain_per_s: float
    submits_s: float
    cpu_ms_per_turn: float
    burst_host_busy_pct: float
    pg_cpu_ms_per_turn: float
    bench_cpu_ms_per_turn: float
    wal_kb_per_resume: float  # the sequential samples'
    fpi_per_resume: float
    burst_wal_kb_per_turn: float
    burst_fpi_per_turn: float
    burst_p50_ms: float
    burst_p99_ms: float
    failed_before_park: int
    load_avg_before: str
    load_avg_after: str
    warm_p50_ms: float = float("nan")  # the sequential samples after the first WARM_SKIP


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def park(
    client: AgentClient, w: Worker, n: int, wave: int, threads: int
) -> tuple[float, float, int, int, list[int], int]:
    """Start n sessions; returns (park seconds, worker CPU s, armed, failed, threads seen,
    max connections seen)."""
    step = wave or n
    base_armed = armed_count(client.engine)
    cpu0 = cpu_seconds(w.pid)
    seen_threads: list[int] = []
    seen_conns: list[int] = []
    t_first = time.time()
    last_progress = time.monotonic()
    armed = base_armed
    failed = 0
    with ThreadPoolExecutor(threads, thread_name_prefix="bench-start") as pool:
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            list(pool.map(lambda i: client.start(AGENT, f"parked {i}"), range(lo, hi)))
            target = base_armed + hi
            while True:
                time.sleep(0.5)
                seen_threads.append(read_status(w.pid)["Threads"])
                seen_conns.append(len(pg_ports(w.pid)))
                now = armed_count(client.engine)
                if now != armed:
                    armed, last_progress = now, time.monotonic()
                if armed >= target:
                    break
                st = status_counts(client.engine)
                failed = sum(
                    v for k, v in st.items() if k not in ("PENDING", "ENQUEUED", "SUCCESS")
                )
                if armed + failed >= target or time.monotonic() - last_progress > 120:
                    break
                if int(time.monotonic()) % 10 == 0:
                    console.log(
                        f"park: {armed - base_armed}/{n} armed, worker threads {seen_threads[-1]}"
                    )
    t_seen = time.time()
    last = last_armed_ms(client.engine)
    t_last = last / 1000 if last is not None else t_seen
    return (
        t_last - t_first,
        cpu_seconds(w.pid) - cpu0,
        armed - base_armed,
        failed,
        seen_threads,
        max(seen_conns, default=0),
    )


def run(args: argparse.Namespace, url: str) -> dict[str, Any]:
    load_before = loadavg()
    prof_dir = Path(args.profile_dir)
    if args.profile_memory or args.py_spy:
        prof_dir.mkdir(parents=True, exist_ok=True)
    w = Worker(
        url,
        25 if args.profile_memory else 0,
        str(prof_dir / "memory.json") if args.profile_memory else None,
        {
            f"DBOS_AGENTS_{k.upper()}": str(v)
            for k, v in (
                ("db_pool_size", args.db_pool_size),
                ("db_max_overflow", args.db_max_overflow),
            )
            if v is not None
        },
        args.queue_poll,
        args.park_after,
    )
    os.environ["PGAPPNAME"] = DRIVER_APPNAME
    settings = Settings(database_url=url, log_level="ERROR")
    client = AgentClient(url, settings=settings)
    snaps = [Proc.take("just after launch (baseline)", w.pid)]
    try:
        # 1. warm-up: a few complete sessions, one at a time
        answered_at_once(client, args.warmup, "warm-up")
        snaps.append(Proc.take(f"after {args.warmup} warm-up sessions", w.pid))
        c0, t0 = cpu_seconds(w.pid), time.monotonic()
        time.sleep(min(args.idle, 5.0))
        base_idle_cpu = (cpu_seconds(w.pid) - c0) / (time.monotonic() - t0) * 100

        # 2. park N
        console.log(f"parking {args.sessions} sessions (load avg {loadavg()})")
        park_s, park_cpu, parked, failed, park_threads, park_conns = park(
            client, w, args.sessions, args.start_wave, args.submit_threads
        )
        snaps.append(Proc.take(f"{parked} waiting", w.pid))
        if args.park_after is not None:  # the last armed park after park_after_sec
            console.log(f"letting the last waits park ({args.park_after:g} s + 2 s)")
            time.sleep(args.park_after + 2.0)
            snaps.append(Proc.take(f"{parked} waiting, parked", w.pid))
        conns_by_app = pg_connections(client.engine, w.pid)
        backends = db_backends(client.engine)
        console.log(f"parked {parked} in {park_s:.1f}s; idling {args.idle}s")
        c0, t0 = cpu_seconds(w.pid), time.monotonic()
        time.sleep(args.idle)
        idle_wall = time.monotonic() - t0
        idle_cpu = (cpu_seconds(w.pid) - c0) / idle_wall * 100
        snaps.append(Proc.take(f"{parked} parked, +{args.idle:g} s idle", w.pid))
        mem: dict[str, Any] | None = None
        if args.profile_memory:
            console.log("writing the worker's memory report (tracemalloc + gc)")
            mem = w.memory_report(parked)
            snaps.append(Proc.take(f"{parked} parked, after the memory report", w.pid))

        calls_ = open_calls(client.engine)
        random.Random(7).shuffle(calls_)
        samples, rest = calls_[: args.samples], calls_[args.samples :]
        burst = rest[: args.burst]

        # 3. sequential latency while the others wait
        console.log(f"latency: {len(samples)} sequential submits with {len(calls_)} waiting")
        t0s: dict[str, float] = {}
        wal0 = wal_written(client.engine)
        for sid, tcid in samples:
            t0s[sid] = timed_submit(client, sid, tcid)
            wait_finished(client.engine, sid)
        wal1 = wal_written(client.engine)
        fins = finish_times(client.engine, list(t0s), _connect)
        tools = tool_message_times(client.engine, list(t0s), _connect)
        lat = [fins[s][1] - t0s[s] * 1000 for s in t0s if fins[s][1] is not None]  # type: ignore[operator]
        tool_lat = [tools[s] - t0s[s] * 1000 for s in t0s if s in tools]
        hot: list[float] = []
        if args.park_after is not None and args.hot_samples:
            console.log(f"latency: {args.hot_samples} fresh sessions answered within park_after")
            hot = answered_at_once(client, args.hot_samples, "hot")
        snaps.append(Proc.take("after the latency samples", w.pid))

        # 4. burst
        console.log(f"burst: {len(burst)} submits at once from {args.submit_threads} threads")
        spy: subprocess.Popen[bytes] | None = None
        if args.py_spy:
            spy_bin = Path(sys.executable).parent / "py-spy"
            spy = subprocess.Popen(
                [
                    str(spy_bin),
                    "record",
                    "--pid",
                    str(w.pid),
                    "--rate",
                    "100",
                    "--nonblocking",
                    "--gil",  # the thread holding the GIL: where the worker's Python time goes
                    "--format",
                    "raw",
                    "--output",
                    str(prof_dir / "burst.txt"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)
        cpu0, host0 = cpu_seconds(w.pid), host_busy()
        pg_cpu0, self_cpu0 = postgres_cpu_seconds(), time.process_time()
        bwal0 = wal_written(client.engine)
        submitted: dict[str, float] = {}
        errors: Counter[str] = Counter()
        max_threads, max_conns = 0, 0

        def submit_one(pair: tuple[str, str]) -> None:
            try:
                submitted[pair[0]] = timed_submit(client, *pair)
            except Exception as exc:
                errors[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1

        pool = ThreadPoolExecutor(args.submit_threads, thread_name_prefix="bench-submit")
        t_burst = time.time()
        futures = [pool.submit(submit_one, pair) for pair in burst]
        left = {sid for sid, _ in burst}
        done: dict[str, float] = {}
        bad: dict[str, str] = {}
        deadline = time.monotonic() + max(300, len(burst) * 0.5)
        submits_end: float | None = None
        next_poll = 0.0
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            max_threads = max(max_threads, read_status(w.pid)["Threads"])
            max_conns = max(max_conns, len(pg_ports(w.pid)))
            if submits_end is None and all(f.done() for f in futures):
                submits_end = time.time()
            # The finish times come from DBOS's rows (``updated_at``), so how often they are
            # read changes no figure; a read of 1,000 ids every 0.1 s cost Postgres more
            # than the resumes themselves once 100,000 sessions were parked
            # (pg_stat_statements: ~10 ms per read at 30,000).
            if time.monotonic() < next_poll:
                continue
            next_poll = time.monotonic() + POLL_SEC
            for wf, (status, fin) in finish_times(client.engine, list(left), _connect).items():
                if fin is not None and status == "SUCCESS":
                    done[wf] = fin
                elif fin is not None:
                    bad[wf] = status
            left -= set(done) | set(bad)
            if submits_end is not None:
                left &= set(submitted)
        burst_cpu = cpu_seconds(w.pid) - cpu0
        burst_pg_cpu = postgres_cpu_seconds() - pg_cpu0
        bwal1 = wal_written(client.engine)
        burst_self_cpu = time.process_time() - self_cpu0
        hb1 = host_busy()
        host_pct = 100 * (hb1[0] - host0[0]) / max(1, hb1[1] - host0[1])
        pool.shutdown(wait=True)
        submits_end = submits_end or time.time()
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                spy.wait(60)
        snaps.append(Proc.take("after the burst", w.pid))
        drain_s = (max(done.values()) / 1000 - t_burst) if done else float("nan")
        burst_lat = [done[s] - submitted[s] * 1000 for s in done if s in submitted]
        max_threads = max([max_threads, *park_threads, *(s.threads for s in snaps)])
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
            max_threads=max_threads,
            pg_conns_parked=parked_snap.pg_conns,
            pg_conns_max=max(max_conns, park_conns, *(s.pg_conns for s in snaps)),
            pg_conns_by_app=conns_by_app,
            db_backends_total=backends,
            idle_s=idle_wall,
            idle_cpu_pct=idle_cpu,
            base_idle_cpu_pct=base_idle_cpu,
            samples=len(lat),
            p50_ms=pct(lat, 50) if lat else float("nan"),
            warm_p50_ms=pct(lat[WARM_SKIP:], 50) if lat[WARM_SKIP:] else float("nan"),
            p90_ms=pct(lat, 90) if lat else float("nan"),
            p99_ms=pct(lat, 99) if lat else float("nan"),
            max_ms=max(lat) if lat else float("nan"),
            tool_p50_ms=pct(tool_lat, 50) if tool_lat else float("nan"),
            tool_p99_ms=pct(tool_lat, 99) if tool_lat else float("nan"),
            hot_samples=len(hot),
            hot_p50_ms=pct(hot, 50) if hot else float("nan"),
            hot_p99_ms=pct(hot, 99) if hot else float("nan"),
            burst=len(burst),
            burst_done=len(done),
            burst_failed=len(bad) + sum(errors.values()),
            drain_s=drain_s,
            drain_per_s=len(done) / drain_s if done and drain_s > 0 else float("nan"),
            submits_s=submits_end - t_burst,
            cpu_ms_per_turn=burst_cpu * 1000 / max(1, len(done)),
            pg_cpu_ms_per_turn=burst_pg_cpu * 1000 / max(1, len(done)),
            bench_cpu_ms_per_turn=burst_self_cpu * 1000 / max(1, len(done)),
            wal_kb_per_resume=(wal1[0] - wal0[0]) / 1024 / max(1, len(samples)),
            fpi_per_resume=(wal1[1] - wal0[1]) / max(1, len(samples)),
            burst_wal_kb_per_turn=(bwal1[0] - bwal0[0]) / 1024 / max(1, len(done)),
            burst_fpi_per_turn=(bwal1[1] - bwal0[1]) / max(1, len(done)),
            burst_host_busy_pct=host_pct,
            burst_p50_ms=pct(burst_lat, 50) if burst_lat else float("nan"),
            burst_p99_ms=pct(burst_lat, 99) if burst_lat else float("nan"),
            failed_before_park=failed,
            load_avg_before=load_before,
            load_avg_after=loadavg(),
        )
        report(f, snaps, errors, bad, mem, prof_dir if args.py_spy else None)
        return {
            "figures": asdict(f),
            "snapshots": [asdict(s) for s in snaps],
            "latency_ms": lat,
            "tool_latency_ms": tool_lat,
            "hot_latency_ms": hot,
            "burst_latency_ms": burst_lat,
            "goals": GOALS,
            "memory_profile": mem,
            "submit_errors": dict(errors),
            "versions": {
                "python": platform.python_version(),
                "dbos": version("dbos"),
                "dbos-agents": version("dbos-agents"),
            },
        }
    finally:
        client.close()
        w.stop()


# ---------------------------------------------------------------------------- report


def _ok(met: bool) -> str:
    return "[green]yes[/green]" if met else "[red]no[/red]"


def report(
    f: Figures,
    snaps: list[Proc],
    errors: Counter[str],
    bad: dict[str, str],
    mem: dict[str, Any] | None,
    spy_dir: Path | None,
) -> None:
    t = Table(title=f"worker process over the run ({f.parked} parked sessions)")
    for col in ("when", "VmRSS MB", "Threads", "worker CPU s", "PG conns"):
        t.add_column(col, justify="left" if col == "when" else "right")
    for s in snaps:
        t.add_row(s.label, f"{s.rss_mb:.1f}", str(s.threads), f"{s.cpu_s:.2f}", str(s.pg_conns))
    console.print(t)

    mode = "in memory" if f.park_after_s is None else f"parked after {f.park_after_s:g} s"
    g = Table(title=f"{f.parked} sessions waiting on a client tool in one worker ({mode})")
    for col in ("figure", "value", "goal", "met"):
        g.add_column(col, justify="left" if col == "figure" else "right")
    g.add_row(
        f"time to park {f.sessions} (first start -> last armed)",
        f"{f.park_s:.1f} s ({f.park_rate:.0f}/s, worker CPU {f.park_worker_cpu_s:.1f} s)",
        "",
        "",
    )
    g.add_row(
        "RSS above launch baseline per waiting session",
        f"{f.rss_kb_per_session:.1f} KB",
        f"<= {GOALS['rss_kb']:.0f} KB",
        _ok(f.rss_kb_per_session <= GOALS["rss_kb"]),
    )
    g.add_row(
        "  same, above the after-warm-up figure",
        f"{f.rss_kb_per_session_after_warmup:.1f} KB",
        "",
        "",
    )
    g.add_row(
        "RSS baseline -> parked",
        f"{f.baseline_rss_mb:.0f} -> {f.parked_rss_mb:.0f} MB",
        "",
        "",
    )
    g.add_row(
        "OS threads: baseline / parked / max seen",
        f"{f.baseline_threads} / {f.parked_threads} / {f.max_threads}",
        f"<= {GOALS['threads']}",
        _ok(f.max_threads <= GOALS["threads"]),
    )
    g.add_row(
        "Postgres connections of the worker: parked / max seen",
        f"{f.pg_conns_parked} / {f.pg_conns_max}",
        "",
        "",
    )
    g.add_row(
        "  by application_name [state]",
        ", ".join(f"{k} {v}" for k, v in f.pg_conns_by_app.items()),
        "",
        "",
    )
    g.add_row(
        "  all backends of the bench database (incl. bench client)",
        str(f.db_backends_total),
        "",
        "",
    )
    g.add_row(
        f"worker CPU while parked, idle {f.idle_s:.0f} s",
        f"{f.idle_cpu_pct:.1f} % of one core (before parking: {f.base_idle_cpu_pct:.1f} %)",
        "",
        "",
    )
    g.add_row(
        f"submit -> run finished, p50 ({f.samples} sequential)",
        f"{f.p50_ms:.1f} ms",
        f"<= {GOALS['p50_ms']:.0f} ms",
        _ok(f.p50_ms <= GOALS["p50_ms"]),
    )
    g.add_row(
        f"  p50 after the first {WARM_SKIP} (each pooled connection's statements prepared)",
        f"{f.warm_p50_ms:.1f} ms",
        "",
        "",
    )
    g.add_row(
        "submit -> run finished, p99",
        f"{f.p99_ms:.1f} ms (p90 {f.p90_ms:.1f}, max {f.max_ms:.1f})",
        f"<= {GOALS['p99_ms']:.0f} ms",
        _ok(f.p99_ms <= GOALS["p99_ms"]),
    )
    if f.hot_samples:
        g.add_row(
            f"  fresh waits answered within park_after ({f.hot_samples}): p50 / p99",
            f"{f.hot_p50_ms:.1f} / {f.hot_p99_ms:.1f} ms",
            f"<= {GOALS['p50_ms']:.0f} / {GOALS['p99_ms']:.0f} ms",
            _ok(f.hot_p50_ms <= GOALS["p50_ms"] and f.hot_p99_ms <= GOALS["p99_ms"]),
        )
    g.add_row(
        "  WAL written per sequential resume (full-page images)",
        f"{f.wal_kb_per_resume:.1f} KB ({f.fpi_per_resume:.1f})",
        "",
        "",
    )
    g.add_row(
        "submit -> tool message recorded, p50 / p99",
        f"{f.tool_p50_ms:.1f} / {f.tool_p99_ms:.1f} ms",
        "",
        "",
    )
    g.add_row(
        f"burst of {f.burst}: drain rate (first submit -> last run finished)",
        f"{f.drain_per_s:.1f} sessions/s ({f.burst_done} in {f.drain_s:.1f} s)",
        f">= {GOALS['drain_per_s']:.0f}/s",
        _ok(f.drain_per_s >= GOALS["drain_per_s"]),
    )
    g.add_row(
        "  all submits returned after",
        f"{f.submits_s:.1f} s",
        "",
        "",
    )
    g.add_row("  worker CPU per resumed turn", f"{f.cpu_ms_per_turn:.1f} ms", "", "")
    if f.pg_cpu_ms_per_turn > 0:
        g.add_row(
            "  Postgres / bench client (submits, polling) CPU per turn",
            f"{f.pg_cpu_ms_per_turn:.1f} / {f.bench_cpu_ms_per_turn:.1f} ms",
            "",
            "",
        )
    g.add_row(
        "  WAL written per turn (full-page images)",
        f"{f.burst_wal_kb_per_turn:.1f} KB ({f.burst_fpi_per_turn:.1f})",
        "",
        "",
    )
    g.add_row(
        "  host CPU busy during the burst (2 cores)", f"{f.burst_host_busy_pct:.0f} %", "", ""
    )
    g.add_row(
        "  submit -> run finished in the burst, p50 / p99",
        f"{f.burst_p50_ms:.0f} / {f.burst_p99_ms:.0f} ms",
        "",
        "",
    )
    if f.burst_failed or f.failed_before_park:
        g.add_row(
            "[red]failures[/red]",
            f"{f.failed_before_park} before parking, {f.burst_failed} in the burst",
            "",
            "",
        )
    g.add_row("load average before / after", f"{f.load_avg_before} / {f.load_avg_after}", "", "")
    console.print(g)
    for e, c in errors.items():
        console.print(f"[red]submit failed x{c}: {e}[/red]")
    if bad:
        console.print(f"[red]{len(bad)} burst runs ended badly: {Counter(bad.values())}[/red]")
    if mem:
        _memory_tables(mem)
    if spy_dir is not None:
        console.print(f"py-spy raw stacks of the burst: {spy_dir / 'burst.txt'}")


def _memory_tables(mem: dict[str, Any]) -> None:
    n = mem["parked"]
    t = Table(title=f"gc-tracked objects added per parked session (top types, {n} parked)")
    t.add_column("type")
    t.add_column("objects", justify="right")
    t.add_column("per session", justify="right")
    for row in mem["gc_by_type"][:25]:
        t.add_row(row["type"], str(row["diff"]), f"{row['per_session']:.2f}")
    console.print(t)
    if "by_line" not in mem:
        return
    console.print(
        f"tracemalloc: +{mem['total_diff_kb'] / 1024:.1f} MB since launch"
        f" ({mem['total_diff_kb'] * 1024 / max(1, n) / 1024:.1f} KB per parked session);"
        " by package of the allocation site (KB): "
        + ", ".join(f"{k} {v:.0f}" for k, v in mem["by_package_of_allocation_site"].items())
    )
    for key, title in (
        (
            "by_innermost_library_frame",
            "allocations by innermost dbos_agents/dbos/SQLAlchemy/pydantic/psycopg frame",
        ),
        ("by_innermost_dbos_agents_frame", "allocations by innermost dbos_agents frame"),
        ("by_line", "allocations by allocation site (file:line)"),
    ):
        t = Table(title=title)
        t.add_column("where")
        t.add_column("KB", justify="right")
        t.add_column("B / session", justify="right")
        for row in mem[key][:15]:
            t.add_row(row["where"], f"{row['kb']:.0f}", f"{row['bytes_per_session']:.0f}")
        console.print(t)


# ---------------------------------------------------------------------------- main


def _park_after(value: str) -> float | None:
    return None if value == "never" else float(value)


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--database-url", default=None)
    p.add_argument("--sessions", type=int, default=10_000)
    p.add_argument("--burst", type=int, default=1000)
    p.add_argument("--samples", type=int, default=300)
    p.add_argument(
        "--hot-samples",
        type=int,
        default=100,
        help="with parking on: fresh sessions answered within park_after (waits in memory)",
    )
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--start-wave", type=int, default=0, help="0 = start all at once")
    p.add_argument("--submit-threads", type=int, default=8)
    p.add_argument("--idle", type=float, default=10.0)
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
    url = args.database_url or create_fresh_database(
        "postgresql://postgres@127.0.0.1:5432/postgres", DB_NAME
    )
    report_to = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    global console
    if args.json:
        console = Console(stderr=True, width=150)
    with report_to:
        result = run(args, url)
    if args.json:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
