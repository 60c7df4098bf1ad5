"""Client-tool submit -> resume latency, and 1,000 sessions waiting at once, in one run.

A submit should cost little more than DBOS's own ``send`` -> ``recv``, so the floor is
measured in the same process, interleaved with ours (drift hits both):

1. Sequential: one session at a time waits in the client tool ``confirm``, is armed in
   ``recv``, and is submitted to through ``AgentClient.submit_tool_result``.
2. Concurrent (``--concurrent``): N sessions wait at once; the worker's threads and RSS
   while they wait, then a submit to every one from 8 threads and the drain.
3. Raw-DBOS floor: a workflow in ``DBOS.recv_async`` woken by ``DBOSClient.send``.

"Resumed" means the run finished: ``dbos.workflow_status.updated_at`` of its outcome, read
after the fact, so no poll sits on the critical path (``await handle.result()`` polls every
1 s; a few samples of it are printed apart). Definitions and findings:
docs/bench-notes/submit_latency.md.

    python bench/submit_latency.py [--database-url URL] [--sequential 1000]
        [--concurrent 1000] [--start-wave 100] [--raw 200] [--handle-samples 5] [--quick]
        [--json]

``--concurrent 0`` skips section 2. ``--json`` moves the report to stderr and prints one JSON
line of every latency sample (ms) on stdout, for bench/all.py's tables and plots.

Without --database-url it uses DBOS_AGENTS_DATABASE_URL, else the local server at
127.0.0.1:5432 (database dbos_agents_bench_submit, recreated).
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import Any

from _lib import cli
from _lib.asker import AGENT, asker_runtime, asker_settings
from _lib.db import database_url
from _lib.labels import (
    CALLER_SAW,
    PRIMARY,
    RAW_CALL,
    RAW_CALLER_SAW,
    RAW_PRIMARY,
    SUBMIT_CALL,
    TOOL_MSG,
)
from _lib.procfs import CpuMeter
from _lib.stats import pct
from _lib.timing import finish_times, timed_submit, tool_message_times, wait_armed
from _lib.timing import wait_pending_armed as _wait_pending_armed
from dbos import DBOS, WorkflowHandleAsync
from rich.console import Console
from rich.markup import escape
from submit_concurrent import SUBMIT_THREADS, Concurrent, ErrorLog, concurrent
from submit_report import (
    Metrics,
    Phase,
    Snapshot,
    errors_table,
    latency_table,
    phase_table,
    snapshot_table,
)

from dbos_agents import AgentRuntime
from dbos_agents.client import AgentClient

RAW_TOPIC = "bench.raw"
FINISH_POLL_SEC = 0.02  # after t0: coarser, so polling steals less CPU from the run

console = Console()


@DBOS.workflow(name="bench.raw_wait")
async def raw_wait() -> Any:
    return await DBOS.recv_async(RAW_TOPIC, timeout_seconds=60)


def wait_pending_and_armed(client: AgentClient, sid: str, wf: str) -> str:
    """Poll until the pending row exists and the workflow sits in recv; returns the call id."""
    return _wait_pending_armed(client, sid, wf).tool_call_id


def timed_send(client: AgentClient, wf: str) -> tuple[float, float]:
    t0 = time.time()
    p0 = time.perf_counter()
    client.dbos.send(wf, {"ok": True}, topic=RAW_TOPIC)
    return t0, (time.perf_counter() - p0) * 1000


# ---------------------------------------------------------------------------- sections 1 and 3


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
    m.add(PRIMARY, fin_ms - t0 * 1000)
    m.add(TOOL_MSG, tool_ms - t0 * 1000)
    m.add(SUBMIT_CALL, dur)
    m.add(CALLER_SAW, (seen - t0) * 1000)


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
    m.add(RAW_PRIMARY, fin_ms - t0 * 1000)
    m.add(RAW_CALL, dur)
    m.add(RAW_CALLER_SAW, (seen - t0) * 1000)


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


def print_concurrent(c: Concurrent, baseline: Snapshot) -> None:
    waiting = c.snaps[2]
    armed = int(waiting.label.split()[0])
    console.print(snapshot_table(f"2. worker process while {armed} sessions wait in recv", c.snaps))
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
                PRIMARY,
            )
        )
    console.print(phase_table("2. phases", c.phases))
    for problem in c.problems:
        console.print(f"[red]2. PROBLEM: {escape(problem)}[/red]")


async def run(
    url: str, sequential: int, n_concurrent: int, wave: int, n_raw: int, handles: int
) -> dict[str, Any]:
    """Print the report; return every latency sample (ms) for ``--json``.

    ``n_concurrent=0`` skips section 2 (bench/all.py wants sections 1+3 only)."""
    settings = asker_settings(database_url=url, executor_id="bench-submit")
    rt = asker_runtime(settings, timedelta(minutes=30))
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
            if i % every == 0 and len(raw.rows.get(RAW_CALL, [])) < n_raw:
                await one_raw(client, raw)
            if i < sequential:
                await one_session(rt, client, ours)
        seq_phase: Phase = (
            f"sections 1+3: {sequential} sessions + {n_raw} raw, one at a time",
            *cpu.read(),
        )
        while len(raw.rows.get(RAW_CALL, [])) < n_raw:
            await one_raw(client, raw)
        handle_ms = await handle_result_samples(rt, client, handles)

        console.print(
            latency_table(
                f"1. sequential submit -> resume, {sequential} sessions one at a time",
                ours,
                PRIMARY,
            )
        )
        console.print(
            latency_table(
                f"3. raw-DBOS floor: recv_async woken by DBOSClient.send, {n_raw} iterations",
                raw,
                RAW_PRIMARY,
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

        ours_p50 = pct(ours.rows[PRIMARY], 50)
        raw_p50 = pct(raw.rows[RAW_PRIMARY], 50)
        tool_p50 = pct(ours.rows[TOOL_MSG], 50)

        c: Concurrent | None = None
        if n_concurrent > 0:  # 0: sections 1+3 only (bench/all.py)
            c = await concurrent(client, n_concurrent, wave, baseline)
            print_concurrent(c, baseline)
        if errors.counts:
            console.print(errors_table(errors.counts))

        print(f"ratio {ours_p50 / raw_p50:.2f}  (sequential p50 submit->run finished / raw p50)")
        print(
            f"ratio to tool message {tool_p50 / raw_p50:.2f}"
            "  (sequential p50 submit->tool message recorded / raw p50)"
        )
        return {
            "sequential": sequential,
            "raw": n_raw,
            "concurrent": n_concurrent,
            "primary": PRIMARY,
            "raw_primary": RAW_PRIMARY,
            "samples_ms": {
                "sequential": ours.rows,
                "raw": raw.rows,
                "concurrent": c.metrics.rows if c else {},
            },
            "handle_result_ms": handle_ms,
            "versions": cli.versions(),
        }
    finally:
        client.close()
        await rt.shutdown()


def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p, from_env=True)
    cli.options(p, sequential=1000, concurrent=1000)
    p.add_argument(
        "--start-wave",
        type=int,
        default=100,
        help="section 2: start sessions in waves of this many, each armed before the next"
        " (0 = all at once)",
    )
    cli.options(p, raw=200, handle_samples=5)
    p.add_argument("--quick", action="store_true", help="smoke run: 50/50/20, 2 handle samples")
    p.add_argument(
        "--json",
        action="store_true",
        help="report on stderr; stdout gets one JSON line with every latency sample in ms",
    )
    args = p.parse_args()
    if args.quick:
        args.sequential, args.concurrent, args.raw, args.handle_samples = 50, 50, 20, 2
    url = database_url(args.database_url, "dbos_agents_bench_submit")
    with cli.report_to_stderr(args.json):
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
        cli.print_json(result)


if __name__ == "__main__":
    main()
