"""Fork latency: ``AgentClient.fork`` of a 100-turn session (issue 30's goal: <= 100 ms p50).

Builds ``--sources`` real sessions of ``--turns`` turns each (a scripted agent: every turn
but the last calls a safe tool whose result is ~300 bytes, so a 100-turn session holds
1 + 100 + 99 messages, 99 ledger rows and 100 usage rows), with a launched runtime; then
forks them ``--forks`` times each at the last turn and at the middle one, and reads
``history(at_turn=...)``, timing each client call end to end (the scope check, the one
copying transaction with the enqueue of the fork's run, its commit). The forks' runs are
enqueued and never run: the runtime is shut down before the forks, so no worker load
skews them.

    python bench/fork.py [--database-url URL] [--turns 100] [--sources 3] [--forks 30] [--json]

Without --database-url it uses the local server at 127.0.0.1:5432 (database
dbos_agents_bench_fork, recreated).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable

from _lib import cli
from _lib.db import database_url
from _lib.render import rich_table
from _lib.stats import pct_rounded
from rich.console import Console

from dbos_agents import (
    Agent,
    AgentClient,
    AgentRuntime,
    ModelResponse,
    Settings,
    ToolContext,
    tool,
)
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls

TURNS = 100


@tool(safe_to_retry=True)
async def lookup(ctx: ToolContext, n: int) -> dict[str, object]:
    """A safe tool with a result the size of a typical lookup."""
    return {"n": n, "note": "x" * 280}


def respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn + 1 < TURNS:
        return calls(call("lookup", {"n": turn}), text=f"turn {turn + 1}: looking it up")
    return "done"


async def build(url: str, sources: int, turns: int) -> list[str]:
    """``sources`` completed sessions of ``turns`` turns each."""
    model = ScriptedModel(respond=respond)
    agent = Agent("long", "Look things up.", tools=[lookup], max_turns=turns + 1)
    settings = Settings(database_url=url, queue_polling_interval_sec=0.05)
    rt = AgentRuntime([agent], model, settings=settings)
    await rt.launch()
    try:
        handles = [await rt.start("long", f"source {i}") for i in range(sources)]
        for h in handles:
            out = await h.result()
            assert out.status == "completed" and out.turns == turns, out
        return [h.session_id for h in handles]
    finally:
        await rt.shutdown()


def timed(fn: Callable[[str], object], session_id: str) -> float:
    t0 = time.perf_counter()
    fn(session_id)
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    global TURNS
    p = cli.parser(__doc__)
    cli.add_database_url(p)
    cli.options(p, turns=100, sources=3, forks=30)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    TURNS = args.turns
    url = database_url(args.database_url, "dbos_agents_bench_fork")
    with cli.report_to_stderr(args.json):
        sids = asyncio.run(build(url, args.sources, args.turns))
        client = AgentClient(url, settings=Settings())
        mid = max(1, args.turns // 2)
        cases: dict[str, Callable[[str], object]] = {
            f"fork at turn {args.turns}": lambda s: client.fork(s, at_turn=args.turns, message="x"),
            f"fork at turn {mid}": lambda s: client.fork(s, at_turn=mid, message="x"),
            f"history at turn {mid}": lambda s: client.history(s, at_turn=mid),
        }
        for fn in cases.values():  # warm the pool and the plans
            timed(fn, sids[0])
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.forks):  # interleaved: the cases see the same load
            for s in sids:
                for name, fn in cases.items():
                    samples[name].append(timed(fn, s))
        client.close()
        table = rich_table(
            f"{args.turns}-turn sessions: client call, end to end (ms)",
            ["operation", "n", "p50", "p90", "max"],
        )
        result = {}
        for name, xs in samples.items():
            row = {
                "n": len(xs),
                "p50": pct_rounded(xs, 50),
                "p90": pct_rounded(xs, 90),
                "max": max(xs),
            }
            result[name] = row
            table.add_row(name, str(row["n"]), *(f"{row[k]:.1f}" for k in ("p50", "p90", "max")))
        Console(file=sys.stdout).print(table)  # stderr under --json (report_to_stderr)
    if args.json:
        cli.print_json({"turns": args.turns, "results": result, "versions": cli.versions()})


if __name__ == "__main__":
    main()
