"""Client-tool submit -> resume latency against DBOS's own ``send`` -> ``recv``.

A submit should cost little more than DBOS's ``send`` -> ``recv``, so the floor (a workflow
in ``DBOS.recv_async`` woken by ``DBOSClient.send``) is measured in the same process,
interleaved with ours. "Resumed" is the run's outcome row (``workflow_status.updated_at``),
read after the fact, so no poll sits on the critical path. Many sessions waiting at once:
bench/parked.py. Definitions and findings: docs/bench-notes/submit_latency.md.

    python bench/submit_latency.py [--database-url URL] [--sequential 1000] [--raw 200]
        [--handle-samples 5] [--quick] [--json]
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
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
from _lib.procfs import Meter
from _lib.render import show, submit_section
from _lib.stats import pct as nearest
from _lib.timing import finish_times, timed_submit, tool_message_times, wait_armed
from _lib.timing import wait_pending_armed as _wait_pending_armed
from dbos import DBOS, WorkflowHandleAsync
from rich.console import Console

from dbos_agents import AgentRuntime
from dbos_agents.client import AgentClient

RAW_TOPIC = "bench.raw"
FINISH_POLL_SEC = 0.02  # after t0: coarser, so polling steals less CPU from the run

console = Console()


@dataclass
class Metrics:
    rows: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value_ms: float) -> None:
        self.rows.setdefault(name, []).append(value_ms)


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


async def run(url: str, sequential: int, n_raw: int, handles: int) -> dict[str, Any]:
    """Print the report; return every latency sample (ms) for ``--json``."""
    settings = asker_settings(database_url=url, executor_id="bench-submit")
    rt = asker_runtime(settings, timedelta(minutes=30))
    await rt.launch()
    client = AgentClient(url, settings=settings)
    try:
        # Warm up both paths.
        await one_session(rt, client, Metrics())
        await one_raw(client, Metrics())

        ours, raw = Metrics(), Metrics()
        every = max(1, sequential // max(1, n_raw))
        cpu = Meter({"worker": os.getpid()})
        for i in range(max(sequential, n_raw)):
            if i % every == 0 and len(raw.rows.get(RAW_CALL, [])) < n_raw:
                await one_raw(client, raw)
            if i < sequential:
                await one_session(rt, client, ours)
        wall, worker_cpu = cpu.wall, cpu.read()["worker_cpu_s"]
        while len(raw.rows.get(RAW_CALL, [])) < n_raw:
            await one_raw(client, raw)
        handle_ms = await handle_result_samples(rt, client, handles)

        caller = {k: nearest(m.rows[k], 50) for m, k in ((ours, CALLER_SAW), (raw, RAW_CALLER_SAW))}
        console.print(
            f"p50 {CALLER_SAW}: {caller[CALLER_SAW]:.1f} ms; {RAW_CALLER_SAW}:"
            f" {caller[RAW_CALLER_SAW]:.1f} ms. await handle.result() right after a submit (DBOS"
            f" polls results every 1 s): {', '.join(f'{x:.0f}' for x in handle_ms)} ms. Per"
            f" sequential session incl. start, dequeue and polling:"
            f" {wall / max(1, sequential) * 1000:.0f} ms wall,"
            f" {worker_cpu / max(1, sequential) * 1000:.0f} ms worker CPU."
        )
        result = {
            "sequential": sequential,
            "raw": n_raw,
            "primary": PRIMARY,
            "raw_primary": RAW_PRIMARY,
            "samples_ms": {"sequential": ours.rows, "raw": raw.rows},
            "handle_result_ms": handle_ms,
            "versions": cli.versions(),
        }
        show(submit_section(result), console)
        return result
    finally:
        client.close()
        await rt.shutdown()


def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p, from_env=True)
    cli.options(p, sequential=1000, raw=200, handle_samples=5)
    p.add_argument("--quick", action="store_true", help="smoke run: 50/20, 2 handle samples")
    p.add_argument(
        "--json",
        action="store_true",
        help="report on stderr; stdout gets one JSON line with every latency sample in ms",
    )
    args = p.parse_args()
    if args.quick:
        args.sequential, args.raw, args.handle_samples = 50, 20, 2
    url = database_url(args.database_url, "dbos_agents_bench_submit")
    with cli.report_to_stderr(args.json):
        result = asyncio.run(run(url, args.sequential, args.raw, args.handle_samples))
    if args.json:
        cli.print_json(result)


if __name__ == "__main__":
    main()
