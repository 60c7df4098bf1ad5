"""Per-turn overhead of the durable agent loop against the raw-DBOS floor, in one run.

One "turn" is one model step plus one side-effecting tool call (ScriptedModel, no network).
The floor is a raw DBOS async workflow doing two async steps per iteration. Both loop K
times inside one workflow, so start/queue latency is amortized and the per-turn cost is
what is compared. The worker runs with default settings (a 0.2 s queue poll as the
safety net; starts are claimed on notification), as users run it.

    python bench/turn_overhead.py [--database-url URL] [--turns 20] [--sessions 10] [--json]

Without --database-url it uses DBOS_AGENTS_DATABASE_URL, else the local server at
127.0.0.1:5432 (database dbos_agents_bench, recreated). ``--json`` prints one JSON line
(every path's per-session samples, median and p90, plus versions) instead of the table, so
bench/all.py can run this in its own process (DBOS is a process singleton) and plot the
distributions.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _lib import cli, internals
from _lib.db import database_url
from _lib.labels import MIX, OURS, RAW
from _lib.tables import rich_table
from dbos import DBOS
from peers._common import p90
from rich.console import Console

from dbos_agents import Agent, AgentRuntime, ModelResponse, Settings, ToolContext, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls

TURNS = 20  # set by --turns before the runtime launches; respond() reads it


@tool
async def charge(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    return {"charged": cents, "key": ctx.idempotency_key}


def respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn < TURNS:
        return calls(call("charge", {"order_id": f"o{turn}", "cents": 100}))
    return "done"


@DBOS.step(name="bench.raw_model")
async def raw_model(i: int) -> dict[str, object]:
    return {"tool_calls": [{"name": "charge", "arguments": {"order_id": f"o{i}", "cents": 100}}]}


@DBOS.step(name="bench.raw_tool")
async def raw_tool(i: int) -> dict[str, object]:
    return {"charged": 100, "i": i}


_RAW_TX: list[Callable[[int], Awaitable[int]]] = []


@DBOS.workflow(name="bench.raw_mix")
async def raw_mix(turns: int) -> int:
    """The design's irreducible mix per turn: 2 steps + 2 datasource transactions."""
    (tx,) = _RAW_TX
    for i in range(turns):
        await raw_model(i)
        await tx(i)
        await raw_tool(i)
        await tx(i)
    return turns


@DBOS.workflow(name="bench.raw_loop")
async def raw_loop(turns: int) -> int:
    for i in range(turns):
        await raw_model(i)
        await raw_tool(i)
    return turns


async def run(url: str, sessions: int) -> dict[str, list[float]]:
    """Per-session ms per turn of each path, keyed by path label (RAW, MIX, OURS)."""
    # Replies not streamed: the peers this row is compared with do not stream theirs.
    # Streaming's own cost, and ours against LangGraph both streaming: bench/streaming.py.
    settings = Settings(
        database_url=url, executor_id="bench", log_level="ERROR", stream_replies=False
    )
    rt = AgentRuntime(
        [Agent("bench", tools=[charge], max_turns=TURNS + 1)],
        ScriptedModel(respond=respond),
        settings=settings,
    )
    await rt.launch()
    _RAW_TX.append(internals.raw_datasource_tx())
    # Warm up both paths.
    await (await rt.start("bench", "warm")).result()
    await (await DBOS.start_workflow_async(raw_loop, TURNS)).get_result()

    await (await DBOS.start_workflow_async(raw_mix, TURNS)).get_result()

    raw_ms: list[float] = []
    mix_ms: list[float] = []
    ours_ms: list[float] = []
    for _ in range(sessions):  # interleave so drift hits all paths equally
        t0 = time.perf_counter()
        await (await DBOS.start_workflow_async(raw_loop, TURNS)).get_result()
        raw_ms.append((time.perf_counter() - t0) * 1000 / TURNS)
        t0 = time.perf_counter()
        await (await DBOS.start_workflow_async(raw_mix, TURNS)).get_result()
        mix_ms.append((time.perf_counter() - t0) * 1000 / TURNS)
        t0 = time.perf_counter()
        out = await (await rt.start("bench", "go")).result()
        ours_ms.append((time.perf_counter() - t0) * 1000 / (TURNS + 1))
        assert out.status == "completed" and out.turns == TURNS + 1, out
    await rt.shutdown()
    return {RAW: raw_ms, MIX: mix_ms, OURS: ours_ms}


def print_table(samples: dict[str, list[float]], sessions: int) -> None:
    """The human-readable report (the default output)."""
    raw_ms, mix_ms, ours_ms = samples[RAW], samples[MIX], samples[OURS]
    raw, mix, ours = (statistics.median(x) for x in (raw_ms, mix_ms, ours_ms))
    table = rich_table(
        f"ms per turn (median of {sessions} sessions x {TURNS} turns)",
        ("path", "median", "min", "max"),
    )
    table.add_row(RAW, f"{raw:.2f}", f"{min(raw_ms):.2f}", f"{max(raw_ms):.2f}")
    table.add_row(
        MIX,
        f"{mix:.2f}",
        f"{min(mix_ms):.2f}",
        f"{max(mix_ms):.2f}",
    )
    table.add_row(
        OURS,
        f"{ours:.2f}",
        f"{min(ours_ms):.2f}",
        f"{max(ours_ms):.2f}",
    )
    Console().print(table)
    print(f"ratio {ours / raw:.2f}  (against 2 raw steps, the issue's floor)")
    print(f"ratio vs same-mix floor {ours / mix:.2f}  (our own code on top of DBOS)")


def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p, from_env=True)
    cli.options(p, sessions=10)
    p.add_argument("--turns", type=int, default=TURNS, help="tool-calling turns per session")
    p.add_argument(
        "--json", action="store_true", help="print one JSON line with the samples instead"
    )
    args = p.parse_args()
    _set_turns(args.turns)
    url = database_url(args.database_url, "dbos_agents_bench")
    samples = asyncio.run(run(url, args.sessions))
    if args.json:
        cli.print_json(as_json(samples, args.sessions))
    else:
        print_table(samples, args.sessions)


def _set_turns(turns: int) -> None:
    """respond() and the raw workflows read the module-level TURNS."""
    global TURNS
    TURNS = turns


def as_json(samples: dict[str, list[float]], sessions: int) -> dict[str, Any]:
    """One result object: rows shaped like bench/peers/_common.emit's, plus the samples."""
    divisors = {RAW: TURNS, MIX: TURNS, OURS: TURNS + 1}
    return {
        "sessions": sessions,
        "turns": TURNS,
        "versions": cli.versions(),
        "rows": [
            {
                "system": label,
                "ms_per_turn_median": round(statistics.median(xs), 3),
                "ms_per_turn_p90": round(p90(xs), 3),
                "ms_per_turn_min": round(min(xs), 3),
                "ms_per_turn_max": round(max(xs), 3),
                "samples_ms_per_turn": [round(x, 3) for x in xs],
                "divisor": divisors[label],
                "floor": label == RAW,
            }
            for label, xs in samples.items()
        ],
    }


if __name__ == "__main__":
    main()
