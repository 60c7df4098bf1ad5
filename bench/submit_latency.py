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
2. Concurrent. Start N sessions, wait until all N are armed, record threads and RSS against
   the same figures taken right after launch (and right before the burst), then submit to all
   N from 8 threads and measure per-submit latency and the total drain time.
3. Raw-DBOS floor, interleaved with section 1 so drift hits both: a workflow doing only
   ``await DBOS.recv_async(topic)``, woken by ``DBOSClient.send`` from a thread (the same
   kind of sync client call the submit is), armed the same way before t0.

"Resumed" is defined as **the run finished**: DBOS recorded the workflow's outcome. Its
timestamp is ``dbos.workflow_status.updated_at`` (ms since the epoch, Postgres ``now()`` of
the outcome transaction), read after the fact, so the measurement does not depend on how
fast anybody polls and costs nothing on the critical path. For our sessions this includes
the wake-up, write #2 (tool result), one more model turn, write #1 and ``finish_run``. The
secondary metric, "tool message recorded", is ``dbos_agents.messages.created_at`` of the
tool message (µs; ``now()`` of write #2's transaction, i.e. when it began). The same host
clock serves ``time.time()`` and Postgres, so the differences are meaningful.

Why not ``await handle.result()`` as the clock: ``SessionHandle.result()`` goes through
``DBOS.retrieve_workflow_async(...).get_result()``, which polls the database with DBOS's
default 1 s interval, so a caller sees ~1 s whatever the real latency; a few samples of that
are printed separately. Waiting in this bench uses ``get_result(polling_interval_sec=0.005)``
(sequential) and one bulk SQL query every 20 ms (concurrent): the waits only pace the loop,
the figures come from the recorded timestamps. Bulk SQL rather than 1,000 awaited handles,
because each handle polls through its own thread hop and would itself load the 2 cores.

DBOS wakes ``recv`` with LISTEN/NOTIFY (a trigger on the notifications table; the
worker's listener thread sets the waiter's event), so ``queue_polling_interval_sec``
(0.02 here) affects only how fast a *start* is dequeued, never a resume.

    python bench/submit_latency.py [--database-url URL] [--sequential 1000]
        [--concurrent 1000] [--raw 200] [--handle-samples 5] [--quick]

Without --database-url it uses DBOS_AGENTS_DATABASE_URL, else the local server at
127.0.0.1:5432 (database dbos_agents_bench_submit, recreated).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from dbos import DBOS
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from dbos_agents import Agent, AgentRuntime, ModelResponse, Settings, client_tool
from dbos_agents.client import AgentClient
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from dbos_agents.testing import create_fresh_database

AGENT = "asker"
RAW_TOPIC = "bench.raw"
POLL_SEC = 0.005
BULK_POLL_SEC = 0.02
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


def finish_times(
    engine: sa.Engine, wfs: Sequence[str]
) -> dict[str, tuple[str, float | None]]:
    """workflow id -> (DBOS status, outcome-recorded epoch ms or None if not finished)."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT workflow_uuid, status, updated_at FROM dbos.workflow_status"
                " WHERE workflow_uuid = ANY(:wfs)"
            ),
            {"wfs": list(wfs)},
        ).all()
    done = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
    return {
        r.workflow_uuid: (r.status, float(r.updated_at) if r.status in done else None)
        for r in rows
    }


def tool_message_times(engine: sa.Engine, sids: Sequence[str]) -> dict[str, float]:
    """session id -> epoch ms at which write #2 (the tool message) began."""
    with engine.connect() as conn:
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
    wh = await DBOS.retrieve_workflow_async(wf)
    out = await wh.get_result(polling_interval_sec=POLL_SEC)
    seen = time.time()
    assert out["status"] == "completed" and out["turns"] == 2, out
    (status, fin_ms) = (await asyncio.to_thread(finish_times, client.engine, [wf]))[wf]
    tool_ms = (await asyncio.to_thread(tool_message_times, client.engine, [sid]))[sid]
    assert status == "SUCCESS" and fin_ms is not None
    m.add("submit -> run finished (workflow_status.updated_at)", fin_ms - t0 * 1000)
    m.add("submit -> tool message recorded (write #2 began)", tool_ms - t0 * 1000)
    m.add("submit call itself (client.submit_tool_result)", dur)
    m.add("submit -> caller saw finish (5 ms get_result poll)", (seen - t0) * 1000)


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


def count_armed(engine: sa.Engine, sids: Sequence[str]) -> tuple[int, int, dict[str, int]]:
    """(pending rows waiting, workflows armed in recv, session status counts)."""
    with engine.connect() as conn:
        pending = conn.execute(
            sa.text(
                "SELECT count(*) FROM dbos_agents.pending_calls"
                " WHERE root_session_id = ANY(:s) AND status = 'waiting'"
            ),
            {"s": list(sids)},
        ).scalar_one()
        armed = conn.execute(
            sa.text(
                "SELECT count(DISTINCT workflow_uuid) FROM dbos.operation_outputs"
                " WHERE workflow_uuid = ANY(:s) AND function_name = 'DBOS.sleep'"
            ),
            {"s": list(sids)},
        ).scalar_one()
        statuses = conn.execute(
            sa.text(
                "SELECT status, count(*) FROM dbos.workflow_status"
                " WHERE workflow_uuid = ANY(:s) GROUP BY status"
            ),
            {"s": list(sids)},
        ).all()
    return int(pending), int(armed), {r[0]: int(r[1]) for r in statuses}


async def concurrent(
    client: AgentClient, n: int, baseline: Snapshot
) -> tuple[list[Snapshot], Metrics, dict[str, float]]:
    snaps = [baseline, Snapshot.take("before the burst (after sections 1+3)")]
    info: dict[str, float] = {}
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(SUBMIT_THREADS, thread_name_prefix="bench-submit") as pool:
        t_start = time.perf_counter()
        sids = list(
            await asyncio.gather(
                *(
                    loop.run_in_executor(pool, client.start, AGENT, f"bulk {i}")
                    for i in range(n)
                )
            )
        )
        info["start calls (s)"] = time.perf_counter() - t_start
        deadline = time.monotonic() + ARM_TIMEOUT_SEC
        while True:
            pending, armed, statuses = await asyncio.to_thread(count_armed, client.engine, sids)
            if pending == n and armed == n:
                break
            if time.monotonic() > deadline or any(
                s in statuses for s in ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
            ):
                raise RuntimeError(
                    f"only {pending} pending rows / {armed} armed of {n} after"
                    f" {time.perf_counter() - t_start:.0f}s; workflow statuses {statuses}"
                )
            await asyncio.sleep(0.1)
        info["start -> all armed in recv (s)"] = time.perf_counter() - t_start
        snaps.append(Snapshot.take(f"{n} sessions waiting"))
        await asyncio.sleep(2.0)
        snaps.append(Snapshot.take(f"{n} sessions waiting, +2 s idle"))

        with client.engine.connect() as conn:
            calls_ = conn.execute(
                sa.text(
                    "SELECT root_session_id, tool_call_id FROM dbos_agents.pending_calls"
                    " WHERE root_session_id = ANY(:s) AND status = 'waiting'"
                ),
                {"s": sids},
            ).all()
        assert len(calls_) == n
        submitted: dict[str, tuple[float, float]] = {}

        async def submit_one(sid: str, tcid: str) -> None:
            submitted[sid] = await loop.run_in_executor(pool, timed_submit, client, sid, tcid)

        t_sub = time.perf_counter()
        submits = asyncio.gather(*(submit_one(r.root_session_id, r.tool_call_id) for r in calls_))
        finished: dict[str, float] = {}
        deadline = time.monotonic() + ARM_TIMEOUT_SEC
        while len(finished) < n:
            await asyncio.sleep(BULK_POLL_SEC)
            left = [s for s in sids if s not in finished]
            for wf, (status, fin) in (
                await asyncio.to_thread(finish_times, client.engine, left)
            ).items():
                if fin is not None:
                    if status != "SUCCESS":
                        raise RuntimeError(f"session {wf} ended {status}")
                    finished[wf] = fin
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(finished)} of {n} finished after submits")
        await submits
        info["all submits returned (s)"] = max(t0 + d / 1000 for t0, d in submitted.values()) - (
            min(t0 for t0, _ in submitted.values())
        )
        info["first submit -> last run finished (s)"] = (
            max(finished.values()) / 1000 - min(t0 for t0, _ in submitted.values())
        )
        info["drain observed by poller (s)"] = time.perf_counter() - t_sub
    snaps.append(Snapshot.take("after drain"))
    tool_ms = await asyncio.to_thread(tool_message_times, client.engine, sids)
    m = Metrics()
    for sid in sids:
        t0, dur = submitted[sid]
        m.add("submit -> run finished (workflow_status.updated_at)", finished[sid] - t0 * 1000)
        m.add("submit -> tool message recorded (write #2 began)", tool_ms[sid] - t0 * 1000)
        m.add("submit call itself (client.submit_tool_result)", dur)
    return snaps, m, info


async def run(url: str, sequential: int, n_concurrent: int, n_raw: int, handles: int) -> None:
    settings = Settings(
        database_url=url,
        executor_id="bench-submit",
        queue_polling_interval_sec=0.02,
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
    client = AgentClient(url, settings=settings)
    try:
        # Warm up both paths.
        await one_session(rt, client, Metrics())
        await one_raw(client, Metrics())

        ours, raw = Metrics(), Metrics()
        every = max(1, sequential // max(1, n_raw))
        t_seq = time.perf_counter()
        for i in range(max(sequential, n_raw)):
            if i % every == 0 and len(raw.rows.get("send call itself (DBOSClient.send)", [])) < n_raw:
                await one_raw(client, raw)
            if i < sequential:
                await one_session(rt, client, ours)
        seq_wall = time.perf_counter() - t_seq
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
        console.print(
            f"sections 1+3 wall time {seq_wall:.1f} s"
            f" ({seq_wall / max(1, sequential) * 1000:.0f} ms per session incl. start/dequeue)"
        )

        snaps, bulk, info = await concurrent(client, n_concurrent, baseline)
        st = Table(title=f"2. worker process while {n_concurrent} sessions wait in recv")
        for col in (
            "when",
            "threading.active_count()",
            "/proc Threads",
            "dbos-executor threads",
            "VmRSS MB",
            "VmHWM MB",
        ):
            st.add_column(col, justify="left" if col == "when" else "right")
        for s in snaps:
            st.add_row(
                s.label,
                str(s.active),
                str(s.threads),
                str(s.dbos_executor),
                f"{s.rss_mb:.1f}",
                f"{s.hwm_mb:.1f}",
            )
        console.print(st)
        waiting = snaps[2]
        console.print(
            f"while waiting vs baseline: threads +{waiting.threads - baseline.threads}"
            f" ({(waiting.threads - baseline.threads) / n_concurrent:.3f} per session),"
            f" RSS +{waiting.rss_mb - baseline.rss_mb:.1f} MB"
            f" ({(waiting.rss_mb - baseline.rss_mb) * 1024 / n_concurrent:.1f} KB per session)"
        )
        console.print(
            latency_table(
                f"2. submit -> resume under load: {n_concurrent} waiting sessions,"
                f" submitted from {SUBMIT_THREADS} threads",
                bulk,
                primary,
            )
        )
        it = Table(title="2. timings")
        it.add_column("phase")
        it.add_column("seconds", justify="right")
        for k, v in info.items():
            it.add_row(k.removesuffix(" (s)"), f"{v:.2f}")
        console.print(it)

        ours_p50 = pct(ours.rows[primary], 50)
        raw_p50 = pct(raw.rows["send -> workflow finished (workflow_status.updated_at)"], 50)
        tool_p50 = pct(ours.rows["submit -> tool message recorded (write #2 began)"], 50)
        print(f"ratio {ours_p50 / raw_p50:.2f}  (sequential p50 submit->run finished / raw p50)")
        print(
            f"ratio to tool message {tool_p50 / raw_p50:.2f}"
            "  (sequential p50 submit->write #2 began / raw p50)"
        )
    finally:
        client.close()
        await rt.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--database-url", default=os.environ.get("DBOS_AGENTS_DATABASE_URL"))
    p.add_argument("--sequential", type=int, default=1000)
    p.add_argument("--concurrent", type=int, default=1000)
    p.add_argument("--raw", type=int, default=200)
    p.add_argument("--handle-samples", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="smoke run: 50/50/20, 2 handle samples")
    args = p.parse_args()
    if args.quick:
        args.sequential, args.concurrent, args.raw, args.handle_samples = 50, 50, 20, 2
    url = args.database_url or create_fresh_database(
        "postgresql://postgres@127.0.0.1:5432/postgres", "dbos_agents_bench_submit"
    )
    asyncio.run(run(url, args.sequential, args.concurrent, args.raw, args.handle_samples))


if __name__ == "__main__":
    main()
