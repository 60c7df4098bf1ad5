"""Client-tool submit -> resume latency, and 1,000 sessions waiting at once, in one run.

Three sections, all in this one process (one AgentRuntime, which launches DBOS; one
AgentClient as a separate object doing the submits from threads, as an API server would):

1. Sequential. An agent whose turn 0 calls the client tool ``confirm`` and whose turn 1
   answers. For each session: start it, poll ``client.pending(session_id=sid)`` every 5 ms
   until its row appears, then also wait until the workflow is *armed* in ``recv`` (its
   ``DBOS.sleep`` timeout checkpoint exists in ``dbos.operation_outputs``; without that
   check a fast submit can land before ``recv`` and be served from the buffered message,
   which is a different path). Then t0 = ``time.time()`` in the submitting thread just
   before ``client.submit_tool_result``.
2. Concurrent. Start N sessions (``client.start`` from 8 threads, in waves of
   ``--start-wave`` each armed before the next; ``0`` starts all at once), wait until all N
   are armed, record threads and RSS against the same figures taken right after launch
   (and right before the burst), then submit to all N at once from 8 threads and measure
   per-submit latency and the total drain time. Sessions that fail are counted and the
   exceptions DBOS logged for them are tabulated, instead of aborting the run.
3. Raw-DBOS floor, interleaved with section 1 so drift hits both: a workflow doing only
   ``await DBOS.recv_async(topic)``, woken by ``DBOSClient.send`` from a thread (the same
   kind of sync client call the submit is), armed the same way before t0.

"Resumed" is defined as **the run finished**: DBOS recorded the workflow's outcome. Its
timestamp is ``dbos.workflow_status.updated_at`` (ms since the epoch, Postgres ``now()`` of
the outcome transaction), read after the fact, so the measurement does not depend on how
fast anybody polls and costs nothing on the critical path. For our sessions this includes
the wake-up, one more model turn (whose transaction records the tool result) and ``finish_run``. The
secondary metric, "tool message recorded", is ``dbos_agents.messages.created_at`` of the
tool message (µs; ``now()`` of the recording transaction, i.e. when it began). The same host
clock serves ``time.time()`` and Postgres, so the differences are meaningful.

Why not ``await handle.result()`` as the clock: ``SessionHandle.result()`` goes through
``DBOS.retrieve_workflow_async(...).get_result()``, which polls the database with DBOS's
default 1 s interval, so a caller sees ~1 s whatever the real latency; a few samples of that
are printed separately. Waiting in this bench uses ``get_result(polling_interval_sec=0.02)``
(sequential) and one bulk SQL query every 50 ms (concurrent): the waits only pace the loop,
the figures come from the recorded timestamps. Bulk SQL rather than 1,000 awaited handles,
because each handle polls through its own thread hop and would itself load the 2 cores
(the worker is GIL-bound here; "worker CPU s" next to wall time in the phase tables shows it).

DBOS wakes ``recv`` with LISTEN/NOTIFY (a trigger on the notifications table; the
worker's listener thread sets the waiter's event), so ``queue_polling_interval_sec``
(the default here: starts are claimed on notification, see runtime/starts.py) affects only
how fast a *start* is dequeued, never a resume.

    python bench/submit_latency.py [--database-url URL] [--sequential 1000]
        [--concurrent 1000] [--start-wave 100] [--raw 200] [--handle-samples 5] [--quick]
        [--json]

``--concurrent 0`` skips section 2. ``--json`` moves the report to stderr and prints one JSON
line of every latency sample (ms) on stdout, for bench/all.py's tables and plots.

Without --database-url it uses DBOS_AGENTS_DATABASE_URL, else the local server at
127.0.0.1:5432 (database dbos_agents_bench_submit, recreated).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import platform
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from importlib.metadata import version
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, WorkflowHandleAsync
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dbos_agents import Agent, AgentRuntime, ModelResponse, Settings, client_tool
from dbos_agents.client import AgentClient
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from dbos_agents.testing import create_fresh_database

AGENT = "asker"
RAW_TOPIC = "bench.raw"
POLL_SEC = 0.005  # pending/armed polls: before t0, they only pace the loop
FINISH_POLL_SEC = 0.02  # after t0: coarser, so polling steals less CPU from the run
BULK_POLL_SEC = 0.05
SUBMIT_THREADS = 8
ARM_TIMEOUT_SEC = 300.0

console = Console()


class ConfirmIn(BaseModel):
    """Ask the user to confirm something."""

    question: str


class ConfirmOut(BaseModel):
    ok: bool
    note: str = ""


confirm = client_tool("confirm", input=ConfirmIn, output=ConfirmOut)


def respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn == 0:
        return calls(call("confirm", {"question": "go ahead?"}))
    return "confirmed"


@DBOS.workflow(name="bench.raw_wait")
async def raw_wait() -> Any:
    return await DBOS.recv_async(RAW_TOPIC, timeout_seconds=60)


# ---------------------------------------------------------------------------- measuring


def pct(xs: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))]


def proc_status() -> dict[str, int]:
    out: dict[str, int] = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Threads", "VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])
    return out


def host_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole host, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


class CpuMeter:
    """Worker-process CPU seconds and host-wide CPU busy share over an interval."""

    def __init__(self) -> None:
        self.proc0 = time.process_time()
        self.host0 = host_cpu()
        self.wall0 = time.perf_counter()

    def read(self) -> tuple[float, float, float]:
        """(wall s, this process's CPU s, host busy % over all cores)."""
        busy, total = host_cpu()
        host = 100 * (busy - self.host0[0]) / max(1, total - self.host0[1])
        return time.perf_counter() - self.wall0, time.process_time() - self.proc0, host


@dataclass
class Snapshot:
    label: str
    active: int
    threads: int
    rss_mb: float
    hwm_mb: float
    dbos_executor: int

    @classmethod
    def take(cls, label: str) -> Snapshot:
        st = proc_status()
        return cls(
            label,
            threading.active_count(),
            st["Threads"],
            st["VmRSS"] / 1024,
            st["VmHWM"] / 1024,
            sum(1 for t in threading.enumerate() if t.name.startswith("dbos-executor-")),
        )


Phase = tuple[str, float, float | None, float | None]
"""(label, wall s, worker-process CPU s, host CPU busy %)."""


@dataclass
class Metrics:
    rows: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value_ms: float) -> None:
        self.rows.setdefault(name, []).append(value_ms)


def latency_table(title: str, metrics: Metrics, primary: str | None = None) -> Table:
    table = Table(title=title)
    for col in ("metric (ms)", "n", "p50", "p90", "p99", "max", "min"):
        table.add_column(col, justify="left" if col.startswith("metric") else "right")
    for name, xs in metrics.rows.items():
        label = f"[bold]{name}  (primary)[/bold]" if name == primary else name
        table.add_row(
            label,
            str(len(xs)),
            *(f"{pct(xs, q):.1f}" for q in (50, 90, 99)),
            f"{max(xs):.1f}",
            f"{min(xs):.1f}",
        )
    return table


def phase_table(title: str, phases: Sequence[Phase]) -> Table:
    table = Table(title=title)
    table.add_column("phase")
    for col in ("wall s", "worker CPU s", "host CPU busy % (2 cores)"):
        table.add_column(col, justify="right")
    for label, wall, cpu, host in phases:
        table.add_row(
            label,
            f"{wall:.2f}",
            "" if cpu is None else f"{cpu:.2f}",
            "" if host is None else f"{host:.0f}",
        )
    return table


# ---------------------------------------------------------------------------- DB polling

_ARMED_SQL = sa.text(
    "SELECT 1 FROM dbos.operation_outputs WHERE workflow_uuid = :wf"
    " AND function_name = 'DBOS.sleep' LIMIT 1"
)


def wait_pending_and_armed(client: AgentClient, sid: str, wf: str) -> str:
    """Poll until the pending row exists and the workflow sits in recv; returns the call id."""
    deadline = time.monotonic() + 60
    tool_call_id: str | None = None
    while tool_call_id is None:
        rows = client.pending(session_id=sid)
        if rows:
            tool_call_id = rows[0].tool_call_id
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"no pending row for {sid}")
        time.sleep(POLL_SEC)
    wait_armed(client.engine, wf, deadline)
    return tool_call_id


def wait_armed(engine: sa.Engine, wf: str, deadline: float | None = None) -> None:
    deadline = deadline or time.monotonic() + 60
    while True:
        with engine.connect() as conn:
            if conn.execute(_ARMED_SQL, {"wf": wf}).first() is not None:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"workflow {wf} never reached recv")
        time.sleep(POLL_SEC)


def timed_submit(client: AgentClient, sid: str, tool_call_id: str) -> tuple[float, float]:
    """(t0 epoch s, call duration ms); t0 taken in this thread just before the call."""
    t0 = time.time()
    p0 = time.perf_counter()
    out = client.submit_tool_result(sid, tool_call_id, result={"ok": True, "note": "bench"})
    dur = (time.perf_counter() - p0) * 1000
    if out.status != "accepted":
        raise RuntimeError(f"submit for {sid} was {out.status} ({out.reason})")
    return t0, dur


def timed_send(client: AgentClient, wf: str) -> tuple[float, float]:
    t0 = time.time()
    p0 = time.perf_counter()
    client.dbos.send(wf, {"ok": True}, topic=RAW_TOPIC)
    return t0, (time.perf_counter() - p0) * 1000


Connect = Callable[[sa.Engine], sa.Connection]
"""How the timing reads get a connection (bench/parked.py passes one that retries)."""


def finish_times(
    engine: sa.Engine, wfs: Sequence[str], connect: Connect = sa.Engine.connect
) -> dict[str, tuple[str, float | None]]:
    """workflow id -> (DBOS status, outcome-recorded epoch ms or None if not finished)."""
    with connect(engine) as conn:
        rows = conn.execute(
            sa.text(
                "SELECT workflow_uuid, status, updated_at FROM dbos.workflow_status"
                " WHERE workflow_uuid = ANY(:wfs)"
            ),
            {"wfs": list(wfs)},
        ).all()
    done = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
    return {
        r.workflow_uuid: (r.status, float(r.updated_at) if r.status in done else None) for r in rows
    }


def tool_message_times(
    engine: sa.Engine, sids: Sequence[str], connect: Connect = sa.Engine.connect
) -> dict[str, float]:
    """session id -> epoch ms at which the transaction recording the tool message began."""
    with connect(engine) as conn:
        rows = conn.execute(
            sa.text(
                "SELECT session_id, extract(epoch FROM created_at) * 1000 AS ms"
                " FROM dbos_agents.messages WHERE session_id = ANY(:s) AND role = 'tool'"
            ),
            {"s": list(sids)},
        ).all()
    return {r.session_id: float(r.ms) for r in rows}


# ---------------------------------------------------------------------------- sections


async def one_session(rt: AgentRuntime, client: AgentClient, m: Metrics) -> None:
    handle = await rt.start(AGENT, "please confirm")
    sid, wf = handle.session_id, handle.workflow_id
    tcid = await asyncio.to_thread(wait_pending_and_armed, client, sid, wf)
    t0, dur = await asyncio.to_thread(timed_submit, client, sid, tcid)
    wh: WorkflowHandleAsync[dict[str, Any]] = await DBOS.retrieve_workflow_async(wf)
    out = await wh.get_result(polling_interval_sec=FINISH_POLL_SEC)
    seen = time.time()
    assert out["status"] == "completed" and out["turns"] == 2, out
    (status, fin_ms) = (await asyncio.to_thread(finish_times, client.engine, [wf]))[wf]
    tool_ms = (await asyncio.to_thread(tool_message_times, client.engine, [sid]))[sid]
    assert status == "SUCCESS" and fin_ms is not None
    m.add("submit -> run finished (workflow_status.updated_at)", fin_ms - t0 * 1000)
    m.add("submit -> tool message recorded (next model step began its write)", tool_ms - t0 * 1000)
    m.add("submit call itself (client.submit_tool_result)", dur)
    m.add("submit -> caller saw finish (20 ms get_result poll)", (seen - t0) * 1000)


async def one_raw(client: AgentClient, m: Metrics) -> None:
    handle = await DBOS.start_workflow_async(raw_wait)
    wf = handle.get_workflow_id()
    await asyncio.to_thread(wait_armed, client.engine, wf)
    t0, dur = await asyncio.to_thread(timed_send, client, wf)
    out = await handle.get_result()
    seen = time.time()
    assert out == {"ok": True}, out
    (status, fin_ms) = (await asyncio.to_thread(finish_times, client.engine, [wf]))[wf]
    assert status == "SUCCESS" and fin_ms is not None
    m.add("send -> workflow finished (workflow_status.updated_at)", fin_ms - t0 * 1000)
    m.add("send call itself (DBOSClient.send)", dur)
    m.add("send -> caller saw finish (local task handle)", (seen - t0) * 1000)


async def handle_result_samples(rt: AgentRuntime, client: AgentClient, n: int) -> list[float]:
    """What a caller sees from ``await handle.result()`` right after submitting."""
    out: list[float] = []
    for _ in range(n):
        handle = await rt.start(AGENT, "please confirm")
        tcid = await asyncio.to_thread(
            wait_pending_and_armed, client, handle.session_id, handle.workflow_id
        )
        t0, _ = await asyncio.to_thread(timed_submit, client, handle.session_id, tcid)
        res = await handle.result()
        out.append((time.time() - t0) * 1000)
        assert res.status == "completed", res
    return out


def wait_states(engine: sa.Engine, sids: Sequence[str]) -> dict[str, tuple[str, bool]]:
    """session id -> (DBOS workflow status, pending row waiting and workflow armed in recv).

    A session's first run is the workflow named by the session id."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT w.workflow_uuid, w.status,"
                " EXISTS (SELECT 1 FROM dbos.operation_outputs o"
                "   WHERE o.workflow_uuid = w.workflow_uuid AND o.function_name = 'DBOS.sleep')"
                " AND EXISTS (SELECT 1 FROM dbos_agents.pending_calls p"
                "   WHERE p.root_session_id = w.workflow_uuid AND p.status = 'waiting') AS armed"
                " FROM dbos.workflow_status w WHERE w.workflow_uuid = ANY(:s)"
            ),
            {"s": list(sids)},
        ).all()
    return {r.workflow_uuid: (r.status, bool(r.armed)) for r in rows}


def open_calls(engine: sa.Engine, sids: Sequence[str]) -> list[tuple[str, str]]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT root_session_id, tool_call_id FROM dbos_agents.pending_calls"
                " WHERE root_session_id = ANY(:s) AND status = 'waiting'"
            ),
            {"s": list(sids)},
        ).all()
    return [(r.root_session_id, r.tool_call_id) for r in rows]


class ErrorLog(logging.Filter):
    """Counts the exceptions DBOS logs for failed workflows (and keeps their tracebacks
    off the console, so the tables stay readable)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            frames = traceback.extract_tb(exc.__traceback__)
            ours = [f for f in frames if "dbos_agents" in f.filename]
            where = (
                f" [in {ours[-1].name}, {ours[-1].filename.split('dbos_agents/')[-1]}:{ours[-1].lineno}]"
                if ours
                else ""
            )
            if any(f.filename.endswith("dbos/_datasource.py") for f in frames):
                where += " [DBOS datasource transaction]"
            self.counts[f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}{where}"] += 1
            return False
        return True


@dataclass
class Concurrent:
    snaps: list[Snapshot]
    metrics: Metrics
    phases: list[Phase]
    problems: list[str]


async def concurrent(client: AgentClient, n: int, wave: int, baseline: Snapshot) -> Concurrent:
    """Start n sessions (in waves of ``wave``; 0 = all at once), let them all wait, then
    submit to every one from SUBMIT_THREADS threads. Failures are counted, not fatal."""
    out = Concurrent(
        [baseline, Snapshot.take("before the burst (after sections 1+3)")], Metrics(), [], []
    )
    loop = asyncio.get_running_loop()
    failed: dict[str, str] = {}
    with ThreadPoolExecutor(SUBMIT_THREADS, thread_name_prefix="bench-submit") as pool:
        cpu = CpuMeter()
        sids: list[str] = []
        armed: set[str] = set()
        step = wave or n
        for lo in range(0, n, step):
            batch = list(
                await asyncio.gather(
                    *(
                        loop.run_in_executor(pool, client.start, AGENT, f"bulk {i}")
                        for i in range(lo, min(n, lo + step))
                    )
                )
            )
            sids += batch
            deadline = time.monotonic() + ARM_TIMEOUT_SEC
            todo = set(batch)
            while todo:
                await asyncio.sleep(0.25)
                for sid, (status, ok) in (
                    await asyncio.to_thread(wait_states, client.engine, list(todo))
                ).items():
                    if ok and status == "PENDING":
                        armed.add(sid)
                        todo.discard(sid)
                    elif status not in ("PENDING", "ENQUEUED"):
                        failed[sid] = status
                        todo.discard(sid)
                if todo and time.monotonic() > deadline:
                    out.problems.append(
                        f"{len(todo)} sessions not armed {ARM_TIMEOUT_SEC:.0f}s after their start"
                    )
                    break
        how = f"in waves of {wave}" if wave and wave < n else "all at once"
        out.phases.append((f"start {n} ({how}) -> {len(armed)} armed in recv", *cpu.read()))
        if failed:
            out.problems.append(
                f"{len(failed)} of {n} sessions failed before reaching recv"
                f" (DBOS status {sorted(set(failed.values()))})"
            )
        out.snaps.append(Snapshot.take(f"{len(armed)} sessions waiting"))
        idle = CpuMeter()
        await asyncio.sleep(5.0)
        out.phases.append((f"{len(armed)} waiting, idle 5 s", *idle.read()))
        out.snaps.append(Snapshot.take(f"{len(armed)} sessions waiting, +5 s idle"))

        calls_ = [
            c for c in await asyncio.to_thread(open_calls, client.engine, sids) if c[0] in armed
        ]
        submitted: dict[str, tuple[float, float]] = {}
        submit_errors: Counter[str] = Counter()

        async def submit_one(sid: str, tcid: str) -> None:
            try:
                submitted[sid] = await loop.run_in_executor(pool, timed_submit, client, sid, tcid)
            except Exception as exc:
                submit_errors[f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"] += 1

        cpu = CpuMeter()
        submits = asyncio.gather(*(submit_one(sid, tcid) for sid, tcid in calls_))
        finished: dict[str, float] = {}
        ended_badly: dict[str, str] = {}
        deadline = time.monotonic() + ARM_TIMEOUT_SEC
        left = [sid for sid, _ in calls_]
        while left:
            await asyncio.sleep(BULK_POLL_SEC)
            for wf, (status, fin) in (
                await asyncio.to_thread(finish_times, client.engine, left)
            ).items():
                if fin is not None:
                    if status == "SUCCESS":
                        finished[wf] = fin
                    else:
                        ended_badly[wf] = status
            left = [s for s in left if s not in finished and s not in ended_badly]
            if submits.done() and submit_errors:
                left = [s for s in left if s in submitted]
            if left and time.monotonic() > deadline:
                out.problems.append(
                    f"{len(left)} sessions still running {ARM_TIMEOUT_SEC:.0f}s after the submits"
                )
                break
        drain = cpu.read()
        await submits
        if submit_errors:
            out.problems += [f"submit failed x{c}: {e}" for e, c in submit_errors.items()]
        if ended_badly:
            out.problems.append(
                f"{len(ended_badly)} of {len(calls_)} sessions ended badly after their submit"
                f" (DBOS status {sorted(set(ended_badly.values()))})"
            )
        if submitted:
            first = min(t0 for t0, _ in submitted.values())
            out.phases.append(
                (
                    f"all {len(submitted)} submits returned (first t0 -> last return)",
                    max(t0 + d / 1000 for t0, d in submitted.values()) - first,
                    None,
                    None,
                )
            )
            if finished:
                out.phases.append(
                    (
                        f"drain: first submit -> last of {len(finished)} runs finished",
                        max(finished.values()) / 1000 - first,
                        None,
                        None,
                    )
                )
        out.phases.append((f"drain as seen by the {BULK_POLL_SEC * 1000:.0f} ms poller", *drain))
    out.snaps.append(Snapshot.take("after drain"))
    tool_ms = await asyncio.to_thread(tool_message_times, client.engine, list(finished))
    for sid, fin in finished.items():
        t0 = submitted[sid][0]
        out.metrics.add("submit -> run finished (workflow_status.updated_at)", fin - t0 * 1000)
        out.metrics.add(
            "submit -> tool message recorded (next model step began its write)", tool_ms[sid] - t0 * 1000
        )
    for _, dur in submitted.values():
        out.metrics.add("submit call itself (client.submit_tool_result)", dur)
    return out


async def run(
    url: str, sequential: int, n_concurrent: int, wave: int, n_raw: int, handles: int
) -> dict[str, Any]:
    """Print the report; return every latency sample (ms) for ``--json``.

    ``n_concurrent=0`` skips section 2 (bench/all.py wants sections 1+3 only)."""
    settings = Settings(
        database_url=url,
        executor_id="bench-submit",
        log_level="ERROR",
        worker_concurrency=None,
    )
    rt = AgentRuntime(
        [Agent(AGENT, tools=[confirm], max_turns=3, tool_timeout=timedelta(minutes=30))],
        ScriptedModel(respond=respond),
        settings=settings,
    )
    await rt.launch()
    baseline = Snapshot.take("just after launch (baseline)")
    errors = ErrorLog()
    logging.getLogger("dbos").addFilter(errors)
    client = AgentClient(url, settings=settings)
    try:
        # Warm up both paths.
        await one_session(rt, client, Metrics())
        await one_raw(client, Metrics())

        ours, raw = Metrics(), Metrics()
        every = max(1, sequential // max(1, n_raw))
        cpu = CpuMeter()
        for i in range(max(sequential, n_raw)):
            if (
                i % every == 0
                and len(raw.rows.get("send call itself (DBOSClient.send)", [])) < n_raw
            ):
                await one_raw(client, raw)
            if i < sequential:
                await one_session(rt, client, ours)
        seq_phase: Phase = (
            f"sections 1+3: {sequential} sessions + {n_raw} raw, one at a time",
            *cpu.read(),
        )
        while len(raw.rows.get("send call itself (DBOSClient.send)", [])) < n_raw:
            await one_raw(client, raw)
        handle_ms = await handle_result_samples(rt, client, handles)

        primary = "submit -> run finished (workflow_status.updated_at)"
        console.print(
            latency_table(
                f"1. sequential submit -> resume, {sequential} sessions one at a time",
                ours,
                primary,
            )
        )
        console.print(
            latency_table(
                f"3. raw-DBOS floor: recv_async woken by DBOSClient.send, {n_raw} iterations",
                raw,
                "send -> workflow finished (workflow_status.updated_at)",
            )
        )
        if handle_ms:
            console.print(
                "await handle.result() right after submit (DBOS 1 s result polling): "
                + ", ".join(f"{x:.0f}" for x in handle_ms)
                + " ms"
            )
        console.print(phase_table("1+3. cost of the sequential loop", [seq_phase]))
        console.print(
            f"per sequential session incl. start, dequeue and polling: "
            f"{seq_phase[1] / max(1, sequential) * 1000:.0f} ms wall,"
            f" {(seq_phase[2] or 0) / max(1, sequential) * 1000:.0f} ms worker CPU"
        )

        ours_p50 = pct(ours.rows[primary], 50)
        raw_p50 = pct(raw.rows["send -> workflow finished (workflow_status.updated_at)"], 50)
        tool_p50 = pct(ours.rows["submit -> tool message recorded (next model step began its write)"], 50)

        c: Concurrent | None = None
        if n_concurrent > 0:  # 0: sections 1+3 only (bench/all.py)
            c = await concurrent(client, n_concurrent, wave, baseline)
            waiting = c.snaps[2]
            armed = int(waiting.label.split()[0])
            st = Table(title=f"2. worker process while {armed} sessions wait in recv")
            for col in (
                "when",
                "threading.active_count()",
                "/proc Threads",
                "dbos-executor threads",
                "VmRSS MB",
                "VmHWM MB",
            ):
                st.add_column(col, justify="left" if col == "when" else "right")
            for snap in c.snaps:
                st.add_row(
                    snap.label,
                    str(snap.active),
                    str(snap.threads),
                    str(snap.dbos_executor),
                    f"{snap.rss_mb:.1f}",
                    f"{snap.hwm_mb:.1f}",
                )
            console.print(st)
            console.print(
                f"while waiting vs baseline: threads +{waiting.threads - baseline.threads}"
                f" ({(waiting.threads - baseline.threads) / max(1, armed):.3f} per session),"
                f" RSS +{waiting.rss_mb - baseline.rss_mb:.1f} MB"
                f" ({(waiting.rss_mb - baseline.rss_mb) * 1024 / max(1, armed):.1f} KB per session)"
            )
            if c.metrics.rows:
                console.print(
                    latency_table(
                        f"2. submit -> resume under load: {armed} waiting sessions,"
                        f" submitted from {SUBMIT_THREADS} threads",
                        c.metrics,
                        primary,
                    )
                )
            console.print(phase_table("2. phases", c.phases))
            for problem in c.problems:
                console.print(f"[red]2. PROBLEM: {escape(problem)}[/red]")
        if errors.counts:
            et = Table(title="exceptions DBOS logged for failed workflows")
            et.add_column("count", justify="right")
            et.add_column("exception")
            for text, count in errors.counts.most_common():
                et.add_row(str(count), escape(text))
            console.print(et)

        print(f"ratio {ours_p50 / raw_p50:.2f}  (sequential p50 submit->run finished / raw p50)")
        print(
            f"ratio to tool message {tool_p50 / raw_p50:.2f}"
            "  (sequential p50 submit->tool message recorded / raw p50)"
        )
        return {
            "sequential": sequential,
            "raw": n_raw,
            "concurrent": n_concurrent,
            "primary": primary,
            "raw_primary": "send -> workflow finished (workflow_status.updated_at)",
            "samples_ms": {
                "sequential": ours.rows,
                "raw": raw.rows,
                "concurrent": c.metrics.rows if c else {},
            },
            "handle_result_ms": handle_ms,
            "versions": {
                "python": platform.python_version(),
                "dbos": version("dbos"),
                "dbos-agents": version("dbos-agents"),
            },
        }
    finally:
        client.close()
        await rt.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--database-url", default=os.environ.get("DBOS_AGENTS_DATABASE_URL"))
    p.add_argument("--sequential", type=int, default=1000)
    p.add_argument("--concurrent", type=int, default=1000)
    p.add_argument(
        "--start-wave",
        type=int,
        default=100,
        help="section 2: start sessions in waves of this many, each armed before the next"
        " (0 = all at once)",
    )
    p.add_argument("--raw", type=int, default=200)
    p.add_argument("--handle-samples", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="smoke run: 50/50/20, 2 handle samples")
    p.add_argument(
        "--json",
        action="store_true",
        help="report on stderr; stdout gets one JSON line with every latency sample in ms",
    )
    args = p.parse_args()
    if args.quick:
        args.sequential, args.concurrent, args.raw, args.handle_samples = 50, 50, 20, 2
    url = args.database_url or create_fresh_database(
        "postgresql://postgres@127.0.0.1:5432/postgres", "dbos_agents_bench_submit"
    )
    # --json: the human report (rich and print alike) goes to stderr, stdout keeps the JSON
    report_to = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    with report_to:
        result = asyncio.run(
            run(
                url,
                args.sequential,
                args.concurrent,
                args.start_wave,
                args.raw,
                args.handle_samples,
            )
        )
    if args.json:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
