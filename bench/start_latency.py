"""Start and result latency: ``start`` -> first model call, last step -> ``result()``.

One session at a time with an agent that answers at once, interleaved with raw-DBOS floors
making the same trips (``DBOS.start_workflow_async``, no queue; ``DBOSClient.enqueue`` on a
queue polled like ours), so what a start costs over DBOS's own shows. CPU per session is
reported too, so a faster path that only polls harder shows up. Method:
docs/bench-notes/README.md, "start_latency.py".

    python bench/start_latency.py [--database-url URL] [--sessions 200] [--quick] [--json]
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from _lib import cli, internals
from _lib.db import database_url
from _lib.render import show, start_section
from dbos import DBOS, DBOSClient, EnqueueOptions, WorkflowHandle
from rich.console import Console

from dbos_agents import Agent, AgentClient, AgentRuntime, ModelResponse, Settings
from dbos_agents.models import ModelRequest, ScriptedModel

RAW_QUEUE = "bench_raw_queue"
marks: dict[str, float] = {}
"""perf_counter marks written by the model, the raw steps and the event hook."""


def respond(request: ModelRequest) -> str | ModelResponse:
    marks.setdefault("first_model", time.perf_counter())
    return "done"


@DBOS.step(name="bench.start.first")
async def raw_first() -> int:
    marks.setdefault("raw_first", time.perf_counter())
    return 1


@DBOS.step(name="bench.start.last")
async def raw_last() -> int:
    return 2


@DBOS.workflow(name="bench.start.raw")
async def raw_workflow() -> int:
    await raw_first()
    await raw_last()
    marks["raw_last_done"] = time.perf_counter()
    return 3


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def mark_event_done() -> None:
    """The run's outcome is durable: its end committed, the outcome event with it."""
    marks["event_done"] = time.perf_counter()


async def run(url: str, sessions: int, poll: float) -> dict[str, Any]:
    settings = Settings(
        database_url=url, executor_id="bench", queue_polling_interval_sec=poll, log_level="ERROR"
    )
    rt = AgentRuntime([Agent("bench")], ScriptedModel(respond=respond), settings=settings)
    listen = DBOS.listen_queues  # the worker listens to its agents' queues: add the raw one
    DBOS.listen_queues = lambda queues: listen([*queues, RAW_QUEUE])  # type: ignore[method-assign]
    await rt.launch()
    internals.after_run_end(mark_event_done)
    await DBOS.register_queue_async(RAW_QUEUE, polling_interval_sec=poll)
    dbos_client = DBOSClient(
        system_database_url=internals.sqlalchemy_url(url), application_name=settings.app_name
    )
    client = AgentClient(url, settings=settings)
    s: dict[str, list[float]] = {
        k: []
        for k in (
            "ours_start",
            "ours_client_start",
            "raw_start",
            "raw_enqueue",
            "ours_result",
            "raw_result",
        )
    }
    cpu_ms: dict[str, float] = {"ours": 0.0, "ours_client": 0.0, "raw": 0.0, "raw_enqueue": 0.0}

    async def ours(collect: bool) -> None:
        marks.clear()
        c0, t0 = cpu(), time.perf_counter()
        h = await rt.start("bench", "hi")
        out = await h.result()
        t1 = time.perf_counter()
        assert out.status == "completed", out
        if collect:
            cpu_ms["ours"] += (cpu() - c0) * 1000
            s["ours_start"].append((marks["first_model"] - t0) * 1000)
            s["ours_result"].append((t1 - marks["event_done"]) * 1000)

    async def ours_client(collect: bool) -> None:
        marks.clear()
        c0, t0 = cpu(), time.perf_counter()
        sid = await asyncio.to_thread(client.start, "bench", "hi")
        out = await rt.session(sid).result()
        assert out.status == "completed", out
        if collect:
            cpu_ms["ours_client"] += (cpu() - c0) * 1000
            s["ours_client_start"].append((marks["first_model"] - t0) * 1000)

    async def raw(collect: bool) -> None:
        marks.clear()
        c0, t0 = cpu(), time.perf_counter()
        h = await DBOS.start_workflow_async(raw_workflow)
        await h.get_result()
        t1 = time.perf_counter()
        if collect:
            cpu_ms["raw"] += (cpu() - c0) * 1000
            s["raw_start"].append((marks["raw_first"] - t0) * 1000)
            s["raw_result"].append((t1 - marks["raw_last_done"]) * 1000)

    async def raw_enqueue(collect: bool) -> None:
        marks.clear()
        c0, t0 = cpu(), time.perf_counter()
        opts: EnqueueOptions = {"queue_name": RAW_QUEUE, "workflow_name": "bench.start.raw"}
        h: WorkflowHandle[Any] = await asyncio.to_thread(dbos_client.enqueue, opts)
        await (await DBOS.retrieve_workflow_async(h.workflow_id)).get_result(
            polling_interval_sec=0.001
        )
        if collect:
            cpu_ms["raw_enqueue"] += (cpu() - c0) * 1000
            s["raw_enqueue"].append((marks["raw_first"] - t0) * 1000)

    for f in (ours, ours_client, raw, raw_enqueue):
        await f(False)
    for _ in range(sessions):
        for f in (ours, ours_client, raw, raw_enqueue):
            await f(True)
    client.close()
    dbos_client.destroy()
    await rt.shutdown()
    return {
        "sessions": sessions,
        "queue_polling_interval_sec": poll,
        "samples_ms": {k: [round(x, 3) for x in v] for k, v in s.items()},
        "cpu_ms_per_session": {k: round(v / sessions, 3) for k, v in cpu_ms.items()},
        "versions": cli.versions(),
    }


def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p, from_env=True)
    cli.options(p, sessions=200)
    # 0.2 s, not the worker's 1 s default: the raw-DBOS enqueue row waits for this poll.
    p.add_argument("--poll", type=float, default=0.2)
    p.add_argument("--quick", action="store_true", help="smoke run: 20 sessions")
    p.add_argument("--json", action="store_true", help="report on stderr, one JSON line on stdout")
    args = p.parse_args()
    url = database_url(args.database_url, "dbos_agents_bench_start")
    res = asyncio.run(run(url, 20 if args.quick else args.sessions, args.poll))
    show(start_section(res), Console(file=sys.stderr if args.json else sys.stdout))
    if args.json:
        cli.print_json(res)


if __name__ == "__main__":
    main()
