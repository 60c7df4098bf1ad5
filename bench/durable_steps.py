"""Inner steps of a durable tool against raw DBOS steps, ms per step in one run (the issue's
goal: an inner step <= 1.3x a raw DBOS step, p50).

One process, one DBOS launch (the runtime's), both sides on the same database:

- raw DBOS: an async ``@DBOS.workflow`` awaiting ``--steps`` async ``@DBOS.step`` calls
  of a trivial function (it returns a small dict), each call timed inside the workflow;
- ours: a ``@tool(durable=True)`` awaiting ``--steps`` ``ctx.step`` calls of the same
  function, timed inside the body, once with ``safe_to_retry=True`` and once
  side-effecting (the default): each marks the step ``dispatched``, runs it and records
  its output in ``dbos_agents.tool_steps``.

``--rounds`` rounds (the order of the paths reversed every other round, after one warm-up
round), samples pooled per path. A last, untimed pass counts the Postgres round trips per
step: every query and command psycopg sends and waits for (BEGIN and COMMIT included)
while a step is awaited, in the awaiting task and the threads it hands work to. DBOS runs
as the runtime configures it (its engine without pool pre-ping).

    python bench/durable_steps.py [--database-url URL] [--steps 200] [--rounds 5]
        [--count-steps 50] [--note TEXT] [--json]

``--database-url`` is any database of the Postgres server (default: the local one); the
bench creates a fresh database there (dbos_agents_bench_durable_steps) and drops it at the
end.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from _lib import cli
from _lib.db import LOCAL_SERVER
from _lib.procfs import loadavg
from _lib.stats import pct_rounded
from _lib.tables import rich_table
from dbos import DBOS
from machine import busy_note
from rich.console import Console

from dbos_agents import Agent, AgentRuntime, ModelResponse, Settings, ToolContext, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from dbos_agents.testing import create_fresh_database, drop_database

DB_NAME = "dbos_agents_bench_durable_steps"
GOAL = 1.3
RAW = "raw DBOS step"
SAFE = "ctx.step, safe"
SIDE = "ctx.step, side-effecting"
PATHS = (RAW, SAFE, SIDE)


@dataclass(frozen=True)
class Phase:
    """One path's steps in one workflow (or one tool body)."""

    ms: list[float]
    cpu_ms: float
    """The process's CPU time over the steps (every thread), ms."""
    round_trips: int


_phases: list[Phase] = []
_round_trips: ContextVar[list[int] | None] = ContextVar("bench_round_trips", default=None)


async def payload(i: int) -> dict[str, object]:
    """The trivial function both sides run as a step."""
    return {"i": i, "ok": True, "note": "a small result"}


raw_step = DBOS.step(name="bench.durable_steps.payload")(payload)


@contextmanager
def measured(n: int, count: bool) -> Iterator[list[float]]:
    """Collect a phase's per-step ms; on exit record it (with its round trips if ``count``)."""
    ms: list[float] = []
    box = [0]
    token = _round_trips.set(box if count else None)
    cpu0 = time.process_time()
    try:
        yield ms
    finally:
        cpu = (time.process_time() - cpu0) * 1000
        _round_trips.reset(token)
    assert len(ms) == n, (len(ms), n)
    _phases.append(Phase(ms, cpu, box[0]))


@DBOS.workflow(name="bench.durable_steps.raw")
async def raw_steps(n: int, count: bool) -> int:
    with measured(n, count) as ms:
        for i in range(n):
            t0 = time.perf_counter()
            await raw_step(i)
            ms.append((time.perf_counter() - t0) * 1000)
    return n


@tool(durable=True)
async def inner_steps(ctx: ToolContext, n: int, safe: bool, count: bool) -> int:
    """Run ``n`` inner steps of ``payload``, each timed."""
    with measured(n, count) as ms:
        for i in range(n):
            t0 = time.perf_counter()
            await ctx.step(f"step-{i}", payload, i, safe_to_retry=safe)
            ms.append((time.perf_counter() - t0) * 1000)
    return n


def respond(request: ModelRequest) -> str | ModelResponse:
    if any(m.role == "assistant" for m in request.messages):
        return "done"
    job = json.loads(next(m.content or "{}" for m in request.messages if m.role == "user"))
    return calls(call("inner_steps", job))


# ---------------------------------------------------------------------------- round trips


def count_round_trips() -> None:
    """From now on, count psycopg's round trips (each ``execute`` generator: a query and
    its results, or BEGIN/COMMIT) made in a context where ``_round_trips`` is set.

    Installed only for the untimed counting pass: the wrapper costs a little per query.
    Pipelined statements (not on either path measured here) are not counted."""
    import psycopg._cursor_base as cursor_base
    import psycopg.generators as generators

    original = generators.execute

    def counted(pgconn: Any) -> Generator[Any, Any, Any]:
        box = _round_trips.get()
        if box is not None:
            box[0] += 1
        return (yield from original(pgconn))

    cursor_base.execute = counted  # type: ignore[attr-defined]
    generators.execute = counted


# ---------------------------------------------------------------------------- running


async def run_path(rt: AgentRuntime, path: str, n: int, count: bool = False) -> Phase:
    if path == RAW:
        await (await DBOS.start_workflow_async(raw_steps, n, count)).get_result()
    else:
        job = {"n": n, "safe": path == SAFE, "count": count}
        out = await (await rt.start("bench", json.dumps(job))).result()
        assert out.status == "completed", out
    (phase,) = _phases
    _phases.clear()
    return phase


async def run(url: str, steps: int, rounds: int, count_steps: int) -> dict[str, Any]:
    settings = Settings(database_url=url, executor_id="bench", log_level="ERROR")
    agent = Agent("bench", tools=[inner_steps], max_turns=3)
    rt = AgentRuntime([agent], ScriptedModel(respond=respond), settings=settings)
    await rt.launch()
    try:
        for path in PATHS:  # warm-up: pools, prepared statements, the adapters
            await run_path(rt, path, min(steps, 50))
        per_round: list[dict[str, Phase]] = []
        for r in range(rounds):
            order = PATHS if r % 2 == 0 else PATHS[::-1]
            per_round.append({path: await run_path(rt, path, steps) for path in order})
        count_round_trips()
        counted = {path: await run_path(rt, path, count_steps, count=True) for path in PATHS}
    finally:
        await rt.shutdown()
    return summarize(per_round, counted, steps)


def summarize(
    per_round: list[dict[str, Phase]], counted: dict[str, Phase], steps: int
) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    for path in PATHS:
        ms = [x for rnd in per_round for x in rnd[path].ms]
        rows[path] = {
            "n": len(ms),
            "p50": pct_rounded(ms, 50),
            "p90": pct_rounded(ms, 90),
            "mean": statistics.fmean(ms),
            "cpu_ms_per_step": statistics.median(rnd[path].cpu_ms / steps for rnd in per_round),
            "round_trips_per_step": counted[path].round_trips / len(counted[path].ms),
            "rounds_p50": [pct_rounded(rnd[path].ms, 50) for rnd in per_round],
        }
    raw = rows[RAW]
    for path in (SAFE, SIDE):
        row = rows[path]
        row["ratio_p50"] = row["p50"] / raw["p50"]
        row["ratio_p90"] = row["p90"] / raw["p90"]
        row["rounds_ratio_p50"] = [
            o / b for o, b in zip(row["rounds_p50"], raw["rounds_p50"], strict=True)
        ]
    return {"steps": steps, "rounds": len(per_round), "goal_ratio_p50": GOAL, "rows": rows}


# ---------------------------------------------------------------------------- report


def print_report(result: dict[str, Any], note: str | None) -> None:
    rows = result["rows"]
    steps, rounds = result["steps"], result["rounds"]
    table = rich_table(
        f"ms per step ({rounds} rounds x {steps} steps per path, pooled)",
        ["path", "n", "p50", "p90", "mean", "p50/raw", "p90/raw", "CPU ms", "trips"],
    )
    for path in PATHS:
        row = rows[path]
        ratios = (
            ("1.00", "1.00")
            if path == RAW
            else (f"{row['ratio_p50']:.2f}", f"{row['ratio_p90']:.2f}")
        )
        table.add_row(
            path,
            str(row["n"]),
            *(f"{row[k]:.3f}" for k in ("p50", "p90", "mean")),
            *ratios,
            f"{row['cpu_ms_per_step']:.3f}",
            f"{row['round_trips_per_step']:.1f}",
        )
    console = Console(file=sys.stdout, width=110)  # stderr under --json (report_to_stderr)
    console.print(table)
    by_round = rich_table(
        "p50 ms per step, round by round", ["path", *map(str, range(1, rounds + 1))]
    )
    for path in PATHS:
        by_round.add_row(path, *(f"{x:.3f}" for x in rows[path]["rounds_p50"]))
    for path in (SAFE, SIDE):
        by_round.add_row(f"{path} / raw", *(f"{x:.2f}" for x in rows[path]["rounds_ratio_p50"]))
    console.print(by_round)
    print(
        f"{RAW}: an async @DBOS.step awaited in an async @DBOS.workflow. ctx.step: an inner"
        " step of a durable tool, safe_to_retry=True or the default (side-effecting).\n"
        "CPU ms: the process's CPU time per step (every thread), median of the rounds."
        " trips: Postgres round trips per step, counted in a separate untimed pass."
    )
    for path in (SAFE, SIDE):
        ratio = rows[path]["ratio_p50"]
        verdict = "met" if ratio <= GOAL else "NOT met"
        print(f"goal: {path} <= {GOAL}x raw p50: {ratio:.2f}x, {verdict}")
    if note:
        print(f"note: {note}")


def main() -> None:
    p = cli.parser(__doc__)
    p.add_argument(
        "--database-url",
        default=LOCAL_SERVER,
        help="any database of the Postgres server; a fresh one is created there and dropped",
    )
    cli.options(p, steps=200, rounds=5, count_steps=50)
    p.add_argument("--note", help="a note for the report, e.g. what else the machine was doing")
    p.add_argument("--json", action="store_true", help="also print one JSON line (stdout)")
    args = p.parse_args()
    if min(args.steps, args.rounds, args.count_steps) < 1:
        p.error("--steps, --rounds and --count-steps must be at least 1")
    note = busy_note(loadavg(), args.note)
    url = create_fresh_database(args.database_url, DB_NAME)
    try:
        with cli.report_to_stderr(args.json):
            result = asyncio.run(run(url, args.steps, args.rounds, args.count_steps))
            print_report(result, note)
    finally:
        drop_database(args.database_url, DB_NAME)
    if args.json:
        cli.print_json({**result, "note": note, "versions": cli.versions()})


if __name__ == "__main__":
    main()
