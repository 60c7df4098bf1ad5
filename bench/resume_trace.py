"""Wall-clock trace of single resumes: where the time between a submit and the run's end goes.

A diagnosis, not a benchmark: a worker process (one AgentRuntime) holds the sessions; this
process submits, one resume at a time, and records ``t0`` just before each submit, then
sleeps 150 ms before it reads when the run finished (no polls compete with the resume for
the two cores). In the worker, hooks record when named runtime functions return (and, for
a few, start: ``name>``) and when every statement of a SQLAlchemy engine starts and ends;
the client's statements are recorded too. Each event is filed under the latest ``t0``
before it; the k-th occurrence of a name after ``t0`` is ``name#k``. Printed: p50 and p90 of
each phase's time since ``t0``, and the p50 number of SQLAlchemy statements before it.

    python bench/resume_trace.py [--mode parked|fresh] [--samples 200] [--skip 100]
        [--park-after 1] [--parked 0] [--sql] [--py-spy FILE]

``parked``: ``--samples`` sessions wait, park after ``--park-after`` s, then each is resumed
by a submit. ``fresh``: each session is answered 0.2 s after its wait is armed (in memory).
``--parked N`` first starts N sessions that stay waiting (and parked), for scale.
The first ``--skip`` resumes are left out: psycopg prepares a statement at its sixth run
on a connection, and DBOS's pool hands its 20 connections out in turn. ``--sql`` prints
the timeline of one resume. Environment switches (``PGLOG``, ``PLANS``, ``ANALYZE``,
``SCRIPT_PARTS``, ``SWITCH``, ``ROOT=<checkout>`` for an A/B of two commits):
docs/bench-notes/resume_trace.md.

Not kept stable: the hooks name private functions (bench/_lib/internals.py); a missing one
is reported and skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = os.environ.get("ROOT")
if ROOT:
    sys.path.insert(0, ROOT)

import sqlalchemy as sa  # noqa: E402
from _lib import cli, internals, pyspy  # noqa: E402
from _lib.asker import AGENT, asker_runtime, asker_settings  # noqa: E402
from _lib.child import Child, hold  # noqa: E402
from _lib.db import database_url, rows, scalar  # noqa: E402
from _lib.stats import pct_floor  # noqa: E402
from _lib.timing import wait_pending_armed  # noqa: E402

from dbos_agents.client import AgentClient  # noqa: E402

DB = "dbos_agents_bench_trace"


def install_sql_hook() -> None:
    def before(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        internals.record("sql:" + " ".join(statement.split())[:150])

    def after(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        internals.record("sql end:" + " ".join(statement.split())[:40])

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", before)
    sa.event.listen(sa.engine.Engine, "after_cursor_execute", after)


async def worker(url: str, park_after: float | None, out: str) -> None:
    if os.environ.get("SWITCH"):
        sys.setswitchinterval(float(os.environ["SWITCH"]))
    missing = internals.install_hooks()
    install_sql_hook()
    if os.environ.get("SCRIPT_PARTS"):
        internals.install_script_hook()
    settings = asker_settings(
        database_url=url, executor_id="bench-trace", park_after_sec=park_after
    )
    rt = asker_runtime(settings, timedelta(hours=1))
    await rt.launch()
    internals.install_dbos_hooks()

    def dump() -> None:
        Path(out).write_text(json.dumps(internals.events_snapshot()))
        print("DUMPED", flush=True)

    await hold(rt, "READY " + ",".join(missing), dump)


def finished_ms(engine: sa.Engine, wf: str) -> float:
    sql = "SELECT status, updated_at FROM dbos.workflow_status WHERE workflow_uuid = :w"
    while not (found := rows(engine, sql, w=wf)) or found[0].status != "SUCCESS":
        time.sleep(0.005)
    return float(found[0].updated_at)


def diagnosis_settings(url: str) -> None:
    """The bench database's settings for ``PGLOG`` (the server logs every statement's
    duration) and ``PLANS=<ms>`` (the analyzed plan of every statement slower than that)."""
    settings: list[str] = []
    if os.environ.get("PGLOG"):
        settings.append("log_min_duration_statement = 0")
    if os.environ.get("PLANS"):
        settings += [
            "session_preload_libraries = 'auto_explain'",
            f"auto_explain.log_min_duration = '{float(os.environ['PLANS'])}ms'",
            "auto_explain.log_analyze = on",
            "auto_explain.log_buffers = on",
        ]
    if settings:
        admin = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
        with admin.connect() as conn:
            for setting in settings:
                conn.execute(sa.text(f"ALTER DATABASE {DB} SET {setting}"))
            conn.commit()
        admin.dispose()


def analyze(
    events: list[tuple[float, str]], t0s: list[float], skip: int
) -> tuple[dict[str, list[float]], dict[str, list[int]], list[tuple[float, str]]]:
    """Each event filed under the latest ``t0`` before it: ms since t0 per phase name (the
    k-th occurrence is ``name#k``), statements before it, and the middle sample's timeline."""
    per: dict[str, list[float]] = defaultdict(list)
    sqls: dict[str, list[int]] = defaultdict(list)
    bounds = [*t0s[1:], float("inf")]
    timeline: list[tuple[float, str]] = []
    i = 0
    for k, (t0, nxt) in enumerate(zip(t0s, bounds, strict=True)):
        while i < len(events) and events[i][0] < t0:
            i += 1
        if k < skip:
            continue
        seen: dict[str, int] = defaultdict(int)
        nsql = 0
        j = i
        while j < len(events) and events[j][0] < nxt:
            t, n = events[j]
            if k == (skip + len(t0s)) // 2:
                timeline.append(((t - t0) * 1000, n))
            if "sql:" in n or n.startswith("client"):
                nsql += 1
            else:
                seen[n] += 1
                name = n if seen[n] == 1 else f"{n}#{seen[n]}"
                ms = (t - t0) * 1000
                if ms < 1000:
                    per[name].append(ms)
                    sqls[name].append(nsql)
            j += 1
    return per, sqls, timeline


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["parked", "fresh"], default="parked")
    cli.options(ap, samples=200)
    ap.add_argument(
        "--skip",
        type=int,
        default=100,
        help="resumes left out of the figures: psycopg prepares a statement at its sixth run on"
        " a connection, and DBOS's pool hands its 20 out in turn",
    )
    ap.add_argument("--park-after", type=float, default=1.0)
    ap.add_argument(
        "--parked", type=int, default=0, help="sessions started first and left waiting (scale)"
    )
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--database-url")
    ap.add_argument("--out", default="/tmp/resume-trace.json")
    ap.add_argument("--sql", action="store_true", help="print the statement timeline of one sample")
    ap.add_argument("--py-spy", help="record the worker with py-spy during the resumes (raw)")
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    if args.worker:
        park = None if args.mode == "fresh" else args.park_after
        asyncio.run(worker(args.database_url, park, args.out))
        return
    url = database_url(None, DB)
    diagnosis_settings(url)
    cmd = [sys.executable, __file__, "--worker", "--mode", args.mode, "--database-url", url]
    cmd += ["--park-after", str(args.park_after), "--out", args.out]
    proc = Child(cmd)
    try:
        ready = proc.expect("READY", 600)
    except RuntimeError as exc:
        raise SystemExit(f"worker: {exc}") from exc
    if ready[6:]:
        print("hooks not found:", ready[6:])
    client = AgentClient(url)
    engine = client.engine
    client_events: list[tuple[float, str]] = []

    def client_sql(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        client_events.append((time.time(), "client sql:" + " ".join(statement.split())[:80]))

    sa.event.listen(engine, "before_cursor_execute", client_sql)
    sa.event.listen(
        engine, "checkout", lambda *a: client_events.append((time.time(), "client checkout"))
    )
    sa.event.listen(
        engine, "commit", lambda *a: client_events.append((time.time(), "client commit"))
    )
    t0s: list[float] = []
    ends: list[float] = []
    submit_ms: list[float] = []

    def started() -> tuple[str, str, str]:
        sid = client.start(AGENT, "please confirm")
        row = wait_pending_armed(client, sid)
        return sid, row.owner_workflow_id, row.tool_call_id

    def resume(sid: str, wf: str, call: str) -> None:
        time.sleep(0.05)
        t0 = time.time()
        out = client.submit_tool_result(sid, call, result={"ok": True, "note": "trace"})
        client_events.append((time.time(), "client submit returned"))
        submit_ms.append((time.time() - t0) * 1000)
        assert out.status == "accepted", out
        t0s.append(t0)
        time.sleep(0.15)  # no polls while the run resumes: they would compete for the CPU
        ends.append(finished_ms(engine, wf) - t0 * 1000)

    spy = None

    def record_worker() -> None:
        nonlocal spy
        if args.py_spy:
            spy = pyspy.record(proc.pid, args.py_spy, "--threads", rate=2000)
            time.sleep(1.0)

    def waiting_count() -> int:
        sql = "SELECT count(*) FROM dbos_agents.pending_calls WHERE status = 'waiting'"
        return int(scalar(engine, sql))

    try:
        for _ in range(args.parked):
            client.start(AGENT, "stay parked")
        while args.parked and waiting_count() < args.parked:
            time.sleep(0.5)
        if os.environ.get("ANALYZE"):  # fresh planner statistics (diagnosis)
            with engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT")
                conn.execute(sa.text("ANALYZE"))
        if os.environ.get("PLANS"):
            log = Path("/var/log/postgresql/postgresql-15-main.log")
            print("server log size at the resumes:", log.stat().st_size if log.exists() else "?")
        if args.mode == "parked":
            waiting = [started() for _ in range(args.samples)]
            time.sleep(args.park_after + 2)
            record_worker()
            for w in waiting:
                resume(*w)
        else:
            record_worker()
            for _ in range(args.samples):
                w = started()
                time.sleep(0.2)
                resume(*w)
        if spy is not None:
            pyspy.stop(spy)
        os.kill(proc.pid, signal.SIGUSR1)
        proc.expect("DUMPED", 3600)
    finally:
        proc.stop(30)
    events = sorted([*((t, n) for t, n in json.loads(Path(args.out).read_text())), *client_events])
    per, sqls, timeline = analyze(events, t0s, args.skip)
    print_phases(args, per, sqls, timeline, len(t0s), submit_ms, ends)


def print_phases(
    args: Any,
    per: dict[str, list[float]],
    sqls: dict[str, list[int]],
    timeline: list[tuple[float, str]],
    n: int,
    submit_ms: list[float],
    ends: list[float],
) -> None:
    print(
        f"mode {args.mode}, {n - args.skip} resumes (after {args.skip}); ms since t0 (the submit's start)"
    )
    print(f"{'phase ends':32} {'p50':>7} {'p90':>7} {'n':>5} {'sql before':>10}")
    submit_ms, ends = submit_ms[args.skip :], ends[args.skip :]
    print(f"{'submit returned':32} {pct_floor(submit_ms, 50):7.1f} {pct_floor(submit_ms, 90):7.1f}")
    for name in sorted(per, key=lambda n: statistics.median(per[n])):
        xs = per[name]
        print(
            f"{name:32} {pct_floor(xs, 50):7.1f} {pct_floor(xs, 90):7.1f} {len(xs):5d}"
            f" {statistics.median(sqls[name]):10.0f}"
        )
    print(
        f"{'finished (updated_at)':32} {pct_floor(ends, 50):7.1f} {pct_floor(ends, 90):7.1f} {len(ends):5d}"
    )
    if args.sql:
        print("\ntimeline of the middle sample:")
        for ms, name in timeline:
            print(f"  {ms:7.2f}  {name}")


if __name__ == "__main__":
    main()
