"""Wall-clock trace of single resumes: where the time between a submit and the run's end goes.

A worker process (one AgentRuntime) holds the sessions; this process submits, one resume at
a time, and records ``t0`` just before each submit, then sleeps 150 ms before it reads when
the run finished (no polls compete with the resume for the two cores). In the worker, hooks
record when named runtime functions return (and, for a few, start: ``name>``) and when
every statement of a SQLAlchemy engine starts and ends; the client's statements are
recorded too. Each event is filed under the latest ``t0`` before it; the k-th occurrence of
a name after ``t0`` is ``name#k``. Printed: p50 and p90 of each phase's time since ``t0``,
and the p50 number of SQLAlchemy statements before it (the datasource's statements go to
the driver directly: see the ``pg.*`` hooks).

    python bench/resume_trace.py [--mode parked|fresh] [--samples 200] [--skip 100]
        [--park-after 1] [--parked 0] [--sql] [--py-spy FILE]

``parked``: ``--samples`` sessions wait, park after ``--park-after`` s, then each is resumed
by a submit. ``fresh``: each session is answered 0.2 s after its wait is armed (in memory).
``--parked N`` first starts N sessions that stay waiting (and parked), for scale.
The first ``--skip`` resumes are left out: psycopg prepares a statement at its sixth run
on a connection, and DBOS's pool hands its 20 connections out in turn. ``--sql`` prints
the timeline of one resume. ``PGLOG=1`` sets ``log_min_duration_statement = 0`` on the
bench database (the server's log then has each statement's parse, bind and execute time).
``ANALYZE=1`` refreshes the planner's statistics once the ``--parked`` sessions wait (this
machine's server runs without autovacuum, so otherwise the tables are never analyzed; before
migration 0011 a run's end then read every open wait). ``PLANS=<ms>`` loads ``auto_explain`` in
the bench database's sessions: the server's log gets the analyzed plan of every statement
slower than that; the log's size when the resumes begin is printed.
``ROOT=<checkout>`` imports dbos_agents from another checkout (an A/B: run the two
interleaved, the machine's speed drifts by as much as a phase).

Not kept stable: the hooks name private functions; a missing one is reported and skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
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
from submit_latency import confirm, respond, wait_armed  # noqa: E402

from dbos_agents import Agent, AgentRuntime, Settings  # noqa: E402
from dbos_agents.client import AgentClient  # noqa: E402
from dbos_agents.models import ScriptedModel  # noqa: E402
from dbos_agents.testing import create_fresh_database  # noqa: E402

AGENT = "asker"
DB = "dbos_agents_bench_trace"
EVENTS: list[tuple[float, str]] = []
_lock = threading.Lock()

# (module, attribute) of functions whose return is a phase; first occurrence after t0 is
# "name", the k-th "name#k".
HOOKS = [
    ("dbos_agents.runtime.parking", "Parker.wake", "woken"),
    ("dbos_agents.runtime._dbos_parking", "claim_parked", "claimed"),
    ("dbos_agents.runtime._dbos_replay", "enter_workflow", "workflow entered"),
    ("dbos_agents.runtime.run_bounds", "begin", "begin"),
    ("dbos_agents.runtime.model_step", "model_turn", "model turn"),
    ("dbos_agents.runtime.waits", "wait_for_submission", "wait returned"),
    ("dbos_agents.runtime.run_bounds", "end", "run end"),
    ("dbos_agents.runtime.workflow", "_publish", "outcome published"),
    ("dbos_agents.runtime.workflow", "_session", "workflow returned"),
    ("dbos_agents.runtime.ledger", "Ledger.turn_state", "turn_state"),
    ("dbos_agents.runtime.ledger", "Ledger.record_turn", "record_turn"),
    ("dbos_agents.models.scripted", "ScriptedModel.complete", "model answered"),
    ("dbos_agents.store.pg", "checkout", "pg.checkout"),
    ("dbos_agents.store.pg", "script", "pg.script"),
    ("dbos_agents.store.pg", "fetch_all", "pg.fetch_all"),
]
ENTRIES = {"pg.script", "pg.fetch_all", "record_turn", "turn_state", "model turn", "run end"}
"""Hooks whose start is recorded too (as "name>")."""


def record(name: str) -> None:
    t = time.time()
    with _lock:
        EVENTS.append((t, name))


def _wrap(fn: Any, name: str) -> Any:
    if asyncio.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def awrapper(*a: Any, **kw: Any) -> Any:
            if name in ENTRIES:
                record(name + ">")
            try:
                return await fn(*a, **kw)
            finally:
                record(name)

        return awrapper

    @functools.wraps(fn)
    def wrapper(*a: Any, **kw: Any) -> Any:
        try:
            return fn(*a, **kw)
        finally:
            record(name)

    return wrapper


def install_hooks() -> list[str]:
    """Wrap each hooked function where it is defined and wherever it was imported by name."""
    import importlib

    missing = []
    for modname, attr, name in HOOKS:
        mod = importlib.import_module(modname)
        owner: Any = mod
        parts = attr.split(".")
        for p in parts[:-1]:
            owner = getattr(owner, p)
        fn = getattr(owner, parts[-1], None)
        if fn is None:
            missing.append(f"{modname}.{attr}")
            continue
        wrapped = _wrap(fn, name)
        setattr(owner, parts[-1], wrapped)
        for m in list(sys.modules.values()):
            if getattr(m, "__name__", "").startswith("dbos_agents") and m is not mod:
                for k, v in list(vars(m).items()):
                    if v is fn:
                        setattr(m, k, wrapped)
    return missing


def install_script_hook() -> None:
    """``pg.script`` with its parts timed: the client-side binding, then the round trip."""
    import psycopg

    from dbos_agents.store import pg

    async def script(engine: Any, stmts: Any) -> None:
        record("pg.script>")
        async with pg.driver(engine) as conn:
            record("pg.script checked out")
            cur = psycopg.AsyncClientCursor(conn)
            try:
                text = ";\n".join(cur.mogrify(pg.psycopg_sql(sql), ps) for sql, ps in stmts)
                record("pg.script bound")
                await cur.execute(text)
                record("pg.script executed")
            finally:
                await cur.close()
        record("pg.script")

    pg.script = script  # type: ignore[assignment]


def install_sql_hook() -> None:
    def before(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        record("sql:" + " ".join(statement.split())[:150])

    def after(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        record("sql end:" + " ".join(statement.split())[:40])

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", before)
    sa.event.listen(sa.engine.Engine, "after_cursor_execute", after)


def install_dbos_hooks() -> None:
    from dbos_agents.runtime._dbos_compat import _system_database

    sys_db = _system_database()
    for meth in ("recv_setup", "recv_check", "recv_consume"):
        fn = getattr(sys_db, meth, None)
        if fn is not None:
            setattr(sys_db, meth, _wrap(fn, meth))


async def worker(url: str, park_after: float | None, out: str) -> None:
    if os.environ.get("SWITCH"):
        sys.setswitchinterval(float(os.environ["SWITCH"]))
    missing = install_hooks()
    install_sql_hook()
    if os.environ.get("SCRIPT_PARTS"):
        install_script_hook()
    settings = Settings(
        database_url=url,
        executor_id="bench-trace",
        log_level="ERROR",
        worker_concurrency=None,
        park_after_sec=park_after,
    )
    rt = AgentRuntime(
        [Agent(AGENT, tools=[confirm], max_turns=3, tool_timeout=timedelta(hours=1))],
        ScriptedModel(respond=respond),
        settings=settings,
    )
    await rt.launch()
    install_dbos_hooks()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    def dump() -> None:
        with _lock:
            Path(out).write_text(json.dumps(EVENTS))
        print("DUMPED", flush=True)

    loop.add_signal_handler(signal.SIGUSR1, dump)
    print("READY " + ",".join(missing), flush=True)
    await stop.wait()
    await rt.shutdown()


def finished_ms(engine: sa.Engine, wf: str) -> float:
    while True:
        with engine.connect() as conn:
            row = conn.execute(
                sa.text(
                    "SELECT status, updated_at FROM dbos.workflow_status WHERE workflow_uuid = :w"
                ),
                {"w": wf},
            ).first()
        if row is not None and row.status == "SUCCESS":
            return float(row.updated_at)
        time.sleep(0.005)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["parked", "fresh"], default="parked")
    ap.add_argument("--samples", type=int, default=200)
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
    args = ap.parse_args()
    if args.worker:
        park = None if args.mode == "fresh" else args.park_after
        asyncio.run(worker(args.database_url, park, args.out))
        return
    url = create_fresh_database("postgresql://postgres@127.0.0.1:5432/postgres", DB)
    settings: list[str] = []  # the bench database's, for diagnosis
    if os.environ.get("PGLOG"):  # the server logs every statement's duration
        settings.append("log_min_duration_statement = 0")
    if os.environ.get("PLANS"):  # the plan of every slow statement
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
    cmd = [sys.executable, __file__, "--worker", "--mode", args.mode, "--database-url", url]
    cmd += ["--park-after", str(args.park_after), "--out", args.out]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("READY"):
        raise SystemExit(f"worker: {line!r}")
    if line[6:]:
        print("hooks not found:", line[6:])
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
        deadline = time.monotonic() + 60
        while not (rows := client.pending(session_id=sid)):
            if time.monotonic() > deadline:
                raise TimeoutError(sid)
            time.sleep(0.005)
        wf = rows[0].owner_workflow_id
        wait_armed(engine, wf)
        return sid, wf, rows[0].tool_call_id

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

    spy: subprocess.Popen[bytes] | None = None

    def record_worker() -> None:
        nonlocal spy
        if args.py_spy:
            spy = subprocess.Popen(
                [
                    *("py-spy", "record", "-p", str(proc.pid), "-r", "2000", "-f", "raw"),
                    *("-o", args.py_spy, "--nonblocking", "--threads"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)

    def waiting_count() -> int:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    sa.text(
                        "SELECT count(*) FROM dbos_agents.pending_calls WHERE status = 'waiting'"
                    )
                ).scalar_one()
            )

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
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        proc.send_signal(signal.SIGUSR1)
        while proc.stdout.readline().strip() != "DUMPED":
            pass
    finally:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
    events = sorted([*((t, n) for t, n in json.loads(Path(args.out).read_text())), *client_events])
    per: dict[str, list[float]] = defaultdict(list)
    sqls: dict[str, list[int]] = defaultdict(list)
    order: dict[str, float] = {}
    bounds = [*t0s[1:], float("inf")]
    timeline: list[tuple[float, str]] = []
    i = 0
    for k, (t0, nxt) in enumerate(zip(t0s, bounds, strict=True)):
        while i < len(events) and events[i][0] < t0:
            i += 1
        if k < args.skip:
            continue
        seen: dict[str, int] = defaultdict(int)
        nsql = 0
        j = i
        while j < len(events) and events[j][0] < nxt:
            t, n = events[j]
            if k == (args.skip + len(t0s)) // 2:
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
                    order.setdefault(name, statistics.median(per[name]))
            j += 1
    print(
        f"mode {args.mode}, {len(t0s) - args.skip} resumes (after {args.skip});"
        " ms since t0 (the submit's start)"
    )
    print(f"{'phase ends':32} {'p50':>7} {'p90':>7} {'n':>5} {'sql before':>10}")
    submit_ms, ends = submit_ms[args.skip :], ends[args.skip :]
    print(f"{'submit returned':32} {pct(submit_ms, 0.5):7.1f} {pct(submit_ms, 0.9):7.1f}")
    rows = sorted(per, key=lambda n: statistics.median(per[n]))
    for name in rows:
        xs = per[name]
        print(
            f"{name:32} {pct(xs, 0.5):7.1f} {pct(xs, 0.9):7.1f} {len(xs):5d}"
            f" {statistics.median(sqls[name]):10.0f}"
        )
    print(
        f"{'finished (updated_at)':32} {pct(ends, 0.5):7.1f} {pct(ends, 0.9):7.1f} {len(ends):5d}"
    )
    if args.sql:
        print("\ntimeline of the middle sample:")
        for ms, n in timeline:
            print(f"  {ms:7.2f}  {n}")


if __name__ == "__main__":
    main()
